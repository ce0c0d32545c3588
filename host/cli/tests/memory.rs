//! Peak memory of `cvm run` in wasm against the model's static plan (`docs/limits.md`, "Memory
//! of a run"): the engine's linear memory ends within [`ENGINE_SLACK`] of the plan, and the
//! process's peak resident memory (Linux's `VmHWM`, printed by `--timings`) stays within
//! 1.25 × the plan plus [`RESIDENT_CONSTANT`], for every fixture case and for a model planned at
//! the 1 GiB limit.
#![cfg(target_os = "linux")]
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test helpers fail loudly

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use cvm_cli::audit::prepare;
use cvm_engine::limits::{MAX_PEAK_MEMORY_BYTES, MAX_TENSOR_ELEMENTS};
use cvm_formats::npy::{NpyArray, write_npy};

/// What a process running the engine holds whatever the model: the program, wasmtime, the
/// compiled engine (compiling it in the process, the first run here, included), the allocator's
/// own.
const RESIDENT_CONSTANT: u64 = 64 << 20;

/// Linear memory beyond the plan: the engine's own data, the loaded model's bookkeeping and
/// the allocator's.
const ENGINE_SLACK: u64 = 16 << 20;

/// What `--timings` reported of memory.
#[derive(Debug)]
struct Measured {
    status: Option<i32>,
    planned: Option<u64>,
    engine: Option<u64>,
    resident: u64,
    stderr: String,
}

fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cvm-memory-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// `cvm run MODEL ARGS… --engine wasm --timings` with the module cache in `cache`.
fn measure(model: &Path, args: &[String], cache: &Path) -> Measured {
    let output = Command::new(env!("CARGO_BIN_EXE_cvm"))
        .arg("run")
        .arg(model)
        .args(args)
        .args(["--engine", "wasm", "--timings"])
        .env("CVM_CACHE_DIR", cache)
        .output()
        .expect("cvm starts");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let field = |prefix: &str, unit: &str| {
        stderr.lines().find_map(|line| {
            line.strip_prefix(prefix)?
                .strip_suffix(unit)?
                .trim()
                .parse::<u64>()
                .ok()
        })
    };
    Measured {
        status: output.status.code(),
        planned: field("memory: planned peak ", " bytes"),
        engine: field("memory: engine ", " bytes"),
        resident: field("memory: peak resident ", " KiB").unwrap_or_else(|| panic!("{stderr}"))
            * 1024,
        stderr: stderr.into_owned(),
    }
}

/// The bound every run must keep: 1.25 × the plan + [`RESIDENT_CONSTANT`].
fn resident_bound(planned: u64) -> u64 {
    planned + planned / 4 + RESIDENT_CONSTANT
}

#[test]
fn every_fixture_runs_within_its_plan() {
    let dir = scratch_dir("fixtures");
    let cache = dir.join("cache");
    let mut measured = 0;
    let mut largest = (0, 0, String::new());
    for case in cvm_fixtures::all_cases().expect("fixtures") {
        let prepared = prepare(&case).expect("prepares");
        let Ok((bytes, _)) = &prepared.model else {
            continue;
        };
        let model = dir.join("model.cvmb");
        std::fs::write(&model, bytes).expect("write model");
        let mut args = Vec::new();
        for (index, input) in prepared.inputs.iter().enumerate() {
            let file = dir.join(format!("input_{index}.npy"));
            let array = NpyArray {
                shape: input.shape.clone(),
                data: input.data.clone(),
            };
            std::fs::write(&file, write_npy(&array)).expect("write input");
            args.extend(["--input".into(), file.display().to_string()]);
        }
        args.extend([
            "--gas-limit".into(),
            prepared.gas_limit.to_string(),
            "--schedule".into(),
            prepared.schedule.to_string(),
        ]);
        let run = measure(&model, &args, &cache);
        // Exit status 2 only for the cases whose inputs `cvm run` refuses before the engine
        // sees them (a missing or surplus input); never the engine failing.
        assert!(
            matches!(run.status, Some(0 | 1))
                || (run.status == Some(2) && !run.stderr.contains("engine.wasm")),
            "{}: exit status {:?}: {}",
            case.name,
            run.status,
            run.stderr
        );
        let planned = run.planned.unwrap_or(0);
        if let Some(engine) = run.engine {
            assert!(
                engine <= planned + ENGINE_SLACK,
                "{}: engine memory {engine} bytes, plan {planned}",
                case.name
            );
        }
        assert!(
            run.resident <= resident_bound(planned),
            "{}: peak resident {} bytes, plan {planned}",
            case.name,
            run.resident
        );
        if run.resident > largest.0 {
            largest = (run.resident, planned, case.name.clone());
        }
        measured += 1;
    }
    eprintln!(
        "{measured} fixture runs; the largest peak resident memory: {} KiB for a plan of {} bytes ({})",
        largest.0 / 1024,
        largest.1,
        largest.2
    );
    assert!(measured > 300, "only {measured} fixture runs");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Writes an int32 `.npy` file of `elements` copies of `value` without holding it in memory.
fn write_constant_npy(path: &Path, elements: u64, value: i32) {
    let header = write_npy(&NpyArray {
        shape: vec![u32::try_from(elements).unwrap()],
        data: Vec::new(),
    });
    let mut file = std::io::BufWriter::new(std::fs::File::create(path).expect("create"));
    file.write_all(&header).expect("header");
    let block: Vec<u8> = std::iter::repeat_n(value.to_le_bytes(), 1 << 16)
        .flatten()
        .collect();
    for _ in 0..elements / (1 << 16) {
        file.write_all(&block).expect("data");
    }
    file.flush().expect("flush");
}

/// Three chained relus over an input of 2^26 elements plan exactly 1 GiB (the input, two arena
/// buffers and the output's copy). In wasm the engine's memory ends within [`ENGINE_SLACK`] of
/// that, and the whole process, which also holds the 256 MiB output it decodes from the engine,
/// within 1.25 × the plan + [`RESIDENT_CONSTANT`].
#[test]
fn a_model_at_the_memory_limit_runs_in_wasm_within_a_quarter_over_its_plan() {
    let dir = scratch_dir("limit");
    let model = dir.join("relus.json");
    std::fs::write(
        &model,
        format!(
            r#"{{"format": "cvm-text/1",
                "inputs": [{{"name": "x", "shape": [{MAX_TENSOR_ELEMENTS}], "precision": 8}}],
                "nodes": [{{"name": "r0", "op": "relu", "inputs": ["x"]}},
                          {{"name": "r1", "op": "relu", "inputs": ["r0"]}},
                          {{"name": "r2", "op": "relu", "inputs": ["r1"]}}],
                "outputs": ["r2"]}}"#
        ),
    )
    .expect("write model");
    let input = dir.join("x.npy");
    write_constant_npy(&input, MAX_TENSOR_ELEMENTS, -3);
    // As a node runs: with the engine compiled once before, into the module cache.
    let cache = dir.join("cache");
    let cnn = cvm_fixtures::root().join("models").join("cnn");
    let warm = measure(
        &cnn.join("model.json"),
        &[
            "--input".into(),
            cnn.join("input.npy").display().to_string(),
        ],
        &cache,
    );
    assert_eq!(warm.status, Some(0), "{warm:?}");
    let run = measure(
        &model,
        &["--input".into(), input.display().to_string()],
        &cache,
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(run.status, Some(0), "{run:?}");
    assert_eq!(run.planned, Some(MAX_PEAK_MEMORY_BYTES), "{run:?}");
    let engine = run.engine.expect("engine memory");
    assert!(engine <= MAX_PEAK_MEMORY_BYTES + ENGINE_SLACK, "{run:?}");
    assert!(
        run.resident <= resident_bound(MAX_PEAK_MEMORY_BYTES),
        "{run:?}"
    );
    eprintln!(
        "plan {MAX_PEAK_MEMORY_BYTES} bytes: engine {engine} bytes, peak resident {} KiB",
        run.resident / 1024
    );
}
