//! Configurations of the CINN primitives: elementwise, `Conv`, reductions and
//! generate_proposals_v2.

use super::*;

/// The operands of a CINN `Conv` of `conv_type` with data `x`, weight `w` and output `y`:
/// forward reads x (input) and w (parameter), backward_data w and grad_y, backward_filter x and
/// grad_y; the backward types name the shape they produce.
fn conv_operands(rng: &mut Rng, conv_type: &str, x: [u32; 4], w: [u32; 4], y: [u32; 4]) -> Graph {
    match conv_type {
        "backward_data" => Graph::new()
            .param(&w, 8, rng.int8(elements(&w)))
            .input(&y, 8, rng.int8(elements(&y)))
            .attr("output_shape", ints(&x.map(i64::from))),
        "backward_filter" => Graph::new()
            .input(&x, 8, rng.int8(elements(&x)))
            .input(&y, 8, rng.int8(elements(&y)))
            .attr("output_shape", ints(&w.map(i64::from))),
        _ => Graph::new()
            .input(&x, 8, rng.int8(elements(&x)))
            .param(&w, 8, rng.int8(elements(&w))),
    }
}

/// CINN `Conv` of one type with a 1×41 kernel over an input one column wide, padded by 20 on
/// each side: 40 of the 41 columns of every window row fall in the padding, the loops' worst
/// case. `n` counts the products the loops visit, in bounds or not.
fn cinn_conv_wide_padding(name: &'static str, conv_type: &'static str) -> Config {
    config("Conv", name, move |rng, n| {
        let rows = (n / (4 * 4 * 41)).clamp(1, 1 << 16) as u32;
        let x = [1, 4, rows, 1];
        let w = [4, 4, 1, 41];
        let y = [1, 4, rows, 1];
        conv_operands(rng, conv_type, x, w, y)
            .attr("conv_type", text(conv_type))
            .attr("strides", ints(&[1, 1]))
            .attr("dilations", ints(&[1, 1]))
            .attr("paddings", ints(&[0, 20]))
            .attr("groups", int(1))
            .attr("frac_bits", int(8))
            .node("Conv")
    })
}

/// CINN `Conv` of one type; `n` counts the elements of y (forward) or grad_y (backward).
fn cinn_conv(name: &'static str, conv_type: &'static str, shape: ConvShape) -> Config {
    config("Conv", name, move |rng, n| {
        let plan = shape.plan(n);
        let x = [1, plan.channels, plan.height, plan.width];
        let y = [1, plan.out_channels, plan.out_height, plan.out_width];
        let w = [
            plan.out_channels,
            plan.channels / plan.groups,
            shape.kernel,
            shape.kernel,
        ];
        let graph = conv_operands(rng, conv_type, x, w, y);
        let (s, d, p) = (
            i64::from(shape.stride),
            i64::from(shape.dilation),
            i64::from(plan.pad),
        );
        graph
            .attr("conv_type", text(conv_type))
            .attr("strides", ints(&[s, s]))
            .attr("dilations", ints(&[d, d]))
            .attr("paddings", ints(&[p, p]))
            .attr("groups", int(i64::from(plan.groups)))
            .attr("frac_bits", int(8))
            .node("Conv")
    })
}

/// CINN `Reduce` of `kind` over the axes of `layout`.
fn cinn_reduce(name: &'static str, kind: &'static str, layout: &'static str) -> Config {
    config("Reduce", name, move |rng, n| {
        let x = reduce_input(layout, n);
        let count = elements(&x);
        let (precision, data, frac_bits) = if kind == "kProd" {
            // Factors within 2^-12 of 1 keep long products inside int32.
            (32, rng.values(count, ONE - 16, ONE + 16), 16)
        } else {
            (8, rng.int8(count), 0)
        };
        Graph::new()
            .input(&x, precision, data)
            .attr("kind", text(kind))
            .attr("dim", ints(&reduce_axes(layout)))
            .attr("frac_bits", int(frac_bits))
            .node("Reduce")
    })
}

/// generate_proposals_v2 on one image of about `n` anchors (4 per position on a 16-pixel
/// grid), scores and deltas random, Q16, keeping at most `pre_nms_top_n` candidates.
fn synthetic_proposals(rng: &mut Rng, n: u64, pre_nms_top_n: u64) -> Result<Built, String> {
    const ANCHORS: u32 = 4;
    const STRIDE: i64 = 16;
    let [h, w] = plane((n / u64::from(ANCHORS)).max(1));
    let anchors = u64::from(h * w * ANCHORS);
    let pre = anchors.min(pre_nms_top_n);
    let post = (pre / 2).clamp(1, 1000);
    let scores = rng.values(anchors, 0, ONE - 1);
    let deltas: Vec<i32> = (0..anchors)
        .flat_map(|_| {
            [
                rng.range(-ONE / 4, ONE / 4),
                rng.range(-ONE / 4, ONE / 4),
                rng.range(-ONE / 2, ONE / 2),
                rng.range(-ONE / 2, ONE / 2),
            ]
        })
        .map(|v| v as i32)
        .collect();
    let mut boxes = Vec::with_capacity(anchors as usize * 4);
    for row in 0..i64::from(h) {
        for col in 0..i64::from(w) {
            let (cx, cy) = (col * STRIDE + STRIDE / 2, row * STRIDE + STRIDE / 2);
            for size in [16, 32, 64, 128] {
                let half = size / 2;
                boxes
                    .extend([cx - half, cy - half, cx + half, cy + half].map(|v| (v * ONE) as i32));
            }
        }
    }
    let image = [i64::from(h) * STRIDE * ONE, i64::from(w) * STRIDE * ONE].map(|v| v as i32);
    Graph::new()
        .input(&[1, h, w, ANCHORS], 32, scores)
        .input(&[1, h, w, 4 * ANCHORS], 32, deltas)
        .input(&[1, 2], 32, image.to_vec())
        .input(&[h, w, ANCHORS, 4], 32, boxes)
        .input(
            &[h, w, ANCHORS, 4],
            32,
            vec![ONE as i32; anchors as usize * 4],
        )
        .attr("frac_bits", int(16))
        .attr("pre_nms_top_n", int(pre as i64))
        .attr("post_nms_top_n", int(post as i64))
        .attr("nms_thresh", int(ONE / 2))
        .attr("min_size", int(0))
        .attr("eta", int(ONE))
        .attr("pixel_offset", flag(false))
        .node("generate_proposals_v2")
}

/// The realistic proposals case of `fixtures/models/proposals` (N = 2, H = 54, W = 40, A = 15,
/// pre 2000, post 1000), read from its files.
fn fixture_proposals() -> Result<Built, String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/models/proposals");
    let loaded = cvm_cli::load_model_file(&dir.join("model.json")).map_err(|e| e.to_string())?;
    let model = loaded
        .model
        .ok_or_else(|| format!("{} does not decode", dir.display()))?;
    let inputs = ["scores", "bbox_deltas", "im_shape", "anchors", "variances"]
        .iter()
        .map(|name| {
            cvm_cli::inputs::read_input(&dir.join(format!("{name}.npy"))).map_err(|e| e.to_string())
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(Built { model, inputs })
}

/// The CINN unary primitives: ranges in Q16 inside each function's domain, where it computes
/// rather than saturates, and whether it
/// takes `frac_bits`.
const CINN_UNARY: &[(&str, i64, i64, bool)] = &[
    ("Abs", -1000 * ONE, 1000 * ONE, true),
    ("Acos", -ONE, ONE, true),
    ("Acosh", ONE, 1000 * ONE, true),
    ("Asin", -ONE, ONE, true),
    ("Asinh", -1000 * ONE, 1000 * ONE, true),
    ("Atan", -100 * ONE, 100 * ONE, true),
    ("Atanh", -ONE + 1, ONE - 1, true),
    ("BitwiseNot", -1000 * ONE, 1000 * ONE, false),
    ("Ceil", -1000 * ONE, 1000 * ONE, true),
    ("Cos", -10 * ONE, 10 * ONE, true),
    ("Cosh", -10 * ONE, 10 * ONE, true),
    ("Erf", -9 * ONE / 2, 9 * ONE / 2, true),
    ("Exp", -10 * ONE, 10 * ONE, true),
    ("Floor", -1000 * ONE, 1000 * ONE, true),
    ("Identity", -1000 * ONE, 1000 * ONE, true),
    ("IsFinite", -1000 * ONE, 1000 * ONE, true),
    ("IsInf", -1000 * ONE, 1000 * ONE, true),
    ("IsNan", -1000 * ONE, 1000 * ONE, true),
    ("Log", 1, 1000 * ONE, true),
    ("Log10", 1, 1000 * ONE, true),
    ("Log2", 1, 1000 * ONE, true),
    ("LogicalNot", -1000 * ONE, 1000 * ONE, false),
    ("Negative", -1000 * ONE, 1000 * ONE, true),
    ("Round", -1000 * ONE, 1000 * ONE, true),
    ("Rsqrt", 1, 1000 * ONE, true),
    ("Sign", -1000 * ONE, 1000 * ONE, true),
    ("Sin", -10 * ONE, 10 * ONE, true),
    ("Sinh", -10 * ONE, 10 * ONE, true),
    ("Sqrt", 0, 1000 * ONE, true),
    // Away from the poles at odd multiples of π/2, where the result leaves int32.
    ("Tan", -3 * ONE / 2, 3 * ONE / 2, true),
    ("Tanh", -10 * ONE, 10 * ONE, true),
    ("Trunc", -1000 * ONE, 1000 * ONE, true),
];

const Q16: &[(&str, i64)] = &[("frac_bits", 16)];

const WIDE: (i64, i64) = (-1000 * ONE, 1000 * ONE);

/// The CINN binary primitives (without `Dot`): operand ranges in Q16 where results fit int32
/// and divisors are not zero, and attributes.
fn cinn_binary() -> Vec<Config> {
    let hundred = (-100 * ONE, 100 * ONE);
    let divisor = (ONE, 100 * ONE);
    let mut configs = vec![
        binary("Add", "", Second::Same, 32, WIDE, WIDE, Q16),
        binary("Add", "row", Second::Row, 32, WIDE, WIDE, Q16),
        binary("BitwiseAnd", "", Second::Same, 32, WIDE, WIDE, &[]),
        binary("BitwiseOr", "", Second::Same, 32, WIDE, WIDE, &[]),
        binary("BitwiseXor", "", Second::Same, 32, WIDE, WIDE, &[]),
    ];
    for op in ["Div", "FloorDiv", "FloorMod"] {
        configs.push(signed_divisor(op, hundred, divisor));
    }
    configs.extend([
        config("LeftShift", "", |rng, n| {
            let shape = matrix(n);
            Graph::new()
                .input(&shape, 32, rng.values(n_of(&shape), WIDE.0, WIDE.1))
                .attr("shift", int(3))
                .node("LeftShift")
        }),
        binary("LogicalAnd", "", Second::Same, 32, WIDE, WIDE, &[]),
        binary("LogicalOr", "", Second::Same, 32, WIDE, WIDE, &[]),
        binary("LogicalXor", "", Second::Same, 32, WIDE, WIDE, &[]),
        binary("Max", "", Second::Same, 32, WIDE, WIDE, Q16),
        binary("Min", "", Second::Same, 32, WIDE, WIDE, Q16),
        signed_divisor("Mod", hundred, divisor),
        binary("Mul", "", Second::Same, 32, hundred, hundred, Q16),
        // x^x over (0, 4]: the general path exp(y·ln x) that Power's weight pays for.
        config("Power", "x^x", |rng, n| {
            let shape = matrix(n);
            Graph::new()
                .input(&shape, 32, rng.values(n_of(&shape), 1, 4 * ONE))
                .again()
                .attr("frac_bits", int(16))
                .node("Power")
        }),
        config("RightShift", "", |rng, n| {
            let shape = matrix(n);
            Graph::new()
                .input(&shape, 32, rng.values(n_of(&shape), WIDE.0, WIDE.1))
                .attr("shift", int(3))
                .node("RightShift")
        }),
        binary("Sub", "", Second::Same, 32, WIDE, WIDE, Q16),
    ]);
    configs
}

/// A division-like primitive: dividends in `x`, divisors of magnitude in `y`, either sign.
fn signed_divisor(op: &'static str, x: (i64, i64), y: (i64, i64)) -> Config {
    config(op, "", move |rng, n| {
        let shape = matrix(n);
        let count = n_of(&shape);
        let dividends = rng.values(count, x.0, x.1);
        let divisors = signed_magnitudes(rng, count, y.0, y.1);
        Graph::new()
            .input(&shape, 32, dividends)
            .input(&shape, 32, divisors)
            .attr("frac_bits", int(16))
            .node(op)
    })
}

pub(super) fn cinn_configs() -> Vec<Config> {
    let mut configs: Vec<Config> = CINN_UNARY
        .iter()
        .map(|&(op, low, high, fixed)| unary(op, 32, (low, high), if fixed { Q16 } else { &[] }))
        .collect();
    configs.extend(cinn_binary());
    let conv = |channels, out_channels, kernel, depthwise| ConvShape {
        channels,
        out_channels,
        kernel,
        stride: 1,
        dilation: 1,
        depthwise,
        groups: 1,
    };
    configs.extend([
        config("Dot", "(M, 64)·(64, 64)", |rng, n| {
            let rows = (n / 64).max(1) as u32;
            Graph::new()
                .input(&[rows, 64], 8, rng.int8(u64::from(rows) * 64))
                .param(&[64, 64], 8, rng.int8(4096))
                .node("Dot")
        }),
        config("Dot", "vectors", |rng, n| {
            Graph::new()
                .input(&[n as u32], 8, rng.int8(n))
                .param(&[n as u32], 8, rng.int8(n))
                .node("Dot")
        }),
        Config {
            op: "ConstScalar",
            name: "",
            fixed_class: Some(TINY.name),
            build: Box::new(|_, _| {
                Graph::new()
                    .attr("value", int(3 * ONE / 2))
                    .attr("frac_bits", int(16))
                    .node("ConstScalar")
            }),
        },
        config("BnGradBiasScale", "NCHW, 16 channels", |rng, n| {
            let x = nchw(n, 16);
            let count = elements(&x);
            Graph::new()
                .input(&x, 8, rng.int8(count))
                .input(&x, 8, rng.int8(count))
                .param(&[x[1]], 8, rng.int8(u64::from(x[1])))
                .attr("frac_bits", int(8))
                .node("BnGradBiasScale")
        }),
        config("BnMeanVariance", "NCHW, 16 channels", |rng, n| {
            let x = nchw(n, 16);
            Graph::new()
                .input(&x, 8, rng.int8(elements(&x)))
                .attr("frac_bits", int(8))
                .node("BnMeanVariance")
        }),
        config("BroadcastTo", "row to matrix", |rng, n| {
            let [rows, cols] = matrix(n);
            Graph::new()
                .input(&[cols], 8, rng.int8(u64::from(cols)))
                .attr("out_shape", ints(&[i64::from(rows), i64::from(cols)]))
                .attr("broadcast_axes", ints(&[1]))
                .node("BroadcastTo")
        }),
        config("Compare", "kLt", |rng, n| {
            let shape = matrix(n);
            let count = n_of(&shape);
            Graph::new()
                .input(&shape, 8, rng.int8(count))
                .input(&shape, 8, rng.int8(count))
                .attr("kind", text("kLt"))
                .node("Compare")
        }),
        config("Compare", "kLt, a row broadcast", |rng, n| {
            let shape = matrix(n);
            let row = [shape[1]];
            Graph::new()
                .input(&shape, 8, rng.int8(n_of(&shape)))
                .input(&row, 8, rng.int8(n_of(&row)))
                .attr("kind", text("kLt"))
                .node("Compare")
        }),
        concat_pair("Concat", "2 inputs, axis 0", 0),
        cinn_conv("forward 3x3 16->16", "forward", conv(16, 16, 3, false)),
        cinn_conv_wide_padding("forward 1x41 over one padded column", "forward"),
        cinn_conv_wide_padding(
            "backward_filter 1x41 over one padded column",
            "backward_filter",
        ),
        cinn_conv("forward 1x1 64->64", "forward", conv(64, 64, 1, false)),
        cinn_conv("forward depthwise 3x3 32", "forward", conv(32, 32, 3, true)),
        cinn_conv(
            "backward_data 3x3 16->16",
            "backward_data",
            conv(16, 16, 3, false),
        ),
        cinn_conv(
            "backward_filter 3x3 16->16",
            "backward_filter",
            conv(16, 16, 3, false),
        ),
        cinn_reduce("kSum last axis", "kSum", "last"),
        cinn_reduce("kSum all axes", "kSum", "all"),
        cinn_reduce("kProd last axis", "kProd", "last"),
        cinn_reduce("kMax first axis", "kMax", "first"),
        cinn_reduce("kMin all axes", "kMin", "all"),
        int8_unary("Reshape", "", vec![("shape", ints(&[-1]))]),
        int8_unary("Reverse", "axis 1", vec![("axis", ints(&[1]))]),
        config("Select", "", |rng, n| {
            let shape = matrix(n);
            let count = n_of(&shape);
            Graph::new()
                .input(&shape, 8, rng.values(count, -1, 1))
                .input(&shape, 8, rng.int8(count))
                .input(&shape, 8, rng.int8(count))
                .node("Select")
        }),
        config("Slice", "half the columns", |rng, n| {
            let [rows, cols] = matrix(n);
            let x = [rows, 2 * cols];
            Graph::new()
                .input(&x, 8, rng.int8(elements(&x)))
                .attr("axes", ints(&[1]))
                .attr("starts", ints(&[0]))
                .attr("ends", ints(&[i64::from(cols)]))
                .node("Slice")
        }),
        int8_unary("Transpose", "2-D", vec![("axis", ints(&[1, 0]))]),
        config("generate_proposals_v2", "synthetic, 1 image", |rng, n| {
            synthetic_proposals(rng, n, 2000)
        }),
        config(
            "generate_proposals_v2",
            "synthetic, 1 image, pre_nms_top_n 8",
            |rng, n| synthetic_proposals(rng, n, 8),
        ),
        Config {
            op: "generate_proposals_v2",
            name: "fixtures/models/proposals",
            fixed_class: Some("realistic"),
            build: Box::new(|_, _| fixture_proposals()),
        },
    ]);
    configs
}
