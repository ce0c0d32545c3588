//! Normalization: LayerNormalization (opset 17) over the last axis, and the form exporters write
//! before it (opset 14: ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, then Mul by γ and
//! Add of β), whose steps are held as [`NormPart`]s until the Div completes them. `Pow` lowers
//! here too: its square is a step of that form, its cube a step of GELU's tanh form.

use crate::import::ImportError;
use crate::import::graph::{LayerNorm, Op};
use crate::model::Node;

use super::{Lowering, NormPart, Slot, float_tensor};

impl<'a> Lowering<'a> {
    /// Lowers the node if it is one of this family's: LayerNormalization.
    pub(super) fn lower_norm(&mut self, node: &'a Node) -> Option<Result<(), ImportError>> {
        Some(match node.op_type.as_str() {
            "LayerNormalization" => self.layer_norm(node),
            "Pow" => self.square(node),
            "Sqrt" => self.root(node),
            "Reciprocal" => self.inverse_root(node),
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

    fn hold(&mut self, node: &'a Node, part: NormPart) -> Result<(), ImportError> {
        if let Some(name) = node.outputs.first() {
            self.slots.insert(name.as_str(), Slot::Norm(part));
        }
        Ok(())
    }

    /// `Pow(d, 2)`: the square of a layer normalization written out; `Pow(x, 3)`, the cube
    /// of GELU's tanh form, as the product `x · (x · x)` that exporters also write.
    fn square(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let d = self.value(node, 0)?;
        match self.scalar(node, 1) {
            Some(2.0) => self.hold(node, NormPart::Square(d)),
            Some(3.0) => {
                let shape = self.values[d].shape.clone();
                let name = node.outputs.first().map(String::as_str).unwrap_or("");
                let square = self.push(
                    Op::Mul,
                    vec![d, d],
                    shape.clone(),
                    &format!("{name}_square"),
                );
                self.define(node, Op::Mul, vec![d, square], shape)
            }
            _ => Err(self.error(
                "a Pow is read only as the square in a layer normalization written out \
                 (exponent 2) or as the cube in GELU's tanh form (exponent 3)",
            )),
        }
    }

    /// `Sqrt(mean(d²) + ε)`.
    fn root(&mut self, node: &'a Node) -> Result<(), ImportError> {
        match self.slot(node, 0) {
            Some(&Slot::Norm(NormPart::MeanSquare(d, Some(epsilon)))) => {
                self.hold(node, NormPart::Root(d, epsilon))
            }
            _ => Err(self.error(
                "a Sqrt is read only in a layer normalization written out: \
                 √(mean(d²) + ε) over the last axis",
            )),
        }
    }

    /// `ReduceMean(d², last axis, keepdims)` of a held square; returns whether the node was
    /// one.
    pub(super) fn mean_of_square(
        &mut self,
        node: &'a Node,
        axes: &[usize],
        keepdims: bool,
    ) -> Result<bool, ImportError> {
        let Some(&Slot::Norm(NormPart::Square(d))) = self.slot(node, 0) else {
            return Ok(false);
        };
        let rank = self.values[d].shape.len();
        if axes != [rank - 1] || !keepdims {
            return Err(self.error(
                "the mean of a square is read only in a layer normalization written out: over \
                 the last axis, keeping it",
            ));
        }
        self.hold(node, NormPart::MeanSquare(d, None))?;
        Ok(true)
    }

    /// `mean(d²) + ε` of a held mean of squares; returns whether the node was one.
    pub(super) fn plus_epsilon(&mut self, node: &'a Node) -> Result<bool, ImportError> {
        for (v, k) in [(0, 1), (1, 0)] {
            if let Some(&Slot::Norm(NormPart::MeanSquare(d, None))) = self.slot(node, v) {
                let Some(epsilon) = self.scalar(node, k).filter(|e| *e >= 0.0) else {
                    return Err(self.error(
                        "a mean of squares plus anything but a scalar ε ≥ 0 is not a layer \
                         normalization",
                    ));
                };
                self.hold(node, NormPart::MeanSquare(d, Some(epsilon)))?;
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// `d / √(mean(d²) + ε)`: a layer normalization of x when d is `x − mean(x)` over the last
    /// axis, else RMSNorm of d; γ = 1 and β = 0 until a Mul and an Add fold them in
    /// ([`Lowering::scale_norm`]). Returns whether the node was one.
    pub(super) fn normalized(&mut self, node: &'a Node) -> Result<bool, ImportError> {
        let Some(&Slot::Norm(NormPart::Root(d, epsilon))) = self.slot(node, 1) else {
            return Ok(false);
        };
        if self.value(node, 0)? != d {
            return Err(self.error(
                "the dividend is not the value whose mean square is the divisor: not a layer \
                 normalization",
            ));
        }
        self.complete_norm(node, d, epsilon)?;
        Ok(true)
    }

    /// `d · (1 / √(mean(d²) + ε))` in either order, the form `torch.rsqrt` exports (RMSNorm as
    /// LLaMA and T5 write it): a normalization completed, as by [`Lowering::normalized`].
    /// Returns whether the node was one.
    pub(super) fn normalized_product(&mut self, node: &'a Node) -> Result<bool, ImportError> {
        for (v, k) in [(0usize, 1usize), (1, 0)] {
            let Some(&Slot::Norm(NormPart::InverseRoot(d, epsilon))) = self.slot(node, k) else {
                continue;
            };
            if self.value(node, v)? != d {
                return Err(self.error(
                    "the factor is not the value whose mean square is under the reciprocal \
                     root: not a normalization",
                ));
            }
            self.complete_norm(node, d, epsilon)?;
            return Ok(true);
        }
        Ok(false)
    }

    /// `Reciprocal(√(mean(d²) + ε))`.
    fn inverse_root(&mut self, node: &'a Node) -> Result<(), ImportError> {
        match self.slot(node, 0) {
            Some(&Slot::Norm(NormPart::Root(d, epsilon))) => {
                self.hold(node, NormPart::InverseRoot(d, epsilon))
            }
            _ => Err(self.error(
                "a Reciprocal is read only in a normalization written out: \
                 1 / √(mean(d²) + ε) over the last axis",
            )),
        }
    }

    /// The normalization of `d` by `√(mean(d²) + ε)` as `node`'s output: a layer normalization
    /// when d is `x − mean(x)`, RMSNorm otherwise.
    fn complete_norm(&mut self, node: &'a Node, d: usize, epsilon: f64) -> Result<(), ImportError> {
        let rank = self.values[d].shape.len();
        let centered = match (&self.values[d].op, self.values[d].inputs.as_slice()) {
            (Op::Sub, &[x, m]) => match (&self.values[m].op, self.values[m].inputs.as_slice()) {
                (Op::Reduce(r), &[mx]) if r.mean && mx == x && r.axes == [rank - 1] => Some(x),
                _ => None,
            },
            _ => None,
        };
        let (x, rms) = match centered {
            Some(x) if self.values[x].shape == self.values[d].shape => (x, false),
            _ => (d, true),
        };
        let n = self.values[x].shape.last().copied().unwrap_or(0);
        let norm = LayerNorm {
            gamma: vec![1.0; n],
            beta: vec![0.0; n],
            epsilon,
            rms,
        };
        let shape = self.values[x].shape.clone();
        let kind = if rms {
            "an RMSNorm"
        } else {
            "a layer normalization"
        };
        self.notes
            .push(format!("{}: {kind} written out, read as one", self.label));
        self.define(node, Op::LayerNorm(norm), vec![x], shape)
    }

    /// A layer normalization (read by nothing else) times a constant γ of its length, or plus
    /// a constant β (`add`): folded into its γ and β. Returns whether it was.
    pub(super) fn scale_norm(&mut self, node: &'a Node, add: bool) -> Result<bool, ImportError> {
        for (v, k) in [(0usize, 1usize), (1, 0)] {
            let (Some(&Slot::Value(id)), Some(Slot::Const(tensor))) =
                (self.slot(node, v), self.slot(node, k))
            else {
                continue;
            };
            let Ok(c) = float_tensor(tensor) else {
                continue;
            };
            let Op::LayerNorm(norm) = &self.values[id].op else {
                continue;
            };
            let n = norm.gamma.len();
            let leading_ones = c.shape.iter().rev().skip(1).all(|&d| d == 1);
            if self.readers(id) != 1 || c.data.len() != n || c.shape.last() != Some(&n) {
                continue;
            }
            if !leading_ones || c.shape.len() > self.values[id].shape.len() {
                continue;
            }
            if let Op::LayerNorm(norm) = &mut self.values[id].op {
                for j in 0..n {
                    if add {
                        norm.beta[j] += c.data[j];
                    } else {
                        norm.gamma[j] *= c.data[j];
                        norm.beta[j] *= c.data[j];
                    }
                }
            }
            self.bind(node, id)?;
            return Ok(true);
        }
        Ok(false)
    }
}
