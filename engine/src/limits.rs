//! The engine's hard limits, checked during validation before anything runs.
//!
//! They keep every accepted model inside the wasm32 address space with room to spare, and make
//! validation time linear in the model size. `docs/limits.md` explains each number.

/// Most elements one tensor may have (2^26: 256 MiB of `i32`).
pub const MAX_TENSOR_ELEMENTS: u64 = 1 << 26;

/// Most dimensions a tensor may have.
pub const MAX_RANK: usize = 8;

/// Most nodes in a graph.
pub const MAX_NODES: usize = 1 << 16;

/// Most declared inputs, parameters or outputs of a graph (each).
pub const MAX_VALUES: usize = 1 << 16;

/// Most inputs one node may take.
pub const MAX_NODE_INPUTS: usize = 1 << 10;

/// Most attributes on one node.
pub const MAX_ATTRS: usize = 64;

/// Most entries in one list attribute.
pub const MAX_ATTR_LIST: usize = 64;

/// Longest name (input, parameter, node, output, attribute), in bytes.
pub const MAX_NAME_BYTES: usize = 256;

/// Most gas one run may cost (2^33): the static total of a model must not exceed it. It bounds
/// the work, hence the time, of any accepted model, and with it the wasm fuel a host grants. At
/// the gas calibration's medians of 0.57 to 0.79 ns of wasm time per gas, 2^33 gas is about 5 to
/// 7 s of a validator's time, and at most twice that for an operator at the edge of the
/// schedule's fairness band (`docs/limits.md`).
pub const MAX_GAS_PER_RUN: u64 = 1 << 33;

/// Most bytes of tensor data a run may hold at once (parameters, packed weights, inputs, the
/// arena of node outputs, and operators' working memory or the output copies), from the static
/// memory plan: 1 GiB.
pub const MAX_PEAK_MEMORY_BYTES: u64 = 1 << 30;
