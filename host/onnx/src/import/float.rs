//! The float graph evaluated on the host, for calibration and for the float-vs-integer
//! comparison of the report.
//!
//! Deterministic on every machine: values are `f64`, and only operations IEEE 754 defines
//! exactly are used (addition, subtraction, multiplication, division, square root, comparison,
//! rounding to an integer). Every sum runs in one fixed order, and Rust never fuses a
//! multiplication and an addition on its own. The transcendental functions (e^x for sigmoid and
//! tanh) are computed here from those operations ([`exp`]), never by the platform's libm, whose
//! results differ between systems.

use super::graph::{Conv, Dense, FTensor, Function, Graph, LayerNorm, Op, Pool, Reduce, Slice};

/// Most multiply-accumulates (or element visits) one evaluation of the float graph may take:
/// 2^35, twice a GPT-2-small forward pass over 128 tokens (16.1 G), about a minute on one
/// core. A larger graph is refused before anything runs.
pub const MAX_WORK_PER_SAMPLE: u64 = 1 << 35;

/// The work one evaluation of `graph` takes, in multiply-accumulates or element visits.
pub fn work(graph: &Graph) -> u64 {
    let mut total = 0u64;
    for value in &graph.values {
        let elements = value.shape.iter().product::<usize>() as u64;
        let per = match &value.op {
            Op::Conv(conv) => conv.weight.data.len() as u64 / conv.weight.shape[0].max(1) as u64,
            Op::Dense(dense) => dense.weight.shape[1] as u64,
            Op::MaxPool(pool) | Op::AvgPool(pool) => (pool.kernel[0] * pool.kernel[1]) as u64,
            Op::Reduce(reduce) => {
                let input = &graph.values[value.inputs[0]].shape;
                reduce.axes.iter().map(|&a| input[a]).product::<usize>() as u64
            }
            Op::MatMul { .. } => {
                let a = &graph.values[value.inputs[0]].shape;
                a.last().copied().unwrap_or(1) as u64
            }
            _ => 1,
        };
        total = total.saturating_add(elements.saturating_mul(per.max(1)));
    }
    total
}

/// Stands for a value already dropped; never read, since a value is dropped only after its last
/// reader.
const DROPPED: &FTensor = &FTensor {
    shape: Vec::new(),
    data: Vec::new(),
};

/// Evaluates `graph` on one sample, a value per input (row-major, of the input's shape), and
/// returns its output.
/// `visit(id, value)` sees every value, in order. A value is dropped once the last value that
/// reads it has been computed, so the memory held is that of the values alive at one time, not
/// of the whole graph.
pub fn run(graph: &Graph, inputs: &[Vec<f64>], visit: &mut dyn FnMut(usize, &FTensor)) -> FTensor {
    let count = graph.values.len();
    // The last reader of each value (itself when none reads it); the output is kept to the end.
    let mut last_reader: Vec<usize> = graph
        .consumers()
        .iter()
        .enumerate()
        .map(|(id, readers)| readers.last().copied().unwrap_or(id))
        .collect();
    if let Some(last) = last_reader.get_mut(graph.output) {
        *last = usize::MAX;
    }
    let mut values: Vec<Option<FTensor>> = Vec::with_capacity(count);
    for (id, value) in graph.values.iter().enumerate() {
        let arg = |k: usize| {
            value
                .inputs
                .get(k)
                .and_then(|&i| values.get(i))
                .and_then(Option::as_ref)
                .unwrap_or(DROPPED)
        };
        let shape = value.shape.clone();
        let data = match &value.op {
            Op::Input(k) => inputs.get(*k).cloned().unwrap_or_default(),
            Op::Const(tensor) => tensor.data.clone(),
            Op::Conv(conv) => conv2d(arg(0), conv, &shape),
            Op::Dense(dense) => dense_layer(arg(0), dense, &shape),
            Op::Relu => arg(0).data.iter().map(|&x| x.max(0.0)).collect(),
            Op::Clip { lo, hi } => arg(0).data.iter().map(|&x| x.max(*lo).min(*hi)).collect(),
            Op::MaxPool(pool) => pool2d(arg(0), pool, &shape, true),
            Op::AvgPool(pool) => pool2d(arg(0), pool, &shape, false),
            Op::Reduce(reduce) => reduce_axes(arg(0), reduce, &shape),
            Op::Add => broadcast(arg(0), arg(1), &shape, |a, b| a + b),
            Op::Mul => broadcast(arg(0), arg(1), &shape, |a, b| a * b),
            Op::Flatten | Op::Reshape => arg(0).data.clone(),
            Op::Transpose(perm) => transpose(arg(0), perm, &shape),
            Op::Concat(axis) => {
                let parts: Vec<&FTensor> = (0..value.inputs.len()).map(arg).collect();
                concat(&parts, *axis, &shape)
            }
            Op::Table(f) => arg(0).data.iter().map(|&x| function(*f, x)).collect(),
            Op::Sub => broadcast(arg(0), arg(1), &shape, |a, b| a - b),
            Op::Slice(slice) => cut(arg(0), slice, &shape),
            Op::Pad(pads) => pad(arg(0), *pads, &shape),
            Op::MatMul { transpose_b, alpha } => {
                matmul(arg(0), arg(1), *transpose_b, *alpha, &shape)
            }
            Op::Softmax { causal, masked } => softmax(arg(0), *causal, masked.then(|| arg(1))),
            Op::DivCount => broadcast(arg(0), arg(1), &shape, |sum, count| {
                if count > 0.0 { sum / count } else { 0.0 }
            }),
            Op::Embedding(table) => embedding(arg(0), table),
            Op::LayerNorm(norm) => layer_norm(arg(0), norm),
            Op::Fake(scale) => arg(0)
                .data
                .iter()
                .map(|&x| (x / scale).round_ties_even().clamp(-128.0, 127.0) * scale)
                .collect(),
        };
        let tensor = FTensor { shape, data };
        visit(id, &tensor);
        values.push((last_reader[id] != id).then_some(tensor));
        for &input in &value.inputs {
            if last_reader[input] == id {
                values[input] = None;
            }
        }
    }
    values
        .get_mut(graph.output)
        .and_then(Option::take)
        .unwrap_or_else(|| DROPPED.clone())
}

/// A sum (or mean) over `reduce.axes`, each output element's terms added in row-major order.
fn reduce_axes(x: &FTensor, reduce: &Reduce, shape: &[usize]) -> Vec<f64> {
    let n: usize = shape.iter().product();
    let mut sums = vec![0.0; n];
    let mut out_strides = vec![1; shape.len()];
    for a in (0..shape.len().saturating_sub(1)).rev() {
        out_strides[a] = out_strides[a + 1] * shape[a + 1];
    }
    let mut in_strides = vec![1; x.shape.len()];
    for a in (0..x.shape.len().saturating_sub(1)).rev() {
        in_strides[a] = in_strides[a + 1] * x.shape[a + 1];
    }
    for (flat, &v) in x.data.iter().enumerate() {
        let mut position = 0;
        for a in 0..x.shape.len() {
            if !reduce.axes.contains(&a) {
                position += (flat / in_strides[a]) % x.shape[a] * out_strides[a];
            }
        }
        sums[position] += v;
    }
    if reduce.mean {
        let count = (x.data.len() / n.max(1)) as f64;
        for s in &mut sums {
            *s /= count;
        }
    }
    sums
}

fn conv2d(x: &FTensor, conv: &Conv, shape: &[usize]) -> Vec<f64> {
    let (c, h, w) = (x.shape[1], x.shape[2], x.shape[3]);
    let [oc, icg, kh, kw] = [
        conv.weight.shape[0],
        conv.weight.shape[1],
        conv.weight.shape[2],
        conv.weight.shape[3],
    ];
    let (oh, ow) = (shape[2], shape[3]);
    let per_group = oc / conv.groups;
    let mut out = vec![0.0; oc * oh * ow];
    for o in 0..oc {
        let plane = &mut out[o * oh * ow..(o + 1) * oh * ow];
        let bias = conv.bias.as_ref().map_or(0.0, |b| b[o]);
        plane.fill(bias);
        let group = o / per_group;
        for i in 0..icg {
            let channel = group * icg + i;
            debug_assert!(channel < c);
            let input = &x.data[channel * h * w..(channel + 1) * h * w];
            for ki in 0..kh {
                for kj in 0..kw {
                    let wv = conv.weight.data[((o * icg + i) * kh + ki) * kw + kj];
                    // Output columns q whose input column q·SW + kj·DW − PW lies in [0, W).
                    let offset = kj * conv.dilations[1];
                    let stride = conv.strides[1];
                    let q_lo = conv.pads[1].saturating_sub(offset).div_ceil(stride);
                    let q_hi = (w + conv.pads[1])
                        .checked_sub(offset)
                        .map_or(0, |limit| limit.div_ceil(stride))
                        .min(ow);
                    for p in 0..oh {
                        let row = (p * conv.strides[0] + ki * conv.dilations[0])
                            .checked_sub(conv.pads[0])
                            .filter(|&r| r < h);
                        let Some(row) = row else { continue };
                        let input_row = &input[row * w..(row + 1) * w];
                        let output_row = &mut plane[p * ow..(p + 1) * ow];
                        for (q, out) in output_row.iter_mut().enumerate().take(q_hi).skip(q_lo) {
                            *out += wv * input_row[q * stride + offset - conv.pads[1]];
                        }
                    }
                }
            }
        }
    }
    out
}

fn dense_layer(x: &FTensor, dense: &Dense, shape: &[usize]) -> Vec<f64> {
    let (m, n) = (shape[0], shape[1]);
    let k = dense.weight.shape[1];
    let mut out = Vec::with_capacity(m * n);
    for row in x.data.chunks(k.max(1)).take(m) {
        for j in 0..n {
            let weights = &dense.weight.data[j * k..(j + 1) * k];
            let start = dense.bias.as_ref().map_or(0.0, |b| b[j]);
            out.push(
                row.iter()
                    .zip(weights)
                    .fold(start, |sum, (&a, &b)| sum + a * b),
            );
        }
    }
    out
}

/// `alpha · A·B` (`A·Bᵀ` with `transpose_b`) over the last two axes, the leading axes broadcast;
/// each sum in the order of k, then multiplied by `alpha`.
fn matmul(a: &FTensor, b: &FTensor, transpose_b: bool, alpha: f64, shape: &[usize]) -> Vec<f64> {
    let rank = shape.len();
    let (m, n) = (shape[rank - 2], shape[rank - 1]);
    let k = a.shape[a.shape.len() - 1];
    let lead = &shape[..rank - 2];
    let matrices: usize = lead.iter().product();
    let (sa, sb) = (
        broadcast_strides(&a.shape[..a.shape.len() - 2], lead),
        broadcast_strides(&b.shape[..b.shape.len() - 2], lead),
    );
    let mut index = vec![0usize; lead.len()];
    let mut out = Vec::with_capacity(matrices * m * n);
    for _ in 0..matrices {
        let ia: usize = index.iter().zip(&sa).map(|(i, s)| i * s).sum();
        let ib: usize = index.iter().zip(&sb).map(|(i, s)| i * s).sum();
        let am = &a.data[ia * m * k..(ia + 1) * m * k];
        let bm = &b.data[ib * k * n..(ib + 1) * k * n];
        for row in 0..m {
            for col in 0..n {
                let mut sum = 0.0;
                for j in 0..k {
                    let bv = if transpose_b {
                        bm[col * k + j]
                    } else {
                        bm[j * n + col]
                    };
                    sum += am[row * k + j] * bv;
                }
                out.push(sum * alpha);
            }
        }
        for axis in (0..lead.len()).rev() {
            index[axis] += 1;
            if index[axis] < lead[axis] {
                break;
            }
            index[axis] = 0;
        }
    }
    out
}

/// Softmax over the last axis: e^(x − max) / Σ e^(x − max) over the kept elements, with
/// [`exp`]; with `causal`, element j of row i (of the last two axes, Tq × Tk) is left out
/// (0) where j > i + Tk − Tq; with `mask`, an element is left out where the mask (broadcast
/// to `x`) is 0; a row with nothing kept is 0.
fn softmax(x: &FTensor, causal: bool, mask: Option<&FTensor>) -> Vec<f64> {
    let keep: Option<Vec<f64>> = mask.map(|m| broadcast(x, m, &x.shape, |_, m| m));
    let rank = x.shape.len();
    let n = x.shape.last().copied().unwrap_or(1).max(1);
    let tq = if rank >= 2 {
        x.shape[rank - 2].max(1)
    } else {
        1
    };
    let mut out = Vec::with_capacity(x.data.len());
    for (r, row) in x.data.chunks(n).enumerate() {
        let i = r % tq;
        let kept = |j: usize| {
            (!causal || j + tq <= i + n) && keep.as_ref().is_none_or(|k| k[r * n + j] != 0.0)
        };
        let max = row
            .iter()
            .enumerate()
            .filter(|&(j, _)| kept(j))
            .fold(f64::NEG_INFINITY, |m, (_, &v)| m.max(v));
        let e: Vec<f64> = row
            .iter()
            .enumerate()
            .map(|(j, &v)| if kept(j) { exp(v - max) } else { 0.0 })
            .collect();
        let sum = e.iter().fold(0.0, |s, &v| s + v);
        out.extend(e.iter().map(|&v| if sum > 0.0 { v / sum } else { 0.0 }));
    }
    out
}

/// The rows of `table` at the ids of `ids`, an id outside the table taken at its nearest edge
/// (as the engine's `take`; the importer checks ids before it evaluates).
fn embedding(ids: &FTensor, table: &FTensor) -> Vec<f64> {
    let rows = table.shape[0];
    let width: usize = table.shape[1..].iter().product();
    let mut out = Vec::with_capacity(ids.data.len() * width);
    for &id in &ids.data {
        let row = (id.max(0.0) as usize).min(rows.saturating_sub(1));
        out.extend_from_slice(&table.data[row * width..(row + 1) * width]);
    }
    out
}

/// Layer normalization over the last axis (the mean and variance summed in order).
fn layer_norm(x: &FTensor, norm: &LayerNorm) -> Vec<f64> {
    let n = norm.gamma.len().max(1);
    let count = n as f64;
    let mut out = Vec::with_capacity(x.data.len());
    for row in x.data.chunks(n) {
        let mean = if norm.rms {
            0.0
        } else {
            row.iter().fold(0.0, |s, &v| s + v) / count
        };
        let variance = row.iter().fold(0.0, |s, &v| s + (v - mean) * (v - mean)) / count;
        let denominator = (variance + norm.epsilon).sqrt();
        for (j, &v) in row.iter().enumerate() {
            out.push((v - mean) / denominator * norm.gamma[j] + norm.beta[j]);
        }
    }
    out
}

fn pool2d(x: &FTensor, pool: &Pool, shape: &[usize], max: bool) -> Vec<f64> {
    let (h, w) = (x.shape[2], x.shape[3]);
    let (oh, ow) = (shape[2], shape[3]);
    let planes = shape[0] * shape[1];
    let area = (pool.kernel[0] * pool.kernel[1]) as f64;
    let mut out = Vec::with_capacity(planes * oh * ow);
    for plane in x.data.chunks(h * w).take(planes) {
        for p in 0..oh {
            for q in 0..ow {
                let mut best = f64::NEG_INFINITY;
                let mut sum = 0.0;
                for ki in 0..pool.kernel[0] {
                    let Some(r) = (p * pool.strides[0] + ki)
                        .checked_sub(pool.pads[0])
                        .filter(|&r| r < h)
                    else {
                        continue;
                    };
                    for kj in 0..pool.kernel[1] {
                        let Some(c) = (q * pool.strides[1] + kj)
                            .checked_sub(pool.pads[1])
                            .filter(|&c| c < w)
                        else {
                            continue;
                        };
                        let v = plane[r * w + c];
                        best = best.max(v);
                        sum += v;
                    }
                }
                out.push(if max { best } else { sum / area });
            }
        }
    }
    out
}

/// Row-major strides of `shape` as read by a broadcast to `out` (0 on broadcast axes).
fn broadcast_strides(shape: &[usize], out: &[usize]) -> Vec<usize> {
    let mut strides = vec![0; out.len()];
    let mut stride = 1;
    for i in (0..shape.len()).rev() {
        let axis = out.len() - shape.len() + i;
        strides[axis] = if shape[i] == 1 { 0 } else { stride };
        stride *= shape[i];
    }
    strides
}

fn broadcast(a: &FTensor, b: &FTensor, shape: &[usize], f: fn(f64, f64) -> f64) -> Vec<f64> {
    let (sa, sb) = (
        broadcast_strides(&a.shape, shape),
        broadcast_strides(&b.shape, shape),
    );
    let total: usize = shape.iter().product();
    let mut index = vec![0usize; shape.len()];
    let mut out = Vec::with_capacity(total);
    for _ in 0..total {
        let ia: usize = index.iter().zip(&sa).map(|(i, s)| i * s).sum();
        let ib: usize = index.iter().zip(&sb).map(|(i, s)| i * s).sum();
        out.push(f(a.data[ia], b.data[ib]));
        for axis in (0..shape.len()).rev() {
            index[axis] += 1;
            if index[axis] < shape[axis] {
                break;
            }
            index[axis] = 0;
        }
    }
    out
}

fn transpose(x: &FTensor, perm: &[usize], shape: &[usize]) -> Vec<f64> {
    let input_strides = broadcast_strides(&x.shape, &x.shape);
    let strides: Vec<usize> = perm.iter().map(|&p| input_strides[p]).collect();
    let permuted = FTensor {
        shape: shape.to_vec(),
        data: Vec::new(),
    };
    let total: usize = shape.iter().product();
    let mut index = vec![0usize; shape.len()];
    let mut out = Vec::with_capacity(total);
    for _ in 0..total {
        let at: usize = index.iter().zip(&strides).map(|(i, s)| i * s).sum();
        out.push(x.data[at]);
        for axis in (0..permuted.shape.len()).rev() {
            index[axis] += 1;
            if index[axis] < shape[axis] {
                break;
            }
            index[axis] = 0;
        }
    }
    out
}

fn concat(parts: &[&FTensor], axis: usize, shape: &[usize]) -> Vec<f64> {
    let outer: usize = shape[..axis].iter().product();
    let mut out = Vec::with_capacity(shape.iter().product());
    for o in 0..outer {
        for part in parts {
            let run: usize = part.shape[axis..].iter().product();
            out.extend_from_slice(&part.data[o * run..(o + 1) * run]);
        }
    }
    out
}

/// The box `slice` selects, of extents `shape`.
fn cut(x: &FTensor, slice: &Slice, shape: &[usize]) -> Vec<f64> {
    let rank = shape.len();
    let mut in_strides = vec![1; rank];
    let mut out_strides = vec![1; rank];
    for a in (0..rank.saturating_sub(1)).rev() {
        in_strides[a] = in_strides[a + 1] * x.shape[a + 1];
        out_strides[a] = out_strides[a + 1] * shape[a + 1];
    }
    (0..shape.iter().product::<usize>())
        .map(|flat| {
            let position: usize = (0..rank)
                .map(|a| {
                    let coordinate = (flat / out_strides[a]) % shape[a];
                    (slice.starts[a] + coordinate * slice.steps[a]) * in_strides[a]
                })
                .sum();
            x.data[position]
        })
        .collect()
}

fn pad(x: &FTensor, pads: [usize; 4], shape: &[usize]) -> Vec<f64> {
    let (h, w) = (x.shape[2], x.shape[3]);
    let (oh, ow) = (shape[2], shape[3]);
    let mut out = vec![0.0; shape.iter().product()];
    for (plane, target) in x.data.chunks(h * w).zip(out.chunks_mut(oh * ow)) {
        for r in 0..h {
            let at = (r + pads[0]) * ow + pads[1];
            target[at..at + w].copy_from_slice(&plane[r * w..(r + 1) * w]);
        }
    }
    out
}

/// ln 2 split so that k·LN2_HI is exact for |k| < 2^11 (fdlibm's constants).
const LN2_HI: f64 = 6.931_471_803_691_238e-1;
const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;

/// e^x from IEEE 754 basic operations only, so every machine computes the same bits: x is
/// k·ln 2 + r with |r| ≤ ln 2 / 2, e^r by its Taylor series to degree 14 (error below 2^−52 · e^r),
/// then scaled by 2^k. Inputs are clamped to [−700, 700], where 2^k stays a normal number.
pub fn exp(x: f64) -> f64 {
    let x = x.clamp(-700.0, 700.0);
    let k = (x * std::f64::consts::LOG2_E).round();
    let r = (x - k * LN2_HI) - k * LN2_LO;
    let mut sum = 1.0;
    for i in (1..=14u32).rev() {
        sum = 1.0 + r / f64::from(i) * sum;
    }
    // k is in [−1010, 1010]: 2^k is the normal number with exponent field k + 1023.
    let exponent = (k as i64 + 1023) as u64;
    sum * f64::from_bits(exponent << 52)
}

/// 1 / (1 + e^−x), from [`exp`].
pub fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + exp(-x))
}

/// `f(x)` for a tabled function, from [`exp`], [`ln`] and [`erf`].
pub fn function(f: Function, x: f64) -> f64 {
    match f {
        Function::Sigmoid => sigmoid(x),
        Function::Tanh => tanh(x),
        Function::Erf => erf(x),
        Function::LeakyRelu(alpha) => {
            if x >= 0.0 {
                x
            } else {
                alpha * x
            }
        }
        Function::Elu(alpha) => {
            if x > 0.0 {
                x
            } else {
                alpha * (exp(x) - 1.0)
            }
        }
        Function::HardSigmoid { alpha, beta } => (alpha * x + beta).clamp(0.0, 1.0),
        Function::HardSwish => x * (x / 6.0 + 0.5).clamp(0.0, 1.0),
        Function::Gelu { tanh: false } => 0.5 * x * (1.0 + erf(x / std::f64::consts::SQRT_2)),
        Function::Gelu { tanh: true } => {
            let inner = (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044_715 * x * x * x);
            0.5 * x * (1.0 + tanh(inner))
        }
        Function::Softplus => {
            if x > 36.0 {
                // ln(1 + e^x) = x + ln(1 + e^−x), and e^−36 is below x's last bit.
                x
            } else {
                ln(1.0 + exp(x))
            }
        }
    }
}

/// ln z for z > 0 from IEEE 754 basic operations only: z = m · 2^k with m in [1, 2) (exact,
/// from the bits), ln m = 2·atanh(t) with t = (m − 1)/(m + 1) ≤ 1/3 by its series to t^41
/// (the next term is below 2^−60), plus k · ln 2.
pub fn ln(z: f64) -> f64 {
    if z.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) || !z.is_finite() {
        return f64::NAN;
    }
    let (mut m, mut k) = (z, 0i32);
    // Subnormals first brought into the normal range.
    if m < f64::MIN_POSITIVE {
        m *= f64::from_bits(0x4350_0000_0000_0000); // 2^54
        k -= 54;
    }
    let bits = m.to_bits();
    k += ((bits >> 52) & 0x7ff) as i32 - 1023;
    m = f64::from_bits((bits & 0x000f_ffff_ffff_ffff) | 0x3ff0_0000_0000_0000);
    let t = (m - 1.0) / (m + 1.0);
    let t2 = t * t;
    let mut sum = 0.0;
    for n in (0..=20u32).rev() {
        sum = sum * t2 + 1.0 / f64::from(2 * n + 1);
    }
    let k = f64::from(k);
    2.0 * t * sum + (k * LN2_HI + k * LN2_LO)
}

/// erf x from IEEE 754 basic operations only: its Taylor series below |x| = 2.5 (terms to
/// x^121, the largest term about 10^3, so the error stays below 10^−12), above it 1 − erfc x
/// with erfc's continued fraction to depth 80, and ±1 from |x| = 6 (erfc 6 < 3·10^−17).
pub fn erf(x: f64) -> f64 {
    let a = x.abs();
    let value = if a >= 6.0 {
        1.0
    } else if a < 2.5 {
        // erf x = 2/√π Σ (−1)^n x^(2n+1) / (n! (2n+1)).
        let x2 = a * a;
        let mut term = a;
        let mut sum = a;
        for n in 1..=60u32 {
            term = -term * x2 / f64::from(n);
            sum += term / f64::from(2 * n + 1);
        }
        std::f64::consts::FRAC_2_SQRT_PI * sum
    } else {
        // erfc x = e^(−x²)/√π · 1/(x + (1/2)/(x + 1/(x + (3/2)/(x + …)))).
        let mut fraction = a;
        for n in (1..=80u32).rev() {
            fraction = a + f64::from(n) / 2.0 / fraction;
        }
        let erfc = exp(-a * a) / fraction * (std::f64::consts::FRAC_2_SQRT_PI / 2.0);
        1.0 - erfc
    };
    if x < 0.0 { -value } else { value }
}

/// tanh x = sign(x) · (1 − 2 / (e^{2|x|} + 1)), from [`exp`].
pub fn tanh(x: f64) -> f64 {
    let t = 1.0 - 2.0 / (exp(2.0 * x.abs()) + 1.0);
    if x < 0.0 { -t } else { t }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erf_and_ln_are_accurate() {
        // Reference values (correctly rounded, from mpmath) for a few points.
        let erfs = [
            (0.0, 0.0),
            (0.5, 0.520_499_877_813_046_5),
            (1.0, 0.842_700_792_949_714_9),
            (2.0, 0.995_322_265_018_952_7),
            (2.4999, 0.999_592_830_099_666_5),
            (2.5, 0.999_593_047_982_555),
            (3.5, 0.999_999_256_901_627_7),
            (-1.5, -0.966_105_146_475_310_7),
        ];
        for (x, expected) in erfs {
            assert!((erf(x) - expected).abs() < 1e-12, "erf({x}) = {}", erf(x));
        }
        let lns = [
            (1.0, 0.0),
            (2.0, std::f64::consts::LN_2),
            (10.0, std::f64::consts::LN_10),
            (0.001, -6.907_755_278_982_137),
            (1e300, 690.775_527_898_213_7),
        ];
        for (z, expected) in lns {
            assert!(
                (ln(z) - expected).abs() <= 1e-14 * expected.abs().max(1.0),
                "ln({z}) = {}",
                ln(z)
            );
        }
    }

    #[test]
    fn exp_is_accurate() {
        // Reference values (correctly rounded) for a few points.
        let cases = [
            (0.0, 1.0),
            (1.0, std::f64::consts::E),
            (-1.0, 0.367_879_441_171_442_33),
            (10.0, 22_026.465_794_806_718),
            (-20.5, 1.250_152_866_386_742_6e-9),
        ];
        for (x, want) in cases {
            let got = exp(x);
            assert!(
                ((got - want) / want).abs() < 4e-16,
                "exp({x}) = {got}, want {want}"
            );
        }
        assert!((sigmoid(0.0) - 0.5).abs() < 1e-16);
        assert!((tanh(0.5) - 0.462_117_157_260_009_74).abs() < 1e-15);
        assert_eq!(tanh(-0.5), -tanh(0.5));
    }
}
