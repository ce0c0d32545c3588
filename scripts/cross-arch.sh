#!/usr/bin/env bash
# Cross-architecture determinism check: builds the `cvm` tool for aarch64-unknown-linux-gnu,
# runs `cvm audit` under qemu-user over every fixture (the native engine compiled for aarch64,
# and engine.wasm compiled by wasmtime's aarch64 backend), and compares every outcome hash with
# the golden hashes committed by the x86_64 runs. Then it imports the character language model of
# fixtures/onnx/charlm on aarch64 and generates 32 tokens from its committed prompt with both
# engines: the ids, gas and hash chain must be the bytes of generate-32.json, which the x86_64
# test host/cli/tests/generate.rs pins. Exit status 1 on any mismatch.
#
# From scratch on a fresh Debian machine (installs what it needs; run as root or with sudo):
#   bash scripts/cross-arch.sh
# Prints the audit tables and a summary line per engine.
set -euo pipefail
cd "$(dirname "$0")/.."

sudo_if_needed() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

if ! command -v aarch64-linux-gnu-gcc >/dev/null || ! command -v qemu-aarch64 >/dev/null; then
  sudo_if_needed apt-get update -qq
  sudo_if_needed apt-get install -y -qq gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user >/dev/null
fi
rustup target add --toolchain 1.95.0 aarch64-unknown-linux-gnu wasm32-unknown-unknown

export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
export CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc
cargo build --release --locked --target aarch64-unknown-linux-gnu -p cvm-cli --bin cvm

cvm="target/aarch64-unknown-linux-gnu/release/cvm"
run() { qemu-aarch64 -L /usr/aarch64-linux-gnu "$cvm" "$@"; }

echo "== $(run version | head -1) under $(qemu-aarch64 --version | head -1)"
status=0
run audit fixtures --engine native || status=1
run audit fixtures --engine wasm || status=1

charlm=fixtures/onnx/charlm
imported="$(mktemp -d)/charlm.cvm"
run import "$charlm/charlm_dynamo.onnx" --calibrate "$charlm/calibration_ids.npy" -o "$imported" >/dev/null
for engine in native wasm; do
  if run generate "$imported" --ids "$charlm/prompt.npy" --tokens 32 --engine "$engine" --json |
    cmp -s - "$charlm/generate-32.json"; then
    echo "generate ($engine): 32 tokens of the imported character model, the same ids, gas and chain as on x86_64"
  else
    echo "generate ($engine): DIFFERS from $charlm/generate-32.json"
    status=1
  fi
done
if [ "$status" -eq 0 ]; then
  echo "cross-arch: every fixture hash and the generated chain on aarch64 (native and wasm) equal the golden x86_64 ones"
else
  echo "cross-arch: MISMATCHES (see the tables above)"
fi
exit "$status"
