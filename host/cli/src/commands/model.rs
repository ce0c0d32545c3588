//! `cvm estimate`, `cvm import`, `cvm inspect` and `cvm build`: commands over one model.

use super::run::print_report;
use crate::*;

/// Loads and validates natively under gas schedule `schedule`; a rejection is printed (as JSON
/// when asked) and is a deterministic failure.
fn validated(
    source: &ModelSource,
    json: bool,
    schedule: u32,
) -> Result<(cvm_engine::ValidatedModel, LoadedModel), Failure> {
    let loaded = super::run::accepted(load_model(source)?, HashAlgorithm::default(), json)?;
    match validate_natively(&loaded.bytes, schedule) {
        Ok(model) => Ok((model, loaded)),
        Err(report) => {
            print_report(&report, HashAlgorithm::default(), json)?;
            Err(Failure::Deterministic)
        }
    }
}

pub(crate) fn estimate(source: &ModelSource, json: bool, schedule: u32) -> Result<(), Failure> {
    let (model, loaded) = validated(source, json, schedule)?;
    let estimate = model.estimate();
    if json {
        let mut value = render::estimate_json(&estimate);
        if let Some(meta) = &loaded.cvm {
            value["legacy_gas"] = match &meta.legacy_gas {
                Ok(gas) => (*gas).into(),
                Err(error) => error.message.clone().into(),
            };
            value["cvm"] = render::cvm_contract_json(&meta.contract);
        }
        outln!("{value}")?;
    } else {
        out!("{}", render::estimate_text(&estimate))?;
        if let Some(meta) = &loaded.cvm {
            match &meta.legacy_gas {
                Ok(gas) => outln!("legacy gas:  {gas} (the deployed CVM runtime's figure)")?,
                Err(error) => outln!("legacy gas:  none ({})", error.message)?,
            }
            out!("{}", render::cvm_contract_text(&meta.contract))?;
        }
    }
    Ok(())
}

pub(crate) fn import(source: &ModelSource, output: &Path, schedule: u32) -> Result<(), Failure> {
    if !matches!(source, ModelSource::Cvm { .. }) {
        return Err(HostError::Usage("import reads a CVM model: a directory with symbol and params, or --cvm-symbol with --cvm-params".into()).into());
    }
    let (_, loaded) = validated(source, false, schedule)?;
    std::fs::write(output, &loaded.bytes).map_err(|source| HostError::io(output, source))?;
    outln!("wrote {} ({} bytes)", output.display(), loaded.bytes.len())?;
    Ok(())
}

pub(crate) fn inspect(source: &ModelSource, schedule: u32) -> Result<(), Failure> {
    let (model, loaded) = validated(source, false, schedule)?;
    if let Some(meta) = &loaded.cvm {
        outln!(
            "CVM model {}, post-processing \"{}\", legacy gas {}",
            meta.version.name(),
            meta.postprocess_name,
            match &meta.legacy_gas {
                Ok(gas) => gas.to_string(),
                Err(error) => format!("none ({})", error.message),
            }
        )?;
        out!("{}", render::cvm_contract_text(&meta.contract))?;
    }
    let name_of = |id: usize| -> String {
        if id < model.inputs.len() {
            return model.inputs[id].name.clone();
        }
        if model.is_param(id) {
            return model.params[id - model.inputs.len()].0.clone();
        }
        for node in &model.nodes {
            if (node.first_output..node.first_output + node.output_types.len()).contains(&id) {
                let output = id - node.first_output;
                return if output == 0 {
                    node.name.clone()
                } else {
                    format!("{}:{output}", node.name)
                };
            }
        }
        format!("#{id}")
    };
    let mut out = String::from("inputs:\n");
    for input in &model.inputs {
        out.push_str(&format!(
            "  {}  shape {}  precision {}\n",
            input.name, input.ty.shape, input.ty.precision
        ));
    }
    out.push_str("params:\n");
    for (name, tensor) in &model.params {
        out.push_str(&format!(
            "  {name}  shape {}  precision {}\n",
            tensor.shape, tensor.precision
        ));
    }
    out.push_str("nodes:\n");
    for (index, node) in model.nodes.iter().enumerate() {
        let operands: Vec<String> = node.inputs.iter().map(|&id| name_of(id)).collect();
        let results: Vec<String> = node
            .output_types
            .iter()
            .map(|ty| format!("{} p{}", ty.shape, ty.precision))
            .collect();
        out.push_str(&format!(
            "  #{index} {} = {}({}) -> {}  gas {}\n",
            node.name,
            node.op.name,
            operands.join(", "),
            results.join(", "),
            node.gas
        ));
    }
    out.push_str("outputs:\n");
    for (name, id) in &model.outputs {
        let ty = &model.value_types[*id];
        out.push_str(&format!(
            "  {name} = {}  shape {}  precision {}\n",
            name_of(*id),
            ty.shape,
            ty.precision
        ));
    }
    out.push_str(&format!(
        "total gas {} (schedule v{})  peak memory {} bytes  arena {} bytes\n",
        model.total_gas, model.schedule.version, model.peak_memory_bytes, model.arena_bytes
    ));
    out!("{out}")?;
    Ok(())
}

pub(crate) fn build(
    model_path: &Path,
    output: &Path,
    allow_invalid: bool,
    schedule: u32,
) -> Result<(), Failure> {
    // Read as text explicitly: `build` converts text models only.
    let bytes = read_file(model_path, FileLimit::MODEL)?;
    let text = String::from_utf8(bytes).map_err(|_| cvm_formats::ReadError::TextModel {
        path: model_path.display().to_string(),
        message: "not UTF-8 text".into(),
    })?;
    let model = cvm_formats::text::parse_text_model(
        &text,
        &cvm_formats::text::base_dir_of(model_path),
        &model_path.display().to_string(),
    )?;
    let encoded = model.encode();
    if !allow_invalid && let Err(report) = validate_natively(&encoded, schedule) {
        print_report(&report, HashAlgorithm::default(), false)?;
        return Err(Failure::Deterministic);
    }
    std::fs::write(output, &encoded).map_err(|source| HostError::io(output, source))?;
    outln!("wrote {} ({} bytes)", output.display(), encoded.len())?;
    Ok(())
}
