//! The gas schedule of the CVM engine: what a node and a run cost, from shapes and attributes.
//!
//! An operator describes the work one application does as [`Work`]: counts of abstract units —
//! multiply-accumulates, elements read and written, window taps, candidate pairs, transcendental
//! evaluations — that depend only on shapes and attributes, never on tensor values or on how a
//! kernel lays out its work, so a faster kernel never changes a price. It also names its price
//! class: the operator, or a shape class defined by its attributes (`conv2d` is `dense`,
//! `pointwise`, `depthwise` or `grouped`). A [`Schedule`] prices the work with one table of
//! [`Rates`] per class, plus a fixed `node_base` per node; [`Schedule::run_gas`] prices what a
//! run costs beyond its nodes (decoding inputs, copying outputs, the arena's memory).
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
    /// Window taps: (output element, window position) pairs of a pooling window; for a
    /// convolution, the input elements each output window (image, group, output position)
    /// covers, counted once per window whatever the output channels it serves.
    pub taps: u64,
    /// Candidate pairs: pairs of boxes an overlap test may compare.
    pub pairs: u64,
    /// Transcendental evaluations (one per element of a CINN math function, two per decoded
    /// proposal).
    pub evals: u64,
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
}

/// One row of a schedule's table: the rates of an operator's class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Row {
    /// Operator name.
    pub op: &'static str,
    /// Shape class ("" when the operator has one).
    pub class: &'static str,
    /// Its rates.
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
    /// Per element (4 bytes) of the arena: growing the memory and touching it first.
    pub arena: u64,
}

/// A price list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Schedule {
    /// The schedule version. Gas figures are only comparable under the same version.
    pub version: u32,
    /// Gas of every node (whole gas): dispatch, operand and output views, attribute lookups.
    pub node_base: u64,
    /// What a run costs beyond its nodes.
    pub run: RunRates,
    /// The rates of every operator and class.
    pub table: &'static [Row],
}

/// Gas arithmetic overflowed `u64`. Only reachable through absurd shapes, which validation
/// limits; it is still reported instead of wrapping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GasOverflow;

const fn row(op: &'static str, class: &'static str, r: [u64; 6]) -> Row {
    Row {
        op,
        class,
        rates: Rates {
            mac: r[0],
            read: r[1],
            write: r[2],
            tap: r[3],
            pair: r[4],
            eval: r[5],
        },
    }
}

/// The table of schedule version 1, in hundredths of gas per unit. Columns: multiply-accumulate,
/// element read, element written, window tap, candidate pair, transcendental evaluation.
#[rustfmt::skip]
const V1_TABLE: &[Row] = &[
    //  operator                 class          mac  read  write  tap  pair   eval
    row("sum",                   "",          [    0,    71,   143,     0,     0,      0]),
    row("max",                   "",          [    0,    65,   129,     0,     0,      0]),
    row("broadcast_add",         "",          [    0,     0,   152,     0,     0,      0]),
    row("broadcast_sub",         "",          [    0,     0,   169,     0,     0,      0]),
    row("broadcast_mul",         "",          [    0,     0,   176,     0,     0,      0]),
    row("broadcast_div",         "",          [    0,     0,  1257,     0,     0,      0]),
    row("broadcast_max",         "",          [    0,     0,   153,     0,     0,      0]),
    row("broadcast_greater",     "",          [    0,     0,   168,     0,     0,      0]),
    row("conv2d",                "dense",     [   16,     0,    90,   320,     0,      0]),
    row("conv2d",                "pointwise", [   15,     0,   114,    76,     0,      0]),
    row("conv2d",                "depthwise", [   44,     0,    96,     0,     0,      0]),
    row("conv2d",                "depthwise irregular", [   51,     0, 14415,     0,     0,      0]),
    row("conv2d",                "grouped",   [   16,     0,    90,   320,     0,      0]),
    row("dense",                 "",          [   18,     0,  1765,     0,     0,      0]),
    row("relu",                  "",          [    0,     0,    95,     0,     0,      0]),
    row("max_pool2d",            "",          [    0,   453,   905,   181,     0,      0]),
    row("upsampling",            "",          [    0,     0,   718,     0,     0,      0]),
    row("abs",                   "",          [    0,     0,   480,     0,     0,      0]),
    row("cvm_precision",         "",          [    0,     0,   238,     0,     0,      0]),
    row("elemwise_add",          "",          [    0,     0,   555,     0,     0,      0]),
    row("elemwise_sub",          "",          [    0,     0,   517,     0,     0,      0]),
    row("negative",              "",          [    0,     0,   482,     0,     0,      0]),
    row("clip",                  "",          [    0,     0,   108,     0,     0,      0]),
    row("cvm_clip",              "",          [    0,     0,   110,     0,     0,      0]),
    row("cvm_left_shift",        "",          [    0,     0,   120,     0,     0,      0]),
    row("cvm_right_shift",       "",          [    0,     0,   146,     0,     0,      0]),
    row("repeat",                "",          [    0,     0,  1085,     0,     0,      0]),
    row("tile",                  "",          [    0,     0,  2582,     0,     0,      0]),
    row("flatten",               "",          [    0,     0,   102,     0,     0,      0]),
    row("concatenate",           "",          [    0,     0,   877,     0,     0,      0]),
    row("expand_dims",           "",          [    0,     0,   102,     0,     0,      0]),
    row("reshape",               "",          [    0,     0,   102,     0,     0,      0]),
    row("squeeze",               "",          [    0,     0,   102,     0,     0,      0]),
    row("transpose",             "",          [    0,     0,  1227,     0,     0,      0]),
    row("strided_slice",         "",          [    0,     0,  1169,     0,     0,      0]),
    row("slice_like",            "",          [    0,     0,  1099,     0,     0,      0]),
    row("take",                  "",          [    0,     0,   377,     0,     0,      0]),
    row("cvm_lut",               "",          [    0,     0,   505,     0,     0,      0]),
    row("where",                 "",          [    0,     0,   271,     0,     0,      0]),
    row("get_valid_counts",      "",          [    0,   192,   128,     0,     0,      0]),
    row("non_max_suppression",   "",          [    0,  1011,   183,     0,  2020,      0]),
    row("Abs",                   "",          [    0,     0,   756,     0,     0,      0]),
    row("Acos",                  "",          [    0,     0,   163,     0,     0, 277983]),
    row("Acosh",                 "",          [    0,     0,   172,     0,     0, 315615]),
    row("Asin",                  "",          [    0,     0,   161,     0,     0, 276140]),
    row("Asinh",                 "",          [    0,     0,   168,     0,     0, 318883]),
    row("Atan",                  "",          [    0,     0,   163,     0,     0, 174520]),
    row("Atanh",                 "",          [    0,     0,   159,     0,     0, 266280]),
    row("BitwiseNot",            "",          [    0,     0,   688,     0,     0,      0]),
    row("Ceil",                  "",          [    0,     0,   263,     0,     0,   1980]),
    row("Cos",                   "",          [    0,     0,   160,     0,     0, 146420]),
    row("Cosh",                  "",          [    0,     0,   162,     0,     0, 243499]),
    row("Erf",                   "",          [    0,     0,   178,     0,     0, 425833]),
    row("Exp",                   "",          [    0,     0,   159,     0,     0, 205466]),
    row("Floor",                 "",          [    0,     0,   261,     0,     0,   1953]),
    row("Identity",              "",          [    0,     0,   850,     0,     0,      0]),
    row("IsFinite",              "",          [    0,     0,   572,     0,     0,      0]),
    row("IsInf",                 "",          [    0,     0,   561,     0,     0,      0]),
    row("IsNan",                 "",          [    0,     0,   567,     0,     0,      0]),
    row("Log",                   "",          [    0,     0,   163,     0,     0, 230126]),
    row("Log10",                 "",          [    0,     0,   166,     0,     0, 237482]),
    row("Log2",                  "",          [    0,     0,   232,     0,     0, 326071]),
    row("LogicalNot",            "",          [    0,     0,   764,     0,     0,      0]),
    row("Negative",              "",          [    0,     0,   754,     0,     0,      0]),
    row("Round",                 "",          [    0,     0,   227,     0,     0,   1703]),
    row("Rsqrt",                 "",          [    0,     0,   207,     0,     0,  17661]),
    row("Sign",                  "",          [    0,     0,  2205,     0,     0,      0]),
    row("Sin",                   "",          [    0,     0,   154,     0,     0, 146904]),
    row("Sinh",                  "",          [    0,     0,   147,     0,     0, 246548]),
    row("Sqrt",                  "",          [    0,     0,   229,     0,     0,   5830]),
    row("Tan",                   "",          [    0,     0,   142,     0,     0, 308428]),
    row("Tanh",                  "",          [    0,     0,   149,     0,     0, 242533]),
    row("Trunc",                 "",          [    0,     0,   195,     0,     0,   1461]),
    row("Add",                   "",          [    0,     0,  1802,     0,     0,      0]),
    row("BitwiseAnd",            "",          [    0,     0,  1707,     0,     0,      0]),
    row("BitwiseOr",             "",          [    0,     0,  1661,     0,     0,      0]),
    row("BitwiseXor",            "",          [    0,     0,  1670,     0,     0,      0]),
    row("Div",                   "",          [    0,     0,  7169,     0,     0,      0]),
    row("Dot",                   "",          [  157,     0,  3140,     0,     0,      0]),
    row("FloorDiv",              "",          [    0,     0,  4609,     0,     0,      0]),
    row("FloorMod",              "",          [    0,     0,  2646,     0,     0,      0]),
    row("LeftShift",             "",          [    0,     0,  1961,     0,     0,      0]),
    row("LogicalAnd",            "",          [    0,     0,  1646,     0,     0,      0]),
    row("LogicalOr",             "",          [    0,     0,  1617,     0,     0,      0]),
    row("LogicalXor",            "",          [    0,     0,  1888,     0,     0,      0]),
    row("Max",                   "",          [    0,     0,  1637,     0,     0,      0]),
    row("Min",                   "",          [    0,     0,  1653,     0,     0,      0]),
    row("Mod",                   "",          [    0,     0,  2194,     0,     0,      0]),
    row("Mul",                   "",          [    0,     0,  4377,     0,     0,      0]),
    row("Power",                 "",          [    0,     0,   165,     0,     0, 444758]),
    row("RightShift",            "",          [    0,     0,  1844,     0,     0,      0]),
    row("Sub",                   "",          [    0,     0,  1769,     0,     0,      0]),
    row("ConstScalar",           "",          [    0,     0,   200,     0,     0,      0]),
    row("BnGradBiasScale",       "",          [ 2868,     0,   180,     0,     0,      0]),
    row("BnMeanVariance",        "",          [ 2470,     0,   155,     0,     0,      0]),
    row("BroadcastTo",           "",          [    0,     0,  1382,     0,     0,      0]),
    row("Compare",               "",          [    0,     0,   295,     0,     0,      0]),
    row("Concat",                "",          [    0,     0,   103,     0,     0,      0]),
    row("Conv",                  "forward",   [  292,     0, 17228,     0,     0,      0]),
    row("Conv",                  "backward",  [ 3522,     0,  9026,     0,     0,      0]),
    row("Reduce",                "",          [    0,  1400,   516,     0,     0,      0]),
    row("Reduce",                "prod",      [    0,  6544,   161,     0,     0,      0]),
    row("Reshape",               "",          [    0,     0,   112,     0,     0,      0]),
    row("Reverse",               "",          [    0,     0,  1377,     0,     0,      0]),
    row("Select",                "",          [    0,     0,   252,     0,     0,      0]),
    row("Slice",                 "",          [    0,     0,  1385,     0,     0,      0]),
    row("Transpose",             "",          [    0,     0,  1431,     0,     0,      0]),
    row("generate_proposals_v2", "",          [    0,  1305,   154,     0,   461, 253335]),
];

impl Schedule {
    /// Schedule version 1 (`docs/gas.md`; its calibration is in `docs/gas-calibration.md`).
    pub const V1: Schedule = Schedule {
        version: 1,
        node_base: 400,
        run: RunRates {
            base: 2700,
            input: 283,
            output: 283,
            arena: 283,
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

    /// The rates of operator `op` in class `class`, if the table has them.
    pub fn rates(&self, op: &str, class: &str) -> Option<Rates> {
        self.table
            .iter()
            .find(|row| row.op == op && row.class == class)
            .map(|row| row.rates)
    }

    /// The gas of one application of `op` doing `usage`: `node_base` plus the work priced at the
    /// rates of its class, rounded up to whole gas; `None` when the table has no such class.
    ///
    /// # Errors
    /// [`GasOverflow`] if the arithmetic exceeds `u64`.
    pub fn node_gas(&self, op: &str, usage: &Usage) -> Option<Result<u64, GasOverflow>> {
        let rates = self.rates(op, usage.class)?;
        let work = usage.work;
        Some(self.whole(
            self.node_base,
            &[
                (work.macs, rates.mac),
                (work.reads, rates.read),
                (work.writes, rates.write),
                (work.taps, rates.tap),
                (work.pairs, rates.pair),
                (work.evals, rates.eval),
            ],
        ))
    }

    /// The gas a run costs beyond its nodes, for inputs of `inputs` elements in all, outputs of
    /// `outputs` elements and an arena of `arena` elements.
    ///
    /// # Errors
    /// [`GasOverflow`] if the arithmetic exceeds `u64`.
    pub fn run_gas(&self, inputs: u64, outputs: u64, arena: u64) -> Result<u64, GasOverflow> {
        self.whole(
            self.run.base,
            &[
                (inputs, self.run.input),
                (outputs, self.run.output),
                (arena, self.run.arena),
            ],
        )
    }

    /// `base` + ⌈Σ count × rate / [`RATE_SCALE`]⌉, in checked arithmetic.
    fn whole(&self, base: u64, terms: &[(u64, u64)]) -> Result<u64, GasOverflow> {
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
        let rate = Schedule::V1.rates("relu", "").map_or(0, |r| r.write);
        assert!(rate > 0 && !rate.is_multiple_of(RATE_SCALE));
        let base = Schedule::V1.node_base;
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
        assert_eq!(
            Schedule::V1.run_gas(100, 100, 100),
            Ok(run.base + run.input + run.output + run.arena)
        );
    }
}
