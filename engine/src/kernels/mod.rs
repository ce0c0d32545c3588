//! Vectorised integer kernels behind the heaviest operators, written once over a small 128-bit
//! vector trait ([`simd::Simd`]) with three backends: wasm SIMD128 (the consensus build),
//! x86-64 SSE2 (the native build) and portable scalar lanes (other targets, and the reference
//! the tests compare the others with).
//!
//! Every kernel computes exactly the formula of its operator; `engine/tests/kernels.rs` checks
//! each one bit for bit against a plain implementation of the formula, on randomized shapes
//! with odd sizes and tails, under both the native and the portable backend. Each kernel states
//! the precision bound it relies on.

pub mod conv;
pub mod gemm;
pub mod pool;
pub mod simd;
