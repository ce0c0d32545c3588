//! `max_pool2d` (spec 001) on the vector pooling kernel.

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;

use super::{MAX_ATTR, check_layout};
use crate::attrs::{AttrKind, Attrs, in_range, pair_in_range, spec};
use crate::error::Result;
use crate::fail;
use crate::kernels::pool::{self, PoolShape};
use crate::ops::common::{count, expect_rank, io_usage};
use crate::ops::{Arity, Family, OpDef, Operator, Usage};
use crate::tensor::{TensorMut, TensorRef, TensorType};

/// Two-dimensional max pooling over the planes of NCHW data (spec 001 "max_pool2d").
///
/// - **Inputs**: `X` (N, C, H, W).
/// - **Attributes**:
///
///   | name | kind | default | allowed values |
///   | --- | --- | --- | --- |
///   | `ceil_mode` | boolean | false | |
///   | `layout` | string | absent (NCHW) | `"NCHW"` |
///   | `padding` | list of 1 or 2 entries | (0, 0) | each in [0, 4096]; one entry p means (p, p) |
///   | `pool_size` | pair (PSH, PSW) | required | each in [1, 2^32 − 1]; PSH > PH and PSW > PW; PSH ≤ H + 2·PH and PSW ≤ W + 2·PW |
///   | `strides` | pair (SH, SW) | (1, 1) | each in [1, 4096] |
///
/// - **Output shape**: (N, C, OH, OW) with OH = f((H + 2·PH − PSH) / SH) + 1 and
///   OW = f((W + 2·PW − PSW) / SW) + 1, where f rounds up when `ceil_mode` is true and down
///   otherwise.
/// - **Semantics**:
///
///   ```text
///   Y[n, c, p, q] = max { X[n, c, h, w] | h ∈ [p·SH − PH, p·SH − PH + PSH) ∩ [0, H),
///                                         w ∈ [q·SW − PW, q·SW − PW + PSW) ∩ [0, W) }
///   ```
///
///   Padding is never sampled: positions outside the input take part in no maximum (they act
///   neither as 0 nor as INT32_MIN). Validation requires the last window along each axis to start
///   inside the input, (OH − 1)·SH − PH < H and (OW − 1)·SW − PW < W; only `ceil_mode` can violate
///   this. An input of height or width 0 is rejected (`ShapeMismatch`): every window would lie in
///   padding. For H, W ≥ 1, together with PSH > PH and PSW > PW, this guarantees that every window
///   holds at least one input element.
/// - **Output precision**: pX.
/// - **Rounding and overflow**: none possible.
/// - **Errors**, in order:
///   1. `layout` other than `"NCHW"`: `AttributeOutOfRange`.
///   2. `padding` with other than 1 or 2 entries, or an entry outside [0, 4096]:
///      `AttributeOutOfRange`.
///   3. `pool_size` absent: `MissingAttribute`; not a pair or an entry outside its range:
///      `AttributeOutOfRange`.
///   4. PSH ≤ PH or PSW ≤ PW: `AttributeOutOfRange`.
///   5. `strides` not a pair or an entry outside [1, 4096]: `AttributeOutOfRange`.
///   6. `X` not of rank 4: `ShapeMismatch`.
///   7. Height, then width: an input extent of 0: `ShapeMismatch`; PSH > H + 2·PH, or the last
///      window starting at or past the end of the input: `AttributeOutOfRange`. An output extent
///      above 2^32 − 1: `LimitExceeded`.
pub const MAX_POOL2D: OpDef = OpDef {
    code: 23,
    name: "max_pool2d",
    family: Family::Nn,
    arity: Arity::Exactly(1),
    outputs: 1,
    attrs: &[
        spec("ceil_mode", AttrKind::Bool),
        spec("layout", AttrKind::Str),
        spec("padding", AttrKind::Ints),
        spec("pool_size", AttrKind::Ints),
        spec("strides", AttrKind::Ints),
    ],
    build: MaxPool2d::build,
};

/// 2-D max pooling over NCHW planes (spec 001 "max_pool2d").
///
/// Its contract (inputs, shapes, precision, errors) is the doc comment of the row that
/// builds it.
#[derive(Debug)]
pub struct MaxPool2d {
    pool_size: [u32; 2],
    strides: [u32; 2],
    padding: [u32; 2],
    ceil_mode: bool,
}

impl MaxPool2d {
    fn build(attrs: &Attrs<'_>, _n_inputs: usize) -> Result<Box<dyn Operator>> {
        check_layout(attrs, "layout", &["NCHW"])?;
        let padding = match attrs.opt_ints("padding").unwrap_or(&[0, 0]) {
            [both] => {
                let pad = in_range("padding", *both, 0, MAX_ATTR)?;
                [pad, pad]
            }
            pair => pair_in_range("padding", pair, 0, MAX_ATTR)?,
        };
        let pool_size = pair_in_range(
            "pool_size",
            attrs.ints("pool_size")?,
            1,
            i64::from(u32::MAX),
        )?;
        for axis in 0..2 {
            if pool_size[axis] <= padding[axis] {
                return Err(fail!(
                    AttributeOutOfRange,
                    "pool_size {pool_size:?} must exceed padding {padding:?} on each axis"
                ));
            }
        }
        Ok(Box::new(MaxPool2d {
            pool_size,
            strides: pair_in_range(
                "strides",
                attrs.opt_ints("strides").unwrap_or(&[1, 1]),
                1,
                MAX_ATTR,
            )?,
            padding,
            ceil_mode: attrs.bool_or("ceil_mode", false),
        }))
    }

    /// Output extent along one axis, or why the window does not fit.
    fn extent(&self, size: u32, axis: usize) -> Result<u32> {
        let name = if axis == 0 { "height" } else { "width" };
        if size == 0 {
            return Err(fail!(
                ShapeMismatch,
                "the input {name} is 0, so every pooling window would lie in padding"
            ));
        }
        let padded = i64::from(size) + 2 * i64::from(self.padding[axis]);
        let pool = i64::from(self.pool_size[axis]);
        let stride = i64::from(self.strides[axis]);
        if pool > padded {
            return Err(fail!(
                AttributeOutOfRange,
                "pool_size {} exceeds the padded input {name} {padded}",
                pool
            ));
        }
        let span = padded - pool;
        let steps = if self.ceil_mode {
            (span + stride - 1) / stride
        } else {
            span / stride
        };
        let extent = steps + 1;
        // The last window starts at steps·stride − pad; it must still cover an input element.
        let last_start = steps * stride - i64::from(self.padding[axis]);
        if last_start >= i64::from(size) {
            return Err(fail!(
                AttributeOutOfRange,
                "with ceil_mode the last pooling window along {name} starts at {last_start}, past the input's {size} elements"
            ));
        }
        u32::try_from(extent)
            .map_err(|_| fail!(LimitExceeded, "output {name} {extent} is too large"))
    }
}

impl Operator for MaxPool2d {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let data = &inputs[0];
        expect_rank(data, 4, "data")?;
        let dims = data.dims();
        let out_h = self.extent(dims[2], 0)?;
        let out_w = self.extent(dims[3], 1)?;
        Ok(vec![TensorType::new(
            [dims[0], dims[1], out_h, out_w],
            data.precision,
        )])
    }

    fn usage(&self, inputs: &[TensorType], outputs: &[TensorType]) -> Result<Usage> {
        let (data, out) = (inputs[0].dims(), outputs[0].dims());
        let taps = self.inside_taps(data, [out[2], out[3]]);
        let [rows, columns] = taps;
        let mut usage = io_usage(inputs, outputs)?;
        if self.mostly_padding(taps, [out[2], out[3]]) {
            usage.class = "padded";
        }
        usage.work.taps = count(&[u64::from(data[0]), u64::from(data[1]), rows, columns])?;
        Ok(usage)
    }

    fn scratch_bytes(&self, inputs: &[TensorType]) -> Result<u64> {
        let out_h = self.extent(inputs[0].dims()[2], 0)?;
        let out_w = self.extent(inputs[0].dims()[3], 1)?;
        Ok(self.shape(inputs[0].dims(), [out_h, out_w]).scratch_bytes())
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        let shape = self.shape(inputs[0].dims, [outputs[0].dims[2], outputs[0].dims[3]]);
        pool::max_pool2d(&shape, inputs[0].data, outputs[0].data);
        Ok(())
    }
}

impl MaxPool2d {
    /// Along each axis, the (output position, window position) pairs that read the input, not
    /// its padding: a plane's window taps are their product.
    fn inside_taps(&self, dims: &[u32], out: [u32; 2]) -> [u64; 2] {
        [0, 1].map(|axis| {
            inside_taps(
                out[axis],
                self.pool_size[axis],
                self.strides[axis],
                self.padding[axis],
                1,
                dims[2 + axis],
            )
        })
    }

    /// Whether fewer than half of the window positions (OH·PSH·OW·PSW per plane) read the
    /// input, given the plane's [`MaxPool2d::inside_taps`]: the price class `padded`, whose
    /// windows are clipped to the input one by one.
    fn mostly_padding(&self, taps: [u64; 2], out: [u32; 2]) -> bool {
        let [rows, columns] = taps.map(u128::from);
        let positions = [0, 1].map(|axis| u128::from(out[axis]) * u128::from(self.pool_size[axis]));
        2 * rows * columns < positions[0] * positions[1]
    }

    fn shape(&self, dims: &[u32], [out_h, out_w]: [u32; 2]) -> PoolShape {
        PoolShape {
            clip: self.mostly_padding(self.inside_taps(dims, [out_h, out_w]), [out_h, out_w]),
            planes: dims[0] as usize * dims[1] as usize,
            height: dims[2] as usize,
            width: dims[3] as usize,
            out_h: out_h as usize,
            out_w: out_w as usize,
            window: self.pool_size.map(|v| v as usize),
            strides: self.strides.map(|v| v as usize),
            padding: self.padding.map(|v| v as usize),
        }
    }
}

/// Along one axis, the (output position, window position) pairs whose input position
/// `p·stride − pad + k·dilation` lies in `0..size`: the taps of a window that read the input
/// rather than its padding. One step per output position.
fn inside_taps(out: u32, window: u32, stride: u32, pad: u32, dilation: u32, size: u32) -> u64 {
    let [window, stride, pad, dilation, size] =
        [window, stride, pad, dilation, size].map(u64::from);
    // The first window position k with start + k·dilation ≥ edge (padded coordinates).
    let first = |start: u64, edge: u64| {
        edge.saturating_sub(start)
            .div_ceil(dilation.max(1))
            .min(window)
    };
    (0..u64::from(out))
        .map(|p| {
            let start = p * stride;
            first(start, pad + size) - first(start, pad)
        })
        .sum()
}
