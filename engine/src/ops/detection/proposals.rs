//! `generate_proposals_v2` (spec 003): the region proposals of Mask R-CNN's RPN in Q(F) fixed
//! point: per image, top-k anchors by score, box decoding, clipping to the image, the min-size
//! filter and greedy NMS.
//!
//! The float references sort with unspecified tie order and reduce in thread-dependent order;
//! this operator decides every comparison exactly in integers and names each rounding, so its
//! result is the same on every machine.
//!
//! Over 800 lines (about 165 of them tests) as one cohesive algorithm: its steps share the
//! fixed-point helpers and the candidate type, and none is used elsewhere.

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;

use crate::attrs::{AttrKind, Attrs, in_range, spec};
use crate::error::{Error, Result};
use crate::fail;
use crate::fixed::{self, FixedError, round_shift};
use crate::ops::common::{count, expect_rank, output_precision};
use crate::ops::fixed_point::{FRAC_BITS, fixed_error, frac_bits};
use crate::ops::{Arity, Family, OpDef, Operator, Usage, Work};
use crate::tensor::{MAX_PRECISION, TensorMut, TensorRef, TensorType, bit_width};

/// ln(1000 / 16) = ln 62.5 (the spec's `bbox_clip_default`) in Q62, rounded to nearest. The Q(F)
/// bound is rounded from it once, when the operator is built; at every F in 0..=30 the exact
/// value lies at least 0.018 ulp from a rounding boundary, so the bound is the Q(F) value nearest
/// ln 62.5.
const LN_62_5_Q62: i128 = 19_070_089_793_597_246_105;

/// ln 2 in Q62, rounded to nearest (within 2^-67): the range reduction of the exponentials.
const LN2_Q62: i128 = 3_196_577_161_300_663_915;

/// Fractional bits of `fixed::exp`'s reduced argument and result (its largest F).
const EXP_FRAC: u32 = 30;

/// Guard bits of the decode's working scale Q(3F + 1 + GUARD_BITS): the one product that is not
/// exact there (e^p·w for e^p < 2^-(2F + 24)) is floored at 2^-(2F + 25) ulp, far below the
/// final rounding, while every sum stays below 2^124 (see [`GenerateProposals::axis`]).
const GUARD_BITS: u32 = 24;

/// Exponent arguments below −64 are raised to −64: e^-64 times any anchor extent (< 2^33 ulp) is
/// below 2^-59 ulp, so the box is unchanged, and the range reduction stays small.
const EXP_ARG_FLOOR: i128 = -64;

/// `pre_nms_top_n` when absent: the reference framework's default.
const DEFAULT_PRE_NMS_TOP_N: i64 = 6000;

/// `post_nms_top_n` when absent: the reference framework's default.
const DEFAULT_POST_NMS_TOP_N: i64 = 1000;

/// `pre_nms_top_n` or `post_nms_top_n` ≤ 0: keep every candidate, as the reference framework's
/// kernel (models exported from Paddle write −1).
const KEEP_ALL: u32 = u32::MAX;

/// Bytes of one index in the working memory: a `usize` on a 64-bit host (4 on wasm32).
const INDEX_BYTES: u64 = 8;

/// Values read per candidate: its score and 4 each of delta, anchor and variance.
const GATHERED_VALUES: u64 = 13;

/// Region proposals of Mask R-CNN and its relatives (spec 003): turns
/// an RPN's anchor scores and box deltas into regions of interest, deterministically, in Q(F) fixed
/// point. Four outputs: in text models `p:0` to `p:3` for a node `p`.
///
/// - **Inputs** (spec 003 §1.3 layout), every value in Q(F): `scores` (N, H, W, A);
///   `bbox_deltas` (N, H, W, 4·A), per anchor (dx, dy, dw, dh); `im_shape` (N, 2), per image
///   (height, width); `anchors` (H, W, A, 4), corners (xmin, ymin, xmax, ymax); `variances`
///   (H, W, A, 4). Anchor i of an image is the flat index (h·W + w)·A + a.
/// - **Attributes** (fixed-point attributes are written as real numbers in text models and
///   converted once, exactly rounded, to Q(F) with the node's `frac_bits`; canonical models store
///   the Q(F) integer):
///
///   | name | kind | default | allowed values |
///   | --- | --- | --- | --- |
///   | `frac_bits` | integer | 0 | [0, 30] |
///   | `pre_nms_top_n` | integer | 6000 | ≤ 2^31 − 1; ≤ 0 keeps all |
///   | `post_nms_top_n` | integer | 1000 | ≤ 2^31 − 1; ≤ 0 keeps all; N·post within the tensor limits |
///   | `nms_thresh` | fixed | 0.5 | (0, 1], i.e. [1, 2^F] in Q(F) |
///   | `min_size` | fixed | 0.1 | [0, 2^31 − 1] in Q(F) |
///   | `eta` | fixed | 1.0 | [1, 2^31 − 1] in Q(F) (> 0) |
///   | `pixel_offset` | boolean | true | offset = 1 (2^F in Q(F)) when true, else 0 |
///
///   The real defaults are rounded to Q(F), halves away from zero (at F = 0: 1, 0 and 1). 6000,
///   1000 and 0.1 are the reference framework's defaults. A `pre_nms_top_n` or `post_nms_top_n`
///   of 0 or less means "keep all", as in the reference framework's kernel (Paddle exports −1):
///   every anchor enters NMS, or every box NMS keeps is output.
/// - **Output shapes**, static so that memory and gas are known before running: `rpn_rois`
///   (N·post, 4) in Q(F); `rpn_roi_probs` (N·post, 1); `rpn_rois_num` (N); `rpn_rois_batch_size`
///   (1), where post is `post_nms_top_n`, or, when that keeps all, min(`pre_nms_top_n`, H·W·A)
///   (H·W·A when both keep all), the most boxes NMS can keep. The kept rows of the images are packed in image order from row 0; rows after
///   `rpn_rois_batch_size` are zero.
/// - **Semantics**, per image (spec 003 §1.2; the centre test of step 3 is in the pseudo-code
///   `removeSmallBox` of §3.2, the suppression mask of step 4 in §3.1.3.2), with offset as above:
///   1. Top-k: the k = min(`pre_nms_top_n`, H·W·A) anchors of highest score, ordered by score
///      descending, **ties broken by the lower flat anchor index** (the references leave the tie
///      order unspecified, so two nodes could keep different boxes); this order is also the NMS
///      order.
///   2. Decode: w = xmax − xmin + offset, cx = xmin + w/2 (likewise h, cy);
///      cx′ = cx + dx·var₀·w, w′ = e^min(dw·var₂, clip)·w with clip the Q(F) value nearest
///      ln(1000/16); xmin′ = cx′ − w′/2, xmax′ = cx′ + w′/2 − offset (likewise y with var₁, var₃).
///      The exponential is the engine's `fixed::exp`, the implementation of CINN `Exp`.
///   3. Clip x to [0, im_w − offset] and y to [0, im_h − offset]. A box is kept iff its width
///      xmax − xmin + offset and height are both ≥ `min_size` and, with `pixel_offset`, its centre
///      xmin + (xmax − xmin + offset)/2 is ≤ im_w (likewise y): spec 003's rule. (Paddle's CPU
///      kernel also raises `min_size` to at least 1; a model that wants that sets it.)
///   4. Greedy NMS in the top-k order: a box is kept unless an already kept box overlaps it with
///      IoU > threshold. Areas are (x2 − x1 + offset)·(y2 − y1 + offset), 0 when x2 < x1 or
///      y2 < y1; the intersection is 0 for boxes apart, else
///      (min x2 − max x1 + offset)·(min y2 − max y1 + offset); U = area₁ + area₂ − I. The test
///      is I·2^F > threshold·U, exact in 128-bit integers, without division. A pair with U ≤ 0
///      (degenerate boxes) has IoU 0 and suppresses nothing, as the spec's vector NMS (mask
///      iou > thresh); the CPU reference's 0/0 suppresses there. The threshold starts at
///      `nms_thresh`; with `eta` < 1, after each kept box while it exceeds 0.5 it becomes
///      round(threshold·eta / 2^F) (the reference's `adaptive_threshold *= eta`); `eta` ≥ 1 keeps
///      it fixed.
///   5. At most `post_nms_top_n` boxes are kept, with their scores as probabilities. An image with
///      no box left after the filter yields one all-zero box of probability 0, as the reference
///      framework does.
///
///   N = 0 succeeds with empty outputs and batch size 0 (spec 003 §1.1).
/// - **Output precision**: `rpn_rois` and `rpn_roi_probs` 32; `rpn_rois_num` and
///   `rpn_rois_batch_size` bits(N·post) + 1.
/// - **Rounding and overflow**: dx·var·w, the centres and the half-extents are exact in 128-bit
///   integers at the working scale Q(3F + 25). e^p, p = dw·var exact in Q(2F) and clamped to
///   [−64, clip], is computed as 2^k·e^r with r rounded once to Q30 and e^r = `fixed::exp`(r, 30)
///   (within 1 ulp of Q30), so within 1.25·2^−30 relative. Each corner is clipped and then rounded
///   once to Q(F), to nearest with halves away from zero: it is within 0.5 ulp + 1.25·2^−30 × (the
///   box's half-extent in ulps) of the exact formula, i.e. within 1 ulp for boxes narrower than
///   2^28 ulps (4096 pixels at F = 16). Computing the exponential in Q(F) instead would make the
///   error grow with the box (tens of ulps for 100-pixel boxes). Scores are copied, never rounded.
///   No overflow is reachable from int32 inputs (every intermediate is bounded below 2^124 and
///   checked); a corner lies in [0, max(0, im − offset)].
/// - **Errors**, in order:
///   1. An attribute outside its range: `AttributeOutOfRange`.
///   2. An input not of rank 4 (`scores`, `bbox_deltas`), 2 (`im_shape`) or 4 (`anchors`,
///      `variances`), or of a shape that disagrees with `scores`: `ShapeMismatch` naming the input
///      and the shape it must have.
///   3. H, W or A equal to 0, even when N = 0: `BadParam` (spec 003 §1.1).
///   4. N·`post_nms_top_n` above 2^32 − 1 rows: `LimitExceeded`; at or above 2^31:
///      `PrecisionOverflow`.
/// - **Working memory**, per image and counted in the static memory plan: 8 bytes per anchor (the
///   score order), 20 per candidate (the survivors of the filter) and 36 per kept box (the box and
///   its area), so at most 28·H·W·A + 36·m bytes.
/// - **Proof of accuracy**: `engine/tests/proposals.rs` compares the operator with a float64
///   implementation of the same algorithm written in the test, on 6,000 random cases (1,000 at each
///   F ∈ {0, 4, 8, 12, 16, 20}; N 1–3, H and W 1–8, A 1–6, both `pixel_offset` values; top-k and
///   `post_nms_top_n` truncation, the `min_size` filter, adaptive `eta`, images where nothing
///   survives, tied scores) and on the realistic case. Tolerances: the top-k order is exact; every
///   kept box's corners are within **4 ulp** of Q(F) of the float64 corners and within the
///   documented bound above; probabilities are exact (0 ulp). A keep/suppress or filter decision is
///   *near* when the reals between the float64 corners and any value the operator may round them to
///   would decide it differently (interval arithmetic); a near decision takes the operator's answer
///   and is counted, every other decision must agree. Results: 153,094 kept rows compared, largest
///   corner error 0.615 ulp (F = 20, very large boxes; ≤ 0.502 ulp for F ≤ 16), probability error
///   0; 542 near filter decisions and 6,372 near NMS decisions, almost all at F = 0 and F = 4
///   (F = 16: 2, F = 20: 0), 385 of which the operator decided unlike the unrounded float value.
///   The realistic case: largest corner error 0.507 ulp, no near decision.
pub const GENERATE_PROPOSALS_V2: OpDef = OpDef {
    code: 300,
    name: "generate_proposals_v2",
    family: Family::Vision,
    arity: Arity::Exactly(5),
    outputs: 4,
    attrs: &[
        spec("eta", AttrKind::Fixed),
        FRAC_BITS,
        spec("min_size", AttrKind::Fixed),
        spec("nms_thresh", AttrKind::Fixed),
        spec("pixel_offset", AttrKind::Bool),
        spec("post_nms_top_n", AttrKind::Int),
        spec("pre_nms_top_n", AttrKind::Int),
    ],
    build: GenerateProposals::build,
};

/// Region proposals from RPN scores and box deltas (spec 003 `generate_proposals_v2`), in Q(F).
///
/// Its contract (inputs, shapes, precision, errors) is the doc comment of the row that
/// builds it.
#[derive(Debug)]
pub struct GenerateProposals {
    frac_bits: u32,
    pre_nms_top_n: u32,
    post_nms_top_n: u32,
    /// Q(F), in 1..=2^F.
    nms_thresh: i64,
    /// Q(F), ≥ 0.
    min_size: i64,
    /// Q(F), ≥ 1.
    eta: i64,
    pixel_offset: bool,
    /// The exponent bound ln 62.5 rounded to Q(F), held in Q(2F) (exact) to meet dw·var there.
    exp_clip_q2f: i128,
}

/// The shapes of one application, from `scores` [N, H, W, A].
#[derive(Clone, Copy, Debug)]
struct Dims {
    images: u32,
    anchors_per_image: u64,
}

/// A decoded box that passed the filter, in NMS order.
#[derive(Clone, Copy, Debug)]
struct Candidate {
    score: i32,
    corners: [i32; 4],
}

/// `pre_nms_top_n` or `post_nms_top_n`: 1..=2^31 − 1, or [`KEEP_ALL`] for a value ≤ 0.
fn top_n(attrs: &Attrs<'_>, name: &str, default: i64) -> Result<u32> {
    match attrs.int_or(name, default) {
        value if value <= 0 => Ok(KEEP_ALL),
        value => in_range(name, value, 1, i64::from(i32::MAX)),
    }
}

/// A fixed-point failure inside the operator, as the engine's error.
fn arithmetic(error: FixedError) -> Error {
    fixed_error(error, "generate_proposals_v2", 0)
}

/// v·2^shift, checked (the bounds in the callers' comments keep it far from overflow).
fn lift(value: i128, shift: u32) -> Result<i128> {
    1i128
        .checked_shl(shift)
        .and_then(|factor| value.checked_mul(factor))
        .ok_or_else(|| {
            fail!(
                IntegerOverflow,
                "generate_proposals_v2: intermediate overflow"
            )
        })
}

/// Checked i128 addition.
fn add(a: i128, b: i128) -> Result<i128> {
    a.checked_add(b).ok_or_else(|| {
        fail!(
            IntegerOverflow,
            "generate_proposals_v2: intermediate overflow"
        )
    })
}

/// Checked i128 product.
fn mul(a: i128, b: i128) -> Result<i128> {
    a.checked_mul(b).ok_or_else(|| {
        fail!(
            IntegerOverflow,
            "generate_proposals_v2: intermediate overflow"
        )
    })
}

impl GenerateProposals {
    fn build(attrs: &Attrs<'_>, _n_inputs: usize) -> Result<Box<dyn Operator>> {
        let frac_bits = frac_bits(attrs)?;
        let one = 1i64 << frac_bits;
        let int_max = i64::from(i32::MAX);
        // Real defaults rounded to Q(F), halves away from zero: 0.5 → (2^F + 1)/2 (1 at F = 0),
        // 0.1 → round(2^F / 10) (2^F/10 is never a half), 1.0 → 2^F.
        let nms_thresh = attrs.int_or("nms_thresh", (one + 1) / 2);
        let min_size = attrs.int_or("min_size", (one + 5) / 10);
        // Rounded once, to nearest (the constant is positive, so halves go up = away from zero).
        let shift = 62 - frac_bits;
        let exp_clip = (LN_62_5_Q62 + (1i128 << (shift - 1))) >> shift;
        Ok(Box::new(GenerateProposals {
            frac_bits,
            pre_nms_top_n: top_n(attrs, "pre_nms_top_n", DEFAULT_PRE_NMS_TOP_N)?,
            post_nms_top_n: top_n(attrs, "post_nms_top_n", DEFAULT_POST_NMS_TOP_N)?,
            nms_thresh: in_range("nms_thresh", nms_thresh, 1, one)?,
            min_size: in_range("min_size", min_size, 0, int_max)?,
            eta: in_range("eta", attrs.int_or("eta", one), 1, int_max)?,
            pixel_offset: attrs.bool_or("pixel_offset", true),
            exp_clip_q2f: exp_clip << frac_bits,
        }))
    }

    /// The pixel offset in Q(F): 2^F with `pixel_offset`, else 0.
    fn offset(&self) -> i64 {
        if self.pixel_offset {
            1i64 << self.frac_bits
        } else {
            0
        }
    }

    /// Output rows per image: `post_nms_top_n`, or with "keep all" every candidate,
    /// min(pre_nms_top_n, H·W·A).
    fn rows_per_image(&self, anchors_per_image: u64) -> u64 {
        if self.post_nms_top_n == KEEP_ALL {
            anchors_per_image.min(u64::from(self.pre_nms_top_n))
        } else {
            u64::from(self.post_nms_top_n)
        }
    }

    /// Candidates kept by top-k (k = min(pre_nms_top_n, H·W·A)) and NMS, for worst-case gas.
    fn counts(&self, anchors_per_image: u64) -> (u64, u64) {
        let candidates = anchors_per_image.min(u64::from(self.pre_nms_top_n));
        (candidates, candidates.min(u64::from(self.post_nms_top_n)))
    }

    /// Checks the five input shapes against `scores` [N, H, W, A].
    fn dims(inputs: &[TensorType]) -> Result<Dims> {
        let [scores, deltas, im_shape, anchors, variances] = inputs else {
            return Err(fail!(
                ArityMismatch,
                "generate_proposals_v2 takes 5 inputs, got {}",
                inputs.len()
            ));
        };
        expect_rank(scores, 4, "scores")?;
        expect_rank(deltas, 4, "bbox_deltas")?;
        expect_rank(im_shape, 2, "im_shape")?;
        expect_rank(anchors, 4, "anchors")?;
        expect_rank(variances, 4, "variances")?;
        let images = scores.dims()[0];
        let [n, h, w, a] = [0, 1, 2, 3].map(|axis| u64::from(scores.dims()[axis]));
        let expect = |ty: &TensorType, name: &str, want: [u64; 4], layout: &str| -> Result<()> {
            let dims: Vec<u64> = ty.dims().iter().map(|&d| u64::from(d)).collect();
            if dims == want {
                Ok(())
            } else {
                Err(fail!(
                    ShapeMismatch,
                    "{name} {} must be {layout} = {want:?} for scores {}",
                    ty.shape,
                    scores.shape
                ))
            }
        };
        expect(deltas, "bbox_deltas", [n, h, w, 4 * a], "[N, H, W, 4·A]")?;
        let im_dims: Vec<u64> = im_shape.dims().iter().map(|&d| u64::from(d)).collect();
        if im_dims != [n, 2] {
            return Err(fail!(
                ShapeMismatch,
                "im_shape {} must be [N, 2] = [{n}, 2] for scores {}",
                im_shape.shape,
                scores.shape
            ));
        }
        expect(anchors, "anchors", [h, w, a, 4], "[H, W, A, 4]")?;
        expect(variances, "variances", [h, w, a, 4], "[H, W, A, 4]")?;
        // Spec 003 §1.1: N = 0 succeeds, but an empty feature map is a bad parameter.
        if h == 0 || w == 0 || a == 0 {
            return Err(fail!(
                BadParam,
                "H, W and A must be positive, got scores {}",
                scores.shape
            ));
        }
        Ok(Dims {
            images,
            anchors_per_image: count(&[h, w, a])?,
        })
    }

    /// e^p for p = dw·var in Q(2F), after the spec's Min(·, bbox_clip_default): (m, k) with
    /// e^p ≈ m·2^(k − 30), m = e^r in Q30 in [0.70, 1.42]·2^30 and k in −92..=6.
    fn exp(&self, p: i128) -> Result<(i128, i32)> {
        let doubled = 2 * self.frac_bits;
        // Clamping to [−64, clip] is exact (both bounds are Q(2F) values).
        let floor = lift(EXP_ARG_FLOOR, doubled)?;
        let p = p.min(self.exp_clip_q2f).max(floor);
        // |p| ≤ 64 in Q62 is below 2^69.
        let p62 = lift(p, 62 - doubled)?;
        // k = round(p / ln 2), halves up: |r| ≤ ln2 / 2 and e^p = 2^k·e^r, with r off by at most
        // 93·2^-67 from ln 2's rounding (far below the Q30 rounding that follows).
        let k = add(p62, LN2_Q62 / 2)?.div_euclid(LN2_Q62);
        let r62 = add(p62, -mul(k, LN2_Q62)?)?;
        // Rounding 1 of the exponential: r to Q30, halves away from zero.
        let r30 = round_shift(r62, 62 - EXP_FRAC).map_err(arithmetic)?;
        // Rounding 2: e^r in Q30 by the shared kernel (≤ 1 ulp; at most 1.42·2^30, fits i32).
        let mantissa = fixed::exp(r30, EXP_FRAC).map_err(arithmetic)?;
        let exponent = i32::try_from(k)
            .map_err(|_| fail!(IntegerOverflow, "generate_proposals_v2: exponent range"))?;
        Ok((i128::from(mantissa), exponent))
    }

    /// One axis of a box (spec 003 "创建 proposals" steps 1–4): from the anchor's `start` and
    /// `end`, the centre delta·variance and the size delta·variance, the corners clipped to
    /// [0, limit − offset] and rounded once to Q(F).
    ///
    /// Working scale Q(3F + 1 + G), G = 24: a Q(F) value is lifted by 2F + 1 + G. Bounds (any
    /// int32 inputs): |2·start + extent| < 2^33.6 lifted by 2F + G ≤ 84 gives < 2^118;
    /// |delta·var·extent| < 2^94.3 lifted by 1 + G gives < 2^119.3; e^p·extent/2 ≤ 62.5·2^32.3
    /// in Q(F) lifted gives < 2^123; so every sum stays below 2^124.
    #[allow(clippy::too_many_arguments)] // the spec's per-axis operands, named
    fn axis(
        &self,
        start: i32,
        end: i32,
        centre_delta: i32,
        centre_variance: i32,
        size_delta: i32,
        size_variance: i32,
        limit: i32,
    ) -> Result<[i32; 2]> {
        let f = self.frac_bits;
        let offset = i128::from(self.offset());
        let working = 2 * f + 1 + GUARD_BITS;
        // w = xmax − xmin + offset (Q(F), exact).
        let extent = add(i128::from(end) - i128::from(start), offset)?;
        // 2·cx = 2·xmin + w in Q(F) is exact, i.e. cx in Q(F + 1).
        let centre = lift(add(2 * i128::from(start), extent)?, 2 * f + GUARD_BITS)?;
        // d_cx = cx + dx·w·var[0]: the product is exact in Q(3F).
        let shift = mul(
            i128::from(centre_delta) * i128::from(centre_variance),
            extent,
        )?;
        let centre = add(centre, lift(shift, 1 + GUARD_BITS)?)?;
        // d_w / 2 = e^p·w / 2 = m·w·2^(k − 30) / 2, lifted: m·w·2^(2F + G + k − 30).
        let (mantissa, exponent) = self.exp(i128::from(size_delta) * i128::from(size_variance))?;
        let product = mul(mantissa, extent)?;
        let power = i64::from(2 * f + GUARD_BITS) + i64::from(exponent) - i64::from(EXP_FRAC);
        let half = match u32::try_from(power) {
            Ok(up) => lift(product, up)?,
            // Only for e^p < 2^-(2F + 24): floored (toward −∞) at 2^-(2F + 25) ulp; |power| ≤ 98.
            Err(_) => product >> power.unsigned_abs().min(127),
        };
        let offset_wide = lift(offset, working)?;
        // oxmin = d_cx − d_w/2, oxmax = d_cx + d_w/2 − offset.
        let low = add(centre, -half)?;
        let high = add(add(centre, half)?, -offset_wide)?;
        // Clip to [0, im − offset] before rounding: the bounds are Q(F) values, so this equals
        // rounding first, and the rounded corner always fits int32.
        let bound = lift(i128::from(limit) - offset, working)?;
        let corner = |value: i128| -> Result<i32> {
            // The single rounding of each corner: to nearest, halves away from zero.
            round_shift(value.min(bound).max(0), working).map_err(arithmetic)
        };
        Ok([corner(low)?, corner(high)?])
    }

    /// Decodes and clips the box of one anchor: (xmin, ymin, xmax, ymax) in Q(F).
    fn decode(
        &self,
        anchor: &[i32],
        delta: &[i32],
        variance: &[i32],
        height: i32,
        width: i32,
    ) -> Result<[i32; 4]> {
        let [x1, x2] = self.axis(
            anchor[0],
            anchor[2],
            delta[0],
            variance[0],
            delta[2],
            variance[2],
            width,
        )?;
        let [y1, y2] = self.axis(
            anchor[1],
            anchor[3],
            delta[1],
            variance[1],
            delta[3],
            variance[3],
            height,
        )?;
        Ok([x1, y1, x2, y2])
    }

    /// The spec's removeSmallBox test (exact): both sides (with the offset) at least
    /// `min_size`, and with `pixel_offset` the centre inside the image.
    fn big_enough(&self, corners: &[i32; 4], height: i32, width: i32) -> bool {
        let offset = i128::from(self.offset());
        let [x1, y1, x2, y2] = corners.map(i128::from);
        let box_width = x2 - x1 + offset;
        let box_height = y2 - y1 + offset;
        let min_size = i128::from(self.min_size);
        if box_width < min_size || box_height < min_size {
            return false;
        }
        // cx = x1 + w/2 ≤ im_w, doubled to stay exact.
        !self.pixel_offset
            || (2 * x1 + box_width <= 2 * i128::from(width)
                && 2 * y1 + box_height <= 2 * i128::from(height))
    }

    /// The area of a box, (x2 − x1 + o)·(y2 − y1 + o), or 0 when x2 < x1 or y2 < y1.
    ///
    /// Corners are clipped to [0, 2^31) and the offset o is at most 2^30, so each side lies in
    /// (−2^31, 1.5·2^31) and the area below 2.25·2^62.
    fn area(&self, corners: &[i32; 4]) -> i128 {
        let offset = self.offset();
        let [x1, y1, x2, y2] = corners.map(i64::from);
        if x2 < x1 || y2 < y1 {
            0
        } else {
            side_product(x2 - x1 + offset, y2 - y1 + offset)
        }
    }

    /// Whether kept box `kept` (of area `kept_area`, [`Self::area`]) suppresses `candidate` (of
    /// area `candidate_area`): IoU > threshold (Q(F)), exactly.
    ///
    /// IoU = I / U > t / 2^F ⇔ I·2^F > t·U for U > 0 (U ≤ 0 counts as IoU 0). With the bounds
    /// of [`Self::area`], |I| and the areas are below 2.25·2^62 and U below 2^65; both products
    /// are below 2^96 (t ≤ 2^30), and are formed from 64-bit halves ([`exceeds`]), which wasm
    /// executes natively, instead of 128-bit multiplications and shifts, which it emulates.
    fn suppresses(
        &self,
        kept: &[i32; 4],
        kept_area: i128,
        candidate: &[i32; 4],
        candidate_area: i128,
        threshold: i64,
    ) -> bool {
        let offset = self.offset();
        let [ax1, ay1, ax2, ay2] = candidate.map(i64::from);
        let [bx1, by1, bx2, by2] = kept.map(i64::from);
        let intersection = if bx1 > ax2 || bx2 < ax1 || by1 > ay2 || by2 < ay1 {
            0
        } else {
            side_product(
                ax2.min(bx2) - ax1.max(bx1) + offset,
                ay2.min(by2) - ay1.max(by1) + offset,
            )
        };
        let union = candidate_area + kept_area - intersection;
        // t ≥ 1 and U > 0 make t·U positive: an intersection ≤ 0 never suppresses.
        union > 0 && intersection > 0 && exceeds(intersection, self.frac_bits, threshold, union)
    }

    /// Greedy NMS over `candidates` (already in NMS order): the kept ones, at most
    /// `post_nms_top_n`.
    fn nms(&self, candidates: &[Candidate]) -> Result<Vec<Candidate>> {
        let one = 1i64 << self.frac_bits;
        let limit = self.post_nms_top_n as usize;
        let mut threshold = self.nms_thresh;
        // The kept boxes, and their areas, each computed once; at most `limit` of them.
        let room = limit.min(candidates.len());
        let mut kept: Vec<Candidate> = Vec::with_capacity(room);
        let mut kept_areas: Vec<i128> = Vec::with_capacity(room);
        for candidate in candidates {
            // Stopping at the limit keeps the same boxes as truncating afterwards: later
            // candidates never change earlier decisions.
            if kept.len() >= limit {
                break;
            }
            let area = self.area(&candidate.corners);
            let suppressed = kept.iter().zip(&kept_areas).any(|(other, &other_area)| {
                self.suppresses(
                    &other.corners,
                    other_area,
                    &candidate.corners,
                    area,
                    threshold,
                )
            });
            if suppressed {
                continue;
            }
            kept.push(*candidate);
            kept_areas.push(area);
            // Adaptive NMS: threshold·eta while the threshold exceeds 0.5 (only for eta < 1),
            // one rounding per kept box (threshold, eta < 2^31: the product fits easily).
            if self.eta < one && 2 * threshold > one {
                threshold = i64::from(
                    round_shift(i128::from(threshold) * i128::from(self.eta), self.frac_bits)
                        .map_err(arithmetic)?,
                );
            }
        }
        Ok(kept)
    }
}

/// The exact product of two box sides, each in (−2^32, 2^32) with a product below 2^64 in
/// magnitude (the bounds of [`GenerateProposals::area`]): one 64-bit multiplication of the
/// magnitudes.
fn side_product(a: i64, b: i64) -> i128 {
    let magnitude = i128::from(a.unsigned_abs().wrapping_mul(b.unsigned_abs()));
    if (a < 0) != (b < 0) {
        -magnitude
    } else {
        magnitude
    }
}

/// Whether I·2^F > t·U, for 0 < I < 2^64, F ≤ 30, 0 < t ≤ 2^31 and 0 < U < 2^65: both sides
/// assembled from products of 32-bit halves, each below 2^64, so only 64-bit multiplications
/// and constant 128-bit shifts are needed.
fn exceeds(intersection: i128, frac_bits: u32, threshold: i64, union: i128) -> bool {
    const LOW32: u128 = (1 << 32) - 1;
    let (i, u) = (intersection as u128, union as u128);
    let t = threshold as u64;
    // I·2^F = (I_hi·2^F)·2^32 + I_lo·2^F with I_hi, I_lo < 2^32: each term below 2^62.
    let (i_hi, i_lo) = ((i >> 32) as u64, (i & LOW32) as u64);
    let left = (u128::from(i_hi << frac_bits) << 32) + u128::from(i_lo << frac_bits);
    // t·U = (t·U_hi)·2^32 + t·U_lo with U_hi < 2^33, U_lo < 2^32: each term below 2^64.
    let (u_hi, u_lo) = ((u >> 32) as u64, (u & LOW32) as u64);
    let right = (u128::from(t.wrapping_mul(u_hi)) << 32) + u128::from(t.wrapping_mul(u_lo));
    left > right
}

impl Operator for GenerateProposals {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let dims = Self::dims(inputs)?;
        let rows = count(&[
            u64::from(dims.images),
            self.rows_per_image(dims.anchors_per_image),
        ])?;
        let rows = u32::try_from(rows).map_err(|_| {
            fail!(
                LimitExceeded,
                "N·post_nms_top_n = {rows} output rows exceed 2^32 − 1"
            )
        })?;
        let count_precision = output_precision(bit_width(u64::from(rows)) + 1)?;
        Ok(vec![
            TensorType::new([rows, 4], MAX_PRECISION),
            TensorType::new([rows, 1], MAX_PRECISION),
            TensorType::new([dims.images], count_precision),
            TensorType::new([1], count_precision),
        ])
    }

    fn usage(&self, inputs: &[TensorType], outputs: &[TensorType]) -> Result<Usage> {
        let dims = Self::dims(inputs)?;
        let (images, anchors) = (u64::from(dims.images), dims.anchors_per_image);
        let (candidates, kept) = self.counts(anchors);
        // Every score is read for the top-k selection; each candidate's delta, anchor and
        // variance are read and decoded with two exponentials; each candidate may be tested
        // against every kept box.
        let reads = count(&[images, anchors])?
            .checked_add(count(&[images, candidates, GATHERED_VALUES])?)
            .ok_or_else(|| fail!(LimitExceeded, "work count overflows 64 bits"))?;
        Ok(Usage {
            class: "",
            work: Work {
                reads,
                writes: crate::ops::common::elements(outputs)?,
                pairs: count(&[images, candidates, kept])?,
                evals: count(&[images, candidates, 2])?,
                ..Work::default()
            },
        })
    }

    /// Per image, one at a time: the anchor order (H·W·A indices), the survivors of the filter
    /// (k candidates) and the kept boxes with their areas (m).
    fn scratch_bytes(&self, inputs: &[TensorType]) -> Result<u64> {
        let anchors = Self::dims(inputs)?.anchors_per_image;
        let (candidates, kept) = self.counts(anchors);
        let candidate = core::mem::size_of::<Candidate>() as u64;
        let parts = [
            count(&[anchors, INDEX_BYTES])?,
            count(&[candidates, candidate])?,
            // The kept boxes and their areas (16 bytes each), allocated at their final size.
            count(&[kept, candidate + 16])?,
        ];
        parts
            .iter()
            .try_fold(0u64, |sum, &part| sum.checked_add(part))
            .ok_or_else(|| fail!(LimitExceeded, "working memory overflows 64 bits"))
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        let [scores, deltas, im_shape, anchors, variances] = inputs else {
            return Err(fail!(ArityMismatch, "generate_proposals_v2 takes 5 inputs"));
        };
        let [rois, probs, rois_num, batch_size] = outputs else {
            return Err(fail!(ArityMismatch, "generate_proposals_v2 has 4 outputs"));
        };
        let dims = |tensor: &TensorRef<'_>| -> Vec<u64> {
            tensor.dims.iter().map(|&d| u64::from(d)).collect()
        };
        let [images, height, width, per_cell] = match dims(scores)[..] {
            [n, h, w, a] => [n, h, w, a],
            _ => return Err(fail!(ShapeMismatch, "scores must have rank 4")),
        };
        let anchors_per_image = count(&[height, width, per_cell])?;
        let post = self.rows_per_image(anchors_per_image);
        // The lengths `infer` implies; checked once so that the indexing below stays in bounds.
        let lengths = [
            (scores.data.len(), count(&[images, anchors_per_image])?),
            (deltas.data.len(), count(&[images, anchors_per_image, 4])?),
            (im_shape.data.len(), count(&[images, 2])?),
            (anchors.data.len(), count(&[anchors_per_image, 4])?),
            (variances.data.len(), count(&[anchors_per_image, 4])?),
            (rois.data.len(), count(&[images, post, 4])?),
            (probs.data.len(), count(&[images, post])?),
            (rois_num.data.len(), images),
            (batch_size.data.len(), 1),
        ];
        if lengths
            .iter()
            .any(|&(actual, expected)| actual as u64 != expected)
        {
            return Err(fail!(
                ShapeMismatch,
                "tensor lengths disagree with the inferred shapes"
            ));
        }
        let per_image = anchors_per_image as usize;
        let candidates = per_image.min(self.pre_nms_top_n as usize);
        let mut row = 0usize;
        for (image, count_out) in rois_num.data.iter_mut().enumerate() {
            let image_scores = &scores.data[image * per_image..(image + 1) * per_image];
            let image_deltas = &deltas.data[image * per_image * 4..(image + 1) * per_image * 4];
            let [im_height, im_width] = [im_shape.data[image * 2], im_shape.data[image * 2 + 1]];

            // 1. Top-k: score descending, ties by lower flat anchor index (a strict total order,
            //    so the selection and its order are unique).
            let by_score = |a: &usize, b: &usize| {
                image_scores[*b]
                    .cmp(&image_scores[*a])
                    .then_with(|| a.cmp(b))
            };
            let mut order: Vec<usize> = (0..per_image).collect();
            if candidates < per_image {
                order.select_nth_unstable_by(candidates, by_score);
                order.truncate(candidates);
            }
            order.sort_unstable_by(by_score);

            // 2–3. Decode, clip and filter, keeping the order.
            let mut survivors: Vec<Candidate> = Vec::with_capacity(order.len());
            for &anchor in &order {
                let span = anchor * 4..anchor * 4 + 4;
                let corners = self.decode(
                    &anchors.data[span.clone()],
                    &image_deltas[span.clone()],
                    &variances.data[span],
                    im_height,
                    im_width,
                )?;
                if self.big_enough(&corners, im_height, im_width) {
                    survivors.push(Candidate {
                        score: image_scores[anchor],
                        corners,
                    });
                }
            }

            // 4–5. NMS; an image without survivors gets one zero box of probability 0.
            let kept = self.nms(&survivors)?;
            let zero = [Candidate {
                score: 0,
                corners: [0; 4],
            }];
            let written: &[Candidate] = if kept.is_empty() { &zero } else { &kept };
            for (slot, candidate) in written.iter().enumerate() {
                let at = row + slot;
                rois.data[at * 4..at * 4 + 4].copy_from_slice(&candidate.corners);
                probs.data[at] = candidate.score;
            }
            row += written.len();
            *count_out = i32::try_from(written.len())
                .map_err(|_| fail!(IntegerOverflow, "rpn_rois_num does not fit int32"))?;
        }
        batch_size.data[0] = i32::try_from(row)
            .map_err(|_| fail!(IntegerOverflow, "rpn_rois_batch_size does not fit int32"))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(frac_bits: u32, pixel_offset: bool) -> GenerateProposals {
        let one = 1i64 << frac_bits;
        let shift = 62 - frac_bits;
        GenerateProposals {
            frac_bits,
            pre_nms_top_n: 100,
            post_nms_top_n: 100,
            nms_thresh: (one + 1) / 2,
            min_size: 0,
            eta: one,
            pixel_offset,
            exp_clip_q2f: ((LN_62_5_Q62 + (1i128 << (shift - 1))) >> shift) << frac_bits,
        }
    }

    /// IoU > t the plain way: every product in checked `i128`.
    fn plain_suppresses(
        f: u32,
        offset: bool,
        kept: &[i32; 4],
        candidate: &[i32; 4],
        t: i64,
    ) -> bool {
        let o = if offset { 1i128 << f } else { 0 };
        let area = |c: &[i32; 4]| {
            let [x1, y1, x2, y2] = c.map(i128::from);
            if x2 < x1 || y2 < y1 {
                0
            } else {
                (x2 - x1 + o) * (y2 - y1 + o)
            }
        };
        let [ax1, ay1, ax2, ay2] = candidate.map(i128::from);
        let [bx1, by1, bx2, by2] = kept.map(i128::from);
        let i = if bx1 > ax2 || bx2 < ax1 || by1 > ay2 || by2 < ay1 {
            0
        } else {
            (ax2.min(bx2) - ax1.max(bx1) + o) * (ay2.min(by2) - ay1.max(by1) + o)
        };
        let u = area(candidate) + area(kept) - i;
        u > 0 && i * (1i128 << f) > i128::from(t) * u
    }

    #[test]
    fn suppression_equals_the_plain_i128_formula() {
        let mut state = 0x1234_5678_9abc_def1u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut suppressed = 0;
        for case in 0..100_000 {
            let f = [0, 1, 16, 29, 30][case % 5];
            let offset = case % 3 == 0;
            let op = with(f, offset);
            // Coordinates over the whole clipped range, near its ends, or close together.
            let base = (next() % (1 << 31)) as i64;
            let mut corners = [[0i32; 4]; 2];
            for value in corners.as_flattened_mut() {
                let r = next();
                let v = match r % 4 {
                    0 => (r >> 8) as i64 % (1 << 31),
                    1 => (1 << 31) - 1 - (r >> 8) as i64 % 64,
                    2 => (r >> 8) as i64 % 64,
                    _ => base + (r >> 8) as i64 % 2048 - 1024,
                };
                *value = v.clamp(0, (1 << 31) - 1) as i32;
            }
            let [kept, mut candidate] = corners;
            if case % 2 == 0 {
                // A candidate close to the kept box: IoU near 1 or near the threshold.
                let jitter = 1 + (next() % (1 << (next() % 31))) as i64;
                for (c, &k) in candidate.iter_mut().zip(&kept) {
                    let step = (next() % (2 * jitter as u64 + 1)) as i64 - jitter;
                    *c = (i64::from(k) + step).clamp(0, (1 << 31) - 1) as i32;
                }
            }
            let one = 1i64 << f;
            let t = 1 + (next() % one as u64) as i64;
            for corners in [&kept, &candidate] {
                let [x1, y1, x2, y2] = corners.map(i128::from);
                let o = i128::from(op.offset());
                let plain = if x2 < x1 || y2 < y1 {
                    0
                } else {
                    (x2 - x1 + o) * (y2 - y1 + o)
                };
                assert_eq!(op.area(corners), plain, "area of {corners:?}, F = {f}");
            }
            let fast = op.suppresses(&kept, op.area(&kept), &candidate, op.area(&candidate), t);
            assert_eq!(
                fast,
                plain_suppresses(f, offset, &kept, &candidate, t),
                "F = {f}, offset {offset}, kept {kept:?}, candidate {candidate:?}, t = {t}"
            );
            suppressed += usize::from(fast);
        }
        assert!(suppressed > 1000, "{suppressed} suppressing pairs");
    }

    #[test]
    fn side_products_are_exact() {
        let extremes = [
            0,
            1,
            -1,
            (1i64 << 31) + (1 << 30) - 1,
            -(1i64 << 31) + 1,
            (1 << 31) - 1,
            12_345_678,
            -87_654_321,
        ];
        for a in extremes {
            for b in extremes {
                assert_eq!(side_product(a, b), i128::from(a) * i128::from(b), "{a}·{b}");
            }
        }
    }

    #[test]
    fn zero_deltas_give_the_anchor_back() {
        // e^0 = 1 exactly (k = 0, r = 0), so the decoded box is the anchor itself.
        for (f, offset) in [(0, true), (8, false), (16, true), (30, false)] {
            let op = with(f, offset);
            let one = 1i32 << f.min(29);
            let anchor = [one / 2, one / 4, one, one];
            let corners = op
                .decode(&anchor, &[0; 4], &[one; 4], i32::MAX, i32::MAX)
                .unwrap_or_default();
            assert_eq!(corners, anchor, "F = {f}");
        }
    }

    #[test]
    fn exponent_is_clamped_at_the_nearest_q_value_of_ln_62_5() {
        // Q(F) values nearest ln 62.5 = 4.1352…: 4 at F = 0, 1059 at F = 8, 271002 at F = 16.
        for (f, expected) in [(0u32, 4i128), (8, 1059), (16, 271_002), (30, 4_440_101_281)] {
            assert_eq!(with(f, true).exp_clip_q2f >> f, expected, "F = {f}");
        }
    }

    #[test]
    fn iou_equal_to_the_threshold_does_not_suppress() {
        // [0,0,10,10] and [0,0,10,5] without offset: I = 50, U = 100, IoU = 0.5 exactly.
        let a = [0, 0, 10, 10];
        let b = [0, 0, 10, 5];
        let suppresses = |op: &GenerateProposals, kept: &[i32; 4], candidate: &[i32; 4], t| {
            op.suppresses(kept, op.area(kept), candidate, op.area(candidate), t)
        };
        assert!(!suppresses(&with(0, false), &a, &b, 1)); // threshold 1.0 at F = 0
        let op16 = with(16, false);
        let scaled = |c: [i32; 4]| c.map(|v| v << 16);
        assert!(!suppresses(&op16, &scaled(a), &scaled(b), 1 << 15));
        assert!(suppresses(&op16, &scaled(a), &scaled(b), (1 << 15) - 1));
        // Degenerate boxes (zero area, zero union) never suppress.
        assert!(!suppresses(&op16, &[0; 4], &[0; 4], 1));
    }
}
