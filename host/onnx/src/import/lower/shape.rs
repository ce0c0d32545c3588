//! Layout: Flatten, Reshape, Squeeze, Unsqueeze, Transpose, Concat, Slice, Split, and the
//! operators passed through (Identity, Dropout, Cast to float32).

use crate::import::graph::{Op, Slice};
use crate::import::{ImportError, fold};
use crate::model::Node;
use crate::tensor::{Tensor, TensorData};

use super::{Lowering, MAX_RANK, product};

impl<'a> Lowering<'a> {
    /// Lowers the node if it is one of this family's: Flatten, Reshape, Squeeze, Unsqueeze, Transpose, Concat, Slice, Split, Identity, Dropout, Cast.
    pub(super) fn lower_shape(&mut self, node: &'a Node) -> Option<Result<(), ImportError>> {
        Some(match node.op_type.as_str() {
            "Flatten" => self.flatten(node),
            "Reshape" => self.reshape(node),
            "Squeeze" | "Unsqueeze" => self.squeeze(node),
            "Transpose" => self.transpose(node),
            "Concat" => self.concat(node),
            "Slice" => self.slice(node),
            "Split" => self.split(node),
            "Gather" => self.gather(node),
            "Cast" => self.cast(node),
            "Dropout" | "Identity" => match self.value(node, 0) {
                Ok(x) => self.bind(node, x),
                Err(e) => Err(e),
            },
            _ => return None,
        })
    }

    /// Gather of a constant table (axis 0) by integer input `ids`: an embedding.
    pub(super) fn embedding(&mut self, node: &'a Node, ids: usize) -> Result<(), ImportError> {
        let Some(table) = self.float_constant(node, 0)? else {
            return Err(self.error("input 0 (the table) is missing"));
        };
        if self.int(node, "axis", 0)? != 0 {
            return Err(self.error("an embedding gathers rows: axis 0 only"));
        }
        if table.shape.len() < 2 || table.shape[0] == 0 {
            return Err(self.error(format!(
                "the table of shape {:?} is not one of rows",
                table.shape
            )));
        }
        let mut shape = self.values[ids].shape.clone();
        shape.extend_from_slice(&table.shape[1..]);
        self.define(node, Op::Embedding(table), vec![ids], shape)
    }

    /// Gather of a computed tensor by constant indices: one index (a scalar, the axis
    /// dropped, or a list of one) or a list of consecutive ascending indices, a slice.
    fn gather(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let x = self.value(node, 0)?;
        self.no_pad(&[x])?;
        let Some(indices) = self.constant(node, 1)? else {
            return Err(self.error("input 1 (indices) is missing"));
        };
        let scalar = indices.shape.is_empty();
        let list: Vec<i64> = match &indices.data {
            TensorData::Int64(v) => v.clone(),
            TensorData::Int32(v) => v.iter().map(|&i| i64::from(i)).collect(),
            _ => return Err(self.error("the indices are not int64 or int32")),
        };
        let xs = self.values[x].shape.clone();
        let rank = xs.len() as i64;
        let axis = self.int(node, "axis", 0)?;
        let axis = if axis < 0 { axis + rank } else { axis };
        if !(0..rank).contains(&axis) {
            return Err(self.error(format!("axis out of range for rank {rank}")));
        }
        let axis = axis as usize;
        let dim = xs[axis] as i64;
        let resolved: Vec<i64> = list
            .iter()
            .map(|&i| if i < 0 { i + dim } else { i })
            .collect();
        let consecutive = resolved.windows(2).all(|w| w[1] == w[0] + 1);
        let (Some(&first), true) = (resolved.first(), consecutive && indices.shape.len() <= 1)
        else {
            return Err(self.error(format!(
                "indices {list:?} of shape {:?}: the importer gathers a computed tensor by one \
                 index or by consecutive ascending indices only",
                indices.shape
            )));
        };
        let count = resolved.len() as i64;
        if first < 0 || first + count > dim {
            return Err(self.error(format!(
                "indices {list:?} are outside axis {axis} of length {dim}"
            )));
        }
        let mut starts = vec![0; xs.len()];
        starts[axis] = first as usize;
        let slice = Slice {
            starts,
            steps: vec![1; xs.len()],
        };
        let mut shape = xs;
        shape[axis] = count as usize;
        if !scalar {
            return self.define(node, Op::Slice(slice), vec![x], shape);
        }
        let name = node.outputs.first().map(String::as_str).unwrap_or("");
        let cut = self.push(
            Op::Slice(slice),
            vec![x],
            shape.clone(),
            &format!("{name}_slice"),
        );
        shape.remove(axis);
        self.define(node, Op::Reshape, vec![cut], shape)
    }

    /// Cast of a computed value: to float32 it changes nothing the importer carries (a
    /// MatMulInteger's int32 product, a float value); to anything else it is refused.
    fn cast(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let x = self.value(node, 0)?;
        if self.int(node, "to", 0)? != 1 {
            return Err(self.error(
                "a Cast of a computed tensor to a type other than float32 is not supported",
            ));
        }
        self.bind(node, x)
    }

    fn flatten(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let x = self.value(node, 0)?;
        self.no_pad(&[x])?;
        let xs = self.values[x].shape.clone();
        let rank = xs.len() as i64;
        let axis = self.int(node, "axis", 1)?;
        let axis = if axis < 0 { axis + rank } else { axis };
        if !(0..=rank).contains(&axis) {
            return Err(self.error(format!("axis out of range for rank {rank}")));
        }
        let (outer, inner) = xs.split_at(axis as usize);
        let shape = vec![product(outer).unwrap_or(0), product(inner).unwrap_or(0)];
        let op = if axis == 1 { Op::Flatten } else { Op::Reshape };
        self.define(node, op, vec![x], shape)
    }

    fn reshape(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let x = self.value(node, 0)?;
        self.no_pad(&[x])?;
        let Some(target) = self.constant(node, 1)? else {
            return Err(self.error("input 1 (the shape) is missing"));
        };
        let TensorData::Int64(target) = &target.data else {
            return Err(self.error("the shape is not an int64 tensor"));
        };
        // With allowzero a 0 is a dimension of 0 rather than a copy: the same reshape
        // whenever the target holds no 0, and an empty tensor (refused) otherwise.
        let allowzero = self.int(node, "allowzero", 0)? != 0;
        let xs = self.values[x].shape.clone();
        let shape = fold::reshape_target(&xs, target, allowzero).map_err(|m| self.error(m))?;
        self.define(node, Op::Reshape, vec![x], shape)
    }

    fn squeeze(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let x = self.value(node, 0)?;
        self.no_pad(&[x])?;
        let xs = self.values[x].shape.clone();
        let shape = self.squeezed(node, &xs)?;
        self.define(node, Op::Reshape, vec![x], shape)
    }

    /// The shape a Squeeze or Unsqueeze gives data of shape `xs`.
    pub(super) fn squeezed(&self, node: &Node, xs: &[usize]) -> Result<Vec<usize>, ImportError> {
        let axes = match self.constant(node, 1)? {
            Some(Tensor {
                data: TensorData::Int64(v),
                ..
            }) => Some(v.clone()),
            Some(_) => return Err(self.error("axes is not an int64 tensor")),
            None => self.ints(node, "axes")?,
        };
        let shape = if node.op_type == "Squeeze" {
            let rank = xs.len() as i64;
            let axes: Vec<i64> = axes
                .unwrap_or_else(|| (0..rank).filter(|&a| xs[a as usize] == 1).collect())
                .iter()
                .map(|&a| if a < 0 { a + rank } else { a })
                .collect();
            if axes
                .iter()
                .any(|&a| !(0..rank).contains(&a) || xs[a as usize] != 1)
            {
                return Err(self.error(format!("axes {axes:?} do not name axes of length 1")));
            }
            (0..xs.len())
                .filter(|&a| !axes.contains(&(a as i64)))
                .map(|a| xs[a])
                .collect()
        } else {
            let Some(axes) = axes else {
                return Err(self.error("axes are missing"));
            };
            if xs.len() + axes.len() > MAX_RANK {
                return Err(self.error(format!(
                    "its output would have {} dimensions; a CVM tensor has at most {MAX_RANK}",
                    xs.len() + axes.len()
                )));
            }
            let rank = (xs.len() + axes.len()) as i64;
            let axes: Vec<i64> = axes
                .iter()
                .map(|&a| if a < 0 { a + rank } else { a })
                .collect();
            if axes.iter().any(|&a| !(0..rank).contains(&a)) {
                return Err(self.error(format!("axes {axes:?} out of range")));
            }
            let mut rest = xs.iter();
            (0..rank)
                .map(|a| {
                    if axes.contains(&a) {
                        1
                    } else {
                        rest.next().copied().unwrap_or(1)
                    }
                })
                .collect()
        };
        Ok(shape)
    }

    fn transpose(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let x = self.value(node, 0)?;
        self.no_pad(&[x])?;
        let xs = self.values[x].shape.clone();
        let rank = xs.len();
        let perm: Vec<usize> = match self.ints(node, "perm")? {
            None => (0..rank).rev().collect(),
            Some(perm) => perm
                .iter()
                .map(|&p| usize::try_from(p).ok().filter(|&p| p < rank))
                .collect::<Option<Vec<_>>>()
                .filter(|p| p.len() == rank)
                .ok_or_else(|| self.error(format!("perm {perm:?} is not a permutation")))?,
        };
        let mut seen = vec![false; rank];
        for &p in &perm {
            if std::mem::replace(&mut seen[p], true) {
                return Err(self.error(format!("perm {perm:?} is not a permutation")));
            }
        }
        let shape = perm.iter().map(|&p| xs[p]).collect();
        self.define(node, Op::Transpose(perm), vec![x], shape)
    }

    fn concat(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let mut inputs = Vec::new();
        for k in 0..node.inputs.len() {
            inputs.push(self.value_or_const(node, k)?);
        }
        self.no_pad(&inputs)?;
        let Some(&first) = inputs.first() else {
            return Err(self.error("no inputs"));
        };
        let mut shape = self.values[first].shape.clone();
        let rank = shape.len() as i64;
        let axis = self.int(node, "axis", 1)?;
        let axis = if axis < 0 { axis + rank } else { axis };
        if !(0..rank).contains(&axis) {
            return Err(self.error(format!("axis out of range for rank {rank}")));
        }
        let axis = axis as usize;
        for &id in &inputs[1..] {
            let s = &self.values[id].shape;
            if s.len() != shape.len() || (0..s.len()).any(|a| a != axis && s[a] != shape[a]) {
                return Err(self.error(format!(
                    "inputs of shapes {:?} and {s:?} do not join on axis {axis}",
                    self.values[first].shape
                )));
            }
            shape[axis] += s[axis];
        }
        self.define(node, Op::Concat(axis), inputs, shape)
    }

    /// `Slice` of a computed value by constant starts, ends, axes and positive steps.
    fn slice(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let x = self.value(node, 0)?;
        self.no_pad(&[x])?;
        let list = |k: usize| -> Result<Option<Vec<i64>>, ImportError> {
            match self.constant(node, k)? {
                None => Ok(None),
                Some(Tensor {
                    data: TensorData::Int64(v),
                    ..
                }) => Ok(Some(v.clone())),
                Some(Tensor {
                    data: TensorData::Int32(v),
                    ..
                }) => Ok(Some(v.iter().map(|&i| i64::from(i)).collect())),
                Some(_) => Err(self.error(format!("input {k} is not an integer tensor"))),
            }
        };
        let (starts, ends, axes, steps) = if self.model.opset_version >= 10 {
            (list(1)?, list(2)?, list(3)?, list(4)?)
        } else {
            (
                self.ints(node, "starts")?,
                self.ints(node, "ends")?,
                self.ints(node, "axes")?,
                None,
            )
        };
        let (Some(starts), Some(ends)) = (starts, ends) else {
            return Err(self.error("starts or ends is missing"));
        };
        let xs = self.values[x].shape.clone();
        let ranges = fold::slice_ranges(&xs, &starts, &ends, axes.as_deref(), steps.as_deref())
            .map_err(|m| self.error(m))?;
        let mut slice = Slice {
            starts: Vec::new(),
            steps: Vec::new(),
        };
        let mut shape = Vec::new();
        for (axis, &(start, step, count)) in ranges.iter().enumerate() {
            if step < 0 {
                return Err(self.error(format!(
                    "a negative step on axis {axis}: the importer slices forward only"
                )));
            }
            slice.starts.push(start as usize);
            slice.steps.push(step as usize);
            shape.push(count);
        }
        if slice.starts.iter().all(|&s| s == 0) && shape == xs {
            return self.bind(node, x);
        }
        self.define(node, Op::Slice(slice), vec![x], shape)
    }

    /// `Split` into consecutive parts along an axis: one slice per output.
    fn split(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let x = self.value(node, 0)?;
        self.no_pad(&[x])?;
        let xs = self.values[x].shape.clone();
        let rank = xs.len() as i64;
        let axis = self.int(node, "axis", 0)?;
        let axis = if axis < 0 { axis + rank } else { axis };
        if !(0..rank).contains(&axis) {
            return Err(self.error(format!("axis out of range for rank {rank}")));
        }
        let axis = axis as usize;
        let given = if self.model.opset_version >= 13 {
            match self.constant(node, 1)? {
                Some(Tensor {
                    data: TensorData::Int64(v),
                    ..
                }) => Some(v.clone()),
                Some(_) => return Err(self.error("split is not an int64 tensor")),
                None => None,
            }
        } else {
            self.ints(node, "split")?
        };
        let outputs = node.outputs.len();
        let length = xs[axis];
        let sizes: Vec<usize> = match given {
            Some(sizes) => sizes
                .iter()
                .map(|&s| usize::try_from(s).ok())
                .collect::<Option<_>>()
                .filter(|sizes: &Vec<usize>| {
                    sizes.len() == outputs && sizes.iter().sum::<usize>() == length
                })
                .ok_or_else(|| {
                    self.error(format!(
                        "split {sizes:?} does not cut an axis of {length} into {outputs} parts"
                    ))
                })?,
            None => {
                // Equal parts, the last smaller (opset 18's num_outputs rule).
                let parts = match self.int(node, "num_outputs", 0)? {
                    0 => outputs,
                    n => usize::try_from(n).unwrap_or(0),
                };
                if parts == 0 || parts != outputs {
                    return Err(self.error("num_outputs differs from the number of outputs"));
                }
                let each = length.div_ceil(parts);
                (0..parts)
                    .map(|k| each.min(length.saturating_sub(k * each)))
                    .collect()
            }
        };
        let mut start = 0;
        for (k, &size) in sizes.iter().enumerate() {
            let name = node.outputs[k].as_str();
            if size == 0 {
                return Err(self.error(format!("output {k} would be empty")));
            }
            if !name.is_empty() {
                let mut starts = vec![0; xs.len()];
                starts[axis] = start;
                let mut shape = xs.clone();
                shape[axis] = size;
                let slice = Slice {
                    starts,
                    steps: vec![1; xs.len()],
                };
                let id = self.push(Op::Slice(slice), vec![x], shape, name);
                self.bind_name(name, id);
            }
            start += size;
        }
        Ok(())
    }
}
