//! Tests of the CINN complex primitives of spec 002 (in `ops::array`, `ops::math`, `ops::nn` and
//! `ops::reduce`) through their operator-table rows, against plain index-by-index references
//! written here.
//!
//! Conv's two gradients are checked against forward convolution itself: the adjoint identity
//! <forward(x, w), g> = <x, backward_data(w, g)> = <w, backward_filter(x, g)> (exact, F = 0),
//! element by element by perturbing one input (or weight) element by 1, and against a scatter
//! reference at F > 0. NHWC is checked against NCHW through transposes. Every other primitive is
//! checked against a reference on random cases and hand-computed examples; rejections must be
//! typed errors, never panics. Every random case has a fixed seed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // failures report by panicking
#![allow(clippy::needless_range_loop)] // references are written as index loops on purpose

mod common;

use common::Rng;
use std::collections::BTreeMap;

use cvm_engine::attrs::Attrs;
use cvm_engine::error::{Error, ErrorCode};
use cvm_engine::model::{Attr, AttrValue};
use cvm_engine::ops::array::concat::CONCAT;
use cvm_engine::ops::array::repeat::BROADCAST_TO;
use cvm_engine::ops::array::reshape::CINN_RESHAPE as RESHAPE;
use cvm_engine::ops::array::reverse::REVERSE;
use cvm_engine::ops::array::select::SELECT;
use cvm_engine::ops::array::slice::SLICE;
use cvm_engine::ops::array::transpose::CINN_TRANSPOSE as TRANSPOSE;
use cvm_engine::ops::math::compare::COMPARE;
use cvm_engine::ops::nn::cinn_conv::CONV;
use cvm_engine::ops::reduce::batch_norm::{BN_GRAD_BIAS_SCALE, BN_MEAN_VARIANCE};
use cvm_engine::ops::reduce::cinn_reduce::REDUCE;
use cvm_engine::ops::{Arity, OpDef, Operator};
use cvm_engine::tensor::{Shape, Tensor, TensorMut, TensorRef, TensorType};
use cvm_gas::{Usage, Work};

// ---------------------------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------------------------

impl Rng {
    fn values(&mut self, n: usize, bound: i64) -> Vec<i64> {
        (0..n).map(|_| self.range(-bound, bound)).collect()
    }

    fn dims(&mut self, rank: usize, max: usize) -> Vec<u32> {
        (0..rank).map(|_| self.size(1, max) as u32).collect()
    }
}

fn int(value: i64) -> AttrValue {
    AttrValue::Int(value)
}

fn ints(values: &[i64]) -> AttrValue {
    AttrValue::Ints(values.to_vec())
}

fn text(value: &str) -> AttrValue {
    AttrValue::Str(value.into())
}

fn flag(value: bool) -> AttrValue {
    AttrValue::Bool(value)
}

type AttrList = Vec<(&'static str, AttrValue)>;

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

fn tensor(dims: &[u32], data: &[i64]) -> Tensor {
    precise(dims, 32, data)
}

fn precise(dims: &[u32], precision: u8, data: &[i64]) -> Tensor {
    assert_eq!(numel(dims), data.len(), "data for {dims:?}");
    Tensor {
        shape: Shape::new(dims.to_vec()),
        precision,
        data: data.iter().map(|&v| i32::try_from(v).unwrap()).collect(),
    }
}

/// Builds the operator, infers the output types (checking the gas usage computes).
fn prepare(
    def: &OpDef,
    attrs: &[(&'static str, AttrValue)],
    inputs: &[TensorType],
) -> Result<(Box<dyn Operator>, Vec<TensorType>), Error> {
    assert!(def.arity.accepts(inputs.len()), "{}: arity", def.name);
    let attrs = sorted(attrs);
    let checked = Attrs::check(&attrs, def.attrs)?;
    let operator = (def.build)(&checked, inputs.len())?;
    let types = operator.infer(inputs)?;
    assert_eq!(
        types.len(),
        usize::from(def.outputs),
        "{}: outputs",
        def.name
    );
    operator.usage(inputs, &types)?;
    Ok((operator, types))
}

fn infer(
    def: &OpDef,
    attrs: &[(&'static str, AttrValue)],
    inputs: &[TensorType],
) -> Result<Vec<TensorType>, Error> {
    prepare(def, attrs, inputs).map(|(_, types)| types)
}

/// The gas usage of one application: work and price class.
fn usage(def: &OpDef, attrs: &[(&'static str, AttrValue)], inputs: &[TensorType]) -> Usage {
    let (operator, types) = prepare(def, attrs, inputs).unwrap();
    operator.usage(inputs, &types).unwrap()
}

/// Builds, infers, allocates and runs.
fn apply(
    def: &OpDef,
    attrs: &[(&'static str, AttrValue)],
    inputs: &[&Tensor],
) -> Result<Vec<Tensor>, Error> {
    let types: Vec<TensorType> = inputs
        .iter()
        .map(|t| TensorType {
            shape: t.shape.clone(),
            precision: t.precision,
        })
        .collect();
    let (operator, out_types) = prepare(def, attrs, &types)?;
    let mut outputs: Vec<Tensor> = out_types
        .iter()
        .map(|ty| Tensor::zeroed(ty).unwrap())
        .collect();
    {
        let views: Vec<TensorRef<'_>> = inputs.iter().map(|t| t.view()).collect();
        let mut results: Vec<TensorMut<'_>> = outputs.iter_mut().map(Tensor::view_mut).collect();
        operator.run(&views, &mut results)?;
    }
    Ok(outputs)
}

fn apply1(def: &OpDef, attrs: &[(&'static str, AttrValue)], inputs: &[&Tensor]) -> Tensor {
    let mut outputs =
        apply(def, attrs, inputs).unwrap_or_else(|e| panic!("{} failed: {e}", def.name));
    outputs.remove(0)
}

fn code<T>(result: Result<T, Error>) -> ErrorCode {
    match result {
        Ok(_) => panic!("expected an error"),
        Err(error) => error.code,
    }
}

fn ty(dims: &[u32]) -> TensorType {
    TensorType::new(dims.to_vec(), 32)
}

fn data(t: &Tensor) -> Vec<i64> {
    t.data.iter().map(|&v| i64::from(v)).collect()
}

fn numel(dims: &[u32]) -> usize {
    dims.iter().map(|&d| d as usize).product()
}

fn unflat(mut position: usize, dims: &[u32]) -> Vec<usize> {
    let mut index = vec![0; dims.len()];
    for (axis, &dim) in dims.iter().enumerate().rev() {
        index[axis] = position % (dim as usize).max(1);
        position /= (dim as usize).max(1);
    }
    index
}

fn flat(index: &[usize], dims: &[u32]) -> usize {
    assert_eq!(index.len(), dims.len());
    index.iter().zip(dims).fold(0, |acc, (&i, &d)| {
        assert!(i < d as usize);
        acc * d as usize + i
    })
}

fn indices(dims: &[u32]) -> Vec<Vec<usize>> {
    (0..numel(dims)).map(|p| unflat(p, dims)).collect()
}

/// Reference transpose: output axis i is input axis perm[i].
fn permute(t: &Tensor, perm: &[usize]) -> Tensor {
    let dims = t.shape.dims();
    let out: Vec<u32> = perm.iter().map(|&a| dims[a]).collect();
    let values: Vec<i64> = indices(&out)
        .iter()
        .map(|d| {
            let mut e = vec![0; dims.len()];
            for (i, &a) in perm.iter().enumerate() {
                e[a] = d[i];
            }
            i64::from(t.data[flat(&e, dims)])
        })
        .collect();
    precise(&out, t.precision, &values)
}

/// round_half_away_from_zero(v / 2^f), or None outside ±(2^31 − 1).
fn round_q(v: i128, f: u32) -> Option<i64> {
    let unit = 1i128 << f;
    let mut q = v / unit;
    let r = v % unit;
    if 2 * r.abs() >= unit && f > 0 {
        q += v.signum();
    }
    (q.abs() <= i128::from(i32::MAX)).then_some(q as i64)
}

fn dot(a: &[i64], b: &[i64]) -> i128 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(&x, &y)| i128::from(x) * i128::from(y))
        .sum()
}

// ---------------------------------------------------------------------------------------------
// Table rows
// ---------------------------------------------------------------------------------------------

#[test]
fn rows_have_the_frozen_codes_names_and_arities() {
    let rows: [(&OpDef, u16, &str, Arity, u8); 12] = [
        (
            &BN_GRAD_BIAS_SCALE,
            190,
            "BnGradBiasScale",
            Arity::Exactly(3),
            2,
        ),
        (
            &BN_MEAN_VARIANCE,
            191,
            "BnMeanVariance",
            Arity::Exactly(1),
            2,
        ),
        (&BROADCAST_TO, 192, "BroadcastTo", Arity::Exactly(1), 1),
        (&COMPARE, 193, "Compare", Arity::Exactly(2), 1),
        (&CONCAT, 194, "Concat", Arity::AtLeast(1), 1),
        (&CONV, 195, "Conv", Arity::Exactly(2), 1),
        (&REDUCE, 196, "Reduce", Arity::Exactly(1), 1),
        (&RESHAPE, 197, "Reshape", Arity::Exactly(1), 1),
        (&REVERSE, 198, "Reverse", Arity::Exactly(1), 1),
        (&SELECT, 199, "Select", Arity::Exactly(3), 1),
        (&SLICE, 200, "Slice", Arity::Exactly(1), 1),
        (&TRANSPOSE, 201, "Transpose", Arity::Exactly(1), 1),
    ];
    for (def, code, name, arity, outputs) in rows {
        assert_eq!(
            (def.code, def.name, def.arity, def.outputs),
            (code, name, arity, outputs)
        );
        for pair in def.attrs.windows(2) {
            assert!(pair[0].name < pair[1].name, "{name}: schema sorted");
        }
    }
}

#[test]
fn frac_bits_is_checked_by_every_multiplying_primitive() {
    let x = ty(&[1, 2, 2, 2]);
    for f in [-1, 31, 1000] {
        let bad = ("frac_bits", int(f));
        let cases: [(&OpDef, AttrList, Vec<TensorType>); 4] = [
            (&BN_MEAN_VARIANCE, vec![bad.clone()], vec![x.clone()]),
            (
                &BN_GRAD_BIAS_SCALE,
                vec![bad.clone()],
                vec![x.clone(), x.clone(), ty(&[2])],
            ),
            (&CONV, vec![bad.clone()], vec![x.clone(), ty(&[1, 2, 1, 1])]),
            (
                &REDUCE,
                vec![bad.clone(), ("kind", text("kProd"))],
                vec![x.clone()],
            ),
        ];
        for (def, attrs, inputs) in cases {
            assert_eq!(
                code(infer(def, &attrs, &inputs)),
                ErrorCode::AttributeOutOfRange,
                "{}",
                def.name
            );
        }
    }
    for f in [0, 30] {
        assert!(
            infer(
                &BN_MEAN_VARIANCE,
                &[("frac_bits", int(f))],
                std::slice::from_ref(&x)
            )
            .is_ok()
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Conv
// ---------------------------------------------------------------------------------------------

/// One random convolution geometry (logical NCHW / OIHW).
#[derive(Clone, Debug)]
struct ConvCase {
    n: usize,
    groups: usize,
    icg: usize,
    ocg: usize,
    size: [usize; 2],
    kernel: [usize; 2],
    stride: [usize; 2],
    dilation: [usize; 2],
    padding: [usize; 2],
    algorithm: &'static str,
}

impl ConvCase {
    fn random(rng: &mut Rng) -> ConvCase {
        ConvCase {
            n: rng.size(1, 2),
            groups: rng.pick(&[1, 1, 2, 3]),
            icg: rng.size(1, 2),
            ocg: rng.size(1, 2),
            size: [rng.size(1, 7), rng.size(1, 7)],
            kernel: [rng.size(1, 3), rng.size(1, 3)],
            stride: [rng.size(1, 3), rng.size(1, 3)],
            dilation: [rng.size(1, 2), rng.size(1, 2)],
            padding: [rng.size(0, 2), rng.size(0, 2)],
            algorithm: rng.pick(&["EXPLICIT", "EXPLICIT", "SAME", "VALID"]),
        }
    }

    fn c(&self) -> usize {
        self.groups * self.icg
    }

    fn oc(&self) -> usize {
        self.groups * self.ocg
    }

    /// (pad before, out) along `axis`, or None when the kernel does not fit.
    fn axis(&self, axis: usize) -> Option<(i64, usize)> {
        let (size, k, s, d) = (
            self.size[axis] as i64,
            self.kernel[axis] as i64,
            self.stride[axis] as i64,
            self.dilation[axis] as i64,
        );
        let span = d * (k - 1) + 1;
        let (before, after) = match self.algorithm {
            "EXPLICIT" => (self.padding[axis] as i64, self.padding[axis] as i64),
            "VALID" => (0, 0),
            _ => {
                let out = (size + s - 1) / s;
                let total = ((out - 1) * s + span - size).max(0);
                (total / 2, total - total / 2)
            }
        };
        let padded = size + before + after;
        (padded >= span).then(|| (before, ((padded - span) / s + 1) as usize))
    }

    fn valid(&self) -> bool {
        self.axis(0).is_some() && self.axis(1).is_some()
    }

    fn out(&self) -> [usize; 2] {
        [self.axis(0).unwrap().1, self.axis(1).unwrap().1]
    }

    fn x_dims(&self) -> [u32; 4] {
        [self.n, self.c(), self.size[0], self.size[1]].map(|d| d as u32)
    }

    fn w_dims(&self) -> [u32; 4] {
        [self.oc(), self.icg, self.kernel[0], self.kernel[1]].map(|d| d as u32)
    }

    fn y_dims(&self) -> [u32; 4] {
        let [oh, ow] = self.out();
        [self.n, self.oc(), oh, ow].map(|d| d as u32)
    }

    fn attrs(
        &self,
        conv_type: &str,
        format: &str,
        output_shape: Option<[u32; 4]>,
        frac: u32,
    ) -> AttrList {
        let pair = |v: [usize; 2]| ints(&[v[0] as i64, v[1] as i64]);
        let mut attrs = vec![
            ("conv_type", text(conv_type)),
            ("data_format", text(format)),
            ("strides", pair(self.stride)),
            ("dilations", pair(self.dilation)),
            ("paddings", pair(self.padding)),
            ("groups", int(self.groups as i64)),
            ("padding_algorithm", text(self.algorithm)),
            ("frac_bits", int(i64::from(frac))),
        ];
        if let Some(shape) = output_shape {
            attrs.push(("output_shape", ints(&shape.map(i64::from))));
        }
        attrs
    }

    /// Calls `visit(x index, w index, y index)` for every product of the forward sum whose input
    /// position lies inside the input (flat NCHW / OIHW / NCHW indices).
    fn terms(&self, mut visit: impl FnMut(usize, usize, usize)) {
        let (pads, out) = (
            [self.axis(0).unwrap().0, self.axis(1).unwrap().0],
            self.out(),
        );
        let (x_dims, w_dims, y_dims) = (self.x_dims(), self.w_dims(), self.y_dims());
        for n in 0..self.n {
            for oc in 0..self.oc() {
                let g = oc / self.ocg;
                for p in 0..out[0] {
                    for q in 0..out[1] {
                        for ic in 0..self.icg {
                            for kh in 0..self.kernel[0] {
                                let h =
                                    (p * self.stride[0] + kh * self.dilation[0]) as i64 - pads[0];
                                if h < 0 || h >= self.size[0] as i64 {
                                    continue;
                                }
                                for kw in 0..self.kernel[1] {
                                    let w = (q * self.stride[1] + kw * self.dilation[1]) as i64
                                        - pads[1];
                                    if w < 0 || w >= self.size[1] as i64 {
                                        continue;
                                    }
                                    visit(
                                        flat(
                                            &[n, g * self.icg + ic, h as usize, w as usize],
                                            &x_dims,
                                        ),
                                        flat(&[oc, ic, kh, kw], &w_dims),
                                        flat(&[n, oc, p, q], &y_dims),
                                    );
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    fn forward_exact(&self, x: &[i64], w: &[i64]) -> Vec<i128> {
        let mut y = vec![0i128; numel(&self.y_dims())];
        self.terms(|xi, wi, yi| y[yi] += i128::from(x[xi]) * i128::from(w[wi]));
        y
    }

    fn backward_data_exact(&self, w: &[i64], g: &[i64]) -> Vec<i128> {
        let mut gx = vec![0i128; numel(&self.x_dims())];
        self.terms(|xi, wi, yi| gx[xi] += i128::from(g[yi]) * i128::from(w[wi]));
        gx
    }

    fn backward_filter_exact(&self, x: &[i64], g: &[i64]) -> Vec<i128> {
        let mut gw = vec![0i128; numel(&self.w_dims())];
        self.terms(|xi, wi, yi| gw[wi] += i128::from(g[yi]) * i128::from(x[xi]));
        gw
    }
}

/// The three convolutions of the engine, NCHW.
fn conv3(
    case: &ConvCase,
    x: &Tensor,
    w: &Tensor,
    g: &Tensor,
    frac: u32,
) -> [Result<Vec<Tensor>, Error>; 3] {
    [
        apply(&CONV, &case.attrs("forward", "NCHW", None, frac), &[x, w]),
        apply(
            &CONV,
            &case.attrs("backward_data", "NCHW", Some(case.x_dims()), frac),
            &[w, g],
        ),
        apply(
            &CONV,
            &case.attrs("backward_filter", "NCHW", Some(case.w_dims()), frac),
            &[x, g],
        ),
    ]
}

fn random_operands(rng: &mut Rng, case: &ConvCase, bound: i64) -> (Tensor, Tensor, Tensor) {
    let (xd, wd, yd) = (case.x_dims(), case.w_dims(), case.y_dims());
    (
        tensor(&xd, &rng.values(numel(&xd), bound)),
        tensor(&wd, &rng.values(numel(&wd), bound)),
        tensor(&yd, &rng.values(numel(&yd), bound)),
    )
}

#[test]
fn conv_gradients_are_the_adjoints_of_forward() {
    let mut rng = Rng(0xC0_4F);
    let mut checked = 0;
    let mut algorithms = BTreeMap::new();
    while checked < 160 {
        let case = ConvCase::random(&mut rng);
        if !case.valid() {
            // The engine must reject what the reference cannot shape.
            let types = [ty(&case.x_dims()), ty(&case.w_dims())];
            assert_eq!(
                code(infer(
                    &CONV,
                    &case.attrs("forward", "NCHW", None, 0),
                    &types
                )),
                ErrorCode::ShapeMismatch,
                "{case:?}"
            );
            continue;
        }
        checked += 1;
        *algorithms.entry(case.algorithm).or_insert(0) += 1;
        let (x, w, g) = random_operands(&mut rng, &case, 1000);
        let [y, gx, gw] = conv3(&case, &x, &w, &g, 0).map(|r| r.unwrap().remove(0));
        assert_eq!(y.shape.dims(), case.y_dims());
        assert_eq!(gx.shape.dims(), case.x_dims());
        assert_eq!(gw.shape.dims(), case.w_dims());
        assert_eq!(y.precision, 32);
        let (xv, wv, gv) = (data(&x), data(&w), data(&g));
        // Forward against the brute-force reference.
        let y_ref: Vec<i64> = case
            .forward_exact(&xv, &wv)
            .iter()
            .map(|&v| v as i64)
            .collect();
        assert_eq!(data(&y), y_ref, "{case:?}");
        // The adjoint identity, exact in i128.
        let forward_g = dot(&data(&y), &gv);
        assert_eq!(
            forward_g,
            dot(&xv, &data(&gx)),
            "<x, backward_data> {case:?}"
        );
        assert_eq!(
            forward_g,
            dot(&wv, &data(&gw)),
            "<w, backward_filter> {case:?}"
        );
        // Element by element: perturb one element by 1, measure Σ forward·g.
        let base = dot_wide(&case.forward_exact(&xv, &wv), &gv);
        let sample = |rng: &mut Rng, len: usize| -> Vec<usize> {
            if len <= 24 {
                (0..len).collect()
            } else {
                (0..24).map(|_| rng.size(0, len - 1)).collect()
            }
        };
        for i in sample(&mut rng, xv.len()) {
            let mut bumped = xv.clone();
            bumped[i] += 1;
            let change = dot_wide(&case.forward_exact(&bumped, &wv), &gv) - base;
            assert_eq!(change, i128::from(gx.data[i]), "grad_x[{i}] {case:?}");
        }
        for i in sample(&mut rng, wv.len()) {
            let mut bumped = wv.clone();
            bumped[i] += 1;
            let change = dot_wide(&case.forward_exact(&xv, &bumped), &gv) - base;
            assert_eq!(change, i128::from(gw.data[i]), "grad_w[{i}] {case:?}");
        }
    }
    assert_eq!(
        algorithms.len(),
        3,
        "every padding algorithm is exercised: {algorithms:?}"
    );
}

fn dot_wide(a: &[i128], b: &[i64]) -> i128 {
    a.iter().zip(b).map(|(&x, &y)| x * i128::from(y)).sum()
}

#[test]
fn conv_rounds_each_sum_once_at_f_above_zero() {
    let mut rng = Rng(0xF1_C0);
    let (mut exact, mut overflowed) = (0, 0);
    for _ in 0..120 {
        let case = ConvCase::random(&mut rng);
        if !case.valid() {
            continue;
        }
        let frac = rng.pick(&[1u32, 5, 13, 20, 30]);
        let bound = rng.pick(&[1i64 << 12, 1 << 20, i64::from(i32::MAX)]);
        let (x, w, g) = random_operands(&mut rng, &case, bound);
        let (xv, wv, gv) = (data(&x), data(&w), data(&g));
        let references = [
            case.forward_exact(&xv, &wv),
            case.backward_data_exact(&wv, &gv),
            case.backward_filter_exact(&xv, &gv),
        ];
        for (result, reference) in conv3(&case, &x, &w, &g, frac).into_iter().zip(references) {
            let rounded: Option<Vec<i64>> = reference.iter().map(|&v| round_q(v, frac)).collect();
            match (result, rounded) {
                (Ok(out), Some(expected)) => {
                    assert_eq!(data(&out[0]), expected, "F = {frac}, {case:?}");
                    exact += 1;
                }
                (Err(error), None) => {
                    assert_eq!(error.code, ErrorCode::IntegerOverflow);
                    overflowed += 1;
                }
                (result, expected) => panic!(
                    "{case:?}: engine {:?}, reference {expected:?}",
                    result.map(|_| ())
                ),
            }
        }
    }
    assert!(
        exact > 50 && overflowed > 5,
        "{exact} exact, {overflowed} overflowing"
    );
}

#[test]
fn conv_edge_geometries_agree_with_the_reference() {
    // Zero-size batches, spatial axes and output channels; strides, dilations and paddings at
    // their limit. Accepted cases must match the scatter reference; the others are rejected.
    let mut rng = Rng(0xED6E);
    let (mut accepted, mut rejected) = (0, 0);
    for _ in 0..400 {
        let mut case = ConvCase::random(&mut rng);
        case.n = rng.size(0, 2);
        case.ocg = rng.size(0, 2);
        case.size = [rng.size(0, 6), rng.size(0, 6)];
        if rng.chance(30) {
            case.stride = [4095, 4095];
            case.dilation = [rng.pick(&[1, 2, 4095]), rng.pick(&[1, 4095])];
            case.padding = [rng.pick(&[0, 4095]), rng.pick(&[0, 2048])];
        }
        if !case.valid() {
            let types = [ty(&case.x_dims()), ty(&case.w_dims())];
            assert_eq!(
                code(infer(
                    &CONV,
                    &case.attrs("forward", "NCHW", None, 0),
                    &types
                )),
                ErrorCode::ShapeMismatch,
                "{case:?}"
            );
            rejected += 1;
            continue;
        }
        accepted += 1;
        let frac = rng.pick(&[0u32, 2]);
        let (x, w, g) = random_operands(&mut rng, &case, 1000);
        let (xv, wv, gv) = (data(&x), data(&w), data(&g));
        let references = [
            case.forward_exact(&xv, &wv),
            case.backward_data_exact(&wv, &gv),
            case.backward_filter_exact(&xv, &gv),
        ];
        let shapes = [case.y_dims(), case.x_dims(), case.w_dims()];
        for ((result, reference), shape) in conv3(&case, &x, &w, &g, frac)
            .into_iter()
            .zip(references)
            .zip(shapes)
        {
            let out = result.unwrap_or_else(|e| panic!("{case:?}: {e}")).remove(0);
            assert_eq!(out.shape.dims(), shape, "{case:?}");
            let expected: Vec<i64> = reference
                .iter()
                .map(|&v| round_q(v, frac).unwrap())
                .collect();
            assert_eq!(data(&out), expected, "{case:?}");
        }
        let [oh, ow] = case.out();
        let macs =
            (case.n * case.oc() * oh * ow * case.icg * case.kernel[0] * case.kernel[1]) as u64;
        let forward = case.attrs("forward", "NCHW", None, frac);
        assert_eq!(
            usage(&CONV, &forward, &[ty(&case.x_dims()), ty(&case.w_dims())])
                .work
                .macs,
            macs
        );
    }
    assert!(
        accepted > 150 && rejected > 30,
        "{accepted} accepted, {rejected} rejected"
    );
}

#[test]
fn conv_single_rounding_examples() {
    // 1.5 · 1.5 = 2.25 in Q1: 9/2 = 4.5 → 5; negative → −5 (halves away from zero).
    let one = [1u32, 1, 1, 1];
    let attrs: AttrList = vec![("frac_bits", int(1))];
    assert_eq!(
        apply1(&CONV, &attrs, &[&tensor(&one, &[3]), &tensor(&one, &[3])]).data,
        [5]
    );
    assert_eq!(
        apply1(&CONV, &attrs, &[&tensor(&one, &[-3]), &tensor(&one, &[3])]).data,
        [-5]
    );
    // Two products of 0.5·0.5 in Q1: the exact sum 2 / 2 = 1 (rounding each product would give 2).
    let y = apply1(
        &CONV,
        &attrs,
        &[
            &tensor(&[1, 2, 1, 1], &[1, 1]),
            &tensor(&[1, 2, 1, 1], &[1, 1]),
        ],
    );
    assert_eq!(y.data, [1]);
}

#[test]
fn conv_same_padding_is_asymmetric() {
    // W = 5, K = 2, S = 2: OW = 3, total padding 1 → 0 before, 1 after.
    let attrs: AttrList = vec![
        ("padding_algorithm", text("SAME")),
        ("strides", ints(&[1, 2])),
    ];
    let x = tensor(&[1, 1, 1, 5], &[1, 2, 3, 4, 5]);
    let w = tensor(&[1, 1, 1, 2], &[1, 10]);
    assert_eq!(apply1(&CONV, &attrs, &[&x, &w]).data, [21, 43, 5]);
    // W = 4: OW = 2, no padding.
    let x = tensor(&[1, 1, 1, 4], &[1, 2, 3, 4]);
    assert_eq!(apply1(&CONV, &attrs, &[&x, &w]).data, [21, 43]);
    // K = 3, S = 1, W = 4: total 2 → 1 before, 1 after; VALID gives 2 outputs.
    let w3 = tensor(&[1, 1, 1, 3], &[1, 1, 1]);
    let same: AttrList = vec![("padding_algorithm", text("SAME"))];
    assert_eq!(apply1(&CONV, &same, &[&x, &w3]).data, [3, 6, 9, 7]);
    let valid: AttrList = vec![
        ("padding_algorithm", text("VALID")),
        ("paddings", ints(&[3, 3])),
    ];
    assert_eq!(apply1(&CONV, &valid, &[&x, &w3]).data, [6, 9]);
}

#[test]
fn conv_nhwc_matches_nchw_through_transposes() {
    let to_nhwc = [0, 2, 3, 1];
    let to_nchw = [0, 3, 1, 2];
    let mut rng = Rng(0x4E_4843);
    let mut checked = 0;
    while checked < 60 {
        let case = ConvCase::random(&mut rng);
        if !case.valid() {
            continue;
        }
        checked += 1;
        let frac = rng.pick(&[0u32, 3]);
        let (x, w, g) = random_operands(&mut rng, &case, 300);
        let [y, gx, gw] = conv3(&case, &x, &w, &g, frac).map(|r| r.unwrap().remove(0));
        let (x_t, g_t) = (permute(&x, &to_nhwc), permute(&g, &to_nhwc));
        let y_t = apply1(
            &CONV,
            &case.attrs("forward", "NHWC", None, frac),
            &[&x_t, &w],
        );
        assert_eq!(permute(&y_t, &to_nchw), y, "forward {case:?}");
        let x_shape = x_t.shape.dims().try_into().unwrap();
        let gx_t = apply1(
            &CONV,
            &case.attrs("backward_data", "NHWC", Some(x_shape), frac),
            &[&w, &g_t],
        );
        assert_eq!(gx_t.shape.dims(), x_t.shape.dims());
        assert_eq!(permute(&gx_t, &to_nchw), gx, "backward_data {case:?}");
        let gw_t = apply1(
            &CONV,
            &case.attrs("backward_filter", "NHWC", Some(case.w_dims()), frac),
            &[&x_t, &g_t],
        );
        assert_eq!(gw_t, gw, "backward_filter {case:?}");
    }
}

#[test]
fn conv_spec_examples_infer_their_shapes_and_gas() {
    let geometry: AttrList = vec![
        ("strides", ints(&[1, 1])),
        ("paddings", ints(&[1, 1])),
        ("dilations", ints(&[1, 1])),
    ];
    let with = |extra: &[(&'static str, AttrValue)]| -> AttrList {
        geometry
            .iter()
            .cloned()
            .chain(extra.iter().cloned())
            .collect()
    };
    let (x, w, gy) = (
        ty(&[16, 16, 28, 28]),
        ty(&[32, 16, 3, 3]),
        ty(&[16, 32, 28, 28]),
    );
    let forward = with(&[]);
    assert_eq!(
        infer(&CONV, &forward, &[x.clone(), w.clone()]).unwrap()[0]
            .shape
            .dims(),
        [16, 32, 28, 28]
    );
    let data = with(&[
        ("conv_type", text("backward_data")),
        ("output_shape", ints(&[16, 16, 28, 28])),
    ]);
    assert_eq!(
        infer(&CONV, &data, &[w.clone(), gy.clone()]).unwrap()[0]
            .shape
            .dims(),
        [16, 16, 28, 28]
    );
    let filter = with(&[
        ("conv_type", text("backward_filter")),
        ("output_shape", ints(&[32, 16, 3, 3])),
    ]);
    assert_eq!(
        infer(&CONV, &filter, &[x.clone(), gy.clone()]).unwrap()[0]
            .shape
            .dims(),
        [32, 16, 3, 3]
    );
    // The same product count for all three: N·OC·OH·OW·ICg·KH·KW.
    let macs = 16 * 32 * 28 * 28 * 16 * 9;
    // The forward type also gathers each output window once: N·groups·OH·OW·ICg·KH·KW taps.
    let taps = 16 * 28 * 28 * 16 * 9;
    for (attrs, inputs, out, class, taps) in [
        (
            &forward,
            [x.clone(), w.clone()],
            16 * 32 * 28 * 28,
            "forward",
            taps,
        ),
        (
            &data,
            [w.clone(), gy.clone()],
            16 * 16 * 28 * 28,
            "backward_data",
            0,
        ),
        (
            &filter,
            [x.clone(), gy.clone()],
            32 * 16 * 9,
            "backward_filter",
            0,
        ),
    ] {
        let usage = usage(&CONV, attrs, &inputs);
        assert_eq!(
            (usage.work.macs, usage.work.writes, usage.work.taps),
            (macs, out, taps)
        );
        assert_eq!(usage.class, class);
    }
}

#[test]
fn conv_rejections_are_typed() {
    let x = ty(&[1, 4, 5, 5]);
    let w = ty(&[2, 2, 3, 3]);
    let gy = ty(&[1, 2, 3, 3]);
    let grouped = ("groups", int(2));
    let cases: Vec<(AttrList, [TensorType; 2], ErrorCode)> = vec![
        (vec![], [x.clone(), w.clone()], ErrorCode::ShapeMismatch), // C/groups = 4 ≠ 2
        (
            vec![("groups", int(3))],
            [x.clone(), w.clone()],
            ErrorCode::ShapeMismatch,
        ),
        (
            vec![("groups", int(0))],
            [x.clone(), w.clone()],
            ErrorCode::AttributeOutOfRange,
        ),
        (
            vec![("groups", int(8))],
            [x.clone(), w.clone()],
            ErrorCode::ShapeMismatch,
        ),
        (
            vec![grouped.clone(), ("conv_type", text("sideways"))],
            [x.clone(), w.clone()],
            ErrorCode::AttributeOutOfRange,
        ),
        (
            vec![grouped.clone(), ("data_format", text("NCWH"))],
            [x.clone(), w.clone()],
            ErrorCode::AttributeOutOfRange,
        ),
        (
            vec![grouped.clone(), ("padding_algorithm", text("same"))],
            [x.clone(), w.clone()],
            ErrorCode::AttributeOutOfRange,
        ),
        (
            vec![grouped.clone(), ("strides", ints(&[0, 1]))],
            [x.clone(), w.clone()],
            ErrorCode::AttributeOutOfRange,
        ),
        (
            vec![grouped.clone(), ("strides", ints(&[1, 4096]))],
            [x.clone(), w.clone()],
            ErrorCode::AttributeOutOfRange,
        ),
        (
            vec![grouped.clone(), ("strides", ints(&[1]))],
            [x.clone(), w.clone()],
            ErrorCode::AttributeOutOfRange,
        ),
        (
            vec![grouped.clone(), ("paddings", ints(&[-1, 0]))],
            [x.clone(), w.clone()],
            ErrorCode::AttributeOutOfRange,
        ),
        (
            vec![grouped.clone(), ("dilations", ints(&[0, 1]))],
            [x.clone(), w.clone()],
            ErrorCode::AttributeOutOfRange,
        ),
        (
            vec![grouped.clone(), ("dilations", ints(&[3, 1]))],
            [x.clone(), w.clone()],
            ErrorCode::ShapeMismatch,
        ),
        (
            vec![grouped.clone(), ("output_shape", ints(&[1, 2, 3]))],
            [x.clone(), w.clone()],
            ErrorCode::AttributeOutOfRange,
        ),
        (
            vec![grouped.clone(), ("output_shape", ints(&[1, 2, 3, 4]))],
            [x.clone(), w.clone()],
            ErrorCode::ShapeMismatch,
        ),
        (
            vec![grouped.clone(), ("frac_bits", text("8"))],
            [x.clone(), w.clone()],
            ErrorCode::AttributeType,
        ),
        (
            vec![grouped.clone(), ("bias", int(1))],
            [x.clone(), w.clone()],
            ErrorCode::UnknownAttribute,
        ),
        (
            vec![grouped.clone()],
            [ty(&[4, 5, 5]), w.clone()],
            ErrorCode::ShapeMismatch,
        ),
        (
            vec![grouped.clone()],
            [x.clone(), ty(&[2, 2, 0, 3])],
            ErrorCode::ShapeMismatch,
        ),
        (
            vec![grouped.clone()],
            [x.clone(), ty(&[3, 2, 3, 3])],
            ErrorCode::ShapeMismatch,
        ),
        // Backward types: output_shape required and consistent with grad_y.
        (
            vec![grouped.clone(), ("conv_type", text("backward_data"))],
            [w.clone(), gy.clone()],
            ErrorCode::MissingAttribute,
        ),
        (
            vec![grouped.clone(), ("conv_type", text("backward_filter"))],
            [x.clone(), gy.clone()],
            ErrorCode::MissingAttribute,
        ),
        (
            vec![
                grouped.clone(),
                ("conv_type", text("backward_data")),
                ("output_shape", ints(&[])),
            ],
            [w.clone(), gy.clone()],
            ErrorCode::AttributeOutOfRange,
        ),
        (
            vec![
                grouped.clone(),
                ("conv_type", text("backward_data")),
                ("output_shape", ints(&[1, 4, 6, 6])),
            ],
            [w.clone(), gy.clone()],
            ErrorCode::ShapeMismatch,
        ),
        (
            vec![
                grouped.clone(),
                ("conv_type", text("backward_data")),
                ("output_shape", ints(&[2, 4, 5, 5])),
            ],
            [w.clone(), gy.clone()],
            ErrorCode::ShapeMismatch,
        ),
        (
            vec![
                grouped.clone(),
                ("conv_type", text("backward_data")),
                ("output_shape", ints(&[1, 4, 5, -5])),
            ],
            [w.clone(), gy.clone()],
            ErrorCode::AttributeOutOfRange,
        ),
        (
            vec![
                grouped.clone(),
                ("conv_type", text("backward_data")),
                ("output_shape", ints(&[1, 4, 5, 5])),
            ],
            [w.clone(), ty(&[1, 3, 3, 3])],
            ErrorCode::ShapeMismatch,
        ),
        (
            vec![
                grouped.clone(),
                ("conv_type", text("backward_filter")),
                ("output_shape", ints(&[2, 2, 2, 3])),
            ],
            [x.clone(), gy.clone()],
            ErrorCode::ShapeMismatch,
        ),
        (
            vec![
                grouped.clone(),
                ("conv_type", text("backward_filter")),
                ("output_shape", ints(&[2, 1, 3, 3])),
            ],
            [x.clone(), gy.clone()],
            ErrorCode::ShapeMismatch,
        ),
        (
            vec![
                grouped.clone(),
                ("conv_type", text("backward_filter")),
                ("output_shape", ints(&[2, 2, 3, 3])),
            ],
            [x.clone(), ty(&[2, 2, 3, 3])],
            ErrorCode::ShapeMismatch,
        ),
    ];
    for (attrs, inputs, expected) in cases {
        assert_eq!(
            code(infer(&CONV, &attrs, &inputs)),
            expected,
            "{attrs:?} {inputs:?}"
        );
    }
    // The consistent versions are accepted.
    let ok: [(AttrList, [TensorType; 2]); 3] = [
        (vec![grouped.clone()], [x.clone(), w.clone()]),
        (
            vec![
                grouped.clone(),
                ("conv_type", text("backward_data")),
                ("output_shape", ints(&[1, 4, 5, 5])),
            ],
            [w.clone(), gy.clone()],
        ),
        (
            vec![
                grouped.clone(),
                ("conv_type", text("backward_filter")),
                ("output_shape", ints(&[2, 2, 3, 3])),
            ],
            [x.clone(), gy.clone()],
        ),
    ];
    for (attrs, inputs) in ok {
        assert!(infer(&CONV, &attrs, &inputs).is_ok(), "{attrs:?}");
    }
}

#[test]
fn conv_overflow_is_reported() {
    let big = i64::from(i32::MAX);
    let x = tensor(&[1, 2, 1, 1], &[big, big]);
    let w = tensor(&[1, 2, 1, 1], &[1, 1]);
    assert_eq!(
        code(apply(&CONV, &[], &[&x, &w])),
        ErrorCode::IntegerOverflow
    );
    // i32::MIN is not a precision-32 value either: −(2^31 − 1) − 1 overflows.
    let x = tensor(&[1, 2, 1, 1], &[-big, -1]);
    assert_eq!(
        code(apply(&CONV, &[], &[&x, &w])),
        ErrorCode::IntegerOverflow
    );
    // Products of full-range values are exact before the one rounding: (2^31 − 1)² − (2^31 − 1)
    // ·(2^31 − 2) = 2^31 − 1, which at F = 30 rounds to 2.
    let x = tensor(&[1, 2, 1, 1], &[big, -big]);
    let w = tensor(&[1, 2, 1, 1], &[big, big - 1]);
    let y = apply1(&CONV, &[("frac_bits", int(30))], &[&x, &w]);
    assert_eq!(y.data, [2]);
    assert_eq!(
        code(apply(&CONV, &[("frac_bits", int(30))], &[&w, &w])),
        ErrorCode::IntegerOverflow
    );
}

// ---------------------------------------------------------------------------------------------
// BnGradBiasScale, BnMeanVariance
// ---------------------------------------------------------------------------------------------

#[test]
fn bn_sums_match_the_reference() {
    let mut rng = Rng(0xB4);
    for round in 0..120 {
        let rank = rng.size(2, 4);
        let dims = rng.dims(rank, 4);
        let format = if round % 2 == 0 { "NCHW" } else { "NHWC" };
        let axis = if format == "NCHW" { 1 } else { rank - 1 };
        let channels = dims[axis] as usize;
        let frac = rng.pick(&[0u32, 4, 12]);
        let bound = rng.pick(&[100i64, 1 << 14, 1 << 20]);
        let x = tensor(&dims, &rng.values(numel(&dims), bound));
        let g = tensor(&dims, &rng.values(numel(&dims), bound));
        let mean = tensor(&[channels as u32], &rng.values(channels, bound));
        let attrs: AttrList = vec![
            ("data_format", text(format)),
            ("frac_bits", int(i64::from(frac))),
        ];
        let (mut sum, mut squares, mut bias, mut scale) = (
            vec![0i128; channels],
            vec![0i128; channels],
            vec![0i128; channels],
            vec![0i128; channels],
        );
        for (position, index) in indices(&dims).iter().enumerate() {
            let c = index[axis];
            let (xv, gv) = (i128::from(x.data[position]), i128::from(g.data[position]));
            sum[c] += xv;
            squares[c] += xv * xv;
            bias[c] += gv;
            scale[c] += gv * (xv - i128::from(mean.data[c]));
        }
        let expect = |values: &[i128], f: u32| -> Option<Vec<i64>> {
            values.iter().map(|&v| round_q(v, f)).collect()
        };
        match (
            apply(&BN_MEAN_VARIANCE, &attrs, &[&x]),
            expect(&sum, 0).zip(expect(&squares, frac)),
        ) {
            (Ok(out), Some((s, q))) => {
                assert_eq!(out[0].shape.dims(), [channels as u32]);
                assert_eq!((out[0].precision, out[1].precision), (32, 32));
                assert_eq!((data(&out[0]), data(&out[1])), (s, q));
            }
            (Err(e), None) => assert_eq!(e.code, ErrorCode::IntegerOverflow),
            (got, want) => panic!("BnMeanVariance {dims:?}: {:?} vs {want:?}", got.map(|_| ())),
        }
        match (
            apply(&BN_GRAD_BIAS_SCALE, &attrs, &[&x, &g, &mean]),
            expect(&bias, 0).zip(expect(&scale, frac)),
        ) {
            (Ok(out), Some((b, s))) => assert_eq!((data(&out[0]), data(&out[1])), (b, s)),
            (Err(e), None) => assert_eq!(e.code, ErrorCode::IntegerOverflow),
            (got, want) => panic!(
                "BnGradBiasScale {dims:?}: {:?} vs {want:?}",
                got.map(|_| ())
            ),
        }
    }
}

#[test]
fn bn_hand_examples() {
    // NCHW (2, 2, 1, 2): channel 0 holds 1, 2, 5, 6; channel 1 holds 3, 4, 7, 8.
    let x = tensor(&[2, 2, 1, 2], &[1, 2, 3, 4, 5, 6, 7, 8]);
    let out = apply(&BN_MEAN_VARIANCE, &[], &[&x]).unwrap();
    assert_eq!(
        (data(&out[0]), data(&out[1])),
        (vec![14, 22], vec![66, 138])
    );
    // Q1: Σ x² / 2 = 33, 69.
    let out = apply(&BN_MEAN_VARIANCE, &[("frac_bits", int(1))], &[&x]).unwrap();
    assert_eq!(data(&out[1]), [33, 69]);
    // NHWC reads the last axis as the channel: (2, 2, 1, 2) has channels 1,3,5,7 / 2,4,6,8.
    let out = apply(&BN_MEAN_VARIANCE, &[("data_format", text("NHWC"))], &[&x]).unwrap();
    assert_eq!(data(&out[0]), [16, 20]);
    // Grad: g = 1 everywhere, mean (3, 5): Σ (x − m) = 14 − 12, 22 − 20.
    let g = tensor(&[2, 2, 1, 2], &[1; 8]);
    let mean = tensor(&[2], &[3, 5]);
    let out = apply(&BN_GRAD_BIAS_SCALE, &[], &[&x, &g, &mean]).unwrap();
    assert_eq!((data(&out[0]), data(&out[1])), (vec![4, 4], vec![2, 2]));
    // Q2 with one rounding of the exact total: g = 1 (0.25), scale sum 2 / 4 = 0.5 → 1.
    let out = apply(
        &BN_GRAD_BIAS_SCALE,
        &[("frac_bits", int(2))],
        &[&x, &g, &mean],
    )
    .unwrap();
    assert_eq!(data(&out[1]), [1, 1]);
    assert_eq!(
        usage(
            &BN_GRAD_BIAS_SCALE,
            &[],
            &[ty(&[2, 2, 1, 2]), ty(&[2, 2, 1, 2]), ty(&[2])]
        ),
        Usage {
            class: "",
            work: Work {
                macs: 8,
                ..Work::io(18, 4)
            }
        }
    );
    assert_eq!(
        usage(&BN_MEAN_VARIANCE, &[], &[ty(&[2, 2, 1, 2])]),
        Usage {
            class: "",
            work: Work {
                macs: 8,
                ..Work::io(8, 4)
            }
        }
    );
}

#[test]
fn bn_rejections_and_overflow() {
    let x = ty(&[2, 3, 4]);
    assert_eq!(
        code(infer(&BN_MEAN_VARIANCE, &[], &[ty(&[5])])),
        ErrorCode::ShapeMismatch
    );
    assert_eq!(
        code(infer(&BN_MEAN_VARIANCE, &[], &[ty(&[])])),
        ErrorCode::ShapeMismatch
    );
    assert_eq!(
        code(infer(
            &BN_MEAN_VARIANCE,
            &[("data_format", text("NC"))],
            std::slice::from_ref(&x)
        )),
        ErrorCode::AttributeOutOfRange
    );
    assert_eq!(
        code(infer(
            &BN_GRAD_BIAS_SCALE,
            &[],
            &[x.clone(), ty(&[2, 3, 5]), ty(&[3])]
        )),
        ErrorCode::ShapeMismatch
    );
    assert_eq!(
        code(infer(
            &BN_GRAD_BIAS_SCALE,
            &[],
            &[x.clone(), x.clone(), ty(&[4])]
        )),
        ErrorCode::ShapeMismatch
    );
    assert_eq!(
        code(infer(
            &BN_GRAD_BIAS_SCALE,
            &[],
            &[x.clone(), x.clone(), ty(&[1, 3])]
        )),
        ErrorCode::ShapeMismatch
    );
    assert!(
        infer(
            &BN_GRAD_BIAS_SCALE,
            &[("data_format", text("NHWC"))],
            &[x.clone(), x.clone(), ty(&[4])]
        )
        .is_ok()
    );
    let big = i64::from(i32::MAX);
    let t = tensor(&[1, 1, 2], &[big, 1]);
    assert_eq!(
        code(apply(&BN_MEAN_VARIANCE, &[], &[&t])),
        ErrorCode::IntegerOverflow
    );
    let g = tensor(&[1, 1, 2], &[big, big]);
    let m = tensor(&[1], &[0]);
    assert_eq!(
        code(apply(
            &BN_GRAD_BIAS_SCALE,
            &[("frac_bits", int(30))],
            &[&t, &g, &m]
        )),
        ErrorCode::IntegerOverflow
    );
}

// ---------------------------------------------------------------------------------------------
// BroadcastTo
// ---------------------------------------------------------------------------------------------

#[test]
fn broadcast_to_follows_the_spec_example() {
    // Spec: [64] → [1, 64, 112, 112] with broadcast_axes [1]; here [4] → [1, 4, 3, 2].
    let x = tensor(&[4], &[10, 20, 30, 40]);
    let attrs: AttrList = vec![
        ("out_shape", ints(&[1, 4, 3, 2])),
        ("broadcast_axes", ints(&[1])),
    ];
    let y = apply1(&BROADCAST_TO, &attrs, &[&x]);
    assert_eq!(y.shape.dims(), [1, 4, 3, 2]);
    for (position, index) in indices(&[1, 4, 3, 2]).iter().enumerate() {
        assert_eq!(y.data[position], x.data[index[1]]);
    }
    let spec = infer(
        &BROADCAST_TO,
        &[
            ("out_shape", ints(&[1, 64, 112, 112])),
            ("broadcast_axes", ints(&[1])),
        ],
        &[TensorType::new([64], 9)],
    )
    .unwrap();
    assert_eq!(
        (spec[0].shape.dims(), spec[0].precision),
        (&[1, 64, 112, 112][..], 9)
    );
}

#[test]
fn broadcast_to_matches_the_reference() {
    let mut rng = Rng(0xB7);
    for _ in 0..200 {
        let out_rank = rng.size(0, 4);
        let out: Vec<u32> = rng.dims(out_rank, 4);
        let rank = rng.size(0, out_rank);
        let mut axes: Vec<usize> = (0..out_rank).collect();
        while axes.len() > rank {
            axes.remove(rng.size(0, axes.len() - 1));
        }
        let dims: Vec<u32> = axes
            .iter()
            .map(|&a| if rng.chance(40) { 1 } else { out[a] })
            .collect();
        let x = tensor(&dims, &rng.values(numel(&dims), 1000));
        let attrs: AttrList = vec![
            (
                "out_shape",
                ints(&out.iter().map(|&d| i64::from(d)).collect::<Vec<_>>()),
            ),
            (
                "broadcast_axes",
                ints(&axes.iter().map(|&a| a as i64).collect::<Vec<_>>()),
            ),
        ];
        let y = apply1(&BROADCAST_TO, &attrs, &[&x]);
        assert_eq!(y.shape.dims(), out.as_slice());
        for (position, d) in indices(&out).iter().enumerate() {
            let e: Vec<usize> = axes
                .iter()
                .zip(&dims)
                .map(|(&a, &n)| if n == 1 { 0 } else { d[a] })
                .collect();
            assert_eq!(
                y.data[position],
                x.data[flat(&e, &dims)],
                "{dims:?} → {out:?} via {axes:?}"
            );
        }
    }
}

#[test]
fn broadcast_to_rejections() {
    let x = ty(&[3, 1]);
    let run = |out: &[i64], axes: &[i64]| {
        code(infer(
            &BROADCAST_TO,
            &[("out_shape", ints(out)), ("broadcast_axes", ints(axes))],
            std::slice::from_ref(&x),
        ))
    };
    assert_eq!(run(&[2, 3, 4], &[1, 0]), ErrorCode::AttributeOutOfRange); // not increasing
    assert_eq!(run(&[2, 3, 4], &[1, 1]), ErrorCode::AttributeOutOfRange);
    assert_eq!(run(&[2, 3, 4], &[1, 3]), ErrorCode::AttributeOutOfRange); // past the output rank
    assert_eq!(run(&[2, 3, 4], &[-1, 2]), ErrorCode::AttributeOutOfRange);
    assert_eq!(run(&[2, 3, 4], &[1]), ErrorCode::ShapeMismatch); // one entry per input axis
    assert_eq!(run(&[2, 4, 4], &[1, 2]), ErrorCode::ShapeMismatch); // 3 vs 4
    assert_eq!(run(&[2, -3, 4], &[1, 2]), ErrorCode::AttributeOutOfRange);
    assert_eq!(
        code(infer(
            &BROADCAST_TO,
            &[("out_shape", ints(&[3]))],
            std::slice::from_ref(&x)
        )),
        ErrorCode::MissingAttribute
    );
    assert_eq!(
        code(infer(
            &BROADCAST_TO,
            &[("broadcast_axes", ints(&[0, 1]))],
            std::slice::from_ref(&x)
        )),
        ErrorCode::MissingAttribute
    );
    assert!(
        infer(
            &BROADCAST_TO,
            &[
                ("out_shape", ints(&[2, 3, 4])),
                ("broadcast_axes", ints(&[1, 2]))
            ],
            &[x]
        )
        .is_ok()
    );
}

// ---------------------------------------------------------------------------------------------
// Compare
// ---------------------------------------------------------------------------------------------

const KINDS: [&str; 6] = ["kEq", "kNe", "kGe", "kGt", "kLe", "kLt"];

fn compare_ref(kind: &str, x: i64, y: i64) -> i64 {
    i64::from(match kind {
        "kEq" => x == y,
        "kNe" => x != y,
        "kGe" => x >= y,
        "kGt" => x > y,
        "kLe" => x <= y,
        "kLt" => x < y,
        _ => unreachable!(),
    })
}

#[test]
fn compare_every_kind() {
    let x = tensor(&[3], &[1, 2, 3]);
    let y = tensor(&[3], &[2, 2, 2]);
    let expected: [(&str, [i32; 3]); 6] = [
        ("kEq", [0, 1, 0]),
        ("kNe", [1, 0, 1]),
        ("kGe", [0, 1, 1]),
        ("kGt", [0, 0, 1]),
        ("kLe", [1, 1, 0]),
        ("kLt", [1, 0, 0]),
    ];
    for (kind, want) in expected {
        let out = apply1(&COMPARE, &[("kind", text(kind))], &[&x, &y]);
        assert_eq!(
            (out.data.as_slice(), out.precision),
            (&want[..], 2),
            "{kind}"
        );
    }
}

#[test]
fn compare_broadcasts_like_numpy() {
    let mut rng = Rng(0xC3);
    for _ in 0..150 {
        let rank = rng.size(0, 4);
        let out = rng.dims(rank, 3);
        let operand = |rng: &mut Rng| -> Vec<u32> {
            let keep = rng.size(0, rank);
            out[rank - keep..]
                .iter()
                .map(|&d| if rng.chance(30) { 1 } else { d })
                .collect()
        };
        let (ad, bd) = (operand(&mut rng), operand(&mut rng));
        let a = tensor(&ad, &rng.values(numel(&ad), 3));
        let b = tensor(&bd, &rng.values(numel(&bd), 3));
        let kind = rng.pick(&KINDS);
        let y = apply1(&COMPARE, &[("kind", text(kind))], &[&a, &b]);
        let rank = ad.len().max(bd.len());
        let shape: Vec<u32> = (0..rank)
            .map(|i| {
                let pick = |d: &[u32]| (i + d.len()).checked_sub(rank).map_or(1, |j| d[j]);
                pick(&ad).max(pick(&bd))
            })
            .collect();
        assert_eq!(y.shape.dims(), shape.as_slice());
        for (position, d) in indices(&shape).iter().enumerate() {
            let read = |t: &Tensor| {
                let dims = t.shape.dims();
                let e: Vec<usize> = (0..dims.len())
                    .map(|j| {
                        if dims[j] == 1 {
                            0
                        } else {
                            d[rank - dims.len() + j]
                        }
                    })
                    .collect();
                i64::from(t.data[flat(&e, dims)])
            };
            assert_eq!(
                i64::from(y.data[position]),
                compare_ref(kind, read(&a), read(&b))
            );
        }
    }
}

#[test]
fn compare_rejections() {
    let (a, b) = (ty(&[2, 3]), ty(&[3, 2]));
    assert_eq!(
        code(infer(&COMPARE, &[("kind", text("kEq"))], &[a.clone(), b])),
        ErrorCode::ShapeMismatch
    );
    assert_eq!(
        code(infer(&COMPARE, &[], &[a.clone(), a.clone()])),
        ErrorCode::MissingAttribute
    );
    for kind in ["eq", "kEQ", "", "kGreater"] {
        assert_eq!(
            code(infer(
                &COMPARE,
                &[("kind", text(kind))],
                &[a.clone(), a.clone()]
            )),
            ErrorCode::AttributeOutOfRange
        );
    }
    assert_eq!(
        code(infer(&COMPARE, &[("kind", int(0))], &[a.clone(), a])),
        ErrorCode::AttributeType
    );
}

// ---------------------------------------------------------------------------------------------
// Concat, Select
// ---------------------------------------------------------------------------------------------

#[test]
fn concat_matches_the_reference() {
    let a = precise(&[2, 2], 4, &[1, 2, 3, 4]);
    let b = precise(&[1, 2], 9, &[5, 6]);
    let y = apply1(&CONCAT, &[], &[&a, &b]);
    assert_eq!(
        (y.shape.dims(), y.data.as_slice(), y.precision),
        (&[3, 2][..], &[1, 2, 3, 4, 5, 6][..], 9)
    );
    let c = tensor(&[2, 1], &[7, 8]);
    let y = apply1(&CONCAT, &[("axis", int(-1))], &[&a, &c]);
    assert_eq!(y.data, [1, 2, 7, 3, 4, 8]);
    let mut rng = Rng(0xCC);
    for _ in 0..100 {
        let rank = rng.size(1, 4);
        let dims = rng.dims(rank, 3);
        let axis = rng.size(0, rank - 1);
        let count = rng.size(1, 4);
        let inputs: Vec<Tensor> = (0..count)
            .map(|_| {
                let mut d = dims.clone();
                d[axis] = rng.size(0, 3) as u32;
                tensor(&d, &rng.values(numel(&d), 99))
            })
            .collect();
        let signed = if rng.chance(50) {
            axis as i64
        } else {
            axis as i64 - rank as i64
        };
        let refs: Vec<&Tensor> = inputs.iter().collect();
        let y = apply1(&CONCAT, &[("axis", int(signed))], &refs);
        for (position, d) in indices(y.shape.dims()).iter().enumerate() {
            let (mut k, mut i) = (0, d[axis]);
            while i >= inputs[k].shape.dims()[axis] as usize {
                i -= inputs[k].shape.dims()[axis] as usize;
                k += 1;
            }
            let mut e = d.clone();
            e[axis] = i;
            assert_eq!(
                y.data[position],
                inputs[k].data[flat(&e, inputs[k].shape.dims())]
            );
        }
    }
    assert_eq!(
        code(infer(&CONCAT, &[], &[ty(&[2, 2]), ty(&[2, 3])])),
        ErrorCode::ShapeMismatch
    );
    assert_eq!(
        code(infer(&CONCAT, &[], &[ty(&[2, 2]), ty(&[2])])),
        ErrorCode::ShapeMismatch
    );
    assert_eq!(
        code(infer(&CONCAT, &[("axis", int(2))], &[ty(&[2, 2])])),
        ErrorCode::AttributeOutOfRange
    );
    assert_eq!(
        code(infer(&CONCAT, &[("axis", int(-3))], &[ty(&[2, 2])])),
        ErrorCode::AttributeOutOfRange
    );
    assert_eq!(
        code(infer(&CONCAT, &[], &[ty(&[])])),
        ErrorCode::AttributeOutOfRange
    );
}

#[test]
fn select_matches_the_reference() {
    let c = precise(&[2, 2], 2, &[1, 0, -1, 0]);
    let a = precise(&[2, 2], 5, &[1, 2, 3, 4]);
    let b = precise(&[2, 2], 12, &[-1, -2, -3, -4]);
    let y = apply1(&SELECT, &[], &[&c, &a, &b]);
    assert_eq!((y.data.as_slice(), y.precision), (&[1, -2, 3, -4][..], 12));
    let mut rng = Rng(0x5E1);
    for _ in 0..50 {
        let rank = rng.size(0, 3);
        let dims = rng.dims(rank, 4);
        let n = numel(&dims);
        let (c, a, b) = (
            tensor(&dims, &rng.values(n, 1)),
            tensor(&dims, &rng.values(n, 50)),
            tensor(&dims, &rng.values(n, 50)),
        );
        let y = apply1(&SELECT, &[], &[&c, &a, &b]);
        for i in 0..n {
            assert_eq!(
                y.data[i],
                if c.data[i] != 0 { a.data[i] } else { b.data[i] }
            );
        }
    }
    for shapes in [
        [&[2, 2][..], &[2, 2], &[2, 1]],
        [&[2, 2], &[2, 1], &[2, 2]],
        [&[2], &[2, 2], &[2, 2]],
    ] {
        let types: Vec<TensorType> = shapes.iter().map(|d| ty(d)).collect();
        assert_eq!(code(infer(&SELECT, &[], &types)), ErrorCode::ShapeMismatch);
    }
}

// ---------------------------------------------------------------------------------------------
// Reduce
// ---------------------------------------------------------------------------------------------

/// Reference reduction: (output dims, values or None on overflow).
fn reduce_ref(
    x: &Tensor,
    kind: &str,
    dim: &[usize],
    keep: bool,
    frac: u32,
) -> (Vec<u32>, Option<Vec<i64>>) {
    let dims = x.shape.dims();
    let reduced: Vec<bool> = (0..dims.len())
        .map(|a| dim.is_empty() || dim.contains(&a))
        .collect();
    let kept: Vec<u32> = (0..dims.len())
        .filter(|&a| !reduced[a])
        .map(|a| dims[a])
        .collect();
    let mut out: Vec<u32> = (0..dims.len())
        .filter_map(|a| {
            if !reduced[a] {
                Some(dims[a])
            } else if keep {
                Some(1)
            } else {
                None
            }
        })
        .collect();
    if kept.is_empty() && !keep {
        out = vec![1];
    }
    let mut groups: BTreeMap<Vec<usize>, Vec<i64>> = BTreeMap::new();
    for (position, index) in indices(dims).iter().enumerate() {
        let key: Vec<usize> = (0..dims.len())
            .filter(|&a| !reduced[a])
            .map(|a| index[a])
            .collect();
        groups
            .entry(key)
            .or_default()
            .push(i64::from(x.data[position]));
    }
    let values: Option<Vec<i64>> = indices(&kept)
        .iter()
        .map(|key| {
            let items = groups.get(key).cloned().unwrap_or_default();
            match kind {
                "kSum" => {
                    let total: i128 = items.iter().map(|&v| i128::from(v)).sum();
                    round_q(total, 0)
                }
                "kProd" => items.iter().try_fold(1i64 << frac, |acc, &v| {
                    round_q(i128::from(acc) * i128::from(v), frac)
                }),
                "kMax" => items.iter().copied().max(),
                "kMin" => items.iter().copied().min(),
                _ => unreachable!(),
            }
        })
        .collect();
    (out, values)
}

#[test]
fn reduce_spec_cases() {
    let x = ty(&[128, 128, 16, 16]);
    let case1 = infer(
        &REDUCE,
        &[("kind", text("kSum")), ("dim", ints(&[2, 3]))],
        std::slice::from_ref(&x),
    )
    .unwrap();
    assert_eq!(
        (case1[0].shape.dims(), case1[0].precision),
        (&[128, 128][..], 32)
    );
    let case2 = infer(
        &REDUCE,
        &[
            ("kind", text("kSum")),
            ("dim", ints(&[2, 3])),
            ("keep_dim", flag(true)),
        ],
        std::slice::from_ref(&x),
    )
    .unwrap();
    assert_eq!(case2[0].shape.dims(), [128, 128, 1, 1]);
    // A small analogue, run: [2, 2, 2, 2] summed over {2, 3}.
    let t = tensor(&[2, 2, 2, 2], &(1..=16).collect::<Vec<_>>());
    let y = apply1(
        &REDUCE,
        &[("kind", text("kSum")), ("dim", ints(&[2, 3]))],
        &[&t],
    );
    assert_eq!(
        (y.shape.dims(), y.data.as_slice()),
        (&[2, 2][..], &[10, 26, 42, 58][..])
    );
    // Every axis without keep_dim: (1,), never rank 0.
    let y = apply1(&REDUCE, &[("kind", text("kMax"))], &[&t]);
    assert_eq!((y.shape.dims(), y.data.as_slice()), (&[1][..], &[16][..]));
    let y = apply1(
        &REDUCE,
        &[("kind", text("kMin")), ("keep_dim", flag(true))],
        &[&t],
    );
    assert_eq!(
        (y.shape.dims(), y.data.as_slice()),
        (&[1, 1, 1, 1][..], &[1][..])
    );
    let scalar = tensor(&[], &[7]);
    assert_eq!(
        apply1(&REDUCE, &[("kind", text("kSum"))], &[&scalar])
            .shape
            .dims(),
        [1]
    );
    // kMax / kMin keep the input's precision.
    let p = precise(&[3], 6, &[-5, 31, 2]);
    let y = apply1(&REDUCE, &[("kind", text("kMax"))], &[&p]);
    assert_eq!((y.data.as_slice(), y.precision), (&[31][..], 6));
    assert_eq!(
        usage(&REDUCE, &[("kind", text("kProd"))], &[ty(&[3, 4])]).class,
        "prod"
    );
    let sum = usage(&REDUCE, &[("kind", text("kSum"))], &[ty(&[3, 4])]);
    assert_eq!((sum.class, sum.work.reads), ("", 12));
}

#[test]
fn reduce_prod_rounds_after_each_multiplication() {
    let prod = |values: &[i64], f: i64| {
        let x = tensor(&[values.len() as u32], values);
        apply(
            &REDUCE,
            &[("kind", text("kProd")), ("frac_bits", int(f))],
            &[&x],
        )
        .map(|y| y[0].data[0])
    };
    // Q2: 0.75⁴ ≈ 0.316 would round to 1 (0.25) exactly; sequentially 3 → 2.25→2 → 1.5→2 → 1.5→2.
    assert_eq!(prod(&[3, 3, 3, 3], 2), Ok(2));
    assert_eq!(prod(&[-3, 3], 2), Ok(-2)); // −2.25 → −2
    assert_eq!(prod(&[-2, 3], 2), Ok(-2)); // −1.5 → −2 (away from zero)
    assert_eq!(prod(&[24, 40, -8], 4), Ok(-30)); // 1.5 · 2.5 · −0.5 = −1.875
    assert_eq!(prod(&[], 7), Ok(128)); // empty product: 1.0
    assert_eq!(prod(&[5, 7], 0), Ok(35));
    assert_eq!(
        prod(&[65536, 65536], 0).map_err(|e| e.code),
        Err(ErrorCode::IntegerOverflow)
    );
    // An intermediate overflow is final even if a later factor is 0.
    assert_eq!(
        prod(&[65536, 65536, 0], 0).map_err(|e| e.code),
        Err(ErrorCode::IntegerOverflow)
    );
    assert_eq!(prod(&[1 << 30, 1 << 30], 30), Ok(1 << 30));
}

#[test]
fn reduce_matches_the_reference() {
    let mut rng = Rng(0x2ED);
    let mut overflows = 0;
    for _ in 0..300 {
        let rank = rng.size(0, 4);
        let dims: Vec<u32> = (0..rank)
            .map(|_| {
                if rng.chance(8) {
                    0
                } else {
                    rng.size(1, 4) as u32
                }
            })
            .collect();
        let mut dim: Vec<usize> = (0..rank).filter(|_| rng.chance(50)).collect();
        if rng.chance(30) {
            dim.clear();
        }
        let keep = rng.chance(50);
        let kind = rng.pick(&["kSum", "kProd", "kMax", "kMin"]);
        let frac = rng.pick(&[0u32, 3, 16]);
        let bound = rng.pick(&[5i64, 1 << 18, i64::from(i32::MAX)]);
        let x = tensor(&dims, &rng.values(numel(&dims), bound));
        let mut attrs: AttrList = vec![
            ("kind", text(kind)),
            ("keep_dim", flag(keep)),
            ("frac_bits", int(i64::from(frac))),
        ];
        if !dim.is_empty() || rng.chance(50) {
            let mut listed: Vec<i64> = dim.iter().map(|&a| a as i64).collect();
            listed.reverse(); // order does not matter
            attrs.push(("dim", ints(&listed)));
        }
        let (out, values) = reduce_ref(&x, kind, &dim, keep, frac);
        let reduced_count: usize = (0..rank)
            .filter(|a| dim.is_empty() || dim.contains(a))
            .map(|a| dims[a] as usize)
            .product();
        let kept_count: usize = (0..rank)
            .filter(|a| !(dim.is_empty() || dim.contains(a)))
            .map(|a| dims[a] as usize)
            .product();
        let empty_extreme = matches!(kind, "kMax" | "kMin") && reduced_count == 0 && kept_count > 0;
        let result = apply(&REDUCE, &attrs, &[&x]);
        if empty_extreme {
            assert_eq!(code(result), ErrorCode::ShapeMismatch, "{dims:?} {dim:?}");
            continue;
        }
        match (result, values) {
            (Ok(y), Some(v)) => {
                assert_eq!(
                    y[0].shape.dims(),
                    out.as_slice(),
                    "{dims:?} {dim:?} keep {keep}"
                );
                assert_eq!(data(&y[0]), v, "{kind} {dims:?} {dim:?} F {frac}");
            }
            (Err(e), None) => {
                assert_eq!(e.code, ErrorCode::IntegerOverflow);
                overflows += 1;
            }
            (got, want) => panic!("{kind} {dims:?} {dim:?}: {:?} vs {want:?}", got.map(|_| ())),
        }
    }
    assert!(overflows > 0);
}

#[test]
fn reduce_rejections_and_overflow() {
    let x = ty(&[2, 3]);
    let reject = |attrs: &[(&'static str, AttrValue)], input: TensorType| {
        code(infer(&REDUCE, attrs, &[input]))
    };
    assert_eq!(reject(&[], x.clone()), ErrorCode::MissingAttribute);
    assert_eq!(
        reject(&[("kind", text("kMa"))], x.clone()),
        ErrorCode::AttributeOutOfRange
    );
    assert_eq!(
        reject(&[("kind", text("kSum")), ("dim", ints(&[2]))], x.clone()),
        ErrorCode::AttributeOutOfRange
    );
    assert_eq!(
        reject(&[("kind", text("kSum")), ("dim", ints(&[-1]))], x.clone()),
        ErrorCode::AttributeOutOfRange
    );
    assert_eq!(
        reject(&[("kind", text("kSum")), ("dim", ints(&[1, 1]))], x.clone()),
        ErrorCode::AttributeOutOfRange
    );
    assert_eq!(
        reject(&[("kind", text("kMax")), ("dim", ints(&[1]))], ty(&[2, 0])),
        ErrorCode::ShapeMismatch
    );
    assert_eq!(
        reject(&[("kind", text("kMin"))], ty(&[0])),
        ErrorCode::ShapeMismatch
    );
    // Empty reductions of kSum / kProd are defined.
    let empty = tensor(&[2, 0], &[]);
    assert_eq!(
        apply1(
            &REDUCE,
            &[("kind", text("kSum")), ("dim", ints(&[1]))],
            &[&empty]
        )
        .data,
        [0, 0]
    );
    assert_eq!(
        apply1(
            &REDUCE,
            &[
                ("kind", text("kProd")),
                ("dim", ints(&[1])),
                ("frac_bits", int(3))
            ],
            &[&empty]
        )
        .data,
        [8, 8]
    );
    let big = i64::from(i32::MAX);
    let t = tensor(&[2], &[big, big]);
    assert_eq!(
        code(apply(&REDUCE, &[("kind", text("kSum"))], &[&t])),
        ErrorCode::IntegerOverflow
    );
    let t = tensor(&[3], &[-big, -1, 0]);
    assert_eq!(
        code(apply(&REDUCE, &[("kind", text("kSum"))], &[&t])),
        ErrorCode::IntegerOverflow
    );
    let t = tensor(&[3], &[big, 1, -1]);
    assert_eq!(
        apply1(&REDUCE, &[("kind", text("kSum"))], &[&t]).data,
        [i32::MAX]
    );
}

// ---------------------------------------------------------------------------------------------
// Reshape, Reverse, Slice, Transpose
// ---------------------------------------------------------------------------------------------

#[test]
fn reshape_infers_minus_one_and_keeps_data() {
    let x = precise(&[2, 3, 4], 7, &(0..24).collect::<Vec<_>>());
    let y = apply1(&RESHAPE, &[("shape", ints(&[4, -1]))], &[&x]);
    assert_eq!((y.shape.dims(), y.precision), (&[4, 6][..], 7));
    assert_eq!(y.data, x.data);
    assert_eq!(
        apply1(&RESHAPE, &[("shape", ints(&[24]))], &[&x])
            .shape
            .dims(),
        [24]
    );
    assert_eq!(
        apply1(&RESHAPE, &[("shape", ints(&[-1, 2, 1, 3]))], &[&x])
            .shape
            .dims(),
        [4, 2, 1, 3]
    );
    let empty = tensor(&[0, 3], &[]);
    assert_eq!(
        apply1(&RESHAPE, &[("shape", ints(&[3, -1]))], &[&empty])
            .shape
            .dims(),
        [3, 0]
    );
    let one = tensor(&[1, 1], &[5]);
    assert_eq!(
        apply1(&RESHAPE, &[("shape", ints(&[]))], &[&one])
            .shape
            .dims(),
        [0u32; 0]
    );
    let t = ty(&[2, 3, 4]);
    for (shape, expected) in [
        (&[-1, -1][..], ErrorCode::AttributeOutOfRange),
        (&[0, 24], ErrorCode::AttributeOutOfRange),
        (&[-2, 12], ErrorCode::AttributeOutOfRange),
        (&[5, 5], ErrorCode::ShapeMismatch),
        (&[5, -1], ErrorCode::ShapeMismatch),
        (&[1 << 33], ErrorCode::AttributeOutOfRange),
    ] {
        assert_eq!(
            code(infer(
                &RESHAPE,
                &[("shape", ints(shape))],
                std::slice::from_ref(&t)
            )),
            expected,
            "{shape:?}"
        );
    }
    assert_eq!(
        code(infer(&RESHAPE, &[], &[t])),
        ErrorCode::MissingAttribute
    );
}

#[test]
fn reverse_matches_the_reference() {
    let x = tensor(&[2, 3], &[1, 2, 3, 4, 5, 6]);
    assert_eq!(
        apply1(&REVERSE, &[("axis", ints(&[1]))], &[&x]).data,
        [3, 2, 1, 6, 5, 4]
    );
    assert_eq!(
        apply1(&REVERSE, &[("axis", ints(&[0, -1]))], &[&x]).data,
        [6, 5, 4, 3, 2, 1]
    );
    // A repeated axis (also spelled negatively) is reversed once.
    assert_eq!(
        apply1(&REVERSE, &[("axis", ints(&[1, -1, 1]))], &[&x]).data,
        [3, 2, 1, 6, 5, 4]
    );
    assert_eq!(apply1(&REVERSE, &[("axis", ints(&[]))], &[&x]).data, x.data);
    let mut rng = Rng(0x4EF);
    for _ in 0..100 {
        let rank = rng.size(0, 4);
        let dims: Vec<u32> = (0..rank)
            .map(|_| {
                let low = usize::from(!rng.chance(5));
                rng.size(low, 4) as u32
            })
            .collect();
        let x = tensor(&dims, &rng.values(numel(&dims), 1000));
        let axes: Vec<i64> = (0..rng.size(0, 4))
            .filter(|_| rank > 0)
            .map(|_| rng.range(-(rank as i64), rank as i64 - 1))
            .collect();
        let flips: Vec<bool> = (0..rank)
            .map(|a| {
                axes.iter()
                    .any(|&v| (v + rank as i64) as usize % rank.max(1) == a)
            })
            .collect();
        let y = apply1(&REVERSE, &[("axis", ints(&axes))], &[&x]);
        assert_eq!(y.shape, x.shape);
        for (position, d) in indices(&dims).iter().enumerate() {
            let e: Vec<usize> = (0..rank)
                .map(|a| {
                    if flips[a] {
                        dims[a] as usize - 1 - d[a]
                    } else {
                        d[a]
                    }
                })
                .collect();
            assert_eq!(
                y.data[position],
                x.data[flat(&e, &dims)],
                "{dims:?} {axes:?}"
            );
        }
    }
    assert_eq!(
        code(infer(&REVERSE, &[("axis", ints(&[2]))], &[ty(&[2, 3])])),
        ErrorCode::AttributeOutOfRange
    );
    assert_eq!(
        code(infer(&REVERSE, &[("axis", ints(&[-3]))], &[ty(&[2, 3])])),
        ErrorCode::AttributeOutOfRange
    );
    assert_eq!(
        code(infer(&REVERSE, &[], &[ty(&[2, 3])])),
        ErrorCode::MissingAttribute
    );
}

#[test]
fn slice_matches_the_reference() {
    let x = tensor(&[3, 4], &(0..12).collect::<Vec<_>>());
    let attrs: AttrList = vec![
        ("axes", ints(&[1, 0])),
        ("starts", ints(&[1, 2])),
        ("ends", ints(&[3, 3])),
    ];
    let y = apply1(&SLICE, &attrs, &[&x]);
    assert_eq!(
        (y.shape.dims(), y.data.as_slice()),
        (&[1, 2][..], &[9, 10][..])
    );
    let mut rng = Rng(0x511);
    for _ in 0..150 {
        let rank = rng.size(0, 4);
        let dims = rng.dims(rank, 5);
        let x = tensor(&dims, &rng.values(numel(&dims), 1000));
        let mut axes: Vec<usize> = (0..rank).filter(|_| rng.chance(60)).collect();
        if rng.chance(50) {
            axes.reverse();
        }
        let ranges: Vec<(usize, usize)> = axes
            .iter()
            .map(|&a| {
                let start = rng.size(0, dims[a] as usize - 1);
                (start, rng.size(start + 1, dims[a] as usize))
            })
            .collect();
        let attrs: AttrList = vec![
            (
                "axes",
                ints(&axes.iter().map(|&a| a as i64).collect::<Vec<_>>()),
            ),
            (
                "starts",
                ints(&ranges.iter().map(|r| r.0 as i64).collect::<Vec<_>>()),
            ),
            (
                "ends",
                ints(&ranges.iter().map(|r| r.1 as i64).collect::<Vec<_>>()),
            ),
        ];
        let y = apply1(&SLICE, &attrs, &[&x]);
        let mut out = dims.clone();
        let mut offset = vec![0; rank];
        for (&a, &(s, e)) in axes.iter().zip(&ranges) {
            out[a] = (e - s) as u32;
            offset[a] = s;
        }
        assert_eq!(y.shape.dims(), out.as_slice());
        for (position, d) in indices(&out).iter().enumerate() {
            let e: Vec<usize> = d.iter().zip(&offset).map(|(i, o)| i + o).collect();
            assert_eq!(y.data[position], x.data[flat(&e, &dims)]);
        }
    }
    let t = ty(&[3, 4]);
    let reject = |axes: &[i64], starts: &[i64], ends: &[i64]| {
        code(infer(
            &SLICE,
            &[
                ("axes", ints(axes)),
                ("starts", ints(starts)),
                ("ends", ints(ends)),
            ],
            std::slice::from_ref(&t),
        ))
    };
    assert_eq!(reject(&[0], &[0, 1], &[1]), ErrorCode::AttributeOutOfRange);
    assert_eq!(reject(&[0], &[-1], &[1]), ErrorCode::AttributeOutOfRange);
    assert_eq!(reject(&[0], &[2], &[2]), ErrorCode::AttributeOutOfRange);
    assert_eq!(reject(&[0], &[0], &[4]), ErrorCode::AttributeOutOfRange);
    assert_eq!(reject(&[2], &[0], &[1]), ErrorCode::AttributeOutOfRange);
    assert_eq!(reject(&[-1], &[0], &[1]), ErrorCode::AttributeOutOfRange);
    assert_eq!(
        reject(&[1, 1], &[0, 1], &[1, 2]),
        ErrorCode::AttributeOutOfRange
    );
    assert_eq!(
        code(infer(
            &SLICE,
            &[("axes", ints(&[0])), ("starts", ints(&[0]))],
            std::slice::from_ref(&t)
        )),
        ErrorCode::MissingAttribute
    );
    assert!(
        infer(
            &SLICE,
            &[
                ("axes", ints(&[])),
                ("starts", ints(&[])),
                ("ends", ints(&[]))
            ],
            &[t]
        )
        .is_ok()
    );
}

#[test]
fn transpose_matches_the_reference() {
    let x = tensor(&[2, 3], &[1, 2, 3, 4, 5, 6]);
    let y = apply1(&TRANSPOSE, &[("axis", ints(&[1, 0]))], &[&x]);
    assert_eq!(
        (y.shape.dims(), y.data.as_slice()),
        (&[3, 2][..], &[1, 4, 2, 5, 3, 6][..])
    );
    let mut rng = Rng(0x7A);
    for _ in 0..100 {
        let rank = rng.size(0, 5);
        let dims = rng.dims(rank, 4);
        let x = tensor(&dims, &rng.values(numel(&dims), 1000));
        let mut perm: Vec<usize> = (0..rank).collect();
        for i in (1..rank).rev() {
            perm.swap(i, rng.size(0, i));
        }
        let y = apply1(
            &TRANSPOSE,
            &[(
                "axis",
                ints(&perm.iter().map(|&a| a as i64).collect::<Vec<_>>()),
            )],
            &[&x],
        );
        assert_eq!(y, permute(&x, &perm));
    }
    let t = ty(&[2, 3, 4]);
    for axis in [
        &[0, 1][..],
        &[0, 1, 1],
        &[0, 1, 3],
        &[0, 1, -1],
        &[0, 1, 2, 3],
    ] {
        assert_eq!(
            code(infer(
                &TRANSPOSE,
                &[("axis", ints(axis))],
                std::slice::from_ref(&t)
            )),
            ErrorCode::AttributeOutOfRange,
            "{axis:?}"
        );
    }
    assert_eq!(
        code(infer(&TRANSPOSE, &[], &[t])),
        ErrorCode::MissingAttribute
    );
}

#[test]
fn data_movement_keeps_precision_and_charges_copies() {
    let x = TensorType::new([2, 3], 11);
    for (def, attrs) in [
        (&RESHAPE, vec![("shape", ints(&[3, 2]))]),
        (&REVERSE, vec![("axis", ints(&[0]))]),
        (&TRANSPOSE, vec![("axis", ints(&[1, 0]))]),
        (
            &SLICE,
            vec![
                ("axes", ints(&[1])),
                ("starts", ints(&[0])),
                ("ends", ints(&[2])),
            ],
        ),
        (
            &BROADCAST_TO,
            vec![
                ("out_shape", ints(&[4, 2, 3])),
                ("broadcast_axes", ints(&[1, 2])),
            ],
        ),
    ] {
        let out = infer(def, &attrs, std::slice::from_ref(&x)).unwrap();
        assert_eq!(out[0].precision, 11, "{}", def.name);
        assert_eq!(
            usage(def, &attrs, std::slice::from_ref(&x)).work,
            Work::io(x.shape.elements(), out[0].shape.elements()),
            "{}",
            def.name
        );
    }
}
