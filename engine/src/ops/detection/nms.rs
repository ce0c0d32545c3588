//! Vision operators of spec 001 ("Vision Operators"): `get_valid_counts`, `non_max_suppression`.
//!
//! Inputs are (B, N, K) tensors of detections whose row holds an id (column 0), a score
//! (column 1) and, for NMS, a box as corners x1, y1, x2, y2 (columns 2..5). Every comparison
//! is exact integer arithmetic; the IoU test is cross-multiplied in i128, never divided.

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;

use crate::attrs::{AttrKind, Attrs, in_range, spec};
use crate::error::Result;
use crate::fail;
use crate::ops::common::{count, expect_rank, io_usage, output_precision};
use crate::ops::{Arity, Family, OpDef, Operator, Usage};
use crate::tensor::{TensorMut, TensorRef, TensorType, bit_width};

/// Least precision that holds the −1 written into unused rows.
const FILL_PRECISION: u8 = 2;

/// Keep the rows whose score exceeds a threshold (spec 001 "get_valid_count", registered as
/// `get_valid_counts`). This is the only operator with two outputs: in text models `g:0` is
/// `valid_count` and `g:1` is `Y` for a node `g`.
///
/// - **Inputs**: `X` (B, N, K) with 2 ≤ K ≤ 31 (the deployed runtime rejects K = 32).
/// - **Attributes**:
///
///   | name | kind | default | allowed values |
///   | --- | --- | --- | --- |
///   | `score_threshold` | integer | 0 | [−2^31, 2^31 − 1] |
///
/// - **Output shapes**: `valid_count` (B); `Y` (B, N, K).
/// - **Semantics**: per batch b, `valid_count[b]` is the number of rows n with
///   X[b, n, 1] > `score_threshold`; `Y[b]` holds those rows, whole and in their original order,
///   followed by rows of −1 up to N.
/// - **Output precision**: `valid_count` nprec(N·K) = bits(N·K + 1) + 1 (cvm-compat §3); `Y`
///   max(pX, 2) (decision 19; cvm-compat §3 gives pX).
/// - **Rounding and overflow**: none possible.
/// - **Errors**, in order:
///   1. `score_threshold` outside [−2^31, 2^31 − 1]: `AttributeOutOfRange`.
///   2. `X` not of rank 3: `ShapeMismatch`.
///   3. K outside [2, 32]: `ShapeMismatch` (decision 27).
pub const GET_VALID_COUNTS: OpDef = OpDef {
    code: 70,
    name: "get_valid_counts",
    family: Family::Vision,
    arity: Arity::Exactly(1),
    outputs: 2,
    attrs: &[spec("score_threshold", AttrKind::Int)],
    build: |attrs, _| {
        let threshold = attrs.int_or("score_threshold", 0);
        let bound = i64::from(i32::MAX);
        Ok(Box::new(GetValidCounts {
            score_threshold: in_range("score_threshold", threshold, -bound - 1, bound)?,
        }))
    },
};

/// Keeps the rows whose score exceeds a threshold (spec 001 "get_valid_count", registered as
/// `get_valid_counts`).
///
/// Its contract (inputs, shapes, precision, errors) is the doc comment of the row that
/// builds it.
#[derive(Debug)]
pub struct GetValidCounts {
    score_threshold: i32,
}

impl Operator for GetValidCounts {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let data = &inputs[0];
        expect_rank(data, 3, "data")?;
        let [batches, rows, width] = [data.dims()[0], data.dims()[1], data.dims()[2]];
        if !(2..=31).contains(&width) {
            return Err(fail!(
                ShapeMismatch,
                "rows must have 2 to 31 entries (id, score, …; the deployed runtime's bound), got {width}"
            ));
        }
        let count_precision =
            output_precision(bit_width(u64::from(rows) * u64::from(width) + 1) + 1)?;
        Ok(vec![
            TensorType::new([batches], count_precision),
            TensorType::new([batches, rows, width], data.precision.max(FILL_PRECISION)),
        ])
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        let width = inputs[0].dims[2] as usize;
        let rows = inputs[0].dims[1] as usize;
        let (counts, rest) = outputs.split_at_mut(1);
        let selected = &mut *rest[0].data;
        selected.fill(-1);
        for ((batch, count), out_batch) in inputs[0]
            .data
            .chunks_exact((rows * width).max(1))
            .zip(counts[0].data.iter_mut())
            .zip(selected.chunks_exact_mut((rows * width).max(1)))
        {
            let mut kept = 0usize;
            for row in batch.chunks_exact(width) {
                if row[1] > self.score_threshold {
                    out_batch[kept * width..(kept + 1) * width].copy_from_slice(row);
                    kept += 1;
                }
            }
            *count = kept as i32;
        }
        Ok(())
    }
}

/// Greedy non-maximum suppression per batch (spec 001 "non_max_suppression").
///
/// - **Inputs**: `X` (B, N, 6), rows (id, score, x1, y1, x2, y2); `valid_count` (B) of any
///   precision.
/// - **Attributes**:
///
///   | name | kind | default | allowed values |
///   | --- | --- | --- | --- |
///   | `coord_start` | integer | 2 | only 2 |
///   | `force_suppress` | boolean | false | |
///   | `id_index` | integer | 0 | only 0 |
///   | `invalid_to_bottom` | boolean | true | only true |
///   | `iou_threshold` | integer (percent) | 50 | [1, 2^31 − 1]; 101 and above never suppress |
///   | `max_output_size` | integer | −1 | negative: no limit; else [0, 2^32 − 1] |
///   | `return_indices` | boolean | false | only false |
///   | `score_index` | integer | 1 | only 1 |
///   | `top_k` | integer | −1 | negative: no limit; else [0, 2^32 − 1] |
///
/// - **Output shape**: (B, N, 6).
/// - **Semantics**, per batch b (every batch, decision 26), with t = `iou_threshold`:
///   1. T = min(max(valid_count[b], 0), N): only the first T rows take part.
///   2. The T rows are ordered by score (column 1) descending; equal scores keep the lower row
///      index first.
///   3. The candidates are the first min(`top_k`, T) rows of that order (all T when `top_k` is
///      negative). They are visited in order, stopping once `max_output_size` rows are kept (never
///      when it is negative; at once when it is 0). A candidate with a negative id is skipped: it
///      is neither kept nor compared against, but it has used its place among the `top_k`. A
///      candidate is suppressed when a row already kept with the same id (with any id when
///      `force_suppress` is true) overlaps it by t percent or more; otherwise it is kept.
///   4. `Y[b]` holds the kept rows, whole and in the order they were kept, followed by rows of −1
///      up to N.
///
///   Two boxes overlap by t percent or more when 100·I ≥ t·U, where with areas
///   (x2 − x1)·(y2 − y1) (no +1), S = area₁ + area₂, the intersection
///   I = max(0, min(x2, x2′) − max(x1, x1′)) · max(0, min(y2, y2′) − max(y1, y1′)) and the union
///   U = S − I; a pair with S ≤ 0 or U ≤ 0 never overlaps. In fixture `default`, boxes
///   (0, 0, 10, 10) and (1, 1, 11, 11) have I = 81 and U = 119: 8100 ≥ 50 · 119, so the second is
///   suppressed.
/// - **Output precision**: max(pX, 2) (decision 19; cvm-compat §3 gives pX).
/// - **Rounding and overflow**: none; the overlap test is computed exactly in 128-bit integers,
///   without division.
/// - **Errors**, in order:
///   1. `coord_start` ≠ 2, `score_index` ≠ 1, `id_index` ≠ 0, `return_indices` true,
///      `invalid_to_bottom` false (checked in that order): `AttributeOutOfRange`.
///   2. `iou_threshold` outside [1, 2^31 − 1]: `AttributeOutOfRange`.
///   3. `max_output_size`, then `top_k`, above 2^32 − 1: `AttributeOutOfRange`.
///   4. `X` not of rank 3, then `valid_count` not of rank 1: `ShapeMismatch`.
///   5. K ≠ 6: `ShapeMismatch`.
///   6. `valid_count` of a length other than B: `ShapeMismatch`.
/// - **Working memory**: 32 bytes per row (the score order, the sort's buffer and the kept rows),
///   counted in the static memory plan.
pub const NON_MAX_SUPPRESSION: OpDef = OpDef {
    code: 71,
    name: "non_max_suppression",
    family: Family::Vision,
    arity: Arity::Exactly(2),
    outputs: 1,
    attrs: &[
        spec("coord_start", AttrKind::Int),
        spec("force_suppress", AttrKind::Bool),
        spec("id_index", AttrKind::Int),
        spec("invalid_to_bottom", AttrKind::Bool),
        spec("iou_threshold", AttrKind::Int),
        spec("max_output_size", AttrKind::Int),
        spec("return_indices", AttrKind::Bool),
        spec("score_index", AttrKind::Int),
        spec("top_k", AttrKind::Int),
    ],
    build: NonMaxSuppression::build,
};

/// Greedy non-maximum suppression per batch (spec 001 "non_max_suppression").
///
/// Its contract (inputs, shapes, precision, errors) is the doc comment of the row that
/// builds it.
#[derive(Debug)]
pub struct NonMaxSuppression {
    iou_threshold: i64,
    max_output_size: Option<usize>,
    top_k: Option<usize>,
    force_suppress: bool,
}

impl NonMaxSuppression {
    fn build(attrs: &Attrs<'_>, _n_inputs: usize) -> Result<Box<dyn Operator>> {
        let fixed = |name: &str, expected: i64| -> Result<()> {
            match attrs.opt_int(name) {
                Some(value) if value != expected => Err(fail!(
                    AttributeOutOfRange,
                    "attribute \"{name}\" = {value}: only {expected} is supported"
                )),
                _ => Ok(()),
            }
        };
        fixed("coord_start", 2)?;
        fixed("score_index", 1)?;
        fixed("id_index", 0)?;
        if attrs.bool_or("return_indices", false) {
            return Err(fail!(
                AttributeOutOfRange,
                "attribute \"return_indices\" = true is not supported"
            ));
        }
        if !attrs.bool_or("invalid_to_bottom", true) {
            return Err(fail!(
                AttributeOutOfRange,
                "attribute \"invalid_to_bottom\" = false is not supported"
            ));
        }
        let limit = |name: &str, default: i64| -> Result<Option<usize>> {
            let value = attrs.int_or(name, default);
            if value < 0 {
                Ok(None)
            } else {
                in_range(name, value, 0, i64::from(u32::MAX)).map(Some)
            }
        };
        Ok(Box::new(NonMaxSuppression {
            iou_threshold: in_range(
                "iou_threshold",
                attrs.int_or("iou_threshold", 50),
                1,
                i64::from(i32::MAX),
            )?,
            max_output_size: limit("max_output_size", -1)?,
            top_k: limit("top_k", -1)?,
            force_suppress: attrs.bool_or("force_suppress", false),
        }))
    }

    /// Whether box `a` suppresses box `b`: IoU ≥ threshold percent, exactly.
    fn overlaps(&self, a: &[i32], b: &[i32]) -> bool {
        let [ax1, ay1, ax2, ay2] = [a[2], a[3], a[4], a[5]].map(i128::from);
        let [bx1, by1, bx2, by2] = [b[2], b[3], b[4], b[5]].map(i128::from);
        let sum_area = (ax2 - ax1) * (ay2 - ay1) + (bx2 - bx1) * (by2 - by1);
        if sum_area <= 0 {
            return false;
        }
        let width = (ax2.min(bx2) - ax1.max(bx1)).max(0);
        let height = (ay2.min(by2) - ay1.max(by1)).max(0);
        let intersection = width * height;
        let union = sum_area - intersection;
        union > 0 && 100 * intersection >= i128::from(self.iou_threshold) * union
    }
}

impl Operator for NonMaxSuppression {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let (data, valid) = (&inputs[0], &inputs[1]);
        expect_rank(data, 3, "data")?;
        expect_rank(valid, 1, "valid_count")?;
        if data.dims()[2] != 6 {
            return Err(fail!(
                ShapeMismatch,
                "rows must have 6 entries (id, score, x1, y1, x2, y2), got {}",
                data.dims()[2]
            ));
        }
        if valid.dims()[0] != data.dims()[0] {
            return Err(fail!(
                ShapeMismatch,
                "valid_count {} must have one entry per batch of {}",
                valid.shape,
                data.shape
            ));
        }
        Ok(vec![TensorType {
            shape: data.shape.clone(),
            precision: data.precision.max(FILL_PRECISION),
        }])
    }

    fn usage(&self, inputs: &[TensorType], outputs: &[TensorType]) -> Result<Usage> {
        let dims = inputs[0].dims();
        let mut usage = io_usage(inputs, outputs)?;
        usage.work.pairs = count(&[u64::from(dims[0]), u64::from(dims[1]), u64::from(dims[1])])?;
        Ok(usage)
    }

    /// Per batch: the row order, the stable sort's buffer and the kept rows (with room for the
    /// vector's doubling), N indices each at most, of 8 bytes (a `usize` on a 64-bit host).
    fn scratch_bytes(&self, inputs: &[TensorType]) -> Result<u64> {
        let rows = u64::from(inputs[0].dims()[1]);
        rows.checked_mul(4 * 8)
            .ok_or_else(|| fail!(LimitExceeded, "working memory overflows 64 bits"))
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        const WIDTH: usize = 6;
        let rows = inputs[0].dims[1] as usize;
        let out = &mut *outputs[0].data;
        out.fill(-1);
        let batch_len = (rows * WIDTH).max(1);
        for ((batch, &valid), out_batch) in inputs[0]
            .data
            .chunks_exact(batch_len)
            .zip(inputs[1].data)
            .zip(out.chunks_exact_mut(batch_len))
        {
            let valid_rows = (valid.max(0) as usize).min(rows);
            // Score descending, ties by lower row index (a stable order of the spec's I).
            let mut order: Vec<usize> = (0..valid_rows).collect();
            order.sort_by(|&a, &b| {
                batch[b * WIDTH + 1]
                    .cmp(&batch[a * WIDTH + 1])
                    .then(a.cmp(&b))
            });
            let candidates = self.top_k.map_or(valid_rows, |k| k.min(valid_rows));
            let limit = self
                .max_output_size
                .map_or(valid_rows, |m| m.min(valid_rows));
            let mut kept: Vec<usize> = Vec::new();
            for &row in order.iter().take(candidates) {
                if kept.len() >= limit {
                    break;
                }
                let candidate = &batch[row * WIDTH..(row + 1) * WIDTH];
                if candidate[0] < 0 {
                    continue;
                }
                let suppressed = kept.iter().any(|&other| {
                    let box_kept = &batch[other * WIDTH..(other + 1) * WIDTH];
                    (self.force_suppress || box_kept[0] == candidate[0])
                        && self.overlaps(box_kept, candidate)
                });
                if !suppressed {
                    let slot = kept.len();
                    out_batch[slot * WIDTH..(slot + 1) * WIDTH].copy_from_slice(candidate);
                    kept.push(row);
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nms(threshold: i64) -> NonMaxSuppression {
        NonMaxSuppression {
            iou_threshold: threshold,
            max_output_size: None,
            top_k: None,
            force_suppress: false,
        }
    }

    #[test]
    fn iou_is_an_exact_integer_percent() {
        // Two 10×10 boxes overlapping in a 5×10 strip: I = 50, U = 150, IoU = 33.3 %.
        let a = [0, 9, 0, 0, 10, 10];
        let b = [0, 8, 5, 0, 15, 10];
        assert!(nms(33).overlaps(&a, &b));
        assert!(!nms(34).overlaps(&a, &b));
        // Identical boxes: 100 %; 101 never suppresses.
        assert!(nms(100).overlaps(&a, &a));
        assert!(!nms(101).overlaps(&a, &a));
        // Disjoint and degenerate boxes have IoU 0.
        assert!(!nms(1).overlaps(&a, &[0, 1, 20, 20, 30, 30]));
        assert!(!nms(1).overlaps(&[0, 1, 5, 5, 5, 5], &[0, 1, 5, 5, 5, 5]));
        // Extreme coordinates do not overflow.
        let huge = [0, 1, -2147483647, -2147483647, 2147483647, 2147483647];
        assert!(nms(100).overlaps(&huge, &huge));
    }
}
