//! SmoothQuant-style scale migration (Xiao et al., 2023), `cvm import --smooth`: a layer
//! normalization whose output a few channels dominate (a transformer's outlier features) has
//! those channels divided by a factor s_j folded into its γ and β, and every dense layer that
//! reads it has the weights of channel j multiplied by s_j. The float model computes the same
//! function; the int8 activation loses its outliers, which the weights take on, each of their
//! output units having its own scale.
//!
//! The factor is `s_j = √(max|X_j| / max|W_j|)`: SmoothQuant's migration strength α = 1/2,
//! which balances the two ranges, and a square root, which IEEE 754 rounds exactly, so that
//! the migrated model is the same on every machine. max|X_j| is calibrated
//! ([`Stats::last_axis_max_abs`]); max|W_j| is over every dense layer reading the norm.

use super::calibrate::Stats;
use super::graph::{Graph, Op};

/// Migrates the scales of every layer normalization of `graph` read only by dense layers
/// (directly or through reshapes that keep the last axis) whose weights the import chooses
/// the scales of; `stats` are the graph's calibrated ranges. Returns the notes for the report,
/// one per norm migrated.
pub fn smooth(graph: &mut Graph, stats: &[Stats]) -> Vec<String> {
    let consumers = graph.consumers();
    let mut notes = Vec::new();
    for (norm, stats) in stats.iter().enumerate().take(graph.values.len()) {
        if !matches!(graph.values[norm].op, Op::LayerNorm(_)) || norm == graph.output {
            continue;
        }
        let Some(denses) = dense_readers(graph, &consumers, norm) else {
            continue;
        };
        let width = graph.values[norm].shape.last().copied().unwrap_or(0);
        let activations = &stats.last_axis_max_abs;
        if width == 0 || activations.len() != width {
            continue;
        }
        let mut weights = vec![0.0f64; width];
        for &d in &denses {
            if let Op::Dense(dense) = &graph.values[d].op {
                for row in dense.weight.data.chunks(width) {
                    for (m, w) in weights.iter_mut().zip(row) {
                        *m = m.max(w.abs());
                    }
                }
            }
        }
        let factors: Vec<f64> = activations
            .iter()
            .zip(&weights)
            .map(|(&x, &w)| {
                let s = (x / w).sqrt();
                if x > 0.0 && w > 0.0 && s.is_finite() && s > 0.0 {
                    s
                } else {
                    1.0
                }
            })
            .collect();
        if let Op::LayerNorm(ln) = &mut graph.values[norm].op {
            for ((g, b), s) in ln.gamma.iter_mut().zip(&mut ln.beta).zip(&factors) {
                *g /= s;
                *b /= s;
            }
        }
        for &d in &denses {
            if let Op::Dense(dense) = &mut graph.values[d].op {
                for row in dense.weight.data.chunks_mut(width) {
                    for (w, s) in row.iter_mut().zip(&factors) {
                        *w *= s;
                    }
                }
            }
        }
        let (low, high) = factors
            .iter()
            .fold((f64::INFINITY, 0.0f64), |(l, h), &s| (l.min(s), h.max(s)));
        let largest = |values: &[f64]| values.iter().fold(0.0f64, |m, &v| m.max(v));
        let migrated: Vec<f64> = activations
            .iter()
            .zip(&factors)
            .map(|(x, s)| x / s)
            .collect();
        notes.push(format!(
            "{}: SmoothQuant moved the scales of its {width} channels (factors {low:.3e} to \
             {high:.3e}) into the {} dense layer{} reading it; its largest |value| {:.4} \
             becomes {:.4}",
            graph.values[norm].origin,
            denses.len(),
            if denses.len() == 1 { "" } else { "s" },
            largest(activations),
            largest(&migrated),
        ));
    }
    notes
}

/// The dense layers reading `norm`'s output, if dense layers whose weights the import
/// quantizes (not a QDQ model's own) read it and nothing else does: each reads it as its data,
/// directly or through reshapes that keep the last axis (so that element i of a row is
/// channel i everywhere).
fn dense_readers(graph: &Graph, consumers: &[Vec<usize>], norm: usize) -> Option<Vec<usize>> {
    let width = graph.values[norm].shape.last().copied()?;
    let (mut denses, mut pending) = (Vec::new(), vec![norm]);
    while let Some(v) = pending.pop() {
        if consumers[v].is_empty() {
            return None;
        }
        for &c in &consumers[v] {
            let value = &graph.values[c];
            match &value.op {
                Op::Reshape if value.shape.last() == Some(&width) && c != graph.output => {
                    pending.push(c);
                }
                Op::Dense(dense)
                    if value.inputs == [v]
                        && dense.weight_scales.is_none()
                        && dense.weight.shape.get(1) == Some(&width) =>
                {
                    denses.push(c);
                }
                _ => return None,
            }
        }
    }
    Some(denses)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::import::float;
    use crate::import::graph::{Dense, FTensor, Input, InputKind, LayerNorm, Value};

    fn value(op: Op, inputs: Vec<usize>, shape: Vec<usize>) -> Value {
        Value {
            op,
            inputs,
            shape,
            origin: String::new(),
            name: String::new(),
        }
    }

    fn dense(n: usize, k: usize, seed: f64) -> Op {
        Op::Dense(Dense {
            weight: FTensor {
                shape: vec![n, k],
                data: (0..n * k)
                    .map(|i| ((i as f64 * seed) % 1.0) - 0.5)
                    .collect(),
            },
            weight_scales: None,
            bias: Some(vec![0.25; n]),
        })
    }

    /// x (1, 2, 4) → layer norm (an outlier channel: γ 8 on channel 2) → reshape (2, 4) → two
    /// dense layers, and a sum of their outputs.
    fn graph() -> Graph {
        let norm = LayerNorm {
            gamma: vec![1.0, 0.5, 8.0, 1.0],
            beta: vec![0.0, 0.1, -0.2, 0.0],
            epsilon: 1e-5,
            rms: false,
        };
        Graph {
            values: vec![
                value(Op::Input(0), vec![], vec![1, 2, 4]),
                value(Op::LayerNorm(norm), vec![0], vec![1, 2, 4]),
                value(Op::Reshape, vec![1], vec![2, 4]),
                value(dense(3, 4, 0.37), vec![2], vec![2, 3]),
                value(dense(3, 4, 0.61), vec![2], vec![2, 3]),
                value(Op::Add, vec![3, 4], vec![2, 3]),
            ],
            inputs: vec![Input {
                name: "x".into(),
                kind: InputKind::Float,
            }],
            output: 5,
            notes: Vec::new(),
        }
    }

    fn stats(graph: &Graph, samples: &[Vec<f64>]) -> Vec<Stats> {
        let mut stats = vec![Stats::default(); graph.values.len()];
        for sample in samples {
            float::run(graph, std::slice::from_ref(sample), &mut |id, v| {
                stats[id].add(v);
                if matches!(graph.values[id].op, Op::LayerNorm(_)) {
                    stats[id].add_last_axis(v);
                }
            });
        }
        stats
    }

    #[test]
    fn migration_keeps_the_function_and_flattens_the_outlier_channel() {
        let original = graph();
        let samples: Vec<Vec<f64>> = (0..5)
            .map(|s| {
                (0..8)
                    .map(|i| f64::from((s * 7 + i * 3) % 11) - 5.0)
                    .collect()
            })
            .collect();
        let before = stats(&original, &samples);
        let mut smoothed = original.clone();
        let notes = smooth(&mut smoothed, &before);
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].contains("into the 2 dense layers"), "{notes:?}");
        for sample in &samples {
            let a = float::run(&original, std::slice::from_ref(sample), &mut |_, _| {}).data;
            let b = float::run(&smoothed, std::slice::from_ref(sample), &mut |_, _| {}).data;
            for (x, y) in a.iter().zip(&b) {
                assert!((x - y).abs() < 1e-9, "{a:?} {b:?}");
            }
        }
        // The outlier channel no longer sets the range: the channels' ranges are closer.
        let after = stats(&smoothed, &samples);
        let spread = |m: &[f64]| {
            m.iter().fold(0.0f64, |a, &b| a.max(b)) / m.iter().fold(f64::INFINITY, |a, &b| a.min(b))
        };
        assert!(
            spread(&after[1].last_axis_max_abs) < spread(&before[1].last_axis_max_abs) / 2.0,
            "{:?} → {:?}",
            before[1].last_axis_max_abs,
            after[1].last_axis_max_abs
        );
    }

    #[test]
    fn a_norm_read_by_anything_but_dense_layers_is_left_alone() {
        let mut graph = graph();
        // The norm's output is also summed into a residual stream.
        graph.values.push(value(Op::Add, vec![1, 0], vec![1, 2, 4]));
        let samples = vec![(0..8).map(f64::from).collect::<Vec<f64>>()];
        let before = stats(&graph, &samples);
        let mut smoothed = graph.clone();
        assert!(smooth(&mut smoothed, &before).is_empty());
        assert_eq!(smoothed, graph);
        // Nor one whose dense layer keeps a QDQ model's own weight scales.
        let mut graph = self::graph();
        if let Op::Dense(dense) = &mut graph.values[4].op {
            dense.weight_scales = Some(vec![0.01]);
        }
        let before = stats(&graph, &samples);
        let mut smoothed = graph.clone();
        assert!(smooth(&mut smoothed, &before).is_empty());
        assert_eq!(smoothed, graph);
    }
}
