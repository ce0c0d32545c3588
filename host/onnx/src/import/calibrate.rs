//! Calibration: the float graph evaluated on every calibration sample ([`float::run`]), each
//! value's range recorded, for [`quantize`](super::quantize) to choose the scales from.

use cvm_formats::npy::NpyF32Array;

use super::float;
use super::graph::{FTensor, Graph};

/// Ranges of one value over the calibration set.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stats {
    /// Largest |v|.
    pub max_abs: f64,
    /// Largest v (at least 0).
    pub max: f64,
    /// Largest |v| per channel (axis 1), for values of rank ≥ 2.
    pub channel_max_abs: Vec<f64>,
}

impl Stats {
    /// Widens the ranges to cover `tensor`.
    pub fn add(&mut self, tensor: &FTensor) {
        let channels = if tensor.shape.len() >= 2 {
            tensor.shape[1]
        } else {
            1
        };
        let inner: usize = tensor.shape.iter().skip(2).product();
        if self.channel_max_abs.len() != channels {
            self.channel_max_abs = vec![0.0; channels];
        }
        for (i, &v) in tensor.data.iter().enumerate() {
            let a = v.abs();
            self.max_abs = self.max_abs.max(a);
            self.max = self.max.max(v);
            let c = (i / inner.max(1)) % channels.max(1);
            self.channel_max_abs[c] = self.channel_max_abs[c].max(a);
        }
    }
}

/// The ranges of every value of `graph` over the `count` samples of `batch` (one array per
/// input, each of `count` samples): the [`Stats`] and the smallest value seen (at most 0);
/// `progress(done, total)` after each sample.
pub fn ranges(
    graph: &Graph,
    batch: &[NpyF32Array],
    count: usize,
    progress: &mut dyn FnMut(usize, usize),
) -> (Vec<Stats>, Vec<f64>) {
    let mut stats = vec![Stats::default(); graph.values.len()];
    let mut mins = vec![0.0f64; graph.values.len()];
    for i in 0..count {
        let inputs: Vec<Vec<f64>> = super::sample(batch, count, i)
            .iter()
            .map(|values| values.iter().map(|&v| f64::from(v)).collect())
            .collect();
        float::run(graph, &inputs, &mut |id, value| {
            stats[id].add(value);
            mins[id] = value.data.iter().copied().fold(mins[id], f64::min);
        });
        progress(i + 1, count);
    }
    (stats, mins)
}
