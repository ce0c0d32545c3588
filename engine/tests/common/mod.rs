//! Helpers shared by the engine's integration tests.
// Each test crate includes this module and uses a part of it.
#![allow(dead_code)]

pub mod conv;
pub mod property;

use cvm_engine::attrs::Attrs;
use cvm_engine::model::{Attr, AttrValue};
use cvm_engine::ops;
use cvm_engine::tensor::{Tensor, TensorType};

/// An attribute from a name and a value.
pub fn attr(name: &str, value: AttrValue) -> Attr {
    Attr {
        name: name.to_string(),
        value,
    }
}

/// Runs the operator `name` on `inputs` with `attrs` (in any order) through the engine's own
/// steps: attribute checks, build, type inference, output allocation, run.
pub fn run_op(name: &str, attrs: &[Attr], inputs: &[&Tensor]) -> Vec<Tensor> {
    let def = ops::by_name(name).unwrap();
    let mut attrs = attrs.to_vec();
    attrs.sort_by(|a, b| a.name.cmp(&b.name));
    let checked = Attrs::check(&attrs, def.attrs).unwrap();
    let op = (def.build)(&checked, inputs.len()).unwrap();
    let types: Vec<TensorType> = inputs
        .iter()
        .map(|t| TensorType {
            shape: t.shape.clone(),
            precision: t.precision,
        })
        .collect();
    let mut outputs: Vec<Tensor> = op
        .infer(&types)
        .unwrap()
        .iter()
        .map(|t| Tensor::zeroed(t).unwrap())
        .collect();
    let views: Vec<_> = inputs.iter().map(|t| t.view()).collect();
    let mut out_views: Vec<_> = outputs.iter_mut().map(Tensor::view_mut).collect();
    op.run(&views, &mut out_views).unwrap();
    outputs
}

/// splitmix64: small and deterministic; every test starts it from a fixed seed. Test files add
/// their own generators (shapes, values, precisions) in `impl Rng` blocks of their own.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in 0..n (n ≥ 1).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// Uniform in low..=high.
    pub fn range(&mut self, low: i64, high: i64) -> i64 {
        let span = (i128::from(high) - i128::from(low) + 1) as u64;
        (i128::from(low) + i128::from(self.below(span))) as i64
    }

    /// Uniform in low..=high.
    pub fn size(&mut self, low: usize, high: usize) -> usize {
        self.range(low as i64, high as i64) as usize
    }

    /// True with probability `percent` / 100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    /// One of `items` (not empty), uniformly.
    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }

    /// Puts `items` in a uniformly random order (Fisher–Yates).
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            items.swap(i, j);
        }
    }

    /// `rank` dimensions in 1..=max, each 0 with probability `zero_percent`.
    pub fn dimensions(&mut self, rank: usize, max: u32, zero_percent: u64) -> Vec<u32> {
        (0..rank)
            .map(|_| {
                if self.chance(zero_percent) {
                    0
                } else {
                    self.range(1, i64::from(max)) as u32
                }
            })
            .collect()
    }
}
