//! Regenerates `host/onnx/src/generated/onnx.rs` from `host/onnx/proto/onnx.proto`.
//!
//! Run from anywhere: `cargo run --manifest-path host/onnx/codegen/Cargo.toml`. The output is
//! committed, so building `cvm-onnx` needs neither this tool nor protoc.

use std::path::Path;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let proto_dir = crate_dir.join("proto");
    let out_dir = crate_dir.join("src").join("generated");
    let descriptors = protox::compile([proto_dir.join("onnx.proto")], [&proto_dir])?;
    std::fs::create_dir_all(&out_dir)?;
    prost_build::Config::new()
        .out_dir(&out_dir)
        .compile_fds(descriptors)?;
    println!("wrote {}", out_dir.join("onnx.rs").display());
    Ok(())
}
