//! Layer normalization and RMSNorm over the last axis: `layer_norm` turns each row of the
//! residual stream (int16 or int32 at a fine scale) into `γ · (x − μ) / √(σ² + ε) + β` at the
//! output's precision, with the row's statistics exact in wide integers and one fixed-point
//! reciprocal square root per row.

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;

use crate::attrs::{AttrKind, Attrs, in_range, spec};
use crate::error::Result;
use crate::fail;
use crate::fixed::isqrt_u64;
use crate::kernels::wide::wide_dot;
use crate::ops::common::io_usage;
use crate::ops::{Arity, Family, OpDef, Operator, Usage};
use crate::tensor::{MAX_PRECISION, TensorMut, TensorRef, TensorType, precision_bound};

/// Layer normalization (or RMSNorm) over the last axis:
/// `Y = clip(round(γ · (X − μ) / √(σ² + ε) / 2^k) + β, ±(2^(p−1) − 1))`.
///
/// - **Inputs**: `X` of rank ≥ 1 and any precision, its last axis of length N; `gamma` of
///   shape (N) and precision ≤ 16; `beta` of shape (N) and any precision.
/// - **Attributes**:
///
///   | name | kind | default | allowed values |
///   | --- | --- | --- | --- |
///   | `epsilon` | integer | 0 | [0, 2^31 − 1] |
///   | `rms` | boolean | false | |
///   | `shift` | integer | 0 | [0, 62] |
///   | `precision` | integer | 8 | [1, 32] |
///
///   E = `epsilon` is ε in units of 2^−16 of X's unit squared: for X at scale 2^−11 and a real
///   ε = 10^−5, E = round(10^−5 · 2^22 · 2^16) = 2749 (so ε/scale² = E/2^16 ≈ 41.9). With
///   `rms` the mean is not subtracted (RMSNorm). k = `shift` divides the result, so γ can
///   carry fraction bits; p = `precision` is the output's.
/// - **Output shape**: the shape of `X`.
/// - **Semantics**: for each row x_0 … x_(N−1) (every index of `X` but the last), with
///   everything below exact integers:
///   1. S = Σ x_j (S = 0 with `rms`) and Q = Σ x_j²; D_j = N·x_j − S; W' = 2^16·(N·Q − S²) +
///      N²·E. Then z_j = (x_j − μ)/√(σ² + ε) = D_j · 2^8/√W' (with `rms`, x_j/√(Q/N + ε)).
///   2. W' = 0 (a constant row and E = 0): every z_j is defined as 0, so Y_j = clip(β_j).
///   3. Otherwise W' is normalised by an even power of two: with b the bit length of W'
///      (2^(b−1) ≤ W' < 2^b) and e = b + (b mod 2) − 64 (even, in [−62, 64]), M = ⌊W' · 2^−e⌋
///      lies in [2^62, 2^64). The row's reciprocal square root is r = round(√(2^124 / M)),
///      the nearest integer to 2^62/√M, a half rounding up, in [2^30, 2^31]; it is computed as
///      s = ⌊√⌊2^124 / M⌋⌋ (exact integer Newton) and r = s + 1 if (2s + 1)²·M ≤ 2^126,
///      else s.
///   4. Y_j = clip(R(γ_j · D_j · r, 54 + e/2 + k) + β_j, −α, α), α = 2^(p−1) − 1, where
///      R(v, m) is v/2^m rounded to the nearest integer, halves away from zero: the one
///      rounding of each element.
/// - **Accuracy**: before the clip, |Y_j − (γ_j·z_j/2^k + β_j)| ≤ 0.5 + |γ_j·z_j/2^k| · 2^−30
///   (r's rounding is at most 2^−31 relative and M's truncation 2^−62).
///   `engine/tests/layer_norm_accuracy.rs` measures it against f64.
/// - **Output precision**: the `precision` attribute.
/// - **Rounding and overflow**: one rounding per element, as above. |S| ≤ 2^57, Q < 2^88 and
///   |D_j| < 2^58 for N ≤ 2^26; |γ_j · r| < 2^46, so γ_j · D_j · r is exact in `i128` (below
///   2^104). W' ≤ N² · (2^16 · (2^(pX−1) − 1)² + E), which must fit 128 bits (checked at
///   validation); the rounded term is at most |γ_j|·√N·(1 + 2^−30) + 1 and the clip makes the
///   result fit.
/// - **Errors**, in order:
///   1. `epsilon` outside [0, 2^31 − 1], `shift` outside [0, 62], `precision` outside [1, 32]:
///      `AttributeOutOfRange`.
///   2. `gamma` or `beta` not of rank 1, or of different lengths: `ShapeMismatch`.
///   3. `gamma` of precision above 16: `PrecisionConstraint`.
///   4. `X` of rank 0, or its last axis not the length of `gamma`: `ShapeMismatch`.
///   5. N² · (2^16 · (2^(pX−1) − 1)² + E) ≥ 2^128, so that W' might not fit 128 bits (within
///      the limit of 2^26 elements per tensor, only rows of more than 2^25 elements at
///      precision 32): `PrecisionConstraint`.
///
///   Nothing fails while running.
/// - **Gas**: the elements read (`X`, `gamma`, `beta`) and written, and one evaluation per row
///   (its reciprocal square root).
pub const LAYER_NORM: OpDef = OpDef {
    code: 402,
    name: "layer_norm",
    family: Family::Transformer,
    arity: Arity::Exactly(3),
    outputs: 1,
    attrs: &[
        spec("epsilon", AttrKind::Int),
        spec("rms", AttrKind::Bool),
        spec("shift", AttrKind::Int),
        spec("precision", AttrKind::Int),
    ],
    build: LayerNorm::build,
};

/// Bits of 2^16 in W' = 2^16 · W: ε has 16 fraction bits.
const EPSILON_BITS: u32 = 16;
/// Bits of M's range [2^62, 2^64) after normalisation.
const NORM_BITS: u32 = 64;
/// r = round(√(2^RSQRT_BITS / M)), about 2^62/√M.
const RSQRT_BITS: u32 = 124;
/// The shift of γ · D · r before e/2 and k: 62 (r's scale) − 8 (√(2^16)).
const BASE_SHIFT: i32 = 54;
/// |γ · D · r| < 2^104, so a rounding by 2^105 or more gives 0.
const ZERO_SHIFT: u32 = 105;

/// Layer normalization over the last axis, and RMSNorm.
///
/// Its contract is the doc comment of the row that builds it.
#[derive(Clone, Copy, Debug)]
pub struct LayerNorm {
    epsilon: u32,
    rms: bool,
    shift: u32,
    precision: u8,
}

/// What a row needs once its statistics are known: for every element,
/// Y_j = clip(R(γ_j · r · D_j, shift) + β_j).
#[derive(Clone, Copy, Debug)]
struct RowConstants {
    /// S (0 with `rms`).
    sum: i64,
    /// r, or 0 for W' = 0 (then every term is 0).
    rsqrt: i64,
    /// 54 + e/2 + k, at most [`ZERO_SHIFT`] (a larger one rounds every term to 0, as r = 0).
    shift: u32,
}

impl LayerNorm {
    fn build(attrs: &Attrs<'_>, _inputs: usize) -> Result<Box<dyn Operator>> {
        Ok(Box::new(LayerNorm {
            epsilon: in_range(
                "epsilon",
                attrs.int_or("epsilon", 0),
                0,
                i64::from(i32::MAX),
            )?,
            rms: attrs.bool_or("rms", false),
            shift: in_range("shift", attrs.int_or("shift", 0), 0, 62)?,
            precision: in_range(
                "precision",
                attrs.int_or("precision", 8),
                1,
                i64::from(MAX_PRECISION),
            )?,
        }))
    }

    /// Step 1 to 3 of the semantics for one row: S, Q, W', its normalisation and r.
    fn row_constants(self, row: &[i32]) -> Result<RowConstants> {
        let n = row.len() as i64;
        // |S| ≤ 2^26 · 2^31: no i64 wraps (the sum is written unwrapped so it vectorises).
        let sum = if self.rms {
            0
        } else {
            row.iter().fold(0i64, |s, &x| s.wrapping_add(i64::from(x)))
        };
        let squares = wide_dot(row, row).unsigned_abs();
        let n = n.unsigned_abs() as u128;
        let overflow = || fail!(IntegerOverflow, "layer_norm: the row's W' exceeds 128 bits");
        // N·Q − S² ≥ 0 (Cauchy–Schwarz); validation bounded W' below 2^128.
        let spread = n
            .checked_mul(squares)
            .and_then(|nq| nq.checked_sub(u128::from(sum.unsigned_abs()).pow(2)))
            .ok_or_else(overflow)?;
        let w = spread
            .checked_mul(1 << EPSILON_BITS)
            .and_then(|w| w.checked_add(n * n * u128::from(self.epsilon)))
            .ok_or_else(overflow)?;
        if w == 0 {
            return Ok(RowConstants {
                sum,
                rsqrt: 0,
                shift: 0,
            });
        }
        let bits = 128 - w.leading_zeros();
        let even = (bits + (bits & 1)) as i32 - NORM_BITS as i32;
        let m = if even >= 0 {
            w >> even
        } else {
            w << even.unsigned_abs()
        };
        // m lies in [2^62, 2^64) (step 3), so ⌊2^124/m⌋ ≤ 2^62 and s ≤ 2^31.
        let m = u64::try_from(m).map_err(|_| overflow())?;
        let root = u128::from(isqrt_u64(
            ((1u128 << RSQRT_BITS) / u128::from(m.max(1))) as u64,
        ));
        let twice = 2 * root + 1;
        // (2s + 1)² · m ≤ 2^126 + 2^66: no overflow.
        let rsqrt = if twice * twice * u128::from(m) <= 1 << (RSQRT_BITS + 2) {
            root + 1
        } else {
            root
        };
        let shift = BASE_SHIFT + even / 2 + self.shift as i32;
        Ok(RowConstants {
            sum,
            rsqrt: rsqrt as i64,
            shift: (shift as u32).min(ZERO_SHIFT),
        })
    }
}

impl Operator for LayerNorm {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let [x, gamma, beta] = inputs else {
            return Err(fail!(ArityMismatch, "layer_norm takes X, gamma and beta"));
        };
        let length = match (gamma.dims(), beta.dims()) {
            ([g], [b]) if g == b => *g,
            _ => {
                return Err(fail!(
                    ShapeMismatch,
                    "gamma {} and beta {} must be vectors of one length",
                    gamma.shape,
                    beta.shape
                ));
            }
        };
        if gamma.precision > 16 {
            return Err(fail!(
                PrecisionConstraint,
                "gamma of precision {} exceeds 16",
                gamma.precision
            ));
        }
        if x.dims().last() != Some(&length) {
            return Err(fail!(
                ShapeMismatch,
                "X {} must end with an axis of length {length} (gamma's)",
                x.shape
            ));
        }
        // W' ≤ N² · (2^16 · α² + E) must fit 128 bits.
        let alpha = precision_bound(x.precision).unsigned_abs();
        let n = u128::from(length);
        let fits = (u128::from(alpha) * u128::from(alpha))
            .checked_mul(1 << EPSILON_BITS)
            .and_then(|v| v.checked_add(u128::from(self.epsilon)))
            .and_then(|v| v.checked_mul(n * n));
        if fits.is_none() {
            return Err(fail!(
                PrecisionConstraint,
                "rows of {length} elements of precision {} are too wide for layer_norm's 128-bit sums",
                x.precision
            ));
        }
        Ok(vec![TensorType {
            shape: x.shape.clone(),
            precision: self.precision,
        }])
    }

    fn usage(&self, inputs: &[TensorType], outputs: &[TensorType]) -> Result<Usage> {
        let mut usage = io_usage(inputs, outputs)?;
        let elements = inputs.first().map_or(0, |x| x.shape.elements());
        let length = inputs
            .get(1)
            .map_or(0, |gamma| gamma.shape.elements())
            .max(1);
        usage.work.evals = elements / length;
        Ok(usage)
    }

    fn writes_every_output(&self) -> bool {
        true
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        let ([x, gamma, beta], [y]) = (inputs, outputs) else {
            return Err(fail!(ArityMismatch, "layer_norm takes X, gamma and beta"));
        };
        let n = gamma.data.len();
        if n == 0 {
            return Ok(());
        }
        let bound = precision_bound(self.precision);
        let n_i64 = n as i64;
        for (x_row, y_row) in x.data.chunks_exact(n).zip(y.data.chunks_exact_mut(n)) {
            let row = self.row_constants(x_row)?;
            write_row(y_row, x_row, gamma.data, beta.data, n_i64, row, bound);
        }
        Ok(())
    }
}

/// Step 4 for one row, on magnitudes: R(v, s) = sign(v) · ⌊(|v| + 2^(s−1)) / 2^s⌋ (halves away
/// from zero; s = 0 only with r = 0, where every v is 0). Nothing can wrap: |N·x − S| < 2^58,
/// |γ| · r < 2^46, their product is below 2^104 and the half added below 2^105, so the
/// operations are written unchecked and the loop has no branch.
#[inline(never)]
fn write_row(
    y_row: &mut [i32],
    x_row: &[i32],
    gamma: &[i32],
    beta: &[i32],
    n: i64,
    row: RowConstants,
    bound: i64,
) {
    let shift = row.shift;
    let half = if shift == 0 { 0 } else { 1u128 << (shift - 1) };
    let rsqrt = row.rsqrt.unsigned_abs();
    for (((y, &x), &g), &b) in y_row.iter_mut().zip(x_row).zip(gamma).zip(beta) {
        let deviation = i64::from(x).wrapping_mul(n).wrapping_sub(row.sum);
        let scale = u64::from(g.unsigned_abs()).wrapping_mul(rsqrt);
        let magnitude =
            (product(scale, deviation.unsigned_abs()).wrapping_add(half) >> shift) as i64;
        // The sign of γ · D (r > 0); |magnitude| < 2^29 and |β| < 2^31.
        let negative = (i64::from(g) ^ deviation) >> 63;
        let rounded = (magnitude ^ negative).wrapping_sub(negative);
        let value = rounded.wrapping_add(i64::from(b));
        *y = value.clamp(-bound, bound) as i32;
    }
}

/// a · b exactly for a < 2^46 and b < 2^58, from four products of 32-bit halves: wasm has no
/// 64 × 64 → 128-bit multiplication, and a `u128` product is a call to a software routine
/// there.
#[inline(always)]
fn product(a: u64, b: u64) -> u128 {
    const LOW: u64 = 0xFFFF_FFFF;
    let (a1, a0) = (a >> 32, a & LOW);
    let (b1, b0) = (b >> 32, b & LOW);
    // a0·b0 < 2^64; a0·b1 + a1·b0 < 2^58 + 2^46; a1·b1 < 2^40.
    let low = a0.wrapping_mul(b0);
    let middle = a0.wrapping_mul(b1).wrapping_add(a1.wrapping_mul(b0));
    let high = a1.wrapping_mul(b1);
    (u128::from(high) << 64)
        .wrapping_add(u128::from(middle) << 32)
        .wrapping_add(u128::from(low))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;

    fn types(n: u32, x_precision: u8) -> Vec<TensorType> {
        vec![
            TensorType::new(vec![n], x_precision),
            TensorType::new(vec![n], 16),
            TensorType::new(vec![n], 32),
        ]
    }

    /// Error 5: W' must fit 128 bits, which only rows of more than 2^25 elements at precision
    /// 32 can break.
    /// The four-product multiplication against `u128`'s, at the edges of its operands.
    #[test]
    fn products_are_exact() {
        let edges = [
            0u64,
            1,
            0xFFFF_FFFF,
            1 << 32,
            (1 << 46) - 1,
            (1 << 58) - 1,
            0x2D41_3CCC_FE77,
        ];
        for &a in &edges[..6] {
            for &b in &edges {
                assert_eq!(product(a, b), u128::from(a) * u128::from(b), "{a} · {b}");
            }
        }
    }

    #[test]
    fn rows_whose_sums_exceed_128_bits_are_refused() {
        let op = LayerNorm {
            epsilon: i32::MAX as u32,
            rms: false,
            shift: 0,
            precision: 8,
        };
        assert!(op.infer(&types(1 << 25, 32)).is_ok());
        assert!(op.infer(&types(1 << 26, 31)).is_ok());
        let refused = op.infer(&types((1 << 25) + 1, 32)).map(|_| ());
        assert_eq!(
            refused.map_err(|e| e.code),
            Err(ErrorCode::PrecisionConstraint)
        );
    }

    /// A row at the edge of precision 32 under the largest ε normalises with r in [2^30, 2^31].
    #[test]
    fn an_edge_row_normalises() {
        let op = LayerNorm {
            epsilon: i32::MAX as u32,
            rms: true,
            shift: 0,
            precision: 8,
        };
        let row = vec![i32::MAX; 1 << 12];
        let constants = op.row_constants(&row).map_err(|e| e.code);
        assert!(constants.is_ok_and(|c| (1 << 30..=1 << 31).contains(&c.rsqrt)));
    }
}
