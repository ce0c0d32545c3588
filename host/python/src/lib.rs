//! The Python package `cvm_engine`: the `cvm-runtime` crate and the readers of `cvm-formats` and
//! `cvm-onnx` for Python, with numpy arrays in and out. It holds no logic of its own beyond the
//! conversion of arrays and errors: models load through `cvm_formats::model`, run through
//! `cvm_runtime` (wasm) or `cvm_runtime::native`, float inputs are quantized by
//! `cvm_onnx::workflow`, and batches follow `cvm_runtime::batch`.
//!
//! Node-local failures become Python exceptions (one base class, [`CvmError`]); deterministic
//! outcomes, failures included, are values ([`RunResult`]) with their hash.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use numpy::{PyArray1, PyArrayDyn, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};

use cvm_formats::cvm::CvmMeta;
use cvm_formats::model::{LoadedModel, ModelSource, load_model, load_model_bytes};
use cvm_onnx::import::{InputShape, Quantization, Ranges};
use cvm_onnx::workflow::{self, ImportRequest, SampleFile, WorkflowError};
use cvm_runtime::hash::{HashAlgorithm, hex};
use cvm_runtime::native::NativeModel;
use cvm_runtime::{InputTensor, LoadError, Status, Verdict};
use engine::ValidatedModel;

create_exception!(
    cvm_engine,
    CvmError,
    PyException,
    "Base class of every failure of this node: a file that cannot be read, an input that \
     cannot be converted, a wasm runtime failure, a closed runtime. Never a deterministic \
     outcome of a model: those are results, with a hash."
);
create_exception!(
    cvm_engine,
    ReadError,
    CvmError,
    "A model, quantization or sample file cannot be read or parsed (missing, too large, a \
     malformed text model)."
);
create_exception!(
    cvm_engine,
    InputError,
    CvmError,
    "An input cannot be given to the model: not a numpy array, an unsupported dtype, a \
     non-contiguous array, a value outside int32, a missing or unknown input name, a shape \
     that does not match the model's declared input."
);
create_exception!(
    cvm_engine,
    RejectedError,
    CvmError,
    "The engine rejected the model at load: a deterministic outcome, the same on every node. \
     Its `result` attribute is the RunResult (error code, gas 0, hash) to compare."
);
create_exception!(
    cvm_engine,
    EngineError,
    CvmError,
    "The wasm runtime of this node failed (an engine trap, fuel or memory exhaustion of the \
     backstops): the run was not judged."
);
create_exception!(
    cvm_engine,
    ClosedError,
    CvmError,
    "The runtime (or model) was closed."
);
create_exception!(
    cvm_engine,
    OnnxImportError,
    CvmError,
    "An ONNX model cannot be imported: the message names the file and the reason."
);

fn node_error(error: cvm_runtime::NodeError) -> PyErr {
    match error {
        cvm_runtime::NodeError::Request(message) => InputError::new_err(message),
        other => EngineError::new_err(other.to_string()),
    }
}

fn read_error(error: cvm_formats::ReadError) -> PyErr {
    ReadError::new_err(error.to_string())
}

/// Which build of the engine runs a model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum EngineKind {
    Wasm,
    Native,
}

impl EngineKind {
    fn parse(name: &str) -> PyResult<EngineKind> {
        match name {
            "wasm" => Ok(EngineKind::Wasm),
            "native" => Ok(EngineKind::Native),
            other => Err(InputError::new_err(format!(
                "engine {other:?}: the engines are \"wasm\" (the consensus build) and \"native\""
            ))),
        }
    }

    fn name(self) -> &'static str {
        match self {
            EngineKind::Wasm => "wasm",
            EngineKind::Native => "native",
        }
    }
}

/// The compiled engine (`engine.wasm` in the one locked wasmtime configuration). Create one per
/// process and load models with it; `close()` (or leaving a `with` block) releases it, after
/// which its models refuse to run.
///
/// Args:
///     cache_dir: where the compiled engine is kept between processes; None (the default)
///         compiles it in the process (about 2 s) and writes nothing.
#[pyclass(frozen, module = "cvm_engine")]
struct Runtime {
    inner: RwLock<Option<cvm_runtime::Runtime>>,
    closed: Arc<AtomicBool>,
}

#[pymethods]
impl Runtime {
    #[new]
    #[pyo3(signature = (cache_dir = None))]
    fn new(py: Python<'_>, cache_dir: Option<PathBuf>) -> PyResult<Runtime> {
        let config = match cache_dir {
            Some(dir) => cvm_runtime::RuntimeConfig::with_cache_dir(dir),
            None => cvm_runtime::RuntimeConfig::compile_in_process(),
        };
        let runtime = py
            .detach(|| cvm_runtime::Runtime::new(&config))
            .map_err(node_error)?;
        Ok(Runtime {
            inner: RwLock::new(Some(runtime)),
            closed: Arc::new(AtomicBool::new(false)),
        })
    }

    /// Loads a model: a path (a canonical binary `.cvm` file, a text model `.json`, a directory
    /// holding a CVM `symbol` + `params`, or a directory `import_onnx` wrote) or the bytes of a
    /// canonical or text model. The model is validated and priced under gas schedule
    /// `schedule`; `engine` is "wasm" (the consensus build, the default) or "native".
    ///
    /// Raises:
    ///     ReadError: the files cannot be read, or a text model is malformed.
    ///     RejectedError: the engine rejected the model (deterministic; see its `result`).
    ///     ClosedError: the runtime was closed.
    #[pyo3(signature = (model, schedule = 1, engine = "wasm", base_dir = None))]
    fn load(
        &self,
        py: Python<'_>,
        model: &Bound<'_, PyAny>,
        schedule: u32,
        engine: &str,
        base_dir: Option<PathBuf>,
    ) -> PyResult<Model> {
        let engine = EngineKind::parse(engine)?;
        let runtime = self.runtime()?;
        let (loaded, quantization) = if let Ok(bytes) = model.cast::<PyBytes>() {
            let bytes = bytes.as_bytes().to_vec();
            let base_dir = base_dir.unwrap_or_default();
            let loaded =
                load_model_bytes(bytes, false, &base_dir, "<bytes>").map_err(read_error)?;
            (loaded, None)
        } else {
            let path: PathBuf = model.extract().map_err(|_| {
                InputError::new_err(format!(
                    "model: a path (str or os.PathLike) or bytes, not {}",
                    type_name(model)
                ))
            })?;
            if !path.exists() {
                return Err(ReadError::new_err(format!(
                    "{}: no such file or directory",
                    path.display()
                )));
            }
            py.detach(|| {
                let loaded = load_model(&ModelSource::from_path(&path))?;
                let quantization = workflow::quantization_of(&path)?;
                Ok::<_, cvm_formats::ReadError>((loaded, quantization))
            })
            .map_err(read_error)?
        };
        let LoadedModel {
            bytes,
            cvm,
            rejected,
            ..
        } = loaded;
        if let Some(report) = rejected {
            return Err(rejected_error(py, Verdict::of_report(*report))?);
        }
        let built = py.detach(
            || -> Result<Result<Loaded, Box<Verdict>>, cvm_runtime::NodeError> {
                let wasm = match engine {
                    EngineKind::Wasm => match runtime.load(&bytes, schedule) {
                        Ok(model) => Some(model),
                        Err(LoadError::Rejected(verdict)) => return Ok(Err(verdict)),
                        Err(LoadError::Node(error)) => return Err(error),
                    },
                    EngineKind::Native => None,
                };
                Ok(NativeModel::load(&bytes, schedule).map(|native| Loaded { wasm, native }))
            },
        );
        match built.map_err(node_error)? {
            Ok(Loaded { wasm, native }) => Ok(Model {
                engine,
                wasm,
                native,
                quantization,
                cvm,
                runtime_closed: Arc::clone(&self.closed),
                closed: AtomicBool::new(false),
            }),
            Err(verdict) => Err(rejected_error(py, *verdict)?),
        }
    }

    /// Closes the runtime: it loads no more models, and the models it loaded refuse to run.
    fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        *self.inner.write().unwrap_or_else(PoisonError::into_inner) = None;
    }

    /// Whether `close()` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, _args: &Bound<'_, PyTuple>) -> bool {
        self.close();
        false
    }

    fn __repr__(&self) -> String {
        format!(
            "Runtime(closed={})",
            if self.closed() { "True" } else { "False" }
        )
    }
}

impl Runtime {
    fn runtime(&self) -> PyResult<cvm_runtime::Runtime> {
        self.inner
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .ok_or_else(|| ClosedError::new_err("the runtime is closed; create a new Runtime()"))
    }
}

struct Loaded {
    wasm: Option<cvm_runtime::Model>,
    native: NativeModel,
}

fn rejected_error(py: Python<'_>, verdict: Verdict) -> PyResult<PyErr> {
    let message = format!(
        "model rejected: {} ({})",
        verdict.message(),
        verdict
            .report()
            .failure
            .as_ref()
            .map_or("error", |f| f.code_name.as_str())
    );
    let result = Py::new(py, RunResult::new(verdict))?;
    let error = RejectedError::new_err(message);
    error.value(py).setattr("result", result)?;
    Ok(error)
}

fn type_name(object: &Bound<'_, PyAny>) -> String {
    object
        .get_type()
        .name()
        .map_or_else(|_| "an object".to_string(), |name| name.to_string())
}

/// A declared input or output of a model.
#[pyclass(frozen, get_all, module = "cvm_engine")]
struct TensorInfo {
    /// Its name.
    name: String,
    /// Its shape.
    shape: Vec<u32>,
    /// Its precision in bits: every value satisfies |x| ≤ 2^(precision−1) − 1.
    precision: u8,
}

#[pymethods]
impl TensorInfo {
    fn __repr__(&self) -> String {
        format!(
            "TensorInfo(name={:?}, shape={:?}, precision={})",
            self.name, self.shape, self.precision
        )
    }
}

/// A model loaded under one gas schedule on one engine, for any number of runs (from any
/// number of threads: runs release the GIL).
#[pyclass(frozen, module = "cvm_engine")]
struct Model {
    engine: EngineKind,
    wasm: Option<cvm_runtime::Model>,
    native: NativeModel,
    quantization: Option<Quantization>,
    cvm: Option<CvmMeta>,
    runtime_closed: Arc<AtomicBool>,
    closed: AtomicBool,
}

/// One input as the engine takes it, converted from a numpy array.
fn convert_array(
    array: &Bound<'_, PyAny>,
    what: &str,
    quantization: Option<&Quantization>,
) -> PyResult<InputTensor> {
    let Ok(untyped) = array.cast::<PyUntypedArray>() else {
        return Err(InputError::new_err(format!(
            "{what}: expected a numpy array, got {}",
            type_name(array)
        )));
    };
    if !untyped.is_c_contiguous() {
        return Err(InputError::new_err(format!(
            "{what}: the array is not C-contiguous (a slice or transpose); pass \
             numpy.ascontiguousarray(x)"
        )));
    }
    let shape = untyped
        .shape()
        .iter()
        .map(|&dim| u32::try_from(dim))
        .collect::<Result<Vec<u32>, _>>()
        .map_err(|_| InputError::new_err(format!("{what}: a dimension is above 2^32 − 1")))?;
    if let Ok(floats) = array.cast::<PyArrayDyn<f32>>() {
        let Some(quantization) = quantization else {
            return Err(InputError::new_err(format!(
                "{what}: a float32 input needs the model's quantization; only a model imported \
                 from ONNX (a directory with quantization.json) takes float32, other models \
                 take integer arrays"
            )));
        };
        let readonly = floats
            .try_readonly()
            .map_err(|e| InputError::new_err(e.to_string()))?;
        let values = readonly
            .as_slice()
            .map_err(|e| InputError::new_err(format!("{what}: {e}")))?;
        let data = workflow::quantize_input(quantization, &shape, values)
            .map_err(|message| InputError::new_err(format!("{what}: {message}")))?;
        return Ok(InputTensor { shape, data });
    }
    macro_rules! integers {
        ($($ty:ty),*) => {
            $(
                if let Ok(typed) = array.cast::<PyArrayDyn<$ty>>() {
                    let readonly = typed
                        .try_readonly()
                        .map_err(|e| InputError::new_err(format!("{what}: {e}")))?;
                    let values = readonly
                        .as_slice()
                        .map_err(|e| InputError::new_err(format!("{what}: {e}")))?;
                    let data = to_i32(values, what)?;
                    return Ok(InputTensor { shape, data });
                }
            )*
        };
    }
    integers!(i32, i8, u8, i16, u16, u32, i64, u64);
    let dtype = untyped
        .dtype()
        .str()
        .map_or_else(|_| "?".to_string(), |s| s.to_string());
    Err(InputError::new_err(format!(
        "{what}: dtype {dtype} is not supported; inputs are arrays of a native-endian integer \
         dtype (int8 to int64, uint8 to uint64), or float32 for a model imported from ONNX"
    )))
}

fn to_i32<T: Copy + TryInto<i32> + std::fmt::Display>(
    values: &[T],
    what: &str,
) -> PyResult<Vec<i32>> {
    values
        .iter()
        .enumerate()
        .map(|(index, &value)| {
            value.try_into().map_err(|_| {
                InputError::new_err(format!("{what}: element {index} is {value}, outside int32"))
            })
        })
        .collect()
}

#[pymethods]
impl Model {
    /// The declared inputs, in order.
    #[getter]
    fn inputs(&self) -> Vec<TensorInfo> {
        self.validated()
            .inputs
            .iter()
            .map(|input| TensorInfo {
                name: input.name.clone(),
                shape: input.ty.shape.0.clone(),
                precision: input.ty.precision,
            })
            .collect()
    }

    /// The declared outputs, in order.
    #[getter]
    fn outputs(&self) -> Vec<TensorInfo> {
        output_infos(self.validated())
    }

    /// The gas schedule version the model was loaded under.
    #[getter]
    fn schedule(&self) -> u32 {
        self.validated().schedule.version
    }

    /// "wasm" or "native".
    #[getter]
    fn engine(&self) -> &'static str {
        self.engine.name()
    }

    /// For a model imported from ONNX, its quantization (input shape and scale, output shape
    /// and scale) as a dict; None for other models.
    #[getter]
    fn quantization<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        match &self.quantization {
            Some(quantization) => Ok(Some(json_to_python(py, &quantization.to_json())?)),
            None => Ok(None),
        }
    }

    /// Runs the model once. `inputs` is a numpy array (for a model with one input), a dict of
    /// them by input name, or a list of them in declared order; integer dtypes, or float32 for
    /// a model imported from ONNX (quantized as `cvm run` quantizes it). `gas_limit` None is
    /// the most one run may cost, as for `cvm run`. With `check_shapes` (the default) an
    /// array of another shape than the declared input is refused with InputError; without it
    /// the engine judges it (a deterministic error with a hash, as `cvm run` gives).
    ///
    /// Returns a RunResult: the outputs, the gas used and the outcome hash, or the engine's
    /// deterministic error.
    ///
    /// Raises:
    ///     InputError: an input cannot be converted (dtype, contiguity, shape, names).
    ///     EngineError: the wasm runtime of this node failed.
    ///     ClosedError: the model or its runtime was closed.
    #[pyo3(signature = (inputs, gas_limit = None, check_shapes = true))]
    fn run(
        &self,
        py: Python<'_>,
        inputs: &Bound<'_, PyAny>,
        gas_limit: Option<u64>,
        check_shapes: bool,
    ) -> PyResult<RunResult> {
        self.check_open()?;
        let arrays = self.assign(inputs, check_shapes)?;
        let mut tensors = Vec::with_capacity(arrays.len());
        for (index, array) in arrays.iter().enumerate() {
            let declared = self.validated().inputs.get(index);
            let what = match declared {
                Some(declared) => format!("input {:?}", declared.name),
                None => format!(
                    "input {index} (the model declares {})",
                    self.validated().inputs.len()
                ),
            };
            let tensor = convert_array(array, &what, self.quantization.as_ref())?;
            if let Some(quantization) = &self.quantization {
                quantization
                    .check(index, &tensor.data)
                    .map_err(|message| InputError::new_err(format!("{what}: {message}")))?;
            }
            if let Some(declared) = declared
                && check_shapes
                && tensor.shape != declared.ty.shape.0
            {
                return Err(InputError::new_err(format!(
                    "{what}: shape {:?}, the model's input is {:?}",
                    tensor.shape, declared.ty.shape.0
                )));
            }
            tensors.push(tensor);
        }
        let gas_limit = gas_limit.unwrap_or(engine::limits::MAX_GAS_PER_RUN);
        let verdict = py.detach(|| self.run_tensors(tensors, gas_limit))?;
        Ok(RunResult::new(verdict))
    }

    /// Runs every sample of a batch through the model, the GIL released for the whole batch.
    /// `inputs` is an array of shape (N, sample…) per input (a dict for several), where the
    /// sample shape is the declared shape without its leading 1 (a model taking (1, 1, 28,
    /// 28) takes (N, 1, 28, 28)), as `cvm run --batch` reads it. Every sample gets
    /// `gas_limit` (None: the most one run may cost).
    ///
    /// Returns a BatchResult: stacked outputs, and each sample's gas, hash and error.
    ///
    /// Raises:
    ///     InputError: an array is not (N, sample…) with N ≥ 1, the batches differ in N, or
    ///         an input cannot be converted.
    ///     EngineError: the wasm runtime of this node failed.
    ///     ClosedError: the model or its runtime was closed.
    #[pyo3(signature = (inputs, gas_limit = None))]
    fn run_batch(
        &self,
        py: Python<'_>,
        inputs: &Bound<'_, PyAny>,
        gas_limit: Option<u64>,
    ) -> PyResult<BatchResult> {
        self.check_open()?;
        let arrays = self.assign(inputs, true)?;
        let mut batches: Vec<(Vec<u32>, Vec<i32>, usize)> = Vec::with_capacity(arrays.len());
        let mut samples: Option<u32> = None;
        for (index, array) in arrays.iter().enumerate() {
            let declared = &self.validated().inputs[index];
            let what = format!("batch of input {:?}", declared.name);
            // Quantized as one sample of the declared shape would be: the rule is per value.
            let quantization = match &self.quantization {
                Some(quantization) if quantization.input_shape == declared.ty.shape.0 => {
                    Some(Quantization {
                        input_shape: array_shape(array)?,
                        ..quantization.clone()
                    })
                }
                other => other.clone(),
            };
            let tensor = convert_array(array, &what, quantization.as_ref())?;
            let sample = cvm_runtime::batch::sample_shape(&declared.ty.shape.0);
            let n = match tensor.shape.split_first() {
                Some((&n, rest)) if rest == sample && n > 0 => n,
                _ => {
                    let dims: Vec<String> = sample.iter().map(u32::to_string).collect();
                    return Err(InputError::new_err(format!(
                        "{what}: shape {:?}; the batch of an input of shape {:?} is an array \
                         of shape (N, {}) with N ≥ 1, one sample per row",
                        tensor.shape,
                        declared.ty.shape.0,
                        dims.join(", ")
                    )));
                }
            };
            if let Some(first) = samples
                && first != n
            {
                return Err(InputError::new_err(format!(
                    "{what}: {n} samples, the first input's batch has {first}"
                )));
            }
            samples = Some(n);
            if let Some(quantization) = &self.quantization {
                let size = tensor.data.len() / (n as usize).max(1);
                for (k, sample) in tensor.data.chunks(size.max(1)).enumerate() {
                    quantization.check(index, sample).map_err(|message| {
                        InputError::new_err(format!("{what}, sample {k}: {message}"))
                    })?;
                }
            }
            batches.push((declared.ty.shape.0.clone(), tensor.data, n as usize));
        }
        let count = samples.unwrap_or(0) as usize;
        let gas_limit = gas_limit.unwrap_or(engine::limits::MAX_GAS_PER_RUN);
        let verdicts = py.detach(|| {
            let mut verdicts = Vec::with_capacity(count);
            for index in 0..count {
                let tensors = batches
                    .iter()
                    .map(|(shape, data, n)| {
                        let size = data.len() / n.max(&1);
                        InputTensor {
                            shape: shape.clone(),
                            data: data[index * size..(index + 1) * size].to_vec(),
                        }
                    })
                    .collect();
                verdicts.push(self.run_tensors(tensors, gas_limit)?);
            }
            Ok::<_, PyErr>(verdicts)
        })?;
        Ok(BatchResult {
            outputs: output_infos(self.validated()),
            verdicts,
        })
    }

    /// The gas of a run, known before it runs: a dict with `total_gas`, `run_gas`,
    /// `peak_memory_bytes`, `arena_bytes`, `schedule_version` and `nodes` (each `name`, `op`,
    /// `gas`), as `cvm estimate --json` prints it; for a CVM model also `legacy_gas`, the
    /// deployed runtime's figure (None when it has none).
    fn estimate<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let estimate = self.validated().estimate();
        let dict = PyDict::new(py);
        dict.set_item("schedule_version", estimate.schedule_version)?;
        dict.set_item("total_gas", estimate.total_gas)?;
        dict.set_item("run_gas", estimate.run_gas)?;
        dict.set_item("peak_memory_bytes", estimate.peak_memory_bytes)?;
        dict.set_item("arena_bytes", estimate.arena_bytes)?;
        let nodes = PyList::empty(py);
        for node in &estimate.nodes {
            let entry = PyDict::new(py);
            entry.set_item("name", &node.name)?;
            entry.set_item("op", &node.op)?;
            entry.set_item("gas", node.gas)?;
            nodes.append(entry)?;
        }
        dict.set_item("nodes", nodes)?;
        if let Some(meta) = &self.cvm {
            dict.set_item("legacy_gas", meta.legacy_gas.as_ref().ok().copied())?;
        }
        Ok(dict)
    }

    /// Closes the model: it refuses to run after it (its memory goes with its last reference).
    fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
    }

    fn __repr__(&self) -> String {
        let inputs: Vec<String> = self
            .inputs()
            .iter()
            .map(|input| format!("{} {:?}", input.name, input.shape))
            .collect();
        format!(
            "Model(engine={:?}, schedule={}, inputs=[{}], total_gas={})",
            self.engine.name(),
            self.schedule(),
            inputs.join(", "),
            self.validated().total_gas
        )
    }
}

fn array_shape(array: &Bound<'_, PyAny>) -> PyResult<Vec<u32>> {
    match array.cast::<PyUntypedArray>() {
        Ok(untyped) => Ok(untyped
            .shape()
            .iter()
            .map(|&dim| u32::try_from(dim).unwrap_or(u32::MAX))
            .collect()),
        Err(_) => Err(InputError::new_err(format!(
            "expected a numpy array, got {}",
            type_name(array)
        ))),
    }
}

fn output_infos(validated: &ValidatedModel) -> Vec<TensorInfo> {
    validated
        .outputs
        .iter()
        .map(|(name, id)| {
            let ty = &validated.value_types[*id];
            TensorInfo {
                name: name.clone(),
                shape: ty.shape.0.clone(),
                precision: ty.precision,
            }
        })
        .collect()
}

impl Model {
    fn validated(&self) -> &ValidatedModel {
        self.native.validated()
    }

    fn check_open(&self) -> PyResult<()> {
        if self.runtime_closed.load(Ordering::SeqCst) {
            return Err(ClosedError::new_err(
                "the model's runtime is closed; load the model with an open Runtime()",
            ));
        }
        if self.closed.load(Ordering::SeqCst) {
            return Err(ClosedError::new_err("the model is closed"));
        }
        Ok(())
    }

    fn run_tensors(&self, tensors: Vec<InputTensor>, gas_limit: u64) -> PyResult<Verdict> {
        match &self.wasm {
            Some(model) => model.run(&tensors, gas_limit).map_err(node_error),
            None => Ok(self.native.run(tensors, gas_limit)),
        }
    }

    /// The arrays for each declared input, in order.
    fn assign<'py>(
        &self,
        inputs: &Bound<'py, PyAny>,
        exact: bool,
    ) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let declared = &self.validated().inputs;
        let names = || {
            declared
                .iter()
                .map(|input| input.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        if let Ok(dict) = inputs.cast::<PyDict>() {
            for key in dict.keys() {
                let name: String = key
                    .extract()
                    .map_err(|_| InputError::new_err("input names are strings"))?;
                if !declared.iter().any(|input| input.name == name) {
                    return Err(InputError::new_err(format!(
                        "the model has no input {name:?} (its inputs: {})",
                        names()
                    )));
                }
            }
            return declared
                .iter()
                .map(|input| {
                    dict.get_item(&input.name)?.ok_or_else(|| {
                        InputError::new_err(format!(
                            "no value for input {:?} (shape {:?}); the model's inputs: {}",
                            input.name,
                            input.ty.shape.0,
                            names()
                        ))
                    })
                })
                .collect();
        }
        if inputs.cast::<PyList>().is_ok() || inputs.cast::<PyTuple>().is_ok() {
            let items: Vec<Bound<'py, PyAny>> = inputs.try_iter()?.collect::<PyResult<_>>()?;
            if exact && items.len() != declared.len() {
                return Err(InputError::new_err(format!(
                    "{} arrays for {} inputs ({}); with check_shapes=False the engine judges \
                     the count",
                    items.len(),
                    declared.len(),
                    names()
                )));
            }
            return Ok(items);
        }
        if declared.len() != 1 {
            return Err(InputError::new_err(format!(
                "the model takes {} inputs ({}): pass a dict of arrays by name",
                declared.len(),
                names()
            )));
        }
        Ok(vec![inputs.clone()])
    }
}

/// The deterministic error of a load or run: the same on every node.
#[pyclass(frozen, get_all, module = "cvm_engine")]
struct RunError {
    /// The error code's name (`OutOfGas`, `ShapeMismatch`, …).
    code: String,
    /// The frozen number of the code (hashed).
    code_num: u16,
    /// The failing node's name, when one failed.
    node: Option<String>,
    /// The failing node's index, when one failed (hashed).
    node_index: Option<u32>,
    /// The engine's message for people (never hashed).
    message: String,
}

#[pymethods]
impl RunError {
    fn __repr__(&self) -> String {
        format!(
            "RunError(code={:?}, code_num={}, node={:?}, message={:?})",
            self.code, self.code_num, self.node, self.message
        )
    }
}

/// The outcome of one run (or of a rejected load): outputs or error, gas used, and the outcome
/// hash every node compares, equal to `cvm run`'s.
#[pyclass(frozen, module = "cvm_engine")]
struct RunResult {
    verdict: Verdict,
}

impl RunResult {
    fn new(verdict: Verdict) -> RunResult {
        RunResult { verdict }
    }
}

fn output_array<'py>(py: Python<'py>, shape: &[u32], data: &[i32]) -> PyResult<Bound<'py, PyAny>> {
    let shape: Vec<usize> = shape.iter().map(|&dim| dim as usize).collect();
    Ok(PyArray1::from_slice(py, data).reshape(shape)?.into_any())
}

#[pymethods]
impl RunResult {
    /// Whether the run succeeded.
    #[getter]
    fn ok(&self) -> bool {
        self.verdict.outputs().is_some()
    }

    /// The outputs by name (int32 arrays, in declared order); empty on failure.
    #[getter]
    fn outputs<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let dict = PyDict::new(py);
        if let Some(outputs) = self.verdict.outputs() {
            for (tensor, name) in outputs.iter().zip(&self.verdict.report().output_names) {
                dict.set_item(name, output_array(py, &tensor.shape, &tensor.data)?)?;
            }
        }
        Ok(dict)
    }

    /// The output of a model with one output (the first otherwise); None on failure.
    #[getter]
    fn output<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        match self.verdict.outputs().and_then(|outputs| outputs.first()) {
            Some(tensor) => Ok(Some(output_array(py, &tensor.shape, &tensor.data)?)),
            None => Ok(None),
        }
    }

    /// The precision of each output by name; empty on failure.
    #[getter]
    fn precisions(&self) -> Vec<(String, u8)> {
        match self.verdict.outputs() {
            Some(outputs) => outputs
                .iter()
                .zip(&self.verdict.report().output_names)
                .map(|(tensor, name)| (name.clone(), tensor.precision))
                .collect(),
            None => Vec::new(),
        }
    }

    /// The gas the run used (charged before each node runs).
    #[getter]
    fn gas_used(&self) -> u64 {
        self.verdict.outcome().gas_used
    }

    /// SHA3-256 of the outcome (32 bytes).
    #[getter]
    fn hash<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.verdict.hash())
    }

    /// The same hash in hexadecimal, as `cvm run` prints it.
    #[getter]
    fn hash_hex(&self) -> String {
        hex(&self.verdict.hash())
    }

    /// The outcome's hash under `algorithm`, "sha3-256" or "keccak256", as bytes.
    fn hash_with<'py>(&self, py: Python<'py>, algorithm: &str) -> PyResult<Bound<'py, PyBytes>> {
        let algorithm = match algorithm {
            "sha3-256" => HashAlgorithm::Sha3_256,
            "keccak256" => HashAlgorithm::Keccak256,
            other => {
                return Err(InputError::new_err(format!(
                    "hash algorithm {other:?}: \"sha3-256\" or \"keccak256\""
                )));
            }
        };
        Ok(PyBytes::new(py, &self.verdict.hash_with(algorithm)))
    }

    /// The deterministic error, or None on success.
    #[getter]
    fn error(&self) -> Option<RunError> {
        let Status::Error { code, node } = &self.verdict.outcome().status else {
            return None;
        };
        let detail = self.verdict.report().failure.as_ref();
        Some(RunError {
            code: detail.map_or_else(|| "Unknown".to_string(), |d| d.code_name.clone()),
            code_num: *code,
            node: detail.and_then(|d| d.node_name.clone()),
            node_index: *node,
            message: detail.map_or_else(String::new, |d| d.message.clone()),
        })
    }

    fn __repr__(&self) -> String {
        match self.error() {
            None => format!(
                "RunResult(ok=True, gas_used={}, hash={})",
                self.gas_used(),
                self.hash_hex()
            ),
            Some(error) => format!(
                "RunResult(ok=False, error={:?}, gas_used={}, hash={})",
                error.code,
                self.gas_used(),
                self.hash_hex()
            ),
        }
    }
}

/// The outcomes of a batch run: one per sample, in order.
#[pyclass(frozen, module = "cvm_engine")]
struct BatchResult {
    outputs: Vec<TensorInfo>,
    verdicts: Vec<Verdict>,
}

#[pymethods]
impl BatchResult {
    fn __len__(&self) -> usize {
        self.verdicts.len()
    }

    /// The result of sample `index` (negative counts from the end).
    fn __getitem__(&self, index: isize) -> PyResult<RunResult> {
        let len = self.verdicts.len() as isize;
        let position = if index < 0 { index + len } else { index };
        if position < 0 || position >= len {
            return Err(pyo3::exceptions::PyIndexError::new_err(format!(
                "sample {index} of a batch of {len}"
            )));
        }
        Ok(RunResult::new(self.verdicts[position as usize].clone()))
    }

    /// The outputs of every sample stacked by name: arrays of shape (N, sample…), int32 (a
    /// failed sample's rows are zeros; see `ok`).
    #[getter]
    fn outputs<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let dict = PyDict::new(py);
        let count = self.verdicts.len();
        for (index, info) in self.outputs.iter().enumerate() {
            let size: usize = info.shape.iter().map(|&dim| dim as usize).product();
            let mut data = vec![0i32; size * count];
            for (sample, verdict) in self.verdicts.iter().enumerate() {
                if let Some(tensor) = verdict.outputs().and_then(|outputs| outputs.get(index))
                    && tensor.data.len() == size
                {
                    data[sample * size..(sample + 1) * size].copy_from_slice(&tensor.data);
                }
            }
            let shape = cvm_runtime::batch::batch_shape(count as u32, &info.shape);
            dict.set_item(&info.name, output_array(py, &shape, &data)?)?;
        }
        Ok(dict)
    }

    /// Whether each sample succeeded (a bool array).
    #[getter]
    fn ok<'py>(&self, py: Python<'py>) -> Bound<'py, PyAny> {
        let ok: Vec<bool> = self
            .verdicts
            .iter()
            .map(|v| v.outputs().is_some())
            .collect();
        PyArray1::from_vec(py, ok).into_any()
    }

    /// The gas each sample used (a uint64 array).
    #[getter]
    fn gas_used<'py>(&self, py: Python<'py>) -> Bound<'py, PyAny> {
        let gas: Vec<u64> = self.verdicts.iter().map(|v| v.outcome().gas_used).collect();
        PyArray1::from_vec(py, gas).into_any()
    }

    /// Each sample's outcome hash (32 bytes each).
    #[getter]
    fn hashes<'py>(&self, py: Python<'py>) -> Vec<Bound<'py, PyBytes>> {
        self.verdicts
            .iter()
            .map(|v| PyBytes::new(py, &v.hash()))
            .collect()
    }

    /// Each sample's outcome hash in hexadecimal.
    #[getter]
    fn hashes_hex(&self) -> Vec<String> {
        self.verdicts.iter().map(|v| hex(&v.hash())).collect()
    }

    fn __repr__(&self) -> String {
        let failed = self
            .verdicts
            .iter()
            .filter(|v| v.outputs().is_none())
            .count();
        format!(
            "BatchResult(samples={}, failed={failed})",
            self.verdicts.len()
        )
    }
}

fn json_to_python<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyAny>> {
    py.import("json")?
        .call_method1("loads", (PyString::new(py, text),))
}

/// Imports an ONNX model (float, or quantized by onnxruntime) as an integer CVM model, as `cvm
/// import` does: calibrates on `calibration` (a float32 .npy file of shape (N, …), or integer
/// token ids; for a model of several inputs, a dict of input name to file), writes the model
/// directory `out` (default: the model's path without `.onnx`, plus `.cvm`), and compares the
/// integer model with the float one on the calibration set and, when given, on `validate`
/// (as `calibration`; with its `labels`, an integer .npy, for the accuracies). `input_shapes`
/// gives the values of open dimensions by input name; `graph_output` names the graph output
/// to import, which a graph of several outputs needs.
///
/// Returns (model directory, report), the report a dict as `cvm import --json` prints it.
///
/// Raises:
///     ReadError: a file cannot be read or written.
///     OnnxImportError: the model or a sample set cannot be imported.
///     InputError: labels without a validation set, an output path that is a file, a
///         schedule the engine does not define.
/// A sample set as `import_onnx` takes it: one path, or a dict of input name to path.
struct SampleFiles(Vec<SampleFile>);

impl<'py> FromPyObject<'_, 'py> for SampleFiles {
    type Error = PyErr;

    fn extract(value: Borrowed<'_, 'py, PyAny>) -> PyResult<SampleFiles> {
        if let Ok(path) = value.extract::<PathBuf>() {
            return Ok(SampleFiles(vec![SampleFile { input: None, path }]));
        }
        let files: std::collections::BTreeMap<String, PathBuf> = value.extract().map_err(|_| {
            InputError::new_err(
                "a sample set is a path, or a dict of input name to path (one per input)",
            )
        })?;
        Ok(SampleFiles(
            files
                .into_iter()
                .map(|(input, path)| SampleFile {
                    input: Some(input),
                    path,
                })
                .collect(),
        ))
    }
}

#[pyfunction]
#[pyo3(signature = (model, calibration, validate = None, labels = None, out = None, per_tensor = false, input_shapes = None, schedule = 1, graph_output = None, ranges = None, smooth = false))]
#[allow(clippy::too_many_arguments)]
fn import_onnx<'py>(
    py: Python<'py>,
    model: PathBuf,
    calibration: SampleFiles,
    validate: Option<SampleFiles>,
    labels: Option<PathBuf>,
    out: Option<PathBuf>,
    per_tensor: bool,
    input_shapes: Option<std::collections::BTreeMap<String, Vec<i64>>>,
    schedule: u32,
    graph_output: Option<String>,
    ranges: Option<&str>,
    smooth: bool,
) -> PyResult<(String, Bound<'py, PyAny>)> {
    let ranges = ranges
        .map(str::parse::<Ranges>)
        .transpose()
        .map_err(|e| InputError::new_err(format!("ranges: {e}")))?;
    let output = out.unwrap_or_else(|| model.with_extension("cvm"));
    let mut shapes = Vec::new();
    for (name, dims) in input_shapes.unwrap_or_default() {
        let dims = dims
            .iter()
            .map(|&d| usize::try_from(d))
            .collect::<Result<Vec<usize>, _>>()
            .map_err(|_| {
                InputError::new_err(format!("input_shapes[{name:?}]: a negative dimension"))
            })?;
        let spec = format!(
            "{name}={}",
            dims.iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(",")
        );
        shapes.push(
            spec.parse::<InputShape>()
                .map_err(|e| InputError::new_err(format!("input_shapes[{name:?}]: {e}")))?,
        );
    }
    let request = ImportRequest {
        model: &model,
        output: &output,
        calibrate: &calibration.0,
        validate: validate.as_ref().map_or(&[], |v| v.0.as_slice()),
        labels: labels.as_deref(),
        per_tensor,
        ranges,
        smooth,
        input_shapes: &shapes,
        graph_output: graph_output.as_deref(),
        schedule,
    };
    let outcome = py
        .detach(|| workflow::import(&request, &mut |_, _, _| {}))
        .map_err(|error| match error {
            WorkflowError::Usage(message) => InputError::new_err(message),
            WorkflowError::Read(error) => read_error(error),
            WorkflowError::Import(message) => OnnxImportError::new_err(message),
            WorkflowError::Schedule(error) => InputError::new_err(error.message),
        })?;
    let report = workflow::report_json(&model, &outcome).to_string();
    Ok((output.display().to_string(), json_to_python(py, &report)?))
}

/// SHA3-256 of the `engine.wasm` this package embeds, as `cvm version` prints it: equal for
/// every builder of the same sources.
#[pyfunction]
fn engine_wasm_sha3() -> String {
    cvm_runtime::wasm::engine_wasm_sha3()
}

/// The gas schedule versions the engine defines.
#[pyfunction]
fn schedules() -> Vec<u32> {
    engine::gas::Schedule::ALL
        .iter()
        .map(|schedule| schedule.version)
        .collect()
}

#[pymodule(name = "cvm_engine")]
fn cvm_engine_module(module: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = module.py();
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    module.add_class::<Runtime>()?;
    module.add_class::<Model>()?;
    module.add_class::<TensorInfo>()?;
    module.add_class::<RunResult>()?;
    module.add_class::<RunError>()?;
    module.add_class::<BatchResult>()?;
    module.add_function(wrap_pyfunction!(import_onnx, module)?)?;
    module.add_function(wrap_pyfunction!(engine_wasm_sha3, module)?)?;
    module.add_function(wrap_pyfunction!(schedules, module)?)?;
    module.add("CvmError", py.get_type::<CvmError>())?;
    module.add("ReadError", py.get_type::<ReadError>())?;
    module.add("InputError", py.get_type::<InputError>())?;
    module.add("RejectedError", py.get_type::<RejectedError>())?;
    module.add("EngineError", py.get_type::<EngineError>())?;
    module.add("ClosedError", py.get_type::<ClosedError>())?;
    module.add("OnnxImportError", py.get_type::<OnnxImportError>())?;
    Ok(())
}
