"""Deterministic integer inference for blockchains: load, run, estimate, import and audit CVM
models from numpy. See docs/python.md."""

from __future__ import annotations

import os
from types import TracebackType
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Type, Union

import numpy as np
import numpy.typing as npt

__version__: str

PathLike = Union[str, "os.PathLike[str]"]
Inputs = Union[npt.NDArray[np.generic], Mapping[str, npt.NDArray[np.generic]], Sequence[npt.NDArray[np.generic]]]

class CvmError(Exception):
    """Base class of every failure of this node (never a deterministic outcome)."""

class ReadError(CvmError):
    """A model, quantization or sample file cannot be read or parsed."""

class InputError(CvmError):
    """An input cannot be given to the model (dtype, contiguity, shape, names, int32 range)."""

class RejectedError(CvmError):
    """The engine rejected the model at load: deterministic; `result` holds its outcome."""

    result: RunResult

class EngineError(CvmError):
    """The wasm runtime of this node failed; the run was not judged."""

class ClosedError(CvmError):
    """The runtime or model was closed."""

class OnnxImportError(CvmError):
    """An ONNX model cannot be imported."""

class TensorInfo:
    """A declared input or output of a model."""

    @property
    def name(self) -> str: ...
    @property
    def shape(self) -> List[int]: ...
    @property
    def precision(self) -> int:
        """Bits: every value satisfies |x| <= 2**(precision - 1) - 1."""

class RunError:
    """The deterministic error of a load or run: the same on every node."""

    @property
    def code(self) -> str:
        """The error code's name (OutOfGas, ...)."""
    @property
    def code_num(self) -> int:
        """The frozen number of the code (hashed)."""
    @property
    def node(self) -> Optional[str]:
        """The failing node's name, when one failed."""
    @property
    def node_index(self) -> Optional[int]:
        """The failing node's index, when one failed (hashed)."""
    @property
    def message(self) -> str:
        """The engine's message for people (never hashed)."""

class RunResult:
    """The outcome of one run or of a rejected load, with the hash every node compares."""

    @property
    def ok(self) -> bool: ...
    @property
    def outputs(self) -> Dict[str, npt.NDArray[np.int32]]:
        """The outputs by name, in declared order; empty on failure."""
    @property
    def output(self) -> Optional[npt.NDArray[np.int32]]:
        """The first (for most models the only) output; None on failure."""
    @property
    def precisions(self) -> List[Tuple[str, int]]: ...
    @property
    def gas_used(self) -> int: ...
    @property
    def hash(self) -> bytes:
        """SHA3-256 of the outcome, equal to `cvm run`'s."""
    @property
    def hash_hex(self) -> str: ...
    def hash_with(self, algorithm: str) -> bytes:
        """The outcome's hash under "sha3-256" or "keccak256"."""
    @property
    def error(self) -> Optional[RunError]: ...

class BatchResult:
    """The outcomes of a batch run, one per sample."""

    def __len__(self) -> int: ...
    def __getitem__(self, index: int) -> RunResult: ...
    @property
    def outputs(self) -> Dict[str, npt.NDArray[np.int32]]:
        """Every sample's outputs stacked: (N, sample...) per output; failed rows are zeros."""
    @property
    def ok(self) -> npt.NDArray[np.bool_]: ...
    @property
    def gas_used(self) -> npt.NDArray[np.uint64]: ...
    @property
    def hashes(self) -> List[bytes]: ...
    @property
    def hashes_hex(self) -> List[str]: ...

class Model:
    """A model loaded under one gas schedule on one engine; runs release the GIL."""

    @property
    def inputs(self) -> List[TensorInfo]: ...
    @property
    def outputs(self) -> List[TensorInfo]: ...
    @property
    def schedule(self) -> int: ...
    @property
    def engine(self) -> str:
        """"wasm" or "native"."""
    @property
    def quantization(self) -> Optional[dict]:
        """An imported model's quantization.json as a dict; None for other models."""
    def run(
        self,
        inputs: Inputs,
        gas_limit: Optional[int] = None,
        check_shapes: bool = True,
    ) -> RunResult:
        """Runs once: an array, a dict by name or a list in order; integer dtypes, or float32
        for a model imported from ONNX. Deterministic errors are results, not exceptions."""
    def run_batch(
        self,
        inputs: Union[npt.NDArray[np.generic], Mapping[str, npt.NDArray[np.generic]]],
        gas_limit: Optional[int] = None,
    ) -> BatchResult:
        """Runs every sample of (N, sample...) arrays, the sample shape being the declared
        shape without its leading 1."""
    def estimate(self) -> dict:
        """Gas per node and in total, peak memory and arena bytes, as `cvm estimate --json`."""
    def close(self) -> None: ...

class Runtime:
    """The compiled engine; one per process."""

    def __init__(self, cache_dir: Optional[PathLike] = None) -> None: ...
    def load(
        self,
        model: Union[PathLike, bytes],
        schedule: int = 1,
        engine: str = "wasm",
        base_dir: Optional[PathLike] = None,
    ) -> Model:
        """Loads a canonical, text or CVM model, or a directory `import_onnx` wrote."""
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...
    def __enter__(self) -> Runtime: ...
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> bool: ...

def import_onnx(
    model: PathLike,
    calibration: Union[PathLike, Mapping[str, PathLike]],
    validate: Optional[Union[PathLike, Mapping[str, PathLike]]] = None,
    labels: Optional[PathLike] = None,
    out: Optional[PathLike] = None,
    per_tensor: bool = False,
    input_shapes: Optional[Mapping[str, Sequence[int]]] = None,
    schedule: int = 1,
    graph_output: Optional[str] = None,
    ranges: Optional[str] = None,
    smooth: bool = False,
) -> Tuple[str, dict]:
    """Imports an ONNX model as `cvm import` does; returns (model directory, report)."""

def engine_wasm_sha3() -> str:
    """SHA3-256 of the embedded engine.wasm, as `cvm version` prints it."""

def schedules() -> List[int]:
    """The gas schedule versions the engine defines."""
