//! Node-local failures of the runtime: problems of this machine or of the request, never of the
//! model's deterministic execution. They are never hashed; a validator that meets one has not
//! judged the run, and must not vote on it.

/// A failure that says nothing about the model's consensus outcome.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// The wasm runtime failed: configuration, compilation, instantiation, a trap (an engine
    /// bug), fuel or memory exhaustion of the backstops.
    #[error("wasm engine failure: {0}")]
    Wasm(String),
    /// The request cannot be handed to the engine (a buffer above 4 GiB).
    #[error("{0}")]
    Request(String),
}
