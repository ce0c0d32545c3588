//! Calibration: the float graph evaluated on every calibration sample ([`float::run`]), each
//! value's range recorded, for [`quantize`](super::quantize) to choose the scales from.

use cvm_formats::npy::NpyF32Array;

use super::float;
use super::graph::{FTensor, Graph, Op};

/// Bins of [`Stats::histogram`]: eight per octave over 2^−64 to 2^64.
const BINS: usize = 1024;

/// The bin of |v|: its exponent and first three mantissa bits, so bin b holds
/// [2^(b/8 − 64) · (1 + (b mod 8)/8), the next bin's start); below the range the first bin,
/// above it the last.
fn bin(v: f64) -> usize {
    let key = v.abs().to_bits() >> 49;
    let first = (1023 - 64) << 3;
    usize::try_from(key.saturating_sub(first)).map_or(BINS - 1, |b| b.min(BINS - 1))
}

/// The middle of bin `b`'s values.
fn bin_value(b: usize) -> f64 {
    let start = |b: usize| f64::from_bits((((1023 - 64) << 3) + b as u64) << 49);
    (start(b) + start(b + 1)) / 2.0
}

/// Ranges of one value over the calibration set.
#[derive(Clone, Debug, PartialEq)]
pub struct Stats {
    /// Largest |v|.
    pub max_abs: f64,
    /// Largest v (at least 0).
    pub max: f64,
    /// Largest |v| per channel (axis 1), for values of rank ≥ 2.
    pub channel_max_abs: Vec<f64>,
    /// Largest |v| per element of the last axis, for a layer normalization's output only
    /// (the channels [`smooth`](super::smooth) migrates); empty for other values.
    pub last_axis_max_abs: Vec<f64>,
    /// How many elements fell in each bin of |v| (see [`bin`]), for [`Stats::mse_range`].
    histogram: Vec<u64>,
}

impl Default for Stats {
    fn default() -> Stats {
        Stats {
            max_abs: 0.0,
            max: 0.0,
            channel_max_abs: Vec::new(),
            last_axis_max_abs: Vec::new(),
            histogram: vec![0; BINS],
        }
    }
}

impl Stats {
    /// The range r of int8 at scale r / 127 whose mean squared error over the calibration
    /// values is least: each value beyond r costs (|v| − r)², one within it the rounding's
    /// (r / 127)² / 12, or v² where it rounds to 0. Candidates are every 1/256 of the largest
    /// |v| (which is the last), so that outliers a few values reach no longer spread the
    /// scale for all the others.
    pub fn mse_range(&self) -> f64 {
        let top = self.max_abs;
        if top.is_nan() || top <= 0.0 {
            return top;
        }
        let mut best = (f64::INFINITY, top);
        for k in 1..=256u32 {
            let r = top * f64::from(k) / 256.0;
            let step = r / 127.0;
            let rounding = step * step / 12.0;
            let error: f64 = self
                .histogram
                .iter()
                .enumerate()
                .filter(|&(_, &c)| c > 0)
                .map(|(b, &c)| {
                    let v = bin_value(b).min(top);
                    let e = if v > r {
                        (v - r) * (v - r)
                    } else if v < step / 2.0 {
                        v * v
                    } else {
                        rounding
                    };
                    e * c as f64
                })
                .sum();
            if error < best.0 {
                best = (error, r);
            }
        }
        best.1
    }

    /// Widens [`Stats::last_axis_max_abs`] to cover `tensor`.
    pub fn add_last_axis(&mut self, tensor: &FTensor) {
        let width = tensor.shape.last().copied().unwrap_or(1).max(1);
        if self.last_axis_max_abs.len() != width {
            self.last_axis_max_abs = vec![0.0; width];
        }
        for row in tensor.data.chunks(width) {
            for (m, v) in self.last_axis_max_abs.iter_mut().zip(row) {
                *m = m.max(v.abs());
            }
        }
    }

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
            // Zeros cost nothing at any scale.
            if a != 0.0 {
                self.histogram[bin(a)] += 1;
            }
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
            if matches!(graph.values[id].op, Op::LayerNorm(_)) {
                stats[id].add_last_axis(value);
            }
            mins[id] = value.data.iter().copied().fold(mins[id], f64::min);
        });
        progress(i + 1, count);
    }
    (stats, mins)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats_of(data: Vec<f64>) -> Stats {
        let mut stats = Stats::default();
        stats.add(&FTensor {
            shape: vec![data.len()],
            data,
        });
        stats
    }

    #[test]
    fn bins_hold_their_values() {
        for v in [1e-12, 0.3, 1.0, 1.1, 2.5, 1e9] {
            let b = bin(v);
            assert!(
                bin_value(b) / v > 0.9 && bin_value(b) / v < 1.1,
                "{v}: bin {b}"
            );
            assert_eq!(bin(-v), b);
        }
        assert_eq!(bin(1e-300), 0);
        assert_eq!(bin(1e300), BINS - 1);
    }

    #[test]
    fn mse_range_clips_rare_outliers_and_keeps_a_spread_range() {
        // Values evenly over [−1, 1]: clipping any of them costs more than it saves.
        let even: Vec<f64> = (0..=2000).map(|i| f64::from(i) / 1000.0 - 1.0).collect();
        let range = stats_of(even).mse_range();
        assert!(range > 0.95 && range <= 1.0, "{range}");
        // 200,000 values over [−1, 1] and one at 3: clipping that one costs less than what a
        // range of 3 costs all the others, and the least error is near 1.47
        // (200,000 · r² / (12 · 127²) + (3 − r)² is least there).
        let mut tailed: Vec<f64> = (0..200_000)
            .map(|i| f64::from(i) / 100_000.0 - 1.0)
            .collect();
        tailed.push(3.0);
        let error = |r: f64| -> f64 {
            let step = r / 127.0;
            tailed
                .iter()
                .map(|&v| {
                    let q = (v / step).round().clamp(-127.0, 127.0) * step;
                    (v - q) * (v - q)
                })
                .sum()
        };
        let range = stats_of(tailed.clone()).mse_range();
        assert!(range > 1.3 && range < 1.7, "{range}");
        assert!(error(range) < error(3.0) / 1.5);
        assert!(error(range) <= error(range * 0.9) && error(range) <= error(range * 1.1));
        // Nothing seen but zeros: the range is 0, whose scale is 1.
        assert_eq!(stats_of(vec![0.0; 8]).mse_range(), 0.0);
    }
}
