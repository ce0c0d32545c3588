"""The numpy half of docs/python.md's worked example: import an ONNX model, evaluate the
integer model on a dataset, estimate its gas, and compare an outcome hash with the `cvm` tool's.

    python host/python/examples/evaluate.py DIR [CVM]

reads DIR/digits.onnx, DIR/calibration.npy, DIR/images.npy and DIR/labels.npy (as
export_torch.py writes them), writes the model directory DIR/digits.cvm, and, given the path of
a `cvm` binary, checks that `cvm run` gives the same hash.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

import cvm_engine


def main(work: Path, cvm: str | None) -> None:
    # 1. Import: calibrate on 200 images; compare the float and integer models on the others.
    model_dir, report = cvm_engine.import_onnx(
        work / "digits.onnx",
        work / "calibration.npy",
        validate=work / "images.npy",
        labels=work / "labels.npy",
        out=work / "digits.cvm",
    )
    validation = report["validation"]
    print(f"imported: {report['operators']} operators, {report['gas']} gas per inference")
    print(f"float accuracy {validation['float_correct']}/{validation['samples']}, "
          f"integer {validation['integer_correct']}/{validation['samples']}")

    # 2. Load the integer model and evaluate it on the dataset, every image in one call.
    runtime = cvm_engine.Runtime()
    model = runtime.load(model_dir)
    print("inputs:", model.inputs, "outputs:", model.outputs)
    images = np.load(work / "images.npy")  # float32, quantized as quantization.json says
    labels = np.load(work / "labels.npy")
    batch = model.run_batch(images)
    logits = batch.outputs[model.outputs[0].name]  # int32 (597, 10)
    correct = int((logits.argmax(axis=1) == labels).sum())
    print(f"engine accuracy {correct}/{len(labels)}")
    assert correct == validation["integer_correct"]

    # 3. Gas: known before running, equal to what each run is charged.
    estimate = model.estimate()
    print(f"gas {estimate['total_gas']}, peak memory {estimate['peak_memory_bytes']} bytes")
    for node in estimate["nodes"][:3]:
        print(f"  {node['name']:<12} {node['op']:<16} {node['gas']}")
    assert (batch.gas_used == estimate["total_gas"]).all()

    # 4. Hash: one image's outcome, as every node computes it.
    result = model.run(images[:1])
    print("hash", result.hash_hex)
    assert result.hash == batch.hashes[0]
    if cvm is not None:
        np.save(work / "image.npy", images[:1])
        printed = subprocess.run(
            [cvm, "run", str(model_dir), "--input", str(work / "image.npy"), "--json"],
            capture_output=True, text=True, check=True,
        ).stdout
        assert json.loads(printed)["hash"] == result.hash_hex
        print("cvm run gives the same hash")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else None)
