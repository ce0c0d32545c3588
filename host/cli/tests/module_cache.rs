//! The compiled-module cache: the first engine compiles and stores `engine.wasm`, the next loads
//! it; a cached module gives the same outcome as a fresh one; corrupt or truncated entries are
//! detected, recompiled and replaced; the key separates engines and configurations; no cache
//! problem fails a run. Also the benchmark-only unmetered engine, and the CLI's `--cache-dir`,
//! `--no-cache` and default cache directory.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test helpers fail loudly

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use cvm_cli::runner::{EngineKind, ModelSource, encode_inputs, execute, load_model};
use cvm_engine::Report;
use cvm_runtime::hash::{HashAlgorithm, outcome_hash};
use cvm_runtime::wasm::{
    ENGINE_WASM, ModuleOrigin, WASMTIME_VERSION, WasmEngine, cache_file_name, cache_key, checksum,
    config,
};

/// The gas schedule these tests load under.
const SCHEDULE: u32 = cvm_engine::gas::Schedule::NEWEST.version;

/// A directory under the system temporary directory, unique to this process and test, removed
/// when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir =
            std::env::temp_dir().join(format!("cvm-module-cache-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        TempDir(dir)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The smallest valid wasm module: imports nothing, exports nothing; compiles in no time.
const EMPTY_MODULE: &[u8] = b"\0asm\x01\0\0\0";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn digits() -> PathBuf {
    root().join("fixtures/models/digits")
}

/// The digits CNN on its image of a 2, in a session of `wasm`.
fn run_digits(wasm: &WasmEngine) -> Report {
    let model = load_model(&ModelSource::from_path(&digits()))
        .unwrap()
        .bytes;
    let input = cvm_cli::inputs::read_input(&digits().join("input_2.npy")).unwrap();
    let mut session = wasm.session().unwrap();
    assert!(session.load(&model, SCHEDULE).unwrap().is_none());
    session.run(&encode_inputs(&[input]), u64::MAX).unwrap()
}

/// The `.cwasm` entries in `dir`.
fn entries(dir: &Path) -> Vec<PathBuf> {
    let Ok(listing) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = listing
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "cwasm"))
        .collect();
    found.sort();
    found
}

/// No temporary file is left behind by a write.
fn assert_no_temporaries(dir: &Path) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let name = entry.unwrap().file_name();
        assert!(
            !name.to_string_lossy().ends_with(".tmp"),
            "temporary file left in the cache: {name:?}"
        );
    }
}

#[test]
fn the_first_engine_compiles_and_stores_the_next_loads_with_identical_outcomes() {
    let dir = TempDir::new("roundtrip");
    let compiled = WasmEngine::with_cache(dir.path()).unwrap();
    assert_eq!(compiled.origin(), ModuleOrigin::Compiled);
    assert!(
        compiled.cache_problems().is_empty(),
        "{:?}",
        compiled.cache_problems()
    );
    let file = compiled.cache_file().unwrap().to_path_buf();
    assert_eq!(entries(dir.path()), std::slice::from_ref(&file));
    assert_no_temporaries(dir.path());
    let name = file.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        name.starts_with("engine-") && name.ends_with(".cwasm"),
        "{name}"
    );

    let cached = WasmEngine::with_cache(dir.path()).unwrap();
    assert_eq!(cached.origin(), ModuleOrigin::Cached);
    assert!(
        cached.cache_problems().is_empty(),
        "{:?}",
        cached.cache_problems()
    );
    assert_eq!(cached.cache_file(), Some(file.as_path()));

    let fresh = run_digits(&compiled);
    let from_cache = run_digits(&cached);
    assert!(fresh.error_code().is_none(), "{fresh:?}");
    assert_eq!(from_cache, fresh);
    assert_eq!(
        outcome_hash(&from_cache, HashAlgorithm::Sha3_256),
        outcome_hash(&fresh, HashAlgorithm::Sha3_256)
    );
    // And the README's hash of this run.
    assert_eq!(
        cvm_runtime::hash::hex(&outcome_hash(&from_cache, HashAlgorithm::Sha3_256)),
        "9c8892999a4d0c1cf7f24f171ee1ed3323ff967e4291607f3c73410a2b310058"
    );
}

/// Damages the entry with `damage`, then expects the next engine to notice, compile, replace the
/// entry with a good one, and the engine after it to load that.
fn check_recovery(dir: &Path, what: &str, damage: impl FnOnce(&Path)) {
    let warm = WasmEngine::with_cache(dir).unwrap();
    let file = warm.cache_file().unwrap().to_path_buf();
    assert!(file.exists(), "{what}: entry written");
    drop(warm);
    let good = std::fs::read(&file).unwrap();
    damage(&file);
    assert_ne!(std::fs::read(&file).unwrap(), good, "{what}: damaged");

    let recovered = WasmEngine::with_cache(dir).unwrap();
    assert_eq!(recovered.origin(), ModuleOrigin::Compiled, "{what}");
    assert_eq!(recovered.cache_problems().len(), 1, "{what}");
    let problem = &recovered.cache_problems()[0];
    assert!(
        problem.contains(&file.display().to_string()) && problem.contains("recompiling"),
        "{what}: {problem}"
    );
    assert_no_temporaries(dir);

    let again = WasmEngine::with_cache(dir).unwrap();
    assert_eq!(
        again.origin(),
        ModuleOrigin::Cached,
        "{what}: entry replaced"
    );
    assert!(again.cache_problems().is_empty(), "{what}");
    assert_eq!(entries(dir), [file], "{what}");
}

#[test]
fn a_corrupt_engine_entry_is_detected_recompiled_and_replaced() {
    let dir = TempDir::new("corrupt-engine");
    check_recovery(dir.path(), "flipped byte", |file| {
        let mut bytes = std::fs::read(file).unwrap();
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0x01;
        std::fs::write(file, bytes).unwrap();
    });
    check_recovery(dir.path(), "truncated", |file| {
        let bytes = std::fs::read(file).unwrap();
        std::fs::write(file, &bytes[..bytes.len() - 1000]).unwrap();
    });
}

#[test]
fn every_kind_of_damaged_entry_is_recompiled() {
    let dir = TempDir::new("damaged");
    type Damage = fn(Vec<u8>) -> Vec<u8>;
    let damages: [(&str, Damage); 6] = [
        ("empty file", |_| Vec::new()),
        ("shorter than the header", |bytes| bytes[..20].to_vec()),
        ("header only", |bytes| bytes[..40].to_vec()),
        ("wrong tag", |mut bytes| {
            bytes[0] ^= 0xff;
            bytes
        }),
        ("flipped checksum", |mut bytes| {
            bytes[8] ^= 0x80;
            bytes
        }),
        ("flipped last byte", |mut bytes| {
            let last = bytes.len() - 1;
            bytes[last] ^= 0x01;
            bytes
        }),
    ];
    let warm = WasmEngine::from_module_bytes_cached(EMPTY_MODULE, dir.path()).unwrap();
    let file = warm.cache_file().unwrap().to_path_buf();
    let good = std::fs::read(&file).unwrap();
    for (what, damage) in damages {
        std::fs::write(&file, damage(good.clone())).unwrap();
        let recovered = WasmEngine::from_module_bytes_cached(EMPTY_MODULE, dir.path()).unwrap();
        assert_eq!(recovered.origin(), ModuleOrigin::Compiled, "{what}");
        assert_eq!(recovered.cache_problems().len(), 1, "{what}");
        let again = WasmEngine::from_module_bytes_cached(EMPTY_MODULE, dir.path()).unwrap();
        assert_eq!(again.origin(), ModuleOrigin::Cached, "{what}: replaced");
    }
    // An intact entry that wasmtime refuses: an artifact compiled under another configuration
    // (fuel metering off) stored under this configuration's name.
    let mut unmetered = config();
    unmetered.consume_fuel(false);
    let payload = wasmtime::Engine::new(&unmetered)
        .unwrap()
        .precompile_module(EMPTY_MODULE)
        .unwrap();
    let mut foreign = good[..8].to_vec();
    foreign.extend_from_slice(&checksum(&payload));
    foreign.extend_from_slice(&payload);
    std::fs::write(&file, foreign).unwrap();
    let recovered = WasmEngine::from_module_bytes_cached(EMPTY_MODULE, dir.path()).unwrap();
    assert_eq!(recovered.origin(), ModuleOrigin::Compiled);
    assert!(
        recovered.cache_problems()[0].contains("wasmtime refused"),
        "{:?}",
        recovered.cache_problems()
    );
}

#[test]
fn an_unusable_cache_directory_falls_back_to_compiling() {
    let dir = TempDir::new("unusable");
    std::fs::create_dir_all(dir.path()).unwrap();
    // A regular file where the directory should be: nothing can be read or written there.
    let blocked = dir.path().join("not-a-directory");
    std::fs::write(&blocked, b"").unwrap();
    let wasm = WasmEngine::from_module_bytes_cached(EMPTY_MODULE, &blocked).unwrap();
    assert_eq!(wasm.origin(), ModuleOrigin::Compiled);
    assert!(!wasm.cache_problems().is_empty());
    assert!(
        wasm.cache_problems()
            .iter()
            .any(|problem| problem.contains("not cached")),
        "{:?}",
        wasm.cache_problems()
    );
    // A directory where the entry should be: unreadable as a file, and not replaceable.
    let entry_dir = dir.path().join("entry-is-a-directory");
    let engine = wasmtime::Engine::new(&config()).unwrap();
    std::fs::create_dir_all(
        entry_dir
            .join(cache_file_name(&engine, EMPTY_MODULE))
            .join("x"),
    )
    .unwrap();
    let wasm = WasmEngine::from_module_bytes_cached(EMPTY_MODULE, &entry_dir).unwrap();
    assert_eq!(wasm.origin(), ModuleOrigin::Compiled);
    assert_eq!(
        wasm.cache_problems().len(),
        2,
        "{:?}",
        wasm.cache_problems()
    );
    assert_no_temporaries(&entry_dir);
}

#[test]
fn the_key_covers_the_module_the_configuration_and_wasmtime() {
    let metered = wasmtime::Engine::new(&config()).unwrap();
    let mut unmetered_config = config();
    unmetered_config.consume_fuel(false);
    let unmetered = wasmtime::Engine::new(&unmetered_config).unwrap();
    let mut other_opt_config = config();
    other_opt_config.cranelift_opt_level(wasmtime::OptLevel::None);
    let other_opt = wasmtime::Engine::new(&other_opt_config).unwrap();

    let key = cache_key(&metered, ENGINE_WASM);
    assert_eq!(
        key,
        cache_key(&wasmtime::Engine::new(&config()).unwrap(), ENGINE_WASM)
    );
    assert_ne!(key, cache_key(&unmetered, ENGINE_WASM), "fuel metering");
    assert_ne!(
        key,
        cache_key(&other_opt, ENGINE_WASM),
        "optimization level"
    );
    assert_ne!(key, cache_key(&metered, EMPTY_MODULE), "module bytes");
    let mut one_byte_changed = ENGINE_WASM.to_vec();
    let last = one_byte_changed.len() - 1;
    one_byte_changed[last] ^= 1;
    assert_ne!(key, cache_key(&metered, &one_byte_changed), "module bytes");
    assert!(cache_file_name(&metered, ENGINE_WASM).contains(&cvm_runtime::hash::hex(&key)));

    // Two modules in one directory use two entries.
    let dir = TempDir::new("keys");
    let empty = WasmEngine::from_module_bytes_cached(EMPTY_MODULE, dir.path()).unwrap();
    let empty_file = empty.cache_file().unwrap().to_path_buf();
    assert_eq!(
        empty_file.file_name().unwrap().to_string_lossy(),
        cache_file_name(&metered, EMPTY_MODULE)
    );
    assert_ne!(
        cache_file_name(&metered, EMPTY_MODULE),
        cache_file_name(&metered, ENGINE_WASM)
    );
    assert_eq!(entries(dir.path()), [empty_file]);
}

#[test]
fn the_checksum_changes_with_any_byte_and_the_length() {
    let bytes: Vec<u8> = (0..1_300_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let digest = checksum(&bytes);
    assert_eq!(digest, checksum(&bytes.clone()));
    for position in [0, 1 << 18, (1 << 18) - 1, 700_000, bytes.len() - 1] {
        let mut changed = bytes.clone();
        changed[position] ^= 1;
        assert_ne!(checksum(&changed), digest, "byte {position}");
    }
    let mut longer = bytes.clone();
    longer.push(0);
    assert_ne!(checksum(&longer), digest);
    assert_ne!(checksum(&bytes[..bytes.len() - 1]), digest);
    // Blocks moved around change it too.
    let mut swapped = bytes[1 << 18..2 << 18].to_vec();
    swapped.extend_from_slice(&bytes[..1 << 18]);
    swapped.extend_from_slice(&bytes[2 << 18..]);
    assert_ne!(checksum(&swapped), digest);
    assert_ne!(checksum(&[]), checksum(&[0]));
}

#[test]
fn the_pinned_wasmtime_version_is_the_one_in_the_cache_key() {
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let pin = format!("wasmtime = {{ version = \"={WASMTIME_VERSION}\"");
    assert!(
        manifest.contains(&pin),
        "the workspace Cargo.toml must pin wasmtime as `{pin}`"
    );
}

#[test]
fn the_unmetered_benchmark_engine_gives_the_same_outcome_and_no_fuel() {
    let unmetered = WasmEngine::unmetered_for_benchmarks().unwrap();
    let report = run_digits(&unmetered);
    let native = {
        let model = load_model(&ModelSource::from_path(&digits()))
            .unwrap()
            .bytes;
        let input = cvm_cli::inputs::read_input(&digits().join("input_2.npy")).unwrap();
        execute(
            EngineKind::Native,
            None,
            &model,
            &[input],
            u64::MAX,
            cvm_engine::gas::Schedule::NEWEST.version,
        )
        .unwrap()
    };
    assert_eq!(report, native);
    let mut session = unmetered.session().unwrap();
    let error = session.fuel_used().unwrap_err().to_string();
    assert!(error.contains("fuel metering is off"), "{error}");
    // Out-of-gas still stops a run: gas is the engine's own metering, not wasmtime's fuel.
    let model = load_model(&ModelSource::from_path(&digits()))
        .unwrap()
        .bytes;
    assert!(session.load(&model, SCHEDULE).unwrap().is_none());
    let input = cvm_cli::inputs::read_input(&digits().join("input_2.npy")).unwrap();
    let short = session.run(&encode_inputs(&[input]), 1_000).unwrap();
    assert_eq!(
        short.error_code(),
        Some(cvm_engine::ErrorCode::OutOfGas),
        "{short:?}"
    );
}

fn cvm(args: &[&str], configure: impl FnOnce(&mut Command)) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_cvm"));
    command.args(args);
    configure(&mut command);
    command.output().expect("cvm starts")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn digits_args<'a>(digits: &'a str, input: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["run", digits, "--input", input];
    args.extend_from_slice(extra);
    args
}

#[test]
fn the_cli_uses_the_cache_dir_and_survives_a_corrupt_entry() {
    let dir = TempDir::new("cli");
    let digits_dir = digits();
    let input = digits_dir.join("input_2.npy");
    let (digits_str, input_str) = (digits_dir.to_str().unwrap(), input.to_str().unwrap());
    let cache = dir.path().join("cache");
    let cache_str = cache.to_str().unwrap();
    let no_default = |command: &mut Command| {
        // Anything touching the default directory would land here, where the test checks.
        command.env("CVM_CACHE_DIR", dir.path().join("default"));
    };

    let first = cvm(
        &digits_args(
            digits_str,
            input_str,
            &["--cache-dir", cache_str, "--timings"],
        ),
        no_default,
    );
    assert_eq!(first.status.code(), Some(0), "{}", text(&first.stderr));
    assert!(text(&first.stderr).contains("engine compile"));
    assert!(
        text(&first.stdout)
            .contains("9c8892999a4d0c1cf7f24f171ee1ed3323ff967e4291607f3c73410a2b310058")
    );
    let [file] = entries(&cache).try_into().unwrap();

    let second = cvm(
        &digits_args(
            digits_str,
            input_str,
            &["--cache-dir", cache_str, "--timings"],
        ),
        no_default,
    );
    assert_eq!(second.status.code(), Some(0));
    assert!(
        text(&second.stderr).contains("engine cache load"),
        "{}",
        text(&second.stderr)
    );
    assert!(!text(&second.stderr).contains("warning"));
    assert_eq!(second.stdout, first.stdout);

    let mut bytes = std::fs::read(&file).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    std::fs::write(&file, bytes).unwrap();
    let corrupt = cvm(
        &digits_args(
            digits_str,
            input_str,
            &["--cache-dir", cache_str, "--timings"],
        ),
        no_default,
    );
    let stderr = text(&corrupt.stderr);
    assert_eq!(corrupt.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("cvm: warning: module cache:") && stderr.contains("checksum mismatch"),
        "{stderr}"
    );
    assert!(stderr.contains("engine compile"), "{stderr}");
    assert_eq!(corrupt.stdout, first.stdout);
    let repaired = cvm(
        &digits_args(
            digits_str,
            input_str,
            &["--cache-dir", cache_str, "--timings"],
        ),
        no_default,
    );
    assert!(text(&repaired.stderr).contains("engine cache load"));
    assert!(!text(&repaired.stderr).contains("warning"));

    let uncached = cvm(
        &digits_args(digits_str, input_str, &["--no-cache", "--timings"]),
        no_default,
    );
    assert_eq!(uncached.status.code(), Some(0));
    assert!(text(&uncached.stderr).contains("engine compile"));
    assert_eq!(uncached.stdout, first.stdout);
    assert!(
        !dir.path().join("default").exists(),
        "--no-cache wrote a cache"
    );

    let conflicting = cvm(
        &digits_args(
            digits_str,
            input_str,
            &["--no-cache", "--cache-dir", cache_str],
        ),
        no_default,
    );
    assert_eq!(conflicting.status.code(), Some(2));

    // Native runs never build the wasm engine.
    let native = cvm(
        &digits_args(digits_str, input_str, &["--engine", "native"]),
        no_default,
    );
    assert_eq!(native.status.code(), Some(0));
    assert!(!dir.path().join("default").exists());
}

#[test]
fn the_cli_default_cache_dir_follows_the_environment() {
    let dir = TempDir::new("cli-default");
    let model = root().join("fixtures/models/cnn/model.json");
    let input = root().join("fixtures/models/cnn/input.npy");
    let args = [
        "run",
        model.to_str().unwrap(),
        "--input",
        input.to_str().unwrap(),
    ];
    let run = |configure: &dyn Fn(&mut Command)| {
        let output = cvm(&args, |command| {
            command
                .env_remove("CVM_CACHE_DIR")
                .env_remove("XDG_CACHE_HOME")
                .env_remove("HOME");
            configure(command);
        });
        assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    };

    let explicit = dir.path().join("explicit");
    run(&|command| {
        command
            .env("CVM_CACHE_DIR", &explicit)
            .env("XDG_CACHE_HOME", dir.path().join("xdg-unused"))
            .env("HOME", dir.path().join("home-unused"));
    });
    assert_eq!(entries(&explicit).len(), 1);

    let xdg = dir.path().join("xdg");
    run(&|command| {
        command
            .env("XDG_CACHE_HOME", &xdg)
            .env("HOME", dir.path().join("home-unused"));
    });
    assert_eq!(entries(&xdg.join("cvm")).len(), 1);

    let home = dir.path().join("home");
    run(&|command| {
        command
            .env("XDG_CACHE_HOME", "relative/ignored")
            .env("HOME", &home);
    });
    assert_eq!(entries(&home.join(".cache").join("cvm")).len(), 1);
    assert!(!dir.path().join("xdg-unused").exists());
    assert!(!dir.path().join("home-unused").exists());

    // With no directory known at all, the run still succeeds (compiling, caching nothing).
    run(&|_| {});
}
