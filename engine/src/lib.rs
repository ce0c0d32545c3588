//! The CVM inference engine core: deterministic integer inference of neural-network graphs.
//!
//! `#![no_std]` + `alloc`, integer arithmetic only. The same code runs natively and as
//! `engine.wasm` inside a host (see the `cvm-host` crate). A request flows:
//! bytes → [`Model::decode`] → [`validate::validate`] → [`ValidatedModel`] (types, gas and the
//! memory plan known) → [`exec::run`] with inputs and a gas limit → [`Report`], whose
//! [`Outcome`] is the part every node must agree on.
//!
//! Code map: [`model`] (canonical format), [`attrs`] (attribute schemas), [`ops`] (the operator
//! table and one file per family), [`validate`], [`exec`], [`outcome`], [`error`] (frozen codes),
//! [`tensor`], [`limits`], [`kernels`] (vectorised conv2d, dense and pooling), and `abi` (the
//! wasm32 exports). `unsafe` appears only in `abi` and in the vector loads and stores of
//! `kernels::simd`.
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
pub mod tensor;
pub mod validate;

// The wasm exports take raw pointers handed over by the host.
#[cfg(target_arch = "wasm32")]
#[allow(unsafe_code)]
mod abi;

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
    /// Gas of a complete run.
    pub total_gas: u64,
    /// Peak bytes of tensor data alive during a run.
    pub peak_memory_bytes: u64,
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
            peak_memory_bytes: self.peak_memory_bytes,
        }
    }
}

/// Loads canonical model bytes: decode and validate. A load failure is a [`Report`] with gas 0.
///
/// # Errors
/// The failure report, ready to be hashed like any outcome.
pub fn load(bytes: &[u8]) -> core::result::Result<ValidatedModel, alloc::boxed::Box<Report>> {
    ValidatedModel::from_bytes(bytes)
        .map_err(|error| alloc::boxed::Box::new(Report::failure(error, 0)))
}

/// Runs with inputs given as borsh bytes of `Vec<InputTensor>` (the ABI's encoding).
pub fn run_encoded(model: &ValidatedModel, input_bytes: &[u8], gas_limit: u64) -> Report {
    match borsh::from_slice::<Vec<InputTensor>>(input_bytes) {
        Ok(inputs) => run(model, inputs, gas_limit),
        Err(err) => Report::failure(
            fail!(MalformedInput, "input bytes cannot be decoded: {err}"),
            0,
        ),
    }
}
