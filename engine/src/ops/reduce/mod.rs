//! Reductions over axes: `sum` and `max` (spec 001), CINN `Reduce` and the per-channel
//! reductions of batch normalization (spec 002).

pub mod batch_norm;
pub mod cinn_reduce;
pub mod sum_max;
