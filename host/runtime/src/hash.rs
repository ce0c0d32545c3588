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
    match algorithm {
        HashAlgorithm::Sha3_256 => streamed::<Sha3_256>(report),
        HashAlgorithm::Keccak256 => streamed::<Keccak256>(report),
    }
}

/// The digest of `report.outcome_bytes()`, fed to the hasher as the outcome is encoded, in
/// memory of a block rather than of the outcome.
fn streamed<D: Digest>(report: &Report) -> [u8; 32]
where
    [u8; 32]: From<sha3::digest::Output<D>>,
{
    struct Feed<D>(D);
    impl<D: Digest> std::io::Write for Feed<D> {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.update(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut feed = Feed(D::new());
    // Writing to a hasher cannot fail; an outcome that cannot be encoded has no bytes.
    if borsh::to_writer(&mut feed, &report.outcome).is_err() {
        return D::digest([]).into();
    }
    feed.0.finalize().into()
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

    #[test]
    fn the_streamed_hash_is_the_hash_of_the_outcome_bytes() {
        use cvm_engine::{Shape, Tensor};
        let output = |len: usize| {
            let tensor = Tensor {
                shape: Shape(vec![len as u32]),
                precision: 8,
                data: (0..len as i32).map(|i| i * 7919 - 3).collect(),
            };
            (format!("y{len}"), tensor)
        };
        let reports = [
            Report::success(vec![], 0),
            Report::success(vec![output(1), output(1000), output(70_000)], 12_345),
            Report::failure(
                cvm_engine::Error::new(cvm_engine::ErrorCode::OutOfGas, "x"),
                9,
            ),
        ];
        for report in &reports {
            for algorithm in [HashAlgorithm::Sha3_256, HashAlgorithm::Keccak256] {
                assert_eq!(
                    outcome_hash(report, algorithm),
                    algorithm.digest(&report.outcome_bytes())
                );
            }
        }
    }
}
