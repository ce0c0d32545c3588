#!/usr/bin/env bash
# Prints the figures of benches/README.md from the latest criterion results: every bench's
# median time and throughput (as README table rows), multiply-accumulates (or other work
# elements) per second and per cycle, the wasm / native ratio of every model and kernel, each
# kernel alone in wasm (its wasm_xN bench less its wasm bench, over N - 1), and what metering
# costs.
#
# Usage: benches/report.sh [CRITERION_DIR]      (default: target/criterion of the workspace)
# The clock is the one the clock bench measured (criterion's throughput of
# clock/dependent_operations: cargo bench -p cvm-benches --bench clock), else the first
# "cpu MHz" of /proc/cpuinfo, which is the nominal clock; set CPU_MHZ to override both.
# Needs python3 (standard library only).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
dir="${1:-${CARGO_TARGET_DIR:-$here/../target}/criterion}"
nominal="$(awk -F: '/^cpu MHz/ { print $2 + 0; exit }' /proc/cpuinfo 2>/dev/null || true)"

exec python3 - "$dir" "${CPU_MHZ:-}" "${nominal:-}" <<'PY'
import json
import os
import sys

root, forced, nominal = sys.argv[1], sys.argv[2], sys.argv[3]
if not os.path.isdir(root):
    sys.exit(f"no criterion results in {root}; run cargo bench -p cvm-benches first")

# full id -> (median ns, elements per iteration or None, mtime). Criterion keeps one directory
# per bench; a bench whose directory name changed leaves a stale one with the same id, so the
# newest result wins.
benches = {}
for path, _, files in os.walk(root):
    if os.path.basename(path) != "new" or "benchmark.json" not in files:
        continue
    if "estimates.json" not in files:
        continue
    with open(os.path.join(path, "benchmark.json")) as f:
        meta = json.load(f)
    estimates_path = os.path.join(path, "estimates.json")
    with open(estimates_path) as f:
        estimates = json.load(f)
    mtime = os.path.getmtime(estimates_path)
    full_id = meta["full_id"]
    if full_id in benches and benches[full_id][2] > mtime:
        continue
    elements = (meta.get("throughput") or {}).get("Elements")
    benches[full_id] = (estimates["median"]["point_estimate"], elements, mtime)


def time(ns):
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.3g} ns"


def rate(per_second):
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if per_second >= scale:
            return f"{per_second / scale:.3g} {unit}/s"
    return f"{per_second:.3g} /s"


def category(full_id):
    for order, prefix in enumerate(("kernels/", "metering/", "startup/", "clock/")):
        if full_id.startswith(prefix):
            return order + 1
    return 0


ids = sorted(benches, key=lambda full_id: (category(full_id), full_id))

clock = benches.get("clock/dependent_operations")
if forced:
    hz, source = float(forced) * 1e6, "CPU_MHZ"
elif clock and clock[1]:
    hz, source = clock[1] / (clock[0] / 1e9), "measured by clock/dependent_operations"
elif nominal:
    hz, source = float(nominal) * 1e6, "nominal, /proc/cpuinfo"
else:
    sys.exit("no clock: run cargo bench -p cvm-benches --bench clock, or set CPU_MHZ")
print(f"Clock: {hz / 1e6:.0f} MHz ({source}). Per cycle = per second / {hz:.4g}.")
print()
print("| bench | time (median) | throughput | per cycle |")
print("| --- | --- | --- | --- |")
for full_id in ids:
    ns, elements, _ = benches[full_id]
    if elements:
        per_second = elements / (ns / 1e9)
        print(f"| `{full_id}` | {time(ns)} | {rate(per_second)} | {per_second / hz:.3f} |")
    else:
        print(f"| `{full_id}` | {time(ns)} | | |")


def ratio(a, b):
    return benches[a][0] / benches[b][0]


print()
print("| model or kernel | wasm / native |")
print("| --- | --- |")
for full_id in ids:
    if full_id.endswith("/wasm"):
        stem = full_id[: -len("/wasm")]
        if stem + "/native" in benches:
            print(f"| `{stem}` | {ratio(full_id, stem + '/native'):.2f} |")

rows = []
for full_id in ids:
    if full_id.startswith("kernels/") and "/wasm_x" in full_id:
        stem, copies = full_id.rsplit("/wasm_x", 1)
        copies = int(copies)
        one = stem + "/wasm"
        if one in benches and stem in benches and benches[stem][1]:
            node_ns = (benches[full_id][0] - benches[one][0]) / (copies - 1)
            per_second = benches[stem][1] / (node_ns / 1e9) if node_ns > 0 else float("nan")
            native_ns = benches[stem][0]
            rows.append(
                f"| `{stem}` | {time(native_ns)} | {benches[stem][1] / (native_ns / 1e9) / hz:.3f} "
                f"| {time(node_ns)} | {per_second / hz:.3f} | {node_ns / native_ns:.2f} |"
            )
if rows:
    print()
    print("Kernels alone: natively the operator bench, in wasm (wasm_xN - wasm) / (N - 1).")
    print()
    print("| kernel | native | per cycle | wasm | per cycle | wasm / native |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    print("\n".join(rows))

rows = []
for full_id in ids:
    if full_id.startswith("metering/") and full_id.endswith("/native_metered"):
        model = full_id[len("metering/") : -len("/native_metered")]
        unmetered = f"metering/{model}/native_unmetered"
        fuel_off = f"metering/{model}/wasm_fuel_off"
        native = f"{ratio(full_id, unmetered):.3f}" if unmetered in benches else ""
        wasm = ""
        if fuel_off in benches and f"{model}/wasm" in benches:
            wasm = f"{ratio(model + '/wasm', fuel_off):.3f}"
        rows.append(f"| `{model}` | {native} | {wasm} |")
if rows:
    print()
    print("| model | native metered / unmetered | wasm fuel on / off |")
    print("| --- | --- | --- |")
    print("\n".join(rows))
PY
