//! Fuzz target: `cvm_onnx::read_file` on arbitrary bytes written as `model.onnx` into a
//! directory of this process that holds fixed files for external data to name, so that the
//! reading of external data (locations, ranges, entries) is explored: it must return Ok or Err,
//! never panic, and never read outside that directory.
//!
//! The directory holds `model.onnx.data` (4096 bytes), `weights/model.onnx.data` (the same), a
//! directory `empty`, and on Unix the links `link.data` (to `model.onnx.data`, inside) and
//! `zero` (to `/dev/zero`, outside). `CVM_WRITE_FUZZ_CORPUS=<dir> cargo test -p cvm-onnx --test
//! external` writes seeds whose tensors name ranges of `model.onnx.data`.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

/// Bytes of the fixed data file.
const DATA_BYTES: usize = 4096;

/// The directory, made once per process.
fn directory() -> Option<&'static PathBuf> {
    static DIRECTORY: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIRECTORY
        .get_or_init(|| {
            let dir = std::env::temp_dir()
                .join(format!("cvm-fuzz-onnx-read-file-{}", std::process::id()));
            let data: Vec<u8> = (0..DATA_BYTES).map(|i| (i * 131 + 7) as u8).collect();
            std::fs::create_dir_all(dir.join("weights")).ok()?;
            std::fs::create_dir_all(dir.join("empty")).ok()?;
            std::fs::write(dir.join("model.onnx.data"), &data).ok()?;
            std::fs::write(dir.join("weights/model.onnx.data"), &data).ok()?;
            #[cfg(unix)]
            {
                // Left from an earlier run of the same process id, they are already there.
                let _ = std::os::unix::fs::symlink("model.onnx.data", dir.join("link.data"));
                let _ = std::os::unix::fs::symlink("/dev/zero", dir.join("zero"));
            }
            Some(dir)
        })
        .as_ref()
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Some(dir) = directory() else {
        return;
    };
    let model = dir.join("model.onnx");
    if std::fs::write(&model, data).is_ok() {
        let _ = cvm_onnx::read_file(&model);
    }
});
