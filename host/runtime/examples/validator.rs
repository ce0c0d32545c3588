//! A validator's replay loop, worked through: read a list of (model, input) pairs, load each
//! model once, run every pair on N threads, print each outcome hash in list order.
//!
//! ```text
//! cargo run --release -p cvm-runtime --example validator -- --threads 2 --schedule 1 LIST
//! ```
//!
//! Each line of LIST is `<model> <input>`, paths relative to the list file: a model is a
//! directory with a CVM `symbol` + `params` (its input the raw bytes `CVMAPIInference` takes,
//! or a `.npy` file), a text model (`.json`) or a canonical binary model (input `.npy`). Output,
//! one line per pair: `<sha3-256 of the outcome> <status> <gas used> <model> <input>`.
//!
//! Reading files is this example's business (with `cvm-formats`); the runtime only sees
//! canonical model bytes and input tensors. A node-local failure is printed as `node-error`
//! with no hash: this node cannot vote on that run.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use cvm_formats::{FileLimit, cvm, read_file, text};
use cvm_runtime::hash::hex;
use cvm_runtime::{InputTensor, LoadError, Model, Runtime, RuntimeConfig, Verdict};

/// The gas limit of every run: a replay charges what the block paid for, here the engine's cap.
const GAS_LIMIT: u64 = cvm_engine::limits::MAX_GAS_PER_RUN;

/// A model as the list names it, loaded once, or its deterministic rejection.
enum Loaded {
    Ready(Model, Option<cvm::CvmMeta>),
    Rejected(Verdict),
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut threads = 1usize;
    let mut schedule = None;
    let mut list = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--threads" => threads = args.next().ok_or("--threads needs a value")?.parse()?,
            "--schedule" => {
                schedule = Some(args.next().ok_or("--schedule needs a value")?.parse()?)
            }
            _ => list = Some(PathBuf::from(arg)),
        }
    }
    let (Some(list), Some(schedule)) = (list, schedule) else {
        return Err("usage: validator [--threads N] --schedule VERSION LIST".into());
    };
    let base = list.parent().unwrap_or(Path::new(".")).to_path_buf();
    let pairs: Vec<(String, String)> = std::fs::read_to_string(&list)?
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            let mut fields = line.split_whitespace();
            match (fields.next(), fields.next()) {
                (Some(model), Some(input)) => Ok((model.to_string(), input.to_string())),
                _ => Err(format!("{}: not `<model> <input>`: {line}", list.display())),
            }
        })
        .collect::<Result<_, _>>()?;

    // Once per process: compile engine.wasm, or read it from the module cache.
    let config = match cvm_runtime::wasm::default_cache_dir() {
        Some(dir) => RuntimeConfig::with_cache_dir(dir),
        None => RuntimeConfig::compile_in_process(),
    };
    let runtime = Runtime::new(&config)?;

    // Once per model: decode and validate.
    let mut models: HashMap<&str, Arc<Loaded>> = HashMap::new();
    for (model, _) in &pairs {
        if !models.contains_key(model.as_str()) {
            let loaded = load(&runtime, &base.join(model), schedule)?;
            models.insert(model, Arc::new(loaded));
        }
    }

    // Every pair, on `threads` threads taking the next pair as they finish one.
    let next = AtomicUsize::new(0);
    let mut lines: Vec<(usize, String)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads.max(1))
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let index = next.fetch_add(1, Ordering::Relaxed);
                        let Some((model, input)) = pairs.get(index) else {
                            return done;
                        };
                        let verdict = match models.get(model.as_str()).map(Arc::as_ref) {
                            Some(Loaded::Ready(loaded, meta)) => {
                                read_input(&base.join(input), meta.as_ref()).and_then(|tensor| {
                                    loaded.run(&[tensor], GAS_LIMIT).map_err(|e| e.to_string())
                                })
                            }
                            Some(Loaded::Rejected(verdict)) => Ok(verdict.clone()),
                            None => Err("model not loaded".into()),
                        };
                        let line = match verdict {
                            Ok(verdict) => format!(
                                "{} {} {} {model} {input}",
                                hex(&verdict.hash()),
                                verdict.error_code().map_or("ok", |code| code.name()),
                                verdict.outcome().gas_used
                            ),
                            Err(error) => format!("node-error ({error}) {model} {input}"),
                        };
                        done.push((index, line));
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|worker| worker.join().unwrap_or_default())
            .collect()
    });
    lines.sort_by_key(|(index, _)| *index);
    for (_, line) in lines {
        println!("{line}");
    }
    Ok(())
}

/// Loads the model at `path` under `schedule`; a rejection is a verdict like any run's.
fn load(
    runtime: &Runtime,
    path: &Path,
    schedule: u32,
) -> Result<Loaded, Box<dyn std::error::Error>> {
    let (bytes, meta) = if path.is_dir() {
        let (symbol, params) = cvm::read_dir(path)?;
        match cvm::import(&symbol, &params) {
            Ok(imported) => (imported.model.encode(), Some(imported.meta)),
            Err(rejection) => {
                // The CVM load checks failed: a rejection, hashed like the engine's own (its
                // deployed return code, `rejection.class`, matters only to the C interface).
                return Ok(Loaded::Rejected(Verdict::rejected(rejection.error)));
            }
        }
    } else if path.extension().is_some_and(|ext| ext == "json") {
        let source = String::from_utf8(read_file(path, FileLimit::MODEL)?)?;
        let model = text::parse_text_model(
            &source,
            &text::base_dir_of(path),
            &path.display().to_string(),
        )?;
        (model.encode(), None)
    } else {
        (read_file(path, FileLimit::MODEL)?, None)
    };
    match runtime.load(&bytes, schedule) {
        Ok(model) => Ok(Loaded::Ready(model, meta)),
        Err(LoadError::Rejected(verdict)) => Ok(Loaded::Rejected(*verdict)),
        Err(LoadError::Node(error)) => Err(error.into()),
    }
}

/// An input tensor: a `.npy` file, or for CVM models the raw bytes of `CVMAPIInference`.
fn read_input(path: &Path, meta: Option<&cvm::CvmMeta>) -> Result<InputTensor, String> {
    match meta {
        Some(meta) if path.extension().is_none_or(|ext| ext != "npy") => {
            let bytes = read_file(path, FileLimit::TENSOR).map_err(|e| e.to_string())?;
            cvm::decode_input(meta, &bytes, false).map_err(|e| e.to_string())
        }
        _ => {
            let array = text::read_npy_file(path)?;
            Ok(InputTensor {
                shape: array.shape,
                data: array.data,
            })
        }
    }
}
