//! `cvm trace` (a run with a record of every node, `cvm_runtime::trace`), `cvm diff` (where two
//! traces part) and `cvm run-node` (one node run alone from its operand tensors). What they
//! serve is in `docs/audit.md`.

use cvm_engine::model::{AttrValue, ValueRef};
use cvm_runtime::hash::hex;
use cvm_runtime::trace::{
    DEFAULT_VALUES_LIMIT, NodeRecord, Trace, TraceDiff, TraceModel, TraceOptions, diff,
    tensor_hash, trace_native, trace_wasm,
};
use serde_json::json;

use super::run::{accepted, print_report, read_inputs, wasm_engine};
use crate::*;

/// The most bytes a trace file may have: the values a trace keeps are bounded far below.
const TRACE_FILE: FileLimit = FileLimit {
    bytes: 1 << 30,
    what: "trace file",
};

/// How `cvm trace` runs and reports.
pub(crate) struct TraceRunOptions<'a> {
    pub(crate) engine: EngineKind,
    pub(crate) gas_limit: u64,
    pub(crate) schedule: u32,
    pub(crate) values: bool,
    pub(crate) output: Option<&'a Path>,
    pub(crate) json: bool,
}

pub(crate) fn trace(
    source: &ModelSource,
    input_args: &[String],
    options: &TraceRunOptions<'_>,
    cache: &CacheArgs,
) -> Result<(), Failure> {
    let LoadedModel { bytes, model, .. } =
        accepted(load_model(source)?, HashAlgorithm::Sha3_256, options.json)?;
    let inputs = match &model {
        Some(model) => read_inputs(model, input_args, None)?,
        None => Vec::new(),
    };
    let traced = match TraceModel::from_bytes(&bytes) {
        Ok(traced) => traced,
        Err(error) => {
            print_report(
                &Report::failure(error, 0),
                HashAlgorithm::Sha3_256,
                options.json,
            )?;
            return Err(Failure::Deterministic);
        }
    };
    let trace_options = TraceOptions {
        values_limit: options.values.then_some(DEFAULT_VALUES_LIMIT),
    };
    let mut timings = Timings::default();
    let wasm = wasm_engine(options.engine, cache, &mut timings)?;
    let (report, trace) = match options.engine {
        EngineKind::Native => {
            let validated = match cvm_engine::load(&bytes, options.schedule) {
                Ok(validated) => validated,
                Err(report) => {
                    print_report(&report, HashAlgorithm::Sha3_256, options.json)?;
                    return Err(Failure::Deterministic);
                }
            };
            trace_native(
                &validated,
                &traced,
                inputs,
                options.gas_limit,
                trace_options,
            )
            .map_err(HostError::from)?
        }
        EngineKind::Wasm => {
            let wasm = wasm
                .as_ref()
                .ok_or_else(|| HostError::Wasm("the wasm engine is missing".into()))?;
            let mut session = wasm.session().map_err(HostError::from)?;
            if let Some(report) = session
                .load(&bytes, options.schedule)
                .map_err(HostError::from)?
            {
                print_report(&report, HashAlgorithm::Sha3_256, options.json)?;
                return Err(Failure::Deterministic);
            }
            trace_wasm(
                &mut session,
                options.schedule,
                &traced,
                &inputs,
                options.gas_limit,
                trace_options,
            )
            .map_err(HostError::from)?
        }
    };
    if let Some(path) = options.output {
        std::fs::write(path, trace.to_file_bytes())
            .map_err(|source| HostError::io(path, source))?;
    }
    if options.json {
        let nodes: Vec<serde_json::Value> = trace.nodes.iter().map(record_json).collect();
        let value = json!({
            "model": hex(&trace.model_hash),
            "schedule": trace.schedule_version,
            "nodes": nodes,
            "root": hex(&trace.root),
            "status": if report.error_code().is_none() { "ok" } else { "error" },
            "gas_used": trace.gas_used,
            "hash": hex(&trace.outcome_hash),
        });
        outln!("{value}")?;
    } else {
        for record in &trace.nodes {
            outln!("{}", record_line(record))?;
        }
        outln!("root:     {} (merkle, sha3-256)", hex(&trace.root))?;
        out!("{}", render::report_text(&report, HashAlgorithm::Sha3_256))?;
    }
    if report.error_code().is_none() {
        Ok(())
    } else {
        Err(Failure::Deterministic)
    }
}

/// One line of `cvm trace`: index, name, operator, output shapes, gas so far, output hashes.
fn record_line(record: &NodeRecord) -> String {
    let shapes: Vec<String> = record
        .output_shapes
        .iter()
        .map(|shape| format!("{shape:?}"))
        .collect();
    let hashes: Vec<String> = record.output_hashes.iter().map(|h| hex(h)).collect();
    format!(
        "node {:>4} {} ({}) {} gas {} {}",
        record.index,
        record.name,
        record.op_name,
        shapes.join(" "),
        record.gas_used,
        hashes.join(" ")
    )
}

fn record_json(record: &NodeRecord) -> serde_json::Value {
    json!({
        "index": record.index,
        "name": record.name,
        "op": record.op_name,
        "output_shapes": record.output_shapes,
        "gas_used": record.gas_used,
        "output_hashes": record.output_hashes.iter().map(|h| hex(h)).collect::<Vec<_>>(),
    })
}

/// `name=value` for each attribute, as a text model writes them.
fn attributes(record: &NodeRecord) -> String {
    let attrs: Vec<String> = record
        .attrs
        .iter()
        .map(|attr| {
            let value = match &attr.value {
                AttrValue::Int(value) => value.to_string(),
                AttrValue::Bool(value) => value.to_string(),
                AttrValue::Ints(values) => format!("{values:?}"),
                AttrValue::Str(value) => format!("{value:?}"),
            };
            format!("{}={value}", attr.name)
        })
        .collect();
    if attrs.is_empty() {
        "(none)".into()
    } else {
        attrs.join(" ")
    }
}

/// The operands of `record`, as `cvm inspect` names them.
fn operands(record: &NodeRecord) -> String {
    let operands: Vec<String> = record
        .inputs
        .iter()
        .map(|operand| match operand {
            ValueRef::Input(index) => format!("input {index}"),
            ValueRef::Param(index) => format!("param {index}"),
            ValueRef::Node { node, output } => format!("node {node}:{output}"),
        })
        .collect();
    operands.join(", ")
}

/// Reads and checks a trace file.
fn read_trace(path: &Path) -> Result<Trace, HostError> {
    let bytes = read_file(path, TRACE_FILE)?;
    Trace::from_file_bytes(&bytes)
        .map_err(|error| HostError::input(format!("{}: {error}", path.display())))
}

/// `cvm diff A B`: exit status 0 when the traces are equal, 1 when they differ.
pub(crate) fn diff_traces(first: &Path, second: &Path, json: bool) -> Result<(), Failure> {
    let a = read_trace(first)?;
    let b = read_trace(second)?;
    let found = diff(&a, &b);
    let value = match &found {
        TraceDiff::Equal => json!({"equal": true, "root": hex(&a.root)}),
        TraceDiff::DifferentModels => json!({
            "equal": false,
            "reason": "the traces are of different models or gas schedules",
            "models": [hex(&a.model_hash), hex(&b.model_hash)],
            "schedules": [a.schedule_version, b.schedule_version],
        }),
        TraceDiff::DifferentInputs { index, inputs } => json!({
            "equal": false,
            "reason": "the runs were given different inputs",
            "node": a.nodes.get(*index).map(|record| record.index),
            "inputs": inputs,
        }),
        TraceDiff::Stopped { common } => json!({
            "equal": false,
            "reason": "every node both traces hold agrees; one run stopped earlier",
            "common_nodes": common,
            "nodes": [a.nodes.len(), b.nodes.len()],
            "hashes": [hex(&a.outcome_hash), hex(&b.outcome_hash)],
        }),
        TraceDiff::OutcomeOnly => json!({
            "equal": false,
            "reason": "every node agrees; the outcomes differ",
            "hashes": [hex(&a.outcome_hash), hex(&b.outcome_hash)],
        }),
        TraceDiff::Node(divergence) => {
            let (left, right) = (&a.nodes[divergence.index], &b.nodes[divergence.index]);
            json!({
                "equal": false,
                "reason": "the node's outputs differ while its operands agree",
                "node": left.index,
                "name": left.name,
                "op": left.op_name,
                "attrs": attributes(left),
                "operands": operands(left),
                "output": divergence.output,
                "hashes": [
                    left.output_hashes.get(divergence.output).map(|h| hex(h)),
                    right.output_hashes.get(divergence.output).map(|h| hex(h)),
                ],
                "elements": divergence.elements.as_ref().map(|elements| {
                    elements
                        .iter()
                        .map(|(at, x, y)| json!({"index": at, "a": x, "b": y}))
                        .collect::<Vec<_>>()
                }),
            })
        }
    };
    if json {
        outln!("{value}")?;
    } else {
        match &found {
            TraceDiff::Equal => outln!("equal: {} nodes, root {}", a.nodes.len(), hex(&a.root))?,
            TraceDiff::DifferentModels => outln!(
                "differ: the traces are of different models or gas schedules\n  a: model {} \
                 schedule {}\n  b: model {} schedule {}",
                hex(&a.model_hash),
                a.schedule_version,
                hex(&b.model_hash),
                b.schedule_version
            )?,
            TraceDiff::DifferentInputs { index, inputs } => outln!(
                "differ: the runs were given different inputs (model inputs {inputs:?}); node \
                 {index} is the first that reads one"
            )?,
            TraceDiff::Stopped { common } => outln!(
                "differ: the {common} nodes both traces hold agree; a ran {} nodes, b ran {} \
                 (outcomes {} and {})",
                a.nodes.len(),
                b.nodes.len(),
                hex(&a.outcome_hash),
                hex(&b.outcome_hash)
            )?,
            TraceDiff::OutcomeOnly => outln!(
                "differ: every node agrees, the outcomes differ ({} and {})",
                hex(&a.outcome_hash),
                hex(&b.outcome_hash)
            )?,
            TraceDiff::Node(divergence) => {
                let (left, right) = (&a.nodes[divergence.index], &b.nodes[divergence.index]);
                outln!(
                    "differ at node {} \"{}\" ({}): its output {} differs while its operands \
                     agree",
                    left.index,
                    left.name,
                    left.op_name,
                    divergence.output
                )?;
                outln!("  attributes: {}", attributes(left))?;
                outln!("  operands:   {}", operands(left))?;
                let shown = |record: &NodeRecord| {
                    record
                        .output_hashes
                        .get(divergence.output)
                        .map_or_else(|| "-".to_string(), |h| hex(h))
                };
                outln!("  a: {}", shown(left))?;
                outln!("  b: {}", shown(right))?;
                match &divergence.elements {
                    Some(elements) => {
                        for (at, x, y) in elements {
                            outln!("  element {at}: a {x}, b {y}")?;
                        }
                    }
                    None => outln!("  (values: trace both runs with --values to see them)")?,
                }
            }
        }
    }
    match found {
        TraceDiff::Equal => Ok(()),
        _ => Err(Failure::Deterministic),
    }
}

/// Where `cvm run-node` takes the node's operands from.
pub(crate) enum Operands<'a> {
    /// One `.npy` per operand that is not a parameter, in operand order (`--inputs`).
    Files(&'a [PathBuf]),
    /// A trace that keeps values (`--trace`): node operands from its values, model inputs from
    /// the `--input` files; the outputs are then checked against the trace's record.
    Trace {
        path: &'a Path,
        model_inputs: &'a [String],
    },
}

/// The operand tensors of node `node` (its non-parameter operands, in order) taken from `trace`
/// and the model's `inputs`.
fn operands_from_trace(
    trace: &Trace,
    path: &Path,
    record: &cvm_engine::model::Node,
    inputs: &[cvm_engine::exec::InputTensor],
) -> Result<Vec<cvm_engine::exec::InputTensor>, HostError> {
    let mut operands = Vec::new();
    for reference in &record.inputs {
        match *reference {
            ValueRef::Param(_) => {}
            ValueRef::Input(index) => {
                operands.push(inputs.get(index as usize).cloned().ok_or_else(|| {
                    HostError::Usage(format!(
                        "the node reads model input {index}: give the model's inputs with --input"
                    ))
                })?)
            }
            ValueRef::Node { node, output } => {
                let tensor = trace
                    .values_of(node as usize)
                    .and_then(|outputs| outputs.get(output as usize))
                    .ok_or_else(|| {
                        HostError::Usage(format!(
                            "{}: the trace keeps no values of node {node}, an operand of this node \
                             (trace the run with --values)",
                            path.display()
                        ))
                    })?;
                operands.push(cvm_engine::exec::InputTensor {
                    shape: tensor.shape.clone(),
                    data: tensor.data.clone(),
                });
            }
        }
    }
    Ok(operands)
}

/// `cvm run-node MODEL --node N (--inputs FILE… | --trace TRACE [--input …])`: the node's
/// outputs' hashes; with `--trace`, also whether they are the trace's (exit status 1 if not).
pub(crate) fn run_node(
    source: &ModelSource,
    node: u32,
    operand_source: &Operands<'_>,
    schedule: u32,
    json: bool,
) -> Result<(), Failure> {
    let LoadedModel { bytes, model, .. } =
        accepted(load_model(source)?, HashAlgorithm::Sha3_256, json)?;
    let validated = match cvm_engine::load(&bytes, schedule) {
        Ok(validated) => validated,
        Err(report) => {
            print_report(&report, HashAlgorithm::Sha3_256, json)?;
            return Err(Failure::Deterministic);
        }
    };
    let (operands, expected) = match operand_source {
        Operands::Files(files) => (
            files
                .iter()
                .map(|path| cvm_cli::inputs::read_input(path))
                .collect::<Result<Vec<_>, _>>()?,
            None,
        ),
        Operands::Trace { path, model_inputs } => {
            let trace = read_trace(path)?;
            let model_hash: [u8; 32] = cvm_runtime::hash::HashAlgorithm::Sha3_256.digest(&bytes);
            if trace.model_hash != model_hash {
                return Err(HostError::Usage(format!(
                    "{}: the trace is of another model (model {}, this one {})",
                    path.display(),
                    hex(&trace.model_hash),
                    hex(&model_hash)
                ))
                .into());
            }
            let record = model
                .as_ref()
                .and_then(|model| model.nodes.get(node as usize))
                .ok_or_else(|| {
                    HostError::Usage(format!(
                        "node {node} does not exist; the model has {} nodes",
                        validated.nodes.len()
                    ))
                })?;
            // The model's inputs are read only when the node reads one.
            let reads_input = record
                .inputs
                .iter()
                .any(|operand| matches!(operand, ValueRef::Input(_)));
            let inputs = match &model {
                Some(model) if reads_input => read_inputs(model, model_inputs, None)?,
                _ => Vec::new(),
            };
            let operands = operands_from_trace(&trace, path, record, &inputs)?;
            let expected = trace
                .nodes
                .iter()
                .find(|traced| traced.index == node)
                .map(|traced| traced.output_hashes.clone());
            (operands, Some(expected))
        }
    };
    let ran = match cvm_engine::trace::run_node(&validated, node as usize, operands) {
        Ok(ran) => ran,
        Err(error) if error.code.number() < 400 => {
            return Err(HostError::Usage(error.to_string()).into());
        }
        Err(error) => {
            if json {
                outln!(
                    "{}",
                    json!({"status": "error", "node": node, "code": error.code.name(),
                           "code_num": error.code.number(), "message": error.message})
                )?;
            } else {
                outln!("status:   error {} ({})", error.code, error.code.number())?;
                outln!("message:  {}", error.message)?;
            }
            return Err(Failure::Deterministic);
        }
    };
    let hashes: Vec<String> = ran
        .outputs
        .iter()
        .map(|tensor| {
            hex(&tensor_hash(
                tensor.shape.dims(),
                tensor.precision,
                &tensor.data,
            ))
        })
        .collect();
    let name = validated
        .nodes
        .get(node as usize)
        .map_or("", |node| node.name.as_str());
    // With --trace: whether the outputs are those the trace records for the node.
    let verdict = expected.map(|expected| match expected {
        Some(expected) if expected.iter().map(|h| hex(h)).collect::<Vec<_>>() == hashes => {
            (true, "the outputs are the trace's")
        }
        Some(_) => (false, "the outputs are NOT the trace's"),
        None => (
            false,
            "the trace holds no record of the node (its run stopped before it)",
        ),
    });
    let agrees = verdict.map(|(agrees, _)| agrees);
    if json {
        let outputs: Vec<serde_json::Value> = ran
            .outputs
            .iter()
            .zip(&hashes)
            .map(|(tensor, hash)| {
                json!({"shape": tensor.shape.dims(), "precision": tensor.precision, "hash": hash})
            })
            .collect();
        outln!(
            "{}",
            json!({"status": "ok", "node": node, "name": name, "gas": ran.gas, "outputs": outputs,
                   "matches_trace": agrees})
        )?;
    } else {
        outln!("node:     {node} \"{name}\", gas {}", ran.gas)?;
        for (position, (tensor, hash)) in ran.outputs.iter().zip(&hashes).enumerate() {
            outln!(
                "output {position}: shape {:?} precision {} digest {hash} (blake3)",
                tensor.shape.dims(),
                tensor.precision
            )?;
        }
        if let Some((_, verdict)) = verdict {
            outln!("trace:    {verdict}")?;
        }
    }
    match agrees {
        Some(false) => Err(Failure::Deterministic),
        _ => Ok(()),
    }
}
