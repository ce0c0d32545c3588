//! The executor: checks inputs, then runs a [`ValidatedModel`] node by node, charging each
//! node's gas before it runs.
//!
//! A run allocates one arena for all node outputs, laid out by the static plan of validation
//! ([`crate::plan`]): each node's outputs are zeroed in place and handed to its operator as
//! views, next to views of its operands (arena values, the caller's inputs, or the model's
//! parameters); a value's elements are reused by later values once it is dead. The views are
//! carved out of the arena with `split_at_mut`, so the plan's promise that a node's outputs
//! share no element with its inputs or each other is checked, not assumed: a plan that broke
//! it would fail the run as an engine bug. The model outputs are copied out at the end.
//!
//! Architecture Invariant: gas is charged before work, from the static figures of validation:
//! the run's own gas (`ValidatedModel::run_gas`) once the inputs are checked, then each node's
//! before it runs, so a complete run charges exactly `ValidatedModel::total_gas`, and a run
//! whose limit is below that stops with `OutOfGas` at the first charge it cannot pay.
//!
//! [`run_unmetered`] drives the same executor with a meter that charges nothing, so benchmarks
//! can measure what metering costs.

use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use borsh::{BorshDeserialize, BorshSerialize};

use crate::error::{Error, Result};
use crate::fail;
use crate::outcome::Report;
use crate::tensor::{Tensor, TensorMut, TensorRef, TensorType, precision_bound};
use crate::validate::{ValidatedModel, ValidatedNode, ValueId};

/// A model input as callers supply it: shape and row-major values. Its precision is the
/// declared one.
#[derive(Clone, Debug, PartialEq, Eq, BorshSerialize, BorshDeserialize)]
pub struct InputTensor {
    /// Shape; must equal the declaration.
    pub shape: Vec<u32>,
    /// Values; each within the declared precision.
    pub data: Vec<i32>,
}

/// Decodes the borsh encoding of `Vec<InputTensor>` (the ABI's inputs) a whole value array at a
/// time, rather than value by value as the derived decoder does. The bytes it accepts, and the
/// tensors it returns, are exactly those of `borsh::from_slice`; for any other byte string it
/// returns `None`, and the caller lets borsh say what is wrong. Nothing is allocated beyond what
/// the bytes hold: every length is checked against the bytes left before anything is reserved.
pub fn decode_inputs(bytes: &[u8]) -> Option<Vec<InputTensor>> {
    /// Splits `count` little-endian 32-bit words off the front of `rest`.
    fn words<'a>(rest: &mut &'a [u8], count: usize) -> Option<&'a [[u8; 4]]> {
        let (taken, left) = rest.split_at_checked(count.checked_mul(4)?)?;
        *rest = left;
        Some(taken.as_chunks::<4>().0)
    }
    fn length(rest: &mut &[u8]) -> Option<usize> {
        let [word] = words(rest, 1)? else {
            return None;
        };
        usize::try_from(u32::from_le_bytes(*word)).ok()
    }
    let mut rest = bytes;
    let count = length(&mut rest)?;
    let mut inputs = Vec::new();
    for _ in 0..count {
        let dims = length(&mut rest)?;
        let shape = words(&mut rest, dims)?
            .iter()
            .map(|&word| u32::from_le_bytes(word))
            .collect();
        let values = length(&mut rest)?;
        let values = words(&mut rest, values)?;
        let mut data = Vec::new();
        data.try_reserve_exact(values.len()).ok()?;
        data.extend(values.iter().map(|&word| i32::from_le_bytes(word)));
        inputs.push(InputTensor { shape, data });
    }
    rest.is_empty().then_some(inputs)
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
    /// Pays `gas` for the run or its next node, or fails (without node attribution; the caller
    /// adds it).
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
                    "the next charge is {gas} gas; {} of the limit {limit} remain",
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

/// A value a node touches in the arena: where it lives and how the node uses it.
#[derive(Clone, Copy, Debug)]
struct Region {
    start: usize,
    len: usize,
    value: ValueId,
    /// The position among the node's outputs, or `None` for an operand.
    output: Option<usize>,
}

/// An engine-bug failure: the memory plan does not hold.
fn plan_broken(what: core::fmt::Arguments<'_>) -> Error {
    fail!(
        InvalidReference,
        "the memory plan is inconsistent: {what} (engine bug)"
    )
}

/// The arena elements of node output `value`, as indices of the arena.
fn arena_region(model: &ValidatedModel, value: ValueId) -> Result<Option<(usize, usize)>> {
    let Some(range) = model.arena_range(value) else {
        return Ok(None);
    };
    let start = usize::try_from(range.start);
    let len = usize::try_from(range.end - range.start);
    match (start, len) {
        (Ok(start), Ok(len)) => Ok(Some((start, len))),
        _ => Err(plan_broken(format_args!(
            "value {value} at {range:?} is outside the address space"
        ))),
    }
}

/// The views of one node's operands and outputs.
struct NodeViews<'a> {
    operands: Vec<TensorRef<'a>>,
    results: Vec<TensorMut<'a>>,
}

/// Carves the views node `node` needs: its operands from `inputs` (the caller's tensors), the
/// model's parameters and `arena`, and its outputs from `arena`, zeroed unless the operator
/// writes every element of them ([`crate::ops::Operator::writes_every_output`]).
///
/// The regions the node touches are sorted by offset and split off the arena one after the
/// other; an operand the node reads twice is one shared region. Regions that overlap, or lie
/// outside the arena, fail as an engine bug.
fn node_views<'a>(
    model: &'a ValidatedModel,
    node: &'a ValidatedNode,
    inputs: &'a [Tensor],
    arena: &'a mut [i32],
) -> Result<NodeViews<'a>> {
    let first_node_value = model.first_node_value();
    let mut regions: Vec<Region> = Vec::with_capacity(node.inputs.len() + node.output_types.len());
    // Inputs and parameters are not in the arena.
    for &value in node
        .inputs
        .iter()
        .filter(|&&value| value >= first_node_value)
    {
        if let Some((start, len)) = arena_region(model, value)? {
            regions.push(Region {
                start,
                len,
                value,
                output: None,
            });
        }
    }
    for position in 0..node.output_types.len() {
        let value = node.first_output + position;
        let (start, len) = arena_region(model, value)?
            .ok_or_else(|| plan_broken(format_args!("output {value} has no place")))?;
        regions.push(Region {
            start,
            len,
            value,
            output: Some(position),
        });
    }
    // Empty regions take no elements and may sit anywhere; the others must be disjoint, a
    // repeated operand being one region.
    regions.retain(|region| region.len > 0);
    regions.sort_unstable_by_key(|region| (region.start, region.value));
    regions.dedup_by_key(|region| region.value);

    let mut operand_data: Vec<(ValueId, &'a [i32])> = Vec::new();
    let mut output_data: Vec<&'a mut [i32]> = Vec::new();
    output_data.resize_with(node.output_types.len(), Default::default);
    let mut rest: &'a mut [i32] = arena;
    let mut rest_start = 0usize;
    for region in &regions {
        let carved = region
            .start
            .checked_sub(rest_start)
            .and_then(|gap| rest.split_at_mut_checked(gap))
            .and_then(|(_, tail)| tail.split_at_mut_checked(region.len));
        let Some((data, tail)) = carved else {
            return Err(plan_broken(format_args!(
                "value {} at {}..{} overlaps another value of the node or leaves the arena",
                region.value,
                region.start,
                region.start + region.len
            )));
        };
        rest = tail;
        rest_start = region.start + region.len;
        match region.output {
            Some(position) => {
                if !node.operator.writes_every_output() {
                    data.fill(0);
                }
                output_data[position] = data;
            }
            None => operand_data.push((region.value, data)),
        }
    }
    operand_data.sort_unstable_by_key(|&(value, _)| value);

    // A plain loop rather than collecting `Result`s: this runs for every operand of every node.
    let n_inputs = model.inputs.len();
    let mut operands = Vec::with_capacity(node.inputs.len());
    for &value in &node.inputs {
        if let Some(tensor) = inputs.get(value) {
            operands.push(tensor.view());
            continue;
        }
        if let Some((_, param)) = value
            .checked_sub(n_inputs)
            .and_then(|index| model.params.get(index))
        {
            operands.push(param.view());
            continue;
        }
        let Some(ty) = model.value_types.get(value) else {
            return Err(fail!(
                InvalidReference,
                "value {value} is not available (engine bug)"
            ));
        };
        let data = match operand_data.binary_search_by_key(&value, |&(id, _)| id) {
            Ok(found) => operand_data[found].1,
            // Only empty values have no region.
            Err(_) if ty.shape.elements() == 0 => &[],
            Err(_) => {
                return Err(plan_broken(format_args!("operand {value} has no region")));
            }
        };
        operands.push(TensorRef {
            dims: ty.shape.dims(),
            precision: ty.precision,
            data,
        });
    }
    let results = node
        .output_types
        .iter()
        .zip(output_data)
        .map(|(ty, data)| TensorMut {
            dims: ty.shape.dims(),
            precision: ty.precision,
            data,
        })
        .collect();
    Ok(NodeViews { operands, results })
}

/// A copy of `data`, allocated fallibly.
fn copy_out(ty: &TensorType, data: &[i32]) -> Result<Tensor> {
    let mut copy = Vec::new();
    copy.try_reserve_exact(data.len()).map_err(|_| {
        fail!(
            MemoryLimit,
            "cannot allocate {} elements for an output",
            data.len()
        )
    })?;
    copy.extend_from_slice(data);
    Ok(Tensor {
        shape: ty.shape.clone(),
        precision: ty.precision,
        data: copy,
    })
}

/// Elements allocated beyond the arena so that its start can be placed freely within one page
/// of 4 KiB ([`arena_skew`]). Like the allocator's own overhead, the page is not in the planned
/// peak: it is bookkeeping, within the host's slack (`RUN_MEMORY_SLACK_BYTES`).
const ARENA_SKEW_ELEMENTS: usize = 1024;

/// Where the arena starts within its storage (at `base`), in elements: half a page (2 KiB)
/// after the largest input, modulo 4 KiB.
///
/// Why: a core predicts whether a load reads what an earlier store wrote from the low 12 bits
/// of their addresses. When an output lies a little ahead of the input it streams from, modulo
/// 4 KiB, every load of the input looks like it may read the store just before it and waits for
/// it ("4K aliasing"). The allocator places the arena right after the inputs, so an input of a
/// whole number of pages puts the arena 8 or 16 bytes ahead of it: a plain copy from such an
/// input ran 13 times slower than from a different one. Half a page apart, no load is close to
/// a recent store. Addresses decide only where the arena lies, never a value, and they are
/// themselves deterministic in `engine.wasm`.
fn arena_skew(base: usize, inputs: &[Tensor]) -> usize {
    const PAGE: usize = ARENA_SKEW_ELEMENTS * 4;
    let Some(largest) = inputs.iter().max_by_key(|tensor| tensor.data.len()) else {
        return 0;
    };
    let wanted = (largest.data.as_ptr() as usize).wrapping_add(PAGE / 2);
    (wanted.wrapping_sub(base) % PAGE) / 4
}

fn execute<M: Meter>(
    model: &ValidatedModel,
    inputs: Vec<InputTensor>,
    meter: &mut M,
) -> Result<Vec<(String, Tensor)>> {
    let inputs = check_inputs(model, inputs)?;
    meter.charge(model.run_gas)?;
    let no_arena = || {
        fail!(
            MemoryLimit,
            "cannot allocate the arena of {} bytes",
            model.arena_bytes
        )
    };
    let arena_elements = usize::try_from(model.arena_bytes / 4).map_err(|_| no_arena())?;
    let mut storage: Vec<i32> = Vec::new();
    let skewable = arena_elements
        .checked_add(ARENA_SKEW_ELEMENTS)
        .ok_or_else(no_arena)?;
    storage
        .try_reserve_exact(skewable)
        .map_err(|_| no_arena())?;
    storage.resize(skewable, 0);
    let skew = arena_skew(storage.as_ptr() as usize, &inputs);
    let arena = storage
        .get_mut(skew..skew + arena_elements)
        .ok_or_else(no_arena)?;

    for (node_index, node) in model.nodes.iter().enumerate() {
        let at_node = |error: Error| error.at_node(node_index as u32, &node.name, node.op.name);
        meter.charge(node.gas).map_err(at_node)?;
        let NodeViews {
            operands,
            mut results,
        } = node_views(model, node, &inputs, &mut *arena).map_err(at_node)?;
        node.operator
            .run(&operands, &mut results)
            .map_err(at_node)?;
    }

    // The last listing of a model input takes the caller's tensor; every other listing is a
    // copy (validation counts them in the peak).
    let mut last_listing = vec![None; inputs.len()];
    for (position, &(_, id)) in model.outputs.iter().enumerate() {
        if let Some(last) = last_listing.get_mut(id) {
            *last = Some(position);
        }
    }
    let mut inputs: Vec<Option<Tensor>> = inputs.into_iter().map(Some).collect();
    let mut results = Vec::with_capacity(model.outputs.len());
    for (position, (name, id)) in model.outputs.iter().enumerate() {
        let id = *id;
        let unavailable = || {
            fail!(
                InvalidReference,
                "output \"{name}\" is not available (engine bug)"
            )
        };
        let ty = model.value_types.get(id).ok_or_else(unavailable)?;
        let tensor = if let Some(input) = inputs.get_mut(id) {
            if last_listing[id] == Some(position) {
                input.take().ok_or_else(unavailable)?
            } else {
                copy_out(ty, &input.as_ref().ok_or_else(unavailable)?.data)?
            }
        } else if model.is_param(id) {
            copy_out(ty, &model.params[id - inputs.len()].1.data)?
        } else {
            let (start, len) = arena_region(model, id)?.ok_or_else(unavailable)?;
            copy_out(ty, arena.get(start..start + len).ok_or_else(unavailable)?)?
        };
        results.push((name.clone(), tensor));
    }
    Ok(results)
}

#[cfg(test)]
mod decode_tests {
    use alloc::vec;
    use alloc::vec::Vec;

    use super::*;

    fn xorshift(state: &mut u32) -> u32 {
        *state ^= *state << 13;
        *state ^= *state >> 17;
        *state ^= *state << 5;
        *state
    }

    #[test]
    fn the_bulk_decoder_accepts_exactly_what_borsh_accepts() {
        let mut state = 0x1234_5678;
        let mut encodings: Vec<Vec<u8>> = vec![Vec::new(), vec![0, 0, 0, 0]];
        for case in 0..200 {
            let tensors: Vec<InputTensor> = (0..xorshift(&mut state) % 4)
                .map(|_| {
                    let shape: Vec<u32> = (0..xorshift(&mut state) % 4)
                        .map(|_| xorshift(&mut state) % 6)
                        .collect();
                    let data = (0..xorshift(&mut state) % 40)
                        .map(|_| xorshift(&mut state) as i32)
                        .collect();
                    InputTensor { shape, data }
                })
                .collect();
            let bytes = borsh::to_vec(&tensors).unwrap_or_default();
            assert_eq!(decode_inputs(&bytes), Some(tensors), "case {case}");
            // Every truncation, an extra byte, and a corrupted length.
            for cut in 0..bytes.len() {
                encodings.push(bytes[..cut].to_vec());
            }
            let mut longer = bytes.clone();
            longer.push(0);
            encodings.push(longer);
            let mut corrupted = bytes.clone();
            let at = xorshift(&mut state) as usize % corrupted.len();
            corrupted[at] = corrupted[at].wrapping_add(1 + (xorshift(&mut state) % 255) as u8);
            encodings.push(corrupted);
        }
        // A huge count of tensors and a huge value count, with few bytes behind them.
        encodings.push(vec![0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0]);
        encodings.push(vec![
            1, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0x7f, 1, 2, 3, 4,
        ]);
        for bytes in &encodings {
            let borsh = borsh::from_slice::<Vec<InputTensor>>(bytes).ok();
            assert_eq!(decode_inputs(bytes), borsh, "{bytes:?}");
        }
    }
}

#[cfg(test)]
mod tests {
    use alloc::vec;

    use super::*;
    use crate::model::{InputDecl, Model, Node, OutputDecl, ValueRef};
    use crate::outcome::{OutputTensor, Status};

    #[test]
    fn the_arena_starts_half_a_page_after_the_largest_input() {
        const PAGE: usize = ARENA_SKEW_ELEMENTS * 4;
        let tensor = |n: usize| Tensor {
            shape: crate::tensor::Shape::new([n as u32]),
            precision: 8,
            data: vec![0; n],
        };
        let inputs = [tensor(3), tensor(1000), tensor(10)];
        let largest = inputs[1].data.as_ptr() as usize;
        for base in [0, 4, 2048, 4092, largest, largest + 8, 123_456] {
            let skew = arena_skew(base, &inputs);
            assert!(skew < ARENA_SKEW_ELEMENTS, "{skew}");
            let start = base + 4 * skew;
            assert_eq!(start.wrapping_sub(largest) % PAGE, PAGE / 2, "base {base}");
        }
        assert_eq!(arena_skew(4, &[]), 0);
    }

    /// A model of one input `x` of four 8-bit values and attribute-less nodes
    /// `(name, operator, operands)`.
    fn model_over_x(nodes: &[(&str, &str, Vec<ValueRef>)], outputs: &[(&str, ValueRef)]) -> Model {
        Model {
            inputs: vec![InputDecl {
                name: "x".into(),
                shape: vec![4],
                precision: 8,
            }],
            params: vec![],
            nodes: nodes
                .iter()
                .map(|(name, op_name, inputs)| Node {
                    name: (*name).into(),
                    op: op(op_name),
                    inputs: inputs.clone(),
                    attrs: vec![],
                })
                .collect(),
            outputs: outputs
                .iter()
                .map(|&(name, value)| OutputDecl {
                    name: name.into(),
                    value,
                })
                .collect(),
        }
    }

    /// `relu(relu(x))` on four values.
    fn two_relus() -> ValidatedModel {
        let model = model_over_x(
            &[
                ("first", "relu", vec![ValueRef::Input(0)]),
                (
                    "second",
                    "relu",
                    vec![ValueRef::Node { node: 0, output: 0 }],
                ),
            ],
            &[("y", ValueRef::Node { node: 1, output: 0 })],
        );
        ValidatedModel::from_bytes(&model.encode(), &cvm_gas::Schedule::V1).unwrap()
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
    fn metered_runs_stop_at_the_first_charge_they_cannot_pay() {
        let model = two_relus();
        // The run's own gas comes first, without a node; then each node's.
        let report = run(&model, input(), model.run_gas - 1);
        assert_eq!(report.outcome.gas_used, 0);
        assert_eq!(
            report.outcome.status,
            Status::Error {
                code: crate::ErrorCode::OutOfGas.number(),
                node: None
            }
        );
        let first = model.run_gas + model.nodes[0].gas;
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

    fn op(name: &str) -> u16 {
        crate::ops::by_name(name)
            .map(|op| op.code)
            .unwrap_or_default()
    }

    fn at(node: u32) -> ValueRef {
        ValueRef::Node { node, output: 0 }
    }

    /// Runs `model` the way the executor did before the arena: a fresh zeroed tensor for every
    /// node output, nothing ever reused. The reference the arena executor must agree with.
    fn run_separately(model: &ValidatedModel, inputs: Vec<InputTensor>) -> Vec<OutputTensor> {
        let mut values: Vec<Option<Tensor>> = vec![None; model.value_types.len()];
        for (id, input) in inputs.into_iter().enumerate() {
            values[id] = Some(Tensor {
                shape: crate::Shape::new(input.shape),
                precision: model.inputs[id].ty.precision,
                data: input.data,
            });
        }
        for (index, (_, param)) in model.params.iter().enumerate() {
            values[model.inputs.len() + index] = Some(param.clone());
        }
        for node in &model.nodes {
            let mut outputs: Vec<Tensor> = node
                .output_types
                .iter()
                .map(|ty| Tensor::zeroed(ty).unwrap())
                .collect();
            let operands: Vec<TensorRef<'_>> = node
                .inputs
                .iter()
                .map(|&id| values[id].as_ref().unwrap().view())
                .collect();
            let mut results: Vec<TensorMut<'_>> =
                outputs.iter_mut().map(Tensor::view_mut).collect();
            node.operator.run(&operands, &mut results).unwrap();
            drop(results);
            for (position, tensor) in outputs.into_iter().enumerate() {
                values[node.first_output + position] = Some(tensor);
            }
        }
        model
            .outputs
            .iter()
            .map(|&(_, id)| values[id].clone().unwrap().into())
            .collect()
    }

    fn outputs_of(report: Report) -> Vec<OutputTensor> {
        match report.outcome.status {
            Status::Ok { outputs } => outputs,
            status => panic!("{status:?}"),
        }
    }

    #[test]
    fn values_sharing_arena_elements_compute_what_separate_buffers_do() {
        // a = relu(x), b = a + a, c = −b, d = c − a, e = |d|, f = e + x; a lives across three
        // nodes, b is read twice by one node and is a model output, as are x and f (twice).
        let model = model_over_x(
            &[
                ("a", "relu", vec![ValueRef::Input(0)]),
                ("b", "elemwise_add", vec![at(0), at(0)]),
                ("c", "negative", vec![at(1)]),
                ("d", "elemwise_sub", vec![at(2), at(0)]),
                ("e", "abs", vec![at(3)]),
                ("f", "elemwise_add", vec![at(4), ValueRef::Input(0)]),
            ],
            &[
                ("f", at(5)),
                ("b", at(1)),
                ("x", ValueRef::Input(0)),
                ("f again", at(5)),
            ],
        );
        let model = ValidatedModel::from_bytes(&model.encode(), &cvm_gas::Schedule::V1).unwrap();
        // Six values of 16 bytes, in fewer: the plan makes them share elements.
        assert!(model.arena_bytes < 6 * 16, "{}", model.arena_bytes);
        let outputs = outputs_of(run(&model, input(), u64::MAX));
        let data: Vec<&[i32]> = outputs.iter().map(|tensor| &tensor.data[..]).collect();
        assert_eq!(
            data,
            [
                &[-3, 0, 20, -127][..],
                &[0, 0, 10, 0],
                &[-3, 0, 5, -127],
                &[-3, 0, 20, -127]
            ]
        );
        assert_eq!(outputs, run_separately(&model, input()));
    }

    /// A random graph over `x`, `y` (inputs) and `p` (a parameter), all of shape [n]: 1 to 40
    /// elementwise nodes, whose operands are mostly recent values and sometimes any earlier
    /// one; outputs: the last node, another random value, `x` and `p`.
    fn random_model(seed: u64) -> (Model, Vec<InputTensor>) {
        let mut state = seed;
        let mut next = move |bound: u64| {
            // SplitMix64.
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            (z ^ (z >> 31)) % bound
        };
        let n = 1 + next(9) as u32;
        let values = |next: &mut dyn FnMut(u64) -> u64| -> Vec<i32> {
            (0..n).map(|_| next(255) as i32 - 127).collect()
        };
        let inputs = vec![
            InputTensor {
                shape: vec![n],
                data: values(&mut next),
            },
            InputTensor {
                shape: vec![n],
                data: values(&mut next),
            },
        ];
        let mut model = Model {
            inputs: ["x", "y"]
                .iter()
                .map(|name| InputDecl {
                    name: (*name).into(),
                    shape: vec![n],
                    precision: 8,
                })
                .collect(),
            params: vec![crate::model::ParamDecl {
                name: "p".into(),
                shape: vec![n],
                precision: 8,
                data: crate::model::ParamData::I8(
                    values(&mut next).iter().map(|&v| v as i8).collect(),
                ),
            }],
            nodes: vec![],
            outputs: vec![],
        };
        // Every value with its precision: inputs, the parameter, then node outputs.
        let mut refs = vec![
            (ValueRef::Input(0), 8u8),
            (ValueRef::Input(1), 8),
            (ValueRef::Param(0), 8),
        ];
        for index in 0..1 + next(40) as u32 {
            let operand = |next: &mut dyn FnMut(u64) -> u64| {
                let window = if next(4) == 0 {
                    refs.len()
                } else {
                    refs.len().min(4)
                };
                refs[refs.len() - 1 - next(window as u64) as usize]
            };
            let (a, b) = (operand(&mut next), operand(&mut next));
            let (name, inputs, precision, attrs) = match next(6) {
                0 => ("relu", vec![a.0], a.1, vec![]),
                1 => ("negative", vec![a.0], a.1, vec![]),
                2 if a.1.max(b.1) < 24 => {
                    ("elemwise_add", vec![a.0, b.0], a.1.max(b.1) + 1, vec![])
                }
                3 if a.1.max(b.1) < 24 => ("elemwise_sub", vec![a.0, a.0], a.1 + 1, vec![]),
                4 if a.1 + b.1 < 24 => ("broadcast_mul", vec![a.0, b.0], a.1 + b.1, vec![]),
                _ => (
                    "cvm_clip",
                    vec![a.0],
                    a.1.min(6),
                    vec![crate::model::Attr {
                        name: "precision".into(),
                        value: crate::model::AttrValue::Int(6),
                    }],
                ),
            };
            model.nodes.push(Node {
                name: alloc::format!("n{index}"),
                op: op(name),
                inputs,
                attrs,
            });
            refs.push((at(index), precision));
        }
        let last = refs.len() - 1;
        let other = next(refs.len() as u64) as usize;
        model.outputs = [("last", last), ("other", other), ("x", 0), ("p", 2)]
            .iter()
            .map(|&(name, index)| OutputDecl {
                name: name.into(),
                value: refs[index].0,
            })
            .collect();
        (model, inputs)
    }

    #[test]
    fn random_graphs_compute_what_separate_buffers_do() {
        let (mut arena_bytes, mut output_bytes) = (0u64, 0u64);
        for seed in 0..200 {
            let (model, inputs) = random_model(seed);
            let model = ValidatedModel::from_bytes(&model.encode(), &cvm_gas::Schedule::V1)
                .unwrap_or_else(|error| panic!("seed {seed}: {error:?}"));
            let expected = run_separately(&model, inputs.clone());
            let report = run(&model, inputs, u64::MAX);
            assert_eq!(report.outcome.gas_used, model.total_gas);
            assert_eq!(outputs_of(report), expected, "seed {seed}");
            arena_bytes += model.arena_bytes;
            output_bytes += model
                .nodes
                .iter()
                .flat_map(|node| &node.output_types)
                .map(|ty| 4 * ty.shape.elements())
                .sum::<u64>();
        }
        // The values do share elements: the arenas hold far less than all node outputs.
        assert!(
            3 * arena_bytes < output_bytes,
            "{arena_bytes} of {output_bytes}"
        );
    }

    #[test]
    fn an_inconsistent_plan_fails_as_an_engine_bug() {
        let invalid_reference = |node| Status::Error {
            code: crate::ErrorCode::InvalidReference.number(),
            node: Some(node),
        };
        // The second relu's output on top of its input.
        let mut model = two_relus();
        model.arena_offsets = vec![0, 2];
        let report = run(&model, input(), u64::MAX);
        assert_eq!(report.outcome.status, invalid_reference(1));
        // An output past the end of the arena.
        model.arena_offsets = vec![0, 5];
        let report = run(&model, input(), u64::MAX);
        assert_eq!(report.outcome.status, invalid_reference(1));
        // The plan as validated runs.
        let mut model = two_relus();
        assert_eq!(model.arena_offsets, [0, 4]);
        assert_eq!(model.arena_bytes, 32);
        model.arena_offsets = vec![4, 0];
        assert!(matches!(
            run(&model, input(), u64::MAX).outcome.status,
            Status::Ok { .. }
        ));
    }
}
