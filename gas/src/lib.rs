//! The gas schedule of the CVM engine: what a node and a run cost, from shapes and attributes.
//!
//! An operator describes the work one application does as [`Work`]: counts of abstract units —
//! multiply-accumulates, elements read and written, window taps, candidate pairs, transcendental
//! evaluations — that depend only on shapes and attributes, never on tensor values or on how a
//! kernel lays out its work, so a faster kernel never changes a price. It also names its price
//! class: the operator, or a shape class defined by its attributes (`conv2d` is `dense`,
//! `pointwise`, `depthwise` or `grouped`). A [`Schedule`] prices the work with one table: per
//! class, a fixed gas per node and [`Rates`] per unit of work; [`Schedule::run_gas`] prices what
//! a run costs beyond its nodes (decoding inputs, copying outputs, the arena's memory).
//!
//! Rates are in hundredths of gas per unit, and a node's or a run's hundredths are rounded up to
//! whole gas. One gas is about five wasm instructions (`docs/gas.md`).
//!
//! Architecture Invariant: a published schedule never changes. A new price list is a new
//! [`Schedule`] with a new version beside the frozen ones, and loading always names the version.
#![no_std]

/// Hundredths of gas per gas: rates are in hundredths, totals are rounded up to whole gas.
pub const RATE_SCALE: u64 = 100;

/// Abstract work of one application of an operator. Each count is a published function of the
/// operator's shapes and attributes (`docs/gas.md` lists them per operator).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Work {
    /// Multiply-accumulates. For the 8-bit reductions of `conv2d` (every class but depthwise)
    /// and `dense`, a reduction of length K counts ⌈K/16⌉ × 16 (the vector width).
    pub macs: u64,
    /// Elements read from the operands.
    pub reads: u64,
    /// Elements written to the outputs.
    pub writes: u64,
    /// Window taps: (output element, window position) pairs of a pooling window that read the
    /// input; for a convolution, the input elements each output window (image, group, output
    /// position) covers, counted once per window whatever the output channels it serves.
    pub taps: u64,
    /// Candidate pairs: pairs of boxes an overlap test may compare.
    pub pairs: u64,
    /// Transcendental evaluations (one per element of a CINN math function, two per decoded
    /// proposal).
    pub evals: u64,
    /// Slices: the runs of consecutive elements an operator gathers whole from its operands
    /// (`concatenate`: the outer extent before the axis times the inputs; `take`: the outer
    /// extent times the indices; `conv2d`: the runs of a group's channels a window reads at each
    /// kernel position, or for a depthwise convolution its planes).
    pub slices: u64,
}

impl Work {
    /// Reads `reads` elements and writes `writes`, and nothing else.
    pub const fn io(reads: u64, writes: u64) -> Work {
        Work {
            macs: 0,
            reads,
            writes,
            taps: 0,
            pairs: 0,
            evals: 0,
            slices: 0,
        }
    }
}

/// The work of a node and the class that prices it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Usage {
    /// The shape class of the operator ("" for an operator priced as one class).
    pub class: &'static str,
    /// The work.
    pub work: Work,
}

/// Hundredths of gas per unit of each kind of [`Work`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rates {
    /// Per multiply-accumulate.
    pub mac: u64,
    /// Per element read.
    pub read: u64,
    /// Per element written.
    pub write: u64,
    /// Per window tap.
    pub tap: u64,
    /// Per candidate pair.
    pub pair: u64,
    /// Per transcendental evaluation.
    pub eval: u64,
    /// Per slice.
    pub slice: u64,
}

/// One row of a schedule's table: the prices of an operator's class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Row {
    /// Operator name.
    pub op: &'static str,
    /// Shape class ("" when the operator has one).
    pub class: &'static str,
    /// Gas of every node of the class (whole gas): dispatch, operand and output views, attribute
    /// lookups, and whatever the class sets up before its work.
    pub base: u64,
    /// Its rates per unit of work.
    pub rates: Rates,
}

/// Hundredths of gas per element of what every run does beyond its nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunRates {
    /// Gas of every run (whole gas): crossing into the engine, setting up, encoding the report.
    pub base: u64,
    /// Per element of the inputs: decoding and checking them.
    pub input: u64,
    /// Per element of the outputs: copying them out and encoding them.
    pub output: u64,
    /// Per element (4 bytes) of the arena beyond the inputs ([`Schedule::fresh_arena`]): growing
    /// the memory and touching it first.
    pub arena: u64,
}

/// A price list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Schedule {
    /// The schedule version. Gas figures are only comparable under the same version.
    pub version: u32,
    /// What a run costs beyond its nodes.
    pub run: RunRates,
    /// The rates of every operator and class.
    pub table: &'static [Row],
}

/// Gas arithmetic overflowed `u64`. Only reachable through absurd shapes, which validation
/// limits; it is still reported instead of wrapping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GasOverflow;

const fn row(op: &'static str, class: &'static str, base: u64, r: [u64; 7]) -> Row {
    Row {
        op,
        class,
        base,
        rates: Rates {
            mac: r[0],
            read: r[1],
            write: r[2],
            tap: r[3],
            pair: r[4],
            eval: r[5],
            slice: r[6],
        },
    }
}

/// The table of schedule version 1: per operator and class, the gas of every node, then the rates
/// in hundredths of gas per unit. Rate columns: multiply-accumulate, element read, element
/// written, window tap, candidate pair, transcendental evaluation, slice.
#[rustfmt::skip]
const V1_TABLE: &[Row] = &[
    //  operator                 class                    base      mac    read   write     tap    pair    eval   slice
    row("sum",                   "",                       753, [     0,     65,    166,      0,      0,      0,      0]),
    row("max",                   "",                       708, [     0,     63,    155,      0,      0,      0,      0]),
    row("broadcast_add",         "",                       545, [     0,      0,    136,      0,      0,      0,      0]),
    row("broadcast_sub",         "",                       564, [     0,      0,    151,      0,      0,      0,      0]),
    row("broadcast_mul",         "",                       537, [     0,      0,    154,      0,      0,      0,      0]),
    row("broadcast_div",         "",                       640, [     0,      0,    700,      0,      0,      0,      0]),
    row("broadcast_max",         "",                       540, [     0,      0,    137,      0,      0,      0,      0]),
    row("broadcast_greater",     "",                       541, [     0,      0,    147,      0,      0,      0,      0]),
    row("conv2d",                "dense",                 2000, [    13,      0,    500,     40,      0,      0,    950]),
    row("conv2d",                "pointwise",             2555, [    12,      0,    110,     73,      0,      0,      0]),
    row("conv2d",                "depthwise",             1000, [    19,      0,     80,      0,      0,      0,  18400]),
    row("conv2d",                "depthwise irregular",   4884, [    37,      0,  10577,      0,      0,      0,      0]),
    row("conv2d",                "grouped",               2035, [    16,      0,     90,    320,      0,      0,      0]),
    row("conv2d",                "padded",                2035, [    16,      0,     90,    640,      0,      0,      0]),
    row("dense",                 "",                       646, [    15,      0,    910,      0,      0,      0,      0]),
    row("dense",                 "batched",                646, [    11,      0,    910,      0,      0,      0,      0]),
    row("relu",                  "",                       331, [     0,      0,     75,      0,      0,      0,      0]),
    row("max_pool2d",            "",                      1473, [     0,     88,    363,    160,      0,      0,      0]),
    row("max_pool2d",            "padded",                 539, [     0,    525,   3206,    172,      0,      0,      0]),
    row("upsampling",            "",                       498, [     0,      0,    629,      0,      0,      0,      0]),
    row("abs",                   "",                       343, [     0,      0,    410,      0,      0,      0,      0]),
    row("cvm_precision",         "",                       333, [     0,      0,    218,      0,      0,      0,      0]),
    row("elemwise_add",          "",                       357, [     0,      0,    519,      0,      0,      0,      0]),
    row("elemwise_sub",          "",                       349, [     0,      0,    489,      0,      0,      0,      0]),
    row("negative",              "",                       331, [     0,      0,    462,      0,      0,      0,      0]),
    row("clip",                  "",                       343, [     0,      0,     85,      0,      0,      0,      0]),
    row("cvm_clip",              "",                       360, [     0,      0,     85,      0,      0,      0,      0]),
    row("cvm_left_shift",        "",                       355, [     0,      0,     90,      0,      0,      0,      0]),
    row("cvm_right_shift",       "",                       361, [     0,      0,    105,      0,      0,      0,      0]),
    row("repeat",                "",                       362, [     0,      0,   1003,      0,      0,      0,      0]),
    row("tile",                  "",                       664, [     0,      0,   2000,      0,      0,      0,      0]),
    row("flatten",               "",                       300, [     0,      0,     40,      0,      0,      0,      0]),
    row("concatenate",           "",                       524, [     0,      0,    121,      0,      0,      0,   1185]),
    row("expand_dims",           "",                       316, [     0,      0,     40,      0,      0,      0,      0]),
    row("reshape",               "",                       291, [     0,      0,     40,      0,      0,      0,      0]),
    row("squeeze",               "",                       303, [     0,      0,     40,      0,      0,      0,      0]),
    row("transpose",             "",                       832, [     0,      0,   1121,      0,      0,      0,      0]),
    row("strided_slice",         "",                       814, [     0,      0,   1054,      0,      0,      0,      0]),
    row("slice_like",            "",                       548, [     0,      0,   1028,      0,      0,      0,      0]),
    row("take",                  "",                       364, [     0,      0,    153,      0,      0,      0,    453]),
    row("cvm_lut",               "",                       338, [     0,      0,    480,      0,      0,      0,      0]),
    row("where",                 "",                       367, [     0,      0,    256,      0,      0,      0,      0]),
    row("get_valid_counts",      "",                       449, [     0,    173,    120,      0,      0,      0,      0]),
    row("non_max_suppression",   "",                       243, [     0,   1025,    183,      0,   1787,      0,      0]),
    row("Abs",                   "",                       454, [     0,      0,    751,      0,      0,      0,      0]),
    row("Acos",                  "",                     11575, [     0,      0,    155,      0,      0, 264111,      0]),
    row("Acosh",                 "",                       100, [     0,      0,    157,      0,      0, 288819,      0]),
    row("Asin",                  "",                       100, [     0,      0,    148,      0,      0, 253111,      0]),
    row("Asinh",                 "",                     10836, [     0,      0,    161,      0,      0, 306414,      0]),
    row("Atan",                  "",                       100, [     0,      0,    155,      0,      0, 165881,      0]),
    row("Atanh",                 "",                     15513, [     0,      0,    166,      0,      0, 277458,      0]),
    row("BitwiseNot",            "",                       570, [     0,      0,    767,      0,      0,      0,      0]),
    row("Ceil",                  "",                       332, [     0,      0,    200,      0,      0,   1506,      0]),
    row("Cos",                   "",                       100, [     0,      0,    147,      0,      0, 134940,      0]),
    row("Cosh",                  "",                       100, [     0,      0,    159,      0,      0, 238265,      0]),
    row("Erf",                   "",                       100, [     0,      0,    180,      0,      0, 520000,      0]),
    row("Exp",                   "",                       100, [     0,      0,    158,      0,      0, 204158,      0]),
    row("Floor",                 "",                       403, [     0,      0,    205,      0,      0,   1537,      0]),
    row("Identity",              "",                       414, [     0,      0,    679,      0,      0,      0,      0]),
    row("IsFinite",              "",                       431, [     0,      0,    650,      0,      0,      0,      0]),
    row("IsInf",                 "",                       419, [     0,      0,    671,      0,      0,      0,      0]),
    row("IsNan",                 "",                       432, [     0,      0,    605,      0,      0,      0,      0]),
    row("Log",                   "",                       100, [     0,      0,    178,      0,      0, 251886,      0]),
    row("Log10",                 "",                       100, [     0,      0,    177,      0,      0, 252786,      0]),
    row("Log2",                  "",                      9799, [     0,      0,    183,      0,      0, 256698,      0]),
    row("LogicalNot",            "",                       429, [     0,      0,    689,      0,      0,      0,      0]),
    row("Negative",              "",                       467, [     0,      0,    600,      0,      0,      0,      0]),
    row("Round",                 "",                       563, [     0,      0,    267,      0,      0,   2000,      0]),
    row("Rsqrt",                 "",                       371, [     0,      0,    185,      0,      0,  15798,      0]),
    row("Sign",                  "",                       358, [     0,      0,   2003,      0,      0,      0,      0]),
    row("Sin",                   "",                      1333, [     0,      0,    137,      0,      0, 130866,      0]),
    row("Sinh",                  "",                      9601, [     0,      0,    163,      0,      0, 273826,      0]),
    row("Sqrt",                  "",                       464, [     0,      0,    225,      0,      0,   4300,      0]),
    row("Tan",                   "",                     11280, [     0,      0,    167,      0,      0, 362383,      0]),
    row("Tanh",                  "",                       100, [     0,      0,    140,      0,      0, 228573,      0]),
    row("Trunc",                 "",                       283, [     0,      0,    221,      0,      0,   1652,      0]),
    row("Add",                   "",                       634, [     0,      0,   1690,      0,      0,      0,      0]),
    row("BitwiseAnd",            "",                       561, [     0,      0,   1546,      0,      0,      0,      0]),
    row("BitwiseOr",             "",                       554, [     0,      0,   1525,      0,      0,      0,      0]),
    row("BitwiseXor",            "",                       787, [     0,      0,   1593,      0,      0,      0,      0]),
    row("Div",                   "",                       600, [     0,      0,   6535,      0,      0,      0,      0]),
    row("Dot",                   "",                       365, [   142,      0,   3916,      0,      0,      0,      0]),
    row("Dot",                   "matrix",                 100, [   112,    586,   3089,      0,      0,      0,      0]),
    row("FloorDiv",              "",                       581, [     0,      0,   4173,      0,      0,      0,      0]),
    row("FloorMod",              "",                       561, [     0,      0,   2382,      0,      0,      0,      0]),
    row("LeftShift",             "",                       316, [     0,      0,   2100,      0,      0,      0,      0]),
    row("LogicalAnd",            "",                       559, [     0,      0,   1494,      0,      0,      0,      0]),
    row("LogicalOr",             "",                       556, [     0,      0,   1479,      0,      0,      0,      0]),
    row("LogicalXor",            "",                       496, [     0,      0,   1931,      0,      0,      0,      0]),
    row("Max",                   "",                       841, [     0,      0,   1622,      0,      0,      0,      0]),
    row("Min",                   "",                       549, [     0,      0,   1537,      0,      0,      0,      0]),
    row("Mod",                   "",                       532, [     0,      0,   2194,      0,      0,      0,      0]),
    row("Mul",                   "",                       627, [     0,      0,   3961,      0,      0,      0,      0]),
    row("Power",                 "",                       100, [     0,      0,    148,      0,      0, 399605,      0]),
    row("RightShift",            "",                       353, [     0,      0,   1667,      0,      0,      0,      0]),
    row("Sub",                   "",                       559, [     0,      0,   1625,      0,      0,      0,      0]),
    row("ConstScalar",           "",                       258, [     0,      0,    200,      0,      0,      0,      0]),
    row("BnGradBiasScale",       "",                      1438, [  2496,      0,    180,      0,      0,      0,      0]),
    row("BnMeanVariance",        "",                      2060, [  2325,      0,    155,      0,      0,      0,      0]),
    row("BroadcastTo",           "",                       593, [     0,      0,   1270,      0,      0,      0,      0]),
    row("Compare",               "",                       557, [     0,      0,    268,      0,      0,      0,      0]),
    row("Concat",                "",                       477, [     0,      0,     98,      0,      0,      0,      0]),
    row("Conv",                  "forward",                178, [    83,      0,  12291,   2597,      0,      0,      0]),
    row("Conv",                  "backward_data",          100, [  2600,      0,   8707,      0,      0,      0,      0]),
    row("Conv",                  "backward_filter",        100, [  2920,      0,   8707,      0,      0,      0,      0]),
    row("Reduce",                "",                       947, [     0,   1387,    509,      0,      0,      0,      0]),
    row("Reduce",                "prod",                  1396, [     0,   6043,    161,      0,      0,      0,      0]),
    row("Reshape",               "",                       343, [     0,      0,     40,      0,      0,      0,      0]),
    row("Reverse",               "",                       836, [     0,      0,   1484,      0,      0,      0,      0]),
    row("Select",                "",                       444, [     0,      0,    244,      0,      0,      0,      0]),
    row("Slice",                 "",                       912, [     0,      0,   1635,      0,      0,      0,      0]),
    row("Transpose",             "",                       832, [     0,      0,   1121,      0,      0,      0,      0]),
    row("generate_proposals_v2", "",                       100, [     0,   1224,    154,      0,    482, 258287,      0]),
    // Transformer family, added with the operators (no earlier model can contain them).
    row("requantize",            "",                       412, [     0,      0,    315,      0,      0,      0,      0]),
    row("activation",            "gelu",                   368, [     0,      0,    180,      0,      0,   1600,      0]),
    row("activation",            "gelu_tanh",              327, [     0,      0,    140,      0,      0,   2600,      0]),
    row("activation",            "silu",                   315, [     0,      0,    140,      0,      0,   2200,      0]),
    row("batch_matmul",          "",                      1931, [    11,     60,    604,      0,      0,      0,      0]),
    row("batch_matmul",          "columns",               4217, [    13,    382,    270,      0,      0,      0,      0]),
    row("softmax",               "",                      1033, [     0,     99,     67,      0,      0,   1365,      0]),
    row("layer_norm",            "",                       608, [     0,     78,   1787,      0,      0,  25786,      0]),
];

impl Schedule {
    /// Schedule version 1 (`docs/gas.md`; its calibration is in `docs/gas-calibration.md`).
    pub const V1: Schedule = Schedule {
        version: 1,
        run: RunRates {
            base: 6786,
            input: 628,
            output: 426,
            arena: 260,
        },
        table: V1_TABLE,
    };

    /// Every published schedule, oldest first.
    pub const ALL: [&'static Schedule; 1] = [&Self::V1];

    /// The newest schedule: what the command line uses when it is given no version. The library
    /// never defaults; every load names its version.
    pub const NEWEST: &'static Schedule = &Self::V1;

    /// The schedule with version `version`, if it exists.
    pub fn by_version(version: u32) -> Option<&'static Schedule> {
        Self::ALL
            .iter()
            .copied()
            .find(|schedule| schedule.version == version)
    }

    /// The row of operator `op` in class `class`, if the table has it.
    pub fn row(&self, op: &str, class: &str) -> Option<&'static Row> {
        self.table
            .iter()
            .find(|row| row.op == op && row.class == class)
    }

    /// The gas of one application of `op` doing `usage`: the base of its class plus the work
    /// priced at the rates of its class, rounded up to whole gas; `None` when the table has no
    /// such class.
    ///
    /// # Errors
    /// [`GasOverflow`] if the arithmetic exceeds `u64`.
    pub fn node_gas(&self, op: &str, usage: &Usage) -> Option<Result<u64, GasOverflow>> {
        let row = self.row(op, usage.class)?;
        let (rates, work) = (row.rates, usage.work);
        Some(Self::whole(
            row.base,
            &[
                (work.macs, rates.mac),
                (work.reads, rates.read),
                (work.writes, rates.write),
                (work.taps, rates.tap),
                (work.pairs, rates.pair),
                (work.evals, rates.eval),
                (work.slices, rates.slice),
            ],
        ))
    }

    /// The gas a run costs beyond its nodes, for inputs of `inputs` elements in all, outputs of
    /// `outputs` elements and an arena of `arena` elements. The arena rate applies to the
    /// [`fresh_arena`](Self::fresh_arena) elements only.
    ///
    /// # Errors
    /// [`GasOverflow`] if the arithmetic exceeds `u64`.
    pub fn run_gas(&self, inputs: u64, outputs: u64, arena: u64) -> Result<u64, GasOverflow> {
        Self::whole(
            self.run.base,
            &[
                (inputs, self.run.input),
                (outputs, self.run.output),
                (Self::fresh_arena(inputs, arena), self.run.arena),
            ],
        )
    }

    /// The elements of the arena beyond the inputs: the engine frees the inputs' request before
    /// it lays out the arena, so that much of the arena reuses memory the inputs have already
    /// grown and touched; only the rest is grown and touched for the first time.
    pub fn fresh_arena(inputs: u64, arena: u64) -> u64 {
        arena.saturating_sub(inputs)
    }

    /// `base` + ⌈Σ count × rate / [`RATE_SCALE`]⌉, in checked arithmetic.
    fn whole(base: u64, terms: &[(u64, u64)]) -> Result<u64, GasOverflow> {
        let hundredths = terms.iter().try_fold(0u64, |total, &(count, rate)| {
            count
                .checked_mul(rate)
                .and_then(|part| total.checked_add(part))
                .ok_or(GasOverflow)
        })?;
        base.checked_add(hundredths.div_ceil(RATE_SCALE))
            .ok_or(GasOverflow)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_found_and_rows_are_unique() {
        assert_eq!(Schedule::by_version(1), Some(&Schedule::V1));
        assert_eq!(Schedule::by_version(0), None);
        assert_eq!(Schedule::by_version(2), None);
        for schedule in Schedule::ALL {
            for (i, a) in schedule.table.iter().enumerate() {
                for b in &schedule.table[i + 1..] {
                    assert!(
                        (a.op, a.class) != (b.op, b.class),
                        "{} {} twice",
                        a.op,
                        a.class
                    );
                }
            }
        }
    }

    #[test]
    fn prices_round_up_and_overflow_is_reported() {
        let relu = |writes| Usage {
            class: "",
            work: Work::io(writes, writes),
        };
        let relu_row = Schedule::V1.row("relu", "");
        let (base, rate) = relu_row.map_or((0, 0), |r| (r.base, r.rates.write));
        assert!(rate > 0 && !rate.is_multiple_of(RATE_SCALE));
        assert_eq!(Schedule::V1.node_gas("relu", &relu(0)), Some(Ok(base)));
        // Hundredths are summed, then rounded up once.
        assert_eq!(
            Schedule::V1.node_gas("relu", &relu(1)),
            Some(Ok(base + rate.div_ceil(RATE_SCALE)))
        );
        assert_eq!(
            Schedule::V1.node_gas("relu", &relu(100)),
            Some(Ok(base + rate))
        );
        assert_eq!(
            Schedule::V1.node_gas("relu", &relu(u64::MAX)),
            Some(Err(GasOverflow))
        );
        assert_eq!(Schedule::V1.node_gas("no_such_op", &relu(1)), None);
        let run = Schedule::V1.run;
        assert_eq!(Schedule::V1.run_gas(0, 0, 0), Ok(run.base));
        // An arena no larger than the inputs reuses their memory; the rest is new.
        assert_eq!(
            Schedule::V1.run_gas(100, 100, 100),
            Ok(run.base + run.input + run.output)
        );
        assert_eq!(
            Schedule::V1.run_gas(100, 100, 300),
            Ok(run.base + run.input + run.output + 2 * run.arena)
        );
    }
}
