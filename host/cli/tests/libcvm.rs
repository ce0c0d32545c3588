//! `libcvm_runtime.so` (host/libcvm) as the Cortex node loads it: a C program and a Go test
//! (cgo) open it with `dlopen`/`dlsym` and check every CVM-format model under `fixtures/`, and a
//! variant, against what `cvm estimate --json` and `cvm run --output-format cvm` report; then
//! the return-code class of each error family, and (the C program) 4 threads × 200 runs over
//! the models with gas estimation interleaved.
//!
//! The library is the one `cargo test --workspace` (or `cargo build -p cvm-libcvm`) built into
//! this target directory. The Go test needs `go` (Debian's `golang-go`, which `.ci/run`
//! installs): without it, it is skipped with a note, unless `CVM_REQUIRE_GO=1` (set by CI).
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test helpers fail loudly

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The library, built now by the cargo running this test (`cargo test` builds a cdylib only
/// when asked, and a library left by an earlier build may be stale): `target/<profile>/`, next
/// to this test's `deps/` directory.
fn library() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let exe = std::env::current_exe().unwrap();
            let profile_dir = exe.parent().unwrap().parent().unwrap().to_path_buf();
            let target_dir = profile_dir.parent().unwrap();
            let mut build = Command::new(env!("CARGO"));
            build
                .current_dir(workspace())
                .args(["build", "--locked", "-p", "cvm-libcvm", "--target-dir"])
                .arg(target_dir);
            if profile_dir
                .file_name()
                .is_some_and(|name| name == "release")
            {
                build.arg("--release");
            }
            let status = build.status().unwrap();
            assert!(
                status.success(),
                "cargo build -p cvm-libcvm failed: {status}"
            );
            let library = profile_dir.join("libcvm_runtime.so");
            assert!(library.exists(), "{} was not built", library.display());
            library
        })
        .clone()
}

fn scratch() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("libcvm");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn cvm(args: &[&str]) -> std::process::Output {
    let output = Command::new(env!("CARGO_BIN_EXE_cvm"))
        .args(args)
        .env("CVM_CACHE_DIR", scratch().join("cache"))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "cvm {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// Every directory under `fixtures/` holding a CVM model (`symbol` and `params`).
fn cvm_models(dir: &Path, found: &mut Vec<PathBuf>) {
    if dir.join("symbol").exists() && dir.join("params").exists() {
        found.push(dir.to_path_buf());
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_dir())
        .collect();
    entries.sort();
    for entry in entries {
        cvm_models(&entry, found);
    }
}

/// One expectations line: the model's files, an input, and what the `cvm` tool reports.
fn expectation(model: &Path, input: &Path) -> String {
    let dir = model.to_str().unwrap();
    let estimate: Value =
        serde_json::from_slice(&cvm(&["estimate", dir, "--json"]).stdout).unwrap();
    let contract = &estimate["cvm"];
    let inspect = String::from_utf8(cvm(&["inspect", dir]).stdout).unwrap();
    let header = inspect.lines().next().unwrap();
    // "CVM model cvm_1.0.0, post-processing "argmax", legacy gas 123"
    let version = header.split(' ').nth(2).unwrap().trim_end_matches(',');
    let method = header.split('"').nth(1).unwrap();
    let out = scratch().join("out.bin");
    cvm(&[
        "run",
        dir,
        "--input-format",
        "cvm",
        "--input",
        input.to_str().unwrap(),
        "--output-format",
        "cvm",
        "--output",
        out.to_str().unwrap(),
    ]);
    let output = std::fs::read(&out).unwrap();
    assert_eq!(
        output.len() as u64,
        contract["output_length"].as_u64().unwrap()
    );
    format!(
        "{} {} {} {} {} {} {} {} {} {} {} {}\n",
        model.join("symbol").display(),
        model.join("params").display(),
        input.display(),
        contract["input_length"],
        contract["output_length"],
        contract["input_type_size"],
        contract["output_type_size"],
        contract["storage_size"],
        estimate["legacy_gas"],
        version,
        if method.is_empty() { "-" } else { method },
        cvm_runtime::hash::hex(&output),
    )
}

/// The expectations file: every CVM model under `fixtures/` on each of its `.cvm` inputs, and
/// `cvm_dense` with argmax post-processing as a third model.
fn expectations() -> PathBuf {
    let mut models = Vec::new();
    cvm_models(&workspace().join("fixtures"), &mut models);
    let names: Vec<_> = models
        .iter()
        .map(|m| m.file_name().unwrap().to_owned())
        .collect();
    assert!(names.contains(&"digits".into()) && names.contains(&"cvm_dense".into()));

    let variant = scratch().join("cvm_dense_argmax");
    std::fs::create_dir_all(&variant).unwrap();
    let dense = workspace().join("fixtures/models/cvm_dense");
    let symbol = std::fs::read_to_string(dense.join("symbol")).unwrap();
    let argmax = symbol.replacen('{', "{\"postprocess\": \"argmax\",", 1);
    std::fs::write(variant.join("symbol"), argmax).unwrap();
    std::fs::copy(dense.join("params"), variant.join("params")).unwrap();
    std::fs::copy(dense.join("input.cvm"), variant.join("input.cvm")).unwrap();
    models.insert(2.min(models.len()), variant);

    let mut lines = Vec::new();
    for model in &models {
        let mut inputs: Vec<PathBuf> = std::fs::read_dir(model)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.extension().is_some_and(|ext| ext == "cvm"))
            .collect();
        inputs.sort();
        assert!(!inputs.is_empty(), "{} has no .cvm input", model.display());
        // The first input of every model first, so that the first lines are distinct models.
        for (index, input) in inputs.iter().enumerate() {
            lines.push((index, expectation(model, input)));
        }
    }
    lines.sort_by_key(|(index, _)| *index);
    let path = scratch().join("expectations");
    std::fs::write(
        &path,
        lines.into_iter().map(|(_, line)| line).collect::<String>(),
    )
    .unwrap();
    path
}

#[test]
fn c_program_through_dlopen() {
    let expectations = expectations();
    let binary = scratch().join("libcvm_test");
    let source = workspace().join("host/libcvm/tests/c/libcvm_test.c");
    let compiled = Command::new("cc")
        .args([
            "-std=c11",
            "-O1",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-D_POSIX_C_SOURCE=200809L",
        ])
        .arg("-I")
        .arg(workspace().join("host/libcvm/include"))
        .arg(&source)
        .arg("-o")
        .arg(&binary)
        .args(["-ldl", "-lpthread"])
        .status()
        .unwrap();
    assert!(compiled.success(), "compiling {}", source.display());
    let run = Command::new(&binary)
        .arg(library())
        .arg(&expectations)
        .env("CVM_CACHE_DIR", scratch().join("cache"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    println!("{stdout}");
    assert!(
        run.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&run.stderr)
    );
}

#[test]
fn go_test_through_cgo_and_dlopen() {
    if Command::new("go").arg("version").output().is_err() {
        assert!(
            std::env::var_os("CVM_REQUIRE_GO").is_none(),
            "CVM_REQUIRE_GO is set but `go` is not installed"
        );
        eprintln!("skipped: `go` is not installed (apt-get install golang-go)");
        return;
    }
    let expectations = expectations();
    let go_dir = workspace().join("host/libcvm/tests/go");
    let run = Command::new("go")
        .args(["test", "-count=1", "./..."])
        .current_dir(&go_dir)
        .env("LIBCVM_PATH", library().canonicalize().unwrap())
        .env("LIBCVM_EXPECTATIONS", &expectations)
        .env("CVM_CACHE_DIR", scratch().join("cache"))
        .env("GOCACHE", scratch().join("go-cache"))
        .env("GOPATH", scratch().join("go-path"))
        .env("GOFLAGS", "-mod=mod")
        .env("GOTOOLCHAIN", "local")
        .env("CGO_ENABLED", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    println!("{stdout}");
    assert!(
        run.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&run.stderr)
    );
}

/// The library exports the functions of `c_api.h` and no other symbol.
#[test]
fn exports_exactly_the_cvmapi_functions() {
    let listed = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(library())
        .output()
        .unwrap();
    assert!(listed.status.success());
    let mut exported: Vec<String> = String::from_utf8(listed.stdout)
        .unwrap()
        .lines()
        .filter_map(
            |line| match line.split_whitespace().collect::<Vec<_>>()[..] {
                [_, kind, name] if kind == "T" || kind == "D" || kind == "B" => {
                    Some(name.to_string())
                }
                _ => None,
            },
        )
        .collect();
    exported.sort();
    let mut declared: Vec<String> =
        std::fs::read_to_string(workspace().join("host/libcvm/include/cvm_runtime.h"))
            .unwrap()
            .lines()
            .filter_map(|line| line.strip_prefix("int CVMAPI"))
            .map(|rest| format!("CVMAPI{}", rest.split('(').next().unwrap()))
            .collect();
    declared.sort();
    assert_eq!(declared.len(), 12);
    assert_eq!(exported, declared);
}
