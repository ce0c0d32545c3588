//! Import: a float ONNX model and a calibration set become an integer CVM model that any CVM
//! node runs, written as the CVM `symbol` + `params` pair and as the canonical binary; a
//! transformer, which needs the engine's own operators, as the canonical binary only.
//!
//! The passes, each in its module:
//! 1. **read**: [`crate::read`] decodes and checks the ONNX file; [`read`] takes the graph's
//!    signature (its input, the shape of each axis, an open batch axis taken as 1, its output);
//! 2. **fold**: [`fold`] evaluates, exactly, the nodes computed on constants only (the shape
//!    plumbing of exporters);
//! 3. **lower**: [`lower`] turns the other nodes into the float [`graph`], one file per family
//!    of ONNX operators (`lower/conv.rs`, `lower/matmul.rs`, `lower/elementwise.rs`, …), folding
//!    batch normalization, padding and biases into the layers that absorb them;
//! 4. **calibrate**: [`calibrate`] evaluates that graph ([`float`]) on the calibration inputs
//!    and records every value's range; with `--smooth`, [`smooth`] first moves the scales of
//!    layer normalizations into the dense layers reading them (SmoothQuant), and the graph is
//!    calibrated again;
//! 5. **quantize**: [`quantize`] chooses the scales and builds the integer graph with the 37 CVM
//!    operators only;
//! 6. **write**: [`write`] lays out its `symbol` and `params` files; the result is read back
//!    through the CVM reader and validated by the engine, so what is written is exactly what a
//!    node loads.
//!
//! Import is deterministic: the same ONNX file and calibration set give the same bytes on every
//! machine. Host-side float arithmetic uses only the operations IEEE 754 defines exactly, in a
//! fixed order (see [`float`]).

// Import computes scales and calibration ranges in float on the host: only IEEE 754's exactly
// rounded operations, in a fixed order (module docs); never in the engine.
#![allow(clippy::float_arithmetic)]

mod calibrate;
mod float;
mod fold;
mod graph;
mod lower;
mod quantize;
mod read;
mod smooth;
mod write;

use cvm_engine::{InputTensor, Status, ValidatedModel};
use cvm_formats::npy::NpyF32Array;

use crate::model::OnnxModel;
use calibrate::Stats;
use graph::{Graph, InputKind, Op};

/// The operators the importer reads, as its errors list them.
pub const SUPPORTED_OPERATORS: &str = "Conv, BatchNormalization, Gemm, MatMul, Add, Sub, Mul, \
     Div (by a constant, or by the count of an attention mask), Sum, Relu, Clip, Sigmoid, Tanh, Erf, LeakyRelu, PRelu (one slope), Elu, \
     HardSigmoid, HardSwish, Gelu, Softplus, MaxPool, AveragePool, GlobalAveragePool, ReduceMean, \
     ReduceSum, Flatten, Reshape, Squeeze, Unsqueeze, Transpose, Concat, Slice, Split, Pad, \
     Softmax, LogSoftmax (last step only), LayerNormalization, Gather (of a computed tensor by \
     constant indices, or of a constant table by token ids), Where (the causal mask), an attention mask \
     input (Unsqueeze, Reshape, Expand, Cast, 1 − mask, times a large negative number, added to \
     a Softmax's scores; or multiplied in, summed and divided by its count), Dropout, Identity, \
     Constant, and any node computed on constants only (shapes, indices)";

/// Most calibration or validation samples one call takes.
pub const MAX_SAMPLES: usize = 100_000;

/// Why a model could not be imported. Every message names the node (by index, name and
/// operator), the input or the file.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// An operator the importer has no integer form for.
    #[error(
        "{node}: operator {op_type} is not supported; the importer reads {SUPPORTED_OPERATORS}"
    )]
    UnsupportedOperator {
        /// The node, as [`Node::label`](crate::Node::label) names it.
        node: String,
        /// Its operator.
        op_type: String,
    },
    /// A supported operator used in a way the importer cannot carry exactly.
    #[error("{node}: {message}")]
    Node {
        /// The node.
        node: String,
        /// What is wrong.
        message: String,
    },
    /// The graph as a whole: its inputs, outputs, size.
    #[error("{0}")]
    Graph(String),
    /// The calibration or validation inputs.
    #[error("{0}")]
    Samples(String),
    /// The integer model did not pass the CVM reader or the engine's validation.
    #[error("the integer model is refused: {0}")]
    Refused(String),
}

/// Choices of the import.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// A weight scale per output channel (the default) rather than per tensor. The layer that
    /// produces the output always has one scale, so that its outputs compare.
    pub per_channel: bool,
    /// How an int8 activation's range is chosen from its calibrated values; `None` for the
    /// graph's default: [`Ranges::Mse`] for a transformer (a graph that needs the engine's own
    /// operators), [`Ranges::Max`] for the graphs the deployed runtime runs.
    pub ranges: Option<Ranges>,
    /// The gas schedule the model is validated and priced under.
    pub schedule: u32,
}

/// How the range of an int8 activation (its scale × 127) is chosen from the calibration set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ranges {
    /// The largest |v| seen: nothing the calibration set reached is clipped.
    Max,
    /// The range of least mean squared error over the values seen, rounding and clipping
    /// together: a few outliers (a transformer's GELU outputs, its layer norms' outlier
    /// channels) no longer coarsen the scale for every other value. The model's output keeps
    /// the largest.
    Mse,
}

impl std::str::FromStr for Ranges {
    type Err = String;

    fn from_str(text: &str) -> Result<Ranges, String> {
        match text {
            "max" => Ok(Ranges::Max),
            "mse" => Ok(Ranges::Mse),
            _ => Err(format!("unknown range choice {text:?}: max or mse")),
        }
    }
}

impl Default for Options {
    fn default() -> Options {
        Options {
            per_channel: true,
            ranges: None,
            schedule: cvm_engine::gas::Schedule::NEWEST.version,
        }
    }
}

/// The dimensions of a graph input that the file leaves open (`--input-shape NAME=D0,D1,…`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputShape {
    /// The input's name.
    pub name: String,
    /// Every dimension, outermost first.
    pub dims: Vec<u32>,
}

impl std::str::FromStr for InputShape {
    type Err = String;

    /// Reads `NAME=D0,D1,…`.
    fn from_str(text: &str) -> Result<InputShape, String> {
        let Some((name, dims)) = text.rsplit_once('=') else {
            return Err(format!("{text:?} is not NAME=D0,D1,…"));
        };
        if name.is_empty() {
            return Err(format!("{text:?} names no input"));
        }
        let dims = dims
            .split(',')
            .map(|d| {
                d.trim()
                    .parse::<u32>()
                    .ok()
                    .filter(|&d| d > 0)
                    .ok_or_else(|| format!("{text:?}: {d:?} is not a dimension (1 or more)"))
            })
            .collect::<Result<Vec<u32>, String>>()?;
        Ok(InputShape {
            name: name.to_string(),
            dims,
        })
    }
}

/// A float model ready to calibrate: its graph lowered.
pub struct Importer {
    graph: Graph,
}

/// The quantization of the model's edges: how a float input becomes the int8 tensor the model
/// takes, and what the integer output stands for.
#[derive(Clone, Debug, PartialEq)]
pub struct Quantization {
    /// The input's shape.
    pub input_shape: Vec<u32>,
    /// The input's scale s: `q = clip(round(x / s), −127, 127)`, `round` taking halves away
    /// from zero, computed in f64 from the float32 input.
    pub input_scale: f64,
    /// The output's shape.
    pub output_shape: Vec<u32>,
    /// The output's scale: the float output is approximately `q · scale`.
    pub output_scale: f64,
    /// Every input, in the model's order, with what it holds, so that a runner refuses a token
    /// id outside the vocabulary or a mask value other than 0 and 1 ([`Quantization::check`])
    /// rather than let the engine clip it. Empty in a file written before the field existed:
    /// nothing is checked.
    pub inputs: Vec<ModelInput>,
}

/// The figures of one requantization (or output layer) for the report.
#[derive(Clone, Debug, PartialEq)]
pub struct LayerReport {
    /// The ONNX node it comes from.
    pub node: String,
    /// The CVM node that produces its result.
    pub cvm: String,
    /// Scale of its data input.
    pub input_scale: f64,
    /// Range of its weight scales (or the second operand's scale of an addition).
    pub weight_scales: RangeReport,
    /// Precision of the accumulator before requantization.
    pub accumulator_precision: u32,
    /// The shift that brings the accumulator to 16 bits first (0: none).
    pub pre_shift: u32,
    /// Range of the integer factors M.
    pub factors: RangeReport,
    /// The final shift n (0: no requantization, the output layer).
    pub shift: u32,
    /// Scale of the result.
    pub output_scale: f64,
}

/// The smallest and largest of a set of numbers.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RangeReport {
    /// Smallest.
    pub min: f64,
    /// Largest.
    pub max: f64,
}

impl RangeReport {
    fn of(values: &[f64]) -> RangeReport {
        if values.is_empty() {
            return RangeReport { min: 0.0, max: 0.0 };
        }
        RangeReport {
            min: values
                .iter()
                .copied()
                .fold(f64::INFINITY, f64::min)
                .min(f64::MAX),
            max: values.iter().copied().fold(0.0, f64::max),
        }
    }
}

/// A value's range over the calibration set.
#[derive(Clone, Debug, PartialEq)]
pub struct ValueRange {
    /// The ONNX node that computes it.
    pub node: String,
    /// Its shape.
    pub shape: Vec<usize>,
    /// Smallest value seen (at most 0).
    pub min: f64,
    /// Largest value seen (at least 0).
    pub max: f64,
}

/// The ranges the calibration set gave.
pub struct Calibration {
    stats: Vec<Stats>,
    mins: Vec<f64>,
    /// Samples evaluated.
    pub samples: usize,
}

/// An imported model.
pub struct Imported {
    /// The CVM graph JSON; empty when [`Imported::engine_only`].
    pub symbol: Vec<u8>,
    /// The CVM parameters; empty when [`Imported::engine_only`].
    pub params: Vec<u8>,
    /// The model uses the engine's own operators (`batch_matmul`, `softmax`, `layer_norm`:
    /// a transformer), which the deployed CVM runtime does not have: it exists as the
    /// canonical binary only, with no `symbol` + `params` pair.
    pub engine_only: bool,
    /// For a model of integer token ids, how many ids it reads ([`Importer::vocabulary`]):
    /// [`Imported::run`] refuses any other value, and the ids pass through unquantized
    /// (scale 1).
    pub vocabulary: Option<usize>,
    /// Every input, in the model's order.
    pub inputs: Vec<ModelInput>,
    /// The canonical binary of the same model.
    pub canonical: Vec<u8>,
    /// The edges' quantization.
    pub quantization: Quantization,
    /// Per-layer figures.
    pub layers: Vec<LayerReport>,
    /// What lowering folded or dropped.
    pub notes: Vec<String>,
    /// Every value's calibrated range.
    pub ranges: Vec<ValueRange>,
    /// How many CVM operator nodes the model has.
    pub operators: usize,
    /// Its gas per inference under [`Options::schedule`].
    pub gas: u64,
    /// That schedule.
    pub schedule: u32,
    model: ValidatedModel,
}

/// Float and integer outputs compared over a set of samples. An output's argmax is taken per
/// position, over its last axis: once per sample for a classifier's (1, K) logits, once per
/// token for a language model's (1, T, V).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Agreement {
    /// Samples compared.
    pub samples: usize,
    /// Positions compared: samples × the output's rows (its elements over its last axis).
    pub positions: usize,
    /// Positions where the float and integer outputs have the same argmax (first index on
    /// ties).
    pub same_argmax: usize,
    /// Largest |float output − dequantized integer output|.
    pub max_error: f64,
    /// Largest |float output|, for scale.
    pub max_output: f64,
    /// The cosine similarity of each sample's float and dequantized integer outputs, the
    /// measure of an embedding: its median over the samples (1 for outputs both 0).
    pub median_cosine: f64,
    /// Its smallest.
    pub min_cosine: f64,
    /// With labels (one per position): positions whose float argmax is the label.
    pub float_correct: Option<usize>,
    /// With labels: positions whose integer argmax is the label.
    pub int_correct: Option<usize>,
}

/// The cosine similarity of `a` and `b`: 1 when both are 0, 0 when only one is.
fn cosine(a: &[f64], b: &[f64]) -> f64 {
    let (mut ab, mut aa, mut bb) = (0.0, 0.0, 0.0);
    for (&x, &y) in a.iter().zip(b) {
        ab += x * y;
        aa += x * x;
        bb += y * y;
    }
    match (aa > 0.0, bb > 0.0) {
        (false, false) => 1.0,
        (true, true) => ab / (aa.sqrt() * bb.sqrt()),
        _ => 0.0,
    }
}

/// The median of sorted `values` (the mean of the middle two for an even count; 1 for none).
fn median(values: &[f64]) -> f64 {
    match values.len() {
        0 => 1.0,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

/// The index of the largest value, the first on ties.
pub fn argmax<T: PartialOrd + Copy>(values: &[T]) -> usize {
    let mut best = 0;
    for (i, &v) in values.iter().enumerate() {
        if v > values[best] {
            best = i;
        }
    }
    best
}

impl Importer {
    /// Lowers `model`, its input's open leading (batch) axis taken as 1.
    ///
    /// # Errors
    /// An [`ImportError`] naming the first node that cannot be imported, an input dimension
    /// other than the leading one that the file leaves open, or a graph whose float
    /// evaluation would take more than [`float::MAX_WORK_PER_SAMPLE`].
    pub fn new(model: &OnnxModel) -> Result<Importer, ImportError> {
        Importer::with_input_shapes(model, &[])
    }

    /// Lowers `model` with the input dimensions `shapes` gives (each input named at most
    /// once, every dimension given); an input they do not name is read as [`Importer::new`]
    /// reads it.
    ///
    /// # Errors
    /// As [`Importer::new`], and a shape naming no input, of another rank, or contradicting a
    /// dimension the file fixes.
    pub fn with_input_shapes(
        model: &OnnxModel,
        shapes: &[InputShape],
    ) -> Result<Importer, ImportError> {
        Importer::with_output(model, shapes, None)
    }

    /// As [`Importer::with_input_shapes`], importing the graph output named `output`, which a
    /// graph of several outputs needs.
    ///
    /// # Errors
    /// As [`Importer::with_input_shapes`], and several outputs with none named, or a name that
    /// is not an output.
    pub fn with_output(
        model: &OnnxModel,
        shapes: &[InputShape],
        output: Option<&str>,
    ) -> Result<Importer, ImportError> {
        let graph = lower::lower(model, shapes, output)?;
        let work = float::work(&graph);
        if work > float::MAX_WORK_PER_SAMPLE {
            return Err(ImportError::Graph(format!(
                "evaluating the model once takes {work} multiply-accumulates, more than the \
                 {} the importer accepts",
                float::MAX_WORK_PER_SAMPLE
            )));
        }
        Ok(Importer { graph })
    }

    /// Whether the integer model needs the engine's own operators (a transformer's products
    /// of two activations, softmax, layer normalization), so that it has no CVM `symbol` +
    /// `params` form ([`Imported::engine_only`]).
    pub fn engine_only(&self) -> bool {
        self.graph.values.iter().any(|v| v.op.engine_only())
    }

    /// The multiply-accumulates (or element visits) of one float evaluation.
    pub fn work(&self) -> u64 {
        float::work(&self.graph)
    }

    /// The first input's shape, batch of 1 included.
    pub fn input_shape(&self) -> &[usize] {
        &self.graph.values[0].shape
    }

    /// The inputs, in the graph's order: name, shape (batch of 1 included) and what they hold.
    pub fn inputs(&self) -> Vec<ModelInput> {
        self.graph
            .inputs
            .iter()
            .enumerate()
            .map(|(k, input)| ModelInput {
                name: input.name.clone(),
                shape: self.graph.values[k].shape.clone(),
                holds: match input.kind {
                    InputKind::Float => Holds::Float,
                    InputKind::Ids { vocabulary, .. } => Holds::Ids { vocabulary },
                    InputKind::Mask => Holds::Mask,
                },
            })
            .collect()
    }

    /// How many samples `batch` holds (one array per input, in the inputs' order): each
    /// array's shape must be its input's, or its input's with the leading 1 replaced by the
    /// number of samples, the same for all; token ids must be ids of their tables, masks 0
    /// or 1.
    ///
    /// # Errors
    /// [`ImportError::Samples`] naming the input and both shapes, or the first value that is
    /// not an id or a mask value.
    pub fn samples_of(&self, batch: &[NpyF32Array], what: &str) -> Result<usize, ImportError> {
        let inputs = self.inputs();
        if batch.len() != inputs.len() {
            return Err(ImportError::Samples(format!(
                "{what}: {} arrays for the model's {} inputs ({})",
                batch.len(),
                inputs.len(),
                inputs
                    .iter()
                    .map(|i| cvm_formats::quote(&i.name))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        let mut count = None;
        for (input, array) in inputs.iter().zip(batch) {
            let label = if inputs.len() == 1 {
                what.to_string()
            } else {
                format!("{what} of input {}", cvm_formats::quote(&input.name))
            };
            let shape: Vec<usize> = array.shape.iter().map(|&d| d as usize).collect();
            let fits = shape.len() == input.shape.len() && shape[1..] == input.shape[1..];
            if !fits || shape[0] == 0 {
                return Err(ImportError::Samples(format!(
                    "{label}: shape {shape:?}; the model takes {:?}, so samples must be (N, {})",
                    input.shape,
                    input.shape[1..]
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
            if shape[0] > MAX_SAMPLES {
                return Err(ImportError::Samples(format!(
                    "{label}: {} samples, more than the {MAX_SAMPLES} the importer takes",
                    shape[0]
                )));
            }
            if let Some(before) = count
                && before != shape[0]
            {
                return Err(ImportError::Samples(format!(
                    "{label}: {} samples, but the first input has {before}",
                    shape[0]
                )));
            }
            count = Some(shape[0]);
            if let Some(i) = input.holds.first_invalid(&array.data) {
                return Err(ImportError::Samples(format!(
                    "{label}: value {} at index {i} is not {}",
                    array.data[i],
                    input.holds.describe()
                )));
            }
        }
        Ok(count.unwrap_or(0))
    }

    /// [`Importer::samples_of`] for a model of one input.
    ///
    /// # Errors
    /// As [`Importer::samples_of`].
    pub fn samples(&self, batch: &NpyF32Array, what: &str) -> Result<usize, ImportError> {
        self.samples_of(std::slice::from_ref(batch), what)
    }

    /// For a model whose first input is integer token ids, the number of ids its tables hold
    /// (the rows of the smallest embedding table that reads them); `None` otherwise.
    pub fn vocabulary(&self) -> Option<usize> {
        match self.graph.inputs.first().map(|i| i.kind) {
            Some(InputKind::Ids { vocabulary, .. }) => Some(vocabulary),
            _ => None,
        }
    }

    /// The float output of one sample (of the input's size), for a model of one input.
    pub fn float_output(&self, sample: &[f32]) -> Vec<f64> {
        self.float_output_of(&[sample])
    }

    /// The float output of one sample: a value per input, in the inputs' order.
    pub fn float_output_of(&self, sample: &[&[f32]]) -> Vec<f64> {
        let inputs: Vec<Vec<f64>> = sample
            .iter()
            .map(|values| values.iter().map(|&v| f64::from(v)).collect())
            .collect();
        float::run(&self.graph, &inputs, &mut |_, _| {}).data
    }

    /// Evaluates the float graph on every sample of `batch` and records the ranges;
    /// `progress(done, total)` is called after each sample.
    ///
    /// # Errors
    /// [`ImportError::Samples`] for a batch of the wrong shape.
    pub fn calibrate(
        &self,
        batch: &NpyF32Array,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<Calibration, ImportError> {
        self.calibrate_inputs(std::slice::from_ref(batch), progress)
    }

    /// [`Importer::calibrate`] on samples of every input (one array per input, in the
    /// inputs' order).
    ///
    /// # Errors
    /// As [`Importer::samples_of`].
    pub fn calibrate_inputs(
        &self,
        batch: &[NpyF32Array],
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<Calibration, ImportError> {
        let count = self.samples_of(batch, "calibration inputs")?;
        let (stats, mins) = calibrate::ranges(&self.graph, batch, count, progress);
        Ok(Calibration {
            stats,
            mins,
            samples: count,
        })
    }

    /// Migrates the scales of the layer normalizations read only by dense layers into those
    /// layers' weights, by the ranges `calibration` gave (SmoothQuant, `cvm import --smooth`;
    /// the factors in the `smooth` module's documentation). The float model computes the same
    /// function, within f64 rounding; its ranges change, so calibrate again before
    /// [`Importer::quantize`]. Returns how many norms were migrated; each is a note of the
    /// report.
    pub fn smooth(&mut self, calibration: &Calibration) -> usize {
        let notes = smooth::smooth(&mut self.graph, &calibration.stats);
        let count = notes.len();
        if count == 0 {
            self.graph.notes.push(
                "SmoothQuant: no layer normalization is read by dense layers only; nothing \
                 was migrated"
                    .into(),
            );
        }
        self.graph.notes.extend(notes);
        count
    }

    /// Builds, reads back and validates the integer model.
    ///
    /// # Errors
    /// An [`ImportError`] naming the value without an integer form, or the engine's refusal.
    pub fn quantize(
        &self,
        calibration: &Calibration,
        options: Options,
    ) -> Result<Imported, ImportError> {
        let quantized = quantize::quantize(
            &self.graph,
            &calibration.stats,
            options.per_channel,
            options.ranges,
        )?;
        let engine_only = self.engine_only();
        let (symbol, params, canonical) = if engine_only {
            let model = quantized
                .graph
                .model(quantized.head)
                .map_err(ImportError::Refused)?;
            (Vec::new(), Vec::new(), model.encode())
        } else {
            let symbol = quantized.graph.symbol(quantized.head);
            let params = quantized.graph.params();
            let cvm = cvm_formats::cvm::import(&symbol, &params)
                .map_err(|rejection| ImportError::Refused(rejection.error.to_string()))?;
            (symbol, params, cvm.model.encode())
        };
        let model = cvm_engine::load(&canonical, options.schedule).map_err(|report| {
            ImportError::Refused(
                report
                    .failure
                    .map(|f| f.message)
                    .unwrap_or_else(|| "validation failed".into()),
            )
        })?;
        let dims = |shape: &[usize]| shape.iter().map(|&d| d as u32).collect::<Vec<u32>>();
        let inputs = self.inputs();
        let quantization = Quantization {
            input_shape: dims(self.input_shape()),
            input_scale: quantized.input_scale,
            output_shape: dims(&self.graph.values[self.graph.output].shape),
            output_scale: quantized.output_scale,
            inputs: inputs.clone(),
        };
        let ranges = self
            .graph
            .values
            .iter()
            .enumerate()
            .filter(|(_, v)| !matches!(v.op, Op::Const(_)))
            .map(|(id, v)| ValueRange {
                node: v.origin.clone(),
                shape: v.shape.clone(),
                min: calibration.mins[id],
                max: calibration.stats[id].max,
            })
            .collect();
        Ok(Imported {
            symbol,
            params,
            engine_only,
            vocabulary: self.vocabulary(),
            inputs,
            canonical,
            quantization,
            layers: quantized.layers,
            notes: self.graph.notes.clone(),
            ranges,
            operators: quantized.graph.operators(),
            gas: model.total_gas,
            schedule: options.schedule,
            model,
        })
    }

    /// Compares float and integer outputs over `batch` (with `labels`, one per position: per
    /// sample for a classifier, per sample and token for per-token logits, the accuracy of
    /// each); `progress(done, total)` after each sample.
    ///
    /// # Errors
    /// [`ImportError::Samples`] for a batch or labels of the wrong shape, or an integer run
    /// that fails (its message).
    pub fn compare(
        &self,
        imported: &Imported,
        batch: &NpyF32Array,
        labels: Option<&[i32]>,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<Agreement, ImportError> {
        self.compare_inputs(imported, std::slice::from_ref(batch), labels, progress)
    }

    /// [`Importer::compare`] on samples of every input (one array per input, in the inputs'
    /// order).
    ///
    /// # Errors
    /// As [`Importer::compare`].
    pub fn compare_inputs(
        &self,
        imported: &Imported,
        batch: &[NpyF32Array],
        labels: Option<&[i32]>,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<Agreement, ImportError> {
        let count = self.samples_of(batch, "validation inputs")?;
        let shape = &self.graph.values[self.graph.output].shape;
        let row = shape.last().copied().unwrap_or(1).max(1);
        let rows = shape.iter().product::<usize>() / row;
        if let Some(labels) = labels
            && labels.len() != count * rows
        {
            let per = if rows == 1 {
                "one per sample".to_string()
            } else {
                format!("one per position: {rows} per sample, the output being {shape:?}")
            };
            return Err(ImportError::Samples(format!(
                "{} labels for {count} samples; labels are {per}",
                labels.len()
            )));
        }
        let mut agreement = Agreement {
            samples: count,
            positions: count * rows,
            float_correct: labels.map(|_| 0),
            int_correct: labels.map(|_| 0),
            ..Agreement::default()
        };
        let mut cosines = Vec::with_capacity(count);
        let scale = imported.quantization.output_scale;
        for i in 0..count {
            let sample = sample(batch, count, i);
            let float = self.float_output_of(&sample);
            let int = imported.run_inputs(&sample).map_err(ImportError::Samples)?;
            let dequantized: Vec<f64> = int.iter().map(|&q| f64::from(q) * scale).collect();
            for (f, d) in float.iter().zip(&dequantized) {
                agreement.max_error = agreement.max_error.max((f - d).abs());
                agreement.max_output = agreement.max_output.max(f.abs());
            }
            cosines.push(cosine(&float, &dequantized));
            for (p, (f, q)) in float.chunks(row).zip(int.chunks(row)).enumerate() {
                let (fa, ia) = (argmax(f), argmax(q));
                agreement.same_argmax += usize::from(fa == ia);
                if let Some(labels) = labels {
                    let label = usize::try_from(labels[i * rows + p]).unwrap_or(usize::MAX);
                    if let Some(c) = agreement.float_correct.as_mut() {
                        *c += usize::from(fa == label);
                    }
                    if let Some(c) = agreement.int_correct.as_mut() {
                        *c += usize::from(ia == label);
                    }
                }
            }
            progress(i + 1, count);
        }
        cosines.sort_by(f64::total_cmp);
        agreement.min_cosine = cosines.first().copied().unwrap_or(1.0);
        agreement.median_cosine = median(&cosines);
        Ok(agreement)
    }
}

impl Quantization {
    /// The int8 tensor a float input (of the input's size) stands for.
    pub fn quantize_input(&self, input: &[f32]) -> Vec<i32> {
        input
            .iter()
            .map(|&x| quantize::round(f64::from(x) / self.input_scale).clamp(-127.0, 127.0) as i32)
            .collect()
    }

    /// The float values an integer output stands for.
    pub fn dequantize_output(&self, output: &[i32]) -> Vec<f32> {
        output
            .iter()
            .map(|&q| (f64::from(q) * self.output_scale) as f32)
            .collect()
    }

    /// The `quantization.json` text: the format, the input's shape and scale, the output's.
    /// Scales are written in the shortest decimal form that reads back to the same f64.
    pub fn to_json(&self) -> String {
        let dims = |shape: &[u32]| {
            shape
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        };
        let inputs: Vec<String> = self
            .inputs
            .iter()
            .map(|input| {
                let holds = match input.holds {
                    Holds::Float => "\"float\"".to_string(),
                    Holds::Ids { vocabulary } => format!("{{\"token_ids\": {vocabulary}}}"),
                    Holds::Mask => "\"mask\"".to_string(),
                };
                let shape: Vec<u32> = input.shape.iter().map(|&d| d as u32).collect();
                format!(
                    "\n    {{\"name\": {}, \"shape\": [{}], \"holds\": {holds}}}",
                    serde_json::Value::from(input.name.as_str()),
                    dims(&shape)
                )
            })
            .collect();
        let inputs = if inputs.is_empty() {
            String::new()
        } else {
            format!(",\n  \"inputs\": [{}\n  ]", inputs.join(","))
        };
        format!(
            "{{\n  \"format\": \"{QUANTIZATION_FORMAT}\",\n  \"input\": {{\"shape\": [{}], \"scale\": {:?}, \
             \"rounding\": \"half away from zero\", \"clip\": 127}},\n  \"output\": {{\"shape\": [{}], \
             \"scale\": {:?}}}{inputs}\n}}\n",
            dims(&self.input_shape),
            self.input_scale,
            dims(&self.output_shape),
            self.output_scale
        )
    }

    /// Refuses a value input `index` (in the model's order) cannot hold: a token id outside
    /// the vocabulary, a mask value other than 0 or 1. The engine itself would clip an id to
    /// the table and read any nonzero mask value as 1; such a value is a caller's mistake, not
    /// a model's input.
    ///
    /// # Errors
    /// The first such value, its index and what the input holds.
    pub fn check(&self, index: usize, data: &[i32]) -> Result<(), String> {
        let Some(input) = self.inputs.get(index) else {
            return Ok(());
        };
        match data.iter().position(|&v| !input.holds.admits(f64::from(v))) {
            Some(i) => Err(format!(
                "value {} at index {i} is not {}",
                data[i],
                input.holds.describe()
            )),
            None => Ok(()),
        }
    }

    /// Reads [`Quantization::to_json`]'s text.
    ///
    /// # Errors
    /// What is missing or malformed, and a `rounding` or `clip` other than those
    /// [`Quantization::quantize_input`] applies.
    pub fn from_json(text: &str) -> Result<Quantization, String> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        if value["format"] != QUANTIZATION_FORMAT {
            return Err(format!("\"format\" is not \"{QUANTIZATION_FORMAT}\""));
        }
        let shape = |v: &serde_json::Value, what: &str| -> Result<Vec<u32>, String> {
            v.as_array()
                .ok_or_else(|| format!("{what} is not a list"))?
                .iter()
                .map(|d| {
                    d.as_u64()
                        .and_then(|d| u32::try_from(d).ok())
                        .ok_or_else(|| format!("{what} holds {d}, not a dimension"))
                })
                .collect()
        };
        let scale = |v: &serde_json::Value, what: &str| -> Result<f64, String> {
            v.as_f64()
                .filter(|s| s.is_finite() && *s > 0.0)
                .ok_or_else(|| format!("{what} is not a positive number"))
        };
        // Descriptive fields: the quantization `quantize_input` applies, stated in the file. One
        // that says otherwise would be silently ignored, so it is refused.
        let input = &value["input"];
        if let Some(rounding) = input.get("rounding")
            && rounding != "half away from zero"
        {
            return Err(format!(
                "input.rounding is {rounding}; inputs are quantized with halves rounded away \
                 from zero (\"half away from zero\") only"
            ));
        }
        if let Some(clip) = input.get("clip")
            && clip.as_u64() != Some(127)
        {
            return Err(format!(
                "input.clip is {clip}; inputs are quantized to int8 and clipped to ±127 only"
            ));
        }
        let inputs = match value.get("inputs") {
            None => Vec::new(),
            Some(list) => list
                .as_array()
                .ok_or("inputs is not a list")?
                .iter()
                .enumerate()
                .map(|(k, input)| {
                    let what = format!("inputs[{k}]");
                    let name = input["name"]
                        .as_str()
                        .ok_or_else(|| format!("{what}.name is not a string"))?;
                    let holds = match &input["holds"] {
                        serde_json::Value::String(h) if h == "float" => Holds::Float,
                        serde_json::Value::String(h) if h == "mask" => Holds::Mask,
                        holds => match holds["token_ids"].as_u64() {
                            Some(v) if v > 0 => Holds::Ids {
                                vocabulary: usize::try_from(v).unwrap_or(usize::MAX),
                            },
                            _ => {
                                return Err(format!(
                                    "{what}.holds is {holds}; an input holds \"float\", \
                                     \"mask\" or {{\"token_ids\": VOCABULARY}}"
                                ));
                            }
                        },
                    };
                    let shape = shape(&input["shape"], &format!("{what}.shape"))?;
                    Ok(ModelInput {
                        name: name.to_string(),
                        shape: shape.iter().map(|&d| d as usize).collect(),
                        holds,
                    })
                })
                .collect::<Result<Vec<_>, String>>()?,
        };
        Ok(Quantization {
            input_shape: shape(&value["input"]["shape"], "input.shape")?,
            input_scale: scale(&value["input"]["scale"], "input.scale")?,
            output_shape: shape(&value["output"]["shape"], "output.shape")?,
            output_scale: scale(&value["output"]["scale"], "output.scale")?,
            inputs,
        })
    }
}

/// Sample `i` of `count` in `batch`: a slice of each array.
pub(crate) fn sample(batch: &[NpyF32Array], count: usize, i: usize) -> Vec<&[f32]> {
    batch
        .iter()
        .map(|array| {
            let size = array.data.len() / count.max(1);
            &array.data[i * size..(i + 1) * size]
        })
        .collect()
}

/// A model input as [`Importer::inputs`] describes it.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelInput {
    /// Its ONNX name.
    pub name: String,
    /// Its shape, batch of 1 first.
    pub shape: Vec<usize>,
    /// What it holds.
    pub holds: Holds,
}

/// What a model input holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Holds {
    /// Float values, quantized to int8 ([`Quantization::quantize_input`]).
    Float,
    /// Integer token ids from 0 to `vocabulary` − 1, passed through unquantized.
    Ids {
        /// How many ids the tables reading them hold.
        vocabulary: usize,
    },
    /// An attention mask: 1 where a position is kept, 0 where it is masked.
    Mask,
}

impl Holds {
    /// The index of the first value that this input cannot hold.
    pub fn first_invalid(self, values: &[f32]) -> Option<usize> {
        values.iter().position(|&v| !self.admits(f64::from(v)))
    }

    /// Whether this input can hold `value`: any float, an integer from 0 to the vocabulary
    /// − 1, 0 or 1.
    pub fn admits(self, value: f64) -> bool {
        match self {
            Holds::Float => true,
            Holds::Ids { vocabulary } => {
                value >= 0.0 && value.fract() == 0.0 && value < vocabulary as f64
            }
            Holds::Mask => value == 0.0 || value == 1.0,
        }
    }

    /// What a value of it is, for messages.
    pub fn describe(self) -> String {
        match self {
            Holds::Float => "a float".into(),
            Holds::Ids { vocabulary } => format!(
                "a token id (an integer from 0 to {})",
                vocabulary.saturating_sub(1)
            ),
            Holds::Mask => "an attention mask value (0 or 1)".into(),
        }
    }
}

/// The `format` of `quantization.json`.
pub const QUANTIZATION_FORMAT: &str = "cvm-import-quantization-1";

impl Imported {
    /// Runs the integer model natively on one float sample: quantizes it, runs, and returns the
    /// integer output.
    ///
    /// # Errors
    /// The engine's failure message.
    pub fn run(&self, sample: &[f32]) -> Result<Vec<i32>, String> {
        self.run_inputs(&[sample])
    }

    /// [`Imported::run`] on a value per input, in the inputs' order: a float input is
    /// quantized, token ids and masks are checked and passed through.
    ///
    /// # Errors
    /// A value the input cannot hold, the wrong number of inputs, or the engine's failure
    /// message.
    pub fn run_inputs(&self, sample: &[&[f32]]) -> Result<Vec<i32>, String> {
        if sample.len() != self.inputs.len() {
            return Err(format!(
                "{} inputs given, the model has {}",
                sample.len(),
                self.inputs.len()
            ));
        }
        let mut tensors = Vec::with_capacity(sample.len());
        for (k, (values, input)) in sample.iter().zip(&self.inputs).enumerate() {
            let (shape, holds) = (&input.shape, input.holds);
            if values.len() != shape.iter().product::<usize>() {
                return Err(format!(
                    "input {k}: {} values for shape {shape:?}",
                    values.len()
                ));
            }
            if let Some(i) = holds.first_invalid(values) {
                return Err(format!(
                    "value {} at index {i} is not {}",
                    values[i],
                    holds.describe()
                ));
            }
            let data = match holds {
                Holds::Float => self.quantization.quantize_input(values),
                Holds::Ids { .. } | Holds::Mask => values.iter().map(|&v| v as i32).collect(),
            };
            tensors.push(InputTensor {
                shape: shape.iter().map(|&d| d as u32).collect(),
                data,
            });
        }
        let report = cvm_engine::run(&self.model, tensors, cvm_engine::limits::MAX_GAS_PER_RUN);
        match report.outcome.status {
            Status::Ok { mut outputs } if !outputs.is_empty() => Ok(outputs.swap_remove(0).data),
            _ => Err(report
                .failure
                .map(|f| f.message)
                .unwrap_or_else(|| "the run failed".into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Holds, ModelInput, Quantization};

    #[test]
    fn quantization_json_reads_back_and_refuses_a_rounding_or_clip_it_would_ignore() {
        let quantization = Quantization {
            input_shape: vec![1, 1, 8, 8],
            input_scale: 0.015_625,
            output_shape: vec![1, 10],
            output_scale: 0.1,
            inputs: Vec::new(),
        };
        let text = quantization.to_json();
        let read = Quantization::from_json(&text).expect("reads back");
        assert_eq!(
            (
                read.input_shape,
                read.input_scale,
                read.output_shape,
                read.output_scale
            ),
            (vec![1, 1, 8, 8], 0.015_625, vec![1, 10], 0.1)
        );
        let refused = |from: &str, to: &str| {
            assert!(text.contains(from), "{text}");
            Quantization::from_json(&text.replace(from, to)).expect_err("refused")
        };
        let err = refused("\"half away from zero\"", "\"even\"");
        assert!(err.starts_with("input.rounding is \"even\""), "{err}");
        let err = refused("\"clip\": 127", "\"clip\": 100000");
        assert!(err.starts_with("input.clip is 100000"), "{err}");
        // Without the descriptive fields the file means what they say.
        let bare = text.replace(", \"rounding\": \"half away from zero\", \"clip\": 127", "");
        assert!(Quantization::from_json(&bare).is_ok(), "{bare}");
    }

    #[test]
    fn quantization_json_keeps_what_each_input_holds_and_checks_values_by_it() {
        let input = |name: &str, holds| ModelInput {
            name: name.into(),
            shape: vec![1, 4],
            holds,
        };
        let quantization = Quantization {
            input_shape: vec![1, 4],
            input_scale: 1.0,
            output_shape: vec![1, 8],
            output_scale: 0.5,
            inputs: vec![
                input("input_ids", Holds::Ids { vocabulary: 100 }),
                input("attention \"mask\"", Holds::Mask),
                input("features", Holds::Float),
            ],
        };
        let text = quantization.to_json();
        let read = Quantization::from_json(&text).expect("reads back");
        assert_eq!(read, quantization, "{text}");
        assert_eq!(read.check(0, &[0, 5, 99, 1]), Ok(()));
        assert_eq!(
            read.check(0, &[0, 5, 100, 1]),
            Err("value 100 at index 2 is not a token id (an integer from 0 to 99)".into())
        );
        assert_eq!(
            read.check(0, &[-1, 0, 0, 0]),
            Err("value -1 at index 0 is not a token id (an integer from 0 to 99)".into())
        );
        assert_eq!(
            read.check(1, &[1, 1, 2, 0]),
            Err("value 2 at index 2 is not an attention mask value (0 or 1)".into())
        );
        assert_eq!(read.check(2, &[-127, 127, 0, 3]), Ok(()));
        // An input the file does not describe is not checked.
        assert_eq!(read.check(3, &[1 << 30]), Ok(()));
        let bad = text.replace("{\"token_ids\": 100}", "{\"token_ids\": 0}");
        let err = Quantization::from_json(&bad).expect_err("refused");
        assert!(
            err.starts_with("inputs[0].holds is {\"token_ids\":0}"),
            "{err}"
        );
    }
}
