//! Constants: `Constant` nodes, and any node computed on constants only (the exporters' shape
//! plumbing), evaluated exactly by [`fold`](super::super::fold) and kept as constants.

use std::borrow::Cow;

use crate::import::fold::{Folded, Operand};
use crate::import::{ImportError, fold};
use crate::model::{AttributeValue, Node};
use crate::tensor::{Tensor, TensorData};

use super::{Lowering, Slot, constant_slot};

impl<'a> Lowering<'a> {
    /// Lowers the node if it is one of this family's: Constant.
    pub(super) fn lower_constant(&mut self, node: &'a Node) -> Option<Result<(), ImportError>> {
        Some(match node.op_type.as_str() {
            "Constant" => self.constant_node(node),
            _ => return None,
        })
    }

    /// A `Constant` node: its `value` tensor, or (opset 12 on) the integer or float scalar or
    /// list of `value_int`, `value_ints`, `value_float`, `value_floats`.
    fn constant_node(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let [attribute] = node.attributes.as_slice() else {
            return Err(self.error("a Constant needs exactly one value attribute"));
        };
        let tensor = |shape: Vec<u32>, data: TensorData| Tensor {
            name: String::new(),
            shape,
            data,
        };
        let value = match (attribute.name.as_str(), &attribute.value) {
            ("value", AttributeValue::Tensor(t)) => Cow::Borrowed(t),
            ("value_int", AttributeValue::Int(v)) => {
                Cow::Owned(tensor(Vec::new(), TensorData::Int64(vec![*v])))
            }
            ("value_ints", AttributeValue::Ints(v)) => {
                Cow::Owned(tensor(vec![v.len() as u32], TensorData::Int64(v.clone())))
            }
            ("value_float", AttributeValue::Float(v)) => {
                Cow::Owned(tensor(Vec::new(), TensorData::Float32(vec![*v])))
            }
            ("value_floats", AttributeValue::Floats(v)) => {
                Cow::Owned(tensor(vec![v.len() as u32], TensorData::Float32(v.clone())))
            }
            (name, _) => {
                return Err(self.error(format!(
                    "a Constant given by {} is not supported: a tensor `value`, or \
                     value_int(s) or value_float(s)",
                    cvm_formats::quote(name)
                )));
            }
        };
        if let Some(name) = node.outputs.first() {
            self.slots.insert(name.as_str(), constant_slot(value));
        }
        Ok(())
    }

    /// Folds `node` into constants when every input it reads is one (or, for `Shape`, a value
    /// whose shape is fixed); returns whether it did.
    pub(super) fn fold(&mut self, node: &'a Node) -> Result<bool, ImportError> {
        if !node.domain.is_empty() || !fold::FOLDED_OPERATORS.contains(&node.op_type.as_str()) {
            return Ok(false);
        }
        // Every shape is fixed: the shape of a computed value is a constant.
        if node.op_type == "Shape"
            && let Some(shape) = node
                .inputs
                .first()
                .and_then(|n| self.computed_shape(n.as_str()))
        {
            return self.fold_shape(node, &shape);
        }
        let mut operands = Vec::with_capacity(node.inputs.len());
        for name in &node.inputs {
            if name.is_empty() {
                operands.push(None);
                continue;
            }
            operands.push(Some(match self.slots.get(name.as_str()) {
                Some(Slot::Const(tensor)) => Operand::Tensor(tensor),
                Some(Slot::Bool(tensor)) => Operand::Bool(tensor),
                _ => return Ok(false),
            }));
        }
        let opset = self.model.opset_version;
        let mut budget = self.fold_budget;
        let results = fold::fold(node, &operands, opset, &mut budget)
            .map_err(|message| self.error(message))?;
        let Some(results) = results else {
            return Ok(false);
        };
        self.fold_budget = budget;
        self.folded += 1;
        for (name, result) in node.outputs.iter().zip(results) {
            if name.is_empty() {
                continue;
            }
            let slot = match result {
                Folded::Tensor(tensor) => Slot::Const(Cow::Owned(tensor)),
                Folded::Bool(tensor) => Slot::Bool(tensor),
            };
            self.slots.insert(name.as_str(), slot);
        }
        Ok(true)
    }

    /// `Shape` of a computed value: its fixed shape, from `start` to `end`, as int64.
    fn fold_shape(&mut self, node: &'a Node, shape: &[usize]) -> Result<bool, ImportError> {
        let dims: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
        let rank = dims.len() as i64;
        let clamp = |v: i64| (if v < 0 { v + rank } else { v }).clamp(0, rank) as usize;
        let start = clamp(self.int(node, "start", 0)?);
        let end = clamp(self.int(node, "end", rank)?).max(start);
        let shape = Tensor {
            name: String::new(),
            shape: vec![(end - start) as u32],
            data: TensorData::Int64(dims[start..end].to_vec()),
        };
        self.folded += 1;
        if let Some(name) = node.outputs.first() {
            self.slots
                .insert(name.as_str(), Slot::Const(Cow::Owned(shape)));
        }
        Ok(true)
    }
}
