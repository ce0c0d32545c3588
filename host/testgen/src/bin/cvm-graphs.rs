//! Writes the random graphs of `cvm_testgen::graphgen` as files, for `scripts/cross-arch.sh`:
//! `cvm-graphs DIR COUNT` writes, for each seed 0..COUNT (the seeds of
//! `host/cli/tests/differential.rs`, at most 12 nodes each), `graph-<seed>.cvm` (canonical
//! bytes), one `graph-<seed>.in<k>.npy` per input, and a line `graph-<seed> <schedule> <inputs>`
//! of `DIR/manifest`, the schedules taking turns over every defined one as in that test.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use cvm_engine::gas::Schedule;
use cvm_formats::npy::{NpyArray, write_npy};
use cvm_testgen::graphgen::{ByteSource, generate};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(dir), Some(Ok(count))) = (args.first(), args.get(1).map(|n| n.parse::<u64>())) else {
        eprintln!("usage: cvm-graphs DIR COUNT");
        return ExitCode::from(2);
    };
    match write_graphs(&PathBuf::from(dir), count) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("cvm-graphs: {error}");
            ExitCode::from(2)
        }
    }
}

fn write_graphs(dir: &std::path::Path, count: u64) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut manifest = std::io::BufWriter::new(std::fs::File::create(dir.join("manifest"))?);
    for seed in 0..count {
        let seed_bytes = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15).to_le_bytes();
        let generated = generate(&mut ByteSource::new(&seed_bytes), 12);
        let schedule = Schedule::ALL[seed as usize % Schedule::ALL.len()].version;
        let name = format!("graph-{seed:04}");
        std::fs::write(dir.join(format!("{name}.cvm")), generated.model.encode())?;
        for (index, input) in generated.inputs.iter().enumerate() {
            let array = NpyArray {
                shape: input.shape.clone(),
                data: input.data.clone(),
            };
            std::fs::write(dir.join(format!("{name}.in{index}.npy")), write_npy(&array))?;
        }
        writeln!(manifest, "{name} {schedule} {}", generated.inputs.len())?;
    }
    manifest.flush()
}
