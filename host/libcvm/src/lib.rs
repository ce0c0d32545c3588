//! `libcvm_runtime.so`: the C library the Cortex chain's node loads with `dlopen` (its
//! `kernel/libcvm.go`), exporting the `CVMAPI*` functions of CortexFoundation/cvm-runtime's
//! `include/cvm/c_api.h` with their signatures and contract, computed by this engine's wasm
//! runtime. The exports and their safety arguments are in [`abi`]; the header is
//! `include/cvm_runtime.h`; `docs/embedding.md` documents the ABI and its hazards.
//!
//! This file is the safe core: a loaded model ([`Net`]) with the byte contract's sizes, and the
//! classes of the return codes. A model the deployed runtime rejects gets the code it returns
//! there: [`Status::Logic`] (1) for the checks it makes with `VERIFY`, [`Status::Runtime`] (2)
//! for those it makes with `CHECK` or `LOG(FATAL)` (cvm-compat §1) and for parameter parsing
//! errors ([`cvm::Class`], `docs/cvm.md`). Every other deterministic failure (an engine error of the
//! run, a wrong input length) is [`Status::Logic`]; a failure of this node (the wasm runtime, a
//! null pointer, an unknown device type, a panic) is [`Status::Runtime`].

mod abi;

use std::sync::{Mutex, PoisonError};

use cvm_engine::limits::MAX_GAS_PER_RUN;
use cvm_formats::cvm::{self, CvmMeta, CvmModel};
use runtime::{LoadError, NodeError, Runtime, RuntimeConfig, Verdict};

/// The gas schedule every model is loaded under. The C interface has no schedule argument, so
/// the library fixes one; it only decides which models validate (their gas must stay within
/// the engine's per-run cap), since the chain charges the legacy gas
/// (`CVMAPIGetGasFromModel`). A new engine schedule does not change it: a change here is a
/// consensus change of this library.
pub const SCHEDULE_VERSION: u32 = 1;

/// The return codes of `c_api.h`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub enum Status {
    /// `SUCCEED`.
    Succeed = 0,
    /// `ERROR_LOGIC`: the model or the input is at fault, on every node alike.
    Logic = 1,
    /// `ERROR_RUNTIME`: this node failed; the model was not judged.
    Runtime = 2,
}

impl From<NodeError> for Status {
    fn from(_: NodeError) -> Status {
        Status::Runtime
    }
}

/// A rejection of a CVM model or input: the deployed runtime's class (a `VERIFY` is a logic
/// error, a `CHECK`, `LOG(FATAL)` (cvm-compat §1) or parameter error (`docs/cvm.md`) a runtime
/// error).
impl From<cvm::Class> for Status {
    fn from(class: cvm::Class) -> Status {
        match class {
            cvm::Class::Logic => Status::Logic,
            cvm::Class::Runtime => Status::Runtime,
        }
    }
}

impl From<LoadError> for Status {
    fn from(error: LoadError) -> Status {
        match error {
            LoadError::Rejected(_) => Status::Logic,
            LoadError::Node(_) => Status::Runtime,
        }
    }
}

/// The class of a deterministic verdict: success, or a logic error whatever the error code
/// (out of gas included).
pub fn class(verdict: &Verdict) -> Status {
    match verdict.error_code() {
        None if verdict.outputs().is_some() => Status::Succeed,
        _ => Status::Logic,
    }
}

/// The process's runtime, compiled (or read from the module cache) by the first load that
/// succeeds in making it: a failure (memory pressure, say) is this node's runtime error for
/// that load, and the next load tries again. Clones share the compiled module.
fn shared_runtime() -> Result<Runtime, Status> {
    static RUNTIME: Mutex<Option<Runtime>> = Mutex::new(None);
    // A panic while the lock was held (caught at the boundary) leaves the state as it was.
    let mut shared = RUNTIME.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(runtime) = shared.as_ref() {
        return Ok(runtime.clone());
    }
    let config = match runtime::wasm::default_cache_dir() {
        Some(dir) => RuntimeConfig::with_cache_dir(dir),
        None => RuntimeConfig::compile_in_process(),
    };
    let runtime = Runtime::new(&config).map_err(|_| Status::Runtime)?;
    *shared = Some(runtime.clone());
    Ok(runtime)
}

/// A model loaded through `CVMAPILoadModel`: what `CVMAPIInference` runs and the getters report.
pub struct Net {
    model: runtime::Model,
    meta: CvmMeta,
}

// The C contract lets several threads call on one handle at once (`abi.rs` shares `&Net`
// across them): a field that is not `Sync` must fail the build, not the node.
const _: () = {
    const fn shared_across_threads<T: Send + Sync>() {}
    shared_across_threads::<Net>();
};

/// Device types `c_api.cc` accepts: 0 (CPU), 1 (GPU), 2 (FORMAL). All run the same engine.
const DEVICE_TYPES: [i32; 3] = [0, 1, 2];

impl Net {
    /// Reads and checks a CVM model (`symbol` JSON and `params` bytes) and loads it.
    ///
    /// # Errors
    /// The deployed runtime's class when the model fails a load check ([`cvm::Class`]),
    /// [`Status::Logic`] when engine validation rejects it; [`Status::Runtime`] for a device type
    /// `c_api.cc` does not know, or a failure of the runtime.
    pub fn load(graph: &[u8], params: &[u8], device_type: i32) -> Result<Net, Status> {
        if !DEVICE_TYPES.contains(&device_type) {
            return Err(Status::Runtime);
        }
        let CvmModel { model, meta } =
            cvm::import(graph, params).map_err(|rejection| Status::from(rejection.class))?;
        let model = shared_runtime()?.load(&model.encode(), SCHEDULE_VERSION)?;
        Ok(Net { model, meta })
    }

    /// What the byte contract and legacy gas need.
    pub fn meta(&self) -> &CvmMeta {
        &self.meta
    }

    /// `CVMAPIInference` with `input` (int8, or int32 little endian): the output bytes, exactly
    /// [`cvm::Contract::output_length`] of them.
    ///
    /// # Errors
    /// [`Status::Logic`] for a wrong input length or an engine error of the run;
    /// [`Status::Runtime`] when the runtime fails.
    pub fn infer(&self, input: &[u8]) -> Result<Vec<u8>, Status> {
        if input.len() as u64 != self.meta.contract.input_length {
            return Err(Status::Logic);
        }
        let tensor = cvm::decode_input(&self.meta, input, false).map_err(|_| Status::Logic)?;
        let verdict = self.model.run(&[tensor], MAX_GAS_PER_RUN)?;
        let outputs = match class(&verdict) {
            Status::Succeed => verdict.outputs().unwrap_or_default(),
            status => return Err(status),
        };
        let bytes =
            cvm::encode_output(self.meta.postprocess, outputs, false).map_err(|_| Status::Logic)?;
        if bytes.len() as u64 != self.meta.contract.output_length {
            // The sizes computed at load disagree with the run: never write past the caller's
            // buffer, and call it what it is, a fault of this library.
            return Err(Status::Runtime);
        }
        Ok(bytes)
    }
}

/// `CVMAPIGetGasFromGraphFile`: the legacy gas of a graph JSON, after the checks the deployed
/// runtime makes when it sets a graph up (`cvm::check_graph`).
///
/// # Errors
/// The deployed runtime's class when the graph fails a check; [`Status::Logic`] when its gas
/// exceeds the deployed limits.
pub fn gas_from_graph(graph: &[u8]) -> Result<u64, Status> {
    cvm::graph_gas(graph).map_err(|rejection| Status::from(rejection.class))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(model: &str, file: &str) -> Vec<u8> {
        let path = format!(
            "{}/../../fixtures/models/{model}/{file}",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::read(&path).unwrap_or_else(|error| panic!("{path}: {error}"))
    }

    #[test]
    fn the_schedule_is_one_the_engine_defines() {
        assert!(cvm_engine::schedule_by_version(SCHEDULE_VERSION).is_ok());
    }

    #[test]
    fn error_classes_of_loading() {
        let (symbol, params) = (
            fixture("cvm_dense", "symbol"),
            fixture("cvm_dense", "params"),
        );
        let loaded = Net::load(&symbol, &params, 0).map(|net| net.meta().legacy_gas.clone());
        assert_eq!(loaded, Ok(Ok(185)));
        // The deployed runtime's classes: its JSON reader stops at a syntax error with a
        // `CHECK` (2), an unknown operator is a `CHECK` (2), a graph without heads and a params
        // file cut inside its last array (undefined there, rejected here) are logic errors (1).
        assert_eq!(
            Net::load(b"{\"nodes\": [", &params, 0).err(),
            Some(Status::Runtime)
        );
        let text = String::from_utf8(symbol.clone()).unwrap();
        let heads = "\"heads\": [\n  [\n   5,\n   0,\n   0\n  ]\n ]";
        let headless = text.replacen(heads, "\"heads\": []", 1);
        assert_ne!(headless, text);
        assert_eq!(
            Net::load(&symbol, &params[..params.len() - 1], 0).err(),
            Some(Status::Logic)
        );
        let unknown_op = text.replacen("\"dense\"", "\"no_such_op\"", 1);
        assert_ne!(unknown_op, text);
        assert_eq!(
            Net::load(unknown_op.as_bytes(), &params, 0).err(),
            Some(Status::Runtime)
        );
        // Every device type of c_api.cc runs the same engine; others are the node's problem.
        for device_type in DEVICE_TYPES {
            assert!(Net::load(&symbol, &params, device_type).is_ok());
        }
        assert_eq!(Net::load(&symbol, &params, 7).err(), Some(Status::Runtime));
        assert_eq!(gas_from_graph(&symbol), Ok(185));
        assert_eq!(gas_from_graph(b"[]"), Err(Status::Runtime));
        assert_eq!(
            Net::load(headless.as_bytes(), &params, 0).err(),
            Some(Status::Logic)
        );
    }

    #[test]
    fn error_classes_of_running() {
        let net = Net::load(
            &fixture("digits", "symbol"),
            &fixture("digits", "params"),
            0,
        )
        .unwrap_or_else(|status| panic!("digits: {status:?}"));
        let input = fixture("digits", "input_2.cvm");
        // The deployed argmax compares the logits truncated to 8 bits (docs/cvm.md): 6 here.
        assert_eq!(net.infer(&input), Ok(vec![6, 0, 0, 0]));
        // A wrong input length.
        assert_eq!(net.infer(&input[1..]), Err(Status::Logic));
        // Out of gas is a deterministic error of the run: a logic error. (Through the C
        // interface a run has the engine's whole per-run gas cap, which validation already
        // bounds every model by, so it cannot run out there.)
        let tensor = cvm::decode_input(net.meta(), &input, false).unwrap();
        let starved = net.model.run(&[tensor], 1000).unwrap();
        assert_eq!(starved.error_code(), Some(cvm_engine::ErrorCode::OutOfGas));
        assert_eq!(class(&starved), Status::Logic);
    }
}
