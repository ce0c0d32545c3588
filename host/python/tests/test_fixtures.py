"""Every fixture case through the Python package, natively and in wasm: its outcome hash must
equal the case's blessed hash and the hash `cvm audit` computes with the `cvm` tool."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Tuple

import numpy as np
import pytest

import cvm_engine

from conftest import FIXTURES


def case_files() -> List[Path]:
    """The case files as `cvm_fixtures::cases_in` finds them."""
    files: List[Path] = []
    for area in ("ops", "models"):
        for path in (FIXTURES / area).rglob("*.json"):
            if path.name == "model.json" or "data" in path.relative_to(FIXTURES).parts[:-1]:
                continue
            files.append(path)
    return sorted(files)


CASES = case_files()


def case_name(path: Path) -> str:
    return path.relative_to(FIXTURES).with_suffix("").as_posix()


def native_endian(array: np.ndarray) -> np.ndarray:
    """An array as numpy loaded it, in native byte order and C order."""
    if array.dtype.byteorder not in ("=", "|"):
        array = array.astype(array.dtype.newbyteorder("="))
    return np.ascontiguousarray(array)


def input_array(source, directory: Path) -> np.ndarray:
    if isinstance(source, str):
        return native_endian(np.load(directory / source))
    data = np.array(source["data"], dtype=np.int64)
    return data.reshape(source["shape"])


def run_case(runtime: cvm_engine.Runtime, path: Path, engine: str) -> Tuple[str, int]:
    """The case's outcome hash (hex) and gas on `engine`, as `cvm audit` runs it."""
    case = json.loads(path.read_text())
    directory = path.parent
    schedule = case.get("schedule", 1)
    model_source = case["model"]
    try:
        if isinstance(model_source, str):
            model = runtime.load(directory / model_source, schedule=schedule, engine=engine)
        else:
            text = json.dumps(model_source).encode()
            model = runtime.load(text, schedule=schedule, engine=engine, base_dir=directory)
    except cvm_engine.RejectedError as rejection:
        return rejection.result.hash_hex, rejection.result.gas_used
    given = case.get("inputs", {})
    declared = [info.name for info in model.inputs]
    # Declared inputs in order, then the inputs the model does not declare (which the engine
    # refuses deterministically), as `cvm audit` passes them.
    names = [name for name in declared if name in given]
    names += [name for name in given if name not in declared]
    arrays = [input_array(given[name], directory) for name in names]
    result = model.run(arrays, gas_limit=case.get("gas_limit"), check_shapes=False)
    return result.hash_hex, result.gas_used


@pytest.mark.parametrize("engine", ["native", "wasm"])
@pytest.mark.parametrize("path", CASES, ids=case_name)
def test_fixture_hash_equals_blessed_and_cli(runtime, cli_hashes, path: Path, engine: str):
    expected = json.loads(path.read_text()).get("expected")
    if expected is None:
        pytest.skip("the case has no blessed outcome")
    got, gas = run_case(runtime, path, engine)
    assert got == expected["hash"]
    assert gas == expected["gas_used"]
    row = cli_hashes[case_name(path)]
    assert row[engine] == got


def test_every_fixture_was_found():
    assert len(CASES) > 300
