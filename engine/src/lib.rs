//! The CVM inference engine core: deterministic integer inference of neural-network graphs.
//!
//! `#![no_std]` + `alloc`, integer arithmetic only. The same code runs natively and as
//! `engine.wasm` inside a host (see the `cvm-runtime` crate). A request flows:
//! bytes → [`Model::decode`] → [`validate::validate`] → [`ValidatedModel`] (types, gas under
//! the schedule version the caller names, which [`load`] requires) → [`exec::run`] with inputs and a gas limit →
//! [`Report`], whose [`Outcome`] is the part every node must agree on.
//!
//! Code map: [`model`] (canonical format), [`attrs`] (attribute schemas), [`ops`] (the operator
//! table and one file per family), [`validate`], [`plan`] (where node outputs live in a run's
//! arena), [`exec`], [`trace`] (node outputs for a host's trace, one node run alone), [`outcome`], [`error`] (frozen codes), [`tensor`], [`limits`], [`kernels`]
//! (vectorised conv2d, dense and pooling), and `abi` (the wasm32 exports). `unsafe` appears
//! only in `abi` and in the vector loads and stores of `kernels::simd`.
#![no_std]

extern crate alloc;

pub mod attrs;
pub mod error;
pub mod exec;
pub mod fixed;
pub mod kernels;
pub mod limits;
pub mod model;
pub mod ops;
pub mod outcome;
pub mod plan;
pub mod tensor;
pub mod trace;
pub mod validate;

// The wasm exports take raw pointers handed over by the host.
#[cfg(target_arch = "wasm32")]
#[allow(unsafe_code)]
mod abi;

use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;
use borsh::{BorshDeserialize, BorshSerialize};

pub use cvm_gas as gas;

// `format!` for the `fail!` macro, reachable from crates without `alloc` in scope.
#[doc(hidden)]
pub use alloc::format as __format;
pub use error::{Error, ErrorCode, Result};
pub use exec::{InputTensor, run};
pub use model::{FORMAT_VERSION, MAGIC, Model};
pub use outcome::{Outcome, Report, Status};
pub use tensor::{Shape, Tensor, TensorType};
pub use validate::ValidatedModel;

/// Gas and memory of a model, known before running.
#[derive(Clone, Debug, PartialEq, Eq, BorshSerialize, BorshDeserialize)]
pub struct Estimate {
    /// Gas schedule version the figures use.
    pub schedule_version: u32,
    /// Per node: name, operator and gas.
    pub nodes: Vec<NodeEstimate>,
    /// Gas of a complete run: `run_gas` plus every node's gas.
    pub total_gas: u64,
    /// Gas a run costs beyond its nodes ([`ValidatedModel::run_gas`]).
    pub run_gas: u64,
    /// Peak bytes of tensor data a run holds ([`ValidatedModel::peak_memory_bytes`]).
    pub peak_memory_bytes: u64,
    /// Bytes of the arena holding every node output ([`ValidatedModel::arena_bytes`]).
    pub arena_bytes: u64,
}

/// Gas of one node.
#[derive(Clone, Debug, PartialEq, Eq, BorshSerialize, BorshDeserialize)]
pub struct NodeEstimate {
    /// Node name.
    pub name: String,
    /// Operator name.
    pub op: String,
    /// Gas charged before it runs.
    pub gas: u64,
}

impl ValidatedModel {
    /// The static gas and memory figures of the model.
    pub fn estimate(&self) -> Estimate {
        Estimate {
            schedule_version: self.schedule.version,
            nodes: self
                .nodes
                .iter()
                .map(|node| NodeEstimate {
                    name: node.name.clone(),
                    op: String::from(node.op.name),
                    gas: node.gas,
                })
                .collect(),
            total_gas: self.total_gas,
            run_gas: self.run_gas,
            peak_memory_bytes: self.peak_memory_bytes,
            arena_bytes: self.arena_bytes,
        }
    }
}

/// Loads canonical model bytes under gas schedule `version`: decode and validate, pricing every
/// node with that schedule. There is no default: a validator replaying a block passes the
/// version the block was charged under. A load failure, an undefined version included, is a
/// [`Report`] with gas 0.
///
/// # Errors
/// The failure report, ready to be hashed like any outcome: [`ErrorCode::UnsupportedVersion`]
/// when this engine defines no schedule `version` (checked before the bytes are decoded), else
/// any decoding or validation error.
pub fn load(bytes: &[u8], version: u32) -> core::result::Result<ValidatedModel, Box<Report>> {
    schedule_by_version(version)
        .and_then(|schedule| ValidatedModel::from_bytes(bytes, schedule))
        .map_err(|error| Box::new(Report::failure(error, 0)))
}

/// The gas schedule with version `version`, among those this engine defines
/// ([`gas::Schedule::ALL`]).
///
/// # Errors
/// [`ErrorCode::UnsupportedVersion`] when there is none; the message lists the defined versions.
pub fn schedule_by_version(version: u32) -> Result<&'static gas::Schedule> {
    gas::Schedule::by_version(version).ok_or_else(|| {
        fail!(
            UnsupportedVersion,
            "gas schedule version {version} is not defined; this engine defines {}",
            defined_schedule_versions()
        )
    })
}

/// "versions 1 and 2" (or "version 1", "versions 1, 2 and 3"): the versions of
/// [`gas::Schedule::ALL`], for messages.
pub fn defined_schedule_versions() -> String {
    let versions: Vec<String> = gas::Schedule::ALL
        .iter()
        .map(|schedule| alloc::format!("{}", schedule.version))
        .collect();
    match versions.split_last() {
        None => String::from("no versions"),
        Some((only, [])) => alloc::format!("version {only}"),
        Some((last, rest)) => alloc::format!("versions {} and {last}", rest.join(", ")),
    }
}

/// Runs with inputs given as borsh bytes of `Vec<InputTensor>` (the ABI's encoding).
pub fn run_encoded(model: &ValidatedModel, input_bytes: &[u8], gas_limit: u64) -> Report {
    match decode_inputs(input_bytes) {
        Ok(inputs) => run(model, inputs, gas_limit),
        Err(error) => Report::failure(error, 0),
    }
}

/// Decodes inputs given as borsh bytes of `Vec<InputTensor>` (the ABI's encoding), so that a
/// caller can free the bytes before running.
///
/// # Errors
/// [`ErrorCode::MalformedInput`] when the bytes are not such an encoding; the message says
/// what is wrong and at which byte.
pub fn decode_inputs(input_bytes: &[u8]) -> Result<Vec<InputTensor>> {
    if let Some(inputs) = exec::decode_inputs(input_bytes) {
        return Ok(inputs);
    }
    // Not a valid encoding: borsh names what is wrong, the reader where.
    model::decode_borsh::<Vec<InputTensor>>(input_bytes, 0)
        .map_err(|err| fail!(MalformedInput, "input bytes cannot be decoded: {err}"))
}
