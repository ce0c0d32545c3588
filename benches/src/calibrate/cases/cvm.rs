//! Configurations of the CVM operators other than data movement: reductions, elementwise and
//! broadcast arithmetic, shifts and clips, conv2d, dense, pooling, upsampling and detection.

use super::*;

fn conv2d(name: &'static str, shape: ConvShape) -> Config {
    config("conv2d", name, move |rng, n| {
        let plan = shape.plan(n);
        let x = [1, plan.channels, plan.height, plan.width];
        let w = [
            plan.out_channels,
            plan.channels / plan.groups,
            shape.kernel,
            shape.kernel,
        ];
        let (k, s, d, p) = (
            i64::from(shape.kernel),
            i64::from(shape.stride),
            i64::from(shape.dilation),
            i64::from(plan.pad),
        );
        Graph::new()
            .input(&x, 8, rng.int8(elements(&x)))
            .param(&w, 8, rng.int8(elements(&w)))
            .param(
                &[plan.out_channels],
                8,
                rng.int8(u64::from(plan.out_channels)),
            )
            .attr("channels", int(i64::from(plan.out_channels)))
            .attr("kernel_size", ints(&[k, k]))
            .attr("strides", ints(&[s, s]))
            .attr("dilation", ints(&[d, d]))
            .attr("padding", ints(&[p, p]))
            .attr("groups", int(i64::from(plan.groups)))
            .node("conv2d")
    })
}

/// conv2d with a 3×3 kernel and padding 64 around a small input, so that the zero-padded copy
/// of the input would exceed twice the input and the kernel takes its checked gather:
/// `channels` input channels (`depthwise`: as many output channels, one group each), output
/// channels growing with `n`, and an output plane of at least 127 × 127.
fn conv2d_padded(name: &'static str, channels: u32, depthwise: bool) -> Config {
    const PAD: u32 = 64;
    config("conv2d", name, move |rng, n| {
        let out_channels = if depthwise {
            channels
        } else {
            (n / 16_384).clamp(1, 16) as u32
        };
        let side = (n / u64::from(out_channels))
            .isqrt()
            .max(2 * u64::from(PAD) - 1) as u32;
        let extent = side + 2 - 2 * PAD;
        let groups = if depthwise { channels } else { 1 };
        let x = [1, channels, extent, extent];
        let w = [out_channels, channels / groups, 3, 3];
        Graph::new()
            .input(&x, 8, rng.int8(elements(&x)))
            .param(&w, 8, rng.int8(elements(&w)))
            .param(&[out_channels], 8, rng.int8(u64::from(out_channels)))
            .attr("channels", int(i64::from(out_channels)))
            .attr("kernel_size", ints(&[3, 3]))
            .attr("padding", ints(&[i64::from(PAD), i64::from(PAD)]))
            .attr("groups", int(i64::from(groups)))
            .node("conv2d")
    })
}

/// dense with `rows` rows of X and K = `depth_ratio`·N; `n` counts the weight's elements.
fn dense(name: &'static str, rows: u32, depth_ratio: u64) -> Config {
    config("dense", name, move |rng, n| {
        let units = (n / depth_ratio).isqrt().max(1);
        let depth = units * depth_ratio;
        let x = [rows, depth as u32];
        let w = [units as u32, depth as u32];
        Graph::new()
            .input(&x, 8, rng.int8(elements(&x)))
            .param(&w, 8, rng.int8(elements(&w)))
            .param(&[units as u32], 8, rng.int8(units))
            .attr("units", int(units as i64))
            .node("dense")
    })
}

/// max_pool2d with a k×k window, stride s and padding p; `n` counts the elements visited.
fn max_pool(name: &'static str, kernel: u32, stride: u32, pad: u32) -> Config {
    config("max_pool2d", name, move |rng, n| {
        let window = u64::from(kernel * kernel);
        let outputs = (n / window).max(1);
        let channels = 16.min(outputs) as u32;
        let [oh, ow] = plane(outputs / u64::from(channels));
        // Padding at least the window needs enough outputs for a non-empty input.
        let min_out = if 2 * pad >= kernel {
            (2 * pad - kernel) / stride + 2
        } else {
            1
        };
        let (oh, ow) = (oh.max(min_out), ow.max(min_out));
        let extent = |out: u32| (out - 1) * stride + kernel - 2 * pad;
        let x = [1, channels, extent(oh), extent(ow)];
        let (k, s, p) = (i64::from(kernel), i64::from(stride), i64::from(pad));
        Graph::new()
            .input(&x, 8, rng.int8(elements(&x)))
            .attr("pool_size", ints(&[k, k]))
            .attr("strides", ints(&[s, s]))
            .attr("padding", ints(&[p, p]))
            .node("max_pool2d")
    })
}

/// CVM `sum` or `max` over the axes of `layout`.
fn cvm_reduce(op: &'static str, layout: &'static str, name: &'static str) -> Config {
    config(op, name, move |rng, n| {
        let x = reduce_input(layout, n);
        Graph::new()
            .input(&x, 8, rng.int8(elements(&x)))
            .attr("axis", ints(&reduce_axes(layout)))
            .node(op)
    })
}

/// Rows of non_max_suppression: (id, score, x1, y1, x2, y2), boxes of 10 to 100 pixels in a
/// 1000×1000 image, four classes.
fn detection_rows(rng: &mut Rng, rows: u64) -> Vec<i32> {
    let mut data = Vec::with_capacity(rows as usize * 6);
    for _ in 0..rows {
        let (x1, y1) = (rng.range(0, 900), rng.range(0, 900));
        let (w, h) = (rng.range(10, 100), rng.range(10, 100));
        data.extend(
            [rng.range(0, 3), rng.range(0, 1000), x1, y1, x1 + w, y1 + h].map(|v| v as i32),
        );
    }
    data
}

pub(super) fn cvm_configs() -> Vec<Config> {
    let mut configs = vec![
        cvm_reduce("sum", "last", "last axis"),
        cvm_reduce("sum", "first", "first axis"),
        cvm_reduce("sum", "all", "all axes"),
        cvm_reduce("sum", "spatial", "spatial"),
        cvm_reduce("max", "last", "last axis"),
        cvm_reduce("max", "all", "all axes"),
        cvm_reduce("max", "spatial", "spatial"),
    ];
    for op in [
        "broadcast_add",
        "broadcast_sub",
        "broadcast_mul",
        "broadcast_div",
        "broadcast_max",
        "broadcast_greater",
    ] {
        configs.push(binary(
            op,
            "same shape",
            Second::Same,
            8,
            (-127, 127),
            (-127, 127),
            &[],
        ));
        configs.push(binary(
            op,
            "row",
            Second::Row,
            8,
            (-127, 127),
            (-127, 127),
            &[],
        ));
    }
    let conv = |channels, out_channels, kernel, stride, dilation, depthwise| ConvShape {
        channels,
        out_channels,
        kernel,
        stride,
        dilation,
        depthwise,
        groups: 1,
    };
    configs.extend([
        conv2d("3x3 16->16", conv(16, 16, 3, 1, 1, false)),
        conv2d("3x3 64->64", conv(64, 64, 3, 1, 1, false)),
        conv2d("1x1 64->64", conv(64, 64, 1, 1, 1, false)),
        conv2d("depthwise 3x3 32", conv(32, 32, 3, 1, 1, true)),
        conv2d("depthwise 3x3 stride 2 32", conv(32, 32, 3, 2, 1, true)),
        conv2d("depthwise 5x5 32", conv(32, 32, 5, 1, 1, true)),
        conv2d("depthwise 3x3 stride 3 32", conv(32, 32, 3, 3, 1, true)),
        conv2d("3x3 16->1", conv(16, 1, 3, 1, 1, false)),
        conv2d("5x5 stride 2 3->16", conv(3, 16, 5, 2, 1, false)),
        conv2d("3x3 dilation 2 16->16", conv(16, 16, 3, 1, 2, false)),
        conv2d(
            "3x3 16->16 in 4 groups",
            ConvShape {
                groups: 4,
                ..conv(16, 16, 3, 1, 1, false)
            },
        ),
        conv2d_padded("3x3 pad 64 4->OC, checked gather", 4, false),
        conv2d_padded("depthwise 3x3 pad 64 16, checked gather", 16, true),
        dense("1 row", 1, 1),
        dense("2 rows", 2, 1),
        dense("16 rows", 16, 1),
        dense("1 row, K = 4N", 1, 4),
        int8_unary("relu", "", Vec::new()),
        max_pool("2x2 stride 2", 2, 2, 0),
        max_pool("3x3 stride 2 pad 1", 3, 2, 1),
        max_pool("3x3 stride 1 pad 1", 3, 1, 1),
        max_pool("5x5 stride 1 pad 2", 5, 1, 2),
        max_pool("41x41 stride 1 pad 40", 41, 1, 40),
        config(
            "max_pool2d",
            "41x41 stride 1 pad 40 over 24x24",
            |rng, n| {
                // 64 × 64 outputs per channel, each window over up to 24 × 24 input values.
                let channels = (n / (64 * 64 * 576)).clamp(1, 16) as u32;
                let x = [1, channels, 24, 24];
                Graph::new()
                    .input(&x, 8, rng.int8(elements(&x)))
                    .attr("pool_size", ints(&[41, 41]))
                    .attr("strides", ints(&[1, 1]))
                    .attr("padding", ints(&[40, 40]))
                    .node("max_pool2d")
            },
        ),
        config("upsampling", "scale 2", |rng, n| {
            let x = nchw(n / 4, 16);
            Graph::new()
                .input(&x, 8, rng.int8(elements(&x)))
                .attr("scale", int(2))
                .node("upsampling")
        }),
        int8_unary("abs", "", Vec::new()),
        int8_unary("cvm_precision", "", Vec::new()),
        binary(
            "elemwise_add",
            "",
            Second::Same,
            8,
            (-127, 127),
            (-127, 127),
            &[],
        ),
        binary(
            "elemwise_sub",
            "",
            Second::Same,
            8,
            (-127, 127),
            (-127, 127),
            &[],
        ),
        int8_unary("negative", "", Vec::new()),
        int8_unary("clip", "", vec![("a_min", int(-50)), ("a_max", int(50))]),
        int8_unary("cvm_clip", "", vec![("precision", int(6))]),
        int8_unary(
            "cvm_left_shift",
            "",
            vec![("precision", int(16)), ("shift_bit", int(4))],
        ),
        config("cvm_right_shift", "", |rng, n| {
            let shape = matrix(n);
            Graph::new()
                .input(&shape, 16, rng.values(n_of(&shape), -32767, 32767))
                .attr("precision", int(8))
                .attr("shift_bit", int(8))
                .node("cvm_right_shift")
        }),
    ]);
    configs.extend(transform_configs());
    configs.extend([
        config("get_valid_counts", "", |rng, n| {
            let rows = (n / 6).max(1);
            let mut data = detection_rows(rng, rows);
            for row in data.chunks_mut(6) {
                row[1] -= 500;
            }
            Graph::new()
                .input(&[1, rows as u32, 6], 16, data)
                .attr("score_threshold", int(0))
                .node("get_valid_counts")
        }),
        // n counts pairs of rows: N = √n rows.
        config("non_max_suppression", "", |rng, n| {
            let rows = n.isqrt().max(2);
            Graph::new()
                .input(&[1, rows as u32, 6], 16, detection_rows(rng, rows))
                .param(&[1], 16, vec![rows as i32])
                .attr("iou_threshold", int(50))
                .node("non_max_suppression")
        }),
    ]);
    configs
}
