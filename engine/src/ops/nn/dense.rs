//! Matrix products: `dense` (spec 001) and CINN `Dot` (spec 002).

use alloc::boxed::Box;
use alloc::sync::Arc;
use alloc::vec;
use alloc::vec::Vec;

use super::{add_bias_rows, check_mac_precision, mac_precision, vector_reduction};
use crate::attrs::{AttrKind, Attrs, in_range, spec};
use crate::error::Result;
use crate::fail;
use crate::fixed::round_shift;
use crate::kernels::gemm;
use crate::kernels::simd::Native;
use crate::kernels::wide::wide_dot;
use crate::kernels::{PackOrder, PackedRows};
use crate::ops::cinn_row;
use crate::ops::common::{count, expect_inputs, expect_rank, io_usage};
use crate::ops::fixed_point::FRAC_BITS;
use crate::ops::fixed_point::{fit, fixed_error, frac_bits};
use crate::ops::{Arity, Family, OpDef, Operator, Usage};
use crate::tensor::{MAX_PRECISION, TensorMut, TensorRef, TensorType};

/// Fully connected layer (spec 001 "dense"): `Y = X·Wᵀ + B`.
///
/// - **Inputs**: `X` (M, K); `W` (N, K); `B` (N) when `use_bias` is true. The number of inputs is
///   fixed by `use_bias`: 3 when true (the default), 2 when false.
/// - **Attributes**:
///
///   | name | kind | default | allowed values |
///   | --- | --- | --- | --- |
///   | `units` | integer | absent | [1, 2^32 − 1]; when present must equal N |
///   | `use_bias` | boolean | true | decides the number of inputs |
///
/// - **Output shape**: (M, N).
/// - **Semantics**: `Y[m, n] = Σ_{k < K} X[m, k] · W[n, k] + B[n]` (B[n] = 0 without bias). With
///   K = 0 the output is the bias (or zeros).
/// - **Output precision**: `X` and `W` must have precision ≤ 8 (the bias may have any). The output
///   precision is pX + pW + bits(K); with a bias, max(that, pB) + 1.
/// - **Rounding and overflow**: exact; sums run in 32-bit vector lanes, which the precision bound
///   keeps from wrapping (as for conv2d), and the bias is added with a checked addition.
/// - **Errors**, in order:
///   1. Number of inputs other than 3 with `use_bias` true, or 2 with `use_bias` false:
///      `ArityMismatch`.
///   2. `units` outside [1, 2^32 − 1]: `AttributeOutOfRange`.
///   3. `X` or `W` not of rank 2; the K of `X` and `W` differ; `units` ≠ N; `B` not of shape (N):
///      `ShapeMismatch`.
///   4. pX > 8 or pW > 8: `PrecisionConstraint`.
///   5. Output precision above 32: `PrecisionOverflow`.
pub const DENSE: OpDef = OpDef {
    code: 21,
    name: "dense",
    family: Family::Nn,
    arity: Arity::Between(2, 3),
    outputs: 1,
    attrs: &[
        spec("units", AttrKind::Int),
        spec("use_bias", AttrKind::Bool),
    ],
    build: Dense::build,
};

/// Fully connected layer (spec 001 "dense"): `Y = X·Wᵀ (+ B)`.
///
/// Its contract (inputs, shapes, precision, errors) is the doc comment of the row that
/// builds it.
#[derive(Debug)]
pub struct Dense {
    units: Option<u32>,
    use_bias: bool,
    /// The weights packed at load time, when they are a parameter.
    packed: Option<Arc<PackedRows>>,
}

impl Dense {
    fn build(attrs: &Attrs<'_>, n_inputs: usize) -> Result<Box<dyn Operator>> {
        let use_bias = attrs.bool_or("use_bias", true);
        expect_inputs(
            n_inputs,
            if use_bias { 3 } else { 2 },
            if use_bias {
                "with use_bias = true (the default)"
            } else {
                "with use_bias = false"
            },
        )?;
        let units = match attrs.opt_int("units") {
            Some(value) => Some(in_range("units", value, 1, i64::from(u32::MAX))?),
            None => None,
        };
        Ok(Box::new(Dense {
            units,
            use_bias,
            packed: None,
        }))
    }
}

impl Operator for Dense {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let (data, weight) = (&inputs[0], &inputs[1]);
        expect_rank(data, 2, "data")?;
        expect_rank(weight, 2, "weight")?;
        let [rows, depth] = [data.dims()[0], data.dims()[1]];
        let [units, weight_depth] = [weight.dims()[0], weight.dims()[1]];
        if depth != weight_depth {
            return Err(fail!(
                ShapeMismatch,
                "data {} and weight {} disagree on the reduction length K",
                data.shape,
                weight.shape
            ));
        }
        if let Some(expected) = self.units
            && expected != units
        {
            return Err(fail!(
                ShapeMismatch,
                "attribute units = {expected} differs from the weight's {units} rows"
            ));
        }
        let bias = if self.use_bias {
            let bias = &inputs[2];
            if bias.dims() != [units] {
                return Err(fail!(
                    ShapeMismatch,
                    "bias must have shape [{units}], got {}",
                    bias.shape
                ));
            }
            Some(bias)
        } else {
            None
        };
        check_mac_precision(data, "data")?;
        check_mac_precision(weight, "weight")?;
        let precision = mac_precision(data, weight, u64::from(depth), bias)?;
        Ok(vec![TensorType::new([rows, units], precision)])
    }

    fn usage(&self, inputs: &[TensorType], outputs: &[TensorType]) -> Result<Usage> {
        let depth = u64::from(inputs[0].dims()[1]);
        let mut usage = io_usage(inputs, outputs)?;
        if inputs[0].dims()[0] > 1 {
            // Several rows share every weight they read.
            usage.class = "batched";
        }
        usage.work.macs = count(&[outputs[0].shape.elements(), vector_reduction(depth)])?;
        Ok(usage)
    }

    fn packed_input(&self, _inputs: &[TensorType]) -> Option<(usize, PackOrder)> {
        Some((1, PackOrder::Source))
    }

    fn set_packed(&mut self, packed: Arc<PackedRows>) {
        self.packed = Some(packed);
    }

    fn scratch_bytes(&self, inputs: &[TensorType]) -> Result<u64> {
        let [rows, depth] = [inputs[0].dims()[0], inputs[0].dims()[1]].map(u64::from);
        let weights = if self.packed.is_some() {
            0
        } else {
            PackedRows::bytes(u64::from(inputs[1].dims()[0]), depth)
        };
        Ok(PackedRows::bytes(rows, depth).saturating_add(weights))
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        let [rows, depth] = [inputs[0].dims[0], inputs[0].dims[1]].map(|d| d as usize);
        let units = inputs[1].dims[0] as usize;
        let data = PackedRows::pack(inputs[0].data, rows, depth);
        let packed;
        let weights = match &self.packed {
            Some(weights) => weights,
            None => {
                packed = PackedRows::pack(inputs[1].data, units, depth);
                &packed
            }
        };
        let out = &mut *outputs[0].data;
        gemm::dot_products::<Native>(
            data.values(),
            rows,
            weights.values(),
            units,
            data.stride(),
            gemm::Strided {
                data: out,
                row_step: units,
                column_step: 1,
            },
        );
        if self.use_bias {
            add_bias_rows(out, inputs[2].data, units)?;
        }
        Ok(())
    }
}

/// Dot product (spec 002 "Dot": xᵀy) with numpy's rules for operands of rank 1 and 2.
///
/// - **Inputs**: x, y, each of rank 1 or 2, sharing the reduction length K.
/// - **Attributes**: `frac_bits` F (integer, default 0, range 0..=30).
/// - **Output shape**:
///
///   | x | y | output |
///   | --- | --- | --- |
///   | (K) | (K) | [] (a rank-0 scalar, one element) |
///   | (M, K) | (K) | (M) |
///   | (K) | (K, N) | (N) |
///   | (M, K) | (K, N) | (M, N) |
///
/// - **Semantics**: `z[m, n] = round(Σ_{k < K} x[m, k]·y[k, n] / 2^F)`: the sum of products is exact
///   (i128; at most 2^26 products below 2^62), then rounded once, halves away from zero. K = 0 gives
///   0.
/// - **Output precision**: 32.
/// - **Errors**: `ShapeMismatch` (an operand of rank 0 or above 2, K differs);
///   `IntegerOverflow` (a result outside ±(2^31 − 1)).
/// - **Working memory**: y's columns as rows, 4·K·N bytes, when N > 1.
pub const DOT: OpDef = cinn_row(155, "Dot", Arity::Exactly(2), &[FRAC_BITS], |attrs, _| {
    Ok(Box::new(Dot {
        frac_bits: frac_bits(attrs)?,
    }))
});

/// Dot product (spec 002 "Dot": xᵀy) with numpy's rules for ranks 1 and 2.
///
/// Its contract (inputs, shapes, precision, errors) is the doc comment of the row that
/// builds it.
#[derive(Debug)]
pub struct Dot {
    frac_bits: u32,
}

impl Dot {
    /// (M, K, N) with M or N of 1 for vectors, and the output dims.
    fn geometry(x: &[u32], y: &[u32]) -> Result<([usize; 3], Vec<u32>)> {
        let (m, k, out_m) = match x {
            [k] => (1, *k, None),
            [m, k] => (*m, *k, Some(*m)),
            _ => {
                return Err(fail!(
                    ShapeMismatch,
                    "Dot takes operands of rank 1 or 2, x has shape {x:?}"
                ));
            }
        };
        let (k2, n, out_n) = match y {
            [k] => (*k, 1, None),
            [k, n] => (*k, *n, Some(*n)),
            _ => {
                return Err(fail!(
                    ShapeMismatch,
                    "Dot takes operands of rank 1 or 2, y has shape {y:?}"
                ));
            }
        };
        if k != k2 {
            return Err(fail!(
                ShapeMismatch,
                "Dot: x {x:?} and y {y:?} disagree on the reduction length"
            ));
        }
        let out: Vec<u32> = out_m.into_iter().chain(out_n).collect();
        Ok(([m as usize, k as usize, n as usize], out))
    }
}

impl Operator for Dot {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let (_, out) = Dot::geometry(inputs[0].dims(), inputs[1].dims())?;
        Ok(vec![TensorType::new(out, MAX_PRECISION)])
    }

    /// Class "matrix" when y has more than one column (its columns are read as rows, every
    /// element of y once), "" when y is a vector.
    fn usage(&self, inputs: &[TensorType], outputs: &[TensorType]) -> Result<Usage> {
        let ([_, k, n], _) = Dot::geometry(inputs[0].dims(), inputs[1].dims())?;
        let mut usage = io_usage(inputs, outputs)?;
        usage.class = if n > 1 { "matrix" } else { "" };
        usage.work.macs = count(&[outputs[0].shape.elements(), k as u64])?;
        Ok(usage)
    }

    /// y's columns copied as rows (K·N values) when y has more than one column.
    fn scratch_bytes(&self, inputs: &[TensorType]) -> Result<u64> {
        let ([_, k, n], _) = Dot::geometry(inputs[0].dims(), inputs[1].dims())?;
        if n > 1 {
            count(&[k as u64, n as u64, 4])
        } else {
            Ok(0)
        }
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        let ([m, k, n], _) = Dot::geometry(inputs[0].dims, inputs[1].dims)?;
        let (x, y) = (inputs[0].data, inputs[1].data);
        if x.len() != m * k || y.len() != k * n {
            return Err(fail!(
                ShapeMismatch,
                "Dot operands do not hold the elements of their shapes"
            ));
        }
        if m == 0 || k == 0 || n == 0 {
            // Every output (if any) is the empty sum, 0: the outputs come zeroed.
            return Ok(());
        }
        // The columns of y as contiguous rows (y itself when it has one column).
        let transposed: Vec<i32>;
        let columns = if n == 1 {
            y
        } else {
            let mut t = vec![0i32; k * n];
            for (i, row) in y.chunks_exact(n).enumerate() {
                for (j, &value) in row.iter().enumerate() {
                    t[j * k + i] = value;
                }
            }
            transposed = t;
            &transposed
        };
        let out = &mut *outputs[0].data;
        for (x_row, out_row) in x.chunks_exact(k).zip(out.chunks_exact_mut(n)) {
            for (slot, column) in out_row.iter_mut().zip(columns.chunks_exact(k)) {
                // Exact: each product below 2^62, at most 2^26 terms (kernels::wide).
                let sum = wide_dot(x_row, column);
                *slot = fit(i64::from(
                    round_shift(sum, self.frac_bits).map_err(|e| fixed_error(e, "Dot", 0))?,
                ))?;
            }
        }
        Ok(())
    }
}
