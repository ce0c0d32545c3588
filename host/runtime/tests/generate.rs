//! Greedy generation (`cvm_runtime::generate`) on the hand-written causal decoder of
//! `fixtures/models/transformer/decoder` (16 tokens, vocabulary 48): the same ids, gas and hash
//! chain natively and in wasm; a prompt shorter and longer than the window; every refusal; a
//! run that fails ends the generation with its hash in the chain.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test helpers fail loudly

use std::convert::Infallible;
use std::path::{Path, PathBuf};

use cvm_engine::ErrorCode;
use cvm_runtime::generate::{GenerateError, Generation, generate, generate_with};
use cvm_runtime::hash::HashAlgorithm;
use cvm_runtime::{Runtime, RuntimeConfig};

const SCHEDULE: u32 = 1;
const GAS_LIMIT: u64 = 1 << 32;

fn decoder() -> Vec<u8> {
    let dir =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/models/transformer/decoder");
    let text = std::fs::read_to_string(dir.join("model.json")).unwrap();
    cvm_formats::text::parse_text_model(&text, &dir, "decoder")
        .unwrap()
        .encode()
}

fn native(bytes: &[u8], prompt: &[i32], tokens: usize, gas_limit: u64) -> Generation {
    let validated = cvm_engine::load(bytes, SCHEDULE).unwrap();
    generate_with::<Infallible>(
        validated.inputs[0].ty.shape.dims(),
        prompt,
        tokens,
        HashAlgorithm::Sha3_256,
        |input| Ok(cvm_engine::run(&validated, vec![input], gas_limit)),
    )
    .unwrap()
}

fn runtime() -> Runtime {
    Runtime::new(&RuntimeConfig::with_cache_dir(
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("module-cache"),
    ))
    .unwrap()
}

#[test]
fn native_and_wasm_generate_the_same_tokens_and_chain() {
    let bytes = decoder();
    let model = runtime().load(&bytes, SCHEDULE).unwrap();
    // Shorter than the window (padded), then past it (the window slides).
    for (prompt, tokens) in [(vec![12, 12, 43], 20), (vec![5; 16], 3)] {
        let wasm = generate(&model, &prompt, tokens, GAS_LIMIT).unwrap();
        let here = native(&bytes, &prompt, tokens, GAS_LIMIT);
        assert_eq!(wasm, here);
        assert_eq!(wasm.ids.len(), prompt.len() + tokens);
        assert_eq!(&wasm.ids[..prompt.len()], prompt.as_slice());
        assert!(wasm.ids.iter().all(|&id| (0..48).contains(&id)));
        assert_eq!(wasm.steps.len(), tokens);
        assert!(
            wasm.steps
                .iter()
                .all(|s| s.error.is_none() && s.gas_used > 0)
        );
        // The chain links every step: no two steps share a link.
        let mut links: Vec<[u8; 32]> = wasm.steps.iter().map(|s| s.chain).collect();
        links.sort_unstable();
        links.dedup();
        assert_eq!(links.len(), tokens);
        assert_eq!(wasm.chain(), wasm.steps[tokens - 1].chain);
    }
}

/// A step's logits are those of the unpadded sequence: generating from a prompt of 3 gives as
/// its second token what generating from the prompt plus the first token gives as its first.
#[test]
fn padding_does_not_change_the_next_token() {
    let bytes = decoder();
    let two = native(&bytes, &[7, 30, 2], 2, GAS_LIMIT);
    let one = native(&bytes, &two.ids[..4], 1, GAS_LIMIT);
    assert_eq!(one.ids, two.ids);
    assert_eq!(one.steps[0].token, two.steps[1].token);
}

#[test]
fn a_failed_run_ends_the_generation_in_the_chain() {
    let bytes = decoder();
    let full = native(&bytes, &[1, 2, 3], 1, GAS_LIMIT);
    let short = native(&bytes, &[1, 2, 3], 4, full.steps[0].gas_used - 1);
    assert_eq!(short.steps.len(), 1);
    assert_eq!(short.ids, vec![1, 2, 3]);
    assert_eq!(short.steps[0].token, None);
    assert_eq!(short.steps[0].error, Some(ErrorCode::OutOfGas));
    assert_ne!(short.chain(), [0; 32]);
}

#[test]
fn requests_a_model_cannot_serve_are_refused() {
    let bytes = decoder();
    let model = runtime().load(&bytes, SCHEDULE).unwrap();
    let message = |result: Result<Generation, GenerateError<cvm_runtime::NodeError>>| {
        result.err().map(|e| e.to_string()).unwrap_or_default()
    };
    assert!(message(generate(&model, &[], 1, GAS_LIMIT)).contains("no token"));
    assert!(message(generate(&model, &[3, -1], 1, GAS_LIMIT)).contains("-1 at position 1"));
    assert!(message(generate(&model, &[3, 48], 1, GAS_LIMIT)).contains("vocabulary of 48"));
    assert!(message(generate(&model, &[3], 1 << 20, GAS_LIMIT)).contains("at most"));
    // Zero tokens: nothing runs, the chain is empty.
    let none = generate(&model, &[3], 0, GAS_LIMIT).unwrap();
    assert_eq!(
        (none.chain(), none.steps.len(), none.ids),
        ([0; 32], 0, vec![3])
    );
    for shape in [vec![], vec![2, 8], vec![1, 1, 16], vec![0]] {
        let refused = generate_with::<Infallible>(&shape, &[1], 1, HashAlgorithm::Sha3_256, |_| {
            unreachable!("nothing runs for a model that is not a language model")
        });
        assert!(matches!(refused, Err(GenerateError::Model(_))), "{shape:?}");
    }
}
