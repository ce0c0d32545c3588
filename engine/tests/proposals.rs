//! Tests of `generate_proposals_v2` (`ops::detection::proposals`): a float64 implementation of the same
//! algorithm on random cases, hand-computed cases, the zero-element and bad-parameter rules of
//! spec 003, gas, extreme values, and a realistic RPN case (which `CVM_WRITE_PROPOSALS_FIXTURE`
//! writes out as a cvm-text/1 model).
//!
//! Tolerances of the float comparison:
//! - top-k is exact (integer scores, ties by lower anchor index) in both;
//! - every kept box's corners lie within [`TOLERANCE_ULP`] = 4 units of Q(F) of the float64
//!   corners, and within the operator's documented bound of them (the float value rounded to
//!   nearest, give or take the exponential's 1.25·2^-30 relative error); probabilities are the
//!   input scores, exactly (0 ulp);
//! - a keep/suppress or filter decision is "near" when the reals between the float64 corners and
//!   any value the operator may round them to decide it differently (interval arithmetic); near
//!   decisions take the operator's answer and are counted, every other decision must agree.
#![allow(
    clippy::float_arithmetic,
    clippy::cast_precision_loss,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)] // the reference is float64 by design; failures report by panicking

mod common;

use common::Rng;
use std::fmt::Write as _;

use cvm_engine::attrs::Attrs;
use cvm_engine::error::{Error, ErrorCode};
use cvm_engine::model::{Attr, AttrValue};
use cvm_engine::ops::detection::proposals::GENERATE_PROPOSALS_V2;
use cvm_engine::ops::{Arity, Family, Operator};
use cvm_engine::tensor::{Shape, Tensor, TensorMut, TensorRef, TensorType};
use cvm_gas::{Usage, Work};

/// Largest allowed distance of a kept corner from the float64 corner, in units of Q(F).
const TOLERANCE_ULP: f64 = 4.0;

// ---------------------------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------------------------

impl Rng {
    /// Uniform real in [low, high).
    fn real(&mut self, low: f64, high: f64) -> f64 {
        low + (high - low) * ((self.next() >> 11) as f64 / (1u64 << 53) as f64)
    }
}

/// One application: shapes, Q(F) values and attributes.
#[derive(Clone, Debug)]
struct Case {
    frac_bits: u32,
    /// N, H, W, A.
    dims: [u32; 4],
    scores: Vec<i32>,
    deltas: Vec<i32>,
    im_shape: Vec<i32>,
    anchors: Vec<i32>,
    variances: Vec<i32>,
    pre_nms_top_n: i64,
    post_nms_top_n: i64,
    nms_thresh: i64,
    min_size: i64,
    eta: i64,
    pixel_offset: bool,
}

impl Case {
    fn one(&self) -> i64 {
        1 << self.frac_bits
    }

    fn anchors_per_image(&self) -> usize {
        let [_, h, w, a] = self.dims;
        (h * w * a) as usize
    }

    fn attrs(&self) -> Vec<Attr> {
        sorted(&[
            ("eta", AttrValue::Int(self.eta)),
            ("frac_bits", AttrValue::Int(i64::from(self.frac_bits))),
            ("min_size", AttrValue::Int(self.min_size)),
            ("nms_thresh", AttrValue::Int(self.nms_thresh)),
            ("pixel_offset", AttrValue::Bool(self.pixel_offset)),
            ("post_nms_top_n", AttrValue::Int(self.post_nms_top_n)),
            ("pre_nms_top_n", AttrValue::Int(self.pre_nms_top_n)),
        ])
    }

    /// The five inputs as (name, shape, values).
    fn named_inputs(&self) -> [(&'static str, Vec<u32>, &[i32]); 5] {
        let [n, h, w, a] = self.dims;
        [
            ("scores", vec![n, h, w, a], &self.scores),
            ("bbox_deltas", vec![n, h, w, 4 * a], &self.deltas),
            ("im_shape", vec![n, 2], &self.im_shape),
            ("anchors", vec![h, w, a, 4], &self.anchors),
            ("variances", vec![h, w, a, 4], &self.variances),
        ]
    }

    fn tensors(&self) -> Vec<Tensor> {
        self.named_inputs()
            .into_iter()
            .map(|(_, dims, data)| tensor(&dims, data))
            .collect()
    }
}

fn sorted(attrs: &[(&'static str, AttrValue)]) -> Vec<Attr> {
    let mut list: Vec<Attr> = attrs
        .iter()
        .map(|(name, value)| Attr {
            name: (*name).into(),
            value: value.clone(),
        })
        .collect();
    list.sort_by(|a, b| a.name.cmp(&b.name));
    list
}

fn tensor(dims: &[u32], data: &[i32]) -> Tensor {
    assert_eq!(
        dims.iter().map(|&d| d as usize).product::<usize>(),
        data.len(),
        "data for {dims:?}"
    );
    Tensor {
        shape: Shape::new(dims.to_vec()),
        precision: 32,
        data: data.to_vec(),
    }
}

fn types_of(tensors: &[Tensor]) -> Vec<TensorType> {
    tensors
        .iter()
        .map(|t| TensorType {
            shape: t.shape.clone(),
            precision: t.precision,
        })
        .collect()
}

/// Builds the operator from attributes and infers the output types.
fn prepare(
    attrs: &[Attr],
    inputs: &[TensorType],
) -> Result<(Box<dyn Operator>, Vec<TensorType>), Error> {
    let checked = Attrs::check(attrs, GENERATE_PROPOSALS_V2.attrs)?;
    let operator = (GENERATE_PROPOSALS_V2.build)(&checked, inputs.len())?;
    let types = operator.infer(inputs)?;
    assert_eq!(types.len(), 4);
    Ok((operator, types))
}

/// The operator's four outputs.
#[derive(Debug)]
struct Outputs {
    types: Vec<TensorType>,
    rois: Vec<i32>,
    probs: Vec<i32>,
    nums: Vec<i32>,
    batch_size: i32,
}

fn execute(attrs: &[Attr], inputs: &[Tensor]) -> Result<Outputs, Error> {
    let types = types_of(inputs);
    let (operator, out_types) = prepare(attrs, &types)?;
    operator.usage(&types, &out_types)?;
    let mut outputs: Vec<Tensor> = out_types
        .iter()
        .map(|ty| Tensor::zeroed(ty).unwrap())
        .collect();
    {
        let views: Vec<TensorRef<'_>> = inputs.iter().map(Tensor::view).collect();
        let mut results: Vec<TensorMut<'_>> = outputs.iter_mut().map(Tensor::view_mut).collect();
        operator.run(&views, &mut results)?;
    }
    let mut data = outputs.into_iter().map(|t| t.data);
    Ok(Outputs {
        types: out_types,
        rois: data.next().unwrap(),
        probs: data.next().unwrap(),
        nums: data.next().unwrap(),
        batch_size: data.next().unwrap()[0],
    })
}

fn run_case(case: &Case) -> Outputs {
    execute(&case.attrs(), &case.tensors())
        .unwrap_or_else(|e| panic!("generate_proposals_v2 failed: {e}\n{case:?}"))
}

fn code<T>(result: Result<T, Error>) -> ErrorCode {
    match result {
        Ok(_) => panic!("expected an error"),
        Err(error) => error.code,
    }
}

// ---------------------------------------------------------------------------------------------
// Float64 reference with decision intervals
// ---------------------------------------------------------------------------------------------

/// The Q(F) value nearest ln(1000/16), as the operator clamps the exponent (part of the
/// algorithm's definition; f64 is exact enough: at F ≤ 30 the value is ≥ 0.018 ulp off a half).
fn exp_clip(frac_bits: u32) -> f64 {
    (62.5f64.ln() * (1u64 << frac_bits) as f64).round()
}

/// Round half away from zero of `value / 2^f` (the operator's threshold update).
fn round_q(value: i128, f: u32) -> i64 {
    if f == 0 {
        return value as i64;
    }
    let half = 1i128 << (f - 1);
    let magnitude = (value.abs() + half) >> f;
    (if value < 0 { -magnitude } else { magnitude }) as i64
}

/// Three-valued decisions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tri {
    Yes,
    No,
    Maybe,
}

impl Tri {
    fn and(self, other: Tri) -> Tri {
        match (self, other) {
            (Tri::No, _) | (_, Tri::No) => Tri::No,
            (Tri::Yes, Tri::Yes) => Tri::Yes,
            _ => Tri::Maybe,
        }
    }

    fn or(self, other: Tri) -> Tri {
        match (self, other) {
            (Tri::Yes, _) | (_, Tri::Yes) => Tri::Yes,
            (Tri::No, Tri::No) => Tri::No,
            _ => Tri::Maybe,
        }
    }

    fn not(self) -> Tri {
        match self {
            Tri::Yes => Tri::No,
            Tri::No => Tri::Yes,
            Tri::Maybe => Tri::Maybe,
        }
    }
}

/// A closed interval of reals.
#[derive(Clone, Copy, Debug)]
struct Iv {
    lo: f64,
    hi: f64,
}

impl Iv {
    const ZERO: Iv = Iv { lo: 0.0, hi: 0.0 };

    fn point(value: f64) -> Iv {
        Iv {
            lo: value,
            hi: value,
        }
    }

    fn add(self, other: Iv) -> Iv {
        Iv {
            lo: self.lo + other.lo,
            hi: self.hi + other.hi,
        }
    }

    fn sub(self, other: Iv) -> Iv {
        Iv {
            lo: self.lo - other.hi,
            hi: self.hi - other.lo,
        }
    }

    fn plus(self, c: f64) -> Iv {
        Iv {
            lo: self.lo + c,
            hi: self.hi + c,
        }
    }

    fn mul(self, other: Iv) -> Iv {
        let products = [
            self.lo * other.lo,
            self.lo * other.hi,
            self.hi * other.lo,
            self.hi * other.hi,
        ];
        Iv {
            lo: products.iter().copied().fold(f64::INFINITY, f64::min),
            hi: products.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        }
    }

    fn scale(self, c: f64) -> Iv {
        self.mul(Iv::point(c))
    }

    fn min(self, other: Iv) -> Iv {
        Iv {
            lo: self.lo.min(other.lo),
            hi: self.hi.min(other.hi),
        }
    }

    fn max(self, other: Iv) -> Iv {
        Iv {
            lo: self.lo.max(other.lo),
            hi: self.hi.max(other.hi),
        }
    }

    fn hull(self, other: Iv) -> Iv {
        Iv {
            lo: self.lo.min(other.lo),
            hi: self.hi.max(other.hi),
        }
    }

    fn magnitude(self) -> f64 {
        self.lo.abs().max(self.hi.abs())
    }
}

/// a > b.
fn gt(a: Iv, b: Iv) -> Tri {
    if a.lo > b.hi {
        Tri::Yes
    } else if a.hi <= b.lo {
        Tri::No
    } else {
        Tri::Maybe
    }
}

/// a ≥ b.
fn ge(a: Iv, b: Iv) -> Tri {
    if a.lo >= b.hi {
        Tri::Yes
    } else if a.hi < b.lo {
        Tri::No
    } else {
        Tri::Maybe
    }
}

/// value > 0, with `eps` of slack for the rounding of the f64 products.
fn positive(value: Iv, eps: f64) -> Tri {
    if value.lo > eps {
        Tri::Yes
    } else if value.hi <= -eps {
        Tri::No
    } else {
        Tri::Maybe
    }
}

fn pick(condition: Tri, yes: Iv, no: Iv) -> Iv {
    match condition {
        Tri::Yes => yes,
        Tri::No => no,
        Tri::Maybe => yes.hull(no),
    }
}

/// A decoded, clipped box of the float64 reference, in units of Q(F).
#[derive(Clone, Copy, Debug)]
struct RefBox {
    score: i32,
    /// Unclipped float64 corners.
    exact: [f64; 4],
    /// Clipped float64 corners.
    point: [f64; 4],
    /// Every value between the float corner and what the operator may round it to, clipped.
    range: [Iv; 4],
    /// The operator's possible corners: the float corner ± its error bound, rounded and clipped.
    rounded: [(f64, f64); 4],
}

impl RefBox {
    fn intervals(&self) -> [Iv; 4] {
        self.range
    }

    fn points(&self) -> [Iv; 4] {
        self.point.map(Iv::point)
    }

    fn exact_corners(&self) -> Option<[i128; 4]> {
        let range = self.range;
        range
            .iter()
            .all(|iv| iv.lo == iv.hi && iv.lo.fract() == 0.0)
            .then(|| range.map(|iv| iv.lo as i128))
    }
}

/// Spec 003's decode and clip in float64 for anchor `anchor` of image `image`.
fn decode_ref(case: &Case, image: usize, anchor: usize) -> RefBox {
    let f = case.frac_bits;
    let scale = (1u64 << f) as f64;
    let real = |v: i32| f64::from(v) / scale;
    let offset = if case.pixel_offset { 1.0 } else { 0.0 };
    let per_image = case.anchors_per_image();
    let a = &case.anchors[anchor * 4..anchor * 4 + 4];
    let d = &case.deltas[(image * per_image + anchor) * 4..(image * per_image + anchor) * 4 + 4];
    let var = &case.variances[anchor * 4..anchor * 4 + 4];
    let clip = exp_clip(f) / scale;
    let mut exact = [0.0; 4];
    let mut slack = [0.0; 4];
    for axis in 0..2 {
        let start = real(a[axis]);
        let extent = real(a[axis + 2]) - start + offset;
        let centre = start + 0.5 * extent;
        let moved = centre + real(d[axis]) * extent * real(var[axis]);
        let size = (real(d[axis + 2]) * real(var[axis + 2])).min(clip).exp() * extent;
        exact[axis] = (moved - size / 2.0) * scale;
        exact[axis + 2] = (moved + size / 2.0 - offset) * scale;
        // The operator's error before rounding: 1.25·2^-30 of the half extent (its
        // exponential), below 2^-20 otherwise; plus this reference's own f64 error.
        let bound = (size / 2.0 * scale).abs() * 2f64.powi(-29) + 2f64.powi(-20);
        slack[axis] = bound + exact[axis].abs() * 2f64.powi(-45);
        slack[axis + 2] = bound + exact[axis + 2].abs() * 2f64.powi(-45);
    }
    let offset_q = offset * scale;
    let im_h = f64::from(case.im_shape[image * 2]);
    let im_w = f64::from(case.im_shape[image * 2 + 1]);
    let bounds = [
        im_w - offset_q,
        im_h - offset_q,
        im_w - offset_q,
        im_h - offset_q,
    ];
    let clamp = |v: f64, bound: f64| v.min(bound).max(0.0);
    let mut point = [0.0; 4];
    let mut range = [Iv::ZERO; 4];
    let mut rounded = [(0.0, 0.0); 4];
    for c in 0..4 {
        let (v, bound) = (exact[c], bounds[c]);
        let low = (v - slack[c]).round();
        let high = (v + slack[c]).round();
        point[c] = clamp(v, bound);
        rounded[c] = (clamp(low, bound), clamp(high, bound));
        range[c] = Iv {
            lo: clamp(v.min(low), bound),
            hi: clamp(v.max(high), bound),
        };
    }
    RefBox {
        score: case.scores[image * per_image + anchor],
        exact,
        point,
        range,
        rounded,
    }
}

/// The min-size filter (spec 003 removeSmallBox): `Yes` keeps the box.
fn filter_tri(case: &Case, image: usize, corners: [Iv; 4]) -> Tri {
    let offset = if case.pixel_offset {
        case.one() as f64
    } else {
        0.0
    };
    let min_size = Iv::point(case.min_size as f64);
    let width = corners[2].sub(corners[0]).plus(offset);
    let height = corners[3].sub(corners[1]).plus(offset);
    let mut keep = ge(width, min_size).and(ge(height, min_size));
    if case.pixel_offset {
        let im_h = f64::from(case.im_shape[image * 2]);
        let im_w = f64::from(case.im_shape[image * 2 + 1]);
        // x1 + w/2 ≤ im_w ⇔ x1 + x2 + offset ≤ 2·im_w.
        let cx = corners[0].add(corners[2]).plus(offset);
        let cy = corners[1].add(corners[3]).plus(offset);
        keep = keep
            .and(ge(Iv::point(2.0 * im_w), cx))
            .and(ge(Iv::point(2.0 * im_h), cy));
    }
    keep
}

/// Whether `kept` suppresses `candidate` (IoU > threshold, IoU 0 when the union is ≤ 0).
fn suppress_tri(
    case: &Case,
    kept: [Iv; 4],
    candidate: [Iv; 4],
    threshold: f64,
    slack: bool,
) -> Tri {
    let offset = if case.pixel_offset {
        case.one() as f64
    } else {
        0.0
    };
    let area = |b: [Iv; 4]| -> Iv {
        let malformed = gt(b[0], b[2]).or(gt(b[1], b[3]));
        let product = b[2].sub(b[0]).plus(offset).mul(b[3].sub(b[1]).plus(offset));
        pick(malformed, Iv::ZERO, product)
    };
    let (c, k) = (candidate, kept);
    let apart = gt(k[0], c[2])
        .or(gt(c[0], k[2]))
        .or(gt(k[1], c[3]))
        .or(gt(c[1], k[3]));
    let overlap = c[2]
        .min(k[2])
        .sub(c[0].max(k[0]))
        .plus(offset)
        .mul(c[3].min(k[3]).sub(c[1].max(k[1])).plus(offset));
    let intersection = pick(apart, Iv::ZERO, overlap);
    let areas = area(c).add(area(k));
    let union = areas.sub(intersection);
    let g = intersection
        .scale(1.0 + threshold)
        .sub(areas.scale(threshold));
    let eps = if slack {
        (intersection.magnitude() * (1.0 + threshold) + areas.magnitude() * threshold)
            * 2f64.powi(-45)
    } else {
        0.0
    };
    positive(union, eps).and(positive(g, eps))
}

/// The same test on integer corners, exactly (for boxes whose corners are known exactly).
fn suppress_exact(case: &Case, kept: [i128; 4], candidate: [i128; 4], threshold_q: i64) -> bool {
    let offset = if case.pixel_offset {
        case.one() as i128
    } else {
        0
    };
    let area = |b: [i128; 4]| {
        if b[2] < b[0] || b[3] < b[1] {
            0
        } else {
            (b[2] - b[0] + offset) * (b[3] - b[1] + offset)
        }
    };
    let (c, k) = (candidate, kept);
    let intersection = if k[0] > c[2] || c[0] > k[2] || k[1] > c[3] || c[1] > k[3] {
        0
    } else {
        (c[2].min(k[2]) - c[0].max(k[0]) + offset) * (c[3].min(k[3]) - c[1].max(k[1]) + offset)
    };
    let union = area(c) + area(k) - intersection;
    union > 0 && intersection * case.one() as i128 > i128::from(threshold_q) * union
}

/// Figures of the comparison.
#[derive(Debug, Default)]
struct Stats {
    cases: u64,
    images: u64,
    kept_rows: u64,
    max_error_ulp: f64,
    not_nearest: u64,
    near_filter: u64,
    near_nms: u64,
    near_flipped: u64,
    topk_truncated: u64,
    post_truncated: u64,
    filtered_out: u64,
    adaptive_steps: u64,
    empty_images: u64,
    pixel_offset_cases: u64,
}

impl Stats {
    fn merge(&mut self, other: &Stats) {
        self.cases += other.cases;
        self.images += other.images;
        self.kept_rows += other.kept_rows;
        self.max_error_ulp = self.max_error_ulp.max(other.max_error_ulp);
        self.not_nearest += other.not_nearest;
        self.near_filter += other.near_filter;
        self.near_nms += other.near_nms;
        self.near_flipped += other.near_flipped;
        self.topk_truncated += other.topk_truncated;
        self.post_truncated += other.post_truncated;
        self.filtered_out += other.filtered_out;
        self.adaptive_steps += other.adaptive_steps;
        self.empty_images += other.empty_images;
        self.pixel_offset_cases += other.pixel_offset_cases;
    }
}

/// The top-k order of image `image`: score descending, ties by lower anchor index.
fn top_k(case: &Case, image: usize) -> Vec<usize> {
    let per_image = case.anchors_per_image();
    let scores = &case.scores[image * per_image..(image + 1) * per_image];
    let mut order: Vec<usize> = (0..per_image).collect();
    order.sort_by(|&a, &b| scores[b].cmp(&scores[a]).then(a.cmp(&b)));
    order.truncate(case.pre_nms_top_n.min(per_image as i64) as usize);
    order
}

/// Compares the operator's rows of image `image` (from row `first`) with the reference;
/// returns the number of rows.
fn compare_image(
    case: &Case,
    image: usize,
    out: &Outputs,
    first: usize,
    stats: &mut Stats,
) -> usize {
    let rows = usize::try_from(out.nums[image]).unwrap();
    let row = |j: usize| -> ([i32; 4], i32) {
        let at = first + j;
        (
            out.rois[at * 4..at * 4 + 4].try_into().unwrap(),
            out.probs[at],
        )
    };
    let order = top_k(case, image);
    if order.len() < case.anchors_per_image() {
        stats.topk_truncated += 1;
    }
    let post = case.post_nms_top_n as usize;
    let one = case.one();
    let mut threshold = case.nms_thresh;
    let mut kept: Vec<RefBox> = Vec::new();
    let mut next = 0usize;
    let context = |what: &str, anchor: usize| -> String {
        format!("image {image}, anchor {anchor}: {what}\n{case:?}")
    };
    for &anchor in &order {
        if kept.len() >= post {
            stats.post_truncated += 1;
            break;
        }
        let candidate = decode_ref(case, image, anchor);
        let filter = filter_tri(case, image, candidate.intervals());
        let filter_nominal = filter_tri(case, image, candidate.points()) == Tri::Yes;
        if filter == Tri::No {
            stats.filtered_out += 1;
        }
        let threshold_real = threshold as f64 / one as f64;
        let (suppress, suppress_nominal) = if filter == Tri::No {
            (Tri::No, false)
        } else {
            kept.iter().fold((Tri::No, false), |(tri, nominal), other| {
                let (t, n) = match (other.exact_corners(), candidate.exact_corners()) {
                    (Some(k), Some(c)) => {
                        let s = suppress_exact(case, k, c, threshold);
                        (if s { Tri::Yes } else { Tri::No }, s)
                    }
                    _ => (
                        suppress_tri(
                            case,
                            other.intervals(),
                            candidate.intervals(),
                            threshold_real,
                            true,
                        ),
                        suppress_tri(
                            case,
                            other.points(),
                            candidate.points(),
                            threshold_real,
                            false,
                        ) == Tri::Yes,
                    ),
                };
                (tri.or(t), nominal || n)
            })
        };
        let keep = filter.and(suppress.not());
        let keep_nominal = filter_nominal && !suppress_nominal;
        // The operator's next row is this box when the score is the same and every corner is
        // one the operator may produce for it (an operator corner outside its bound would show
        // up as a missing box).
        let op_keeps = next < rows && {
            let (corners, prob) = row(next);
            prob == candidate.score
                && (0..4).all(|c| {
                    let (low, high) = candidate.rounded[c];
                    (low..=high).contains(&f64::from(corners[c]))
                })
        };
        let decision = match keep {
            Tri::Yes => {
                assert!(
                    op_keeps,
                    "{}",
                    context("the reference keeps it, the operator does not", anchor)
                );
                true
            }
            Tri::No => {
                assert!(
                    !op_keeps,
                    "{}",
                    context("the operator keeps a box the reference drops", anchor)
                );
                false
            }
            Tri::Maybe => {
                if filter == Tri::Maybe {
                    stats.near_filter += 1;
                } else {
                    stats.near_nms += 1;
                }
                if op_keeps != keep_nominal {
                    stats.near_flipped += 1;
                }
                op_keeps
            }
        };
        if !decision {
            continue;
        }
        let (corners, _) = row(next);
        for (c, &corner) in corners.iter().enumerate() {
            let value = f64::from(corner);
            let error = (value - candidate.point[c]).abs();
            stats.max_error_ulp = stats.max_error_ulp.max(error);
            let (low, high) = candidate.rounded[c];
            assert!(
                low <= value && value <= high,
                "{}",
                context(
                    &format!(
                        "corner {c} = {value} outside the operator's bound [{low}, {high}] of {}",
                        candidate.exact[c]
                    ),
                    anchor
                )
            );
            // The correctly rounded corner (clipping commutes with rounding to integers).
            if value != candidate.point[c].round() {
                stats.not_nearest += 1;
            }
        }
        kept.push(candidate);
        next += 1;
        stats.kept_rows += 1;
        if case.eta < one && 2 * threshold > one {
            threshold = round_q(i128::from(threshold) * i128::from(case.eta), case.frac_bits);
            stats.adaptive_steps += 1;
        }
    }
    if kept.is_empty() {
        stats.empty_images += 1;
        assert_eq!(rows, 1, "{}", context("an empty image has one row", 0));
        assert_eq!(
            row(0),
            ([0; 4], 0),
            "{}",
            context("the empty row is zero", 0)
        );
    } else {
        assert_eq!(next, rows, "{}", context("kept counts differ", 0));
    }
    rows
}

/// Compares a whole application with the reference.
fn compare(case: &Case, stats: &mut Stats) {
    let out = run_case(case);
    let images = case.dims[0] as usize;
    let mut first = 0;
    for image in 0..images {
        first += compare_image(case, image, &out, first, stats);
        stats.images += 1;
    }
    assert_eq!(out.batch_size as usize, first, "batch size\n{case:?}");
    assert_eq!(out.nums.iter().map(|&n| n as usize).sum::<usize>(), first);
    assert!(
        out.rois[first * 4..].iter().all(|&v| v == 0),
        "rows after the valid ones are zero"
    );
    assert!(out.probs[first..].iter().all(|&v| v == 0));
    stats.cases += 1;
    if case.pixel_offset {
        stats.pixel_offset_cases += 1;
    }
}

// ---------------------------------------------------------------------------------------------
// Random cases
// ---------------------------------------------------------------------------------------------

fn random_case(rng: &mut Rng, frac_bits: u32) -> Case {
    let scale = (1i64 << frac_bits) as f64;
    let q = |x: f64| (x * scale).round() as i64;
    let n = rng.size(1, 3) as u32;
    let h = rng.size(1, 8) as u32;
    let w = rng.size(1, 8) as u32;
    let a = rng.size(1, 6) as u32;
    let per_image = (h * w * a) as usize;
    let mut im_shape = Vec::new();
    for _ in 0..n {
        im_shape.push(rng.range(q(16.0), q(160.0)) as i32);
        im_shape.push(rng.range(q(16.0), q(160.0)) as i32);
    }
    let mut anchors = Vec::new();
    for _ in 0..per_image {
        let cx = rng.range(q(-16.0), q(176.0));
        let cy = rng.range(q(-16.0), q(176.0));
        let mut side = || {
            if rng.chance(5) {
                rng.range(q(-2.0), q(1.0))
            } else {
                rng.range(q(1.0), q(32.0))
            }
        };
        let (bw, bh) = (side(), side());
        anchors.extend(
            [cx - bw / 2, cy - bh / 2, cx - bw / 2 + bw, cy - bh / 2 + bh].map(|v| v as i32),
        );
    }
    let variances: Vec<i32> = (0..per_image * 4)
        .map(|_| rng.range(q(0.05), q(1.5)) as i32)
        .collect();
    let mut deltas = Vec::new();
    for _ in 0..n as usize * per_image {
        let wide = rng.chance(10);
        for c in 0..4 {
            let bound = match (c < 2, wide) {
                (true, _) => q(1.0),
                (false, false) => q(3.0),
                (false, true) => q(8.0),
            };
            deltas.push(rng.range(-bound, bound) as i32);
        }
    }
    let score_bound = (1i64 << frac_bits).max(64);
    let tie_values = [rng.range(1, score_bound), rng.range(1, score_bound)];
    let scores: Vec<i32> = (0..n as usize * per_image)
        .map(|_| {
            if rng.chance(25) {
                tie_values[rng.size(0, 1)] as i32
            } else {
                let v = rng.range(1, score_bound);
                (if rng.chance(20) { -v } else { v }) as i32
            }
        })
        .collect();
    let one = 1i64 << frac_bits;
    let nms_thresh = match rng.size(0, 4) {
        0 => q(0.3),
        1 => q(0.5),
        2 => q(0.7),
        3 => one,
        _ => rng.range(1, one),
    }
    .clamp(1, one);
    let min_size = match rng.size(0, 9) {
        0..=3 => 0,
        4..=6 => rng.range(0, q(4.0)),
        _ => rng.range(q(4.0), q(24.0)),
    };
    let eta = match rng.size(0, 9) {
        0..=4 => one,
        5..=7 => rng.range(q(0.5), q(0.99)).max(1),
        _ => rng.range(one, 2 * one),
    };
    Case {
        frac_bits,
        dims: [n, h, w, a],
        scores,
        deltas,
        im_shape,
        anchors,
        variances,
        pre_nms_top_n: rng.range(1, per_image as i64 + 3),
        post_nms_top_n: rng.range(1, per_image as i64 + 1),
        nms_thresh,
        min_size,
        eta,
        pixel_offset: rng.chance(50),
    }
}

#[test]
fn matches_a_float64_reference_on_random_cases() {
    let mut rng = Rng(0x0003_6FB0_BA54);
    let mut stats = Stats::default();
    for frac_bits in [0, 4, 8, 12, 16, 20] {
        let mut at_f = Stats::default();
        for _ in 0..1000 {
            let case = random_case(&mut rng, frac_bits);
            compare(&case, &mut at_f);
        }
        println!(
            "F = {frac_bits:2}: {} kept rows, max error {:.3} ulp, {} corners not the nearest, \
             near decisions {} (filter) + {} (NMS), {} decided otherwise than the float nominal",
            at_f.kept_rows,
            at_f.max_error_ulp,
            at_f.not_nearest,
            at_f.near_filter,
            at_f.near_nms,
            at_f.near_flipped
        );
        // On finer grids rounding to Q(F) rarely lands a decision near its threshold; on the
        // whole-pixel grids (F = 0, 4) it often does, and those decisions are counted, not
        // compared.
        if frac_bits >= 8 {
            assert!(
                (at_f.near_filter + at_f.near_nms) * 50 < at_f.kept_rows,
                "{at_f:?}"
            );
        }
        stats.merge(&at_f);
    }
    println!("random comparison: {stats:#?}");
    assert_eq!(stats.cases, 6000);
    assert!(stats.max_error_ulp <= TOLERANCE_ULP);
    // Every feature was exercised.
    assert!(stats.topk_truncated > 100, "{stats:?}");
    assert!(stats.post_truncated > 100, "{stats:?}");
    assert!(stats.filtered_out > 100, "{stats:?}");
    assert!(stats.adaptive_steps > 100, "{stats:?}");
    assert!(stats.empty_images > 10, "{stats:?}");
    assert!(stats.pixel_offset_cases > 1000, "{stats:?}");
}

// ---------------------------------------------------------------------------------------------
// Hand-computed cases
// ---------------------------------------------------------------------------------------------

/// A case with one anchor row per box, zero deltas (so boxes are the anchors) and a large image.
fn boxes_case(frac_bits: u32, boxes: &[[i64; 4]], scores: &[i64], pixel_offset: bool) -> Case {
    let one = 1i64 << frac_bits;
    let a = boxes.len() as u32;
    let to_q = |v: i64| (v * one) as i32;
    Case {
        frac_bits,
        dims: [1, 1, 1, a],
        scores: scores.iter().map(|&s| to_q(s)).collect(),
        deltas: vec![0; boxes.len() * 4],
        im_shape: vec![to_q(1000), to_q(1000)],
        anchors: boxes.iter().flat_map(|b| b.map(to_q)).collect(),
        variances: vec![to_q(1); boxes.len() * 4],
        pre_nms_top_n: 100,
        post_nms_top_n: 100,
        nms_thresh: (one + 1) / 2,
        min_size: 0,
        eta: one,
        pixel_offset,
    }
}

fn kept_rows(out: &Outputs) -> Vec<([i32; 4], i32)> {
    (0..out.batch_size as usize)
        .map(|r| (out.rois[r * 4..r * 4 + 4].try_into().unwrap(), out.probs[r]))
        .collect()
}

#[test]
fn the_spec_example_with_finite_scores() {
    // Spec 003 §1.2's nan/inf example with finite scores: two identical anchors [1, 1, 3, 3] per
    // image, deltas (0, 0, 2, 2), variances (1, 1, 3, 3): dw·var = 6 is clamped at ln 62.5,
    // d_w = 62.5·w, so the box covers the 5×5 image: [0, 0, 5, 5] without pixel offset (as the
    // spec's output), [0, 0, 4, 4] with it. The second anchor is the same box (IoU 1).
    let f = 16;
    let q = |x: f64| (x * 65536.0).round() as i32;
    for (pixel_offset, corner) in [(false, 5.0), (true, 4.0)] {
        let case = Case {
            frac_bits: f,
            dims: [2, 1, 2, 1],
            scores: vec![q(0.2), q(0.7), q(0.5), q(-1.0)],
            deltas: [0.0, 0.0, 2.0, 2.0].repeat(4).into_iter().map(q).collect(),
            im_shape: vec![q(5.0); 4],
            anchors: [1.0, 1.0, 3.0, 3.0].repeat(2).into_iter().map(q).collect(),
            variances: [1.0, 1.0, 3.0, 3.0].repeat(2).into_iter().map(q).collect(),
            pre_nms_top_n: 2000,
            post_nms_top_n: 1000,
            nms_thresh: q(0.5).into(),
            min_size: 0,
            eta: q(1.0).into(),
            pixel_offset,
        };
        let out = run_case(&case);
        let full = [0, 0, q(corner), q(corner)];
        assert_eq!(kept_rows(&out), vec![(full, q(0.7)), (full, q(0.5))]);
        assert_eq!(out.nums, vec![1, 1]);
        assert_eq!(out.batch_size, 2);
        assert_eq!(out.rois.len(), 2000 * 4);
        let mut stats = Stats::default();
        compare(&case, &mut stats);
    }
}

#[test]
fn top_k_and_nms_ties_prefer_the_lower_anchor_index() {
    // Four disjoint boxes with equal scores: top-2 keeps anchors 0 and 1, in that order.
    let boxes = [
        [0, 0, 10, 10],
        [20, 0, 30, 10],
        [40, 0, 50, 10],
        [60, 0, 70, 10],
    ];
    let mut case = boxes_case(8, &boxes, &[3, 3, 3, 3], false);
    case.pre_nms_top_n = 2;
    let out = run_case(&case);
    let q = |b: [i64; 4]| b.map(|v| (v << 8) as i32);
    assert_eq!(
        kept_rows(&out),
        vec![(q(boxes[0]), 3 << 8), (q(boxes[1]), 3 << 8)]
    );
    // Two overlapping boxes (IoU 10·11 / 132 > 0.5) with equal scores: NMS keeps the lower
    // index; a higher score wins over the index.
    let boxes = [[0, 0, 10, 10], [1, 0, 11, 10]];
    let out = run_case(&boxes_case(8, &boxes, &[5, 5], true));
    assert_eq!(kept_rows(&out), vec![(q(boxes[0]), 5 << 8)]);
    let out = run_case(&boxes_case(8, &boxes, &[5, 6], true));
    assert_eq!(kept_rows(&out), vec![(q(boxes[1]), 6 << 8)]);
}

#[test]
fn iou_exactly_at_the_threshold_is_kept() {
    // Without pixel offset: [0,0,10,10] and [0,0,10,5] overlap with IoU = 50/100 = 0.5.
    let boxes = [[0, 0, 10, 10], [0, 0, 10, 5]];
    let mut case = boxes_case(16, &boxes, &[2, 1], false);
    assert_eq!(run_case(&case).batch_size, 2, "IoU = threshold keeps");
    case.nms_thresh -= 1;
    assert_eq!(run_case(&case).batch_size, 1, "IoU > threshold suppresses");
    // With pixel offset the areas are 11·11 and 11·6, I = 66, U = 121: IoU = 6/11.
    let mut case = boxes_case(16, &boxes, &[2, 1], true);
    case.nms_thresh = (6 << 16) / 11 + 1; // just above 6/11
    assert_eq!(run_case(&case).batch_size, 2);
    case.nms_thresh = (6 << 16) / 11; // just below
    assert_eq!(run_case(&case).batch_size, 1);
}

#[test]
fn adaptive_eta_lowers_the_threshold_after_each_kept_box() {
    // A and B are disjoint; C overlaps A with IoU 0.6. At threshold 0.7, C survives; with
    // eta = 0.5 the threshold drops to 0.35 after A is kept and C is suppressed.
    let boxes = [[0, 0, 10, 10], [20, 0, 30, 10], [0, 0, 10, 6]];
    let mut case = boxes_case(16, &boxes, &[3, 2, 1], false);
    case.nms_thresh = (7 << 16) / 10;
    assert_eq!(run_case(&case).batch_size, 3);
    case.eta = 1 << 15;
    assert_eq!(run_case(&case).batch_size, 2);
    // eta ≥ 1 never adapts.
    case.eta = 3 << 15;
    assert_eq!(run_case(&case).batch_size, 3);
}

#[test]
fn min_size_filter_and_empty_images() {
    // Box widths 10 and 4 (plus the pixel offset: 11 and 5).
    let boxes = [[0, 0, 10, 10], [50, 50, 54, 54]];
    let mut case = boxes_case(4, &boxes, &[1, 2], true);
    case.min_size = 5 << 4;
    assert_eq!(run_case(&case).batch_size, 2, "5 ≥ 5 keeps");
    case.min_size += 1;
    let out = run_case(&case);
    assert_eq!(kept_rows(&out), vec![([0, 0, 10 << 4, 10 << 4], 1 << 4)]);
    // Nothing survives: one zero row of probability 0.
    case.min_size = 100 << 4;
    let out = run_case(&case);
    assert_eq!(out.nums, vec![1]);
    assert_eq!(kept_rows(&out), vec![([0; 4], 0)]);
    // Boxes outside the image are clipped to its edge: [30, 30, 40, 40] in a 20×20 image
    // becomes [19, 19, 19, 19] (with the pixel offset: width 1, centre 19.5 ≤ 20).
    let mut case = boxes_case(4, &[[0, 0, 10, 10], [30, 30, 40, 40]], &[1, 2], true);
    case.im_shape = vec![20 << 4, 20 << 4];
    let out = run_case(&case);
    assert_eq!(
        kept_rows(&out),
        vec![([19 << 4; 4], 2 << 4), ([0, 0, 10 << 4, 10 << 4], 1 << 4)]
    );
    // The centre test only fails for an image of width ≤ 0 once boxes are clipped: every box
    // becomes [0, 0, 0, 0] + offset, centre 0.5 > 0; the image yields the zero row.
    case.im_shape = vec![20 << 4, 0];
    let out = run_case(&case);
    assert_eq!(kept_rows(&out), vec![([0; 4], 0)]);
    let mut stats = Stats::default();
    compare(&case, &mut stats);
    assert_eq!(stats.empty_images, 1);
}

#[test]
fn rows_are_packed_per_image_and_truncated_at_post_nms_top_n() {
    let boxes = [[0, 0, 10, 10], [20, 0, 30, 10], [40, 0, 50, 10]];
    let one_image = boxes_case(0, &boxes, &[1, 2, 3], false);
    let mut case = one_image.clone();
    case.dims[0] = 2;
    case.scores = vec![1, 2, 3, 7, 8, 9];
    case.deltas = vec![0; 24];
    case.im_shape = vec![1000, 1000, 1000, 1000];
    case.post_nms_top_n = 2;
    let out = run_case(&case);
    assert_eq!(out.nums, vec![2, 2]);
    assert_eq!(out.batch_size, 4);
    let rows = kept_rows(&out);
    assert_eq!(
        rows.iter().map(|r| r.1).collect::<Vec<_>>(),
        vec![3, 2, 9, 8]
    );
    assert_eq!(out.rois.len(), 16);
}

// ---------------------------------------------------------------------------------------------
// Zero elements, bad parameters, shapes, gas
// ---------------------------------------------------------------------------------------------

fn shaped(dims: [u32; 4]) -> Case {
    let [n, h, w, a] = dims;
    let per_image = (h * w * a) as usize;
    Case {
        frac_bits: 8,
        dims,
        scores: vec![1; n as usize * per_image],
        deltas: vec![0; n as usize * per_image * 4],
        im_shape: vec![100 << 8; n as usize * 2],
        anchors: [0, 0, 10 << 8, 10 << 8].repeat(per_image),
        variances: vec![1 << 8; per_image * 4],
        pre_nms_top_n: 10,
        post_nms_top_n: 5,
        nms_thresh: 128,
        min_size: 0,
        eta: 256,
        pixel_offset: true,
    }
}

#[test]
fn zero_images_succeed_with_empty_outputs() {
    let out = run_case(&shaped([0, 2, 3, 4]));
    let shapes: Vec<Vec<u32>> = out.types.iter().map(|t| t.shape.dims().to_vec()).collect();
    assert_eq!(shapes, vec![vec![0, 4], vec![0, 1], vec![0], vec![1]]);
    assert_eq!(out.batch_size, 0);
    assert!(out.rois.is_empty() && out.probs.is_empty() && out.nums.is_empty());
}

#[test]
fn an_empty_feature_map_is_a_bad_parameter() {
    for dims in [
        [1, 0, 3, 4],
        [1, 2, 0, 4],
        [1, 2, 3, 0],
        [0, 2, 3, 0],
        [0, 0, 0, 0],
    ] {
        let case = shaped(dims);
        let types = types_of(&case.tensors());
        assert_eq!(
            code(prepare(&case.attrs(), &types)),
            ErrorCode::BadParam,
            "{dims:?}"
        );
    }
}

#[test]
fn attributes_outside_their_ranges_are_rejected() {
    let case = shaped([1, 2, 2, 3]);
    let types = types_of(&case.tensors());
    let with = |name: &'static str, value: AttrValue| -> Vec<Attr> {
        let mut attrs: Vec<Attr> = case
            .attrs()
            .into_iter()
            .filter(|a| a.name != name)
            .collect();
        attrs.push(Attr {
            name: name.into(),
            value,
        });
        attrs.sort_by(|a, b| a.name.cmp(&b.name));
        attrs
    };
    // pre_nms_top_n and post_nms_top_n ≤ 0 keep all, as Paddle's kernel: the output has
    // min(pre_nms_top_n, H·W·A) rows per image, here H·W·A = 12 unless pre limits it.
    for (pre, post, rows) in [(0, 1000, 1000), (-1, -1, 12), (5, 0, 5), (6000, -5, 12)] {
        let mut attrs = with("pre_nms_top_n", AttrValue::Int(pre));
        attrs.retain(|a| a.name != "post_nms_top_n");
        attrs.push(Attr {
            name: "post_nms_top_n".into(),
            value: AttrValue::Int(post),
        });
        attrs.sort_by(|a, b| a.name.cmp(&b.name));
        let (_, out) =
            prepare(&attrs, &types).unwrap_or_else(|e| panic!("pre {pre}, post {post}: {e}"));
        assert_eq!(out[0].dims(), [rows, 4], "pre {pre}, post {post}");
    }
    let out_of_range = [
        ("pre_nms_top_n", 1 << 31),
        ("post_nms_top_n", 1 << 31),
        ("nms_thresh", 0),
        ("nms_thresh", -1),
        ("nms_thresh", 257), // above 1.0 at F = 8
        ("min_size", -1),
        ("min_size", 1 << 31),
        ("eta", 0),
        ("eta", -256),
        ("frac_bits", 31),
        ("frac_bits", -1),
    ];
    for (name, value) in out_of_range {
        assert_eq!(
            code(prepare(&with(name, AttrValue::Int(value)), &types)),
            ErrorCode::AttributeOutOfRange,
            "{name} = {value}"
        );
    }
    assert_eq!(
        code(prepare(&with("pixel_offset", AttrValue::Int(1)), &types)),
        ErrorCode::AttributeType
    );
    assert!(prepare(&with("nms_thresh", AttrValue::Int(256)), &types).is_ok());
    assert!(prepare(&with("eta", AttrValue::Int(1)), &types).is_ok());
}

#[test]
fn defaults_are_the_documented_ones() {
    // With every attribute absent (F = 0): pre 6000, post 1000, nms 0.5 → 1, min_size 0.1 → 0,
    // eta 1, pixel_offset true. The output has N·1000 rows.
    let case = shaped([2, 1, 1, 1]);
    let types = types_of(&case.tensors());
    let (_, out) = prepare(&[], &types).unwrap();
    assert_eq!(out[0].shape.dims(), &[2000, 4]);
    // At F = 16 the defaults are 0.5, 0.1 and 1.0 in Q16. With pixel offset, [0,0,10,10] and
    // [0,0,10,5] overlap with IoU 6/11 > 0.5, and the malformed anchor [50,50,49,49] has width
    // 0 < 0.1: one row. min_size 0 keeps the malformed box (its area is 0, it suppresses nothing).
    let boxes = [[0, 0, 10, 10], [0, 0, 10, 5], [50, 50, 49, 49]];
    let case = boxes_case(16, &boxes, &[2, 1, 3], true);
    let explicit = sorted(&[
        ("frac_bits", AttrValue::Int(16)),
        ("nms_thresh", AttrValue::Int(32768)),
        ("min_size", AttrValue::Int(6554)),
        ("eta", AttrValue::Int(65536)),
        ("pixel_offset", AttrValue::Bool(true)),
        ("pre_nms_top_n", AttrValue::Int(6000)),
        ("post_nms_top_n", AttrValue::Int(1000)),
    ]);
    let implicit = sorted(&[("frac_bits", AttrValue::Int(16))]);
    let a = execute(&explicit, &case.tensors()).unwrap();
    let b = execute(&implicit, &case.tensors()).unwrap();
    assert_eq!(b.batch_size, 1);
    assert_eq!((a.rois, a.probs, a.nums), (b.rois, b.probs, b.nums));
    let no_min = sorted(&[
        ("frac_bits", AttrValue::Int(16)),
        ("min_size", AttrValue::Int(0)),
    ]);
    assert_eq!(execute(&no_min, &case.tensors()).unwrap().batch_size, 2);
}

#[test]
fn shape_mismatches_name_the_input() {
    let case = shaped([2, 3, 4, 5]);
    let good = types_of(&case.tensors());
    let bad: [(usize, &[u32], &str); 9] = [
        (0, &[2, 3, 4], "scores"),
        (1, &[2, 3, 4, 19], "bbox_deltas"),
        (1, &[2, 3, 5, 20], "bbox_deltas"),
        (1, &[2, 3, 4, 20, 1], "bbox_deltas"),
        (2, &[2, 3], "im_shape"),
        (2, &[3, 2], "im_shape"),
        (3, &[3, 4, 5, 3], "anchors"),
        (3, &[4, 3, 5, 4], "anchors"),
        (4, &[3, 4, 6, 4], "variances"),
    ];
    for (position, dims, name) in bad {
        let mut types = good.clone();
        types[position] = TensorType::new(dims.to_vec(), 32);
        let error = prepare(&case.attrs(), &types).unwrap_err();
        assert_eq!(error.code, ErrorCode::ShapeMismatch, "{name} {dims:?}");
        assert!(error.message.contains(name), "{}", error.message);
    }
}

#[test]
fn the_table_row_and_output_types() {
    let def = &GENERATE_PROPOSALS_V2;
    assert_eq!((def.code, def.name), (300, "generate_proposals_v2"));
    assert_eq!(def.family, Family::Vision);
    assert_eq!(def.arity, Arity::Exactly(5));
    assert_eq!(def.outputs, 4);
    let names: Vec<&str> = def.attrs.iter().map(|a| a.name).collect();
    assert_eq!(
        names,
        [
            "eta",
            "frac_bits",
            "min_size",
            "nms_thresh",
            "pixel_offset",
            "post_nms_top_n",
            "pre_nms_top_n"
        ]
    );
    // rois and probs: 32; counts: the least precision holding N·post = 3·5 = 15 (5 bits).
    let case = shaped([3, 2, 2, 2]);
    let (_, out) = prepare(&case.attrs(), &types_of(&case.tensors())).unwrap();
    let described: Vec<(Vec<u32>, u8)> = out
        .iter()
        .map(|t| (t.shape.dims().to_vec(), t.precision))
        .collect();
    assert_eq!(
        described,
        vec![
            (vec![15, 4], 32),
            (vec![15, 1], 32),
            (vec![3], 5),
            (vec![1], 5)
        ]
    );
    // N = 0: precision 1 holds the 0.
    let (_, out) = prepare(&case.attrs(), &types_of(&shaped([0, 2, 2, 2]).tensors())).unwrap();
    assert_eq!(out[2].precision, 1);
}

#[test]
fn gas_is_the_static_worst_case_formula() {
    let case = realistic_case();
    let types = types_of(&case.tensors());
    let (operator, out) = prepare(&case.attrs(), &types).unwrap();
    let usage = operator.usage(&types, &out).unwrap();
    // N = 2, H·W·A = 32 400, k = 2000, m = 1000: every score read, 13 values read per
    // candidate, two exponentials per candidate, every candidate against every kept box.
    let written: u64 = out.iter().map(|ty| ty.shape.elements()).sum();
    assert_eq!(
        usage,
        Usage {
            class: "",
            work: Work {
                reads: 2 * 32_400 + 2 * 2000 * 13,
                writes: written,
                pairs: 2 * 2000 * 1000,
                evals: 2 * 2000 * 2,
                ..Work::default()
            }
        }
    );
    // k and m follow H·W·A when it is smaller than the limits.
    let small = shaped([1, 2, 2, 2]);
    let types = types_of(&small.tensors());
    let (operator, out) = prepare(&small.attrs(), &types).unwrap();
    let written: u64 = out.iter().map(|ty| ty.shape.elements()).sum();
    assert_eq!(
        operator.usage(&types, &out).unwrap().work,
        Work {
            reads: 8 + 8 * 13,
            writes: written,
            pairs: 8 * 5,
            evals: 8 * 2,
            ..Work::default()
        }
    );
}

#[test]
fn extreme_values_never_panic() {
    let mut rng = Rng(77);
    let extremes = [
        -i64::from(i32::MAX),
        -(1 << 30),
        -1,
        0,
        1,
        1 << 30,
        i64::from(i32::MAX),
    ];
    for frac_bits in [0, 16, 30] {
        for round in 0..60 {
            let mut case = shaped([2, 2, 2, 2]);
            case.frac_bits = frac_bits;
            let one = 1i64 << frac_bits;
            let mut pick = || extremes[rng.size(0, extremes.len() - 1)] as i32;
            for data in [
                &mut case.scores,
                &mut case.deltas,
                &mut case.im_shape,
                &mut case.anchors,
                &mut case.variances,
            ] {
                for v in data.iter_mut() {
                    *v = pick();
                }
            }
            case.nms_thresh = one;
            case.eta = if round % 2 == 0 { 1 } else { one };
            case.min_size = 0;
            case.pixel_offset = round % 3 != 0;
            let out = run_case(&case);
            let offset = if case.pixel_offset { one } else { 0 };
            let valid = out.batch_size as usize;
            assert!(out.rois[..valid * 4].iter().all(|&c| c >= 0));
            for image in 0..2 {
                let bound_x = (i64::from(case.im_shape[image * 2 + 1]) - offset).max(0);
                let bound_y = (i64::from(case.im_shape[image * 2]) - offset).max(0);
                let first: usize = out.nums[..image].iter().map(|&n| n as usize).sum();
                for r in first..first + out.nums[image] as usize {
                    let c = &out.rois[r * 4..r * 4 + 4];
                    assert!(i64::from(c[0]) <= bound_x && i64::from(c[2]) <= bound_x);
                    assert!(i64::from(c[1]) <= bound_y && i64::from(c[3]) <= bound_y);
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The realistic case and its fixture
// ---------------------------------------------------------------------------------------------

/// N = 2 images of 864×640 and 800×600 pixels, a 54×40 feature map of stride 16 with A = 15
/// anchors per cell (sizes 32…512, ratios ½, 1, 2), variances 1, deltas and scores pseudo-random
/// (dx, dy in ±0.3, dw, dh in ±0.5, scores in [0, 1)); F = 16; pre 2000, post 1000, nms 0.5,
/// min_size 0, eta 1, no pixel offset (the settings of PaddleDetection's RPN at test time).
fn realistic_case() -> Case {
    let frac_bits = 16;
    let scale = 65536.0;
    let q = |x: f64| (x * scale).round() as i32;
    let (n, h, w) = (2u32, 54u32, 40u32);
    let sizes = [32.0, 64.0, 128.0, 256.0, 512.0];
    let ratios = [0.5f64, 1.0, 2.0];
    let mut anchors = Vec::new();
    for y in 0..h {
        for x in 0..w {
            for size in sizes {
                for ratio in ratios {
                    let (cx, cy) = (f64::from(x) * 16.0 + 7.5, f64::from(y) * 16.0 + 7.5);
                    let (bw, bh) = (size / ratio.sqrt(), size * ratio.sqrt());
                    anchors.extend(
                        [cx - bw / 2.0, cy - bh / 2.0, cx + bw / 2.0, cy + bh / 2.0].map(q),
                    );
                }
            }
        }
    }
    let per_image = (h * w * 15) as usize;
    let mut rng = Rng(0x2022_0822);
    let mut deltas = Vec::with_capacity(n as usize * per_image * 4);
    for _ in 0..n as usize * per_image {
        deltas.push(q(rng.real(-0.3, 0.3)));
        deltas.push(q(rng.real(-0.3, 0.3)));
        deltas.push(q(rng.real(-0.5, 0.5)));
        deltas.push(q(rng.real(-0.5, 0.5)));
    }
    let scores = (0..n as usize * per_image)
        .map(|_| rng.range(0, 65535) as i32)
        .collect();
    Case {
        frac_bits,
        dims: [n, h, w, 15],
        scores,
        deltas,
        im_shape: vec![q(864.0), q(640.0), q(800.0), q(600.0)],
        anchors,
        variances: vec![q(1.0); per_image * 4],
        pre_nms_top_n: 2000,
        post_nms_top_n: 1000,
        nms_thresh: 32768,
        min_size: 0,
        eta: 65536,
        pixel_offset: false,
    }
}

#[test]
fn the_realistic_case_runs_to_completion() {
    let case = realistic_case();
    let tensors = case.tensors();
    let types = types_of(&tensors);
    let (operator, out_types) = prepare(&case.attrs(), &types).unwrap();
    let mut outputs: Vec<Tensor> = out_types
        .iter()
        .map(|t| Tensor::zeroed(t).unwrap())
        .collect();
    {
        let views: Vec<TensorRef<'_>> = tensors.iter().map(Tensor::view).collect();
        let mut results: Vec<TensorMut<'_>> = outputs.iter_mut().map(Tensor::view_mut).collect();
        operator.run(&views, &mut results).unwrap();
    }
    println!(
        "realistic case (N = 2, A = 15, H = 54, W = 40, pre 2000, post 1000): rois_num = {:?}",
        outputs[2].data
    );
    let nums = &outputs[2].data;
    assert!(nums.iter().all(|&n| n > 1 && n <= 1000), "{nums:?}");
    assert_eq!(outputs[3].data[0], nums.iter().sum::<i32>());
    let mut stats = Stats::default();
    compare(&case, &mut stats);
    println!("realistic comparison: {stats:#?}");
    assert!(stats.max_error_ulp <= TOLERANCE_ULP);
}

/// The least precision holding every value.
fn least_precision(data: &[i32]) -> u32 {
    let largest = data.iter().map(|v| v.unsigned_abs()).max().unwrap_or(0);
    (u32::BITS - largest.leading_zeros()) + 1
}

/// A JSON list of integers.
fn json_list<T: std::fmt::Display>(values: &[T]) -> String {
    let mut text = String::from("[");
    for (i, v) in values.iter().enumerate() {
        if i > 0 {
            text.push_str(", ");
        }
        write!(text, "{v}").unwrap();
    }
    text.push(']');
    text
}

/// Writes `case` as a cvm-text/1 model at `path` (the five tensors as declared inputs) and its
/// inputs at `<path>.inputs.json`. Fixed-point attributes are written as the real numbers they
/// stand for.
fn write_fixture(case: &Case, path: &str) {
    let one = case.one() as f64;
    let named = case.named_inputs();
    let mut model = String::from("{\n  \"format\": \"cvm-text/1\",\n  \"inputs\": [\n");
    for (i, (name, dims, data)) in named.iter().enumerate() {
        writeln!(
            model,
            "    {{\"name\": \"{name}\", \"shape\": {}, \"precision\": {}}}{}",
            json_list(dims),
            least_precision(data),
            if i + 1 < named.len() { "," } else { "" }
        )
        .unwrap();
    }
    let real = |q: i64| {
        let value = q as f64 / one;
        if value.fract() == 0.0 {
            format!("{value:.1}")
        } else {
            format!("{value}")
        }
    };
    write!(
        model,
        "  ],\n  \"nodes\": [\n    {{\"name\": \"proposals\", \"op\": \"generate_proposals_v2\",\n     \"inputs\": [\"scores\", \"bbox_deltas\", \"im_shape\", \"anchors\", \"variances\"],\n     \"attrs\": {{\"eta\": {}, \"frac_bits\": {}, \"min_size\": {}, \"nms_thresh\": {}, \"pixel_offset\": {}, \"post_nms_top_n\": {}, \"pre_nms_top_n\": {}}}}}\n  ],\n  \"outputs\": [\"proposals:0\", \"proposals:1\", \"proposals:2\", \"proposals:3\"]\n}}\n",
        real(case.eta),
        case.frac_bits,
        real(case.min_size),
        real(case.nms_thresh),
        case.pixel_offset,
        case.post_nms_top_n,
        case.pre_nms_top_n,
    )
    .unwrap();
    let mut inputs = String::from("{\n");
    for (i, (name, dims, data)) in named.iter().enumerate() {
        writeln!(
            inputs,
            "  \"{name}\": {{\"shape\": {}, \"data\": {}}}{}",
            json_list(dims),
            json_list(data),
            if i + 1 < named.len() { "," } else { "" }
        )
        .unwrap();
    }
    inputs.push_str("}\n");
    std::fs::write(path, model).unwrap();
    std::fs::write(format!("{path}.inputs.json"), inputs).unwrap();
}

#[test]
fn write_the_realistic_fixture_when_asked() {
    // CVM_WRITE_PROPOSALS_FIXTURE=<path> writes the realistic case as a model and its inputs.
    if let Ok(path) = std::env::var("CVM_WRITE_PROPOSALS_FIXTURE") {
        write_fixture(&realistic_case(), &path);
        println!("wrote {path} and {path}.inputs.json");
    }
}
