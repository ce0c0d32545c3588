//! Normalization: LayerNormalization (opset 17) over the last axis.

use crate::import::ImportError;
use crate::import::graph::{LayerNorm, Op};
use crate::model::Node;

use super::Lowering;

impl<'a> Lowering<'a> {
    /// Lowers the node if it is one of this family's: LayerNormalization.
    pub(super) fn lower_norm(&mut self, node: &'a Node) -> Option<Result<(), ImportError>> {
        Some(match node.op_type.as_str() {
            "LayerNormalization" => self.layer_norm(node),
            _ => return None,
        })
    }

    /// LayerNormalization over the last axis, γ (`Scale`) and β (`B`, 0 when absent)
    /// constants of its length. Its mean and inverse standard deviation outputs must be unused.
    fn layer_norm(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let x = self.value(node, 0)?;
        self.no_pad(&[x])?;
        let shape = self.values[x].shape.clone();
        let rank = shape.len() as i64;
        let axis = self.int(node, "axis", -1)?;
        if (if axis < 0 { axis + rank } else { axis }) != rank - 1 {
            return Err(self.error(format!(
                "axis {axis} of data of rank {rank}: the importer normalizes over the last axis \
                 only"
            )));
        }
        let n = shape.last().copied().unwrap_or(0);
        let Some(gamma) = self.float_constant(node, 1)? else {
            return Err(self.error("input 1 (Scale) is missing"));
        };
        let beta = self.float_constant(node, 2)?;
        let row = |what: &str, data: Vec<f64>| {
            if data.len() == n {
                Ok(data)
            } else {
                Err(self.error(format!(
                    "{what} has {} elements; the normalized axis has {n}",
                    data.len()
                )))
            }
        };
        let gamma = row("Scale", gamma.data)?;
        let beta = match beta {
            Some(beta) => row("B", beta.data)?,
            None => vec![0.0; n],
        };
        let epsilon = self.float(node, "epsilon", 1e-5)?;
        if !(epsilon >= 0.0 && epsilon.is_finite()) {
            return Err(self.error(format!("epsilon {epsilon} is not a non-negative number")));
        }
        let norm = LayerNorm {
            gamma,
            beta,
            epsilon,
            rms: false,
        };
        self.define(node, Op::LayerNorm(norm), vec![x], shape)
    }
}
