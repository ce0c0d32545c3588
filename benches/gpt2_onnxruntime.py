#!/usr/bin/env python3
"""onnxruntime's time for the GPT-2-small-shaped model of the `gpt2` bench, beside the engine's.

`cargo bench -p cvm-benches --bench gpt2` writes the float ONNX model (`model.onnx` and its
external data) and the window of token ids it runs (`ids.npy`) into target/gpt2/. This script
quantizes that model with onnxruntime's `quantize_dynamic` (int8 weights, activations quantized
per batch at run time, its default settings) and times one forward pass over the same window
on the CPU provider with one thread, as the engine runs: the median of --runs runs after one
warm-up, for the float model and the int8 one.

    python3 -m venv venv && venv/bin/pip install numpy onnx onnxruntime
    venv/bin/python benches/gpt2_onnxruntime.py [--dir target/gpt2] [--runs 10]
"""

import argparse
import os
import statistics
import time

import numpy as np
import onnxruntime as ort
from onnxruntime.quantization import QuantType, quantize_dynamic


def session(path, optimized):
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    if not optimized:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])


def median_ms(sess, ids, runs):
    sess.run(None, {"ids": ids})
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        sess.run(None, {"ids": ids})
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default="target/gpt2")
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    model = os.path.join(args.dir, "model.onnx")
    ids = np.load(os.path.join(args.dir, "ids.npy")).astype(np.int64)
    quantized = os.path.join(args.dir, "model.int8.onnx")
    if not os.path.exists(quantized):
        quantize_dynamic(model, quantized, weight_type=QuantType.QInt8,
                         use_external_data_format=True)
    print(f"onnxruntime {ort.__version__}, one thread, one window of {ids.shape[1]} tokens")
    print(f"float32: {median_ms(session(model, True), ids, args.runs):.1f} ms")
    print(f"quantize_dynamic int8: {median_ms(session(quantized, True), ids, args.runs):.1f} ms")


if __name__ == "__main__":
    main()
