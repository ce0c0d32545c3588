//! The engine inside wasmtime, in process: a model loaded once serves many runs; corrupted
//! models are handled identically by both engines without a trap; the fuel every fixture and
//! generated graph burns stays under a tenth of what the backstop grants for its bytes and gas.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test helpers fail loudly

use cvm_cli::runner::{EngineKind, encode_inputs, execute};
use cvm_engine::exec::InputTensor;
use cvm_engine::gas::Schedule;
use cvm_engine::{ErrorCode, Model};
use cvm_runtime::wasm::{FUEL_BASE, FUEL_PER_GAS, WasmEngine, fuel_for};
use cvm_testgen::graphgen::{ByteSource, generate};

/// The gas schedule of the session tests (the fuel test checks every schedule).
const SCHEDULE: u32 = 1;

fn cnn() -> Vec<u8> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/models/cnn");
    let text = std::fs::read_to_string(root.join("model.json")).expect("model");
    cvm_formats::text::parse_text_model(&text, &root, "cnn")
        .expect("parses")
        .encode()
}

fn image(seed: i32) -> InputTensor {
    InputTensor {
        shape: vec![1, 1, 8, 8],
        data: (0..64).map(|i| (i * 37 + seed * 11) % 255 - 127).collect(),
    }
}

#[test]
fn a_loaded_model_serves_many_runs() {
    let model = cnn();
    let wasm = WasmEngine::new().expect("engine");
    let mut session = wasm.session().expect("session");
    assert!(
        session.load(&model, SCHEDULE).expect("load").is_none(),
        "the CNN loads"
    );
    for seed in 0..5 {
        let inputs = [image(seed)];
        let in_session = session.run(&encode_inputs(&inputs), u64::MAX).expect("run");
        let native = execute(
            EngineKind::Native,
            None,
            &model,
            &inputs,
            u64::MAX,
            SCHEDULE,
        )
        .expect("native");
        assert_eq!(in_session, native, "seed {seed}");
        assert!(in_session.error_code().is_none());
    }
    // A failing run does not disturb the loaded model.
    let wrong = [InputTensor {
        shape: vec![1, 64],
        data: vec![0; 64],
    }];
    let report = session.run(&encode_inputs(&wrong), u64::MAX).expect("run");
    assert_eq!(report.error_code(), Some(ErrorCode::InputShape));
    // Request bytes that encode no inputs (one byte too many, one too few): the report the
    // native engine gives, not a trap.
    let validated = cvm_engine::load(&model, SCHEDULE).expect("loads natively");
    let encoded = encode_inputs(&[image(0)]);
    for malformed in [[encoded.as_slice(), &[0]].concat(), encoded[1..].to_vec()] {
        let report = session
            .run(&malformed, u64::MAX)
            .expect("a report, not a trap");
        assert_eq!(report.error_code(), Some(ErrorCode::MalformedInput));
        assert_eq!(report.outcome.gas_used, 0);
        assert_eq!(
            report,
            cvm_engine::run_encoded(&validated, &malformed, u64::MAX)
        );
    }
    let again = session
        .run(&encode_inputs(&[image(0)]), u64::MAX)
        .expect("run");
    assert!(again.error_code().is_none());
}

/// The fuel a call may burn, divided by the tenfold safety margin.
fn tenth_of_budget(bytes: usize, gas: u64) -> u64 {
    fuel_for(bytes, gas) / 10
}

/// Loads `model` under gas schedule `schedule` and runs it in a fresh session; checks both
/// calls burn under a tenth of the fuel the backstop would grant for the bytes and for exactly
/// the gas the run used. Returns the fuel burned per unit of gas by the run.
fn check_fuel(
    wasm: &WasmEngine,
    name: &str,
    model: &[u8],
    inputs: &[InputTensor],
    schedule: u32,
) -> Option<u64> {
    let mut session = wasm.session().expect("session");
    if session.load(model, schedule).expect("load").is_some() {
        return None;
    }
    let load_fuel = session.fuel_used().expect("fuel");
    assert!(
        load_fuel <= tenth_of_budget(model.len(), 0),
        "{name}: load burned {load_fuel}"
    );
    let encoded = encode_inputs(inputs);
    let report = session.run(&encoded, u64::MAX).expect("run");
    let run_fuel = session.fuel_used().expect("fuel");
    let gas = report.outcome.gas_used;
    assert!(
        run_fuel <= tenth_of_budget(encoded.len(), gas),
        "{name}: run burned {run_fuel} fuel for {gas} gas and {} input bytes",
        encoded.len()
    );
    Some(run_fuel.saturating_sub(FUEL_BASE.min(run_fuel)) / gas.max(1))
}

#[test]
fn fuel_stays_within_a_tenth_of_its_budget() {
    let wasm = WasmEngine::new().expect("engine");
    // Under every schedule: a schedule whose gas were far cheaper in fuel than another's would
    // let a legitimate run reach the backstop.
    for schedule in Schedule::ALL.map(|s| s.version) {
        let mut worst = (0u64, String::new());
        let mut checked = 0;
        for case in cvm_fixtures::all_cases().expect("fixtures") {
            let prepared = cvm_cli::audit::prepare(&case).expect("case");
            let Ok((bytes, _)) = &prepared.model else {
                continue;
            };
            if let Some(per_gas) = check_fuel(&wasm, &case.name, bytes, &prepared.inputs, schedule)
            {
                checked += 1;
                if per_gas > worst.0 {
                    worst = (per_gas, case.name.clone());
                }
            }
        }
        for seed in 0u64..100 {
            let generated = generate(&mut ByteSource::new(&seed.to_le_bytes()), 10);
            if let Some(per_gas) = check_fuel(
                &wasm,
                &format!("generated {seed}"),
                &generated.model.encode(),
                &generated.inputs,
                schedule,
            ) {
                checked += 1;
                if per_gas > worst.0 {
                    worst = (per_gas, format!("generated graph {seed}"));
                }
            }
        }
        eprintln!(
            "schedule {schedule}, {checked} models: at most {} fuel per gas beyond the base ({}), against {FUEL_PER_GAS} granted",
            worst.0, worst.1
        );
        assert!(checked > 200, "only {checked} models were checked");
    }
}

#[test]
fn corrupted_models_are_handled_identically() {
    let bytes = cnn();
    let wasm = WasmEngine::new().expect("engine");
    let inputs = [image(2)];
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut rejected = 0;
    for round in 0..300 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let mut corrupt = bytes.clone();
        if round % 3 == 0 {
            corrupt.truncate((state % bytes.len() as u64) as usize);
        } else {
            let bit = (state % (bytes.len() as u64 * 8)) as usize;
            corrupt[bit / 8] ^= 1 << (bit % 8);
        }
        let native = execute(
            EngineKind::Native,
            None,
            &corrupt,
            &inputs,
            1 << 40,
            cvm_engine::gas::Schedule::NEWEST.version,
        )
        .expect("native never fails");
        let in_wasm = execute(
            EngineKind::Wasm,
            Some(&wasm),
            &corrupt,
            &inputs,
            1 << 40,
            cvm_engine::gas::Schedule::NEWEST.version,
        )
        .unwrap_or_else(|err| panic!("round {round}: wasm failed: {err}"));
        assert_eq!(native, in_wasm, "round {round}");
        if native.error_code().is_some() {
            rejected += 1;
        }
        if Model::decode(&corrupt).is_err() {
            assert!(
                matches!(
                    native.error_code(),
                    Some(ErrorCode::MalformedModel | ErrorCode::UnsupportedVersion)
                ),
                "round {round}: undecodable bytes gave {:?}",
                native.error_code()
            );
        }
    }
    assert!(
        rejected > 100,
        "only {rejected} of 300 corruptions were rejected"
    );
}

/// The run's memory cap is derived from the model's plan, but an input far larger than the plan
/// (here 2^24 values, 64 MiB, for a model planned at a few kilobytes) is still the deterministic
/// `InputShape` outcome in wasm, as natively, never a memory failure of the node; and a session
/// serves a correct run afterwards, its memory capped again from the plan.
#[test]
fn an_input_far_beyond_the_plan_is_an_outcome_not_a_memory_failure() {
    let wasm = WasmEngine::new().unwrap();
    let mut session = wasm.session().unwrap();
    assert!(session.load(&cnn(), SCHEDULE).unwrap().is_none());
    let planned = session.planned_bytes();
    assert!(planned > 0 && planned < 1 << 20, "{planned}");
    let huge = InputTensor {
        shape: vec![1, 1, 4096, 4096],
        data: vec![1; 1 << 24],
    };
    let in_wasm = session
        .run_inputs(std::slice::from_ref(&huge), u64::MAX)
        .expect("an outcome");
    let native = execute(
        EngineKind::Native,
        None,
        &cnn(),
        std::slice::from_ref(&huge),
        u64::MAX,
        SCHEDULE,
    )
    .unwrap();
    assert_eq!(
        in_wasm.error_code(),
        Some(ErrorCode::InputShape),
        "{in_wasm:?}"
    );
    assert_eq!(in_wasm, native);
    let after = session.run_inputs(&[image(3)], u64::MAX).unwrap();
    assert_eq!(after.error_code(), None, "{after:?}");
    // The same input on a fresh instance after a correct run, which left the memory capped from
    // the plan: the request is placed under a cap raised for it, so the outcome does not depend
    // on what ran before (through either way of placing a request).
    for encoded in [false, true] {
        let mut session = wasm.session().unwrap();
        assert!(session.load(&cnn(), SCHEDULE).unwrap().is_none());
        let correct = session.run_inputs(&[image(3)], u64::MAX).unwrap();
        assert_eq!(correct, after);
        let again = if encoded {
            session.run(&encode_inputs(std::slice::from_ref(&huge)), u64::MAX)
        } else {
            session.run_inputs(std::slice::from_ref(&huge), u64::MAX)
        };
        assert_eq!(again.expect("an outcome"), native);
    }
}
