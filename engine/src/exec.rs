//! The executor: checks inputs, then runs a [`ValidatedModel`] node by node, charging each
//! node's gas before it runs and freeing every buffer after its last use.
//!
//! Architecture Invariant: gas is charged before work, from the static per-node figures of
//! validation, so a complete run charges exactly `ValidatedModel::total_gas`, and a run whose
//! limit is below that stops with `OutOfGas` at the first node it cannot pay for.
//!
//! [`run_unmetered`] drives the same executor with a meter that charges nothing, so benchmarks
//! can measure what metering costs.

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
    let mut meter = GasMeter {
        limit: gas_limit,
        used: 0,
    };
    match execute(model, inputs, &mut meter) {
        Ok(outputs) => Report::success(outputs, meter.used),
        Err(error) => Report::failure(error, meter.used),
    }
}

/// Runs `model` on `inputs` as [`run`] does, through the same executor, but without charging
/// gas: the report's `gas_used` is 0 and no run stops with `OutOfGas`. Only for benchmarks that
/// measure what metering costs; its outcomes are not consensus outcomes.
#[doc(hidden)]
pub fn run_unmetered(model: &ValidatedModel, inputs: Vec<InputTensor>) -> Report {
    match execute(model, inputs, &mut Unmetered) {
        Ok(outputs) => Report::success(outputs, 0),
        Err(error) => Report::failure(error, 0),
    }
}

/// How the executor pays for a node before running it. Generic rather than dynamic, so the
/// unmetered executor carries no trace of the charging code.
trait Meter {
    /// Pays `gas` for the next node, or fails (without node attribution; the caller adds it).
    fn charge(&mut self, gas: u64) -> Result<()>;
}

/// The consensus meter: gas used so far, never above the limit.
struct GasMeter {
    limit: u64,
    used: u64,
}

impl Meter for GasMeter {
    fn charge(&mut self, gas: u64) -> Result<()> {
        let limit = self.limit;
        self.used = self
            .used
            .checked_add(gas)
            .filter(|&total| total <= limit)
            .ok_or_else(|| {
                fail!(
                    OutOfGas,
                    "the node costs {gas} gas; {} of the limit {limit} remain",
                    limit.saturating_sub(self.used)
                )
            })?;
        Ok(())
    }
}

/// Charges nothing ([`run_unmetered`]).
struct Unmetered;

impl Meter for Unmetered {
    #[inline]
    fn charge(&mut self, _gas: u64) -> Result<()> {
        Ok(())
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

fn execute<M: Meter>(
    model: &ValidatedModel,
    inputs: Vec<InputTensor>,
    meter: &mut M,
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
        meter.charge(node.gas).map_err(at_node)?;

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

#[cfg(test)]
mod tests {
    use alloc::vec;

    use super::*;
    use crate::model::{InputDecl, Model, Node, OutputDecl, ValueRef};
    use crate::outcome::Status;

    /// `relu(relu(x))` on four values: two nodes of 104 gas each.
    fn two_relus() -> ValidatedModel {
        let relu = crate::ops::by_name("relu")
            .map(|op| op.code)
            .unwrap_or_default();
        let node = |name: &str, input: ValueRef| Node {
            name: name.into(),
            op: relu,
            inputs: vec![input],
            attrs: vec![],
        };
        let model = Model {
            inputs: vec![InputDecl {
                name: "x".into(),
                shape: vec![4],
                precision: 8,
            }],
            params: vec![],
            nodes: vec![
                node("first", ValueRef::Input(0)),
                node("second", ValueRef::Node { node: 0, output: 0 }),
            ],
            outputs: vec![OutputDecl {
                name: "y".into(),
                value: ValueRef::Node { node: 1, output: 0 },
            }],
        };
        ValidatedModel::from_bytes(&model.encode()).unwrap()
    }

    fn input() -> Vec<InputTensor> {
        vec![InputTensor {
            shape: vec![4],
            data: vec![-3, 0, 5, -127],
        }]
    }

    #[test]
    fn unmetered_runs_produce_the_metered_outputs_and_charge_nothing() {
        let model = two_relus();
        let metered = run(&model, input(), u64::MAX);
        assert_eq!(metered.outcome.gas_used, model.total_gas);
        let unmetered = run_unmetered(&model, input());
        assert_eq!(unmetered.outcome.gas_used, 0);
        assert_eq!(unmetered.outcome.status, metered.outcome.status);
        assert_eq!(unmetered.output_names, metered.output_names);
        let Status::Ok { outputs } = unmetered.outcome.status else {
            panic!("{unmetered:?}")
        };
        assert_eq!(outputs[0].data, [0, 0, 5, 0]);
    }

    #[test]
    fn metered_runs_stop_at_the_first_node_they_cannot_pay_for() {
        let model = two_relus();
        let first = model.nodes[0].gas;
        let report = run(&model, input(), first);
        assert_eq!(report.outcome.gas_used, first);
        assert_eq!(
            report.outcome.status,
            Status::Error {
                code: crate::ErrorCode::OutOfGas.number(),
                node: Some(1)
            }
        );
        // Without a meter the same limit does not apply.
        let unmetered = run_unmetered(&model, input());
        assert!(matches!(unmetered.outcome.status, Status::Ok { .. }));
    }
}
