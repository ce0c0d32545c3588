"""Trains a small PyTorch CNN on the 1,797 digits images of the repository's fixtures and
exports it to ONNX: the first step of docs/python.md's worked example.

    python host/python/examples/export_torch.py OUT_DIR

trains on the first 1,200 images, and writes OUT_DIR/digits.onnx (with its weights beside it
in digits.onnx.data, as the default exporter writes them), OUT_DIR/calibration.npy (200 training
images), and the 597 held-out images and their digits as OUT_DIR/images.npy (float32, (597, 1,
28, 28)) and OUT_DIR/labels.npy. Needs torch, onnx and onnxscript (the exporter's); the rest of
the example needs only numpy and cvm_engine.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch
from torch import nn

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "onnx" / "digits"


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    images = np.load(FIXTURES / "images.npy")  # float32 (1797, 1, 28, 28)
    labels = np.load(FIXTURES / "labels.npy").astype(np.int64)
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(1, 8, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.Conv2d(8, 16, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(16 * 7 * 7, 10),
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    train, test = slice(0, 1200), slice(1200, None)
    x, y = torch.from_numpy(images[train]), torch.from_numpy(labels[train])
    for _ in range(60):
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        held_out = model(torch.from_numpy(images[test])).argmax(dim=1)
    accuracy = (held_out.numpy() == labels[test]).mean()
    print(f"float accuracy on the held-out images {accuracy:.4f}")
    torch.onnx.export(
        model,
        (torch.zeros(1, 1, 28, 28),),
        str(out / "digits.onnx"),
        input_names=["data"],
        output_names=["logits"],
    )
    rng = np.random.default_rng(0)
    np.save(out / "calibration.npy", images[train][rng.permutation(1200)[:200]])
    np.save(out / "images.npy", images[test])
    np.save(out / "labels.npy", labels[test].astype(np.int32))
    print(f"wrote {out / 'digits.onnx'}")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "digits-example"))
