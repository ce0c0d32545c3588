//! Softmax over the last axis, for attention: the int32 scores of a product Q·Kᵀ (real score
//! X · m / 2^s) become probabilities at the scale 2^−(p−1), ready for the next product as int8
//! (p = 8) or int16, with a keep mask, a causal mask, and an exponential in fixed point that
//! costs a table lookup and a cubic instead of a correctly rounded series.

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;

use crate::attrs::{AttrKind, Attrs, in_range, spec};
use crate::error::Result;
use crate::fail;
use crate::ops::common::{count, io_usage, walk};
use crate::ops::transformer::exponential::{LOG2_E_Q31, exponential};
use crate::ops::{Arity, Family, OpDef, Operator, Usage};
use crate::tensor::{TensorMut, TensorRef, TensorType};

/// Softmax over the last axis: `Y_j ≈ 2^(p−1) · exp(x_j) / Σ_k exp(x_k)` over the kept
/// elements of each row, with the real scores x = X · m / 2^s.
///
/// - **Inputs**: `X` of rank ≥ 1 and any precision (the scores, typically the int32 sums of
///   Q·Kᵀ, shape (…, Tq, Tk)); optionally `mask`, a keep mask that broadcasts to the shape of
///   `X` (rank ≤ rank of `X`, aligned at the right, each dimension 1 or equal to `X`'s): an
///   element is kept where the mask is not 0 and masked where it is 0 (the `attention_mask`
///   of tokenizers; an additive mask of 0 and −∞ is the same thing). A finite additive bias
///   (ALiBi, relative positions) is not a mask: add it to the scores first (`elemwise_add`,
///   `broadcast_add`).
/// - **Attributes**:
///
///   | name | kind | default | allowed values |
///   | --- | --- | --- | --- |
///   | `multiplier` | integer | 1 | [1, 2^31 − 1] |
///   | `shift` | integer | 0 | [0, 62] |
///   | `causal` | boolean | false | true needs rank ≥ 2 |
///   | `precision` | integer | 8 | [2, 16] |
///
/// - **Output shape**: the shape of `X`.
/// - **Semantics**: m = `multiplier`, s = `shift`, p = `precision`; every row is the last
///   axis at one index of the others. R(v, k) = ⌊(v + 2^(k−1)) / 2^k⌋ for v ≥ 0 and k ≥ 1,
///   R(v, 0) = v (nearest, halves up; every value rounded here is non-negative).
///   1. *Kept elements.* Element j of a row is kept when the mask (if given) is not 0 there
///      and, if `causal`, j ≤ i + (Tk − Tq) on the last two axes (i the index on axis −2, Tq
///      and Tk the last two dimensions), so that a block of queries at the end of a longer
///      key sequence sees every key up to its own position; with Tk < Tq the first Tq − Tk
///      rows keep nothing. A row with no kept element is all 0.
///   2. *Differences.* μ = the largest kept X_j; d_j = μ − X_j (exact, 0 ≤ d_j < 2^32).
///   3. *Exponent.* u_j = R(d_j · m · L, s + 1) with L = 3098164009 (log2(e) · 2^31,
///      rounded): the base-2 exponent d_j · m · log2(e) / 2^s in Q30, from an exact product
///      below 2^95. If u_j ≥ 32 · 2^30, e_j = 0 (which the next step would give too).
///   4. *Exponential.* n = ⌊u_j / 2^30⌋, f = u_j − n · 2^30, t = ⌊f / 2^24⌋ (0..=63),
///      r = f − t · 2^24; T_t = 2^30 · 2^(−t/64) rounded to the nearest integer (T_0 =
///      1073741824, T_1 = 1062175491, …, T_63 = 542717053); z = R(r · 2977044472, 32) (r · ln 2
///      in Q30: 2977044472 = ln 2 · 2^32, rounded); w₁ = 2^30 − R(z · 1431655765, 32)
///      (1431655765 = 2^32 / 3, rounded); w₂ = 2^30 − R(z · w₁, 31); w₃ = 2^30 − R(z · w₂, 30)
///      (Horner's form of 1 − z + z²/2 − z³/6); E = R(T_t · w₃, 30) ≈ 2^30 · 2^(−f/2^30);
///      e_j = R(E, n). A masked element has e_j = 0; the largest kept element has d = 0 and
///      e = 2^30 exactly.
///   5. *Normalisation.* Σ = Σ_j e_j (exact; at most 2^26 elements of at most 2^30, below
///      2^56) and Y_j = min(R'(2^(p−1) · e_j, Σ), 2^(p−1) − 1), where R'(v, Σ) = ⌊(2v + Σ) /
///      (2Σ)⌋ is v / Σ rounded to the nearest integer, halves up: one exact integer division
///      per element. The clip bites only where the probability exceeds 1 − 2^−p (one score
///      dominating its row); a masked element gives 0.
/// - **Accuracy**: with δ_j = d_j · m / 2^s, |e_j − 2^30 · e^(−δ_j)| ≤ 4 for every kept
///   element (the table's rounding 0.5, the cubic's truncation z⁴/24 < 0.62 for z < ln 2 / 64,
///   the four roundings of the cubic and of E about 2, L's and u's rounding below 0.42, and
///   R(E, n)'s 0.5). Hence, before the clip, for a row of K kept elements and its real softmax
///   P_j = e^(−δ_j) / Σ_k e^(−δ_k), |Y_j − 2^(p−1) · P_j| ≤ 0.5 + 2^(p−1) · 4 · (1 + K · P_j)
///   / 2^30 ≤ 0.5 + 2^(p+1) · (K + 1) / 2^30: 0.5 + 2^−7 for p = 16 and rows of 1024.
///   Σ_j Y_j is within K/2 + 2^(p+1) · (K + 1) / 2^30 of 2^(p−1) (each quotient's rounding).
///   `engine/tests/softmax_accuracy.rs` measures both against f64, with the real scores
///   spread over 0 to 30 and random and causal masks.
/// - **Output precision**: p (0 ≤ Y < 2^(p−1)).
/// - **Rounding and overflow**: each step rounds once as stated; every product is exact (the
///   exponent's below 2^95, the others below 2^62) and Σ below 2^56, so nothing can overflow
///   and nothing fails while running.
/// - **Errors**, in order: `multiplier` outside [1, 2^31 − 1], `shift` outside [0, 62],
///   `precision` outside [2, 16]: `AttributeOutOfRange`; `X` of rank 0, `causal` with `X` of
///   rank < 2, or a `mask` that does not broadcast to `X`'s shape: `ShapeMismatch`.
/// - **Gas**: the elements read (`X` and `mask`) and written, and one evaluation (an
///   exponential) per element of `X`.
pub const SOFTMAX: OpDef = OpDef {
    code: 401,
    name: "softmax",
    family: Family::Transformer,
    arity: Arity::Between(1, 2),
    outputs: 1,
    attrs: &[
        spec("causal", AttrKind::Bool),
        spec("multiplier", AttrKind::Int),
        spec("precision", AttrKind::Int),
        spec("shift", AttrKind::Int),
    ],
    build: Softmax::build,
};

/// Softmax over the last axis at a real scale, with an optional keep mask and causal mask.
///
/// Its contract is the doc comment of the row that builds it.
#[derive(Clone, Copy, Debug)]
pub struct Softmax {
    /// m · L, below 2^63: the exponent's exact multiplier.
    exponent_multiplier: u64,
    shift: u32,
    causal: bool,
    precision: u8,
}

impl Softmax {
    fn build(attrs: &Attrs<'_>, _inputs: usize) -> Result<Box<dyn Operator>> {
        let multiplier: u32 = in_range(
            "multiplier",
            attrs.int_or("multiplier", 1),
            1,
            i64::from(i32::MAX),
        )?;
        let shift = in_range("shift", attrs.int_or("shift", 0), 0, 62)?;
        let precision = in_range("precision", attrs.int_or("precision", 8), 2, 16)?;
        Ok(Box::new(Softmax {
            // m < 2^31 and L < 2^32.
            exponent_multiplier: u64::from(multiplier) * LOG2_E_Q31,
            shift,
            causal: attrs.bool_or("causal", false),
            precision,
        }))
    }
}

/// How one row's elements are masked: which positions the keep mask covers, and the causal
/// end (positions from it on are masked).
#[derive(Clone, Copy)]
enum RowMask<'a> {
    /// No keep mask: positions before the causal end are kept.
    None,
    /// One mask value for the whole row (the mask's last dimension is 1).
    Whole(i32),
    /// One mask value per position.
    Each(&'a [i32]),
}

impl Softmax {
    /// One row: the exponentials into `y` (each at most 2^30, so they fit `i32`), their sum,
    /// then the rounded quotients in place.
    fn row(self, x: &[i32], mask: RowMask<'_>, causal_end: usize, y: &mut [i32]) {
        let end = causal_end.min(x.len()).min(y.len());
        let (x, _) = x.split_at(end);
        let (y, masked) = y.split_at_mut(end);
        masked.fill(0);
        let mask = match mask {
            RowMask::Whole(0) => {
                y.fill(0);
                return;
            }
            RowMask::Whole(_) | RowMask::None => None,
            RowMask::Each(values) => Some(values.get(..end).unwrap_or(&[])),
        };
        // Pass 1: the largest kept score.
        let max = match mask {
            None => x.iter().copied().max(),
            Some(keep) => x
                .iter()
                .zip(keep)
                .filter(|&(_, &k)| k != 0)
                .map(|(&v, _)| v)
                .max(),
        };
        let Some(max) = max else {
            y.fill(0);
            return;
        };
        // Pass 2: the exponentials and their sum (at most 2^26 · 2^30: it cannot wrap).
        let (c, shift) = (self.exponent_multiplier, self.shift);
        let mut sum = 0u64;
        match mask {
            None => {
                for (out, &v) in y.iter_mut().zip(x) {
                    let e = exponential(i64::from(max).wrapping_sub(i64::from(v)) as u64, c, shift);
                    sum = sum.wrapping_add(e);
                    *out = e as i32;
                }
            }
            Some(keep) => {
                for ((out, &v), &k) in y.iter_mut().zip(x).zip(keep) {
                    let d = i64::from(max).wrapping_sub(i64::from(v)).max(0) as u64;
                    let e = if k != 0 { exponential(d, c, shift) } else { 0 };
                    sum = sum.wrapping_add(e);
                    *out = e as i32;
                }
            }
        }
        // Pass 3: Y = min(⌊(2 · 2^(p−1) · e + Σ) / (2Σ)⌋, 2^(p−1) − 1); Σ ≥ 2^30.
        let bound = (1u64 << (self.precision - 1)) - 1;
        let divisor = 2 * sum;
        for out in y.iter_mut() {
            let numerator = ((*out as u64) << self.precision).wrapping_add(sum);
            *out = (numerator / divisor).min(bound) as i32;
        }
    }
}

/// Strides (in elements) that read a mask of dimensions `mask` at the coordinates of a tensor
/// of dimensions `dims` it broadcasts to: 0 along its broadcast and missing axes.
fn mask_strides(mask: &[u32], dims: &[u32]) -> Vec<usize> {
    let offset = dims.len().saturating_sub(mask.len());
    let mut strides = vec![0usize; dims.len()];
    let mut stride = 1usize;
    for (axis, &dim) in mask.iter().enumerate().rev() {
        if dim != 1
            && let Some(slot) = strides.get_mut(axis + offset)
        {
            *slot = stride;
        }
        stride *= dim as usize;
    }
    strides
}

impl Operator for Softmax {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let x = &inputs[0];
        let rank = x.shape.rank();
        if rank == 0 {
            return Err(fail!(ShapeMismatch, "X must have rank at least 1"));
        }
        if self.causal && rank < 2 {
            return Err(fail!(
                ShapeMismatch,
                "causal needs X of rank at least 2, got shape {}",
                x.shape
            ));
        }
        if let Some(mask) = inputs.get(1) {
            let fits = mask.shape.rank() <= rank
                && mask
                    .dims()
                    .iter()
                    .rev()
                    .zip(x.dims().iter().rev())
                    .all(|(&m, &d)| m == 1 || m == d);
            if !fits {
                return Err(fail!(
                    ShapeMismatch,
                    "mask of shape {} does not broadcast to X of shape {}",
                    mask.shape,
                    x.shape
                ));
            }
        }
        Ok(vec![TensorType {
            shape: x.shape.clone(),
            precision: self.precision,
        }])
    }

    fn usage(&self, inputs: &[TensorType], outputs: &[TensorType]) -> Result<Usage> {
        let mut usage = io_usage(inputs, outputs)?;
        usage.work.evals = count(&[inputs[0].shape.elements()])?;
        Ok(usage)
    }

    fn writes_every_output(&self) -> bool {
        true
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        let x = &inputs[0];
        let dims = x.dims;
        let Some((&width, outer)) = dims.split_last() else {
            return Ok(());
        };
        let width = width as usize;
        if width == 0 || outer.contains(&0) {
            return Ok(());
        }
        let queries = if self.causal {
            outer.last().map_or(1, |&q| q as usize)
        } else {
            1
        };
        let keys = width;
        let mask = inputs.get(1);
        let strides = mask.map(|m| mask_strides(m.dims, dims));
        let (outer_strides, last_stride) = match &strides {
            Some(strides) => {
                let (last, outer) = strides.split_last().unwrap_or((&0, &[]));
                (outer.to_vec(), *last)
            }
            None => (vec![0; outer.len()], 0),
        };
        let mut rows = x
            .data
            .chunks_exact(width)
            .zip(outputs[0].data.chunks_exact_mut(width))
            .enumerate();
        walk(outer, [&outer_strides], |[offset]| {
            let Some((index, (x_row, y_row))) = rows.next() else {
                return Ok(());
            };
            let row_mask = match mask {
                None => RowMask::None,
                Some(m) if last_stride == 0 => {
                    RowMask::Whole(m.data.get(offset).copied().unwrap_or(0))
                }
                Some(m) => RowMask::Each(m.data.get(offset..offset + width).ok_or_else(|| {
                    fail!(ShapeMismatch, "mask holds fewer elements than its shape")
                })?),
            };
            let causal_end = if self.causal {
                // j ≤ i + (Tk − Tq): the first i + Tk − Tq + 1 positions, clamped to [0, Tk].
                let i = index % queries;
                (i + keys + 1).saturating_sub(queries).min(keys)
            } else {
                keys
            };
            self.row(x_row, row_mask, causal_end, y_row);
            Ok(())
        })
    }
}
