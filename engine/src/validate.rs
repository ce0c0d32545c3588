//! Validation: turns a decoded [`Model`] into a [`ValidatedModel`], the only thing the executor
//! runs.
//!
//! Validation checks names and limits, decodes parameters once (checking them against their
//! precision), resolves references (which must point backwards, so the graph is acyclic and in
//! topological order), parses attributes through each operator's schema, infers every value's
//! shape and precision, prices every node with the gas schedule, and plans memory: the offset of
//! every node output in the one arena a run allocates ([`crate::plan`]), and the peak number
//! of bytes a run holds.
//!
//! Architecture Invariant: after validation, running can only fail with input checks (3xx),
//! execution-phase codes (4xx), or `MemoryLimit` when the arena or an output copy cannot be
//! allocated.

use alloc::boxed::Box;
use alloc::collections::{BTreeMap, BTreeSet};
use alloc::format;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec;
use alloc::vec::Vec;
use core::ops::Range;

use cvm_gas::Schedule;

use crate::attrs::Attrs;
use crate::error::{Error, Result};
use crate::fail;
use crate::kernels::{self, PackOrder, PackedRows};
use crate::limits;
use crate::model::{Model, ParamData, ValueRef};
use crate::ops::{self, OpDef, Operator, Usage};
use crate::plan::{self, PlanNode};
use crate::tensor::{Shape, Tensor, TensorType, check_precision, precision_bound};

/// Index of a value in the flat value space: inputs, then parameters, then node outputs.
pub type ValueId = usize;

/// A node ready to run.
#[derive(Debug)]
pub struct ValidatedNode {
    /// The node's name.
    pub name: String,
    /// Its operator's table row.
    pub op: &'static OpDef,
    /// The configured operator.
    pub operator: Box<dyn Operator>,
    /// Operand value ids.
    pub inputs: Vec<ValueId>,
    /// Value id of the first output; outputs are consecutive.
    pub first_output: ValueId,
    /// Output types.
    pub output_types: Vec<TensorType>,
    /// Gas charged before the node runs.
    pub gas: u64,
    /// Working memory the operator allocates while it runs, beyond its outputs.
    pub scratch_bytes: u64,
}

/// A declared input, validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValidatedInput {
    /// Name of the input.
    pub name: String,
    /// Its required type.
    pub ty: TensorType,
}

/// A model that passed validation: every node's types, gas and memory are known.
#[derive(Debug)]
pub struct ValidatedModel {
    /// Declared inputs, in call order.
    pub inputs: Vec<ValidatedInput>,
    /// Parameter names and decoded tensors.
    pub params: Vec<(String, Tensor)>,
    /// Nodes in execution order.
    pub nodes: Vec<ValidatedNode>,
    /// Model outputs: name and value id.
    pub outputs: Vec<(String, ValueId)>,
    /// Type of every value, by value id.
    pub value_types: Vec<TensorType>,
    /// Gas of a complete run: `run_gas` plus every node's gas.
    pub total_gas: u64,
    /// Gas a run costs beyond its nodes (decoding inputs, copying outputs, the arena), charged
    /// once the inputs are checked, before the first node ([`Schedule::run_gas`]).
    pub run_gas: u64,
    /// Peak bytes of tensor data a run holds: parameters, packed weights and the caller's
    /// inputs (for the whole run), the arena, and the larger of the largest working memory of
    /// any node (`scratch_bytes`) and the model outputs copied out of the arena at the end.
    /// At most [`limits::MAX_PEAK_MEMORY_BYTES`].
    pub peak_memory_bytes: u64,
    /// Bytes of the arena that holds every node output during a run: 4 × the highest offset
    /// plus size of any node output.
    pub arena_bytes: u64,
    /// Offset (in `i32` elements) of every node output in the arena, by value id minus the
    /// number of inputs and parameters. Values alive at a common node, or a node's inputs and
    /// outputs, never share an element ([`crate::plan`]).
    pub arena_offsets: Vec<u64>,
    /// The gas schedule the model was priced with.
    pub schedule: &'static Schedule,
}

/// The usage of a node: its operator's work and price class
/// ([`crate::ops::Operator::usage`]).
///
/// # Errors
/// `LimitExceeded` if a count overflows `u64`.
pub fn node_usage(
    operator: &dyn Operator,
    inputs: &[TensorType],
    outputs: &[TensorType],
) -> Result<Usage> {
    operator.usage(inputs, outputs)
}

/// The gas of one application of `op` doing `usage` under `schedule`.
///
/// # Errors
/// `LimitExceeded` if the gas overflows `u64`; `UnknownOp` if the schedule prices no
/// such class (a schedule that does not price every operator of the engine is rejected by the
/// tests, so this is never reached).
pub fn node_gas(schedule: &Schedule, op: &OpDef, usage: &Usage) -> Result<u64> {
    schedule
        .node_gas(op.name, usage)
        .ok_or_else(|| {
            fail!(
                UnknownOp,
                "gas schedule {} has no price for {} ({})",
                schedule.version,
                op.name,
                usage.class
            )
        })?
        .map_err(|_| fail!(LimitExceeded, "the node's gas overflows 64 bits"))
}

impl ValidatedModel {
    /// The usage of `node` ([`node_usage`]), recomputed from the types validation accepted:
    /// what its gas prices.
    ///
    /// # Errors
    /// `LimitExceeded` if a count overflows `u64` (never for a node validation accepted).
    pub fn usage_of(&self, node: &ValidatedNode) -> Result<Usage> {
        let inputs: Vec<TensorType> = node
            .inputs
            .iter()
            .map(|&id| self.value_types[id].clone())
            .collect();
        node_usage(node.operator.as_ref(), &inputs, &node.output_types)
    }

    /// Decodes and validates canonical model bytes, pricing every node with `schedule`.
    ///
    /// # Errors
    /// Any decoding (1xx) or validation (2xx) error; node errors carry the node index.
    pub fn from_bytes(bytes: &[u8], schedule: &'static Schedule) -> Result<ValidatedModel> {
        validate(Model::decode(bytes)?, schedule)
    }

    /// Number of input and parameter values, before node outputs start.
    pub(crate) fn first_node_value(&self) -> ValueId {
        self.inputs.len() + self.params.len()
    }

    /// Whether `value` is a parameter.
    pub fn is_param(&self, value: ValueId) -> bool {
        (self.inputs.len()..self.first_node_value()).contains(&value)
    }

    /// The elements of the arena node output `value` occupies; `None` for an input or a
    /// parameter (or an id past the model).
    pub fn arena_range(&self, value: ValueId) -> Option<Range<u64>> {
        let offset = *self
            .arena_offsets
            .get(value.checked_sub(self.first_node_value())?)?;
        let size = self.value_types.get(value)?.shape.elements();
        Some(offset..offset.saturating_add(size))
    }
}

/// Checks the name of a `kind` ("input", "node", ...): non-empty, at most
/// [`limits::MAX_NAME_BYTES`] bytes.
fn check_name(name: &str, kind: &str) -> Result<()> {
    if name.is_empty() {
        return Err(fail!(InvalidName, "an {kind} has an empty name"));
    }
    if name.len() > limits::MAX_NAME_BYTES {
        let mut end = 32;
        while !name.is_char_boundary(end) {
            end -= 1;
        }
        return Err(fail!(
            InvalidName,
            "{kind} \"{}…\" has a name of {} bytes, more than {}",
            &name[..end],
            name.len(),
            limits::MAX_NAME_BYTES
        ));
    }
    Ok(())
}

fn check_count(count: usize, limit: usize, what: &str) -> Result<()> {
    if count > limit {
        Err(fail!(
            LimitExceeded,
            "{count} {what} exceed the limit of {limit}"
        ))
    } else {
        Ok(())
    }
}

/// Bytes of an `i32` tensor of `ty`.
fn tensor_bytes(ty: &TensorType) -> u64 {
    ty.shape.elements().saturating_mul(4)
}

/// Validates `model` and prices it with `schedule`.
///
/// # Errors
/// The first problem found, with a message naming the input, parameter, node or attribute.
pub fn validate(model: Model, schedule: &'static Schedule) -> Result<ValidatedModel> {
    let Model {
        inputs,
        params,
        nodes,
        outputs,
    } = model;
    let n_inputs = inputs.len();
    check_count(inputs.len(), limits::MAX_VALUES, "inputs")?;
    check_count(params.len(), limits::MAX_VALUES, "parameters")?;
    check_count(nodes.len(), limits::MAX_NODES, "nodes")?;
    check_count(outputs.len(), limits::MAX_VALUES, "outputs")?;
    if outputs.is_empty() {
        return Err(fail!(InvalidName, "the model declares no outputs"));
    }

    let mut names: BTreeSet<&str> = BTreeSet::new();
    let declared = (inputs.iter().map(|input| ("input", input.name.as_str())))
        .chain(
            params
                .iter()
                .map(|param| ("parameter", param.name.as_str())),
        )
        .chain(nodes.iter().map(|node| ("node", node.name.as_str())));
    for (kind, name) in declared {
        check_name(name, kind)?;
        if !names.insert(name) {
            return Err(fail!(
                DuplicateName,
                "{kind} \"{name}\": the name is already used by another input, parameter or node"
            ));
        }
    }

    let mut value_types: Vec<TensorType> = Vec::new();
    let mut validated_inputs = Vec::with_capacity(inputs.len());
    for input in &inputs {
        let what = format!("input \"{}\"", input.name);
        let ty = TensorType::new(input.shape.clone(), input.precision);
        ty.shape.check_limits(&what)?;
        check_precision(input.precision, &what)?;
        value_types.push(ty.clone());
        validated_inputs.push(ValidatedInput {
            name: input.name.clone(),
            ty,
        });
    }

    let mut decoded_params = Vec::with_capacity(params.len());
    for param in params {
        let what = format!("parameter \"{}\"", param.name);
        let shape = Shape::new(param.shape);
        let n_elements = shape.check_limits(&what)?;
        check_precision(param.precision, &what)?;
        if param.data.len() as u64 != n_elements {
            return Err(fail!(
                InvalidParam,
                "{what}: shape {shape} needs {n_elements} values, the model holds {}",
                param.data.len()
            ));
        }
        let data: Vec<i32> = match param.data {
            ParamData::I8(values) => values.into_iter().map(i32::from).collect(),
            ParamData::I32(values) => values,
        };
        let bound = precision_bound(param.precision);
        if let Some((index, value)) = data
            .iter()
            .enumerate()
            .find(|&(_, &v)| i64::from(v).abs() > bound)
        {
            return Err(fail!(
                InvalidParam,
                "{what}: value {value} at flat index {index} exceeds precision {} (|x| ≤ {bound})",
                param.precision
            ));
        }
        value_types.push(TensorType {
            shape: shape.clone(),
            precision: param.precision,
        });
        decoded_params.push((
            param.name,
            Tensor {
                shape,
                precision: param.precision,
                data,
            },
        ));
    }

    let n_leading = value_types.len();
    let mut node_first_value: Vec<ValueId> = Vec::with_capacity(nodes.len());
    let mut validated_nodes: Vec<ValidatedNode> = Vec::with_capacity(nodes.len());
    // Weight packings, one per parameter and order however many nodes use it, and their bytes.
    let mut packings: BTreeMap<(ValueId, PackOrder), Arc<PackedRows>> = BTreeMap::new();
    let mut packed_bytes: u64 = 0;
    let mut total_gas: u64 = 0;
    for (node_index, node) in nodes.into_iter().enumerate() {
        let index = node_index as u32;
        let op_name = ops::by_code(node.op).map_or("unknown operator", |op| op.name);
        let context = |err: Error| -> Error { err.at_node(index, &node.name, op_name) };
        let validated = (|| -> Result<ValidatedNode> {
            let op = ops::by_code(node.op)
                .ok_or_else(|| fail!(UnknownOp, "operator code {} is not known", node.op))?;
            check_count(node.inputs.len(), limits::MAX_NODE_INPUTS, "node inputs")?;
            if !op.arity.accepts(node.inputs.len()) {
                return Err(fail!(
                    ArityMismatch,
                    "{} takes {} inputs, got {}",
                    op.name,
                    op.arity,
                    node.inputs.len()
                ));
            }
            let inputs: Vec<ValueId> = node
                .inputs
                .iter()
                .enumerate()
                .map(|(position, &value)| {
                    resolve(
                        value,
                        &validated_nodes,
                        &node_first_value,
                        n_leading,
                        n_inputs,
                    )
                    .map_err(|err| Error {
                        message: format!("input {position}: {}", err.message),
                        ..err
                    })
                })
                .collect::<Result<_>>()?;
            let attrs = Attrs::check(&node.attrs, op.attrs)?;
            let mut operator = (op.build)(&attrs, node.inputs.len())?;
            let input_types: Vec<TensorType> =
                inputs.iter().map(|&id| value_types[id].clone()).collect();
            let output_types = operator.infer(&input_types)?;
            for (position, ty) in output_types.iter().enumerate() {
                ty.shape.check_limits(&format!("output {position}"))?;
                check_precision(ty.precision, &format!("output {position}"))?;
            }
            if let Some((position, order)) = operator.packed_input(&input_types)
                && let Some(&id) = inputs.get(position)
                && (n_inputs..n_leading).contains(&id)
            {
                let packed = match packings.get(&(id, order)) {
                    Some(packed) => Arc::clone(packed),
                    None => {
                        let param = &decoded_params[id - n_inputs].1;
                        let dims = param.shape.dims();
                        let rows = dims.first().copied().unwrap_or(1) as u64;
                        let depth = dims.iter().skip(1).map(|&d| u64::from(d)).product::<u64>();
                        packed_bytes =
                            packed_bytes.saturating_add(kernels::packed_bytes(rows, depth, order));
                        if packed_bytes > limits::MAX_PEAK_MEMORY_BYTES {
                            return Err(fail!(
                                MemoryLimit,
                                "packing the weights of the model's nodes takes {packed_bytes} bytes, more than the memory limit of {}",
                                limits::MAX_PEAK_MEMORY_BYTES
                            ));
                        }
                        let packed = Arc::new(kernels::pack_in(
                            &param.data,
                            rows as usize,
                            depth as usize,
                            order,
                        ));
                        packings.insert((id, order), Arc::clone(&packed));
                        packed
                    }
                };
                operator.set_packed(packed);
            }
            let scratch_bytes = operator.scratch_bytes(&input_types)?;
            let usage = node_usage(operator.as_ref(), &input_types, &output_types)?;
            let gas = node_gas(schedule, op, &usage)?;
            Ok(ValidatedNode {
                name: String::new(),
                op,
                operator,
                inputs,
                first_output: value_types.len(),
                output_types,
                gas,
                scratch_bytes,
            })
        })()
        .map_err(context)?;
        total_gas = total_gas.checked_add(validated.gas).ok_or_else(|| {
            context(fail!(
                LimitExceeded,
                "the model's total gas overflows 64 bits"
            ))
        })?;
        node_first_value.push(validated.first_output);
        value_types.extend(validated.output_types.iter().cloned());
        validated_nodes.push(ValidatedNode {
            name: node.name,
            ..validated
        });
    }

    let mut validated_outputs = Vec::with_capacity(outputs.len());
    let mut output_names: BTreeSet<String> = BTreeSet::new();
    for (position, output) in outputs.into_iter().enumerate() {
        check_name(&output.name, "output").map_err(|err| Error {
            message: format!("output {position}: {}", err.message),
            ..err
        })?;
        if !output_names.insert(output.name.clone()) {
            return Err(fail!(
                DuplicateName,
                "output name \"{}\" is used twice",
                output.name
            ));
        }
        let id = resolve(
            output.value,
            &validated_nodes,
            &node_first_value,
            n_leading,
            n_inputs,
        )
        .map_err(|err| Error {
            message: format!("output \"{}\": {}", output.name, err.message),
            ..err
        })?;
        validated_outputs.push((output.name, id));
    }

    let memory = plan_memory(
        &validated_nodes,
        &validated_outputs,
        &value_types,
        n_inputs,
        n_leading,
        packed_bytes,
    )?;
    let elements_of = |ids: &[ValueId]| {
        ids.iter().try_fold(0u64, |total, &id| {
            total.checked_add(value_types[id].shape.elements())
        })
    };
    let input_ids: Vec<ValueId> = (0..n_inputs).collect();
    let output_ids: Vec<ValueId> = validated_outputs.iter().map(|&(_, id)| id).collect();
    let run_gas = elements_of(&input_ids)
        .zip(elements_of(&output_ids))
        .and_then(|(inputs, outputs)| {
            schedule
                .run_gas(inputs, outputs, memory.arena_bytes / 4)
                .ok()
        })
        .ok_or_else(|| fail!(LimitExceeded, "the run's gas overflows 64 bits"))?;
    let total_gas = total_gas
        .checked_add(run_gas)
        .filter(|&total| total <= limits::MAX_GAS_PER_RUN)
        .ok_or_else(|| {
            fail!(
                LimitExceeded,
                "the model costs {} gas, more than the {} (2^33) one run may cost",
                total_gas.saturating_add(run_gas),
                limits::MAX_GAS_PER_RUN
            )
        })?;
    Ok(ValidatedModel {
        inputs: validated_inputs,
        params: decoded_params,
        nodes: validated_nodes,
        outputs: validated_outputs,
        value_types,
        total_gas,
        run_gas,
        peak_memory_bytes: memory.peak_bytes,
        arena_bytes: memory.arena_bytes,
        arena_offsets: memory.arena_offsets,
        schedule,
    })
}

/// Resolves a reference to a value id; node references must point to an earlier node.
fn resolve(
    value: ValueRef,
    nodes: &[ValidatedNode],
    node_first_value: &[ValueId],
    n_leading: usize,
    n_inputs: usize,
) -> Result<ValueId> {
    match value {
        ValueRef::Input(index) => {
            let index = index as usize;
            if index < n_inputs {
                Ok(index)
            } else {
                Err(fail!(
                    InvalidReference,
                    "refers to input {index}, but the model has {n_inputs}"
                ))
            }
        }
        ValueRef::Param(index) => {
            let index = index as usize;
            let n_params = n_leading - n_inputs;
            if index < n_params {
                Ok(n_inputs + index)
            } else {
                Err(fail!(
                    InvalidReference,
                    "refers to parameter {index}, but the model has {n_params}"
                ))
            }
        }
        ValueRef::Node { node, output } => {
            let Some(producer) = nodes.get(node as usize) else {
                return Err(fail!(
                    InvalidReference,
                    "refers to node {node}, which does not come before it (a forward reference or cycle)"
                ));
            };
            if usize::from(output) >= producer.output_types.len() {
                return Err(fail!(
                    InvalidReference,
                    "refers to output {output} of node \"{}\", which has {} output(s)",
                    producer.name,
                    producer.output_types.len()
                ));
            }
            Ok(node_first_value[node as usize] + usize::from(output))
        }
    }
}

/// The memory plan of a model.
struct MemoryPlan {
    /// [`ValidatedModel::peak_memory_bytes`].
    peak_bytes: u64,
    /// [`ValidatedModel::arena_bytes`].
    arena_bytes: u64,
    /// [`ValidatedModel::arena_offsets`].
    arena_offsets: Vec<u64>,
}

/// Places every node output in the arena ([`plan::place`]) and computes the peak bytes a run
/// holds.
///
/// The executor keeps the parameters and the weights packed at load time (`packed_bytes`), the
/// caller's inputs and the arena for the whole run. On top of them it holds, while a node
/// runs, that operator's working memory (`scratch_bytes`), and at the end the copies of the
/// model outputs (every listing but the last one of a model input, which is moved out). Those
/// never coexist, so the peak is the sum of the former and the larger of the latter two.
///
/// # Errors
/// `MemoryLimit` if the peak exceeds [`limits::MAX_PEAK_MEMORY_BYTES`] or an offset overflows.
fn plan_memory(
    nodes: &[ValidatedNode],
    outputs: &[(String, ValueId)],
    value_types: &[TensorType],
    n_inputs: usize,
    n_leading: usize,
    packed_bytes: u64,
) -> Result<MemoryPlan> {
    let plan_nodes: Vec<PlanNode<'_>> = nodes
        .iter()
        .map(|node| PlanNode {
            inputs: &node.inputs,
            outputs: node.first_output..node.first_output + node.output_types.len(),
        })
        .collect();
    let sizes: Vec<u64> = value_types[n_leading..]
        .iter()
        .map(|ty| ty.shape.elements())
        .collect();
    let model_outputs: Vec<ValueId> = outputs.iter().map(|&(_, id)| id).collect();
    let lifetimes = plan::lifetimes(&plan_nodes, n_leading, &sizes, &model_outputs);
    let placement = plan::place(&lifetimes)?;
    let arena_bytes = placement.size.checked_mul(4).ok_or_else(|| {
        fail!(
            MemoryLimit,
            "the arena of {} elements overflows 64 bits",
            placement.size
        )
    })?;

    let bytes = |id: ValueId| tensor_bytes(&value_types[id]);
    let whole_run = (0..n_leading)
        .map(bytes)
        .fold(packed_bytes, u64::saturating_add)
        .saturating_add(arena_bytes);
    let largest_scratch = nodes
        .iter()
        .map(|node| node.scratch_bytes)
        .max()
        .unwrap_or(0);
    // The last listing of a model input takes the caller's tensor; every other listing is a
    // copy.
    let mut input_taken = vec![false; n_inputs];
    let mut copied_out: u64 = 0;
    for &(_, id) in outputs.iter().rev() {
        match input_taken.get_mut(id) {
            Some(taken) if !*taken => *taken = true,
            _ => copied_out = copied_out.saturating_add(bytes(id)),
        }
    }
    let peak = whole_run.saturating_add(largest_scratch.max(copied_out));
    if peak > limits::MAX_PEAK_MEMORY_BYTES {
        return Err(fail!(
            MemoryLimit,
            "the model needs {peak} bytes of memory at its peak (parameters, packed weights, inputs, an arena of {arena_bytes} bytes for node outputs, and the larger of the operators' working memory, {largest_scratch} bytes, and the outputs copied out, {copied_out} bytes), more than the limit of {}",
            limits::MAX_PEAK_MEMORY_BYTES
        ));
    }
    Ok(MemoryPlan {
        peak_bytes: peak,
        arena_bytes,
        arena_offsets: placement.offsets,
    })
}
