//! Vectorised integer kernels behind the heaviest operators, written once over a small 128-bit
//! vector trait ([`simd::Simd`]) with three backends: wasm SIMD128 (the consensus build),
//! x86-64 SSE2 (the native build) and portable scalar lanes (other targets, and the reference
//! the tests compare the others with).
//!
//! Every kernel computes exactly the formula of its operator; `engine/tests/kernels.rs` checks
//! each one bit for bit against a plain implementation of the formula, on randomized shapes
//! with odd sizes and tails, under both the native and the portable backend. Each kernel states
//! the precision bound it relies on, and when it is chosen.
//!
//! Layers, each module using only those of the layers before it: `simd` (the vectors);
//! `elementwise`, `padded`, `shape` and `wide`; `pack` and `gemm`; `pool` and the convolution
//! kernels of `conv`, one file per strategy. The operators name the items re-exported here and
//! the modules `gemm`, `pool`, `simd` and `wide`.

/// Runs `$step` for `$k` = 0, 1, …, `$len` − 1 in straight runs of `$run` steps (64 or 16),
/// each step guarded by a comparison with the length, with a loop only over runs.
///
/// Why: under wasmtime's fuel metering every loop iteration ends in a fuel check whose
/// out-of-fuel call clobbers all vector registers, which would force the vectors a loop keeps
/// (accumulators, weights) through the stack on every iteration; within a straight run they
/// stay in registers. Vectors loaded before the loop are still carried around it, through the
/// stack: a kernel that needs them in registers loads them afresh within each run.
///
/// `straight_runs!(each 16, |i| step)` runs `$step` for `$i` = 0, 1, …, 15, with no comparison:
/// one run over sixteen steps known to exist (whose indices into arrays of sixteen then need no
/// bounds check).
macro_rules! straight_runs {
    (64, $len:expr, |$k:ident| $step:block) => {
        straight_runs!(@runs $len, $k, $step, 64,
            0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
            32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59
            60 61 62 63)
    };
    (16, $len:expr, |$k:ident| $step:block) => {
        straight_runs!(@runs $len, $k, $step, 16, 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15)
    };
    (each 16, |$i:ident| $step:block) => {
        straight_runs!(@each $i, $step, 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15)
    };
    (@each $i:ident, $step:block, $($n:literal)*) => {
        $({
            let $i: usize = $n;
            $step
        })*
    };
    (@runs $len:expr, $k:ident, $step:block, $run:literal, $($i:literal)*) => {{
        let len: usize = $len;
        let mut start = 0usize;
        'runs: loop {
            $(
                let $k = start + $i;
                if $k >= len {
                    break 'runs;
                }
                $step
            )*
            start += $run;
        }
    }};
}

pub mod conv;
pub mod elementwise;
pub mod gemm;
pub mod pack;
pub(crate) mod padded;
pub mod pool;
pub mod shape;
pub mod simd;
pub mod wide;

pub use conv::{conv2d, pack_in, packed_bytes};
pub use elementwise::{add_checked, add_each_checked, map};
pub use pack::{PackOrder, PackedRows};
pub use shape::ConvShape;
