//! The conv2d reference of the tests: the plain formula of spec 001 and shapes with their
//! output sizes, and MobileNet-shaped depthwise planes.
// A sum outside i32, or a shape whose kernel does not fit, is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use cvm_engine::kernels::ConvShape;

/// Spec 001 conv2d without bias: the plain sum over the zero-padded window, in i64.
pub fn plain_conv2d(s: &ConvShape, data: &[i32], weights: &[i32]) -> Vec<i32> {
    let (group_in, group_out) = (s.in_channels / s.groups, s.out_channels / s.groups);
    let mut out = Vec::new();
    for n in 0..s.batch {
        for oc in 0..s.out_channels {
            let g = oc / group_out;
            for p in 0..s.out_h {
                for q in 0..s.out_w {
                    let mut sum = 0i64;
                    for ic in 0..group_in {
                        for ki in 0..s.kernel_h {
                            for kj in 0..s.kernel_w {
                                let row = (p * s.strides[0] + ki * s.dilation[0]) as i64
                                    - s.padding[0] as i64;
                                let col = (q * s.strides[1] + kj * s.dilation[1]) as i64
                                    - s.padding[1] as i64;
                                if row < 0
                                    || col < 0
                                    || row >= s.height as i64
                                    || col >= s.width as i64
                                {
                                    continue;
                                }
                                let c = g * group_in + ic;
                                let x = data[((n * s.in_channels + c) * s.height + row as usize)
                                    * s.width
                                    + col as usize];
                                let w = weights
                                    [((oc * group_in + ic) * s.kernel_h + ki) * s.kernel_w + kj];
                                sum += i64::from(x) * i64::from(w);
                            }
                        }
                    }
                    out.push(i32::try_from(sum).unwrap());
                }
            }
        }
    }
    out
}

/// The output size along one axis, or None when the dilated kernel is wider than the padded
/// input.
pub fn extent(
    size: usize,
    pad: usize,
    dilation: usize,
    kernel: usize,
    stride: usize,
) -> Option<usize> {
    let padded = size + 2 * pad;
    let span = dilation * (kernel - 1) + 1;
    (padded >= span).then(|| (padded - span) / stride + 1)
}

/// `plain_conv2d` plus `bias[oc]` on every output of channel oc.
pub fn plus_bias(s: &ConvShape, mut sums: Vec<i32>, bias: &[i32]) -> Vec<i32> {
    let pixels = s.out_h * s.out_w;
    if pixels > 0 {
        for (plane, &b) in sums.chunks_exact_mut(pixels).zip(bias.iter().cycle()) {
            for value in plane {
                *value += b;
            }
        }
    }
    sums
}

/// `s` with its output height and width, or None when the kernel does not fit the padded input.
pub fn sized(s: ConvShape) -> Option<ConvShape> {
    Some(ConvShape {
        out_h: extent(
            s.height,
            s.padding[0],
            s.dilation[0],
            s.kernel_h,
            s.strides[0],
        )?,
        out_w: extent(
            s.width,
            s.padding[1],
            s.dilation[1],
            s.kernel_w,
            s.strides[1],
        )?,
        ..s
    })
}

/// The 3 × 3 depthwise shape at stride 2 with padding 1 (the kernel of
/// `ConvShape::uses_depthwise_3x3_s2`) of `batch` images of `channels` H × W planes, with
/// `multiplier` output channels per input channel.
pub fn halving(
    batch: usize,
    channels: usize,
    multiplier: usize,
    height: usize,
    width: usize,
) -> ConvShape {
    sized(ConvShape {
        batch,
        in_channels: channels,
        height,
        width,
        out_channels: channels * multiplier,
        groups: channels,
        kernel_h: 3,
        kernel_w: 3,
        out_h: 0,
        out_w: 0,
        strides: [2, 2],
        padding: [1, 1],
        dilation: [1, 1],
    })
    .expect("a 3 × 3 kernel fits any plane padded by 1")
}

/// A random depthwise 3 × 3 shape of a MobileNet block (stride 1 or 2; padding 1 half the time,
/// else 0 or 2) on planes of up to 24 × 48: many steps per plane. `size(low, high)` draws
/// uniformly in low..=high.
pub fn mobile_shape(mut size: impl FnMut(usize, usize) -> usize) -> ConvShape {
    let channels = size(1, 4);
    let stride = size(1, 2);
    let pad = [1, 1, 0, 2][size(0, 3)];
    let (height, width) = (size(8, 24), size(12, 48));
    sized(ConvShape {
        batch: 1,
        in_channels: channels,
        height,
        width,
        out_channels: channels,
        groups: channels,
        kernel_h: 3,
        kernel_w: 3,
        out_h: 0,
        out_w: 0,
        strides: [stride, stride],
        padding: [pad, pad],
        dilation: [1, 1],
    })
    .expect("a 3 × 3 kernel fits a padded plane of 8 × 12 or more")
}
