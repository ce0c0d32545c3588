#!/usr/bin/env bash
# Cross-architecture determinism check: builds the `cvm` tool for aarch64-unknown-linux-gnu,
# runs `cvm audit` under qemu-user over every fixture (the native engine compiled for aarch64,
# and engine.wasm compiled by wasmtime's aarch64 backend), and compares every outcome hash with
# the golden hashes committed by the x86_64 runs. Then it imports the character language model of
# fixtures/onnx/charlm on aarch64 and generates 32 tokens from its committed prompt with both
# engines: the ids, gas and hash chain must be the bytes of generate-32.json, which the x86_64
# test host/cli/tests/generate.rs pins. Last, it writes 1,200 random graphs
# (cvm_testgen::graphgen, the seeds of host/cli/tests/differential.rs), traces each on this
# machine with the native engine (the reference) and under qemu-aarch64 with both engines
# (`cvm trace --values`), and compares every aarch64 trace with the reference by `cvm diff`,
# printing the diff of any that differs; at least 1,000 graphs must be traced. Exit status 1 on
# any mismatch.
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

echo "== $(run version | sed -n 1p) under $(qemu-aarch64 --version | sed -n 1p)"
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

# Random graphs, traced node by node: the reference on this machine, then aarch64 under qemu.
cargo build --release --locked -p cvm-cli -p cvm-testgen --bin cvm --bin cvm-graphs
host_cvm=target/release/cvm
graphs="$(mktemp -d)"
wasm_cache="$(mktemp -d)"
target/release/cvm-graphs "$graphs" 1200
traced=0
diverged=0
while read -r name schedule count; do
  inputs=()
  for ((k = 0; k < count; k++)); do inputs+=(--input "$graphs/$name.in$k.npy"); done
  reference="$graphs/$name.x86_64.trace"
  # Exit status 1 is a run that fails deterministically, still traced; a model the engine
  # rejects at load has no trace, and nothing to compare.
  "$host_cvm" trace "$graphs/$name.cvm" "${inputs[@]}" --engine native --schedule "$schedule" \
    --values -o "$reference" >/dev/null 2>&1 || true
  [ -f "$reference" ] || continue
  traced=$((traced + 1))
  for engine in native wasm; do
    traced_here="$graphs/$name.aarch64-$engine.trace"
    run trace "$graphs/$name.cvm" "${inputs[@]}" --engine "$engine" --schedule "$schedule" \
      --values --cache-dir "$wasm_cache" -o "$traced_here" >/dev/null 2>&1 || true
    if [ ! -f "$traced_here" ]; then
      echo "random graph $name ($engine): no trace on aarch64, where x86_64 has one"
      diverged=$((diverged + 1))
      continue
    fi
    if ! "$host_cvm" diff "$reference" "$traced_here" >"$graphs/$name.$engine.diff" 2>&1; then
      echo "random graph $name ($engine): aarch64 differs from x86_64:"
      sed 's/^/  /' "$graphs/$name.$engine.diff"
      diverged=$((diverged + 1))
    fi
  done
done <"$graphs/manifest"
echo "random graphs: $traced traced on x86_64 and under qemu-aarch64 (native and wasm), $diverged traces differ"
if [ "$diverged" -ne 0 ]; then status=1; fi
if [ "$traced" -lt 1000 ]; then
  echo "random graphs: only $traced of 1200 graphs could be traced; at least 1000 must be"
  status=1
fi

if [ "$status" -eq 0 ]; then
  echo "cross-arch: every fixture hash, the generated chain and every random graph's trace on aarch64 (native and wasm) equal the x86_64 ones"
else
  echo "cross-arch: MISMATCHES (see the tables above)"
fi
exit "$status"
