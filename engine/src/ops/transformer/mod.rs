//! The engine's own operators for transformer models: products of two activations, softmax
//! over a row, layer normalization, requantization. They have no CVM or CINN counterpart; their
//! codes start at 400 and they appear only in canonical and text models (the CVM reader never
//! produces them).
//!
//! They share the conventions of docs/ops.md "Transformer operators": values are the int32 of
//! every tensor, a real scale is an integer multiplier and a shift (`m / 2^shift`), every
//! intermediate is exact in wide integers, a result is rounded once (halves away from zero) and
//! an output of declared precision is saturated to it only where the operator's semantics say
//! so.

pub mod activation;
pub mod batch_matmul;
mod exponential;
mod gelu_table;
pub mod layer_norm;
pub mod requantize;
pub mod softmax;
