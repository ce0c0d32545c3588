//! Presenting reports: the JSON object of `cvm run --json` (also the blessed form of fixture
//! expectations) and the short human summary.

use cvm_engine::outcome::Status;
use cvm_engine::{Estimate, Report};
use cvm_formats::cvm::Contract;
use serde_json::{Value, json};

use cvm_runtime::hash::{HashAlgorithm, hex, outcome_hash};

/// The JSON object `cvm run --json` prints for `report`.
pub fn report_json(report: &Report, algorithm: HashAlgorithm) -> Value {
    let hash = hex(&outcome_hash(report, algorithm));
    match &report.outcome.status {
        Status::Ok { outputs } => json!({
            "status": "ok",
            "gas_used": report.outcome.gas_used,
            "hash": hash,
            "outputs": outputs.iter().zip(&report.output_names).map(|(tensor, name)| json!({
                "name": name,
                "shape": tensor.shape,
                "precision": tensor.precision,
                "data": tensor.data,
            })).collect::<Vec<_>>(),
        }),
        Status::Error { code, .. } => {
            let detail = report.failure.as_ref();
            json!({
                "status": "error",
                "error": {
                    "code": detail.map_or("Unknown", |d| d.code_name.as_str()),
                    "code_num": code,
                    "node": detail.and_then(|d| d.node_name.as_deref()),
                    "message": detail.map_or("", |d| d.message.as_str()),
                },
                "gas_used": report.outcome.gas_used,
                "hash": hash,
            })
        }
    }
}

/// What `cvm run --json` adds for a CVM model: its output bytes, or why there are none.
pub enum CvmOutput<'a> {
    /// The bytes the deployed runtime returns (`"output_cvm_hex"`).
    Bytes(&'a [u8]),
    /// Why they cannot be formed (`"output_cvm_error"`).
    Error(&'a str),
}

/// Writes [`report_json`]'s object (plus `cvm`'s field) and a line break to `out`, streaming the
/// output data: memory stays that of the report, whatever the size of its tensors.
///
/// # Errors
/// What writing to `out` fails with.
pub fn write_report_json(
    out: &mut impl std::io::Write,
    report: &Report,
    algorithm: HashAlgorithm,
    cvm: Option<CvmOutput<'_>>,
) -> std::io::Result<()> {
    let Status::Ok { outputs } = &report.outcome.status else {
        let mut value = report_json(report, algorithm);
        if let Some(CvmOutput::Error(message)) = cvm {
            value["output_cvm_error"] = message.into();
        }
        serde_json::to_writer(&mut *out, &value)?;
        return out.write_all(b"\n");
    };
    let hash = hex(&outcome_hash(report, algorithm));
    write!(
        out,
        "{{\"status\":\"ok\",\"gas_used\":{},\"hash\":\"{hash}\",\"outputs\":[",
        report.outcome.gas_used
    )?;
    for (index, (tensor, name)) in outputs.iter().zip(&report.output_names).enumerate() {
        if index > 0 {
            out.write_all(b",")?;
        }
        out.write_all(b"{\"name\":")?;
        serde_json::to_writer(&mut *out, name)?;
        out.write_all(b",\"shape\":")?;
        serde_json::to_writer(&mut *out, &tensor.shape)?;
        write!(out, ",\"precision\":{},\"data\":[", tensor.precision)?;
        for (i, value) in tensor.data.iter().enumerate() {
            if i > 0 {
                out.write_all(b",")?;
            }
            write!(out, "{value}")?;
        }
        out.write_all(b"]}")?;
    }
    out.write_all(b"]")?;
    match cvm {
        Some(CvmOutput::Bytes(bytes)) => {
            out.write_all(b",\"output_cvm_hex\":\"")?;
            for chunk in bytes.chunks(4096) {
                out.write_all(hex(chunk).as_bytes())?;
            }
            out.write_all(b"\"")?;
        }
        Some(CvmOutput::Error(message)) => {
            out.write_all(b",\"output_cvm_error\":")?;
            serde_json::to_writer(&mut *out, message)?;
        }
        None => {}
    }
    out.write_all(b"}\n")
}

/// Up to `limit` bytes in hexadecimal, then an ellipsis with the count left out.
pub fn hex_preview(bytes: &[u8], limit: usize) -> String {
    let shown = hex(&bytes[..bytes.len().min(limit)]);
    if bytes.len() > limit {
        format!("{shown}… ({} more)", bytes.len() - limit)
    } else {
        shown
    }
}

/// Up to `limit` values, then an ellipsis with the count left out.
fn preview(data: &[i32], limit: usize) -> String {
    let shown: Vec<String> = data.iter().take(limit).map(i32::to_string).collect();
    if data.len() > limit {
        format!("[{}, … ({} more)]", shown.join(", "), data.len() - limit)
    } else {
        format!("[{}]", shown.join(", "))
    }
}

/// 100 · part / whole in hundredths, rounded half up, in integer arithmetic (0 for an empty
/// whole).
pub fn hundredths(part: usize, whole: usize) -> i64 {
    let whole = whole.max(1) as i128;
    let rounded = (part as i128 * 20_000 + whole) / (2 * whole);
    i64::try_from(rounded).unwrap_or(i64::MAX)
}

/// Hundredths with two decimals: `-0.17`.
pub fn two_decimals(hundredths: i64) -> String {
    let sign = if hundredths < 0 { "-" } else { "" };
    let magnitude = hundredths.unsigned_abs();
    format!("{sign}{}.{:02}", magnitude / 100, magnitude % 100)
}

/// `part` of `whole` as a percentage with two decimals: `64.05 %`.
pub fn percent(part: usize, whole: usize) -> String {
    format!("{} %", two_decimals(hundredths(part, whole)))
}

/// The human summary `cvm run` prints without `--json`.
pub fn report_text(report: &Report, algorithm: HashAlgorithm) -> String {
    let mut text = String::new();
    match &report.outcome.status {
        Status::Ok { outputs } => {
            text.push_str("status:   ok\n");
            for (tensor, name) in outputs.iter().zip(&report.output_names) {
                text.push_str(&format!(
                    "output:   {name} shape {:?} precision {}\n          {}\n",
                    tensor.shape,
                    tensor.precision,
                    preview(&tensor.data, 64)
                ));
            }
        }
        Status::Error { code, .. } => {
            let detail = report.failure.as_ref();
            text.push_str(&format!(
                "status:   error {} ({code})\n",
                detail.map_or("Unknown", |d| d.code_name.as_str())
            ));
            if let Some(node) = detail.and_then(|d| d.node_name.as_deref()) {
                text.push_str(&format!("node:     {node}\n"));
            }
            if let Some(detail) = detail {
                text.push_str(&format!("message:  {}\n", detail.message));
            }
        }
    }
    text.push_str(&format!("gas used: {}\n", report.outcome.gas_used));
    text.push_str(&format!(
        "hash:     {} ({})\n",
        hex(&outcome_hash(report, algorithm)),
        algorithm.name()
    ));
    text
}

/// The JSON object `cvm estimate --json` prints.
pub fn estimate_json(estimate: &Estimate) -> Value {
    json!({
        "schedule_version": estimate.schedule_version,
        "total_gas": estimate.total_gas,
        "run_gas": estimate.run_gas,
        "peak_memory_bytes": estimate.peak_memory_bytes,
        "arena_bytes": estimate.arena_bytes,
        "nodes": estimate.nodes.iter().map(|node| json!({
            "name": node.name,
            "op": node.op,
            "gas": node.gas,
        })).collect::<Vec<_>>(),
    })
}

/// The table `cvm estimate` prints.
pub fn estimate_text(estimate: &Estimate) -> String {
    let width = estimate
        .nodes
        .iter()
        .map(|node| node.name.len())
        .max()
        .unwrap_or(4)
        .max(4);
    let mut text = format!("{:<width$}  {:<16}  {:>14}\n", "node", "op", "gas");
    for node in &estimate.nodes {
        text.push_str(&format!(
            "{:<width$}  {:<16}  {:>14}\n",
            node.name, node.op, node.gas
        ));
    }
    text.push_str(&format!("run gas:     {}\n", estimate.run_gas));
    text.push_str(&format!(
        "total gas:   {} (schedule v{})\n",
        estimate.total_gas, estimate.schedule_version
    ));
    text.push_str(&format!(
        "peak memory: {} bytes\n",
        estimate.peak_memory_bytes
    ));
    text.push_str(&format!(
        "arena:       {} bytes (node outputs, part of the peak)\n",
        estimate.arena_bytes
    ));
    text
}

/// The byte contract's sizes of a CVM model (what the `CVMAPIGet*` functions report), as JSON.
pub fn cvm_contract_json(contract: &Contract) -> Value {
    json!({
        "input_length": contract.input_length,
        "output_length": contract.output_length,
        "input_type_size": contract.input_type_size,
        "output_type_size": contract.output_type_size,
        "storage_size": contract.storage_size,
    })
}

/// The byte contract's sizes of a CVM model, one line each.
pub fn cvm_contract_text(contract: &Contract) -> String {
    format!(
        "cvm input:   {} bytes ({} per element)\ncvm output:  {} bytes ({} per element)\nstorage:     {} bytes\n",
        contract.input_length,
        contract.input_type_size,
        contract.output_length,
        contract.output_type_size,
        contract.storage_size
    )
}
