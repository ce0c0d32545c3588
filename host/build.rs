//! Builds `engine.wasm` from the `cvm-engine` crate so that `cargo build` embeds it with no
//! manual step.
//!
//! The engine is compiled by a nested `cargo rustc --crate-type cdylib` for
//! `wasm32-unknown-unknown` with the workspace's `wasm` profile, into its own target directory
//! (so it never waits on the outer build's lock). Flags meant for the host build (RUSTFLAGS,
//! clippy's wrapper, coverage or sanitizer flags) are removed: the module must be the same bytes
//! whoever builds it. `CVM_ENGINE_WASM=<path>` uses a prebuilt module instead.

use std::env;
use std::error::Error;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() -> Result<(), Box<dyn Error>> {
    let manifest_dir =
        PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").ok_or("CARGO_MANIFEST_DIR unset")?);
    let workspace = manifest_dir
        .parent()
        .ok_or("host crate has no parent directory")?;
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
        .args([
            "--target",
            "wasm32-unknown-unknown",
            "--profile",
            "wasm",
            "--crate-type",
            "cdylib",
        ])
        .arg("--target-dir")
        .arg(&target_dir);
    for variable in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "CARGO_PROFILE_RELEASE_DEBUG",
        "RUSTDOCFLAGS",
    ] {
        command.env_remove(variable);
    }
    // SIMD128 is part of the consensus build: the kernels use its deterministic integer
    // instructions (never relaxed SIMD, which the wasmtime configuration also disables).
    command.env("CARGO_ENCODED_RUSTFLAGS", "-Ctarget-feature=+simd128");
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
