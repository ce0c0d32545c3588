//! Outcome hashing for consensus comparison: SHA3-256 (default) or Keccak-256 over the
//! outcome's canonical borsh bytes.

use cvm_engine::Report;
use sha3::{Digest, Keccak256, Sha3_256};

/// The hash function applied to outcome bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HashAlgorithm {
    /// FIPS 202 SHA3-256.
    #[default]
    Sha3_256,
    /// Keccak-256 as used by Ethereum-family chains (original padding).
    Keccak256,
}

impl HashAlgorithm {
    /// The name used on the command line and in output.
    pub fn name(self) -> &'static str {
        match self {
            HashAlgorithm::Sha3_256 => "sha3-256",
            HashAlgorithm::Keccak256 => "keccak256",
        }
    }

    /// Hashes `bytes`.
    pub fn digest(self, bytes: &[u8]) -> [u8; 32] {
        match self {
            HashAlgorithm::Sha3_256 => Sha3_256::digest(bytes).into(),
            HashAlgorithm::Keccak256 => Keccak256::digest(bytes).into(),
        }
    }
}

/// The consensus hash of a run: the digest of the outcome's canonical bytes. Message text,
/// output names and anything else outside the outcome do not contribute.
pub fn outcome_hash(report: &Report, algorithm: HashAlgorithm) -> [u8; 32] {
    algorithm.digest(&report.outcome_bytes())
}

/// Lowercase hexadecimal.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_answers() {
        // FIPS 202 and Keccak test vectors for the empty message.
        assert_eq!(
            hex(&HashAlgorithm::Sha3_256.digest(b"")),
            "a7ffc6f8bf1ed76651c14756a061d662f580ff4de43b49fa82d80a4b80f8434a"
        );
        assert_eq!(
            hex(&HashAlgorithm::Keccak256.digest(b"")),
            "c5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470"
        );
    }
}
