"""The Python side of the `batch` bench (benches/benches/batch.rs): the 1,797 digits images
through `model.run_batch` and through 1,797 calls of `model.run`, median of 10 rounds each,
printed per sample. Run with the package installed (`pip install ./host/python`):

    python benches/python_batch.py
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import numpy as np

import cvm_engine

DIGITS = Path(__file__).resolve().parents[1] / "fixtures" / "models" / "digits"
ROUNDS = 10


def median_seconds(work) -> float:
    times = []
    for _ in range(ROUNDS):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    model = cvm_engine.Runtime().load(DIGITS)
    images = np.load(DIGITS / "inputs.npy")
    count = len(images)
    model.run_batch(images[:16])  # warm the instance pool
    batch = median_seconds(lambda: model.run_batch(images))
    singles = median_seconds(lambda: [model.run(images[i : i + 1]) for i in range(count)])
    print(f"run_batch: {batch * 1e6 / count:.1f} µs per sample ({batch:.3f} s for {count})")
    print(f"run:       {singles * 1e6 / count:.1f} µs per sample ({singles:.3f} s for {count})")


if __name__ == "__main__":
    main()
