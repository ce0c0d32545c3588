//! What a trace of a run needs from the engine, which hashes nothing itself: the outputs of
//! every node in the canonical bytes a host hashes ([`run_trace_reply`], what `engine.wasm`'s
//! `cvm_run_trace` replies), and one node re-executed alone from its operands ([`run_node`]).
//!
//! A node output's canonical bytes are the borsh encoding of an `OutputTensor` (shape,
//! precision, values), exactly as the outcome holds a model output (`docs/model-format.md`,
//! section 4). The trace of [`run_trace_reply`] is the borsh encoding of `Vec<NodeOutputs>`, one
//! entry per node that ran, in execution order:
//!
//! | `NodeOutputs` field | type | meaning |
//! | --- | --- | --- |
//! | `node` | `u32` | the node's index |
//! | `gas_used` | `u64` | gas charged by the run so far, this node's included |
//! | `outputs` | `Vec<OutputTensor>` | the node's outputs in order |
//!
//! Its room is reserved before the run at the most a complete run writes
//! ([`trace_bytes`]), so recording a node never allocates.

use alloc::vec::Vec;

use crate::error::{Error, Result};
use crate::exec::{InputTensor, NodeObserver};
use crate::fail;
use crate::tensor::{Tensor, TensorMut, TensorRef, precision_bound};
use crate::validate::ValidatedModel;

/// Bytes of the trace of a complete run of `model` ([`run_trace_reply`]); `None` when the figure
/// overflows `u64`.
pub fn trace_bytes(model: &ValidatedModel) -> Option<u64> {
    model.nodes.iter().try_fold(4u64, |total, node| {
        // node, gas_used, the outputs' count.
        let record = node.output_types.iter().try_fold(4 + 8 + 4u64, |sum, ty| {
            let rank = ty.shape.0.len() as u64;
            // shape (count, dimensions), precision, values (count, words).
            let tensor = 4u64
                .checked_add(rank.checked_mul(4)?)?
                .checked_add(1 + 4)?
                .checked_add(ty.shape.elements().checked_mul(4)?)?;
            sum.checked_add(tensor)
        })?;
        total.checked_add(record)
    })
}

/// Records each node's outputs as the trace bytes of [`run_trace_reply`], in room reserved
/// before the run; a record that would not fit is dropped and the trace marked incomplete.
struct TraceRecorder {
    bytes: Vec<u8>,
    nodes: u32,
    complete: bool,
}

impl TraceRecorder {
    /// A recorder with room for the trace of a complete run of `model`, or `None` when that
    /// room cannot be allocated.
    fn for_model(model: &ValidatedModel) -> Option<TraceRecorder> {
        let room = usize::try_from(trace_bytes(model)?).ok()?;
        let mut bytes = Vec::new();
        bytes.try_reserve_exact(room).ok()?;
        // The node count, written once the run is over.
        bytes.extend_from_slice(&0u32.to_le_bytes());
        Some(TraceRecorder {
            bytes,
            nodes: 0,
            complete: true,
        })
    }

    /// Appends `words` as little-endian 4-byte words, within the reserved room.
    fn put_words<T: Copy>(&mut self, words: &[T], word: fn(T) -> [u8; 4]) {
        let start = self.bytes.len();
        self.bytes.resize(start + 4 * words.len(), 0);
        for (bytes, &value) in self.bytes[start..]
            .as_chunks_mut::<4>()
            .0
            .iter_mut()
            .zip(words)
        {
            *bytes = word(value);
        }
    }

    /// The trace bytes, or `None` when a record did not fit (an engine bug in [`trace_bytes`]).
    fn finish(mut self) -> Option<Vec<u8>> {
        if !self.complete {
            return None;
        }
        let count = self.nodes.to_le_bytes();
        self.bytes.get_mut(..4)?.copy_from_slice(&count);
        Some(self.bytes)
    }
}

impl NodeObserver for TraceRecorder {
    fn node_ran(&mut self, node_index: usize, gas_used: u64, outputs: &[TensorMut<'_>]) {
        let needed = outputs.iter().fold(4 + 8 + 4usize, |sum, output| {
            sum.saturating_add(4 + 4 * output.dims.len() + 1 + 4)
                .saturating_add(output.data.len().saturating_mul(4))
        });
        let fits = self.bytes.capacity() - self.bytes.len() >= needed;
        let (Ok(node), Ok(count), true) = (
            u32::try_from(node_index),
            u32::try_from(outputs.len()),
            fits && self.complete,
        ) else {
            self.complete = false;
            return;
        };
        self.put_words(&[node], u32::to_le_bytes);
        self.bytes.extend_from_slice(&gas_used.to_le_bytes());
        self.put_words(&[count], u32::to_le_bytes);
        for output in outputs {
            self.put_words(&[output.dims.len() as u32], u32::to_le_bytes);
            self.put_words(output.dims, u32::to_le_bytes);
            self.bytes.push(output.precision);
            self.put_words(&[output.data.len() as u32], u32::to_le_bytes);
            self.put_words(output.data, i32::to_le_bytes);
        }
        self.nodes += 1;
    }
}

/// Runs `model` as [`crate::exec::run_reply`] does and returns its reply (the report's borsh
/// bytes, identical to the untraced run's) with the trace of the run: every node that ran, its
/// gas so far and its outputs' canonical bytes (the module documentation). A failed run's trace
/// ends with the last node that completed.
///
/// # Errors
/// `None` when the room for the trace ([`trace_bytes`]) cannot be allocated; nothing has run.
pub fn run_trace_reply(
    model: &ValidatedModel,
    inputs: Vec<InputTensor>,
    gas_limit: u64,
) -> Option<(Vec<u8>, Vec<u8>)> {
    let mut recorder = TraceRecorder::for_model(model)?;
    let reply = crate::exec::run_reply_observed(model, inputs, gas_limit, &mut recorder);
    Some((reply, recorder.finish()?))
}

/// One node run alone ([`run_node`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeRun {
    /// The gas the node is charged in a run (its own, not the run's so far).
    pub gas: u64,
    /// Its outputs, in order, with their inferred types.
    pub outputs: Vec<Tensor>,
}

/// Runs node `node_index` of `model` alone on `operands`: one tensor for each of its operands
/// that is not a parameter of the model, in the node's operand order (parameters come from the
/// model). The outputs are those the node gives in a whole run on the same operand values.
///
/// # Errors
/// `InvalidReference` when the model has no node `node_index`; `InputCount` when the number of
/// operands differs from the node's non-parameter operands; `InputShape` when an operand's shape
/// or value count differs from the type validation inferred for it; `InputPrecision` when a
/// value exceeds that type's precision; then whatever the node's kernel fails with
/// (`IntegerOverflow`, `DivisionByZero`, …, attributed to the node), or `MemoryLimit` when its
/// outputs cannot be allocated.
pub fn run_node(
    model: &ValidatedModel,
    node_index: usize,
    operands: Vec<InputTensor>,
) -> Result<NodeRun> {
    let node = model.nodes.get(node_index).ok_or_else(|| {
        fail!(
            InvalidReference,
            "node {node_index} does not exist; the model has {} nodes (0..{})",
            model.nodes.len(),
            model.nodes.len()
        )
    })?;
    let at_node = |error: Error| error.at_node(node_index as u32, &node.name, node.op.name);
    let given: Vec<usize> = node
        .inputs
        .iter()
        .copied()
        .filter(|&value| !model.is_param(value))
        .collect();
    if operands.len() != given.len() {
        return Err(at_node(fail!(
            InputCount,
            "the node takes {} operand tensor(s) besides the model's parameters, {} were given",
            given.len(),
            operands.len()
        )));
    }
    let mut supplied = Vec::with_capacity(given.len());
    for (position, (&value, operand)) in given.iter().zip(operands).enumerate() {
        let ty = model
            .value_types
            .get(value)
            .ok_or_else(|| fail!(InvalidReference, "value {value} has no type (engine bug)"))?;
        if operand.shape != ty.shape.0 || operand.data.len() as u64 != ty.shape.elements() {
            return Err(at_node(fail!(
                InputShape,
                "operand tensor {position} must have shape {} ({} values), got shape {:?} with {} values",
                ty.shape,
                ty.shape.elements(),
                operand.shape,
                operand.data.len()
            )));
        }
        let bound = precision_bound(ty.precision);
        if let Some((at, value)) = operand
            .data
            .iter()
            .enumerate()
            .find(|&(_, &value)| i64::from(value).abs() > bound)
        {
            return Err(at_node(fail!(
                InputPrecision,
                "operand tensor {position}: value {value} at flat index {at} exceeds precision {} (|x| ≤ {bound})",
                ty.precision
            )));
        }
        supplied.push(Tensor {
            shape: ty.shape.clone(),
            precision: ty.precision,
            data: operand.data,
        });
    }
    // Operands in order: a parameter from the model, any other the next tensor supplied.
    let n_inputs = model.inputs.len();
    let mut supplied = supplied.iter();
    let mut views: Vec<TensorRef<'_>> = Vec::with_capacity(node.inputs.len());
    for &value in &node.inputs {
        let view = if model.is_param(value) {
            model
                .params
                .get(value - n_inputs)
                .map(|(_, param)| param.view())
        } else {
            supplied.next().map(Tensor::view)
        };
        views.push(view.ok_or_else(|| {
            fail!(
                InvalidReference,
                "value {value} is not available (engine bug)"
            )
        })?);
    }
    let mut outputs = node
        .output_types
        .iter()
        .map(Tensor::zeroed)
        .collect::<Result<Vec<_>>>()
        .map_err(at_node)?;
    {
        let mut results: Vec<TensorMut<'_>> = outputs.iter_mut().map(Tensor::view_mut).collect();
        node.operator.run(&views, &mut results).map_err(at_node)?;
    }
    Ok(NodeRun {
        gas: node.gas,
        outputs,
    })
}

#[cfg(test)]
mod tests;
