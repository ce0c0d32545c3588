//! The executor: checks inputs, then runs a [`ValidatedModel`] node by node, charging each
//! node's gas before it runs and freeing every buffer after its last use.
//!
//! Architecture Invariant: gas is charged before work, from the static per-node figures of
//! validation, so a complete run charges exactly `ValidatedModel::total_gas`, and a run whose
//! limit is below that stops with `OutOfGas` at the first node it cannot pay for.

use alloc::string::String;
use alloc::vec::Vec;
use borsh::{BorshDeserialize, BorshSerialize};

use crate::error::{Error, Result};
use crate::fail;
use crate::outcome::Report;
use crate::tensor::{Tensor, TensorMut, TensorRef, precision_bound};
use crate::validate::{ValidatedModel, ValueId};

/// A model input as callers supply it: shape and row-major values. Its precision is the
/// declared one.
#[derive(Clone, Debug, PartialEq, Eq, BorshSerialize, BorshDeserialize)]
pub struct InputTensor {
    /// Shape; must equal the declaration.
    pub shape: Vec<u32>,
    /// Values; each within the declared precision.
    pub data: Vec<i32>,
}

/// Runs `model` on `inputs` (in declared order) with at most `gas_limit` gas.
///
/// Never panics on any input; every failure is a deterministic [`Report`] failure.
pub fn run(model: &ValidatedModel, inputs: Vec<InputTensor>, gas_limit: u64) -> Report {
    let mut gas_used = 0u64;
    match execute(model, inputs, gas_limit, &mut gas_used) {
        Ok(outputs) => Report::success(outputs, gas_used),
        Err(error) => Report::failure(error, gas_used),
    }
}

/// Checks inputs against the declarations and turns them into tensors.
fn check_inputs(model: &ValidatedModel, inputs: Vec<InputTensor>) -> Result<Vec<Tensor>> {
    if inputs.len() != model.inputs.len() {
        return Err(fail!(
            InputCount,
            "the model takes {} input(s), {} were given",
            model.inputs.len(),
            inputs.len()
        ));
    }
    model
        .inputs
        .iter()
        .zip(inputs)
        .map(|(declared, given)| {
            if given.shape != declared.ty.shape.0 {
                return Err(fail!(
                    InputShape,
                    "input \"{}\" must have shape {}, got {:?}",
                    declared.name,
                    declared.ty.shape,
                    given.shape
                ));
            }
            if given.data.len() as u64 != declared.ty.shape.elements() {
                return Err(fail!(
                    InputShape,
                    "input \"{}\" has {} values for shape {}",
                    declared.name,
                    given.data.len(),
                    declared.ty.shape
                ));
            }
            let bound = precision_bound(declared.ty.precision);
            if let Some((index, value)) =
                given.data.iter().enumerate().find(|&(_, &v)| i64::from(v).abs() > bound)
            {
                return Err(fail!(
                    InputPrecision,
                    "input \"{}\": value {value} at flat index {index} exceeds precision {} (|x| ≤ {bound})",
                    declared.name,
                    declared.ty.precision
                ));
            }
            Ok(Tensor { shape: declared.ty.shape.clone(), precision: declared.ty.precision, data: given.data })
        })
        .collect()
}

/// Storage of the values of one run. Parameters are borrowed from the model.
struct Values<'m> {
    model: &'m ValidatedModel,
    slots: Vec<Option<Tensor>>,
}

impl<'m> Values<'m> {
    fn get(&self, id: ValueId) -> Result<&Tensor> {
        if self.model.is_param(id) {
            return Ok(&self.model.params[id - self.model.inputs.len()].1);
        }
        self.slots
            .get(id)
            .and_then(Option::as_ref)
            .ok_or_else(|| fail!(InvalidReference, "value {id} is not available (engine bug)"))
    }
}

fn execute(
    model: &ValidatedModel,
    inputs: Vec<InputTensor>,
    gas_limit: u64,
    gas_used: &mut u64,
) -> Result<Vec<(String, Tensor)>> {
    let inputs = check_inputs(model, inputs)?;
    let mut values = Values {
        model,
        slots: Vec::new(),
    };
    values.slots.resize_with(model.value_types.len(), || None);
    for (slot, tensor) in values.slots.iter_mut().zip(inputs) {
        *slot = Some(tensor);
    }

    for (node_index, node) in model.nodes.iter().enumerate() {
        let at_node = |error: Error| error.at_node(node_index as u32, &node.name, node.op.name);
        let charged = gas_used
            .checked_add(node.gas)
            .filter(|&total| total <= gas_limit)
            .ok_or_else(|| {
                at_node(fail!(
                    OutOfGas,
                    "the node costs {} gas; {} of the limit {gas_limit} remain",
                    node.gas,
                    gas_limit.saturating_sub(*gas_used)
                ))
            })?;
        *gas_used = charged;

        let mut outputs: Vec<Tensor> = node
            .output_types
            .iter()
            .map(Tensor::zeroed)
            .collect::<Result<_>>()
            .map_err(at_node)?;
        {
            let operands: Vec<TensorRef<'_>> = node
                .inputs
                .iter()
                .map(|&id| values.get(id).map(Tensor::view))
                .collect::<Result<_>>()
                .map_err(at_node)?;
            let mut results: Vec<TensorMut<'_>> =
                outputs.iter_mut().map(Tensor::view_mut).collect();
            node.operator
                .run(&operands, &mut results)
                .map_err(at_node)?;
        }
        for (offset, tensor) in outputs.into_iter().enumerate() {
            values.slots[node.first_output + offset] = Some(tensor);
        }
        for &dead in &node.frees {
            values.slots[dead] = None;
        }
    }

    let mut results = Vec::with_capacity(model.outputs.len());
    for (position, (name, id)) in model.outputs.iter().enumerate() {
        // The last listing of a value takes it; earlier listings (and parameters) clone.
        let listed_again = model.outputs[position + 1..]
            .iter()
            .any(|(_, other)| other == id);
        let tensor = if model.is_param(*id) || listed_again {
            values.get(*id)?.clone()
        } else {
            values.slots[*id].take().ok_or_else(|| {
                fail!(
                    InvalidReference,
                    "output \"{name}\" is not available (engine bug)"
                )
            })?
        };
        results.push((name.clone(), tensor));
    }
    Ok(results)
}
