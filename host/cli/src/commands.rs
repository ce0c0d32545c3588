//! The commands' implementations, one module per command or group of commands.

pub(crate) mod audit;
pub(crate) mod batch;
pub(crate) mod generate;
pub(crate) mod model;
pub(crate) mod onnx;
pub(crate) mod run;
pub(crate) mod trace;
