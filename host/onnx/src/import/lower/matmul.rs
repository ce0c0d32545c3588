//! Products by a constant: Gemm and MatMul become a dense layer (a bias `Add` after it folded
//! in by [`add`](Lowering::add)).

use crate::import::ImportError;
use crate::import::graph::{Dense, FTensor, Op};
use crate::model::Node;

use super::Lowering;

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

    fn matmul(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let x = self.value(node, 0)?;
        self.no_pad(&[x])?;
        let Some(b) = self.float_constant(node, 1)? else {
            return Err(self.error("input 1 is missing"));
        };
        let xs = self.values[x].shape.clone();
        let ([m, k], Ok([rows, cols])) = (
            <[usize; 2]>::try_from(xs.as_slice()).map_err(|_| {
                self.error(format!("A of shape {xs:?}: the importer takes 2-D MatMul"))
            })?,
            <[usize; 2]>::try_from(b.shape.as_slice()),
        ) else {
            return Err(self.error(format!("B of shape {:?}: expected rank 2", b.shape)));
        };
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
        self.define(node, Op::Dense(dense), vec![x], vec![m, cols])
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
