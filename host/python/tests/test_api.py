"""Every call of `cvm_engine`, its error paths, and the batch run over the digits images."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import cvm_engine
from cvm_engine import (
    ClosedError,
    CvmError,
    EngineError,
    InputError,
    OnnxImportError,
    ReadError,
    RejectedError,
)

from conftest import FIXTURES, ROOT, cvm_binary

DIGITS = FIXTURES / "models" / "digits"
DIGITS_HASH = "9c8892999a4d0c1cf7f24f171ee1ed3323ff967e4291607f3c73410a2b310058"
ONNX_DIGITS = FIXTURES / "onnx" / "digits"


@pytest.fixture(scope="module")
def digits(runtime):
    return runtime.load(DIGITS)


@pytest.fixture(scope="module")
def image():
    return np.load(DIGITS / "input_2.npy")


def test_exceptions_share_one_base():
    for kind in (ReadError, InputError, RejectedError, EngineError, ClosedError, OnnxImportError):
        assert issubclass(kind, CvmError)
    assert issubclass(CvmError, Exception)


def test_module_facts():
    assert len(cvm_engine.engine_wasm_sha3()) == 64
    assert 1 in cvm_engine.schedules()
    assert cvm_engine.__version__


def test_the_readme_run(digits, image):
    result = digits.run(image)
    assert result.ok
    assert result.gas_used == 1762167
    assert result.hash_hex == DIGITS_HASH
    assert result.hash == bytes.fromhex(DIGITS_HASH)
    assert result.error is None
    logits = result.outputs["fc2"]
    assert logits.dtype == np.int32 and logits.shape == (1, 10)
    assert logits.tolist() == [[-6190, -3130, 12087, -3799, -5834, -7656, -3713, -7083, -3663, -14441]]
    assert np.array_equal(result.output, logits)
    assert result.precisions == [("fc2", 26)]
    assert len(result.hash_with("keccak256")) == 32
    assert result.hash_with("sha3-256") == result.hash
    assert "ok=True" in repr(result)


def test_inputs_outputs_and_estimate(digits):
    (data,) = digits.inputs
    assert (data.name, data.shape, data.precision) == ("data", [1, 1, 28, 28], 8)
    (fc2,) = digits.outputs
    assert (fc2.name, fc2.shape, fc2.precision) == ("fc2", [1, 10], 26)
    assert digits.schedule == 1 and digits.engine == "wasm"
    assert digits.quantization is None
    estimate = digits.estimate()
    assert estimate["total_gas"] == 1762167
    assert estimate["total_gas"] == estimate["run_gas"] + sum(n["gas"] for n in estimate["nodes"])
    assert estimate["peak_memory_bytes"] > 0 and estimate["arena_bytes"] > 0
    assert {"name", "op", "gas"} <= set(estimate["nodes"][0])
    assert estimate["legacy_gas"] is not None


def test_estimate_equals_the_cli(digits):
    binary = cvm_binary()
    if binary is None:
        pytest.skip("no cvm binary")
    printed = subprocess.run(
        [str(binary), "estimate", str(DIGITS), "--json"], capture_output=True, text=True, check=True
    ).stdout
    assert json.loads(printed)["nodes"] == digits.estimate()["nodes"]
    assert json.loads(printed)["total_gas"] == digits.estimate()["total_gas"]


def test_every_way_of_passing_inputs(digits, image):
    for given in (image, {"data": image}, [image], (image,)):
        assert digits.run(given).hash_hex == DIGITS_HASH
    for dtype in (np.int16, np.int32, np.int64, np.float32):
        converted = image.astype(dtype)
        if dtype == np.float32:
            with pytest.raises(InputError, match="float32 input needs the model's quantization"):
                digits.run(converted)
        else:
            assert digits.run(converted).hash_hex == DIGITS_HASH


def test_native_engine_gives_the_same_outcome(runtime, image):
    native = runtime.load(DIGITS, engine="native")
    assert native.engine == "native"
    assert native.run(image).hash_hex == DIGITS_HASH


def test_model_from_bytes_and_text(runtime, tmp_path):
    text = (FIXTURES / "models" / "cnn" / "model.json").read_bytes()
    case = json.loads((FIXTURES / "models" / "cnn" / "case.json").read_text())
    from_path = runtime.load(FIXTURES / "models" / "cnn" / "model.json")
    from_bytes = runtime.load(text, base_dir=FIXTURES / "models" / "cnn")
    x = np.load(FIXTURES / "models" / "cnn" / "input.npy")
    assert from_path.run(x).hash_hex == case["expected"]["hash"]
    assert from_bytes.run(x).hash_hex == case["expected"]["hash"]


def test_deterministic_errors_are_results(digits, image):
    result = digits.run(image, gas_limit=1000)
    assert not result.ok
    assert result.outputs == {} and result.output is None
    assert result.error.code == "OutOfGas"
    assert result.error.code_num == 403
    assert result.error.message
    assert len(result.hash) == 32
    assert "OutOfGas" in repr(result)
    # An integer input of another shape is judged by the engine when asked to.
    judged = digits.run(image.reshape(1, 28, 28, 1), check_shapes=False)
    assert not judged.ok and judged.error.code_num > 0


def test_rejected_models_carry_their_outcome(runtime, tmp_path):
    with pytest.raises(RejectedError) as caught:
        runtime.load(DIGITS, schedule=999)
    result = caught.value.result
    assert result.error.code == "UnsupportedVersion" and result.error.code_num == 101
    assert result.gas_used == 0
    with pytest.raises(RejectedError) as garbage:
        runtime.load(b"\x00not a model")
    assert garbage.value.result.error.code_num > 0
    (tmp_path / "symbol").write_text("{}")
    (tmp_path / "params").write_bytes(b"")
    with pytest.raises((RejectedError, ReadError)):
        runtime.load(tmp_path)


BAD_INPUTS = [
    ("float64", lambda x: x.astype(np.float64), "dtype float64 is not supported"),
    ("bool", lambda x: x.astype(bool), "dtype bool is not supported"),
    ("complex", lambda x: x.astype(np.complex64), "is not supported"),
    ("object", lambda x: x.astype(object), "is not supported"),
    ("big-endian", lambda x: x.astype(">i4"), "is not supported"),
    ("non-contiguous", lambda x: np.repeat(x, 2, axis=3)[..., ::2], "not C-contiguous"),
    ("transposed", lambda x: x.transpose(0, 1, 3, 2), "not C-contiguous"),
    ("wrong shape", lambda x: x.reshape(1, 28, 28), "shape \\[1, 28, 28\\], the model's input is \\[1, 1, 28, 28\\]"),
    ("outside int32", lambda x: x.astype(np.int64) * 2**40 + 1, "outside int32"),
    ("a list", lambda x: x.tolist(), "expected a numpy array"),
    ("None", lambda x: None, "expected a numpy array"),
    ("a scalar", lambda x: np.int32(3), "expected a numpy array"),
    ("unknown name", lambda x: {"image": x}, "no input \"image\""),
    ("missing name", lambda x: {}, "no value for input \"data\""),
    ("non-string name", lambda x: {1: x}, "input names are strings"),
    ("too many arrays", lambda x: [x, x], "2 arrays for 1 inputs"),
]


@pytest.mark.parametrize(
    "make, message", [b[1:] for b in BAD_INPUTS], ids=[b[0] for b in BAD_INPUTS]
)
def test_bad_inputs_raise_input_error(digits, image, make, message):
    with pytest.raises(InputError, match=message):
        digits.run(make(image))


def test_bad_arguments(runtime, digits, image):
    with pytest.raises(InputError, match="engine"):
        runtime.load(DIGITS, engine="gpu")
    with pytest.raises(InputError, match="hash algorithm"):
        digits.run(image).hash_with("md5")
    with pytest.raises(InputError, match="a path"):
        runtime.load(12)
    with pytest.raises(OverflowError):
        digits.run(image, gas_limit=-1)


def test_missing_and_malformed_files(runtime, tmp_path):
    with pytest.raises(ReadError, match="no such file"):
        runtime.load(tmp_path / "absent.cvm")
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "cvm-text/1", "inputs": 3}')
    with pytest.raises(ReadError):
        runtime.load(bad)


def test_closed_runtime_and_model(image):
    with cvm_engine.Runtime() as runtime:
        model = runtime.load(DIGITS)
        assert model.run(image).ok
        assert not runtime.closed
    assert runtime.closed
    with pytest.raises(ClosedError, match="runtime is closed"):
        model.run(image)
    with pytest.raises(ClosedError):
        model.run_batch(image)
    with pytest.raises(ClosedError):
        runtime.load(DIGITS)
    other = cvm_engine.Runtime()
    model = other.load(DIGITS)
    model.close()
    with pytest.raises(ClosedError, match="model is closed"):
        model.run(image)
    assert "closed=False" in repr(other)


def test_module_cache_dir(tmp_path, image):
    first = cvm_engine.Runtime(cache_dir=tmp_path)
    second = cvm_engine.Runtime(cache_dir=tmp_path)
    assert second.load(DIGITS).run(image).hash_hex == first.load(DIGITS).run(image).hash_hex


def test_batch_equals_single_runs_over_every_digit(digits):
    images = np.load(DIGITS / "inputs.npy")
    assert images.shape[0] == 1797
    batch = digits.run_batch(images)
    assert len(batch) == 1797
    assert batch.ok.all()
    logits = batch.outputs["fc2"]
    assert logits.shape == (1797, 10)
    predictions = np.load(DIGITS / "int_predictions.npy")
    assert np.array_equal(logits.argmax(axis=1), predictions)
    for index in range(1797):
        single = digits.run(images[index : index + 1])
        assert np.array_equal(single.outputs["fc2"][0], logits[index])
        assert single.hash == batch.hashes[index]
        assert single.gas_used == batch.gas_used[index]
    assert batch[-1].hash_hex == batch.hashes_hex[-1]
    assert "samples=1797" in repr(batch)
    with pytest.raises(IndexError):
        batch[1797]


def test_batch_hashes_equal_the_cli(digits, tmp_path):
    binary = cvm_binary()
    if binary is None:
        pytest.skip("no cvm binary")
    images = np.load(DIGITS / "inputs.npy")[:50]
    np.save(tmp_path / "batch.npy", images)
    hashes = tmp_path / "hashes.txt"
    subprocess.run(
        [str(binary), "run", str(DIGITS), "--input", str(tmp_path / "batch.npy"), "--batch",
         "--hashes", str(hashes), "--no-cache"],
        check=True, capture_output=True,
    )
    printed = hashes.read_text()
    for expected in digits.run_batch(images).hashes_hex:
        assert expected in printed


def test_batch_errors(digits, image):
    images = np.load(DIGITS / "inputs.npy")[:4]
    with pytest.raises(InputError, match="\\(N, 1, 28, 28\\)"):
        digits.run_batch(image.reshape(28, 28))
    with pytest.raises(InputError, match="N ≥ 1"):
        digits.run_batch(images[:0])
    with pytest.raises(InputError, match="not C-contiguous"):
        digits.run_batch(images[::2])
    with pytest.raises(InputError, match="float32 input needs"):
        digits.run_batch(images.astype(np.float32))
    failed = digits.run_batch(images, gas_limit=10)
    assert not failed.ok.any()
    assert (failed.outputs["fc2"] == 0).all()
    assert failed[0].error.code == "OutOfGas"


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    out = tmp_path_factory.mktemp("imported") / "digits"
    directory, report = cvm_engine.import_onnx(
        ONNX_DIGITS / "model.onnx",
        ONNX_DIGITS / "calibration.npy",
        validate=ONNX_DIGITS / "images.npy",
        labels=ONNX_DIGITS / "labels.npy",
        out=out,
    )
    return Path(directory), report


def test_import_onnx_report_and_directory(imported):
    directory, report = imported
    assert {p.name for p in directory.iterdir()} >= {"symbol", "params", "model.cvm", "quantization.json"}
    assert report["calibration"]["samples"] == 200
    assert report["validation"]["samples"] == 1797
    assert report["validation"]["integer_correct"] is not None
    assert report["gas"] > 0 and report["operators"] > 0


def test_import_report_equals_the_cli(imported, tmp_path):
    binary = cvm_binary()
    if binary is None:
        pytest.skip("no cvm binary")
    _, report = imported
    printed = subprocess.run(
        [str(binary), "import", str(ONNX_DIGITS / "model.onnx"), "--calibrate",
         str(ONNX_DIGITS / "calibration.npy"), "--validate", str(ONNX_DIGITS / "images.npy"),
         "--labels", str(ONNX_DIGITS / "labels.npy"), "-o", str(tmp_path / "cli"), "--json"],
        capture_output=True, text=True, check=True,
    ).stdout
    cli = json.loads(printed)
    for key in ("operators", "gas", "layers", "ranges", "calibration", "validation", "input", "output"):
        assert cli[key] == report[key]


def test_imported_model_takes_float32_as_the_cli_quantizes(runtime, imported, tmp_path):
    directory, report = imported
    model = runtime.load(directory)
    assert model.quantization["input"]["shape"] == [1, 1, 28, 28]
    images = np.load(ONNX_DIGITS / "images.npy")
    labels = np.load(ONNX_DIGITS / "labels.npy")
    batch = model.run_batch(images)
    correct = int((batch.outputs[model.outputs[0].name].argmax(axis=1) == labels).sum())
    assert correct == report["validation"]["integer_correct"]
    single = model.run(images[:1])
    assert single.hash == batch.hashes[0]
    assert model.estimate()["total_gas"] == report["gas"]
    binary = cvm_binary()
    if binary is not None:
        np.save(tmp_path / "image.npy", images[:1])
        printed = subprocess.run(
            [str(binary), "run", str(directory), "--input", str(tmp_path / "image.npy"),
             "--json", "--no-cache"],
            capture_output=True, text=True, check=True,
        ).stdout
        assert json.loads(printed)["hash"] == single.hash_hex
    with pytest.raises(InputError, match="float32 input of shape"):
        model.run(images[:1].reshape(1, 28, 28, 1))
    with pytest.raises(InputError, match="dtype float64"):
        model.run(images[:1].astype(np.float64))


def test_import_errors(tmp_path):
    with pytest.raises(InputError, match="--labels needs --validate"):
        cvm_engine.import_onnx(ONNX_DIGITS / "model.onnx", ONNX_DIGITS / "calibration.npy",
                               labels=ONNX_DIGITS / "labels.npy", out=tmp_path / "a")
    with pytest.raises(ReadError):
        cvm_engine.import_onnx(ONNX_DIGITS / "model.onnx", tmp_path / "absent.npy", out=tmp_path / "b")
    with pytest.raises(OnnxImportError):
        cvm_engine.import_onnx(FIXTURES / "onnx" / "bad" / "garbage.onnx",
                               ONNX_DIGITS / "calibration.npy", out=tmp_path / "c")
    with pytest.raises(OnnxImportError):
        cvm_engine.import_onnx(tmp_path / "absent.onnx", ONNX_DIGITS / "calibration.npy",
                               out=tmp_path / "d")
    with pytest.raises(ReadError, match="not float32"):
        cvm_engine.import_onnx(ONNX_DIGITS / "model.onnx", ONNX_DIGITS / "labels.npy",
                               out=tmp_path / "e")
    with pytest.raises(OnnxImportError):
        cvm_engine.import_onnx(FIXTURES / "onnx" / "ops" / "avgpool.onnx",
                               ONNX_DIGITS / "calibration.npy", out=tmp_path / "h")
    with pytest.raises(InputError, match="negative"):
        cvm_engine.import_onnx(ONNX_DIGITS / "model.onnx", ONNX_DIGITS / "calibration.npy",
                               input_shapes={"data": [-1, 1]}, out=tmp_path / "f")
    with pytest.raises(InputError):
        cvm_engine.import_onnx(ONNX_DIGITS / "model.onnx", ONNX_DIGITS / "calibration.npy",
                               schedule=999, out=tmp_path / "g")
    file = tmp_path / "file"
    file.write_text("")
    with pytest.raises(InputError, match="not a directory"):
        cvm_engine.import_onnx(ONNX_DIGITS / "model.onnx", ONNX_DIGITS / "calibration.npy", out=file)


def test_threads_share_a_model(digits, image):
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(4) as pool:
        hashes = set(pool.map(lambda _: digits.run(image).hash_hex, range(16)))
    assert hashes == {DIGITS_HASH}


def test_an_unwritable_import_directory(tmp_path):
    if shutil.which("id") is None:
        pytest.skip("no id")
    blocker = tmp_path / "blocked"
    blocker.write_text("")
    with pytest.raises(CvmError):
        cvm_engine.import_onnx(ONNX_DIGITS / "model.onnx", ONNX_DIGITS / "calibration.npy",
                               out=blocker / "sub")


def test_the_documented_example(tmp_path, capsys):
    """docs/python.md's numpy half (examples/evaluate.py), on the committed digits ONNX model
    in place of the one examples/export_torch.py trains (which needs torch)."""
    import importlib.util

    for name, source in (("digits.onnx", "model.onnx"), ("calibration.npy", "calibration.npy"),
                         ("images.npy", "images.npy"), ("labels.npy", "labels.npy")):
        (tmp_path / name).symlink_to(ONNX_DIGITS / source)
    spec = importlib.util.spec_from_file_location(
        "evaluate", ROOT / "host" / "python" / "examples" / "evaluate.py"
    )
    assert spec is not None and spec.loader is not None
    evaluate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(evaluate)
    binary = cvm_binary()
    evaluate.main(tmp_path, None if binary is None else str(binary))
    printed = capsys.readouterr().out
    assert "engine accuracy" in printed and "hash" in printed


def test_token_ids_outside_the_vocabulary_are_refused(runtime, tmp_path):
    charlm = FIXTURES / "onnx" / "charlm"
    directory, report = cvm_engine.import_onnx(
        charlm / "charlm_dynamo.onnx", charlm / "calibration_ids.npy",
        out=tmp_path / "charlm", smooth=True,
    )
    assert any("SmoothQuant moved the scales" in note for note in report["notes"])
    vocabulary = len((charlm / "vocabulary.txt").read_text().splitlines())
    assert report["inputs"][0]["holds"] == {"token_ids": vocabulary}
    model = runtime.load(Path(directory))
    ids = np.load(charlm / "validation_ids.npy")
    assert model.run(ids[:1]).ok
    window = ids[:1].copy()
    window[0, 3] = vocabulary
    with pytest.raises(InputError, match=f"value {vocabulary} at index 3 is not a token id"):
        model.run(window)
    batch = ids[:4].copy()
    batch[2, 5] = -1
    with pytest.raises(InputError, match="sample 2: value -1 at index 5 is not a token id"):
        model.run_batch(batch)
