//! The conv2d and dense kernels alone, called through the operator table as the executor calls
//! them. Throughput is reported in multiply-accumulates. Run:
//! `cargo bench -p cvm-benches --bench kernels`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a bench that cannot set up should stop loudly

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use cvm_benches::int8_values;
use cvm_engine::attrs::Attrs;
use cvm_engine::model::{Attr, AttrValue};
use cvm_engine::ops::{self, Operator};
use cvm_engine::tensor::{Tensor, TensorMut, TensorType};

fn build(op: &str, mut attrs: Vec<Attr>, n_inputs: usize) -> Box<dyn Operator> {
    let def = ops::by_name(op).expect("operator");
    attrs.sort_by(|a, b| a.name.cmp(&b.name));
    (def.build)(&Attrs::check(&attrs, def.attrs).expect("attrs"), n_inputs).expect("build")
}

fn attr(name: &str, value: AttrValue) -> Attr {
    Attr {
        name: name.into(),
        value,
    }
}

fn tensor(dims: &[u32], seed: u64) -> Tensor {
    let n = dims.iter().map(|&d| d as usize).product();
    Tensor {
        shape: cvm_engine::Shape::new(dims),
        precision: 8,
        data: int8_values(n, seed),
    }
}

fn bench_op(c: &mut Criterion, name: &str, operator: &dyn Operator, inputs: &[Tensor], macs: u64) {
    let types: Vec<TensorType> = inputs
        .iter()
        .map(|t| TensorType {
            shape: t.shape.clone(),
            precision: t.precision,
        })
        .collect();
    let out_types = operator.infer(&types).expect("types");
    let mut outputs: Vec<Tensor> = out_types
        .iter()
        .map(|ty| Tensor::zeroed(ty).expect("alloc"))
        .collect();
    let views: Vec<_> = inputs.iter().map(Tensor::view).collect();
    let mut group = c.benchmark_group("kernels");
    group.throughput(Throughput::Elements(macs));
    group.bench_function(name, |b| {
        b.iter(|| {
            let mut results: Vec<TensorMut<'_>> =
                outputs.iter_mut().map(Tensor::view_mut).collect();
            operator.run(&views, &mut results).expect("run");
        })
    });
    group.finish();
}

fn conv2d(c: &mut Criterion) {
    // 3x3 convolution, 32 -> 64 channels on 14x14 (the second layer of a digits CNN).
    let operator = build(
        "conv2d",
        vec![
            attr("padding", AttrValue::Ints(vec![1, 1])),
            attr("use_bias", AttrValue::Bool(false)),
        ],
        2,
    );
    let inputs = [tensor(&[1, 32, 14, 14], 1), tensor(&[64, 32, 3, 3], 2)];
    bench_op(
        c,
        "conv2d_3x3_32to64_14x14",
        operator.as_ref(),
        &inputs,
        64 * 14 * 14 * 32 * 9,
    );

    // Depthwise 3x3 on 64 channels of 28x28.
    let operator = build(
        "conv2d",
        vec![
            attr("groups", AttrValue::Int(64)),
            attr("padding", AttrValue::Ints(vec![1, 1])),
            attr("use_bias", AttrValue::Bool(false)),
        ],
        2,
    );
    let inputs = [tensor(&[1, 64, 28, 28], 3), tensor(&[64, 1, 3, 3], 4)];
    bench_op(
        c,
        "conv2d_depthwise_3x3_64_28x28",
        operator.as_ref(),
        &inputs,
        64 * 28 * 28 * 9,
    );
}

fn dense(c: &mut Criterion) {
    // 1152 -> 256, the first dense layer of a digits CNN.
    let operator = build("dense", vec![attr("use_bias", AttrValue::Bool(false))], 2);
    let inputs = [tensor(&[1, 1152], 5), tensor(&[256, 1152], 6)];
    bench_op(c, "dense_1152to256", operator.as_ref(), &inputs, 256 * 1152);
}

criterion_group!(benches, conv2d, dense);
criterion_main!(benches);
