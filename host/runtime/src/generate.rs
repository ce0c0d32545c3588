//! Greedy decoding of a causal language model: N steps, each a full forward pass of the model
//! over the last T tokens (no state is kept between runs), the next token the argmax of the
//! logits at the last real position, and a hash chain over the steps' outcomes so that two
//! nodes compare a whole generation with one value (layout in `docs/host.md`, "Generating
//! text").
//!
//! The model takes one input of token ids of shape (T) or (1, T) and gives, as its first
//! output, per-token logits of shape (…, T, V) (leading dimensions 1). A window shorter than T
//! (a short prompt) is padded on the right with token 0: in a causal model no position before
//! the padding sees it, so the logits at the last real position are those of the unpadded
//! sequence.

use cvm_engine::exec::InputTensor;
use cvm_engine::{ErrorCode, Report, Status};
use sha3::{Digest, Sha3_256};

use crate::hash::{HashAlgorithm, outcome_hash};
use crate::{Model, NodeError};

/// The most tokens one generation may produce.
pub const MAX_TOKENS: usize = 1 << 16;

/// One step of a generation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// The token chosen, or `None` when the run failed (the generation stops there).
    pub token: Option<i32>,
    /// Gas the run used.
    pub gas_used: u64,
    /// The run's outcome hash.
    pub hash: [u8; 32],
    /// The chain after this step: SHA3-256(previous chain ‖ outcome hash ‖ token as 4 bytes
    /// little-endian), without the token for a failed step.
    pub chain: [u8; 32],
    /// The failed run's error code, when it failed.
    pub error: Option<ErrorCode>,
}

/// A generation: the prompt followed by the tokens chosen, and every step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Generation {
    /// The prompt and the generated tokens, in order.
    pub ids: Vec<i32>,
    /// One record per run.
    pub steps: Vec<Step>,
}

impl Generation {
    /// The chain after the last step (32 zero bytes before the first).
    pub fn chain(&self) -> [u8; 32] {
        self.steps.last().map_or([0; 32], |step| step.chain)
    }

    /// The total gas of the runs.
    pub fn gas_used(&self) -> u64 {
        self.steps
            .iter()
            .fold(0u64, |sum, step| sum.saturating_add(step.gas_used))
    }
}

/// Why a generation cannot start or go on. None of these is a deterministic outcome of the
/// model (they are refused before a run, or are this node's failures).
#[derive(Debug, thiserror::Error)]
pub enum GenerateError<E: std::error::Error> {
    /// The model does not have the shape of a causal language model.
    #[error("not a language model: {0}")]
    Model(String),
    /// The prompt or the request is unusable.
    #[error("{0}")]
    Request(String),
    /// A run failed on this node.
    #[error(transparent)]
    Run(E),
}

/// The window T of a model whose only input has `shape`: (T) or (1, T), T ≥ 1.
///
/// # Errors
/// Any other shape.
pub fn window<E: std::error::Error>(shape: &[u32]) -> Result<usize, GenerateError<E>> {
    match shape {
        [t] | [1, t] if *t >= 1 => Ok(*t as usize),
        _ => Err(GenerateError::Model(format!(
            "its input has shape {shape:?}; token ids need (T) or (1, T)"
        ))),
    }
}

/// Runs `tokens` greedy steps from `prompt` on a model whose token input has shape `shape`,
/// each run through `run` (natively, in wasm, or through a [`Model`]), outcomes hashed with
/// `algorithm`. A step whose run fails deterministically (out of gas, a bad input) is recorded
/// with its hash, and the generation stops after it.
///
/// # Errors
/// An empty prompt, more than [`MAX_TOKENS`] tokens, a model whose input or logits are not
/// those of a language model, a prompt id outside the vocabulary (the logits' last dimension),
/// or a failure of `run`.
pub fn generate_with<E: std::error::Error>(
    shape: &[u32],
    prompt: &[i32],
    tokens: usize,
    algorithm: HashAlgorithm,
    mut run: impl FnMut(InputTensor) -> Result<Report, E>,
) -> Result<Generation, GenerateError<E>> {
    let window = window(shape)?;
    if prompt.is_empty() {
        return Err(GenerateError::Request("the prompt has no token".into()));
    }
    if tokens > MAX_TOKENS {
        return Err(GenerateError::Request(format!(
            "{tokens} tokens asked for; at most {MAX_TOKENS}"
        )));
    }
    if let Some((at, id)) = prompt.iter().enumerate().find(|(_, id)| **id < 0) {
        return Err(GenerateError::Request(format!(
            "prompt id {id} at position {at} is negative"
        )));
    }
    let mut ids = prompt.to_vec();
    let mut steps: Vec<Step> = Vec::with_capacity(tokens);
    let mut chain = [0u8; 32];
    for _ in 0..tokens {
        let start = ids.len().saturating_sub(window);
        let real = ids.len() - start;
        let mut data: Vec<i32> = ids[start..].to_vec();
        data.resize(window, 0);
        let report = run(InputTensor {
            shape: shape.to_vec(),
            data,
        })
        .map_err(GenerateError::Run)?;
        let hash = outcome_hash(&report, algorithm);
        let gas_used = report.outcome.gas_used;
        let mut hasher = Sha3_256::new();
        hasher.update(chain);
        hasher.update(hash);
        let Status::Ok { outputs } = &report.outcome.status else {
            chain = hasher.finalize().into();
            steps.push(Step {
                token: None,
                gas_used,
                hash,
                chain,
                error: report.error_code(),
            });
            break;
        };
        let logits = outputs
            .first()
            .ok_or_else(|| GenerateError::Model("it has no output".into()))?;
        let vocabulary = logits_row_length(&logits.shape, window)?;
        if steps.is_empty()
            && let Some((at, id)) = prompt
                .iter()
                .enumerate()
                .find(|(_, id)| **id as usize >= vocabulary)
        {
            return Err(GenerateError::Request(format!(
                "prompt id {id} at position {at} is outside the vocabulary of {vocabulary} \
                 (the logits' last dimension)"
            )));
        }
        let row = &logits.data[(real - 1) * vocabulary..real * vocabulary];
        let token = argmax(row);
        hasher.update(token.to_le_bytes());
        chain = hasher.finalize().into();
        ids.push(token);
        steps.push(Step {
            token: Some(token),
            gas_used,
            hash,
            chain,
            error: None,
        });
    }
    Ok(Generation { ids, steps })
}

/// V of logits of `shape` (…, T, V) with leading dimensions 1, for a window of T.
fn logits_row_length<E: std::error::Error>(
    shape: &[u32],
    window: usize,
) -> Result<usize, GenerateError<E>> {
    match shape {
        [lead @ .., t, v] if lead.iter().all(|&d| d == 1) && *t as usize == window && *v >= 1 => {
            Ok(*v as usize)
        }
        _ => Err(GenerateError::Model(format!(
            "its first output has shape {shape:?}; per-token logits need (…, {window}, V) with \
             leading dimensions 1"
        ))),
    }
}

/// The index of the largest value, the first of equal ones.
fn argmax(row: &[i32]) -> i32 {
    let mut best = 0;
    for (index, &value) in row.iter().enumerate() {
        if value > row[best] {
            best = index;
        }
    }
    // The row holds at most 2^26 values (the engine's tensor limit).
    best as i32
}

/// [`generate_with`] on a loaded [`Model`] (in wasm, with its pool of instances), each run
/// limited to `gas_limit`, outcomes hashed with SHA3-256.
///
/// # Errors
/// As [`generate_with`]; a model whose bytes declare other than one input is refused.
pub fn generate(
    model: &Model,
    prompt: &[i32],
    tokens: usize,
    gas_limit: u64,
) -> Result<Generation, GenerateError<NodeError>> {
    let decoded = cvm_engine::model::Model::decode(&model.bytes)
        .map_err(|error| GenerateError::Model(error.message))?;
    let [input] = decoded.inputs.as_slice() else {
        return Err(GenerateError::Model(format!(
            "it has {} inputs; a language model takes one, the token ids",
            decoded.inputs.len()
        )));
    };
    generate_with(
        &input.shape,
        prompt,
        tokens,
        HashAlgorithm::Sha3_256,
        |input| {
            model
                .run(std::slice::from_ref(&input), gas_limit)
                .map(|verdict| verdict.report().clone())
        },
    )
}
