//! The engine compiled for this machine, behind the same [`Verdict`]s as the wasm [`Model`]:
//! for tools and tests that compare the two builds, and for estimates. A node votes with the
//! wasm engine's outcome; the two are the same by construction (one `cvm-engine`, the same
//! bytes in), and every fixture checks it.
//!
//! [`Model`]: crate::Model

use cvm_engine::ValidatedModel;
use cvm_engine::exec::InputTensor;

use crate::trace::{Trace, TraceModel, TraceOptions};
use crate::{NodeError, Verdict};

/// A model decoded and validated natively under one gas schedule; `Send + Sync`, for any
/// number of runs from any number of threads.
#[derive(Debug)]
pub struct NativeModel {
    validated: ValidatedModel,
}

impl NativeModel {
    /// Decodes and validates canonical model bytes under gas schedule `schedule_version`.
    ///
    /// # Errors
    /// The engine's deterministic rejection (gas 0; `UnsupportedVersion` for a schedule the
    /// engine does not define), hashed as the wasm engine hashes it.
    pub fn load(model_bytes: &[u8], schedule_version: u32) -> Result<NativeModel, Box<Verdict>> {
        cvm_engine::load(model_bytes, schedule_version)
            .map(|validated| NativeModel { validated })
            .map_err(|report| Box::new(Verdict::new(*report)))
    }

    /// The validated model: its declared inputs and outputs, nodes and gas estimate.
    pub fn validated(&self) -> &ValidatedModel {
        &self.validated
    }

    /// Runs the model on `inputs` (one tensor per declared input, in order) with at most
    /// `gas_limit` gas. Wrong inputs and running out of gas are deterministic outcomes.
    pub fn run(&self, inputs: Vec<InputTensor>, gas_limit: u64) -> Verdict {
        Verdict::new(cvm_engine::run(&self.validated, inputs, gas_limit))
    }

    /// Runs the model as [`NativeModel::run`] does, with a trace of the run
    /// ([`crate::trace`]); `model` is the same bytes decoded for tracing. The verdict is the
    /// untraced run's.
    ///
    /// # Errors
    /// [`NodeError::Wasm`] only on an engine bug (a node the model does not have).
    pub fn trace(
        &self,
        model: &TraceModel,
        inputs: Vec<InputTensor>,
        gas_limit: u64,
        options: TraceOptions,
    ) -> Result<(Verdict, Trace), NodeError> {
        let (report, trace) =
            crate::trace::trace_native(&self.validated, model, inputs, gas_limit, options)?;
        Ok((Verdict::new(report), trace))
    }
}
