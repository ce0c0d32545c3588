//! How a batch of samples maps onto a model's declared inputs and outputs: the rule of `cvm
//! run --batch` and of the Python package's `run_batch`.

/// The shape of one sample in a batch for an input of `declared` shape: `declared` without its
/// leading 1, or the whole of `declared` when it does not begin with 1. A batch for the input
/// is an array of shape (N, sample shape…): a model taking (1, 1, 28, 28) takes batches of
/// (N, 1, 28, 28), one taking (4, 3) batches of (N, 4, 3).
pub fn sample_shape(declared: &[u32]) -> &[u32] {
    match declared {
        [1, rest @ ..] => rest,
        _ => declared,
    }
}

/// (n, sample shape…) for a tensor of `shape` ([`sample_shape`]): the shape of a batch of `n`
/// samples, and of the stacked outputs of a batch run.
pub fn batch_shape(n: u32, shape: &[u32]) -> Vec<u32> {
    std::iter::once(n)
        .chain(sample_shape(shape).iter().copied())
        .collect()
}
