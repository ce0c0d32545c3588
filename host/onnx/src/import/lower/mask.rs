//! Integer inputs: token ids, read by a Gather of a constant table (an embedding), and
//! attention masks of 0 and 1, read as exporters write them:
//!
//! - into attention: `Unsqueeze`/`Reshape`/`Expand`/`Cast` of the mask, `Sub(1, mask)`, `Mul` by
//!   a large negative number (the additive mask), `Add` to the scores, `Softmax`: the softmax
//!   takes the mask itself as its keep mask;
//! - in mean pooling: `Mul` of the values by the mask, `ReduceSum` of both over the positions,
//!   an optional `Clip` of the count from below, `Div`: a sum divided by the count of kept
//!   positions.
//!
//! A mask is carried as the value of its 0s and 1s at the shape it has before any `Expand`,
//! with the shape it stands for beside it; broadcasting does the rest.

use crate::import::ImportError;
use crate::import::graph::{Op, Reduce};
use crate::model::Node;
use crate::tensor::TensorData;

use super::elementwise::broadcast;
use super::{Lowering, Slot};

/// The smallest |c| of `Mul((1 − mask), c)` read as an additive mask: e^−10⁴ is 0 in f64.
const ADDITIVE_MASK: f64 = 1e4;

/// An attention mask on its way.
#[derive(Clone, Debug, PartialEq)]
pub(in crate::import) struct Mask {
    /// The value of its 0s and 1s (kept positions 1), at its own shape.
    pub value: usize,
    /// The shape it stands for (its value's, or larger after an `Expand`).
    pub shape: Vec<usize>,
    /// What it has become.
    pub form: Form,
}

/// The steps of an attention mask.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::import) enum Form {
    /// 1 where kept, 0 where masked.
    Keep,
    /// `1 − mask`.
    Inverted,
    /// `(1 − mask) · c`, c ≤ −10⁴: 0 where kept, a large negative number where masked.
    Additive,
}

/// A count of kept positions: the sum of a mask over some axes.
#[derive(Clone, Debug, PartialEq)]
pub(in crate::import) struct Count {
    /// Its value.
    pub value: usize,
    /// The shape it stands for.
    pub shape: Vec<usize>,
    /// How many positions each count sums (its largest value).
    pub terms: usize,
}

/// How an integer input is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::import) enum IntegerUse {
    /// As token ids.
    Ids,
    /// As an attention mask.
    Mask,
}

impl<'a> Lowering<'a> {
    /// Lowers the node if it reads an integer input, a mask or a count.
    pub(super) fn lower_mask(&mut self, node: &'a Node) -> Option<Result<(), ImportError>> {
        let reads = node.inputs.iter().any(|n| {
            matches!(
                self.slots.get(n.as_str()),
                Some(Slot::Integer(_) | Slot::Mask(_) | Slot::Masked { .. } | Slot::Count(_))
            )
        });
        if !reads {
            return None;
        }
        Some(match node.op_type.as_str() {
            "Gather" => self.gather_ids(node),
            "Identity" | "Dropout" => self.forward(node),
            "Unsqueeze" | "Squeeze" | "Reshape" | "Flatten" => self.reshape_mask(node),
            "Expand" => self.expand_mask(node),
            "Cast" => self.cast_mask(node),
            "Sub" => self.invert_mask(node),
            "Mul" => self.multiply_mask(node),
            "Add" => self.add_mask(node),
            "Softmax" => self.masked_softmax(node),
            "ReduceSum" => self.count(node),
            "Clip" => self.clip_count(node),
            "Div" => self.divide_by_count(node),
            _ => Err(self.first_mask_read(node)),
        })
    }

    /// The error for the first input of `node` that is an integer input, mask or count.
    fn first_mask_read(&self, node: &Node) -> ImportError {
        for (k, name) in node.inputs.iter().enumerate() {
            if let Some(
                slot @ (Slot::Integer(_) | Slot::Mask(_) | Slot::Masked { .. } | Slot::Count(_)),
            ) = self.slots.get(name.as_str())
            {
                return self.mask_read(k, name, slot);
            }
        }
        self.error("reads no mask")
    }

    /// What a node that reads an integer input, mask or count other than as this family
    /// lowers it is told.
    pub(super) fn mask_read(&self, k: usize, name: &str, slot: &Slot<'_>) -> ImportError {
        let what = match slot {
            Slot::Integer(_) => {
                "an integer input; the importer reads token ids only by a Gather of a constant \
                 table (an embedding), and 0/1 attention masks only as attention masks (into \
                 a Softmax's scores, or in mean pooling)"
            }
            Slot::Mask(_) => {
                "an attention mask; the importer reads it only as attention masks are written: \
                 Unsqueeze, Reshape, Expand or Cast of it, then Mul by (1 − mask) times a large \
                 negative number added to a Softmax's scores, or a Mul into values summed by \
                 ReduceSum for mean pooling"
            }
            Slot::Masked { .. } => {
                "scores with an attention mask added; the importer reads them only in a Softmax \
                 over the last axis"
            }
            _ => {
                "a count of kept positions (a ReduceSum of an attention mask); the importer \
                 reads it only as the divisor of mean pooling (a Div, after an optional Clip \
                 from below)"
            }
        };
        self.error(format!(
            "input {k} ({}) is {what}",
            cvm_formats::quote(name)
        ))
    }

    /// Records how integer input `k` is read; reading it both ways is refused.
    fn use_input(&mut self, k: usize, how: IntegerUse) -> Result<(), ImportError> {
        match self.input_uses.get(k).copied().flatten() {
            Some(before) if before != how => Err(self.error(format!(
                "{} is read both as token ids and as an attention mask",
                self.values[k].origin
            ))),
            _ => {
                if let Some(slot) = self.input_uses.get_mut(k) {
                    *slot = Some(how);
                }
                Ok(())
            }
        }
    }

    /// The mask input 0 names: a mask, or an integer input becoming one.
    fn mask_input(&mut self, node: &Node, k: usize) -> Result<Mask, ImportError> {
        match self.slot(node, k) {
            Some(Slot::Mask(mask)) => Ok(mask.clone()),
            Some(&Slot::Integer(input)) => {
                self.use_input(input, IntegerUse::Mask)?;
                Ok(Mask {
                    value: input,
                    shape: self.values[input].shape.clone(),
                    form: Form::Keep,
                })
            }
            _ => Err(self.first_mask_read(node)),
        }
    }

    fn bind_slot(&mut self, node: &'a Node, slot: Slot<'a>) {
        if let Some(name) = node.outputs.first() {
            self.slots.insert(name.as_str(), slot);
        }
    }

    /// `Gather(table, ids)`: an embedding of token ids.
    fn gather_ids(&mut self, node: &'a Node) -> Result<(), ImportError> {
        match (self.slot(node, 0), self.slot(node, 1)) {
            (Some(Slot::Const(_)), Some(&Slot::Integer(input))) => {
                self.use_input(input, IntegerUse::Ids)?;
                self.embedding(node, input)
            }
            _ => Err(self.first_mask_read(node)),
        }
    }

    /// `Identity` or `Dropout`: the same slot under the output's name.
    fn forward(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let slot = match self.slot(node, 0) {
            Some(&Slot::Integer(k)) => Slot::Integer(k),
            Some(Slot::Mask(mask)) => Slot::Mask(mask.clone()),
            Some(&Slot::Masked { scores, mask }) => Slot::Masked { scores, mask },
            Some(Slot::Count(count)) => Slot::Count(count.clone()),
            _ => return Err(self.first_mask_read(node)),
        };
        self.bind_slot(node, slot);
        Ok(())
    }

    /// A reshape of a mask (before it is expanded): a reshape of its value.
    fn reshape_mask(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let mask = self.mask_input(node, 0)?;
        let own = self.values[mask.value].shape.clone();
        if own != mask.shape {
            return Err(self.error(format!(
                "a {} of an attention mask expanded from {own:?} to {:?}; the importer \
                 reshapes a mask only before it is expanded",
                node.op_type, mask.shape
            )));
        }
        let shape = match node.op_type.as_str() {
            "Reshape" => {
                let Some(target) = self.constant(node, 1)? else {
                    return Err(self.error("input 1 (the shape) is missing"));
                };
                let TensorData::Int64(target) = &target.data else {
                    return Err(self.error("the shape is not an int64 tensor"));
                };
                let allowzero = self.int(node, "allowzero", 0)? != 0;
                crate::import::fold::reshape_target(&own, target, allowzero)
                    .map_err(|m| self.error(m))?
            }
            "Flatten" => {
                if self.int(node, "axis", 1)? != 1 {
                    return Err(self.error("a Flatten of an attention mask: axis 1 only"));
                }
                vec![own[0], own[1..].iter().product()]
            }
            _ => self.squeezed(node, &own)?,
        };
        if shape.len() > super::MAX_RANK {
            return Err(self.error(format!(
                "its output has {} dimensions; a CVM tensor has at most {}",
                shape.len(),
                super::MAX_RANK
            )));
        }
        let name = node.outputs.first().map(String::as_str).unwrap_or("");
        let value = self.push(Op::Reshape, vec![mask.value], shape.clone(), name);
        self.bind_slot(
            node,
            Slot::Mask(Mask {
                value,
                shape,
                form: mask.form,
            }),
        );
        Ok(())
    }

    /// `Expand(mask, shape)`: the mask stands for the broadcast shape; its value is unchanged.
    fn expand_mask(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let mask = self.mask_input(node, 0)?;
        let target: Vec<usize> = match self.constant(node, 1)? {
            Some(tensor) => match &tensor.data {
                TensorData::Int64(v) if v.iter().all(|&d| d >= 1) => {
                    v.iter().map(|&d| d as usize).collect()
                }
                _ => return Err(self.error("the shape is not int64 dimensions of 1 or more")),
            },
            None => return Err(self.error("input 1 (the shape) is missing")),
        };
        let Some(shape) = broadcast(&mask.shape, &target).filter(|s| s.len() <= super::MAX_RANK)
        else {
            return Err(self.error(format!(
                "the mask of shape {:?} does not expand to {target:?}",
                mask.shape
            )));
        };
        self.bind_slot(node, Slot::Mask(Mask { shape, ..mask }));
        Ok(())
    }

    /// `Cast` of a mask: its 0s and 1s are the same in any type.
    fn cast_mask(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let mask = self.mask_input(node, 0)?;
        self.bind_slot(node, Slot::Mask(mask));
        Ok(())
    }

    /// `Sub(1, mask)`: the inverted mask.
    fn invert_mask(&mut self, node: &'a Node) -> Result<(), ImportError> {
        if self.scalar(node, 0) != Some(1.0) {
            return Err(self.error(
                "the importer reads a Sub of an attention mask only as 1 − mask (a scalar 1 \
                 first)",
            ));
        }
        let mask = self.mask_input(node, 1)?;
        if mask.form != Form::Keep {
            return Err(self.error("1 − mask of a mask already inverted"));
        }
        self.bind_slot(
            node,
            Slot::Mask(Mask {
                form: Form::Inverted,
                ..mask
            }),
        );
        Ok(())
    }

    /// `Mul((1 − mask), c)`: the additive mask; `Mul(x, mask)`: the values of kept positions.
    fn multiply_mask(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let is_mask =
            |k: usize| matches!(self.slot(node, k), Some(Slot::Mask(_) | Slot::Integer(_)));
        let (m, other) = if is_mask(0) { (0, 1) } else { (1, 0) };
        let mask = self.mask_input(node, m)?;
        if let Some(c) = self.scalar(node, other) {
            if mask.form != Form::Inverted || c > -ADDITIVE_MASK {
                return Err(self.error(format!(
                    "a product of an attention mask by {c}; the importer reads only \
                     (1 − mask) times a large negative number (at most −{ADDITIVE_MASK}), an \
                     additive mask"
                )));
            }
            self.bind_slot(
                node,
                Slot::Mask(Mask {
                    form: Form::Additive,
                    ..mask
                }),
            );
            return Ok(());
        }
        if mask.form != Form::Keep {
            return Err(self.error(
                "a product of values by an inverted or additive attention mask; the importer \
                 multiplies values by the mask itself (mean pooling) only",
            ));
        }
        let x = self.value(node, other)?;
        self.no_pad(&[x])?;
        let shape = self.values[x].shape.clone();
        if broadcast(&shape, &mask.shape).as_deref() != Some(shape.as_slice()) {
            return Err(self.error(format!(
                "the mask of shape {:?} does not broadcast to the values' {shape:?}",
                mask.shape
            )));
        }
        self.define(node, Op::Mul, vec![x, mask.value], shape)
    }

    /// `Add(scores, additive mask)`: scores the Softmax after it masks.
    fn add_mask(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let is_mask = |k: usize| matches!(self.slot(node, k), Some(Slot::Mask(_)));
        let (m, other) = if is_mask(0) { (0, 1) } else { (1, 0) };
        let mask = self.mask_input(node, m)?;
        if mask.form != Form::Additive {
            return Err(self.error(
                "an Add of an attention mask that is not additive ((1 − mask) times a large \
                 negative number)",
            ));
        }
        let scores = self.value(node, other)?;
        let shape = self.values[scores].shape.clone();
        let own = &self.values[mask.value].shape;
        // The engine's keep mask broadcasts from the right, each dimension 1 or the scores'.
        let fits = own.len() <= shape.len()
            && own
                .iter()
                .rev()
                .zip(shape.iter().rev())
                .all(|(&m, &s)| m == 1 || m == s);
        if !fits || broadcast(&shape, &mask.shape).as_deref() != Some(shape.as_slice()) {
            return Err(self.error(format!(
                "the attention mask of shape {:?} does not broadcast to the scores' {shape:?}",
                mask.shape
            )));
        }
        self.bind_slot(
            node,
            Slot::Masked {
                scores,
                mask: mask.value,
            },
        );
        Ok(())
    }

    /// `Softmax` of masked scores, over the last axis.
    fn masked_softmax(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let Some(&Slot::Masked { scores, mask }) = self.slot(node, 0) else {
            return Err(self.first_mask_read(node));
        };
        let shape = self.values[scores].shape.clone();
        let rank = shape.len() as i64;
        let default = if self.model.opset_version >= 13 {
            -1
        } else {
            1
        };
        let axis = self.int(node, "axis", default)?;
        if (if axis < 0 { axis + rank } else { axis }) != rank - 1 {
            return Err(self.error(format!(
                "axis {axis} of masked scores of rank {rank}: the importer masks a Softmax over \
                 the last axis only"
            )));
        }
        self.define(
            node,
            Op::Softmax {
                causal: false,
                masked: true,
            },
            vec![scores, mask],
            shape,
        )
    }

    /// `ReduceSum(mask, axes)`: the count of kept positions.
    fn count(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let mask = self.mask_input(node, 0)?;
        if mask.form != Form::Keep {
            return Err(self.error("a ReduceSum of an inverted or additive attention mask"));
        }
        let own = self.values[mask.value].shape.clone();
        let rank = mask.shape.len();
        let axes = self.reduce_axes(node, rank, false)?;
        // Axes of the value, aligned at the right of the shape it stands for.
        let offset = rank - own.len();
        if let Some(&a) = axes
            .iter()
            .find(|&&a| a < offset || own[a - offset] != mask.shape[a])
        {
            return Err(self.error(format!(
                "a ReduceSum of an attention mask over axis {a}, along which it was expanded \
                 (from {own:?} to {:?}); the importer counts the mask's own positions only",
                mask.shape
            )));
        }
        let own_axes: Vec<usize> = axes.iter().map(|&a| a - offset).collect();
        let terms: usize = own_axes.iter().map(|&a| own[a]).product();
        let kept: Vec<usize> = (0..own.len())
            .map(|a| if own_axes.contains(&a) { 1 } else { own[a] })
            .collect();
        let keepdims = self.int(node, "keepdims", 1)? != 0;
        let name = node.outputs.first().map(String::as_str).unwrap_or("");
        let mut value = self.push(
            Op::Reduce(Reduce {
                axes: own_axes.clone(),
                mean: false,
            }),
            vec![mask.value],
            kept,
            name,
        );
        let mut shape: Vec<usize> = (0..rank)
            .map(|a| if axes.contains(&a) { 1 } else { mask.shape[a] })
            .collect();
        if !keepdims {
            let dropped: Vec<usize> = (0..own.len())
                .filter(|a| !own_axes.contains(a))
                .map(|a| own[a])
                .collect();
            let dropped = if dropped.is_empty() { vec![1] } else { dropped };
            value = self.push(
                Op::Reshape,
                vec![value],
                dropped,
                &format!("{name}_squeezed"),
            );
            shape = (0..rank)
                .filter(|a| !axes.contains(a))
                .map(|a| mask.shape[a])
                .collect();
            if shape.is_empty() {
                shape.push(1);
            }
        }
        self.bind_slot(
            node,
            Slot::Count(Count {
                value,
                shape,
                terms,
            }),
        );
        Ok(())
    }

    /// `Clip(count, lo, hi)` that changes no count but 0 (lo at most 1, hi at least the most
    /// positions counted): the count itself, since a count of 0 divides a sum of 0.
    fn clip_count(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let Some(Slot::Count(count)) = self.slot(node, 0) else {
            return Err(self.first_mask_read(node));
        };
        let count = count.clone();
        let (lo, hi) = self.clip_bounds(node)?;
        if lo > 1.0 || hi < count.terms as f64 {
            return Err(self.error(format!(
                "a Clip of a count of kept positions to [{lo}, {hi}]; the importer reads only a \
                 clip that keeps every count from 1 to {} (as mean pooling's guard against 0)",
                count.terms
            )));
        }
        self.bind_slot(node, Slot::Count(count));
        Ok(())
    }

    /// `Div(sum, count)`: mean pooling over the kept positions.
    fn divide_by_count(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let Some(Slot::Count(count)) = self.slot(node, 1) else {
            return Err(self.first_mask_read(node));
        };
        let count = count.clone();
        let x = self.value(node, 0)?;
        let shape = self.values[x].shape.clone();
        if broadcast(&shape, &count.shape).as_deref() != Some(shape.as_slice())
            || broadcast(&shape, &self.values[count.value].shape).as_deref()
                != Some(shape.as_slice())
        {
            return Err(self.error(format!(
                "the count of shape {:?} does not broadcast to the sum's {shape:?}",
                count.shape
            )));
        }
        self.define(node, Op::DivCount, vec![x, count.value], shape)
    }

    /// What every input holds, once the graph is lowered.
    pub(super) fn input_kinds(
        &self,
        inputs: &[crate::import::read::SignatureInput<'_>],
    ) -> Result<Vec<crate::import::graph::Input>, ImportError> {
        use crate::import::graph::{Input, InputKind};
        let mut kinds = Vec::with_capacity(inputs.len());
        for (k, input) in inputs.iter().enumerate() {
            let kind = match (input.integer, self.input_uses[k]) {
                (false, _) => InputKind::Float,
                (true, Some(IntegerUse::Mask)) => InputKind::Mask,
                (true, Some(IntegerUse::Ids)) => {
                    let rows: Vec<usize> = self
                        .values
                        .iter()
                        .filter(|v| v.inputs == [k])
                        .filter_map(|v| match &v.op {
                            Op::Embedding(table) => table.shape.first().copied(),
                            _ => None,
                        })
                        .collect();
                    InputKind::Ids {
                        vocabulary: rows.iter().copied().min().unwrap_or(0),
                        rows: rows.iter().copied().max().unwrap_or(1),
                    }
                }
                (true, None) => {
                    return Err(ImportError::Graph(format!(
                        "input {} is read by no node; the importer needs every integer input \
                         read, as token ids or as an attention mask",
                        cvm_formats::quote(&input.input.name)
                    )));
                }
            };
            kinds.push(Input {
                name: input.input.name.clone(),
                kind,
            });
        }
        Ok(kinds)
    }
}
