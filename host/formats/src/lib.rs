//! Readers of the CVM engine's inputs: text models ([`text`]), `.npy` tensors ([`npy`]), and the
//! Cortex chain's CVM `symbol` + `params` pair with its byte contract and legacy gas ([`cvm`]).
//! Each turns files into canonical model bytes or input tensors; running them is the runtime's
//! job (`cvm-runtime`). [`model`] reads a model in any of its forms.
//!
//! A file that cannot be read is a [`ReadError`] (node-local, never hashed); a CVM model that
//! fails its load checks is a deterministic engine error, hashed like any rejection.

pub mod cvm;
pub mod error;
pub mod model;
pub mod npy;
pub mod text;

pub use error::{FileLimit, ReadError, quote, read_file};
