//! `cvm run --timings`: one line per phase on stderr, in milliseconds with three decimals, for
//! both engines; stdout is byte for byte what it is without the flag.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test helpers fail loudly

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn cvm(args: &[&str], cache: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cvm"))
        .args(args)
        .env("CVM_CACHE_DIR", cache)
        .output()
        .expect("cvm starts")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The phase names of the `timing:` lines of `stderr`, checking each line's format.
fn phases(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter(|line| line.starts_with("timing: "))
        .map(|line| {
            let fields: Vec<&str> = line["timing: ".len()..].split_whitespace().collect();
            let [name @ .., millis, unit] = fields.as_slice() else {
                panic!("short timing line: {line:?}")
            };
            assert_eq!(*unit, "ms", "{line:?}");
            let (whole, fraction) = millis.split_once('.').expect("three decimals");
            assert!(whole.bytes().all(|b| b.is_ascii_digit()) && !whole.is_empty());
            assert!(fraction.len() == 3 && fraction.bytes().all(|b| b.is_ascii_digit()));
            name.join(" ")
        })
        .collect()
}

#[test]
fn timings_name_each_phase_on_stderr_and_leave_stdout_alone() {
    let cache = std::env::temp_dir().join(format!("cvm-timings-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cache);
    let digits = root().join("fixtures/models/digits");
    let input = digits.join("input_2.npy");
    let base = [
        "run",
        digits.to_str().unwrap(),
        "--input",
        input.to_str().unwrap(),
    ];
    let with = |extra: &[&str]| -> Vec<String> {
        base.iter()
            .copied()
            .chain(extra.iter().copied())
            .map(String::from)
            .collect()
    };
    let run = |args: Vec<String>| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let output = cvm(&args, &cache);
        assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
        output
    };

    // The first wasm run compiles, the next load from the cache.
    let compiled = run(with(&["--timings"]));
    assert_eq!(
        phases(&text(&compiled.stderr)),
        [
            "read model",
            "read inputs",
            "engine compile",
            "instantiate",
            "model load",
            "input encoding",
            "run",
            "report decoding",
            "hashing",
            "total"
        ]
    );
    let cached = run(with(&["--timings"]));
    let cached_phases = phases(&text(&cached.stderr));
    assert_eq!(cached_phases[2], "engine cache load");
    assert_eq!(cached_phases.len(), 10);
    let plain = run(with(&[]));
    assert_eq!(text(&plain.stderr), "");
    assert_eq!(compiled.stdout, plain.stdout);
    assert_eq!(cached.stdout, plain.stdout);

    let native = run(with(&["--engine", "native", "--timings"]));
    assert_eq!(
        phases(&text(&native.stderr)),
        [
            "read model",
            "read inputs",
            "model load",
            "run",
            "hashing",
            "total"
        ]
    );
    assert_eq!(
        native.stdout,
        run(with(&["--engine", "native"])).stdout,
        "native stdout unchanged"
    );

    // JSON output stays one parseable object.
    let json = run(with(&["--json", "--timings"]));
    assert_eq!(json.stdout, run(with(&["--json"])).stdout);
    let value: serde_json::Value = serde_json::from_slice(&json.stdout).expect("one JSON object");
    assert_eq!(value["status"], "ok");
    assert_eq!(phases(&text(&json.stderr)).len(), 10);

    let _ = std::fs::remove_dir_all(&cache);
}

#[test]
fn timings_are_printed_for_a_rejected_model_too() {
    let cache = std::env::temp_dir().join(format!("cvm-timings-rejected-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cache);
    let model = std::env::temp_dir().join(format!("cvm-timings-bad-{}.cvm", std::process::id()));
    // The magic and then garbage: the engine rejects it deterministically (exit status 1); that
    // outcome is hashed too.
    let mut bytes = cvm_engine::MAGIC.to_vec();
    bytes.extend_from_slice(&[0xff; 16]);
    std::fs::write(&model, bytes).unwrap();
    let output = cvm(
        &[
            "run",
            model.to_str().unwrap(),
            "--engine",
            "native",
            "--timings",
        ],
        &cache,
    );
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
    let names = phases(&text(&output.stderr));
    assert_eq!(
        names,
        [
            "read model",
            "read inputs",
            "model load",
            "hashing",
            "total"
        ]
    );
    let _ = std::fs::remove_dir_all(&cache);
    let _ = std::fs::remove_file(&model);
}
