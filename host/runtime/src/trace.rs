//! Traces of runs: for every node in execution order a record of its index, name, operator,
//! operands, attributes, output shapes, the gas charged so far and a BLAKE3 digest of each
//! output; a Merkle root over the records; optionally the output values themselves.
//! [`diff`] finds where two traces of one model part. The layout is in `docs/model-format.md`,
//! section 4; what the pieces serve, in `docs/audit.md`.
//!
//! The engine hashes nothing: it hands each node's outputs to the host, natively through a
//! [`NodeObserver`] on the arena, in wasm as the trace bytes of `cvm_run_trace`
//! (`cvm_engine::trace`), and the host hashes them here. A trace is never part of the outcome,
//! and a traced run's report is the untraced run's.

use borsh::{BorshDeserialize, BorshSerialize};
use cvm_engine::ValidatedModel;
use cvm_engine::exec::{InputTensor, NodeObserver};
use cvm_engine::model::{Attr, Model, ParamData, ValueRef};
use cvm_engine::outcome::OutputTensor;
use cvm_engine::tensor::TensorMut;
use sha3::{Digest, Sha3_256};

use crate::hash::HashAlgorithm;
use crate::wasm::WasmSession;
use crate::{NodeError, Report};

/// The first 8 bytes of a trace file.
pub const TRACE_MAGIC: [u8; 8] = *b"CVMTRACE";

/// The trace file's layout version, the 4 bytes after the magic.
pub const TRACE_VERSION: u32 = 1;

/// Values a trace keeps by default when it keeps values (`cvm trace --values`): 2^24 (64 MiB).
pub const DEFAULT_VALUES_LIMIT: u64 = 1 << 24;

/// What a trace keeps besides the hashes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TraceOptions {
    /// Keep the output values of the nodes, in execution order, while the values kept stay
    /// within this many; a node whose outputs would pass it keeps none, nor do the nodes after
    /// it. `None`: hashes only.
    pub values_limit: Option<u64>,
}

/// One node of a trace. Its borsh encoding, prefixed with the byte 0, is hashed into a leaf of
/// the trace's Merkle tree.
#[derive(Clone, Debug, PartialEq, Eq, BorshSerialize, BorshDeserialize)]
pub struct NodeRecord {
    /// The node's index in the canonical model.
    pub index: u32,
    /// Its name.
    pub name: String,
    /// Its frozen operator code.
    pub op: u16,
    /// Its operator's name.
    pub op_name: String,
    /// Its operands, as the canonical model refers to them.
    pub inputs: Vec<ValueRef>,
    /// Its attributes, as the canonical model holds them.
    pub attrs: Vec<Attr>,
    /// The shape of each output.
    pub output_shapes: Vec<Vec<u32>>,
    /// Gas charged by the run up to and including this node.
    pub gas_used: u64,
    /// The digest of each output ([`tensor_hash`]: BLAKE3 of its shape, precision and values).
    pub output_hashes: Vec<[u8; 32]>,
}

/// The trace of one run.
#[derive(Clone, Debug, PartialEq, Eq, BorshSerialize, BorshDeserialize)]
pub struct Trace {
    /// SHA3-256 of the canonical model bytes.
    pub model_hash: [u8; 32],
    /// The gas schedule the model was priced under.
    pub schedule_version: u32,
    /// The digest of each input tensor given ([`tensor_hash`], precision 0).
    pub input_hashes: Vec<[u8; 32]>,
    /// The run's outcome hash (SHA3-256).
    pub outcome_hash: [u8; 32],
    /// The run's gas used.
    pub gas_used: u64,
    /// The nodes that completed, in execution order: every node of a successful run, those
    /// before the failing node of a failed one.
    pub nodes: Vec<NodeRecord>,
    /// The Merkle root over the node records ([`merkle_root`]).
    pub root: [u8; 32],
    /// The output values of each node record, when kept ([`TraceOptions::values_limit`]):
    /// empty, or one entry per record.
    pub values: Vec<Option<Vec<OutputTensor>>>,
}

/// What a trace needs of the model beyond the engine: its hash and its nodes as the canonical
/// model names them (parameters' values dropped).
#[derive(Clone, Debug)]
pub struct TraceModel {
    hash: [u8; 32],
    model: Model,
}

impl TraceModel {
    /// Decodes canonical model bytes for tracing.
    ///
    /// # Errors
    /// The engine's decoding error (`MalformedModel`, `UnsupportedVersion`).
    pub fn from_bytes(bytes: &[u8]) -> Result<TraceModel, cvm_engine::Error> {
        let mut model = Model::decode(bytes)?;
        for param in &mut model.params {
            param.data = ParamData::I8(Vec::new());
        }
        Ok(TraceModel {
            hash: Sha3_256::digest(bytes).into(),
            model,
        })
    }

    /// The decoded model, its parameters' values dropped.
    pub fn model(&self) -> &Model {
        &self.model
    }
}

/// A problem with a trace file or with what a trace says: never a panic.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TraceError {
    /// The bytes do not start with [`TRACE_MAGIC`].
    #[error("not a trace file (it does not start with CVMTRACE)")]
    NotATrace,
    /// The layout version is not [`TRACE_VERSION`].
    #[error("trace layout version {0} is not supported (this tool reads version {TRACE_VERSION})")]
    Version(u32),
    /// The body does not decode, or bytes remain after it.
    #[error("the trace does not decode: {0}")]
    Malformed(String),
    /// The parts of the trace disagree with each other (its root, its values, its lengths).
    #[error("the trace is inconsistent: {0}")]
    Inconsistent(String),
}

/// The digest of a node output: BLAKE3 of its trace bytes (`docs/model-format.md`, section
/// 4.2), which hold its shape, precision and values as the canonical bytes do, each value in
/// the fewest little-endian bytes (1, 2 or 4) that hold every value of the tensor.
pub fn tensor_hash(shape: &[u32], precision: u8, data: &[i32]) -> [u8; 32] {
    // Bytes fed to the hasher at a time: enough for BLAKE3 to hash its 1 KiB chunks in
    // parallel lanes.
    const BLOCK: usize = 1 << 16;
    let (low, high) = data.iter().fold((0i32, 0i32), |(low, high), &value| {
        (low.min(value), high.max(value))
    });
    let width: usize = if low >= i32::from(i8::MIN) && high <= i32::from(i8::MAX) {
        1
    } else if low >= i32::from(i16::MIN) && high <= i32::from(i16::MAX) {
        2
    } else {
        4
    };
    let mut hasher = blake3::Hasher::new();
    hasher.update(&(shape.len() as u32).to_le_bytes());
    for dim in shape {
        hasher.update(&dim.to_le_bytes());
    }
    hasher.update(&[precision, width as u8]);
    hasher.update(&(data.len() as u32).to_le_bytes());
    let mut block = vec![0u8; BLOCK];
    for values in data.chunks(BLOCK / width) {
        let bytes = &mut block[..width * values.len()];
        match width {
            1 => pack(bytes.as_chunks_mut().0, values, |value| [value as u8]),
            2 => pack(bytes.as_chunks_mut().0, values, |value| {
                (value as i16).to_le_bytes()
            }),
            _ => pack(bytes.as_chunks_mut().0, values, i32::to_le_bytes),
        }
        hasher.update(bytes);
    }
    hasher.finalize().into()
}

/// Writes `values` into `block`, each as the `W` bytes `encode` makes of it.
fn pack<const W: usize>(block: &mut [[u8; W]], values: &[i32], encode: impl Fn(i32) -> [u8; W]) {
    for (bytes, &value) in block.iter_mut().zip(values) {
        *bytes = encode(value);
    }
}

/// The leaf of `record`: SHA3-256 of the byte 0 followed by the record's borsh encoding.
pub fn leaf_hash(record: &NodeRecord) -> [u8; 32] {
    let mut hasher = Sha3_256::new();
    hasher.update([0u8]);
    // Writing into a hasher cannot fail.
    let _ = borsh::to_writer(&mut HashWriter(&mut hasher), record);
    hasher.finalize().into()
}

struct HashWriter<'a>(&'a mut Sha3_256);

impl std::io::Write for HashWriter<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.update(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The Merkle root over `leaves`: each level pairs neighbours, a pair becoming SHA3-256 of the
/// byte 1 and the two hashes, an unpaired last hash going up unchanged, until one is left. The
/// root of no leaves is SHA3-256 of no bytes.
pub fn merkle_root(leaves: &[[u8; 32]]) -> [u8; 32] {
    if leaves.is_empty() {
        return Sha3_256::digest([]).into();
    }
    let mut level = leaves.to_vec();
    while level.len() > 1 {
        level = level
            .chunks(2)
            .map(|pair| match pair {
                [left, right] => {
                    let mut hasher = Sha3_256::new();
                    hasher.update([1u8]);
                    hasher.update(left);
                    hasher.update(right);
                    hasher.finalize().into()
                }
                [alone] => *alone,
                _ => [0; 32],
            })
            .collect();
    }
    level[0]
}

/// Builds a trace node by node, from the native observer or from `engine.wasm`'s trace bytes.
struct Recorder<'a> {
    model: &'a TraceModel,
    options: TraceOptions,
    nodes: Vec<NodeRecord>,
    values: Vec<Option<Vec<OutputTensor>>>,
    kept: u64,
    /// Whether a node's outputs passed the values limit: no later node keeps values.
    values_stopped: bool,
    /// A node index the model does not have (an engine bug), reported after the run.
    unknown_node: Option<usize>,
}

impl<'a> Recorder<'a> {
    fn new(model: &'a TraceModel, options: TraceOptions) -> Recorder<'a> {
        Recorder {
            model,
            options,
            nodes: Vec::new(),
            values: Vec::new(),
            kept: 0,
            values_stopped: false,
            unknown_node: None,
        }
    }

    /// Whether `elements` more values may be kept.
    fn keeps(&mut self, elements: u64) -> bool {
        let Some(limit) = self.options.values_limit else {
            return false;
        };
        match self.kept.checked_add(elements) {
            Some(total) if !self.values_stopped && total <= limit => {
                self.kept = total;
                true
            }
            _ => {
                self.values_stopped = true;
                false
            }
        }
    }

    fn record(
        &mut self,
        node_index: usize,
        gas_used: u64,
        output_shapes: Vec<Vec<u32>>,
        output_hashes: Vec<[u8; 32]>,
        values: Option<Vec<OutputTensor>>,
    ) {
        let Some(node) = self.model.model.nodes.get(node_index) else {
            self.unknown_node.get_or_insert(node_index);
            return;
        };
        let op_name = cvm_engine::ops::by_code(node.op).map_or("?", |op| op.name);
        self.nodes.push(NodeRecord {
            index: node_index as u32,
            name: node.name.clone(),
            op: node.op,
            op_name: op_name.into(),
            inputs: node.inputs.clone(),
            attrs: node.attrs.clone(),
            output_shapes,
            gas_used,
            output_hashes,
        });
        if self.options.values_limit.is_some() {
            self.values.push(values);
        }
    }

    /// Records the trace bytes of `cvm_run_trace` (`cvm_engine::trace`).
    fn record_engine_trace(&mut self, bytes: &[u8]) -> Result<(), String> {
        let mut rest = bytes;
        let nodes = take_u32(&mut rest)?;
        let mut scratch: Vec<i32> = Vec::new();
        for _ in 0..nodes {
            let node = take_u32(&mut rest)? as usize;
            let gas_used = u64::from_le_bytes(take::<8>(&mut rest)?);
            let outputs = take_u32(&mut rest)?;
            let mut shapes = Vec::new();
            let mut hashes = Vec::new();
            let mut tensors = Vec::new();
            let mut elements = 0u64;
            for _ in 0..outputs {
                let start = rest;
                let rank = take_u32(&mut rest)? as usize;
                let shape = (0..rank)
                    .map(|_| take_u32(&mut rest))
                    .collect::<Result<Vec<u32>, String>>()?;
                let [precision] = take::<1>(&mut rest)?;
                let count = take_u32(&mut rest)? as usize;
                let words = count
                    .checked_mul(4)
                    .ok_or_else(|| "a value count overflows".to_string())?;
                let (data, left) = rest
                    .split_at_checked(words)
                    .ok_or_else(|| "the trace ends inside a tensor".to_string())?;
                rest = left;
                tensors.push(&start[..start.len() - rest.len()]);
                scratch.clear();
                scratch.extend(
                    data.as_chunks::<4>()
                        .0
                        .iter()
                        .map(|b| i32::from_le_bytes(*b)),
                );
                hashes.push(tensor_hash(&shape, precision, &scratch));
                shapes.push(shape);
                elements = elements.saturating_add(count as u64);
            }
            let values = if self.keeps(elements) {
                Some(
                    tensors
                        .into_iter()
                        .map(borsh::from_slice::<OutputTensor>)
                        .collect::<Result<Vec<_>, _>>()
                        .map_err(|error| error.to_string())?,
                )
            } else {
                None
            };
            self.record(node, gas_used, shapes, hashes, values);
        }
        if rest.is_empty() {
            Ok(())
        } else {
            Err(format!("{} bytes follow the trace", rest.len()))
        }
    }

    fn finish(self, input_hashes: Vec<[u8; 32]>, report: &Report) -> Result<Trace, NodeError> {
        if let Some(index) = self.unknown_node {
            return Err(NodeError::Wasm(format!(
                "the engine traced node {index}, which the model does not have"
            )));
        }
        let leaves: Vec<[u8; 32]> = self.nodes.iter().map(leaf_hash).collect();
        Ok(Trace {
            model_hash: self.model.hash,
            schedule_version: 0,
            input_hashes,
            outcome_hash: crate::hash::outcome_hash(report, HashAlgorithm::Sha3_256),
            gas_used: report.outcome.gas_used,
            root: merkle_root(&leaves),
            nodes: self.nodes,
            values: self.values,
        })
    }
}

/// The digest of each input tensor: [`tensor_hash`] of its shape and values, with precision 0
/// (an input carries none).
fn input_hashes(inputs: &[InputTensor]) -> Vec<[u8; 32]> {
    inputs
        .iter()
        .map(|input| tensor_hash(&input.shape, 0, &input.data))
        .collect()
}

fn take<const N: usize>(rest: &mut &[u8]) -> Result<[u8; N], String> {
    let (taken, left) = rest
        .split_first_chunk::<N>()
        .ok_or_else(|| "the trace ends early".to_string())?;
    *rest = left;
    Ok(*taken)
}

fn take_u32(rest: &mut &[u8]) -> Result<u32, String> {
    take::<4>(rest).map(u32::from_le_bytes)
}

impl NodeObserver for Recorder<'_> {
    fn node_ran(&mut self, node_index: usize, gas_used: u64, outputs: &[TensorMut<'_>]) {
        let shapes = outputs.iter().map(|output| output.dims.to_vec()).collect();
        let hashes = outputs
            .iter()
            .map(|output| tensor_hash(output.dims, output.precision, output.data))
            .collect();
        let elements = outputs.iter().fold(0u64, |sum, output| {
            sum.saturating_add(output.data.len() as u64)
        });
        let values = self.keeps(elements).then(|| {
            outputs
                .iter()
                .map(|output| OutputTensor {
                    shape: output.dims.to_vec(),
                    precision: output.precision,
                    data: output.data.to_vec(),
                })
                .collect()
        });
        self.record(node_index, gas_used, shapes, hashes, values);
    }
}

/// Runs `validated` natively on `inputs` with a trace: the report is the untraced run's.
///
/// # Errors
/// Never for the model's own errors; [`NodeError::Wasm`] only on an engine bug (a node index
/// the model does not have).
pub fn trace_native(
    validated: &ValidatedModel,
    model: &TraceModel,
    inputs: Vec<InputTensor>,
    gas_limit: u64,
    options: TraceOptions,
) -> Result<(Report, Trace), NodeError> {
    let mut recorder = Recorder::new(model, options);
    let hashes = input_hashes(&inputs);
    let report = cvm_engine::exec::run_observed(validated, inputs, gas_limit, &mut recorder);
    let mut trace = recorder.finish(hashes, &report)?;
    trace.schedule_version = validated.schedule.version;
    Ok((report, trace))
}

/// Runs the model loaded in `session` (under gas schedule `schedule_version`) on `inputs` with a
/// trace (`cvm_run_trace`): the report is the untraced run's.
///
/// # Errors
/// [`NodeError`] when the wasm runtime fails or the engine's trace bytes do not parse.
pub fn trace_wasm(
    session: &mut WasmSession,
    schedule_version: u32,
    model: &TraceModel,
    inputs: &[InputTensor],
    gas_limit: u64,
    options: TraceOptions,
) -> Result<(Report, Trace), NodeError> {
    let mut recorder = Recorder::new(model, options);
    let (report, parsed) = session.run_traced(inputs, gas_limit, |bytes| {
        recorder.record_engine_trace(bytes)
    })?;
    parsed.map_err(|error| NodeError::Wasm(format!("reading the engine's trace: {error}")))?;
    let mut trace = recorder.finish(input_hashes(inputs), &report)?;
    trace.schedule_version = schedule_version;
    Ok((report, trace))
}

impl Trace {
    /// The trace file: [`TRACE_MAGIC`], [`TRACE_VERSION`] as `u32` little endian, then the
    /// trace's borsh encoding.
    pub fn to_file_bytes(&self) -> Vec<u8> {
        let mut bytes = TRACE_MAGIC.to_vec();
        bytes.extend_from_slice(&TRACE_VERSION.to_le_bytes());
        // Writing into a vector cannot fail.
        let _ = borsh::to_writer(&mut bytes, self);
        bytes
    }

    /// Reads a trace file and checks that its parts agree: the root is that of the records,
    /// every record has one hash per output shape, and kept values match their hashes.
    ///
    /// # Errors
    /// [`TraceError`] saying what is wrong.
    pub fn from_file_bytes(bytes: &[u8]) -> Result<Trace, TraceError> {
        let body = bytes
            .strip_prefix(&TRACE_MAGIC)
            .ok_or(TraceError::NotATrace)?;
        let (version, body) = body
            .split_first_chunk::<4>()
            .ok_or_else(|| TraceError::Malformed("the file ends inside the version".into()))?;
        let version = u32::from_le_bytes(*version);
        if version != TRACE_VERSION {
            return Err(TraceError::Version(version));
        }
        let trace: Trace =
            borsh::from_slice(body).map_err(|error| TraceError::Malformed(error.to_string()))?;
        trace.check()?;
        Ok(trace)
    }

    fn check(&self) -> Result<(), TraceError> {
        let inconsistent = |what: String| Err(TraceError::Inconsistent(what));
        for record in &self.nodes {
            if record.output_hashes.len() != record.output_shapes.len() {
                return inconsistent(format!(
                    "node {} has {} output shapes and {} output hashes",
                    record.index,
                    record.output_shapes.len(),
                    record.output_hashes.len()
                ));
            }
        }
        let leaves: Vec<[u8; 32]> = self.nodes.iter().map(leaf_hash).collect();
        if merkle_root(&leaves) != self.root {
            return inconsistent("its root is not the Merkle root of its node records".into());
        }
        if !self.values.is_empty() && self.values.len() != self.nodes.len() {
            return inconsistent(format!(
                "it keeps values for {} nodes of {}",
                self.values.len(),
                self.nodes.len()
            ));
        }
        for (record, values) in self.nodes.iter().zip(&self.values) {
            let Some(values) = values else { continue };
            let hashes: Vec<[u8; 32]> = values
                .iter()
                .map(|tensor| tensor_hash(&tensor.shape, tensor.precision, &tensor.data))
                .collect();
            if hashes != record.output_hashes {
                return inconsistent(format!(
                    "the values kept for node {} (\"{}\") do not match its hashes",
                    record.index, record.name
                ));
            }
        }
        Ok(())
    }

    /// The output values of the node record at `position`, when kept.
    pub fn values_of(&self, position: usize) -> Option<&[OutputTensor]> {
        self.values.get(position)?.as_deref()
    }
}

/// Where two traces part ([`diff`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TraceDiff {
    /// Same model, schedule, inputs, node records and outcome.
    Equal,
    /// The traces are of different models or gas schedules: nothing node by node compares.
    DifferentModels,
    /// Node `index` is the first whose outputs differ, and one of its operands is a model input
    /// that differs: the runs were given different inputs.
    DifferentInputs {
        /// The node's position in both traces.
        index: usize,
        /// The model inputs that differ.
        inputs: Vec<u32>,
    },
    /// Node `index` is the first whose outputs differ while its operands agree: that node
    /// computed differently.
    Node(NodeDivergence),
    /// Every node both traces hold agrees, but one run stopped earlier (a failure at the next
    /// node), after `common` nodes.
    Stopped {
        /// Nodes both hold.
        common: usize,
    },
    /// Every node agrees but the outcomes differ (the gas, or the model outputs' listing).
    OutcomeOnly,
}

/// The node at which two traces part.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeDivergence {
    /// The node's position in both traces (its index in the model).
    pub index: usize,
    /// The first output whose hashes differ.
    pub output: usize,
    /// When both traces keep the node's values: up to [`DIFF_ELEMENTS`] differing elements of
    /// that output, as (flat index, value in the first trace, value in the second).
    pub elements: Option<Vec<(usize, i32, i32)>>,
}

/// How many differing elements [`diff`] reports.
pub const DIFF_ELEMENTS: usize = 8;

/// Compares two traces of a run of one model: the first node whose outputs differ while its
/// operands agree, with its first differing elements when both traces keep the values.
pub fn diff(a: &Trace, b: &Trace) -> TraceDiff {
    if a.model_hash != b.model_hash || a.schedule_version != b.schedule_version {
        return TraceDiff::DifferentModels;
    }
    for (index, (left, right)) in a.nodes.iter().zip(&b.nodes).enumerate() {
        if left.output_hashes == right.output_hashes && left.output_shapes == right.output_shapes {
            continue;
        }
        // Every earlier node agrees, so an operand that differs is a model input.
        let inputs: Vec<u32> = left
            .inputs
            .iter()
            .filter_map(|operand| match *operand {
                ValueRef::Input(input)
                    if a.input_hashes.get(input as usize) != b.input_hashes.get(input as usize) =>
                {
                    Some(input)
                }
                _ => None,
            })
            .collect();
        if !inputs.is_empty() {
            return TraceDiff::DifferentInputs { index, inputs };
        }
        let output = left
            .output_hashes
            .iter()
            .zip(&right.output_hashes)
            .position(|(x, y)| x != y)
            .unwrap_or(0);
        let elements = match (a.values_of(index), b.values_of(index)) {
            (Some(x), Some(y)) => match (x.get(output), y.get(output)) {
                (Some(x), Some(y)) => Some(
                    x.data
                        .iter()
                        .zip(&y.data)
                        .enumerate()
                        .filter(|(_, (p, q))| p != q)
                        .take(DIFF_ELEMENTS)
                        .map(|(at, (&p, &q))| (at, p, q))
                        .collect(),
                ),
                _ => None,
            },
            _ => None,
        };
        return TraceDiff::Node(NodeDivergence {
            index,
            output,
            elements,
        });
    }
    if a.nodes.len() != b.nodes.len() {
        return TraceDiff::Stopped {
            common: a.nodes.len().min(b.nodes.len()),
        };
    }
    if a.outcome_hash != b.outcome_hash || a.input_hashes != b.input_hashes {
        return TraceDiff::OutcomeOnly;
    }
    TraceDiff::Equal
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash(byte: u8) -> [u8; 32] {
        [byte; 32]
    }

    #[test]
    fn the_merkle_root_pairs_neighbours_and_carries_the_odd_one_up() {
        let pair = |l: [u8; 32], r: [u8; 32]| -> [u8; 32] {
            let mut bytes = vec![1u8];
            bytes.extend_from_slice(&l);
            bytes.extend_from_slice(&r);
            Sha3_256::digest(&bytes).into()
        };
        assert_eq!(merkle_root(&[]), <[u8; 32]>::from(Sha3_256::digest([])));
        assert_eq!(merkle_root(&[hash(1)]), hash(1));
        assert_eq!(merkle_root(&[hash(1), hash(2)]), pair(hash(1), hash(2)));
        assert_eq!(
            merkle_root(&[hash(1), hash(2), hash(3)]),
            pair(pair(hash(1), hash(2)), hash(3))
        );
    }

    #[test]
    fn a_tensor_hash_is_blake3_of_its_values_at_the_narrowest_width() {
        // The trace bytes spelled out: rank, dims, precision, width, count, values.
        let expected = |shape: &[u32], precision: u8, width: u8, values: &[u8]| {
            let mut bytes = (shape.len() as u32).to_le_bytes().to_vec();
            for dim in shape {
                bytes.extend(dim.to_le_bytes());
            }
            bytes.extend([precision, width]);
            bytes.extend((values.len() as u32 / u32::from(width)).to_le_bytes());
            bytes.extend(values);
            <[u8; 32]>::from(blake3::hash(&bytes))
        };
        assert_eq!(
            tensor_hash(&[3], 8, &[-128, 0, 127]),
            expected(&[3], 8, 1, &[0x80, 0x00, 0x7f])
        );
        assert_eq!(
            tensor_hash(&[1, 2], 16, &[-129, 32767]),
            expected(&[1, 2], 16, 2, &[0x7f, 0xff, 0xff, 0x7f])
        );
        assert_eq!(
            tensor_hash(&[2], 32, &[32768, -1]),
            expected(&[2], 32, 4, &[0, 0x80, 0, 0, 0xff, 0xff, 0xff, 0xff])
        );
        assert_eq!(tensor_hash(&[0], 8, &[]), expected(&[0], 8, 1, &[]));
        // Beyond one block of values, and equal values hash equally whatever the width.
        let long: Vec<i32> = (0..10_000).map(|v| v % 300 - 150).collect();
        let bytes: Vec<u8> = long
            .iter()
            .flat_map(|v| (*v as i16).to_le_bytes())
            .collect();
        assert_eq!(
            tensor_hash(&[10_000], 9, &long),
            expected(&[10_000], 9, 2, &bytes)
        );
        assert_ne!(
            tensor_hash(&[2], 8, &[1, 2]),
            tensor_hash(&[2], 8, &[1, 258])
        );
    }

    #[test]
    fn bad_trace_files_are_typed_errors() {
        let trace = Trace {
            model_hash: hash(7),
            schedule_version: 1,
            input_hashes: vec![],
            outcome_hash: hash(8),
            gas_used: 3,
            nodes: vec![],
            root: merkle_root(&[]),
            values: vec![],
        };
        let bytes = trace.to_file_bytes();
        assert_eq!(Trace::from_file_bytes(&bytes), Ok(trace.clone()));
        assert_eq!(
            Trace::from_file_bytes(b"CVMMODEL"),
            Err(TraceError::NotATrace)
        );
        assert!(matches!(
            Trace::from_file_bytes(&bytes[..10]),
            Err(TraceError::Malformed(_))
        ));
        let mut other = bytes.clone();
        other[8] = 2;
        assert_eq!(Trace::from_file_bytes(&other), Err(TraceError::Version(2)));
        let mut trailing = bytes.clone();
        trailing.push(0);
        assert!(matches!(
            Trace::from_file_bytes(&trailing),
            Err(TraceError::Malformed(_))
        ));
        let damaged = Trace {
            root: hash(0),
            ..trace
        };
        assert!(matches!(
            Trace::from_file_bytes(&damaged.to_file_bytes()),
            Err(TraceError::Inconsistent(_))
        ));
    }
}
