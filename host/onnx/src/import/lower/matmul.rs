//! Products: Gemm and MatMul by a constant become a dense layer (a bias `Add` after it folded
//! in by [`add`](Lowering::add)); MatMul of two computed tensors a batched product (a scaling by
//! a constant after it folded in by [`scale_product`](Lowering::scale_product)).

use crate::import::ImportError;
use crate::import::graph::{Dense, FTensor, Op};
use crate::model::Node;

use super::elementwise::broadcast;
use super::{Lowering, Slot};

impl<'a> Lowering<'a> {
    /// Lowers the node if it is one of this family's: Gemm, MatMul.
    pub(super) fn lower_matmul(&mut self, node: &'a Node) -> Option<Result<(), ImportError>> {
        Some(match node.op_type.as_str() {
            "Gemm" => self.gemm(node),
            "MatMul" => self.matmul(node),
            _ => return None,
        })
    }

    fn gemm(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let x = self.value(node, 0)?;
        self.no_pad(&[x])?;
        let Some(b) = self.float_constant(node, 1)? else {
            return Err(self.error("input 1 (B) is missing"));
        };
        let c = self.float_constant(node, 2)?;
        if self.int(node, "transA", 0)? != 0 {
            return Err(self.error("transA = 1 is not supported: the data must be (1, K)"));
        }
        let alpha = self.float(node, "alpha", 1.0)?;
        let beta = self.float(node, "beta", 1.0)?;
        let trans_b = self.int(node, "transB", 0)? != 0;
        let xs = self.values[x].shape.clone();
        let [m, k] = <[usize; 2]>::try_from(xs.as_slice())
            .map_err(|_| self.error(format!("A of shape {xs:?}: Gemm needs rank 2")))?;
        let mut weight = match <[usize; 2]>::try_from(b.shape.as_slice()) {
            Ok([rows, cols]) if trans_b && cols == k => FTensor {
                shape: vec![rows, cols],
                data: b.data,
            },
            Ok([rows, cols]) if !trans_b && rows == k => transpose2(&b.data, rows, cols),
            _ => {
                return Err(self.error(format!(
                    "B of shape {:?} does not match A of shape {xs:?} (transB = {})",
                    b.shape,
                    u8::from(trans_b)
                )));
            }
        };
        let n = weight.shape[0];
        for w in &mut weight.data {
            *w *= alpha;
        }
        let bias = match c {
            None => None,
            Some(c) if c.data.len() == n || c.data.len() == 1 => Some(
                (0..n)
                    .map(|i| beta * c.data[if c.data.len() == 1 { 0 } else { i }])
                    .collect(),
            ),
            Some(c) => {
                return Err(self.error(format!(
                    "C of shape {:?}: the importer takes a bias of N = {n} elements",
                    c.shape
                )));
            }
        };
        // The scales of B are per row of the (N, K) weights only with transB = 1.
        let weight_scales = self
            .scales_of(node, 1)
            .filter(|s| alpha == 1.0 && (s.len() == 1 || trans_b));
        let dense = Dense {
            weight,
            weight_scales,
            bias,
        };
        self.define(node, Op::Dense(dense), vec![x], vec![m, n])
    }

    /// MatMul by a constant B (K, N): a dense layer on A's rows (A of rank above 2 reshaped to
    /// (rows, K) and the result back to (…, M, N)); of two computed tensors, their batched
    /// product ([`Lowering::matmul_values`]).
    fn matmul(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let x = self.value(node, 0)?;
        self.no_pad(&[x])?;
        let b_name = node.inputs.get(1).map(String::as_str).unwrap_or("");
        if let Some(Slot::Value(b)) = self.slots.get(b_name) {
            let b = *b;
            return self.matmul_values(node, x, b);
        }
        let Some(b) = self.float_constant(node, 1)? else {
            return Err(self.error("input 1 is missing"));
        };
        let xs = self.values[x].shape.clone();
        let Ok([rows, cols]) = <[usize; 2]>::try_from(b.shape.as_slice()) else {
            return Err(self.error(format!("B of shape {:?}: expected rank 2", b.shape)));
        };
        if xs.len() < 2 {
            return Err(self.error(format!(
                "A of shape {xs:?}: the importer takes MatMul of rank 2 or more"
            )));
        }
        let k = xs[xs.len() - 1];
        if rows != k {
            return Err(self.error(format!(
                "A of shape {xs:?} and B of shape {:?} do not multiply",
                b.shape
            )));
        }
        let weight = transpose2(&b.data, rows, cols);
        let weight_scales = self.scales_of(node, 1).filter(|s| s.len() == 1);
        let dense = Dense {
            weight,
            weight_scales,
            bias: None,
        };
        if xs.len() == 2 {
            return self.define(node, Op::Dense(dense), vec![x], vec![xs[0], cols]);
        }
        let m = xs[..xs.len() - 1].iter().product();
        let name = node.outputs.first().map(String::as_str).unwrap_or("");
        let flat = self.push(Op::Reshape, vec![x], vec![m, k], &format!("{name}_rows"));
        let product = self.push(Op::Dense(dense), vec![flat], vec![m, cols], name);
        let mut shape = xs;
        if let Some(last) = shape.last_mut() {
            *last = cols;
        }
        self.define(node, Op::Reshape, vec![product], shape)
    }

    /// MatMul of two computed tensors, (…, M, K) by (…, K, N), the leading axes broadcast. A B
    /// that is a Transpose of the last two axes of another value, read by nothing else, is
    /// read through (the product with `transpose_b`).
    fn matmul_values(&mut self, node: &'a Node, a: usize, b: usize) -> Result<(), ImportError> {
        self.no_pad(&[b])?;
        let (a_shape, mut b_source, mut transpose_b) = (self.values[a].shape.clone(), b, false);
        if let Op::Transpose(perm) = &self.values[b].op {
            let rank = perm.len();
            let swaps_last_two = rank >= 2
                && perm[..rank - 2].iter().enumerate().all(|(i, &p)| p == i)
                && perm[rank - 2] == rank - 1
                && perm[rank - 1] == rank - 2;
            if swaps_last_two && self.readers(b) == 1 {
                b_source = self.values[b].inputs[0];
                transpose_b = true;
            }
        }
        let b_shape = self.values[b_source].shape.clone();
        let (ra, rb) = (a_shape.len(), b_shape.len());
        if ra < 2 || rb < 2 {
            return Err(self.error(format!(
                "A of shape {a_shape:?} and B of shape {:?}: a product of two computed tensors \
                 needs both of rank 2 or more",
                self.values[b].shape
            )));
        }
        let (m, k) = (a_shape[ra - 2], a_shape[ra - 1]);
        let (kb, n) = if transpose_b {
            (b_shape[rb - 1], b_shape[rb - 2])
        } else {
            (b_shape[rb - 2], b_shape[rb - 1])
        };
        let lead = broadcast(&a_shape[..ra - 2], &b_shape[..rb - 2]);
        let Some(mut shape) = lead.filter(|_| k == kb) else {
            return Err(self.error(format!(
                "A of shape {a_shape:?} and B of shape {:?} do not multiply",
                self.values[b].shape
            )));
        };
        shape.extend([m, n]);
        let op = Op::MatMul {
            transpose_b,
            alpha: 1.0,
        };
        self.define(node, op, vec![a, b_source], shape)
    }
}

/// (rows, cols) row-major data transposed into a (cols, rows) tensor.
pub(super) fn transpose2(data: &[f64], rows: usize, cols: usize) -> FTensor {
    let mut out = vec![0.0; data.len()];
    for r in 0..rows {
        for c in 0..cols {
            out[c * rows + r] = data[r * cols + c];
        }
    }
    FTensor {
        shape: vec![cols, rows],
        data: out,
    }
}
