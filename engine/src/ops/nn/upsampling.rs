//! `upsampling` (spec 001): nearest-neighbour scaling of the two spatial axes.

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;

use super::{MAX_ATTR, check_layout};
use crate::attrs::{AttrKind, in_range, spec};
use crate::error::Result;
use crate::fail;
use crate::ops::common::expect_rank;
use crate::ops::{Arity, Family, OpDef, Operator};
use crate::tensor::{TensorMut, TensorRef, TensorType};

/// Nearest-neighbour upsampling of NCHW planes (spec 001 "upsampling").
///
/// - **Inputs**: `X` (N, C, H, W).
/// - **Attributes**:
///
///   | name | kind | default | allowed values |
///   | --- | --- | --- | --- |
///   | `layout` | string | absent (NCHW) | `"NCHW"` |
///   | `method` | string | absent (nearest neighbour) | `"NEAREST_NEIGHBOR"` |
///   | `scale` | integer | required | [1, 4096] |
///
/// - **Output shape**: (N, C, H·scale, W·scale).
/// - **Semantics**: `Y[n, c, h, w] = X[n, c, ⌊h / scale⌋, ⌊w / scale⌋]`: every input value becomes
///   a scale × scale block.
/// - **Output precision**: pX.
/// - **Rounding and overflow**: none possible.
/// - **Errors**, in order:
///   1. `layout` other than `"NCHW"`: `AttributeOutOfRange`.
///   2. `method` other than `"NEAREST_NEIGHBOR"`: `AttributeOutOfRange`.
///   3. `scale` absent: `MissingAttribute`; outside [1, 4096]: `AttributeOutOfRange`.
///   4. `X` not of rank 4: `ShapeMismatch`.
///   5. H·scale or W·scale above 2^32 − 1: `LimitExceeded`.
pub const UPSAMPLING: OpDef = OpDef {
    code: 24,
    name: "upsampling",
    family: Family::Nn,
    arity: Arity::Exactly(1),
    outputs: 1,
    attrs: &[
        spec("layout", AttrKind::Str),
        spec("method", AttrKind::Str),
        spec("scale", AttrKind::Int),
    ],
    build: |attrs, _| {
        check_layout(attrs, "layout", &["NCHW"])?;
        check_layout(attrs, "method", &["NEAREST_NEIGHBOR"])?;
        Ok(Box::new(Upsampling {
            scale: in_range("scale", attrs.int("scale")?, 1, MAX_ATTR)?,
        }))
    },
};

/// Nearest-neighbour upsampling of NCHW planes (spec 001 "upsampling"):
/// `Y[n, c, h, w] = X[n, c, ⌊h / scale⌋, ⌊w / scale⌋]`.
///
/// Its contract (inputs, shapes, precision, errors) is the doc comment of the row that
/// builds it.
#[derive(Debug)]
pub struct Upsampling {
    scale: u32,
}

impl Operator for Upsampling {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let data = &inputs[0];
        expect_rank(data, 4, "data")?;
        let dims = data.dims();
        let scaled = |dim: u32| {
            dim.checked_mul(self.scale).ok_or_else(|| {
                fail!(
                    LimitExceeded,
                    "dimension {dim} × scale {} exceeds u32",
                    self.scale
                )
            })
        };
        Ok(vec![TensorType::new(
            [dims[0], dims[1], scaled(dims[2])?, scaled(dims[3])?],
            data.precision,
        )])
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        let dims = inputs[0].dims;
        let (height, width) = (dims[2] as usize, dims[3] as usize);
        let scale = self.scale as usize;
        let (out_h, out_w) = (height * scale, width * scale);
        let data = inputs[0].data;
        let out = &mut *outputs[0].data;
        if out_w == 0 {
            return Ok(());
        }
        for (plane_index, out_plane) in out.chunks_exact_mut((out_h * out_w).max(1)).enumerate() {
            let plane = &data[plane_index * height * width..][..height * width];
            for (h, out_row) in out_plane.chunks_exact_mut(out_w).enumerate() {
                let row = &plane[(h / scale) * width..][..width];
                for (w, y) in out_row.iter_mut().enumerate() {
                    *y = row[w / scale];
                }
            }
        }
        Ok(())
    }
}
