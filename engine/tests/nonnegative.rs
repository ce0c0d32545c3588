//! The non-negativity fact of validation (`Operator::nonnegative_outputs`, `docs/ops.md`
//! "Non-negative values") is sound: whenever an operator claims its outputs non-negative for the
//! inputs flagged non-negative, every output element of a run on such inputs is ≥ 0. Random
//! inputs of precision 8 (0, ±127 often), half of them non-negative, through every operator
//! that claims the fact; conv2d and dense then run their `i8` kernels (`kernels::dot8`) exactly
//! when the fact holds, which `kernels.rs` and the fixtures check for equality.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a failed test panics

mod common;

use common::Rng;
use cvm_engine::attrs::Attrs;
use cvm_engine::model::{Attr, AttrValue};
use cvm_engine::ops;
use cvm_engine::tensor::{Shape, Tensor, TensorMut, TensorRef, TensorType};

/// Attributes by name, sorted.
type AttrList = Vec<(&'static str, AttrValue)>;

/// Operator name, attributes, number of inputs.
fn cases() -> Vec<(&'static str, AttrList, usize)> {
    use AttrValue::{Int, Ints};
    vec![
        ("relu", vec![], 1),
        ("abs", vec![], 1),
        ("negative", vec![], 1),
        ("cvm_precision", vec![], 1),
        ("clip", vec![("a_max", Int(50)), ("a_min", Int(3))], 1),
        ("clip", vec![("a_max", Int(50)), ("a_min", Int(-3))], 1),
        ("clip", vec![("a_max", Int(-5)), ("a_min", Int(-60))], 1),
        ("cvm_clip", vec![("precision", Int(4))], 1),
        (
            "cvm_right_shift",
            vec![("precision", Int(8)), ("shift_bit", Int(2))],
            1,
        ),
        (
            "cvm_left_shift",
            vec![("precision", Int(8)), ("shift_bit", Int(3))],
            1,
        ),
        (
            "max_pool2d",
            vec![
                ("pool_size", Ints(vec![2, 2])),
                ("strides", Ints(vec![2, 2])),
            ],
            1,
        ),
        ("sum", vec![("axis", Ints(vec![1, 3]))], 1),
        ("max", vec![("axis", Ints(vec![2]))], 1),
        ("flatten", vec![], 1),
        ("transpose", vec![], 1),
        ("concatenate", vec![("axis", Int(1))], 2),
        ("broadcast_add", vec![], 2),
    ]
}

#[test]
fn claimed_non_negative_outputs_are_non_negative() {
    let mut rng = Rng(0x0000_5EED_0009);
    let mut claims = 0;
    for (name, attrs, arity) in cases() {
        let def = ops::by_name(name).unwrap();
        let attrs: Vec<Attr> = attrs
            .into_iter()
            .map(|(name, value)| Attr {
                name: name.into(),
                value,
            })
            .collect();
        let checked = Attrs::check(&attrs, def.attrs).unwrap();
        let operator = (def.build)(&checked, arity).unwrap();
        for _ in 0..50 {
            let dims = vec![1, 2, 4, 6];
            let inputs: Vec<Tensor> = (0..arity)
                .map(|_| {
                    let low = if rng.chance(50) { 0 } else { -127 };
                    let data = (0..48)
                        .map(|_| match rng.below(5) {
                            0 => low,
                            1 => 127,
                            _ => rng.range(low.into(), 127) as i32,
                        })
                        .collect();
                    Tensor {
                        shape: Shape::new(dims.clone()),
                        precision: 8,
                        data,
                    }
                })
                .collect();
            let types: Vec<TensorType> = inputs
                .iter()
                .map(|t| TensorType::new(t.shape.dims().to_vec(), t.precision))
                .collect();
            let out_types = operator.infer(&types).unwrap();
            let flags: Vec<bool> = inputs
                .iter()
                .map(|t| t.data.iter().all(|&v| v >= 0))
                .collect();
            let claimed = operator.nonnegative_outputs(&flags);
            let mut outputs: Vec<Tensor> = out_types
                .iter()
                .map(|ty| Tensor::zeroed(ty).unwrap())
                .collect();
            {
                let views: Vec<TensorRef<'_>> = inputs.iter().map(Tensor::view).collect();
                let mut results: Vec<TensorMut<'_>> =
                    outputs.iter_mut().map(Tensor::view_mut).collect();
                operator.run(&views, &mut results).unwrap();
            }
            if claimed {
                claims += 1;
                for output in &outputs {
                    assert!(
                        output.data.iter().all(|&v| v >= 0),
                        "{name} {attrs:?} claims non-negative outputs for inputs {flags:?}, \
                         got {:?}",
                        output.data
                    );
                }
            }
        }
    }
    assert!(claims > 300, "only {claims} claims checked");
}
