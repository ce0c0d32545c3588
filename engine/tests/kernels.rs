//! Bit-exactness of the vector kernels (`cvm_engine::kernels`) against plain implementations of
//! their formulas, under the native backend (SSE2 on x86-64) and the portable one, on random
//! shapes chosen to hit every tile, tail and fallback path. The wasm SIMD128 backend runs the
//! same kernel code; `host/cli/tests/differential.rs` compares it with the native build (random graphs
//! over every operator, natively and in wasm).

#![allow(clippy::unwrap_used)] // a failed conversion is a failed test

mod common;

use common::Rng;
use common::conv::{halving, mobile_shape, plain_conv2d, plus_bias, sized};
use cvm_engine::kernels::conv::{self, BLOCK, Columns};
use cvm_engine::kernels::gemm;
use cvm_engine::kernels::pool::{self, PoolShape};
use cvm_engine::kernels::simd::{Native, Portable, Simd};
use cvm_engine::kernels::{self, ConvShape, PackedRows};

impl Rng {
    /// A value within 8-bit precision, with the extremes often.
    fn int8(&mut self) -> i32 {
        match self.below(8) {
            0 => 127,
            1 => -127,
            _ => self.range(-127, 127) as i32,
        }
    }

    fn int8s(&mut self, n: usize) -> Vec<i32> {
        (0..n).map(|_| self.int8()).collect()
    }

    fn i16(&mut self) -> i16 {
        match self.below(6) {
            0 => i16::MIN,
            1 => i16::MAX,
            _ => self.next() as i16,
        }
    }

    fn i32(&mut self) -> i32 {
        match self.below(6) {
            0 => i32::MIN,
            1 => i32::MAX,
            _ => self.next() as i32,
        }
    }
}

/// A random valid convolution; `kind` 0 = general, 1 = depthwise, 2 = grouped, 3 = pointwise
/// (1×1, stride 1, no padding: the pointwise kernel) over 2 to 40 channels per group.
fn random_shape(rng: &mut Rng, kind: u64) -> ConvShape {
    let pointwise = kind == 3;
    loop {
        let groups = match kind {
            0 => 1,
            3 => rng.size(1, 2),
            _ => rng.size(1, 6),
        };
        // Up to 20 channels per group: several runs of eight in the channels-last copy.
        let group_in = match kind {
            1 => 1,
            3 => rng.size(2, 40),
            _ if rng.chance(25) => rng.size(10, 20),
            _ => rng.size(1, 9),
        };
        let group_out = rng.size(1, if pointwise { 9 } else { 7 });
        let (kernel_h, kernel_w) = if pointwise {
            (1, 1)
        } else {
            (rng.size(1, 5), rng.size(1, 5))
        };
        // Depthwise shapes also come with long rows (up to 90 columns).
        let widest = if kind == 1 && rng.chance(50) { 90 } else { 27 };
        let (height, width) = (rng.size(1, 19), rng.size(1, widest));
        let strides = if pointwise {
            [1, 1]
        } else {
            [rng.size(1, 3), rng.size(1, 3)]
        };
        // Depthwise shapes take DW = 1 more often: the direct plane of stride 2 needs it.
        let dilation = [
            rng.size(1, 2),
            if kind == 1 && rng.chance(50) {
                1
            } else {
                rng.size(1, 3)
            },
        ];
        let padding = if pointwise {
            [0, 0]
        } else if rng.chance(10) {
            // Large enough padding sends depthwise shapes to the im2col kernel.
            [rng.size(0, 40), rng.size(20, 60)]
        } else {
            [rng.size(0, 3), rng.size(0, 3)]
        };
        let Some(mut shape) = sized(ConvShape {
            batch: 1,
            in_channels: groups * group_in,
            height,
            width,
            out_channels: groups * group_out,
            groups,
            kernel_h,
            kernel_w,
            out_h: 0,
            out_w: 0,
            strides,
            padding,
            dilation,
        }) else {
            continue;
        };
        shape.batch = rng.size(1, 2);
        return shape;
    }
}

/// A random 3 × 3 depthwise shape at stride 2 with padding 1 (the kernel of
/// `ConvShape::uses_depthwise_3x3_s2`), from a single row or column up to 19 × 40, with up to
/// three output channels per input channel; one in four as wide as 65 to 90 (more than eight
/// steps of four outputs per row: the kernel's path for any number of steps), and more of them
/// only 1 to 6 wide (output rows shorter than a step) than a uniform draw gives.
fn halving_shape(rng: &mut Rng) -> ConvShape {
    let (channels, multiplier) = (rng.size(1, 3), rng.size(1, 3));
    let width = if rng.chance(25) {
        rng.size(65, 90)
    } else if rng.chance(35) {
        rng.size(1, 6)
    } else {
        rng.size(1, 40)
    };
    let mut shape = halving(1, channels, multiplier, rng.size(1, 19), width);
    shape.batch = rng.size(1, 2);
    shape
}

fn run_conv<S: Simd>(
    s: &ConvShape,
    data: &[i32],
    weights: &[i32],
    prepared: bool,
    bias: Option<&[i32]>,
) -> Vec<i32> {
    let packed = conv::pack_weights(s, weights);
    let mut out = vec![i32::MIN; s.batch * s.out_channels * s.out_h * s.out_w];
    let fits = conv::conv2d::<S>(
        s,
        data,
        weights,
        prepared.then_some(&packed),
        bias,
        &mut out,
    );
    assert!(fits, "{s:?}: a bias that fits reported an overflow");
    out
}

#[test]
fn conv2d_reports_a_bias_that_overflows() {
    // Depthwise at strides 1 and 2 (bias added after the sums, with checks), and grouped and
    // dense convolutions (bias added per plane): positive sums plus i32::MAX overflow; plus
    // i32::MIN they fit.
    let shape = |groups: usize, stride: usize, width: usize| {
        let out = (width + 2 - 3) / stride + 1;
        ConvShape {
            batch: 1,
            in_channels: 4,
            height: 5,
            width,
            out_channels: 4,
            groups,
            kernel_h: 3,
            kernel_w: 3,
            out_h: (5 + 2 - 3) / stride + 1,
            out_w: out,
            strides: [stride, stride],
            padding: [1, 1],
            dilation: [1, 1],
        }
    };
    for s in [
        shape(4, 1, 3),
        shape(4, 1, 11),
        shape(4, 2, 10),
        shape(2, 1, 9),
        shape(1, 2, 7),
    ] {
        let data = vec![127; s.in_channels * s.height * s.width];
        let weights = vec![127; s.out_channels * s.depth()];
        let mut out = vec![0; s.out_channels * s.out_h * s.out_w];
        let bias = vec![i32::MAX; s.out_channels];
        for native in [true, false] {
            let fits = if native {
                conv::conv2d::<Native>(&s, &data, &weights, None, Some(&bias), &mut out)
            } else {
                conv::conv2d::<Portable>(&s, &data, &weights, None, Some(&bias), &mut out)
            };
            assert!(!fits, "{s:?}, native {native}");
        }
        let low = vec![i32::MIN; s.out_channels];
        assert!(conv::conv2d::<Native>(
            &s,
            &data,
            &weights,
            None,
            Some(&low),
            &mut out
        ));
        assert!(out.iter().all(|&value| value < 0), "{s:?}");
    }
}

#[test]
fn conv2d_kernels_equal_the_formula() {
    let mut rng = Rng(0x5EED_C0DE);
    let (mut depthwise, mut fallback, mut blocks_with_tail) = (0, 0, 0);
    let (mut depthwise_blocks, mut depthwise_passes, mut depthwise_odd) = (0, 0, 0);
    let (mut channels_last, mut checked_gather) = (0, 0);
    // Depthwise cases whose bias is added with checks after the sums.
    let mut depthwise_extreme = 0;
    // Depthwise rows of whole steps (stored straight into the output), and short rows (copied
    // out of a flat run).
    let mut depthwise_rows = [0; 2];
    // Pointwise cases: all, odd channels per group, a partial block of pixels, a remainder
    // of output channels.
    let mut pointwise = [0; 4];
    // Depthwise plane layouts: split, direct, pairs, and row phases (SH > 1).
    let mut layouts = [0; 4];
    // Depthwise planes of one pass stored in runs of sixteen whole steps, with a tail, for the
    // split columns of stride 1 and for the others; and kernels of exactly one full pass (six
    // entries: 3 × 3 at stride 2) on rows of whole steps, over several planes (all of them in
    // whole runs but the last).
    let mut depthwise_runs = 0;
    let mut split_runs = 0;
    let mut depthwise_one_pass = 0;
    // The 3 × 3 stride-2 kernel: all cases, odd widths (the right padding inside the last
    // step), an odd number of output rows (one pair of rows with a spare), rows that end within
    // a step, several output channels per input channel, rows of more than eight steps, and
    // output rows of one to three values (whose last step stores past the end of the rows after
    // them, so that the last plane's last rows take the careful path), pairs of rows whose
    // last steps are joined into one (two outputs in the last step), of even and odd widths
    // (the right padding inside both halves of the joined step), and pairs of rows whose upper
    // row's last step stores onto the lower row's first (one or three outputs in the last
    // step), of one step and more.
    let mut halving = [0; 11];
    for case in 0..850 {
        let shape = match case {
            0..600 => random_shape(&mut rng, case % 3),
            600..700 => random_shape(&mut rng, 3),
            700..800 => mobile_shape(|low, high| rng.size(low, high)),
            _ => halving_shape(&mut rng),
        };
        let data = rng.int8s(shape.batch * shape.in_channels * shape.height * shape.width);
        let weights = rng.int8s(shape.out_channels * shape.depth());
        // Half the cases with a bias of up to 20 bits; one in five of those with a bias so close
        // to i32::MIN that only the exact sums keep every output in range (the depthwise kernel
        // then adds it with checks after the sums).
        let depth = shape.depth() as i32;
        let extreme = rng.chance(20);
        let bias = rng.chance(50).then(|| {
            (0..shape.out_channels)
                .map(|_| {
                    if extreme {
                        i32::MIN + depth * 128 * 127
                    } else {
                        rng.int8s(1)[0] << 12
                    }
                })
                .collect::<Vec<i32>>()
        });
        let sums = plain_conv2d(&shape, &data, &weights);
        let expected = match &bias {
            Some(bias) => plus_bias(&shape, sums, bias),
            None => sums,
        };
        let prepared = rng.chance(50);
        assert_eq!(
            run_conv::<Native>(&shape, &data, &weights, prepared, bias.as_deref()),
            expected,
            "native, {shape:?}"
        );
        assert_eq!(
            run_conv::<Portable>(&shape, &data, &weights, prepared, bias.as_deref()),
            expected,
            "portable, {shape:?}"
        );
        if shape.uses_pointwise() {
            pointwise[0] += 1;
            pointwise[1] += usize::from(shape.group_in() % 2 == 1);
            pointwise[2] += usize::from(!(shape.height * shape.width).is_multiple_of(8));
            pointwise[3] += usize::from(!shape.group_out().is_multiple_of(4));
        } else if shape.uses_channels_last() {
            channels_last += 1;
        } else if !shape.uses_depthwise() {
            checked_gather += 1;
        }
        if shape.uses_depthwise_3x3_s2() {
            halving[0] += 1;
            halving[1] += usize::from(shape.width % 2 == 1);
            halving[2] += usize::from(shape.out_h % 2 == 1);
            halving[3] += usize::from(shape.out_w % 4 != 0);
            halving[4] += usize::from(shape.group_out() > 1);
            halving[5] += usize::from(shape.out_w > 32);
            halving[6] += usize::from(shape.out_w < 4);
            let joined = shape.out_w % 4 == 2 && shape.out_h >= 2;
            halving[7] += usize::from(joined && shape.width % 2 == 0);
            halving[8] += usize::from(joined && shape.width % 2 == 1);
            let spilling = shape.out_w % 2 == 1 && shape.out_h >= 2;
            halving[9] += usize::from(spilling && shape.out_w < 4);
            halving[10] += usize::from(spilling && shape.out_w > 4);
        }
        if shape.uses_depthwise() {
            depthwise += 1;
            depthwise_extreme += usize::from(extreme && bias.is_some());
            depthwise_rows[usize::from(!shape.tap_plane().row.is_multiple_of(8))] += 1;
            match shape.tap_plane().columns {
                Columns::Split => layouts[0] += 1,
                Columns::Direct => layouts[1] += 1,
                Columns::Pairs => layouts[2] += 1,
            }
            layouts[3] += usize::from(shape.strides[0] > 1);
            let plane = shape.tap_plane();
            depthwise_runs += usize::from(
                plane.columns != Columns::Split
                    && shape.tap_entries() <= 6
                    && plane.row.is_multiple_of(8)
                    && plane.steps > 16
                    && !plane.steps.is_multiple_of(16),
            );
            split_runs += usize::from(
                plane.columns == Columns::Split
                    && shape.tap_entries() <= 6
                    && plane.row.is_multiple_of(8)
                    && plane.steps > 16
                    && !plane.steps.is_multiple_of(16),
            );
            depthwise_one_pass += usize::from(
                plane.columns != Columns::Split
                    && shape.tap_entries() == 6
                    && plane.row.is_multiple_of(8)
                    && shape.batch * shape.out_channels > 1,
            );
            if shape.out_w >= 32 {
                depthwise_blocks += 1;
            }
            let taps = shape.kernel_h * shape.kernel_w;
            assert_eq!(
                conv::depthwise_pairing(&shape).len() as u64,
                shape.tap_entries(),
                "{shape:?}"
            );
            if taps > 12 {
                depthwise_passes += 1; // more than six entries of two taps: several passes
            }
            if shape.kernel_w % 2 == 1 {
                depthwise_odd += 1; // a tap without a neighbour in every kernel row
            }
        } else if shape.group_in() == 1 {
            fallback += 1;
        }
        if !(shape.out_h * shape.out_w).is_multiple_of(BLOCK) && shape.out_h * shape.out_w > BLOCK {
            blocks_with_tail += 1;
        }
    }
    // Every path ran many times.
    assert!(depthwise >= 150, "{depthwise} depthwise cases");
    assert!(
        halving[0] >= 30 && halving[1..].iter().all(|&n| n >= 5),
        "3 × 3 stride-2 cases (all, odd width, odd output rows, partial steps, multiplier, \
         more than eight steps, rows under four outputs, joined last steps of even and odd \
         widths, last steps stored onto the next row of one step and more): {halving:?}"
    );
    assert!(
        depthwise_rows.iter().all(|&n| n >= 30),
        "{depthwise_rows:?} depthwise cases with rows of whole steps and short rows"
    );
    assert!(
        depthwise_extreme >= 10,
        "{depthwise_extreme} depthwise cases with a bias added after the sums"
    );
    assert!(
        depthwise_blocks >= 30,
        "{depthwise_blocks} depthwise cases with rows of 32 outputs or more"
    );
    assert!(
        depthwise_passes >= 20,
        "{depthwise_passes} depthwise cases of several passes"
    );
    assert!(
        depthwise_runs >= 10,
        "{depthwise_runs} depthwise cases in runs of sixteen steps and a tail"
    );
    assert!(
        split_runs >= 10,
        "{split_runs} depthwise cases of split columns in runs of sixteen steps and a tail"
    );
    assert!(
        depthwise_one_pass >= 10,
        "{depthwise_one_pass} depthwise cases of one full pass over several planes"
    );
    assert!(
        depthwise_odd >= 30,
        "{depthwise_odd} depthwise cases with an odd kernel width"
    );
    assert!(
        fallback >= 5,
        "{fallback} depthwise shapes on the im2col kernel"
    );
    assert!(
        blocks_with_tail >= 100,
        "{blocks_with_tail} cases with a partial block"
    );
    assert!(
        channels_last >= 200,
        "{channels_last} channels-last gathers"
    );
    assert!(checked_gather >= 20, "{checked_gather} checked gathers");
    assert!(
        pointwise[0] >= 100 && pointwise[1..].iter().all(|&n| n >= 20),
        "pointwise cases: {pointwise:?}"
    );
    assert!(
        layouts.iter().all(|&n| n >= 30),
        "depthwise layouts (split, direct, pairs, row phases): {layouts:?}"
    );
}

#[test]
fn conv2d_kernels_reach_the_precision_bound() {
    // All data and weights at ±127 with the longest reduction 8-bit operands allow within 32
    // bits: the sums reach K·127² and must not wrap.
    let k_max = (1usize << (32 - 8 - 8)) - 1; // bits(K) ≤ 16
    for &(value, weight) in &[(127, 127), (-127, 127), (127, -127)] {
        let shape = ConvShape {
            batch: 1,
            in_channels: k_max / 9,
            height: 3,
            width: 3,
            out_channels: 5,
            groups: 1,
            kernel_h: 3,
            kernel_w: 3,
            out_h: 1,
            out_w: 1,
            strides: [1, 1],
            padding: [0, 0],
            dilation: [1, 1],
        };
        let data = vec![value; shape.in_channels * 9];
        let weights = vec![weight; shape.out_channels * shape.depth()];
        let expected = plain_conv2d(&shape, &data, &weights);
        assert_eq!(
            expected[0].unsigned_abs(),
            (shape.depth() * 127 * 127) as u32
        );
        assert_eq!(
            run_conv::<Native>(&shape, &data, &weights, true, None),
            expected
        );
        assert_eq!(
            run_conv::<Portable>(&shape, &data, &weights, false, None),
            expected
        );
    }
}

#[test]
fn dot_products_equal_the_formula() {
    let mut rng = Rng(0x05EE_DD07);
    for _ in 0..400 {
        let (m, n, depth) = (rng.size(0, 13), rng.size(0, 14), rng.size(0, 70));
        let a = rng.int8s(m * depth);
        let b = rng.int8s(n * depth);
        let (pa, pb) = (
            PackedRows::pack(&a, m, depth),
            PackedRows::pack(&b, n, depth),
        );
        assert_eq!(pa.stride(), depth.div_ceil(16) * 16);
        let mut expected = vec![0i32; m * n];
        for i in 0..m {
            for j in 0..n {
                let sum: i64 = (0..depth)
                    .map(|k| i64::from(a[i * depth + k]) * i64::from(b[j * depth + k]))
                    .sum();
                expected[i * n + j] = i32::try_from(sum).unwrap();
            }
        }
        // Row-major or column-major, with gaps between rows or columns, or neither step 1.
        let gap = rng.size(0, 2);
        let (row_step, column_step) = match rng.below(3) {
            0 => (n + gap, 1),
            1 => (1, m + gap),
            _ => (2, 2 * m + 1),
        };
        let len = (m * row_step + n * column_step + 3).max(1);
        for native in [true, false] {
            let mut out = vec![i32::MIN; len];
            let target = gemm::Strided {
                data: &mut out,
                row_step,
                column_step,
            };
            if native {
                gemm::dot_products::<Native>(pa.values(), m, pb.values(), n, pa.stride(), target);
            } else {
                gemm::dot_products::<Portable>(pa.values(), m, pb.values(), n, pa.stride(), target);
            }
            let mut written = vec![i32::MIN; len];
            for i in 0..m {
                for j in 0..n {
                    written[i * row_step + j * column_step] = expected[i * n + j];
                }
            }
            assert_eq!(
                out, written,
                "{m}×{n}, K = {depth}, steps ({row_step}, {column_step}), native {native}"
            );
        }
    }
}

/// Runs every backend operation on the same lanes under `S` and returns the results as
/// plain arrays.
fn lane_results<S: Simd>(a16: [i16; 8], b16: [i16; 8], a32: [i32; 4], b32: [i32; 4]) -> Vec<i32> {
    let unpack = |v: S::I32x4| {
        let mut lanes = [0i32; 4];
        S::store32(&mut lanes, v);
        lanes
    };
    let (x16, y16) = (S::load16(&a16), S::load16(&b16));
    let (x32, y32) = (S::load32(&a32), S::load32(&b32));
    let (lo, hi) = S::interleave16(x16, y16);
    let mut results = Vec::new();
    results.extend(unpack(S::add32(x32, y32)));
    results.extend(unpack(S::max32(x32, y32)));
    let (sum, flags) = S::add_overflow32(x32, y32);
    results.extend(unpack(sum));
    results.extend(unpack(flags));
    results.extend(unpack(S::or32(x32, y32)));
    results.extend(unpack(S::shift_in32(x32, y32)));
    results.extend(unpack(S::join_in32(x32, y32, S::add32(x32, y32))));
    let mut pairs = [[0i32; 2]; 2];
    S::store_pair32::<0>(&mut pairs[0], y32);
    S::store_pair32::<1>(&mut pairs[1], y32);
    results.extend(pairs.as_flattened());
    let mut lanes = [0i32; 4];
    S::store_lane32::<0>(&mut lanes[3], x32);
    S::store_lane32::<1>(&mut lanes[2], x32);
    S::store_lane32::<2>(&mut lanes[1], x32);
    S::store_lane32::<3>(&mut lanes[0], x32);
    results.extend(lanes);
    let mut masked = [0i16; 8];
    S::store16(&mut masked, S::and16(x16, y16));
    results.extend(masked.map(i32::from));
    let (low32, high32) = S::interleave32(x32, y32);
    results.extend(unpack(low32));
    results.extend(unpack(high32));
    // Narrowing of values that saturate, that fit, and half of each.
    for (a, b) in [(a32, b32), (a32.map(|v| v >> 16), b32.map(|v| v >> 15))] {
        let mut narrowed = [0i16; 8];
        S::store16(&mut narrowed, S::narrow32(S::load32(&a), S::load32(&b)));
        results.extend(narrowed.map(i32::from));
    }
    results.extend(unpack(S::dot_add(x32, x16, y16)));
    results.extend(unpack(S::dot_add(x32, lo, S::pair16(1, 3))));
    results.extend(unpack(S::dot_add(y32, hi, S::pair16(a16[1], b16[2]))));
    results.extend(unpack(S::dot_add(
        S::splat32(0),
        S::pair16(a16[3], b16[4]),
        y16,
    )));
    for spread in [
        S::pair_lane::<0>(x16),
        S::pair_lane::<1>(x16),
        S::pair_lane::<2>(y16),
        S::pair_lane::<3>(y16),
    ] {
        let mut lanes = [0i16; 8];
        S::store16(&mut lanes, spread);
        results.extend(lanes.map(i32::from));
    }
    results.extend(unpack(S::splat32(a32[0])));
    results.extend(unpack(S::dot_add(S::splat32(0), S::splat16(a16[0]), y16)));
    results.push(S::sum32(x32));
    results.extend(unpack(S::sums4(
        x32,
        y32,
        S::add32(x32, y32),
        S::splat32(a32[1]),
    )));
    let joined: [i16; 16] =
        std::array::from_fn(|lane| if lane < 8 { a16[lane] } else { b16[lane - 8] });
    let (first, second) = S::load16x2(&joined);
    results.extend(unpack(S::dot_add(S::splat32(0), first, y16)));
    results.extend(unpack(S::dot_add(S::splat32(0), second, x16)));
    results
}

#[test]
fn portable_interleave_and_pairs_follow_their_definition() {
    let a: [i16; 8] = std::array::from_fn(|lane| lane as i16);
    let b: [i16; 8] = std::array::from_fn(|lane| 10 + lane as i16);
    let (lo, hi) = Portable::interleave16(a, b);
    assert_eq!(lo, [0, 10, 1, 11, 2, 12, 3, 13]);
    assert_eq!(hi, [4, 14, 5, 15, 6, 16, 7, 17]);
    assert_eq!(
        Portable::interleave32([0, 1, 2, 3], [10, 11, 12, 13]),
        ([0, 10, 1, 11], [2, 12, 3, 13])
    );
    assert_eq!(
        Portable::shift_in32([0, 1, 2, 3], [10, 11, 12, 13]),
        [3, 10, 11, 12]
    );
    assert_eq!(
        Portable::join_in32([0, 1, 2, 3], [4, 5, 6, 7], [10, 11, 12, 13]),
        [3, 10, 7, 12]
    );
    let mut pairs = [[0; 2]; 2];
    Portable::store_pair32::<0>(&mut pairs[0], [10, 11, 12, 13]);
    Portable::store_pair32::<1>(&mut pairs[1], [10, 11, 12, 13]);
    assert_eq!(pairs, [[10, 11], [12, 13]]);
    let mut lane = 0;
    Portable::store_lane32::<2>(&mut lane, [10, 11, 12, 13]);
    assert_eq!(lane, 12);
    assert_eq!(
        Portable::and16([-1, 0, 7, 6, -1, 5, 3, -8], [-1, -1, 0, 3, 0, -1, -1, 12]),
        [-1, 0, 0, 2, 0, 5, 3, 8]
    );
    assert_eq!(
        Portable::pair16(-7, 300),
        [-7, 300, -7, 300, -7, 300, -7, 300]
    );
    assert_eq!(Portable::pair_lane::<0>(a), [0, 1, 0, 1, 0, 1, 0, 1]);
    assert_eq!(
        Portable::pair_lane::<2>(b),
        [14, 15, 14, 15, 14, 15, 14, 15]
    );
    assert_eq!(Portable::pair_lane::<3>(a), [6, 7, 6, 7, 6, 7, 6, 7]);
    // A dot product of interleaved lanes with paired weights: a·w0 + b·w1 per lane.
    let sums = Portable::dot_add([0; 4], lo, Portable::pair16(2, -3));
    assert_eq!(sums, [-30, -31, -32, -33]);
}

#[test]
fn native_backend_equals_portable_lane_for_lane() {
    let mut rng = Rng(0x5EED_1A7E);
    for _ in 0..20_000 {
        let a16: [i16; 8] = std::array::from_fn(|_| rng.i16());
        let b16: [i16; 8] = std::array::from_fn(|_| rng.i16());
        let a32: [i32; 4] = std::array::from_fn(|_| rng.i32());
        let b32: [i32; 4] = std::array::from_fn(|_| rng.i32());
        assert_eq!(
            lane_results::<Native>(a16, b16, a32, b32),
            lane_results::<Portable>(a16, b16, a32, b32),
            "{a16:?} {b16:?} {a32:?} {b32:?}"
        );
    }
}

/// Spec 001 max_pool2d: the maximum of the input elements inside each window.
fn plain_max_pool(s: &PoolShape, data: &[i32]) -> Vec<i32> {
    let mut out = Vec::new();
    for plane in 0..s.planes {
        for p in 0..s.out_h {
            for q in 0..s.out_w {
                let mut best = None;
                for ki in 0..s.window[0] {
                    for kj in 0..s.window[1] {
                        let row = (p * s.strides[0] + ki) as i64 - s.padding[0] as i64;
                        let col = (q * s.strides[1] + kj) as i64 - s.padding[1] as i64;
                        if (0..s.height as i64).contains(&row) && (0..s.width as i64).contains(&col)
                        {
                            let value =
                                data[(plane * s.height + row as usize) * s.width + col as usize];
                            best = Some(best.map_or(value, |b: i32| b.max(value)));
                        }
                    }
                }
                out.push(best.unwrap());
            }
        }
    }
    out
}

/// Output extent of pooling, or None when a window would hold only padding.
fn pool_extent(size: usize, pad: usize, window: usize, stride: usize, ceil: bool) -> Option<usize> {
    let padded = size + 2 * pad;
    if window > padded || pad >= window {
        return None;
    }
    let span = padded - window;
    let steps = if ceil {
        span.div_ceil(stride)
    } else {
        span / stride
    };
    (steps * stride < size + pad).then_some(steps + 1)
}

#[test]
fn max_pool_kernels_equal_the_formula() {
    let mut rng = Rng(0x5EED_9001);
    let (mut vectorised, mut plain) = (0, 0);
    while vectorised + plain < 500 {
        let (height, width) = (rng.size(1, 21), rng.size(1, 23));
        let mut window = [rng.size(1, 4), rng.size(1, 5)];
        if rng.chance(3) {
            // Windows and padding far larger than the input take the plain loop.
            window = [rng.size(60, 120), rng.size(60, 120)];
        }
        let strides = [rng.size(1, 3), rng.size(1, 3)];
        let padding = if window[0] >= 60 {
            [
                window[0] - 1 - rng.size(0, 2),
                window[1] - 1 - rng.size(0, 2),
            ]
        } else if rng.chance(10) {
            [rng.size(0, window[0] - 1), rng.size(0, window[1] - 1)]
        } else {
            [rng.size(0, 1), rng.size(0, 1)]
        };
        let ceil = rng.chance(30);
        let (Some(out_h), Some(out_w)) = (
            pool_extent(height, padding[0], window[0], strides[0], ceil),
            pool_extent(width, padding[1], window[1], strides[1], ceil),
        ) else {
            continue;
        };
        let shape = PoolShape {
            planes: rng.size(1, 5),
            height,
            width,
            out_h,
            out_w,
            window,
            strides,
            padding,
            // The operator clips when most windows lie in padding; either kernel must hold.
            clip: rng.chance(10),
        };
        let data: Vec<i32> = (0..shape.planes * height * width)
            .map(|_| rng.i32().max(i32::MIN + 1))
            .collect();
        let expected = plain_max_pool(&shape, &data);
        let mut pooled = vec![0; expected.len()];
        pool::max_pool2d(&shape, &data, &mut pooled);
        assert_eq!(pooled, expected, "{shape:?}");
        if shape.vectorised() {
            vectorised += 1;
        } else {
            plain += 1;
        }
    }
    assert!(
        vectorised >= 400 && plain >= 1,
        "{vectorised} vectorised, {plain} plain"
    );
}

#[test]
fn blocked_maps_equal_the_plain_loop() {
    let mut rng = Rng(0x6d61_7073);
    for _ in 0..300 {
        // Lengths around the block size and its multiples, including empty and tails.
        let n = rng.pick(&[0, 1, 31, 32, 33, 64, 95, 200, 1000]) + rng.size(0, 3);
        let input: Vec<i32> = (0..n).map(|_| rng.i32()).collect();
        let shift = rng.size(0, 31) as u32;
        let mut out = vec![0; n + rng.size(0, 2)];
        kernels::map(&mut out, &input, |x| (x >> shift).max(-7));
        let plain: Vec<i32> = input.iter().map(|&x| (x >> shift).max(-7)).collect();
        assert_eq!(&out[..n], &plain[..], "map over {n} values");
        assert!(out[n..].iter().all(|&v| v == 0), "map wrote past the input");
    }
}

/// The values after `add`, and whether `add` reported that every sum fits.
fn checked_sums(values: &[i32], add: impl Fn(&mut [i32]) -> bool) -> (bool, Vec<i32>) {
    let mut sums = values.to_vec();
    let fits = add(&mut sums);
    (fits, sums)
}

#[test]
fn checked_additions_flag_exactly_the_overflows() {
    let mut rng = Rng(0x6164_6473);
    let (mut overflows, mut fitting) = (0, 0);
    for case in 0..600 {
        let n = rng.pick(&[0, 1, 31, 32, 33, 64, 100, 257]);
        // Mostly small values, so that most cases fit and one stray overflow must be found.
        let small = |rng: &mut Rng| rng.range(-1 << 20, 1 << 20) as i32;
        let mut values: Vec<i32> = (0..n).map(|_| small(&mut rng)).collect();
        let addends: Vec<i32> = (0..n).map(|_| small(&mut rng)).collect();
        if n > 0 && case % 2 == 0 {
            // One value within 2^20 of an end of the range, or anywhere.
            let at = rng.size(0, n - 1);
            let near = rng.range(0, 1 << 20) as i32;
            let anywhere = rng.i32();
            values[at] = rng.pick(&[i32::MAX - near, i32::MIN + near, anywhere]);
        }
        let addend = if case % 5 == 0 {
            rng.i32()
        } else {
            small(&mut rng)
        };

        let plain: Option<Vec<i32>> = values.iter().map(|v| v.checked_add(addend)).collect();
        let results = [
            (
                "native",
                checked_sums(&values, |v| kernels::add_checked::<Native>(v, addend)),
            ),
            (
                "portable",
                checked_sums(&values, |v| kernels::add_checked::<Portable>(v, addend)),
            ),
        ];
        for (backend, (fits, sums)) in results {
            assert_eq!(
                fits,
                plain.is_some(),
                "{backend} add_checked of {addend}, {n} values"
            );
            if let Some(plain) = &plain {
                assert_eq!(
                    &sums, plain,
                    "{backend} add_checked of {addend}, {n} values"
                );
            }
        }
        if plain.is_some() {
            fitting += 1;
        } else {
            overflows += 1;
        }

        let plain: Option<Vec<i32>> = values
            .iter()
            .zip(&addends)
            .map(|(v, a)| v.checked_add(*a))
            .collect();
        let results = [
            (
                "native",
                checked_sums(&values, |v| {
                    kernels::add_each_checked::<Native>(v, &addends)
                }),
            ),
            (
                "portable",
                checked_sums(&values, |v| {
                    kernels::add_each_checked::<Portable>(v, &addends)
                }),
            ),
        ];
        for (backend, (fits, sums)) in results {
            assert_eq!(
                fits,
                plain.is_some(),
                "{backend} add_each_checked, {n} values"
            );
            if let Some(plain) = &plain {
                assert_eq!(&sums, plain, "{backend} add_each_checked, {n} values");
            }
        }
    }
    // Both outcomes are well represented.
    assert!(
        overflows >= 50 && fitting >= 50,
        "{overflows} overflowing, {fitting} fitting"
    );
}

#[test]
fn wide_dots_equal_the_i128_sum() {
    let mut rng = Rng(0x5eed_0d07);
    for case in 0..2000 {
        // Lengths around the vector path's block of 16; values often at both ends of i32.
        let n = rng.pick(&[0, 1, 3, 15, 16, 17, 31, 32, 33, 100, 1000]) + rng.size(0, 2);
        let x: Vec<i32> = (0..n).map(|_| rng.i32()).collect();
        let y: Vec<i32> = (0..n)
            .map(|_| {
                if case % 2 == 0 {
                    rng.i32()
                } else {
                    rng.range(-999, 999) as i32
                }
            })
            .collect();
        let plain: i128 = x
            .iter()
            .zip(&y)
            .map(|(&a, &b)| i128::from(a) * i128::from(b))
            .sum();
        assert_eq!(kernels::wide::wide_dot(&x, &y), plain, "{n} values");
    }
    // All-extreme operands: the largest sums the halves can meet.
    let x = vec![i32::MIN; 4096];
    assert_eq!(kernels::wide::wide_dot(&x, &x), 4096 * (1i128 << 62));
    let y = vec![i32::MAX; 4096];
    assert_eq!(
        kernels::wide::wide_dot(&x, &y),
        4096 * i128::from(i32::MIN) * i128::from(i32::MAX)
    );
}

#[test]
fn pointwise_tiles_over_many_channel_pairs_equal_the_formula() {
    // The pointwise tile walks channel pairs in straight runs of sixteen: channels per group
    // around one and two whole runs (32 and 64), several runs with a cut-short last one, and
    // pairs past the last group of four; with whole and partial tiles of channels and pixels.
    let mut rng = Rng(0x9017_5EED);
    let mut cases = 0;
    for group_in in [31, 32, 33, 63, 64, 65, 72, 130] {
        for (group_out, groups) in [(1, 1), (4, 1), (5, 2)] {
            for (height, width) in [(1, 7), (2, 4), (3, 7)] {
                let shape = sized(ConvShape {
                    batch: 1,
                    in_channels: group_in * groups,
                    height,
                    width,
                    out_channels: group_out * groups,
                    groups,
                    kernel_h: 1,
                    kernel_w: 1,
                    out_h: 0,
                    out_w: 0,
                    strides: [1, 1],
                    padding: [0, 0],
                    dilation: [1, 1],
                })
                .expect("a 1 × 1 kernel fits every plane");
                assert!(shape.uses_pointwise(), "{shape:?}");
                let data = rng.int8s(shape.in_channels * height * width);
                let weights = rng.int8s(shape.out_channels * shape.depth());
                let expected = plain_conv2d(&shape, &data, &weights);
                for prepared in [false, true] {
                    assert_eq!(
                        run_conv::<Native>(&shape, &data, &weights, prepared, None),
                        expected,
                        "native, {shape:?}"
                    );
                    assert_eq!(
                        run_conv::<Portable>(&shape, &data, &weights, prepared, None),
                        expected,
                        "portable, {shape:?}"
                    );
                }
                cases += 1;
            }
        }
    }
    assert_eq!(cases, 72);
}

#[test]
fn packing_saturates_each_value_and_pads_with_zeros() {
    let mut rng = Rng(0x05EE_DD08);
    for _ in 0..300 {
        let (rows, depth) = (rng.size(0, 6), rng.size(0, 41));
        let source: Vec<i32> = (0..rows * depth)
            .map(|_| match rng.below(4) {
                0 => rng.pick(&[i32::MIN, i32::MAX, -32769, 32768, -32768, 32767]),
                _ => rng.range(-200, 200) as i32,
            })
            .collect();
        let packed = PackedRows::pack(&source, rows, depth);
        let stride = depth.div_ceil(16) * 16;
        let mut expected = vec![0i16; rows * stride];
        for r in 0..rows {
            for k in 0..depth {
                expected[r * stride + k] = source[r * depth + k].clamp(-32768, 32767) as i16;
            }
        }
        assert_eq!(packed.values(), expected, "{rows} rows of {depth}");
    }
}
