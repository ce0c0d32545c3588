#!/usr/bin/env bash
# Runs the cargo-fuzz targets of host/fuzz, each for SECONDS (default 600), one after another,
# starting from a corpus seeded with every fixture model. Needs cargo-fuzz (installed if
# missing) and the nightly toolchain, or, where none can be installed, the pinned toolchain
# with RUSTC_BOOTSTRAP=1 for cargo-fuzz's -Z flags. Crashes land in
# host/fuzz/artifacts/<target>/; once fixed, copy each one into fixtures/fuzz/<target>/ so that
# host/cli/tests/fuzz_regressions.rs replays it.
#   bash scripts/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-600}"
shift || true
targets=("$@")
[ "${#targets[@]}" -gt 0 ] || targets=(canonical text_model cvm_import differential onnx_read onnx_read_file onnx_import)

if rustup toolchain install nightly --profile minimal >/dev/null 2>&1; then
  toolchain=(+nightly)
else
  echo "no nightly toolchain: fuzzing with the pinned one and RUSTC_BOOTSTRAP=1"
  toolchain=()
  export RUSTC_BOOTSTRAP=1
fi
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked

# The fuzz build (nightly, which need not have the wasm target) embeds the engine.wasm that the
# pinned toolchain builds.
cargo build -p cvm-cli --locked
wasm="$(pwd)/target/engine-wasm/wasm32-unknown-unknown/wasm/cvm_engine.wasm"
CVM_WRITE_FUZZ_CORPUS="$(pwd)/host/fuzz/corpus" cargo test -p cvm-cli --test fuzz_regressions --locked -q
# The ONNX targets start from the committed ONNX models (those under 1 MB); onnx_read_file
# also from models whose tensors are external data (tests/external.rs writes them).
CVM_WRITE_FUZZ_CORPUS="$(pwd)/host/fuzz/corpus" cargo test -p cvm-onnx --test external --locked -q
# onnx_import also from the exporters' forms host/onnx/tests/lowering.rs builds (GELU and RMSNorm
# written out, causal masks, the Tanh pooler, …).
CVM_WRITE_FUZZ_CORPUS="$(pwd)/host/fuzz/corpus" cargo test -p cvm-onnx --test lowering --locked -q
for target in onnx_read onnx_read_file onnx_import; do
  mkdir -p "host/fuzz/corpus/$target"
  find fixtures/onnx -name '*.onnx' -size -1024k | while read -r file; do
    cp "$file" "host/fuzz/corpus/$target/$(echo "$file" | tr / _)"
  done
done

for target in "${targets[@]}"; do
  echo "== fuzzing $target for $seconds s"
  CVM_ENGINE_WASM="$wasm" cargo "${toolchain[@]}" fuzz run --fuzz-dir host/fuzz -s none "$target" \
    "host/fuzz/corpus/$target" \
    -- -max_total_time="$seconds" -rss_limit_mb=4096 -timeout=20 2>&1 | tail -n 12
done
