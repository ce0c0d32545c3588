//! Builds `engine.wasm` from the `cvm-engine` crate so that `cargo build` embeds it with no
//! manual step.
//!
//! The engine is compiled by a nested `cargo rustc --crate-type cdylib` for
//! `wasm32-unknown-unknown` with the workspace's `wasm` profile, into its own target directory
//! (so it never waits on the outer build's lock). The module is a consensus artifact (nodes
//! compare its SHA3, which `host/runtime/engine.wasm.sha3` pins), so it must be the same bytes whoever
//! builds it, wherever:
//! - every setting that the builder's environment could slip in is removed: RUSTFLAGS and its
//!   variants, wrappers (clippy's, sccache), coverage or sanitizer flags, `CARGO_PROFILE_*` and
//!   `CARGO_BUILD_*` overrides;
//! - every absolute path the compiler can see is remapped to a fixed name: the workspace to
//!   `/cvm`, the cargo home (registry and git sources) to `/cargo`; the standard library's paths
//!   are already `/rustc/<commit>/…`, the same for every builder of the pinned toolchain.
//!
//! When the toolchain lacks the `wasm32-unknown-unknown` target (rustup installs the targets of
//! `rust-toolchain.toml` by itself, but not with `RUSTUP_AUTO_INSTALL=0`), it is added with
//! rustup before the engine is compiled; without rustup, or if that fails, the build stops with
//! one line naming the command to run. `CVM_ENGINE_WASM=<path>` uses a prebuilt module instead.

use std::env;
use std::error::Error;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const WASM_TARGET: &str = "wasm32-unknown-unknown";

fn main() -> Result<(), Box<dyn Error>> {
    let manifest_dir =
        PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").ok_or("CARGO_MANIFEST_DIR unset")?);
    let workspace = manifest_dir
        .parent()
        .and_then(Path::parent)
        .ok_or("the runtime crate is not at host/runtime in the workspace")?;
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").ok_or("OUT_DIR unset")?);
    let embedded = out_dir.join("engine.wasm");

    println!("cargo:rerun-if-env-changed=CVM_ENGINE_WASM");
    if let Some(prebuilt) = env::var_os("CVM_ENGINE_WASM") {
        println!("cargo:rerun-if-changed={}", Path::new(&prebuilt).display());
        std::fs::copy(&prebuilt, &embedded)?;
        println!(
            "cargo:rustc-env=CVM_ENGINE_WASM_PATH={}",
            embedded.display()
        );
        return Ok(());
    }

    for input in [
        "engine/src",
        "engine/Cargo.toml",
        "gas/src",
        "gas/Cargo.toml",
        "Cargo.toml",
        "Cargo.lock",
        "rust-toolchain.toml",
    ] {
        println!("cargo:rerun-if-changed={}", workspace.join(input).display());
    }

    let rustc = env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    ensure_wasm_target(&rustc)?;

    let target_dir = env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|dir| {
            if dir.is_relative() {
                workspace.join(dir)
            } else {
                dir
            }
        })
        .unwrap_or_else(|| workspace.join("target"))
        .join("engine-wasm");
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .current_dir(workspace)
        .args(["rustc", "--package", "cvm-engine", "--lib", "--locked"])
        .args(["--target", WASM_TARGET, "--profile", "wasm"])
        .args(["--crate-type", "cdylib"])
        .arg("--target-dir")
        .arg(&target_dir);
    for (variable, _) in env::vars_os() {
        let Some(name) = variable.to_str() else {
            continue;
        };
        let builder_setting = [
            "CARGO_PROFILE_",
            "CARGO_BUILD_",
            "CARGO_TARGET_",
            "CARGO_ENCODED_RUSTFLAGS",
            "RUSTFLAGS",
            "RUSTDOCFLAGS",
            "RUSTC_WRAPPER",
            "RUSTC_WORKSPACE_WRAPPER",
            "CARGO_INCREMENTAL",
        ]
        .iter()
        .any(|prefix| name.starts_with(prefix));
        if builder_setting {
            command.env_remove(&variable);
        }
    }
    // SIMD128 is part of the consensus build: the kernels use its deterministic integer
    // instructions (never relaxed SIMD, which the wasmtime configuration also disables).
    let mut flags = vec![OsString::from("-Ctarget-feature=+simd128")];
    for (from, to) in [
        (Some(workspace.to_path_buf()), "/cvm"),
        (cargo_home(), "/cargo"),
    ] {
        if let Some(from) = from {
            let mut remap = OsString::from("--remap-path-prefix=");
            remap.push(from.as_os_str());
            remap.push("=");
            remap.push(to);
            flags.push(remap);
        }
    }
    command.env(
        "CARGO_ENCODED_RUSTFLAGS",
        flags.join(&OsString::from("\x1f")),
    );
    let status = command.status()?;
    if !status.success() {
        return Err(
            format!("building engine.wasm failed ({status}); see the cargo output above").into(),
        );
    }
    let built = target_dir.join("wasm32-unknown-unknown/wasm/cvm_engine.wasm");
    std::fs::copy(&built, &embedded)
        .map_err(|err| format!("cannot copy {}: {err}", built.display()))?;
    println!(
        "cargo:rustc-env=CVM_ENGINE_WASM_PATH={}",
        embedded.display()
    );
    Ok(())
}

/// The cargo home the registry and git sources are unpacked in: `CARGO_HOME`, else
/// `$HOME/.cargo`. Both spellings are canonicalized, since rustc sees the resolved path.
fn cargo_home() -> Option<PathBuf> {
    let home = env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| env::var_os("HOME").map(|home| PathBuf::from(home).join(".cargo")))?;
    Some(home.canonicalize().unwrap_or(home))
}

/// Makes sure the toolchain building this crate can compile for wasm32: its standard library
/// for the target is present, or rustup adds it now (about ten seconds). Fails at once, with
/// the command to run, when neither holds.
fn ensure_wasm_target(rustc: &OsString) -> Result<(), Box<dyn Error>> {
    if wasm_target_installed(rustc) {
        return Ok(());
    }
    // rustup's proxies name the toolchain they run in RUSTUP_TOOLCHAIN (here the one that
    // rust-toolchain.toml pins).
    let toolchain = env::var("RUSTUP_TOOLCHAIN").unwrap_or_else(|_| "1.95.0".into());
    let add = format!("rustup target add --toolchain {toolchain} {WASM_TARGET}");
    println!(
        "cargo:warning=engine.wasm needs the Rust target {WASM_TARGET}, which this toolchain \
         lacks; installing it: {add}"
    );
    let added = Command::new("rustup")
        .args(["target", "add", "--toolchain", &toolchain, WASM_TARGET])
        .stdout(Stdio::null())
        .status();
    match added {
        Ok(status) if status.success() && wasm_target_installed(rustc) => Ok(()),
        Ok(status) => Err(format!(
            "the Rust target {WASM_TARGET} is missing and `{add}` failed ({status}); \
             run it yourself, then build again"
        )
        .into()),
        Err(err) => Err(format!(
            "the Rust target {WASM_TARGET} is missing and rustup could not be run ({err}); \
             install the target for this toolchain (with rustup: `{add}`), then build again"
        )
        .into()),
    }
}

/// Whether `rustc` has a standard library for wasm32: its target library directory holds
/// `libcore`.
fn wasm_target_installed(rustc: &OsString) -> bool {
    let Ok(output) = Command::new(rustc)
        .args(["--print", "target-libdir", "--target", WASM_TARGET])
        .output()
    else {
        return false;
    };
    let libdir = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
    output.status.success()
        && std::fs::read_dir(&libdir).is_ok_and(|entries| {
            entries.flatten().any(|entry| {
                entry
                    .file_name()
                    .to_str()
                    .is_some_and(|name| name.starts_with("libcore-") && name.ends_with(".rlib"))
            })
        })
}
