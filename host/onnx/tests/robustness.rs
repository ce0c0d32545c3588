//! `cvm_onnx::read` on valid models truncated and corrupted at many positions: it returns Ok or
//! Err, never panics. (The fuzz target `onnx_read` in host/fuzz explores further.)
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test helpers fail loudly

mod common;

use common::{conv_net, encode, mlp};

/// A small deterministic generator (xorshift64*), so a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, bound: usize) -> usize {
        (self.next() % bound as u64) as usize
    }
}

fn models() -> Vec<Vec<u8>> {
    vec![encode(&mlp()), encode(&conv_net())]
}

#[test]
fn every_truncation_reads_or_fails() {
    for bytes in models() {
        assert!(cvm_onnx::read(&bytes).is_ok());
        for end in 0..bytes.len() {
            let _ = cvm_onnx::read(&bytes[..end]);
        }
    }
}

#[test]
fn every_byte_corrupted_reads_or_fails() {
    let mut accepted = 0usize;
    let mut refused = 0usize;
    for bytes in models() {
        for position in 0..bytes.len() {
            for replacement in [0x00, 0x01, 0x7f, 0x80, 0xff, bytes[position] ^ 0x08] {
                let mut corrupted = bytes.clone();
                corrupted[position] = replacement;
                match cvm_onnx::read(&corrupted) {
                    Ok(_) => accepted += 1,
                    Err(_) => refused += 1,
                }
            }
        }
    }
    // Both outcomes happen: the corruptions reach past the protobuf layer into the checks.
    assert!(
        accepted > 0 && refused > 0,
        "{accepted} accepted, {refused} refused"
    );
}

#[test]
fn random_corruptions_read_or_fail() {
    let mut rng = Rng(0x0123_4567_89ab_cdef);
    for bytes in models() {
        for _ in 0..4000 {
            let mut corrupted = bytes.clone();
            for _ in 0..=rng.below(8) {
                let position = rng.below(corrupted.len());
                match rng.below(4) {
                    0 => corrupted[position] = rng.next() as u8,
                    1 => {
                        corrupted.remove(position);
                    }
                    2 => corrupted.insert(position, rng.next() as u8),
                    _ => {
                        // Splice a piece of the model elsewhere, as a fuzzer would.
                        let start = rng.below(bytes.len());
                        let end = (start + rng.below(32)).min(bytes.len());
                        let piece = bytes[start..end].to_vec();
                        corrupted.splice(position..position, piece);
                    }
                }
                if corrupted.is_empty() {
                    break;
                }
            }
            let _ = cvm_onnx::read(&corrupted);
        }
    }
}
