//! Price classes follow attributes and shapes (`docs/gas.md`, "Node gas"): the class a node is
//! priced under, at and one past each boundary that defines it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // failures report by panicking

use cvm_engine::attrs::Attrs;
use cvm_engine::model::{Attr, AttrValue};
use cvm_engine::ops::OpDef;
use cvm_engine::ops::nn::cinn_conv::CONV;
use cvm_engine::ops::nn::conv2d::CONV2D;
use cvm_engine::ops::nn::dense::{DENSE, DOT};
use cvm_engine::ops::nn::pool::MAX_POOL2D;
use cvm_engine::tensor::TensorType;
use cvm_gas::Usage;

fn usage(def: &OpDef, attrs: &[(&str, AttrValue)], inputs: &[TensorType]) -> Usage {
    let mut attrs: Vec<Attr> = attrs
        .iter()
        .map(|(name, value)| Attr {
            name: (*name).into(),
            value: value.clone(),
        })
        .collect();
    attrs.sort_by(|a, b| a.name.cmp(&b.name));
    let checked = Attrs::check(&attrs, def.attrs).unwrap();
    let operator = (def.build)(&checked, inputs.len()).unwrap();
    let outputs = operator.infer(inputs).unwrap();
    operator.usage(inputs, &outputs).unwrap()
}

fn ty(dims: &[u32], precision: u8) -> TensorType {
    TensorType::new(dims.to_vec(), precision)
}

/// The class of a conv2d without bias over `data` with `weight`, `padding` on both axes and
/// `groups`.
fn conv2d_class(data: [u32; 4], weight: [u32; 4], padding: i64, groups: i64) -> &'static str {
    let attrs = [
        ("padding", AttrValue::Ints(vec![padding, padding])),
        ("groups", AttrValue::Int(groups)),
        ("use_bias", AttrValue::Bool(false)),
    ];
    usage(&CONV2D, &attrs, &[ty(&data, 8), ty(&weight, 8)]).class
}

#[test]
fn conv2d_classes() {
    // An 8 × 8 plane: padded to 64 × 64 it holds 4096 ≤ 2·64 + 4096 elements, to 66 × 66 more.
    assert_eq!(conv2d_class([1, 4, 8, 8], [8, 4, 3, 3], 28, 1), "dense");
    assert_eq!(conv2d_class([1, 4, 8, 8], [8, 4, 3, 3], 29, 1), "padded");
    assert_eq!(conv2d_class([1, 4, 8, 8], [8, 2, 3, 3], 29, 2), "padded");
    assert_eq!(conv2d_class([1, 4, 8, 8], [8, 2, 3, 3], 1, 2), "grouped");
    assert_eq!(conv2d_class([1, 4, 8, 8], [8, 4, 1, 1], 0, 1), "pointwise");
    // Depthwise shapes keep their own classes, padded or not.
    assert_eq!(conv2d_class([1, 4, 8, 8], [4, 1, 3, 3], 1, 4), "depthwise");
    assert_eq!(
        conv2d_class([1, 4, 8, 8], [4, 1, 3, 3], 29, 4),
        "depthwise irregular"
    );
}

#[test]
fn dot_is_matrix_when_y_has_columns() {
    let dot = |x: &[u32], y: &[u32]| usage(&DOT, &[], &[ty(x, 8), ty(y, 8)]);
    assert_eq!(dot(&[4, 16], &[16]).class, "");
    assert_eq!(dot(&[16], &[16]).class, "");
    assert_eq!(dot(&[4, 16], &[16, 1]).class, "");
    let matrix = dot(&[4, 16], &[16, 2]);
    assert_eq!(matrix.class, "matrix");
    assert_eq!((matrix.work.macs, matrix.work.reads), (4 * 2 * 16, 64 + 32));
}

#[test]
fn cinn_conv_classes_are_its_types() {
    let x = ty(&[1, 4, 6, 6], 8);
    let w = ty(&[2, 4, 3, 3], 8);
    let y = ty(&[1, 2, 4, 4], 8);
    let attrs = |conv_type: &str, shape: &[i64]| {
        let mut attrs = vec![("conv_type", AttrValue::Str(conv_type.into()))];
        if !shape.is_empty() {
            attrs.push(("output_shape", AttrValue::Ints(shape.to_vec())));
        }
        attrs
    };
    let forward = usage(&CONV, &attrs("forward", &[]), &[x.clone(), w.clone()]);
    assert_eq!(forward.class, "forward");
    // One window of 4·3·3 input elements per output position, whatever the output channels.
    assert_eq!(forward.work.taps, 16 * 36);
    let data = usage(
        &CONV,
        &attrs("backward_data", &[1, 4, 6, 6]),
        &[w, y.clone()],
    );
    assert_eq!((data.class, data.work.taps), ("backward_data", 0));
    let filter = usage(&CONV, &attrs("backward_filter", &[2, 4, 3, 3]), &[x, y]);
    assert_eq!((filter.class, filter.work.taps), ("backward_filter", 0));
}

/// The usage of a max_pool2d over a 1 × W row of 2 planes, with a 1 × K window and padding P
/// along the row only.
fn max_pool_usage(width: u32, window: i64, pad: i64) -> Usage {
    let attrs = [
        ("pool_size", AttrValue::Ints(vec![1, window])),
        ("padding", AttrValue::Ints(vec![0, pad])),
    ];
    usage(&MAX_POOL2D, &attrs, &[ty(&[1, 2, 1, width], 8)])
}

#[test]
fn max_pool2d_is_padded_when_most_window_positions_are() {
    // One input element, window 2, padding 1: two outputs, each window one element of the
    // input and one of padding: exactly half, not most.
    let half = max_pool_usage(1, 2, 1);
    assert_eq!((half.class, half.work.taps), ("", 2 * 2));
    // Window 3, padding 1: one output whose window holds the element and two of padding.
    let most = max_pool_usage(1, 3, 1);
    assert_eq!((most.class, most.work.taps), ("padded", 2));
    // A 4-wide row with a "same" window: 10 of 12 positions read the input.
    let same = max_pool_usage(4, 3, 1);
    assert_eq!((same.class, same.work.taps), ("", 2 * 10));
}

#[test]
fn dense_is_batched_from_two_rows() {
    let dense = |rows: u32| {
        let attrs = [
            ("units", AttrValue::Int(3)),
            ("use_bias", AttrValue::Bool(false)),
        ];
        usage(&DENSE, &attrs, &[ty(&[rows, 20], 8), ty(&[3, 20], 8)])
    };
    let single = dense(1);
    // The reduction of 20 rounds up to 32 lanes.
    assert_eq!((single.class, single.work.macs), ("", 3 * 32));
    let batched = dense(2);
    assert_eq!((batched.class, batched.work.macs), ("batched", 2 * 3 * 32));
}

#[test]
fn depthwise_conv2d_counts_its_planes() {
    let attrs = [
        ("padding", AttrValue::Ints(vec![1, 1])),
        ("groups", AttrValue::Int(4)),
        ("use_bias", AttrValue::Bool(false)),
    ];
    let depthwise = usage(
        &CONV2D,
        &attrs,
        &[ty(&[2, 4, 8, 8], 8), ty(&[4, 1, 3, 3], 8)],
    );
    assert_eq!(
        (depthwise.class, depthwise.work.slices),
        ("depthwise", 2 * 4)
    );
    let dense = usage(
        &CONV2D,
        &[
            ("padding", AttrValue::Ints(vec![1, 1])),
            ("use_bias", AttrValue::Bool(false)),
        ],
        &[ty(&[2, 4, 8, 8], 8), ty(&[4, 4, 3, 3], 8)],
    );
    // Two images, 8 × 8 outputs, 3 × 3 kernel positions: one run of 4 channels each.
    assert_eq!((dense.class, dense.work.slices), ("dense", 2 * 64 * 9));
}
