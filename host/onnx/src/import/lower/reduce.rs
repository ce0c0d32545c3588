//! Reductions: ReduceMean, ReduceSum, and Softmax and LogSoftmax at the model's end.

use crate::import::ImportError;
use crate::import::graph::{Op, Reduce};
use crate::model::Node;
use crate::tensor::{Tensor, TensorData};

use super::{Lowering, NormPart, Slot};

impl<'a> Lowering<'a> {
    /// Lowers the node if it is one of this family's: ReduceMean, ReduceSum, Softmax, LogSoftmax.
    pub(super) fn lower_reduce(&mut self, node: &'a Node) -> Option<Result<(), ImportError>> {
        Some(match node.op_type.as_str() {
            "ReduceMean" => self.reduce(node, true),
            "ReduceSum" => self.reduce(node, false),
            "Softmax" | "LogSoftmax" => self.softmax(node),
            _ => return None,
        })
    }

    /// `ReduceMean` and `ReduceSum`: axes as an attribute (ReduceSum before opset 13,
    /// ReduceMean before 18) or a constant input, `keepdims`, `noop_with_empty_axes`.
    /// The axes a ReduceMean or ReduceSum reduces (attribute, or input from opsets 18 and 13),
    /// resolved against `rank`, ascending; all of them when none is given.
    pub(super) fn reduce_axes(
        &self,
        node: &Node,
        rank: usize,
        mean: bool,
    ) -> Result<Vec<usize>, ImportError> {
        let input_opset = if mean { 18 } else { 13 };
        let axes = if self.model.opset_version >= input_opset {
            match self.constant(node, 1)? {
                Some(Tensor {
                    data: TensorData::Int64(v),
                    ..
                }) => Some(v.clone()),
                Some(_) => return Err(self.error("axes is not an int64 tensor")),
                None => None,
            }
        } else {
            self.ints(node, "axes")?
        };
        let axes = match axes {
            Some(axes) if !axes.is_empty() => axes,
            _ if self.int(node, "noop_with_empty_axes", 0)? != 0 => {
                return Err(self.error(
                    "noop_with_empty_axes = 1 with no axes passes its input through; remove it",
                ));
            }
            _ => (0..rank as i64).collect(),
        };
        let mut resolved = Vec::with_capacity(axes.len());
        for &axis in &axes {
            let a = if axis < 0 { axis + rank as i64 } else { axis };
            if !(0..rank as i64).contains(&a) || resolved.contains(&(a as usize)) {
                return Err(self.error(format!(
                    "axes {axes:?} are not distinct axes of data of rank {rank}"
                )));
            }
            resolved.push(a as usize);
        }
        resolved.sort_unstable();
        Ok(resolved)
    }

    fn reduce(&mut self, node: &'a Node, mean: bool) -> Result<(), ImportError> {
        let name = node.inputs.first().map(String::as_str).unwrap_or("");
        if let Some(&Slot::Norm(NormPart::Square(d))) = self.slots.get(name)
            && mean
        {
            let axes = self.reduce_axes(node, self.values[d].shape.len(), mean)?;
            let keepdims = self.int(node, "keepdims", 1)? != 0;
            self.mean_of_square(node, &axes, keepdims)?;
            return Ok(());
        }
        let x = self.value(node, 0)?;
        self.no_pad(&[x])?;
        let xs = self.values[x].shape.clone();
        let rank = xs.len();
        let resolved = self.reduce_axes(node, rank, mean)?;
        let keepdims = self.int(node, "keepdims", 1)? != 0;
        let kept: Vec<usize> = (0..rank)
            .map(|a| if resolved.contains(&a) { 1 } else { xs[a] })
            .collect();
        self.define(
            node,
            Op::Reduce(Reduce {
                axes: resolved.clone(),
                mean,
            }),
            vec![x],
            kept.clone(),
        )?;
        if keepdims {
            return Ok(());
        }
        // The reduced axes dropped: the same values under a reshape.
        let reduced = self.values.len() - 1;
        let shape: Vec<usize> = (0..rank)
            .filter(|a| !resolved.contains(a))
            .map(|a| xs[a])
            .collect();
        let shape = if shape.is_empty() { vec![1] } else { shape };
        let name = node.outputs.first().map(String::as_str).unwrap_or("");
        let id = self.push(
            Op::Reshape,
            vec![reduced],
            shape,
            &format!("{name}_squeezed"),
        );
        self.bind(node, id)
    }

    fn softmax(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let name = node.inputs.first().map(String::as_str).unwrap_or("");
        let (x, causal) = match self.slots.get(name) {
            Some(&Slot::Causal(x)) if node.op_type == "Softmax" => (x, true),
            _ => (self.value(node, 0)?, false),
        };
        self.no_pad(&[x])?;
        // Dropping it keeps the argmax over the last axis only when it normalizes that axis
        // (from opset 13 the default; before, the default 1 flattens the axes from it on).
        let rank = self.values[x].shape.len() as i64;
        let default = if self.model.opset_version >= 13 {
            -1
        } else {
            1
        };
        let axis = self.int(node, "axis", default)?;
        if (if axis < 0 { axis + rank } else { axis }) != rank - 1 {
            return Err(self.error(format!(
                "axis {axis} of data of rank {rank}: the importer drops a Softmax over the \
                 last axis only (whose argmax it keeps)"
            )));
        }
        let output = node.outputs.first().map(String::as_str).unwrap_or("");
        let is_output = output == self.output_name;
        if causal || ((!is_output || self.uses(output) != 1) && node.op_type == "Softmax") {
            let shape = self.values[x].shape.clone();
            return self.define(
                node,
                Op::Softmax {
                    causal,
                    masked: false,
                },
                vec![x],
                shape,
            );
        }
        if !is_output || self.uses(output) != 1 {
            return Err(self.error(
                "LogSoftmax is supported only as the model's last step (it is dropped: the \
                 integer model outputs its input, whose argmax is the same)",
            ));
        }
        self.notes.push(format!(
            "{} dropped: the model outputs its input, with the same argmax",
            self.label
        ));
        self.bind(node, x)
    }
}
