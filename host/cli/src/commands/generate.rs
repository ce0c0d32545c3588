//! `cvm generate`: greedy generation with a causal language model (`cvm_runtime::generate`),
//! each step a run of one loaded model, natively or in wasm.

use cvm_cli::runner::Session;
use cvm_runtime::generate::{GenerateError, Generation, generate_with};
use cvm_runtime::hash::hex;

use super::run::{accepted, print_report, wasm_engine};
use crate::*;

/// How `cvm generate` runs and reports.
pub(crate) struct GenerateOptions {
    pub(crate) engine: EngineKind,
    pub(crate) tokens: usize,
    pub(crate) gas_limit: u64,
    pub(crate) schedule: u32,
    pub(crate) json: bool,
}

pub(crate) fn generate(
    source: &ModelSource,
    ids: &Path,
    options: &GenerateOptions,
    cache: &CacheArgs,
) -> Result<(), Failure> {
    let mut timings = Timings::default();
    let LoadedModel { bytes, model, .. } =
        accepted(load_model(source)?, HashAlgorithm::Sha3_256, options.json)?;
    let prompt = read_prompt(ids)?;
    // A model that does not decode is loaded anyway: the engine rejects it deterministically.
    let shape = match &model {
        Some(model) => match model.inputs.as_slice() {
            [input] => Some(input.shape.clone()),
            inputs => {
                return Err(HostError::Usage(format!(
                    "not a language model: it has {} inputs; a language model takes one, the \
                     token ids",
                    inputs.len()
                ))
                .into());
            }
        },
        None => None,
    };
    let wasm = wasm_engine(options.engine, cache, &mut timings)?;
    let mut session = match Session::load(
        options.engine,
        wasm.as_ref(),
        bytes,
        options.schedule,
        &mut timings,
    )? {
        Ok(session) => session,
        Err(report) => {
            print_report(&report, HashAlgorithm::Sha3_256, options.json)?;
            return Err(Failure::Deterministic);
        }
    };
    let Some(shape) = shape else {
        return Err(HostError::Wasm(
            "the engine loaded a model whose bytes do not decode on the host".into(),
        )
        .into());
    };
    let generation = generate_with(
        &shape,
        &prompt,
        options.tokens,
        HashAlgorithm::Sha3_256,
        |input| session.run(vec![input], options.gas_limit, &mut timings),
    )
    .map_err(|error| match error {
        GenerateError::Run(error) => error,
        other => HostError::Usage(other.to_string()),
    })?;
    print_generation(&generation, prompt.len(), options.json)?;
    if generation.steps.iter().any(|step| step.error.is_some()) {
        return Err(Failure::Deterministic);
    }
    Ok(())
}

/// The prompt's ids: an integer `.npy` of shape (n) or (1, n).
fn read_prompt(path: &Path) -> Result<Vec<i32>, HostError> {
    let tensor = cvm_cli::inputs::read_input(path)?;
    match tensor.shape.as_slice() {
        [_] | [1, _] => Ok(tensor.data),
        shape => Err(HostError::input(format!(
            "{}: the prompt has shape {shape:?}; token ids are (n) or (1, n)",
            path.display()
        ))),
    }
}

fn print_generation(generation: &Generation, prompt: usize, json: bool) -> Result<(), Failure> {
    if json {
        let steps: Vec<serde_json::Value> = generation
            .steps
            .iter()
            .map(|step| {
                serde_json::json!({
                    "token": step.token,
                    "gas_used": step.gas_used,
                    "hash": hex(&step.hash),
                    "chain": hex(&step.chain),
                    "error": step.error.map(|code| format!("{code:?}")),
                })
            })
            .collect();
        let value = serde_json::json!({
            "ids": generation.ids,
            "prompt_tokens": prompt,
            "steps": steps,
            "gas_used": generation.gas_used(),
            "chain": hex(&generation.chain()),
        });
        return outln!("{value}");
    }
    for (index, step) in generation.steps.iter().enumerate() {
        let what = match (step.token, step.error) {
            (Some(token), _) => format!("token {token}"),
            (None, Some(code)) => format!("error {code:?}"),
            (None, None) => "no token".into(),
        };
        outln!(
            "step {}: {what}, gas {}, outcome {}, chain {}",
            index + 1,
            step.gas_used,
            hex(&step.hash),
            hex(&step.chain)
        )?;
    }
    let ids: Vec<String> = generation.ids.iter().map(i32::to_string).collect();
    outln!("ids: {}", ids.join(" "))?;
    outln!(
        "generated {} tokens after a prompt of {prompt}; gas {} over {} runs",
        generation.ids.len() - prompt,
        generation.gas_used(),
        generation.steps.len()
    )?;
    outln!("chain: {}", hex(&generation.chain()))
}
