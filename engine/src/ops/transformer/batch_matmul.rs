//! The product of two activations: `batch_matmul` multiplies int8 matrices batched over
//! leading axes (attention's Q·Kᵀ and P·V, a projection of a rank-3 activation), on the same
//! `i16` dot tiles as `dense` and `conv2d`.

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;

use crate::attrs::{AttrKind, Attrs, spec};
use crate::error::Result;
use crate::fail;
use crate::kernels::PackedRows;
use crate::kernels::gemm;
use crate::kernels::pack::{narrow16, padded_depth};
use crate::kernels::simd::Native;
use crate::ops::common::{count, io_usage};
use crate::ops::math::broadcast::broadcast_shape;
use crate::ops::nn::{check_mac_precision, mac_precision, vector_reduction};
use crate::ops::{Arity, Family, OpDef, Operator, Usage};
use crate::tensor::{TensorMut, TensorRef, TensorType};

/// Batched matrix product of two activations: `Y = A·B`, or `A·Bᵀ` with `transpose_b`.
///
/// - **Inputs**: `A` (…, M, K); `B` (…, K, N), or (…, N, K) when `transpose_b` is true. Both
///   of rank ≥ 2; the leading axes (all but the last two) broadcast as numpy's: aligned at the
///   right, each pair of dimensions equal or one of them 1, a missing axis counting as 1.
/// - **Attributes**:
///
///   | name | kind | default | allowed values |
///   | --- | --- | --- | --- |
///   | `transpose_b` | boolean | false | B holds the rows of Bᵀ |
///
/// - **Output shape**: (broadcast leading axes…, M, N).
/// - **Semantics**: for every index b of the broadcast leading axes (read in A and B at 0
///   along their axes of dimension 1), `Y[b, m, n] = Σ_{k < K} A[b, m, k] · B[b, k, n]`
///   (`B[b, n, k]` with `transpose_b`). With K = 0 every output is 0.
/// - **Output precision**: `A` and `B` must have precision ≤ 8; the output precision is
///   pA + pB + bits(K), as `dense` without a bias.
/// - **Rounding and overflow**: exact: the sums run in 32-bit vector lanes, which the precision
///   bound keeps below 2^30 (K < 2^16, |A|, |B| ≤ 127), as for `dense`.
/// - **Errors**, in order:
///   1. `A` or `B` of rank below 2; the K of `A` and `B` differ; the leading axes do not
///      broadcast: `ShapeMismatch`.
///   2. pA > 8 or pB > 8: `PrecisionConstraint`.
///   3. Output precision above 32: `PrecisionOverflow`.
/// - **Gas**: per multiply-accumulate (K rounded up to the vector width of 16) and per
///   element read and written; class "columns" without `transpose_b` (B's columns are
///   gathered into rows first, which costs more per element read).
/// - **Working memory**: every matrix of `A` and of `B` packed as rows of K `i16` padded to a
///   multiple of 16, 2 · 16⌈K/16⌉ · (M · (matrices of A) + N · (matrices of B)) bytes.
pub const BATCH_MATMUL: OpDef = OpDef {
    code: 400,
    name: "batch_matmul",
    family: Family::Transformer,
    arity: Arity::Exactly(2),
    outputs: 1,
    attrs: &[spec("transpose_b", AttrKind::Bool)],
    build: BatchMatmul::build,
};

/// Batched matrix product of two activations.
///
/// Its contract is the doc comment of the row that builds it.
#[derive(Clone, Copy, Debug)]
pub struct BatchMatmul {
    transpose_b: bool,
}

/// The sizes of a product: the output's leading axes, the matrices of each operand, M, K, N.
struct Geometry {
    /// The broadcast leading axes.
    batch: Vec<u32>,
    /// The leading axes of A and of B, each left-padded with 1 to the rank of `batch`.
    a_batch: Vec<u32>,
    b_batch: Vec<u32>,
    m: usize,
    k: usize,
    n: usize,
}

impl Geometry {
    fn of(a: &[u32], b: &[u32], transpose_b: bool) -> Result<Geometry> {
        let (Some((&[m, k], a_lead)), Some((&[b0, b1], b_lead))) =
            (split_matrix(a), split_matrix(b))
        else {
            return Err(fail!(
                ShapeMismatch,
                "batch_matmul takes operands of rank at least 2, got A {a:?} and B {b:?}"
            ));
        };
        let (bk, n) = if transpose_b { (b1, b0) } else { (b0, b1) };
        if k != bk {
            return Err(fail!(
                ShapeMismatch,
                "A {a:?} and B {b:?} disagree on the reduction length K ({k} vs {bk}{})",
                if transpose_b {
                    ", B read as (…, N, K)"
                } else {
                    ""
                }
            ));
        }
        let batch = broadcast_shape(a_lead, b_lead).map_err(|_| {
            fail!(
                ShapeMismatch,
                "the leading axes of A {a:?} and B {b:?} do not broadcast ({a_lead:?} vs {b_lead:?})"
            )
        })?;
        let pad = |lead: &[u32]| {
            let mut dims = vec![1; batch.len() - lead.len()];
            dims.extend_from_slice(lead);
            dims
        };
        Ok(Geometry {
            a_batch: pad(a_lead),
            b_batch: pad(b_lead),
            batch,
            m: m as usize,
            k: k as usize,
            n: n as usize,
        })
    }

    /// For every output matrix in row-major order, the matrix of A and of B it multiplies.
    fn pairs(&self) -> Vec<(usize, usize)> {
        let total: usize = self.batch.iter().map(|&d| d as usize).product();
        let mut pairs = Vec::with_capacity(total);
        let mut index = vec![0u32; self.batch.len()];
        for _ in 0..total {
            let (mut a, mut b) = (0usize, 0usize);
            for ((&i, &da), &db) in index.iter().zip(&self.a_batch).zip(&self.b_batch) {
                a = a * da as usize + if da == 1 { 0 } else { i as usize };
                b = b * db as usize + if db == 1 { 0 } else { i as usize };
            }
            pairs.push((a, b));
            // The next index, last axis fastest.
            for (i, &d) in index.iter_mut().zip(&self.batch).rev() {
                *i += 1;
                if *i < d {
                    break;
                }
                *i = 0;
            }
        }
        pairs
    }
}

/// A shape split into its last two axes and the leading ones (None below rank 2).
fn split_matrix(dims: &[u32]) -> Option<(&[u32; 2], &[u32])> {
    let lead = dims.len().checked_sub(2)?;
    let (leading, last) = dims.split_at(lead);
    Some((last.try_into().ok()?, leading))
}

/// Matrices of a leading shape.
fn matrices(lead: &[u32]) -> u64 {
    lead.iter().map(|&d| u64::from(d)).product()
}

/// `count` rows of `depth` values: each (K, N) matrix of `source` read by columns, so that row
/// j of a matrix is its column j, packed as [`PackedRows`] rows.
fn pack_columns(source: &[i32], count: usize, depth: usize, columns: usize) -> PackedRows {
    let stride = padded_depth(depth);
    let mut values = vec![0i16; count * columns * stride];
    if depth > 0 && columns > 0 {
        for (packed, matrix) in values
            .chunks_exact_mut(columns * stride)
            .zip(source.chunks_exact(depth * columns))
        {
            for (j, row) in packed.chunks_exact_mut(stride).enumerate() {
                let column = matrix.iter().skip(j).step_by(columns);
                for (slot, &value) in row.iter_mut().zip(column) {
                    *slot = narrow16(value);
                }
            }
        }
    }
    PackedRows::from_rows(values, count * columns, stride)
}

impl BatchMatmul {
    fn build(attrs: &Attrs<'_>, _inputs: usize) -> Result<Box<dyn Operator>> {
        Ok(Box::new(BatchMatmul {
            transpose_b: attrs.bool_or("transpose_b", false),
        }))
    }
}

impl Operator for BatchMatmul {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let (a, b) = (&inputs[0], &inputs[1]);
        let geometry = Geometry::of(a.dims(), b.dims(), self.transpose_b)?;
        check_mac_precision(a, "A")?;
        check_mac_precision(b, "B")?;
        let precision = mac_precision(a, b, geometry.k as u64, None)?;
        let mut dims = geometry.batch;
        dims.extend([geometry.m as u32, geometry.n as u32]);
        Ok(vec![TensorType::new(dims, precision)])
    }

    fn usage(&self, inputs: &[TensorType], outputs: &[TensorType]) -> Result<Usage> {
        let geometry = Geometry::of(inputs[0].dims(), inputs[1].dims(), self.transpose_b)?;
        let mut usage = io_usage(inputs, outputs)?;
        if !self.transpose_b {
            // B's columns gathered into rows before the products.
            usage.class = "columns";
        }
        usage.work.macs = count(&[
            outputs[0].shape.elements(),
            vector_reduction(geometry.k as u64),
        ])?;
        Ok(usage)
    }

    fn scratch_bytes(&self, inputs: &[TensorType]) -> Result<u64> {
        let (a, b) = (inputs[0].dims(), inputs[1].dims());
        let geometry = Geometry::of(a, b, self.transpose_b)?;
        let (a_rows, b_rows) = (
            count(&[matrices(&geometry.a_batch), geometry.m as u64])?,
            count(&[matrices(&geometry.b_batch), geometry.n as u64])?,
        );
        let depth = geometry.k as u64;
        Ok(PackedRows::bytes(a_rows, depth).saturating_add(PackedRows::bytes(b_rows, depth)))
    }

    fn writes_every_output(&self) -> bool {
        true
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        let geometry = Geometry::of(inputs[0].dims, inputs[1].dims, self.transpose_b)?;
        let Geometry { m, k, n, .. } = geometry;
        let a_count = matrices(&geometry.a_batch) as usize;
        let b_count = matrices(&geometry.b_batch) as usize;
        let a = PackedRows::pack(inputs[0].data, a_count * m, k);
        let b = if self.transpose_b {
            PackedRows::pack(inputs[1].data, b_count * n, k)
        } else {
            pack_columns(inputs[1].data, b_count, k, n)
        };
        let stride = a.stride();
        let out = &mut *outputs[0].data;
        if m == 0 || n == 0 {
            return Ok(());
        }
        for ((ia, ib), matrix) in geometry
            .pairs()
            .into_iter()
            .zip(out.chunks_exact_mut(m * n))
        {
            let (Some(a_rows), Some(b_rows)) = (
                a.values().get(ia * m * stride..),
                b.values().get(ib * n * stride..),
            ) else {
                return Err(fail!(
                    ShapeMismatch,
                    "batch_matmul operands do not hold the elements of their shapes"
                ));
            };
            gemm::dot_products::<Native>(
                a_rows,
                m,
                b_rows,
                n,
                stride,
                gemm::Strided {
                    data: matrix,
                    row_step: n,
                    column_step: 1,
                },
            );
        }
        Ok(())
    }
}
