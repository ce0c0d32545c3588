//! The gas schedule of the CVM engine: named, versioned cost parameters and the pricing function.
//!
//! Operators describe the work they will do as a [`Usage`]: a count of abstract work units for
//! each [`Param`] (multiply-accumulates, element copies, window comparisons, ...). The counts
//! depend only on shapes and attributes, never on tensor values, so the price of a whole model is
//! known before it runs. [`Schedule::price`] turns a usage into gas with checked arithmetic.
//!
//! Every operator reports the counts of every schedule version side by side; a schedule prices
//! the parameters it uses and gives the others cost 0. Version 1 uses ids 0–6; version 2 keeps
//! `node_base` and `output_element` and replaces the rest with ids 7–9, whose counts follow the
//! kernels that really run (see `docs/gas.md`); version 3 prices the same as version 2 but
//! counts its steps as id 10, which follows the kernels made faster after version 2; versions 4,
//! 5 and 6 do the same with ids 11–12, 13–14 and 15.
//!
//! Architecture Invariant: parameter ids ([`Param`] discriminants), the counts an operator reports
//! for them, and the numbers of a published schedule version never change. A new price list is a
//! new [`Schedule`] with a new version.
#![no_std]

/// A named cost parameter of the schedule. The discriminant is the parameter's frozen id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u16)]
pub enum Param {
    /// Fixed cost of dispatching one node: attribute lookups, setting up its operand and output
    /// views.
    NodeBase = 0,
    /// Per element of every output tensor of a node (memory traffic and zero-fill).
    OutputElement = 1,
    /// Per element moved without arithmetic (flatten, reshape, transpose, slicing, ...).
    ElementCopy = 2,
    /// Per element of a simple arithmetic or comparison step (add, clip, shift, relu, ...).
    ElementArith = 3,
    /// Per integer multiply-accumulate (conv2d, dense).
    MultiplyAccumulate = 4,
    /// Per element visited in a pooling window, and per pairwise box comparison of
    /// `non_max_suppression`.
    WindowCompare = 5,
    /// Per element and unit of weight of a fixed-point transcendental function (CINN `Exp`,
    /// `Sin`, …); each function's weight is its measured cost relative to an add.
    Transcendental = 6,
    /// One step of scalar work, about five wasm instructions. Each operator's formula states how
    /// many steps an element (or a window, a row, a pair of boxes) costs it, from the measured
    /// cost of the kernel that runs; a fixed number of steps covers its set-up.
    Step = 7,
    /// Sixteen 8-bit multiply-accumulates done as one vector step: conv2d and dense count
    /// ⌈K/16⌉ groups per output element for a reduction of length K.
    MacGroup = 8,
    /// One exact multiply-accumulate of 32-bit operands into an `i128` sum (CINN `Conv`, `Dot`,
    /// `Reduce` kProd and the batch-norm primitives).
    WideMultiplyAccumulate = 9,
    /// One step as version 3 counts it: the [`Param::Step`] count, except for the operators whose
    /// kernels became faster after version 2 (the depthwise conv2d kernel, the vector max_pool2d
    /// kernel, `cvm_clip`, `cvm_left_shift`, `cvm_right_shift`), which count their steps anew.
    StepV3 = 10,
    /// One step as version 4 counts it: the [`Param::StepV3`] count, except for
    /// `generate_proposals_v2`, whose IoU test became faster after version 3 and which counts
    /// its steps anew.
    StepV4 = 11,
    /// One exact wide multiply-accumulate as version 4 counts it: the
    /// [`Param::WideMultiplyAccumulate`] count, except for CINN `Dot` and forward `Conv`, whose
    /// exact dot products became vector loops after version 3 and which count their work in
    /// [`Param::StepV4`] instead.
    WideMultiplyAccumulateV4 = 12,
    /// One step as version 5 counts it: the [`Param::StepV4`] count, except for `conv2d`, whose
    /// depthwise and pointwise kernels became faster after version 4 and which counts its steps
    /// anew.
    StepV5 = 13,
    /// Sixteen 8-bit multiply-accumulates as version 5 counts them: the [`Param::MacGroup`]
    /// count, except for `conv2d`, whose pointwise kernel counts its work in
    /// [`Param::StepV5`] instead.
    MacGroupV5 = 14,
    /// One step as version 6 counts it: the [`Param::StepV5`] count, except for `conv2d` on the
    /// shapes of its 3 × 3 stride-2 depthwise kernel, added after version 5, which count their
    /// steps anew.
    StepV6 = 15,
}

impl Param {
    /// Every parameter, in id order.
    pub const ALL: [Param; 16] = [
        Param::NodeBase,
        Param::OutputElement,
        Param::ElementCopy,
        Param::ElementArith,
        Param::MultiplyAccumulate,
        Param::WindowCompare,
        Param::Transcendental,
        Param::Step,
        Param::MacGroup,
        Param::WideMultiplyAccumulate,
        Param::StepV3,
        Param::StepV4,
        Param::WideMultiplyAccumulateV4,
        Param::StepV5,
        Param::MacGroupV5,
        Param::StepV6,
    ];

    /// Number of parameters in the schedule.
    pub const COUNT: usize = Self::ALL.len();

    /// The frozen numeric id of the parameter.
    pub const fn id(self) -> u16 {
        self as u16
    }

    /// The parameter with frozen id `id`, if there is one.
    pub fn from_id(id: u16) -> Option<Param> {
        Self::ALL.iter().copied().find(|param| param.id() == id)
    }

    /// The parameter's name as written in `docs/gas.md`.
    pub const fn name(self) -> &'static str {
        match self {
            Param::NodeBase => "node_base",
            Param::OutputElement => "output_element",
            Param::ElementCopy => "element_copy",
            Param::ElementArith => "element_arith",
            Param::MultiplyAccumulate => "multiply_accumulate",
            Param::WindowCompare => "window_compare",
            Param::Transcendental => "transcendental",
            Param::Step => "step",
            Param::MacGroup => "mac_group",
            Param::WideMultiplyAccumulate => "wide_multiply_accumulate",
            Param::StepV3 => "step_v3",
            Param::StepV4 => "step_v4",
            Param::WideMultiplyAccumulateV4 => "wide_multiply_accumulate_v4",
            Param::StepV5 => "step_v5",
            Param::MacGroupV5 => "mac_group_v5",
            Param::StepV6 => "step_v6",
        }
    }
}

/// How much work of each kind one node does: `(parameter, count)` pairs.
///
/// A parameter may appear more than once; the counts add up.
pub type Usage<'a> = &'a [(Param, u64)];

/// A price list: the gas charged per unit of every [`Param`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    /// The schedule version. Outcome gas figures are only comparable under the same version.
    pub version: u32,
    costs: [u64; Param::COUNT],
}

/// Gas arithmetic overflowed `u64`. Only reachable through absurd shapes, which validation
/// limits; it is still reported instead of wrapping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GasOverflow;

impl Schedule {
    /// Schedule version 1: the first published price list (see `docs/gas.md`).
    pub const V1: Schedule = Schedule {
        version: 1,
        costs: [
            100, // node_base
            1,   // output_element
            1,   // element_copy
            1,   // element_arith
            2,   // multiply_accumulate
            1,   // window_compare
            16,  // transcendental
            0,   // step
            0,   // mac_group
            0,   // wide_multiply_accumulate
            0,   // step_v3
            0,   // step_v4
            0,   // wide_multiply_accumulate_v4
            0,   // step_v5
            0,   // mac_group_v5
            0,   // step_v6
        ],
    };

    /// Schedule version 2: calibrated against the measured cost of every operator (see
    /// `docs/gas.md`, "Calibration"). One unit of gas is about five wasm instructions.
    pub const V2: Schedule = Schedule {
        version: 2,
        costs: [
            400, // node_base
            2,   // output_element
            0,   // element_copy
            0,   // element_arith
            0,   // multiply_accumulate
            0,   // window_compare
            0,   // transcendental
            1,   // step
            3,   // mac_group
            32,  // wide_multiply_accumulate
            0,   // step_v3
            0,   // step_v4
            0,   // wide_multiply_accumulate_v4
            0,   // step_v5
            0,   // mac_group_v5
            0,   // step_v6
        ],
    };

    /// Schedule version 3: the prices of version 2, with steps counted after the kernels made
    /// faster since ([`Param::StepV3`]); recalibrated (see `docs/gas.md`, "Calibration").
    pub const V3: Schedule = Schedule {
        version: 3,
        costs: [
            400, // node_base
            2,   // output_element
            0,   // element_copy
            0,   // element_arith
            0,   // multiply_accumulate
            0,   // window_compare
            0,   // transcendental
            0,   // step
            3,   // mac_group
            32,  // wide_multiply_accumulate
            1,   // step_v3
            0,   // step_v4
            0,   // wide_multiply_accumulate_v4
            0,   // step_v5
            0,   // mac_group_v5
            0,   // step_v6
        ],
    };

    /// Schedule version 4: the prices of version 3, with steps and wide multiply-accumulates
    /// counted after the IoU test of `generate_proposals_v2` and the exact dot products of CINN
    /// `Dot` and forward `Conv` became faster ([`Param::StepV4`],
    /// [`Param::WideMultiplyAccumulateV4`]); recalibrated (see `docs/gas.md`, "Calibration").
    pub const V4: Schedule = Schedule {
        version: 4,
        costs: [
            400, // node_base
            2,   // output_element
            0,   // element_copy
            0,   // element_arith
            0,   // multiply_accumulate
            0,   // window_compare
            0,   // transcendental
            0,   // step
            3,   // mac_group
            0,   // wide_multiply_accumulate
            0,   // step_v3
            1,   // step_v4
            32,  // wide_multiply_accumulate_v4
            0,   // step_v5
            0,   // mac_group_v5
            0,   // step_v6
        ],
    };

    /// Schedule version 5: the prices of version 4, with steps and multiply-accumulate groups
    /// counted after the depthwise and pointwise conv2d kernels became faster
    /// ([`Param::StepV5`], [`Param::MacGroupV5`]); recalibrated (see `docs/gas.md`,
    /// "Calibration").
    pub const V5: Schedule = Schedule {
        version: 5,
        costs: [
            400, // node_base
            2,   // output_element
            0,   // element_copy
            0,   // element_arith
            0,   // multiply_accumulate
            0,   // window_compare
            0,   // transcendental
            0,   // step
            0,   // mac_group
            0,   // wide_multiply_accumulate
            0,   // step_v3
            0,   // step_v4
            32,  // wide_multiply_accumulate_v4
            1,   // step_v5
            3,   // mac_group_v5
            0,   // step_v6
        ],
    };

    /// Schedule version 6: the prices of version 5, with steps counted after the 3 × 3 stride-2
    /// depthwise conv2d kernel was added ([`Param::StepV6`]); calibrated (see `docs/gas.md`,
    /// "Calibration").
    pub const V6: Schedule = Schedule {
        version: 6,
        costs: [
            400, // node_base
            2,   // output_element
            0,   // element_copy
            0,   // element_arith
            0,   // multiply_accumulate
            0,   // window_compare
            0,   // transcendental
            0,   // step
            0,   // mac_group
            0,   // wide_multiply_accumulate
            0,   // step_v3
            0,   // step_v4
            32,  // wide_multiply_accumulate_v4
            0,   // step_v5
            3,   // mac_group_v5
            1,   // step_v6
        ],
    };

    /// Every published schedule, oldest first.
    pub const ALL: [&'static Schedule; 6] = [
        &Self::V1,
        &Self::V2,
        &Self::V3,
        &Self::V4,
        &Self::V5,
        &Self::V6,
    ];

    /// The schedule the engine uses when a caller names none: the calibrated version 6.
    pub const CURRENT: &'static Schedule = &Self::V6;

    /// The schedule with version `version`, if it exists.
    pub fn by_version(version: u32) -> Option<&'static Schedule> {
        Self::ALL
            .iter()
            .copied()
            .find(|schedule| schedule.version == version)
    }

    /// Gas per unit of `param`.
    pub const fn cost(&self, param: Param) -> u64 {
        self.costs[param as usize]
    }

    /// The gas of `usage`: Σ count × cost(param), in checked `u64` arithmetic.
    ///
    /// # Errors
    /// [`GasOverflow`] if any product or the sum exceeds `u64::MAX`.
    pub fn price(&self, usage: Usage<'_>) -> Result<u64, GasOverflow> {
        usage.iter().try_fold(0u64, |total, &(param, count)| {
            count
                .checked_mul(self.cost(param))
                .and_then(|gas| total.checked_add(gas))
                .ok_or(GasOverflow)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn param_ids_are_frozen() {
        let expected: [(Param, u16, &str); Param::COUNT] = [
            (Param::NodeBase, 0, "node_base"),
            (Param::OutputElement, 1, "output_element"),
            (Param::ElementCopy, 2, "element_copy"),
            (Param::ElementArith, 3, "element_arith"),
            (Param::MultiplyAccumulate, 4, "multiply_accumulate"),
            (Param::WindowCompare, 5, "window_compare"),
            (Param::Transcendental, 6, "transcendental"),
            (Param::Step, 7, "step"),
            (Param::MacGroup, 8, "mac_group"),
            (Param::WideMultiplyAccumulate, 9, "wide_multiply_accumulate"),
            (Param::StepV3, 10, "step_v3"),
            (Param::StepV4, 11, "step_v4"),
            (
                Param::WideMultiplyAccumulateV4,
                12,
                "wide_multiply_accumulate_v4",
            ),
            (Param::StepV5, 13, "step_v5"),
            (Param::MacGroupV5, 14, "mac_group_v5"),
            (Param::StepV6, 15, "step_v6"),
        ];
        for (param, id, name) in expected {
            assert_eq!(param.id(), id);
            assert_eq!(param.name(), name);
            assert_eq!(Param::from_id(id), Some(param));
        }
        assert_eq!(Param::from_id(Param::COUNT as u16), None);
    }

    /// `schedule` is version `version` with `costs` (in parameter id order), and found by it.
    fn assert_frozen(schedule: &Schedule, version: u32, costs: [u64; Param::COUNT]) {
        assert_eq!(Param::ALL.map(|param| schedule.cost(param)), costs);
        assert_eq!(schedule.version, version);
        assert_eq!(Schedule::by_version(version), Some(schedule));
    }

    #[test]
    fn published_numbers_are_frozen() {
        let published: [(&Schedule, u32, [u64; Param::COUNT]); 6] = [
            (
                &Schedule::V1,
                1,
                [100, 1, 1, 1, 2, 1, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            ),
            (
                &Schedule::V2,
                2,
                [400, 2, 0, 0, 0, 0, 0, 1, 3, 32, 0, 0, 0, 0, 0, 0],
            ),
            (
                &Schedule::V3,
                3,
                [400, 2, 0, 0, 0, 0, 0, 0, 3, 32, 1, 0, 0, 0, 0, 0],
            ),
            (
                &Schedule::V4,
                4,
                [400, 2, 0, 0, 0, 0, 0, 0, 3, 0, 0, 1, 32, 0, 0, 0],
            ),
            (
                &Schedule::V5,
                5,
                [400, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32, 1, 3, 0],
            ),
            (
                &Schedule::V6,
                6,
                [400, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32, 0, 3, 1],
            ),
        ];
        for (schedule, version, costs) in published {
            assert_frozen(schedule, version, costs);
        }
        assert_eq!(Schedule::by_version(0), None);
        assert_eq!(Schedule::by_version(7), None);
        assert_eq!(Schedule::CURRENT, &Schedule::V6);
    }

    #[test]
    fn each_schedule_prices_only_its_own_counts() {
        // Each version ignores the counts of the others, so one usage list carrying all of
        // them is priced correctly by each.
        let usage = [
            (Param::NodeBase, 1),
            (Param::OutputElement, 10),
            (Param::ElementArith, 10),
            (Param::Step, 30),
            (Param::MacGroup, 5),
            (Param::WideMultiplyAccumulate, 2),
            (Param::StepV3, 7),
            (Param::StepV4, 6),
            (Param::WideMultiplyAccumulateV4, 1),
            (Param::StepV5, 4),
            (Param::MacGroupV5, 2),
            (Param::StepV6, 5),
        ];
        assert_eq!(Schedule::V1.price(&usage), Ok(100 + 10 + 10));
        assert_eq!(Schedule::V2.price(&usage), Ok(400 + 20 + 30 + 15 + 64));
        assert_eq!(Schedule::V3.price(&usage), Ok(400 + 20 + 7 + 15 + 64));
        assert_eq!(Schedule::V4.price(&usage), Ok(400 + 20 + 6 + 15 + 32));
        assert_eq!(Schedule::V5.price(&usage), Ok(400 + 20 + 32 + 4 + 6));
        assert_eq!(Schedule::V6.price(&usage), Ok(400 + 20 + 32 + 5 + 6));
    }

    #[test]
    fn price_sums_products() {
        let usage = [
            (Param::NodeBase, 1),
            (Param::MultiplyAccumulate, 10),
            (Param::OutputElement, 3),
            (Param::MultiplyAccumulate, 1),
        ];
        assert_eq!(Schedule::V1.price(&usage), Ok(100 + 22 + 3));
        assert_eq!(Schedule::V1.price(&[]), Ok(0));
    }

    #[test]
    fn price_overflow_is_an_error() {
        assert_eq!(
            Schedule::V1.price(&[(Param::MultiplyAccumulate, u64::MAX / 2 + 1)]),
            Err(GasOverflow)
        );
        assert_eq!(
            Schedule::V1.price(&[(Param::ElementCopy, u64::MAX), (Param::ElementCopy, 1)]),
            Err(GasOverflow)
        );
    }
}
