//! Auditing determinism: running fixture cases on both engines and comparing their outcome
//! hashes with the committed golden hashes (`cvm audit`). Each case runs under the gas schedule
//! it was blessed under (its `"schedule"`, 1 when absent); `cvm audit --schedule N` runs every
//! case under N instead, and then a case blessed under another schedule has no golden hash and
//! only the engines' agreement is checked. The fixture test suite uses the same case
//! preparation.

use std::path::Path;
use std::time::{Duration, Instant};

use cvm_engine::exec::InputTensor;
use cvm_engine::{Model, Report};
use cvm_fixtures::{Case, InputSource, ModelSource as CaseModelSource};
use serde_json::Value;

use crate::inputs::read_input;
use crate::runner::{EngineKind, ModelSource, execute, load_model};
use cvm_formats::text;
use cvm_runtime::hash::{HashAlgorithm, hex, outcome_hash};
use cvm_runtime::wasm::WasmEngine;

/// A case ready to run: canonical model bytes (or the deterministic rejection of a CVM model),
/// inputs in declared order, gas limit and gas schedule version.
#[derive(Debug)]
pub struct PreparedCase {
    /// Canonical bytes and decoded model, or the report of a CVM model failing its load checks.
    pub model: Result<(Vec<u8>, Option<Model>), Box<Report>>,
    /// Inputs in the model's declared order, then any the model does not declare.
    pub inputs: Vec<InputTensor>,
    /// Gas limit of the run.
    pub gas_limit: u64,
    /// The gas schedule version both engines validate under: the case's `"schedule"` (1 when
    /// the case names none, see [`cvm_fixtures::DEFAULT_SCHEDULE`]).
    pub schedule: u32,
}

/// Turns a fixture case into a [`PreparedCase`].
///
/// # Errors
/// A message when the case's files cannot be read or its text model or inputs are malformed.
pub fn prepare(case: &Case) -> Result<PreparedCase, String> {
    let model = match &case.model {
        CaseModelSource::Inline(value) => {
            let dir = case.path.parent().unwrap_or(Path::new("."));
            let model = text::from_json(value, dir)?;
            Ok((model.encode(), Some(model)))
        }
        CaseModelSource::File(path) => {
            let loaded = load_model(&ModelSource::from_path(path)).map_err(|e| e.to_string())?;
            match loaded.rejected {
                Some(report) => Err(report),
                None => Ok((loaded.bytes, loaded.model)),
            }
        }
    };
    let declared: Vec<&str> = match &model {
        Ok((_, Some(model))) => model.inputs.iter().map(|i| i.name.as_str()).collect(),
        _ => Vec::new(),
    };
    let mut ordered: Vec<&(String, InputSource)> = Vec::new();
    for name in &declared {
        ordered.extend(case.inputs.iter().filter(|(given, _)| given == name));
    }
    ordered.extend(
        case.inputs
            .iter()
            .filter(|(given, _)| !declared.contains(&given.as_str())),
    );
    let inputs = ordered
        .into_iter()
        .map(|(_, source)| input_tensor(source))
        .collect::<Result<_, _>>()?;
    Ok(PreparedCase {
        model,
        inputs,
        gas_limit: case
            .gas_limit
            .unwrap_or(cvm_engine::limits::MAX_GAS_PER_RUN),
        schedule: case.schedule,
    })
}

fn input_tensor(source: &InputSource) -> Result<InputTensor, String> {
    match source {
        InputSource::Inline { shape, data } => Ok(InputTensor {
            shape: shape.clone(),
            data: data
                .iter()
                .map(|&v| i32::try_from(v).map_err(|_| format!("input value {v} is not an int32")))
                .collect::<Result<_, _>>()?,
        }),
        InputSource::File(path) => read_input(path).map_err(|e| e.to_string()),
    }
}

impl PreparedCase {
    /// Runs the case on `engine` under its gas schedule ([`PreparedCase::schedule`]).
    ///
    /// # Errors
    /// A node-local failure of the wasm runtime, as text.
    pub fn run(&self, engine: EngineKind, wasm: Option<&WasmEngine>) -> Result<Report, String> {
        self.run_under(engine, wasm, self.schedule)
    }

    /// Runs the case on `engine` under gas schedule `schedule`, whatever the case names.
    ///
    /// # Errors
    /// A node-local failure of the wasm runtime, as text.
    pub fn run_under(
        &self,
        engine: EngineKind,
        wasm: Option<&WasmEngine>,
        schedule: u32,
    ) -> Result<Report, String> {
        match &self.model {
            Ok((bytes, _)) => execute(engine, wasm, bytes, &self.inputs, self.gas_limit, schedule)
                .map_err(|e| e.to_string()),
            Err(rejected) => Ok((**rejected).clone()),
        }
    }
}

/// Which engines an audit runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engines {
    /// Native and wasm.
    Both,
    /// Native only.
    Native,
    /// Wasm only.
    Wasm,
}

/// The audit of one case.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditRow {
    /// Case name (`ops/dense/basic`).
    pub name: String,
    /// Outcome hash of the native run (hex), or the failure.
    pub native: Option<Result<String, String>>,
    /// Outcome hash of the wasm run (hex), or the failure.
    pub wasm: Option<Result<String, String>>,
    /// The committed golden hash, if the case has one and it applies: the case ran under the
    /// schedule it was blessed under.
    pub golden: Option<String>,
    /// The gas schedule version the case ran under.
    pub schedule: u32,
    /// The gas schedule version the case was blessed under (its `"schedule"`, 1 when absent).
    pub blessed_schedule: u32,
    /// Gas used (of the first engine that ran).
    pub gas_used: Option<u64>,
    /// Wall time of the runs.
    pub time: Duration,
}

impl AuditRow {
    /// Whether the golden hash applies: the case ran under the schedule it was blessed under.
    pub fn golden_applies(&self) -> bool {
        self.schedule == self.blessed_schedule
    }

    /// Whether the row passes. Under the case's own schedule: every engine that ran produced
    /// the golden hash. Under another schedule (`cvm audit --schedule`), where no golden hash
    /// exists: every engine that ran produced a hash, and they are equal.
    pub fn passed(&self) -> bool {
        let mut results = [&self.native, &self.wasm].into_iter().flatten();
        if !self.golden_applies() {
            let hashes: Option<Vec<&String>> = results.map(|result| result.as_ref().ok()).collect();
            return hashes.is_some_and(|hashes| hashes.windows(2).all(|pair| pair[0] == pair[1]));
        }
        let Some(golden) = &self.golden else {
            return false;
        };
        results.all(|result| result.as_ref().is_ok_and(|hash| hash == golden))
    }

    /// The row as a JSON object.
    pub fn to_json(&self) -> Value {
        let engine = |result: &Option<Result<String, String>>| match result {
            None => Value::Null,
            Some(Ok(hash)) => Value::String(hash.clone()),
            Some(Err(message)) => serde_json::json!({ "error": message }),
        };
        serde_json::json!({
            "fixture": self.name,
            "native": engine(&self.native),
            "wasm": engine(&self.wasm),
            "golden": self.golden,
            "schedule": self.schedule,
            "blessed_schedule": self.blessed_schedule,
            "gas_used": self.gas_used,
            "time_us": u64::try_from(self.time.as_micros()).unwrap_or(u64::MAX),
            "pass": self.passed(),
        })
    }
}

/// Audits one case, under its own gas schedule, or under `schedule` when given (then the
/// golden hash applies only if the case was blessed under that schedule).
pub fn audit_case(
    case: &Case,
    engines: Engines,
    wasm: Option<&WasmEngine>,
    schedule: Option<u32>,
) -> AuditRow {
    let schedule = schedule.unwrap_or(case.schedule);
    let golden = case
        .expected
        .as_ref()
        .filter(|_| schedule == case.schedule)
        .and_then(|expected| expected.get("hash"))
        .and_then(Value::as_str)
        .map(str::to_string);
    let start = Instant::now();
    let mut row = AuditRow {
        name: case.name.clone(),
        native: None,
        wasm: None,
        golden,
        schedule,
        blessed_schedule: case.schedule,
        gas_used: None,
        time: Duration::ZERO,
    };
    let prepared = match prepare(case) {
        Ok(prepared) => prepared,
        Err(message) => {
            row.native = Some(Err(message));
            row.time = start.elapsed();
            return row;
        }
    };
    let mut hash_of = |engine: EngineKind| -> Result<String, String> {
        let report = prepared.run_under(engine, wasm, schedule)?;
        row.gas_used.get_or_insert(report.outcome.gas_used);
        Ok(hex(&outcome_hash(&report, HashAlgorithm::Sha3_256)))
    };
    let native =
        matches!(engines, Engines::Both | Engines::Native).then(|| hash_of(EngineKind::Native));
    let in_wasm =
        matches!(engines, Engines::Both | Engines::Wasm).then(|| hash_of(EngineKind::Wasm));
    row.native = native;
    row.wasm = in_wasm;
    row.time = start.elapsed();
    row
}
