//! The executor: checks inputs, then runs a [`ValidatedModel`] node by node, charging each
//! node's gas before it runs.
//!
//! A run allocates one arena for all node outputs, laid out by the static plan of validation
//! ([`crate::plan`]): each node's outputs are zeroed in place and handed to its operator as
//! views, next to views of its operands (arena values, the caller's inputs, or the model's
//! parameters); a value's elements are reused by later values once it is dead. The views are
//! carved out of the arena with `split_at_mut`, so the plan's promise that a node's outputs
//! share no element with its inputs or each other is checked, not assumed: a plan that broke
//! it would fail the run as an engine bug. At the end the model outputs are copied out as tensors
//! ([`run`]), or encoded into the report's bytes straight from where they lie ([`run_reply`], the
//! reply of `engine.wasm`).
//!
//! Architecture Invariant: gas is charged before work, from the static figures of validation:
//! the run's own gas (`ValidatedModel::run_gas`) once the inputs are checked, then each node's
//! before it runs, so a complete run charges exactly `ValidatedModel::total_gas`, and a run
//! whose limit is below that stops with `OutOfGas` at the first charge it cannot pay.
//!
//! [`run_unmetered`] drives the same executor with a meter that charges nothing, so benchmarks
//! can measure what metering costs.
//!
//! [`run_observed`] and [`run_reply_observed`] drive it with a [`NodeObserver`], which sees each
//! node's outputs in the arena right after the node ran (what a trace of the run records,
//! `crate::trace`). The executor is generic over the observer, and the other entry points pass
//! one whose method is empty, so a run without a trace carries no trace of the observing code.

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

/// Length of the borsh encoding of `inputs` (`Vec<InputTensor>`), or `None` when a length
/// does not fit borsh's `u32` prefixes or the total overflows `usize`.
pub fn encoded_inputs_len(inputs: &[InputTensor]) -> Option<usize> {
    u32::try_from(inputs.len()).ok()?;
    inputs.iter().try_fold(4usize, |total, input| {
        u32::try_from(input.shape.len()).ok()?;
        u32::try_from(input.data.len()).ok()?;
        let words = input
            .shape
            .len()
            .checked_add(input.data.len())?
            .checked_add(2)?;
        total.checked_add(words.checked_mul(4)?)
    })
}

/// Writes the borsh encoding of `inputs` (`Vec<InputTensor>`, the ABI's inputs) into `out`, a
/// whole value array at a time rather than value by value as the derived encoder does: the
/// bytes are exactly those of `borsh::to_vec`. Returns `false`, having written nothing
/// meaningful, when `out` is not [`encoded_inputs_len`] bytes long.
pub fn encode_inputs_into(inputs: &[InputTensor], out: &mut [u8]) -> bool {
    /// Writes `values` as little-endian words at the front of `rest`.
    fn put<T: Copy>(rest: &mut &mut [u8], values: &[T], word: fn(T) -> [u8; 4]) -> Option<()> {
        let (taken, left) = core::mem::take(rest).split_at_mut_checked(values.len() * 4)?;
        *rest = left;
        for (bytes, &value) in taken.as_chunks_mut::<4>().0.iter_mut().zip(values) {
            *bytes = word(value);
        }
        Some(())
    }
    fn length(rest: &mut &mut [u8], len: usize) -> Option<()> {
        put(rest, &[u32::try_from(len).ok()?], u32::to_le_bytes)
    }
    if encoded_inputs_len(inputs) != Some(out.len()) {
        return false;
    }
    let mut rest = out;
    let written = (|| {
        length(&mut rest, inputs.len())?;
        for input in inputs {
            length(&mut rest, input.shape.len())?;
            put(&mut rest, &input.shape, u32::to_le_bytes)?;
            length(&mut rest, input.data.len())?;
            put(&mut rest, &input.data, i32::to_le_bytes)?;
        }
        Some(())
    })();
    written.is_some() && rest.is_empty()
}

/// Runs `model` on `inputs` (in declared order) with at most `gas_limit` gas.
///
/// Never panics on any input; every failure is a deterministic [`Report`] failure.
pub fn run(model: &ValidatedModel, inputs: Vec<InputTensor>, gas_limit: u64) -> Report {
    run_observed(model, inputs, gas_limit, &mut Unobserved)
}

/// Runs `model` as [`run`] does, handing `observer` each node's outputs once the node has run.
/// The report is [`run`]'s, whatever the observer does.
pub fn run_observed(
    model: &ValidatedModel,
    inputs: Vec<InputTensor>,
    gas_limit: u64,
    observer: &mut impl NodeObserver,
) -> Report {
    let mut meter = GasMeter::new(gas_limit);
    match execute(model, inputs, &mut meter, observer, |done| {
        done.into_outputs()
    }) {
        Ok(outputs) => Report::success(outputs, meter.used),
        Err(error) => Report::failure(error, meter.used),
    }
}

/// Runs `model` as [`run`] does and returns the borsh encoding of its report, byte for byte
/// `borsh::to_vec(&run(model, inputs, gas_limit))` whenever memory suffices for both: what
/// `engine.wasm` replies to a run. A successful run's outputs are encoded from where the run
/// left them, without the copy into tensors [`run`] makes; failing to allocate the reply is a
/// `MemoryLimit` failure, as failing to allocate that copy is in [`run`].
pub fn run_reply(model: &ValidatedModel, inputs: Vec<InputTensor>, gas_limit: u64) -> Vec<u8> {
    run_reply_observed(model, inputs, gas_limit, &mut Unobserved)
}

/// [`run_reply`], handing `observer` each node's outputs once the node has run; the reply is
/// [`run_reply`]'s, whatever the observer does.
pub fn run_reply_observed(
    model: &ValidatedModel,
    inputs: Vec<InputTensor>,
    gas_limit: u64,
    observer: &mut impl NodeObserver,
) -> Vec<u8> {
    let mut meter = GasMeter::new(gas_limit);
    let encoded = execute(model, inputs, &mut meter, observer, |mut done| {
        done.release_unlisted_inputs();
        let outputs = done.views()?;
        crate::outcome::success_bytes(&outputs, done.gas_used)
            .map_err(|message| fail!(MemoryLimit, "{message}"))
    });
    encoded.unwrap_or_else(|error| {
        // A failure's report is small; encoding into a vector cannot fail.
        borsh::to_vec(&Report::failure(error, meter.used)).unwrap_or_default()
    })
}

/// Runs `model` on `inputs` as [`run`] does, through the same executor, but without charging
/// gas: the report's `gas_used` is 0 and no run stops with `OutOfGas`. Only for benchmarks that
/// measure what metering costs; its outcomes are not consensus outcomes.
#[doc(hidden)]
pub fn run_unmetered(model: &ValidatedModel, inputs: Vec<InputTensor>) -> Report {
    match execute(model, inputs, &mut Unmetered, &mut Unobserved, |done| {
        done.into_outputs()
    }) {
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

    /// Gas charged so far.
    fn used(&self) -> u64;
}

/// The consensus meter: gas used so far, never above the limit.
struct GasMeter {
    limit: u64,
    used: u64,
}

impl GasMeter {
    fn new(limit: u64) -> GasMeter {
        GasMeter { limit, used: 0 }
    }
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

    fn used(&self) -> u64 {
        self.used
    }
}

/// What sees a run node by node ([`run_observed`]): after each node has run, its index, the gas
/// charged so far (the run's own and every node's up to this one) and its outputs, where they lie
/// in the arena. An observer cannot change the run: it sees the outputs read-only, and a run's
/// report is the same with any observer.
pub trait NodeObserver {
    /// Node `node_index` has run and charged the run `gas_used` gas in all; `outputs` are its
    /// outputs in order, with their types.
    fn node_ran(&mut self, node_index: usize, gas_used: u64, outputs: &[TensorMut<'_>]);
}

/// Observes nothing: the executor of an untraced run.
pub struct Unobserved;

impl NodeObserver for Unobserved {
    #[inline(always)]
    fn node_ran(&mut self, _node_index: usize, _gas_used: u64, _outputs: &[TensorMut<'_>]) {}
}

/// Charges nothing ([`run_unmetered`]).
struct Unmetered;

impl Meter for Unmetered {
    #[inline]
    fn charge(&mut self, _gas: u64) -> Result<()> {
        Ok(())
    }

    fn used(&self) -> u64 {
        0
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
            if let Some((index, value)) = first_beyond(&given.data, bound) {
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

/// The first value of `data` whose magnitude exceeds `bound`, with its index.
///
/// Blocks of values are scanned for their largest magnitude first ([`largest_magnitude`], vector
/// code natively and in SIMD128); only a block holding an offending value is searched element
/// by element. A per-element search with an early exit stays scalar, and cost more than the
/// rest of a run of a cheap model.
fn first_beyond(data: &[i32], bound: i64) -> Option<(usize, i32)> {
    const BLOCK: usize = 1024;
    // `i32::unsigned_abs` is exact for every value, `i32::MIN` included; a bound of 2^32 or
    // more is never exceeded (precisions stop at 32).
    let bound = u32::try_from(bound).unwrap_or(u32::MAX);
    data.chunks(BLOCK).enumerate().find_map(|(block, values)| {
        if largest_magnitude(values) <= bound {
            return None;
        }
        values
            .iter()
            .position(|v| v.unsigned_abs() > bound)
            .map(|at| (block * BLOCK + at, values[at]))
    })
}

/// The largest magnitude in `values` (0 for none), a run of 64 values at a time: each run is
/// sixteen straight vector steps (load, absolute value, unsigned maximum) reduced to one scalar.
/// In `engine.wasm` a vector that stays live across a loop's back edge goes through the stack
/// (wasmtime's fuel check there may call out), so the running maximum across runs is a scalar.
#[inline(never)]
fn largest_magnitude(values: &[i32]) -> u32 {
    fn run_max(run: &[i32]) -> u32 {
        run.iter()
            .fold(0, |largest, v| largest.max(v.unsigned_abs()))
    }
    let (runs, tail) = values.as_chunks::<64>();
    runs.iter()
        .fold(run_max(tail), |largest, run| largest.max(run_max(run)))
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

/// Checks `inputs`, runs every node of `model` charging `meter` and showing `observer` its
/// outputs, and hands the finished run to `finish` (which takes the outputs from it).
fn execute<M: Meter, O: NodeObserver, R>(
    model: &ValidatedModel,
    inputs: Vec<InputTensor>,
    meter: &mut M,
    observer: &mut O,
    finish: impl FnOnce(Finished<'_>) -> Result<R>,
) -> Result<R> {
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
        observer.node_ran(node_index, meter.used(), &results);
    }

    finish(Finished {
        model,
        inputs,
        arena,
        gas_used: meter.used(),
    })
}

/// A run whose nodes have all run: where every value lies.
struct Finished<'a> {
    model: &'a ValidatedModel,
    /// The caller's inputs, checked.
    inputs: Vec<Tensor>,
    /// The node outputs, laid out by the plan.
    arena: &'a [i32],
    /// Gas charged by the run.
    gas_used: u64,
}

impl Finished<'_> {
    /// The values of `id`: an input, a parameter or a node output in the arena.
    fn values(&self, id: ValueId) -> Result<&[i32]> {
        let unavailable = || fail!(InvalidReference, "value {id} is not available (engine bug)");
        if let Some(input) = self.inputs.get(id) {
            Ok(&input.data)
        } else if self.model.is_param(id) {
            let index = id - self.inputs.len();
            Ok(&self.model.params.get(index).ok_or_else(unavailable)?.1.data)
        } else {
            let (start, len) = arena_region(self.model, id)?.ok_or_else(unavailable)?;
            self.arena.get(start..start + len).ok_or_else(unavailable)
        }
    }

    /// Frees the inputs no model output lists: the reply then takes their place (and the
    /// request's, freed before the run, which lies next to them in `engine.wasm`), so a run
    /// that encodes its reply grows no further than one that copies its outputs out.
    fn release_unlisted_inputs(&mut self) {
        let listings = &self.model.outputs;
        for (id, input) in self.inputs.iter_mut().enumerate() {
            if !listings.iter().any(|&(_, listed)| listed == id) {
                input.data = Vec::new();
            }
        }
    }

    /// Every model output in declared order, where it lies: name, type and values.
    fn views(&self) -> Result<Vec<crate::outcome::OutputView<'_>>> {
        self.model
            .outputs
            .iter()
            .map(|(name, id)| {
                let ty = self.model.value_types.get(*id).ok_or_else(|| {
                    fail!(
                        InvalidReference,
                        "output \"{name}\" has no type (engine bug)"
                    )
                })?;
                Ok((name.as_str(), ty, self.values(*id)?))
            })
            .collect()
    }

    /// The model outputs as tensors, in declared order. The last listing of a model input takes
    /// the caller's tensor; every other listing is a copy (validation counts them in the peak).
    fn into_outputs(self) -> Result<Vec<(String, Tensor)>> {
        let listings = &self.model.outputs;
        let mut last_listing = vec![None; self.inputs.len()];
        for (position, &(_, id)) in listings.iter().enumerate() {
            if let Some(last) = last_listing.get_mut(id) {
                *last = Some(position);
            }
        }
        let mut copies = Vec::with_capacity(listings.len());
        for (position, ((_, ty, values), &(_, id))) in
            self.views()?.into_iter().zip(listings).enumerate()
        {
            let taken = last_listing.get(id) == Some(&Some(position));
            copies.push(if taken {
                None
            } else {
                Some(copy_out(ty, values)?)
            });
        }
        let mut inputs: Vec<Option<Tensor>> = self.inputs.into_iter().map(Some).collect();
        listings
            .iter()
            .zip(copies)
            .map(|((name, id), copy)| {
                let tensor = match copy {
                    Some(tensor) => tensor,
                    None => inputs.get_mut(*id).and_then(Option::take).ok_or_else(|| {
                        fail!(
                            InvalidReference,
                            "output \"{name}\" is not available (engine bug)"
                        )
                    })?,
                };
                Ok((name.clone(), tensor))
            })
            .collect()
    }
}

#[cfg(test)]
mod decode_tests;
#[cfg(test)]
mod tests;
