//! Constant folding: a node whose inputs are all constants is evaluated once, at import, and its
//! outputs become constants. This is how the shape plumbing that exporters write around a
//! dynamic batch (`Shape`, `Gather` of a dimension, `Concat` into a target shape, `Range`,
//! `ConstantOfShape`, `Where` on a comparison, `Cast`, …) turns into the fixed shapes the
//! integer model has, before anything is lowered.
//!
//! Exact: integer operations are checked (an overflow, a division by zero or a value that does
//! not fit the result's type is refused, never wrapped), float32 operations are IEEE 754's
//! correctly rounded ones (computed in f64 and rounded once to f32, which gives the float32
//! result exactly for `+ − × ÷ √`), and nothing else is folded. Bounded: every result has at
//! most [`MAX_TENSOR_ELEMENTS`] elements, checked from its shape before it is allocated, and
//! one import folds at most [`MAX_FOLDED_ELEMENTS`] elements in all.

// Float32 constants are folded with IEEE 754's exactly rounded operations (module docs).
#![allow(clippy::float_arithmetic)]

use crate::limits::{MAX_RANK, MAX_TENSOR_ELEMENTS};
use crate::model::{AttributeValue, Node};
use crate::tensor::{ElementType, Tensor, TensorData};

/// Most elements all folded results of one import hold together: 2^27 (1 GiB of int64).
pub const MAX_FOLDED_ELEMENTS: u64 = 1 << 27;

/// The operators [`fold`] evaluates when all their inputs are constants.
pub const FOLDED_OPERATORS: &[&str] = &[
    "Identity",
    "Trilu",
    "Cast",
    "Shape",
    "Size",
    "Gather",
    "Slice",
    "Concat",
    "Unsqueeze",
    "Squeeze",
    "Reshape",
    "Flatten",
    "Transpose",
    "Expand",
    "ConstantOfShape",
    "Range",
    "Equal",
    "Less",
    "Greater",
    "LessOrEqual",
    "GreaterOrEqual",
    "Not",
    "And",
    "Or",
    "Xor",
    "Where",
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Neg",
    "Abs",
    "Min",
    "Max",
    "Sqrt",
];

/// A boolean constant: ONNX `BOOL` tensors exist only as folded comparisons.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BoolTensor {
    /// Dimensions, outermost first.
    pub shape: Vec<u32>,
    /// Values in row-major order.
    pub values: Vec<bool>,
}

/// A constant input of a node.
#[derive(Clone, Copy, Debug)]
pub enum Operand<'t> {
    /// A numeric constant.
    Tensor(&'t Tensor),
    /// A boolean constant.
    Bool(&'t BoolTensor),
}

/// A folded output.
#[derive(Clone, Debug, PartialEq)]
pub enum Folded {
    /// A numeric constant.
    Tensor(Tensor),
    /// A boolean constant.
    Bool(BoolTensor),
}

/// A constant while it is computed on: integers of every width are held as i64 with their
/// ONNX type, so that a result can be checked against its type's range once.
#[derive(Clone, Debug, PartialEq)]
enum Data {
    F32(Vec<f32>),
    Int(Vec<i64>, ElementType),
    Bool(Vec<bool>),
}

#[derive(Clone, Debug, PartialEq)]
struct Val {
    shape: Vec<usize>,
    data: Data,
}

type Result<T> = std::result::Result<T, String>;

impl Val {
    fn of(operand: Operand<'_>) -> Val {
        match operand {
            Operand::Tensor(tensor) => {
                let shape = tensor.shape.iter().map(|&d| d as usize).collect();
                let data = match &tensor.data {
                    TensorData::Float32(v) => Data::F32(v.clone()),
                    TensorData::Uint8(v) => Data::Int(
                        v.iter().map(|&x| i64::from(x)).collect(),
                        ElementType::Uint8,
                    ),
                    TensorData::Int8(v) => {
                        Data::Int(v.iter().map(|&x| i64::from(x)).collect(), ElementType::Int8)
                    }
                    TensorData::Int32(v) => Data::Int(
                        v.iter().map(|&x| i64::from(x)).collect(),
                        ElementType::Int32,
                    ),
                    TensorData::Int64(v) => Data::Int(v.clone(), ElementType::Int64),
                    TensorData::Bool(v) => Data::Bool(v.clone()),
                };
                Val { shape, data }
            }
            Operand::Bool(tensor) => Val {
                shape: tensor.shape.iter().map(|&d| d as usize).collect(),
                data: Data::Bool(tensor.values.clone()),
            },
        }
    }

    fn len(&self) -> usize {
        match &self.data {
            Data::F32(v) => v.len(),
            Data::Int(v, _) => v.len(),
            Data::Bool(v) => v.len(),
        }
    }

    /// The values of an integer tensor (a shape, axes, indices).
    fn ints(&self, what: &str) -> Result<&[i64]> {
        match &self.data {
            Data::Int(v, _) => Ok(v),
            _ => Err(format!("{what} is not an integer tensor")),
        }
    }

    /// The elements at `indices` (row-major positions), in order.
    fn pick(&self, indices: &[usize]) -> Data {
        match &self.data {
            Data::F32(v) => Data::F32(indices.iter().map(|&i| v[i]).collect()),
            Data::Int(v, ty) => Data::Int(indices.iter().map(|&i| v[i]).collect(), *ty),
            Data::Bool(v) => Data::Bool(indices.iter().map(|&i| v[i]).collect()),
        }
    }

    fn into_folded(self) -> Result<Folded> {
        let shape: Vec<u32> = self
            .shape
            .iter()
            .map(|&d| u32::try_from(d).map_err(|_| format!("dimension {d} is too large")))
            .collect::<Result<_>>()?;
        let narrow = |values: Vec<i64>, ty: ElementType| -> Result<TensorData> {
            let out_of_range = |v: &i64| format!("the result {v} does not fit {ty:?}");
            Ok(match ty {
                ElementType::Int64 => TensorData::Int64(values),
                ElementType::Int32 => TensorData::Int32(
                    values
                        .iter()
                        .map(|v| i32::try_from(*v).map_err(|_| out_of_range(v)))
                        .collect::<Result<_>>()?,
                ),
                ElementType::Int8 => TensorData::Int8(
                    values
                        .iter()
                        .map(|v| i8::try_from(*v).map_err(|_| out_of_range(v)))
                        .collect::<Result<_>>()?,
                ),
                ElementType::Uint8 => TensorData::Uint8(
                    values
                        .iter()
                        .map(|v| u8::try_from(*v).map_err(|_| out_of_range(v)))
                        .collect::<Result<_>>()?,
                ),
                ElementType::Float32 => {
                    return Err("an integer result typed float32".into());
                }
                ElementType::Bool => {
                    return Err("an integer result typed bool".into());
                }
            })
        };
        Ok(match self.data {
            Data::Bool(values) => Folded::Bool(BoolTensor { shape, values }),
            Data::F32(values) => Folded::Tensor(Tensor {
                name: String::new(),
                shape,
                data: TensorData::Float32(values),
            }),
            Data::Int(values, ty) => Folded::Tensor(Tensor {
                name: String::new(),
                shape,
                data: narrow(values, ty)?,
            }),
        })
    }
}

/// The element count of `shape`, refused past [`MAX_TENSOR_ELEMENTS`] or [`MAX_RANK`].
fn count(shape: &[usize]) -> Result<usize> {
    if shape.len() > MAX_RANK {
        return Err(format!(
            "its result has {} dimensions, more than the engine's {MAX_RANK}",
            shape.len()
        ));
    }
    shape
        .iter()
        .try_fold(1u64, |n, &d| n.checked_mul(d as u64))
        .filter(|&n| n <= MAX_TENSOR_ELEMENTS)
        .map(|n| n as usize)
        .ok_or_else(|| {
            format!(
                "its result of shape {shape:?} has more than the {MAX_TENSOR_ELEMENTS} elements \
                 the engine allows"
            )
        })
}

/// Row-major strides of `shape`.
fn strides(shape: &[usize]) -> Vec<usize> {
    let mut strides = vec![1; shape.len()];
    for axis in (0..shape.len().saturating_sub(1)).rev() {
        strides[axis] = strides[axis + 1] * shape[axis + 1];
    }
    strides
}

/// `axis` of a tensor of `rank` dimensions, negative counting from the end.
fn axis_of(axis: i64, rank: usize) -> Result<usize> {
    let rank_i = rank as i64;
    let resolved = if axis < 0 { axis + rank_i } else { axis };
    if (0..rank_i).contains(&resolved) {
        Ok(resolved as usize)
    } else {
        Err(format!("axis {axis} is out of range for rank {rank}"))
    }
}

/// The numpy broadcast of shapes.
fn broadcast_shape(shapes: &[&[usize]]) -> Result<Vec<usize>> {
    let rank = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = vec![1; rank];
    for shape in shapes {
        for (i, &d) in shape.iter().enumerate() {
            let slot = &mut out[rank - shape.len() + i];
            if *slot == 1 {
                *slot = d;
            } else if d != 1 && d != *slot {
                return Err(format!("shapes {shapes:?} do not broadcast"));
            }
        }
    }
    Ok(out)
}

/// For each element of `out` (a broadcast shape), the position of the element of `shape` it
/// reads.
fn broadcast_index(shape: &[usize], out: &[usize]) -> Result<Vec<usize>> {
    let n = count(out)?;
    let in_strides = strides(shape);
    let offset = out.len() - shape.len();
    let out_strides = strides(out);
    Ok((0..n)
        .map(|flat| {
            let mut position = 0;
            for (axis, &dim) in shape.iter().enumerate() {
                let coordinate = (flat / out_strides[axis + offset]) % out[axis + offset];
                if dim != 1 {
                    position += coordinate * in_strides[axis];
                }
            }
            position
        })
        .collect())
}

/// Folds `node` over its constant `inputs` (`None` for an omitted optional one); `Ok(None)`
/// when the operator is not one of [`FOLDED_OPERATORS`]. `opset` is the model's default-domain
/// opset, which decides whether axes are attributes or inputs. `budget` is what remains of
/// [`MAX_FOLDED_ELEMENTS`] and is reduced by the results.
///
/// # Errors
/// What makes the node unfoldable: a malformed attribute or input, an integer overflow, a
/// division by zero, a result past the element bounds.
pub fn fold(
    node: &Node,
    inputs: &[Option<Operand<'_>>],
    opset: u64,
    budget: &mut u64,
) -> Result<Option<Vec<Folded>>> {
    if !FOLDED_OPERATORS.contains(&node.op_type.as_str()) {
        return Ok(None);
    }
    let vals: Vec<Option<Val>> = inputs.iter().map(|o| o.map(Val::of)).collect();
    let arg = |k: usize| -> Result<&Val> {
        vals.get(k)
            .and_then(Option::as_ref)
            .ok_or_else(|| format!("input {k} is missing"))
    };
    let int_attr = |name: &str, default: i64| -> Result<i64> {
        match node.attribute(name) {
            None => Ok(default),
            Some(AttributeValue::Int(v)) => Ok(*v),
            Some(_) => Err(format!("attribute {name} is not an integer")),
        }
    };
    let ints_attr = |name: &str| -> Result<Option<Vec<i64>>> {
        match node.attribute(name) {
            None => Ok(None),
            Some(AttributeValue::Ints(v)) => Ok(Some(v.clone())),
            Some(_) => Err(format!("attribute {name} is not a list of integers")),
        }
    };
    // Axes given as an attribute before `input_opset`, as input `k` from it on.
    let axes = |input_opset: u64, k: usize| -> Result<Option<Vec<i64>>> {
        if opset >= input_opset {
            match vals.get(k).and_then(Option::as_ref) {
                Some(v) => Ok(Some(v.ints("axes")?.to_vec())),
                None => Ok(None),
            }
        } else {
            ints_attr("axes")
        }
    };
    let out = match node.op_type.as_str() {
        "Identity" => arg(0)?.clone(),
        "Cast" => cast(arg(0)?, int_attr("to", 0)?)?,
        "Shape" => {
            let x = arg(0)?;
            let rank = x.shape.len() as i64;
            let clamp = |v: i64| (if v < 0 { v + rank } else { v }).clamp(0, rank) as usize;
            let start = clamp(int_attr("start", 0)?);
            let end = clamp(int_attr("end", rank)?);
            let dims: Vec<i64> = x.shape[start..end.max(start)]
                .iter()
                .map(|&d| d as i64)
                .collect();
            Val {
                shape: vec![dims.len()],
                data: Data::Int(dims, ElementType::Int64),
            }
        }
        "Size" => Val {
            shape: Vec::new(),
            data: Data::Int(vec![arg(0)?.len() as i64], ElementType::Int64),
        },
        "Gather" => gather(arg(0)?, arg(1)?, int_attr("axis", 0)?)?,
        "Slice" => {
            let x = arg(0)?;
            let (starts, ends, axes, steps) = if opset >= 10 {
                let list = |k: usize| -> Result<Option<Vec<i64>>> {
                    vals.get(k)
                        .and_then(Option::as_ref)
                        .map(|v| v.ints("a Slice input").map(<[i64]>::to_vec))
                        .transpose()
                };
                (list(1)?, list(2)?, list(3)?, list(4)?)
            } else {
                (
                    ints_attr("starts")?,
                    ints_attr("ends")?,
                    ints_attr("axes")?,
                    None,
                )
            };
            let (Some(starts), Some(ends)) = (starts, ends) else {
                return Err("starts or ends is missing".into());
            };
            slice(x, &starts, &ends, axes.as_deref(), steps.as_deref())?
        }
        "Concat" => {
            let parts: Vec<&Val> = (0..vals.len()).map(arg).collect::<Result<_>>()?;
            concat(&parts, int_attr("axis", 0)?)?
        }
        "Unsqueeze" => {
            let x = arg(0)?;
            let axes = axes(13, 1)?.ok_or("axes are missing")?;
            let rank = x.shape.len() + axes.len();
            let mut resolved = axes
                .iter()
                .map(|&a| axis_of(a, rank))
                .collect::<Result<Vec<_>>>()?;
            resolved.sort_unstable();
            if resolved.windows(2).any(|w| w[0] == w[1]) {
                return Err(format!("axes {axes:?} repeat an axis"));
            }
            let mut rest = x.shape.iter();
            let shape = (0..rank)
                .map(|a| {
                    if resolved.contains(&a) {
                        1
                    } else {
                        rest.next().copied().unwrap_or(1)
                    }
                })
                .collect();
            reshaped(x, shape)?
        }
        "Squeeze" => {
            let x = arg(0)?;
            let rank = x.shape.len();
            let resolved = match axes(13, 1)? {
                Some(axes) => axes
                    .iter()
                    .map(|&a| axis_of(a, rank))
                    .collect::<Result<Vec<_>>>()?,
                None => (0..rank).filter(|&a| x.shape[a] == 1).collect(),
            };
            if resolved.iter().any(|&a| x.shape[a] != 1) {
                return Err(format!(
                    "it squeezes an axis of {:?} that is not 1",
                    x.shape
                ));
            }
            let shape = (0..rank)
                .filter(|a| !resolved.contains(a))
                .map(|a| x.shape[a])
                .collect();
            reshaped(x, shape)?
        }
        "Reshape" => {
            let x = arg(0)?;
            let target = arg(1)?.ints("the shape")?;
            let shape = reshape_target(&x.shape, target, int_attr("allowzero", 0)? != 0)?;
            reshaped(x, shape)?
        }
        "Flatten" => {
            let x = arg(0)?;
            let rank = x.shape.len();
            let axis = int_attr("axis", 1)?;
            let axis = if axis == rank as i64 {
                rank
            } else {
                axis_of(axis, rank)?
            };
            let outer = x.shape[..axis].iter().product();
            let inner = x.shape[axis..].iter().product();
            reshaped(x, vec![outer, inner])?
        }
        "Transpose" => {
            let x = arg(0)?;
            let rank = x.shape.len();
            let perm: Vec<usize> = match ints_attr("perm")? {
                None => (0..rank).rev().collect(),
                Some(perm) => perm
                    .iter()
                    .map(|&p| axis_of(p, rank))
                    .collect::<Result<_>>()?,
            };
            let mut sorted = perm.clone();
            sorted.sort_unstable();
            if sorted != (0..rank).collect::<Vec<_>>() {
                return Err(format!("perm {perm:?} is not a permutation"));
            }
            let shape: Vec<usize> = perm.iter().map(|&p| x.shape[p]).collect();
            let n = count(&shape)?;
            let in_strides = strides(&x.shape);
            let out_strides = strides(&shape);
            let indices: Vec<usize> = (0..n)
                .map(|flat| {
                    (0..rank)
                        .map(|a| (flat / out_strides[a]) % shape[a] * in_strides[perm[a]])
                        .sum()
                })
                .collect();
            Val {
                data: x.pick(&indices),
                shape,
            }
        }
        "Expand" => {
            let x = arg(0)?;
            let target: Vec<usize> = dims(arg(1)?.ints("the shape")?)?;
            let shape = broadcast_shape(&[&x.shape, &target])?;
            let indices = broadcast_index(&x.shape, &shape)?;
            Val {
                data: x.pick(&indices),
                shape,
            }
        }
        "ConstantOfShape" => {
            let shape = dims(arg(0)?.ints("the shape")?)?;
            let n = count(&shape)?;
            let value = match node.attribute("value") {
                None => Val {
                    shape: vec![1],
                    data: Data::F32(vec![0.0]),
                },
                Some(AttributeValue::Tensor(tensor)) => Val::of(Operand::Tensor(tensor)),
                Some(_) => return Err("attribute value is not a tensor".into()),
            };
            if value.len() != 1 {
                return Err("attribute value holds more than one element".into());
            }
            Val {
                data: value.pick(&vec![0; n]),
                shape,
            }
        }
        "Range" => range(arg(0)?, arg(1)?, arg(2)?)?,
        "Trilu" => {
            let k = match vals.get(1).and_then(Option::as_ref) {
                None => 0,
                Some(k) => match k.ints("k")? {
                    &[k] => k,
                    _ => return Err("k is not one integer".into()),
                },
            };
            trilu(arg(0)?, k, int_attr("upper", 1)? != 0)?
        }
        "Equal" | "Less" | "Greater" | "LessOrEqual" | "GreaterOrEqual" => {
            compare(&node.op_type, arg(0)?, arg(1)?)?
        }
        "Not" => match &arg(0)?.data {
            Data::Bool(v) => Val {
                shape: arg(0)?.shape.clone(),
                data: Data::Bool(v.iter().map(|b| !b).collect()),
            },
            _ => return Err("Not of a tensor that is not boolean".into()),
        },
        "And" | "Or" | "Xor" => logic(&node.op_type, arg(0)?, arg(1)?)?,
        "Where" => select(arg(0)?, arg(1)?, arg(2)?)?,
        "Add" | "Sub" | "Mul" | "Div" => arithmetic(&node.op_type, arg(0)?, arg(1)?)?,
        "Min" | "Max" => {
            let mut acc = arg(0)?.clone();
            for k in 1..vals.len() {
                acc = arithmetic(&node.op_type, &acc, arg(k)?)?;
            }
            acc
        }
        "Neg" | "Abs" | "Sqrt" => unary(&node.op_type, arg(0)?)?,
        _ => return Ok(None),
    };
    let n = out.len() as u64;
    *budget = budget.checked_sub(n).ok_or_else(|| {
        format!(
            "folding it would take the constants folded by this import past \
             {MAX_FOLDED_ELEMENTS} elements"
        )
    })?;
    Ok(Some(vec![out.into_folded()?]))
}

/// Dimensions from an integer list, each at least 0.
fn dims(values: &[i64]) -> Result<Vec<usize>> {
    values
        .iter()
        .map(|&d| {
            usize::try_from(d)
                .ok()
                .filter(|&d| d as u64 <= MAX_TENSOR_ELEMENTS)
                .ok_or_else(|| format!("shape {values:?} holds {d}, not a dimension"))
        })
        .collect()
}

/// The same elements under another shape of as many elements.
fn reshaped(x: &Val, shape: Vec<usize>) -> Result<Val> {
    if count(&shape)? != x.len() {
        return Err(format!("shape {shape:?} does not fit {:?}", x.shape));
    }
    Ok(Val {
        shape,
        data: x.data.clone(),
    })
}

/// ONNX Reshape's target: 0 copies the input's dimension (a literal 0 with `allowzero`), −1 is
/// inferred (at most once).
pub fn reshape_target(input: &[usize], target: &[i64], allowzero: bool) -> Result<Vec<usize>> {
    if target.len() > MAX_RANK {
        return Err(format!(
            "the shape has {} entries; a CVM tensor has at most {MAX_RANK} dimensions",
            target.len()
        ));
    }
    let total: usize = input.iter().product();
    let mut shape = Vec::with_capacity(target.len());
    let mut inferred = None;
    for (i, &d) in target.iter().enumerate() {
        match d {
            0 if allowzero => shape.push(0),
            0 => shape.push(
                *input
                    .get(i)
                    .ok_or_else(|| format!("shape entry {i} copies an axis the data lacks"))?,
            ),
            -1 if inferred.is_none() => {
                inferred = Some(i);
                shape.push(1);
            }
            d if d > 0 => {
                shape.push(usize::try_from(d).map_err(|_| format!("shape entry {d} is too large"))?)
            }
            _ => return Err(format!("shape {target:?} is not a valid target")),
        }
    }
    let known = shape
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .unwrap_or(0);
    if let Some(i) = inferred {
        if known == 0 || !total.is_multiple_of(known) {
            return Err(format!("shape {target:?} does not fit {input:?}"));
        }
        shape[i] = total / known;
    }
    let product = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
    if product != Some(total) {
        return Err(format!("shape {target:?} does not fit {input:?}"));
    }
    Ok(shape)
}

fn cast(x: &Val, to: i64) -> Result<Val> {
    let to = i32::try_from(to)
        .ok()
        .and_then(ElementType::from_code)
        .map(Some)
        .or_else(|| (to == 9).then_some(None))
        .ok_or_else(|| format!("Cast to type {to}, which the importer does not fold"))?;
    let data = match (to, &x.data) {
        (None, Data::F32(v)) => Data::Bool(v.iter().map(|&f| f != 0.0).collect()),
        (None, Data::Int(v, _)) => Data::Bool(v.iter().map(|&i| i != 0).collect()),
        (None, Data::Bool(v)) => Data::Bool(v.clone()),
        // i64 → f32 is one IEEE 754 conversion, rounding to nearest.
        (Some(ElementType::Float32), Data::Int(v, _)) => {
            Data::F32(v.iter().map(|&i| i as f32).collect())
        }
        (Some(ElementType::Float32), Data::F32(v)) => Data::F32(v.clone()),
        (Some(ElementType::Float32), Data::Bool(v)) => {
            Data::F32(v.iter().map(|&b| f32::from(u8::from(b))).collect())
        }
        (Some(ty), Data::Int(v, _)) => Data::Int(v.clone(), ty),
        (Some(ty), Data::Bool(v)) => Data::Int(v.iter().map(|&b| i64::from(b)).collect(), ty),
        (Some(ty), Data::F32(v)) => Data::Int(
            v.iter()
                .map(|&f| {
                    // Truncation toward zero, as onnxruntime's; a value outside i64 has none.
                    let t = f.trunc();
                    if (-9.2e18..=9.2e18).contains(&t) {
                        Ok(t as i64)
                    } else {
                        Err(format!("Cast of {f} to an integer"))
                    }
                })
                .collect::<Result<_>>()?,
            ty,
        ),
    };
    Ok(Val {
        shape: x.shape.clone(),
        data,
    })
}

fn gather(x: &Val, indices: &Val, axis: i64) -> Result<Val> {
    let axis = axis_of(axis, x.shape.len())?;
    let dim = x.shape[axis];
    let picks: Vec<usize> = indices
        .ints("the indices")?
        .iter()
        .map(|&i| {
            let resolved = if i < 0 { i + dim as i64 } else { i };
            usize::try_from(resolved)
                .ok()
                .filter(|&r| r < dim)
                .ok_or_else(|| format!("index {i} is out of range for a dimension of {dim}"))
        })
        .collect::<Result<_>>()?;
    let mut shape = x.shape[..axis].to_vec();
    shape.extend(&indices.shape);
    shape.extend(&x.shape[axis + 1..]);
    count(&shape)?;
    let outer: usize = x.shape[..axis].iter().product();
    let inner: usize = x.shape[axis + 1..].iter().product();
    let mut positions = Vec::new();
    for o in 0..outer {
        for &p in &picks {
            for i in 0..inner {
                positions.push((o * dim + p) * inner + i);
            }
        }
    }
    Ok(Val {
        data: x.pick(&positions),
        shape,
    })
}

/// ONNX Slice's ranges on a tensor of `shape`: per axis the first index, the step and the
/// count (axes the slice does not name are whole). Starts and ends are clamped as ONNX says.
pub fn slice_ranges(
    shape: &[usize],
    starts: &[i64],
    ends: &[i64],
    axes: Option<&[i64]>,
    steps: Option<&[i64]>,
) -> Result<Vec<(i64, i64, usize)>> {
    let rank = shape.len();
    let axes: Vec<usize> = match axes {
        Some(axes) => axes
            .iter()
            .map(|&a| axis_of(a, rank))
            .collect::<Result<_>>()?,
        None => (0..starts.len()).collect(),
    };
    if starts.len() != axes.len()
        || ends.len() != axes.len()
        || steps.is_some_and(|s| s.len() != axes.len())
    {
        return Err("starts, ends, axes and steps differ in length".into());
    }
    let mut ranges: Vec<(i64, i64, usize)> = shape.iter().map(|&d| (0, 1, d)).collect();
    for (k, &axis) in axes.iter().enumerate() {
        if axes[..k].contains(&axis) {
            return Err(format!("axis {axis} is sliced twice"));
        }
        let dim = shape[axis] as i64;
        let step = steps.map_or(1, |s| s[k]);
        if step == 0 || step == i64::MIN {
            return Err(format!("a step of {step}"));
        }
        let resolve = |v: i64, low: i64, high: i64| {
            let v = if v < 0 { v.saturating_add(dim) } else { v };
            v.clamp(low, high)
        };
        let (start, end) = if step > 0 {
            (resolve(starts[k], 0, dim), resolve(ends[k], 0, dim))
        } else {
            (
                resolve(starts[k], 0, dim - 1),
                resolve(ends[k], -1, dim - 1),
            )
        };
        let span = if step > 0 { end - start } else { start - end };
        let n = if span <= 0 {
            0
        } else {
            (span + step.abs() - 1) / step.abs()
        };
        ranges[axis] = (start, step, n as usize);
    }
    Ok(ranges)
}

fn slice(
    x: &Val,
    starts: &[i64],
    ends: &[i64],
    axes: Option<&[i64]>,
    steps: Option<&[i64]>,
) -> Result<Val> {
    let rank = x.shape.len();
    let ranges = slice_ranges(&x.shape, starts, ends, axes, steps)?;
    let shape: Vec<usize> = ranges.iter().map(|r| r.2).collect();
    let n = count(&shape)?;
    let in_strides = strides(&x.shape);
    let out_strides = strides(&shape);
    let positions: Vec<usize> = (0..n)
        .map(|flat| {
            (0..rank)
                .map(|a| {
                    let coordinate = ((flat / out_strides[a]) % shape[a]) as i64;
                    let (start, step, _) = ranges[a];
                    (start + coordinate * step) as usize * in_strides[a]
                })
                .sum()
        })
        .collect();
    Ok(Val {
        data: x.pick(&positions),
        shape,
    })
}

fn concat(parts: &[&Val], axis: i64) -> Result<Val> {
    let Some(first) = parts.first() else {
        return Err("no inputs".into());
    };
    let rank = first.shape.len();
    let axis = axis_of(axis, rank)?;
    let mut shape = first.shape.clone();
    shape[axis] = 0;
    for part in parts {
        let same_type = std::mem::discriminant(&part.data) == std::mem::discriminant(&first.data);
        if part.shape.len() != rank
            || (0..rank).any(|a| a != axis && part.shape[a] != first.shape[a])
            || !same_type
        {
            return Err(format!(
                "inputs of shapes {:?} and {:?} (or of different types) do not join on axis {axis}",
                first.shape, part.shape
            ));
        }
        shape[axis] += part.shape[axis];
    }
    let n = count(&shape)?;
    let outer: usize = shape[..axis].iter().product();
    let mut data = match &first.data {
        Data::F32(_) => Data::F32(Vec::with_capacity(n)),
        Data::Int(_, ty) => Data::Int(Vec::with_capacity(n), *ty),
        Data::Bool(_) => Data::Bool(Vec::with_capacity(n)),
    };
    for o in 0..outer {
        for part in parts {
            let block: usize = part.shape[axis..].iter().product();
            let range = o * block..(o + 1) * block;
            match (&mut data, &part.data) {
                (Data::F32(out), Data::F32(v)) => out.extend_from_slice(&v[range]),
                (Data::Int(out, _), Data::Int(v, _)) => out.extend_from_slice(&v[range]),
                (Data::Bool(out), Data::Bool(v)) => out.extend_from_slice(&v[range]),
                _ => return Err("inputs of different types".into()),
            }
        }
    }
    Ok(Val { shape, data })
}

fn scalar_int(v: &Val, what: &str) -> Result<i64> {
    match v.ints(what)? {
        [x] => Ok(*x),
        _ => Err(format!("{what} is not a scalar")),
    }
}

fn range(start: &Val, limit: &Val, delta: &Val) -> Result<Val> {
    let ty = match &start.data {
        Data::Int(_, ty) => *ty,
        _ => return Err("Range of floats is not folded; only integer ranges".into()),
    };
    let (start, limit, delta) = (
        scalar_int(start, "start")?,
        scalar_int(limit, "limit")?,
        scalar_int(delta, "delta")?,
    );
    if delta == 0 {
        return Err("a delta of 0".into());
    }
    let span = i128::from(limit) - i128::from(start);
    let delta_w = i128::from(delta);
    let n = if (span > 0) == (delta > 0) && span != 0 {
        (span + delta_w - delta_w.signum()) / delta_w
    } else {
        0
    };
    let n = usize::try_from(n).map_err(|_| "a range too long".to_string())?;
    count(&[n])?;
    let values = (0..n as i64)
        .map(|i| {
            i.checked_mul(delta)
                .and_then(|step| start.checked_add(step))
                .ok_or_else(|| "an integer overflow".to_string())
        })
        .collect::<Result<_>>()?;
    Ok(Val {
        shape: vec![n],
        data: Data::Int(values, ty),
    })
}

/// Two operands broadcast against each other: the output shape and, per element, the position
/// each reads.
fn pairs(a: &Val, b: &Val) -> Result<(Vec<usize>, Vec<usize>, Vec<usize>)> {
    let shape = broadcast_shape(&[&a.shape, &b.shape])?;
    let ia = broadcast_index(&a.shape, &shape)?;
    let ib = broadcast_index(&b.shape, &shape)?;
    Ok((shape, ia, ib))
}

fn compare(op: &str, a: &Val, b: &Val) -> Result<Val> {
    let (shape, ia, ib) = pairs(a, b)?;
    let test = |o: std::cmp::Ordering| match op {
        "Equal" => o.is_eq(),
        "Less" => o.is_lt(),
        "Greater" => o.is_gt(),
        "LessOrEqual" => o.is_le(),
        _ => o.is_ge(),
    };
    let values = match (&a.data, &b.data) {
        (Data::Int(x, _), Data::Int(y, _)) => ia
            .iter()
            .zip(&ib)
            .map(|(&i, &j)| test(x[i].cmp(&y[j])))
            .collect(),
        // A NaN compares false with everything, Equal included.
        (Data::F32(x), Data::F32(y)) => ia
            .iter()
            .zip(&ib)
            .map(|(&i, &j)| x[i].partial_cmp(&y[j]).is_some_and(test))
            .collect(),
        (Data::Bool(x), Data::Bool(y)) if op == "Equal" => {
            ia.iter().zip(&ib).map(|(&i, &j)| x[i] == y[j]).collect()
        }
        _ => return Err(format!("{op} of operands of different types")),
    };
    Ok(Val {
        shape,
        data: Data::Bool(values),
    })
}

fn logic(op: &str, a: &Val, b: &Val) -> Result<Val> {
    let (shape, ia, ib) = pairs(a, b)?;
    let (Data::Bool(x), Data::Bool(y)) = (&a.data, &b.data) else {
        return Err(format!("{op} of tensors that are not boolean"));
    };
    let values = ia
        .iter()
        .zip(&ib)
        .map(|(&i, &j)| match op {
            "And" => x[i] && y[j],
            "Or" => x[i] || y[j],
            _ => x[i] != y[j],
        })
        .collect();
    Ok(Val {
        shape,
        data: Data::Bool(values),
    })
}

/// Trilu: the upper (`j − i ≥ k`) or lower (`j − i ≤ k`) triangle of each matrix of the last
/// two axes, the other elements 0 (false).
fn trilu(x: &Val, k: i64, upper: bool) -> Result<Val> {
    let rank = x.shape.len();
    if rank < 2 {
        return Err(format!("the input has rank {rank}, not 2 or more"));
    }
    let (rows, cols) = (x.shape[rank - 2], x.shape[rank - 1]);
    let kept = |flat: usize| {
        let (i, j) = (
            (flat / cols.max(1) % rows.max(1)) as i64,
            (flat % cols.max(1)) as i64,
        );
        if upper { j - i >= k } else { j - i <= k }
    };
    fn keep<T: Copy>(values: &[T], zero: T, kept: impl Fn(usize) -> bool) -> Vec<T> {
        values
            .iter()
            .enumerate()
            .map(|(flat, &v)| if kept(flat) { v } else { zero })
            .collect()
    }
    let data = match &x.data {
        Data::F32(v) => Data::F32(keep(v, 0.0, kept)),
        Data::Int(v, ty) => Data::Int(keep(v, 0, kept), *ty),
        Data::Bool(v) => Data::Bool(keep(v, false, kept)),
    };
    Ok(Val {
        shape: x.shape.clone(),
        data,
    })
}

fn select(condition: &Val, a: &Val, b: &Val) -> Result<Val> {
    let Data::Bool(c) = &condition.data else {
        return Err("the condition is not boolean".into());
    };
    let shape = broadcast_shape(&[&condition.shape, &a.shape, &b.shape])?;
    let ic = broadcast_index(&condition.shape, &shape)?;
    let ia = broadcast_index(&a.shape, &shape)?;
    let ib = broadcast_index(&b.shape, &shape)?;
    let data = match (&a.data, &b.data) {
        (Data::F32(x), Data::F32(y)) => Data::F32(
            (0..ic.len())
                .map(|k| if c[ic[k]] { x[ia[k]] } else { y[ib[k]] })
                .collect(),
        ),
        (Data::Int(x, ty), Data::Int(y, _)) => Data::Int(
            (0..ic.len())
                .map(|k| if c[ic[k]] { x[ia[k]] } else { y[ib[k]] })
                .collect(),
            *ty,
        ),
        (Data::Bool(x), Data::Bool(y)) => Data::Bool(
            (0..ic.len())
                .map(|k| if c[ic[k]] { x[ia[k]] } else { y[ib[k]] })
                .collect(),
        ),
        _ => return Err("Where of operands of different types".into()),
    };
    Ok(Val { shape, data })
}

fn arithmetic(op: &str, a: &Val, b: &Val) -> Result<Val> {
    let (shape, ia, ib) = pairs(a, b)?;
    let data = match (&a.data, &b.data) {
        (Data::Int(x, ty), Data::Int(y, _)) => {
            let apply = |p: i64, q: i64| -> Result<i64> {
                let overflow = || format!("{op} of {p} and {q} overflows");
                match op {
                    "Add" => p.checked_add(q).ok_or_else(overflow),
                    "Sub" => p.checked_sub(q).ok_or_else(overflow),
                    "Mul" => p.checked_mul(q).ok_or_else(overflow),
                    // Integer division truncates toward zero, as onnxruntime's.
                    "Div" if q == 0 => Err("a division by zero".into()),
                    "Div" => p.checked_div(q).ok_or_else(overflow),
                    "Min" => Ok(p.min(q)),
                    _ => Ok(p.max(q)),
                }
            };
            Data::Int(
                ia.iter()
                    .zip(&ib)
                    .map(|(&i, &j)| apply(x[i], y[j]))
                    .collect::<Result<_>>()?,
                *ty,
            )
        }
        (Data::F32(x), Data::F32(y)) => {
            // Each a correctly rounded float32 operation: the f64 result rounded once.
            let apply = |p: f32, q: f32| -> f32 {
                let (p, q) = (f64::from(p), f64::from(q));
                (match op {
                    "Add" => p + q,
                    "Sub" => p - q,
                    "Mul" => p * q,
                    "Div" => p / q,
                    "Min" => p.min(q),
                    _ => p.max(q),
                }) as f32
            };
            Data::F32(
                ia.iter()
                    .zip(&ib)
                    .map(|(&i, &j)| apply(x[i], y[j]))
                    .collect(),
            )
        }
        _ => return Err(format!("{op} of operands of different types")),
    };
    Ok(Val { shape, data })
}

fn unary(op: &str, x: &Val) -> Result<Val> {
    let data = match &x.data {
        Data::Int(v, ty) => Data::Int(
            v.iter()
                .map(|&i| match op {
                    "Neg" => i.checked_neg(),
                    "Abs" => i.checked_abs(),
                    _ => None,
                })
                .collect::<Option<_>>()
                .ok_or_else(|| format!("{op} of an integer tensor overflows or is not folded"))?,
            *ty,
        ),
        Data::F32(v) => Data::F32(
            v.iter()
                .map(|&f| match op {
                    "Neg" => -f,
                    "Abs" => f.abs(),
                    // √ in f64 rounded once to f32 is float32's correctly rounded √.
                    _ => f64::from(f).sqrt() as f32,
                })
                .collect(),
        ),
        Data::Bool(_) => return Err(format!("{op} of a boolean tensor")),
    };
    Ok(Val {
        shape: x.shape.clone(),
        data,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(op_type: &str, attributes: Vec<(&str, AttributeValue)>) -> Node {
        Node {
            name: String::new(),
            op_type: op_type.into(),
            domain: String::new(),
            inputs: Vec::new(),
            outputs: vec!["y".into()],
            attributes: attributes
                .into_iter()
                .map(|(name, value)| crate::model::Attribute {
                    name: name.into(),
                    value,
                })
                .collect(),
        }
    }

    fn int64(shape: &[u32], values: &[i64]) -> Tensor {
        Tensor {
            name: String::new(),
            shape: shape.to_vec(),
            data: TensorData::Int64(values.to_vec()),
        }
    }

    fn run(node: &Node, inputs: &[Option<Operand<'_>>]) -> Result<Folded> {
        let mut budget = MAX_FOLDED_ELEMENTS;
        let mut out = fold(node, inputs, 17, &mut budget)?.ok_or("not folded")?;
        Ok(out.remove(0))
    }

    fn ints_of(folded: &Folded) -> (Vec<u32>, Vec<i64>) {
        match folded {
            Folded::Tensor(Tensor {
                shape,
                data: TensorData::Int64(v),
                ..
            }) => (shape.clone(), v.clone()),
            other => panic!("not int64: {other:?}"),
        }
    }

    #[test]
    fn the_batch_plumbing_of_a_view_folds_to_its_target_shape() {
        // x.view(x.size(0), -1) on a (1, 32, 4, 4) value: Shape, Gather 0, Unsqueeze, Concat.
        let shape = int64(&[4], &[1, 32, 4, 4]);
        let zero = int64(&[], &[0]);
        let gathered = run(
            &node("Gather", vec![("axis", AttributeValue::Int(0))]),
            &[Some(Operand::Tensor(&shape)), Some(Operand::Tensor(&zero))],
        )
        .unwrap();
        assert_eq!(ints_of(&gathered), (vec![], vec![1]));
        let Folded::Tensor(batch) = gathered else {
            unreachable!()
        };
        let axes = int64(&[1], &[0]);
        let unsqueezed = run(
            &node("Unsqueeze", vec![]),
            &[Some(Operand::Tensor(&batch)), Some(Operand::Tensor(&axes))],
        )
        .unwrap();
        let Folded::Tensor(batch) = unsqueezed else {
            unreachable!()
        };
        let minus_one = int64(&[1], &[-1]);
        let target = run(
            &node("Concat", vec![("axis", AttributeValue::Int(0))]),
            &[
                Some(Operand::Tensor(&batch)),
                Some(Operand::Tensor(&minus_one)),
            ],
        )
        .unwrap();
        assert_eq!(ints_of(&target), (vec![2], vec![1, -1]));
    }

    #[test]
    fn trilu_keeps_a_triangle_of_each_matrix() {
        let ones = int64(&[2, 2, 3], &[1; 12]);
        let k = |v: i64| int64(&[], &[v]);
        let cases: [(i64, Option<i64>, [i64; 6]); 4] = [
            (1, None, [1, 1, 1, 0, 1, 1]),
            (1, Some(1), [0, 1, 1, 0, 0, 1]),
            (0, None, [1, 0, 0, 1, 1, 0]),
            (0, Some(-1), [0, 0, 0, 1, 0, 0]),
        ];
        for (upper, diagonal, matrix) in cases {
            let diagonal = diagonal.map(k);
            let mut inputs = vec![Some(Operand::Tensor(&ones))];
            inputs.extend(diagonal.as_ref().map(|d| Some(Operand::Tensor(d))));
            let out = run(
                &node("Trilu", vec![("upper", AttributeValue::Int(upper))]),
                &inputs,
            )
            .unwrap();
            let expected: Vec<i64> = matrix.iter().chain(&matrix).copied().collect();
            assert_eq!(ints_of(&out), (vec![2, 2, 3], expected), "upper {upper}");
        }
        let vector = int64(&[3], &[1, 2, 3]);
        assert!(run(&node("Trilu", vec![]), &[Some(Operand::Tensor(&vector))]).is_err());
    }

    #[test]
    fn slices_follow_onnx_clamping_and_negative_steps() {
        let x = int64(&[5], &[10, 11, 12, 13, 14]);
        let list = |v: &[i64]| int64(&[v.len() as u32], v);
        // (starts, ends, steps, expected)
        type Case = (
            &'static [i64],
            &'static [i64],
            &'static [i64],
            &'static [i64],
        );
        let cases: [Case; 4] = [
            (&[1], &[i64::MAX], &[1], &[11, 12, 13, 14]),
            (&[-2], &[100], &[1], &[13, 14]),
            (&[-1], &[i64::MIN], &[-1], &[14, 13, 12, 11, 10]),
            (&[0], &[5], &[2], &[10, 12, 14]),
        ];
        for (starts, ends, steps, expected) in cases {
            let (s, e, a, st) = (list(starts), list(ends), list(&[0]), list(steps));
            let out = run(
                &node("Slice", vec![]),
                &[
                    Some(Operand::Tensor(&x)),
                    Some(Operand::Tensor(&s)),
                    Some(Operand::Tensor(&e)),
                    Some(Operand::Tensor(&a)),
                    Some(Operand::Tensor(&st)),
                ],
            )
            .unwrap();
            assert_eq!(ints_of(&out).1, expected, "{starts:?} {ends:?} {steps:?}");
        }
    }

    #[test]
    fn where_on_a_comparison_and_range_and_constant_of_shape() {
        let a = int64(&[3], &[1, 5, 3]);
        let b = int64(&[], &[3]);
        let less = run(
            &node("Less", vec![]),
            &[Some(Operand::Tensor(&a)), Some(Operand::Tensor(&b))],
        )
        .unwrap();
        let Folded::Bool(condition) = less else {
            panic!("not boolean")
        };
        assert_eq!(condition.values, [true, false, false]);
        let other = int64(&[3], &[-1, -2, -3]);
        let picked = run(
            &node("Where", vec![]),
            &[
                Some(Operand::Bool(&condition)),
                Some(Operand::Tensor(&a)),
                Some(Operand::Tensor(&other)),
            ],
        )
        .unwrap();
        assert_eq!(ints_of(&picked).1, [1, -2, -3]);
        let (start, limit, delta) = (int64(&[], &[7]), int64(&[], &[0]), int64(&[], &[-3]));
        let range = run(
            &node("Range", vec![]),
            &[
                Some(Operand::Tensor(&start)),
                Some(Operand::Tensor(&limit)),
                Some(Operand::Tensor(&delta)),
            ],
        )
        .unwrap();
        assert_eq!(ints_of(&range).1, [7, 4, 1]);
        let shape = int64(&[2], &[2, 3]);
        let Folded::Tensor(zeros) = run(
            &node("ConstantOfShape", vec![]),
            &[Some(Operand::Tensor(&shape))],
        )
        .unwrap() else {
            panic!("not a tensor")
        };
        assert_eq!(zeros.shape, [2, 3]);
        assert_eq!(zeros.data, TensorData::Float32(vec![0.0; 6]));
    }

    #[test]
    fn overflow_division_by_zero_and_huge_results_are_refused() {
        let big = int64(&[], &[i64::MAX]);
        let one = int64(&[], &[1]);
        let zero = int64(&[], &[0]);
        let err = run(
            &node("Add", vec![]),
            &[Some(Operand::Tensor(&big)), Some(Operand::Tensor(&one))],
        )
        .unwrap_err();
        assert!(err.contains("overflows"), "{err}");
        let err = run(
            &node("Div", vec![]),
            &[Some(Operand::Tensor(&one)), Some(Operand::Tensor(&zero))],
        )
        .unwrap_err();
        assert!(err.contains("division by zero"), "{err}");
        let huge = int64(&[2], &[1 << 20, 1 << 20]);
        let err = run(
            &node("ConstantOfShape", vec![]),
            &[Some(Operand::Tensor(&huge))],
        )
        .unwrap_err();
        assert!(err.contains("more than the"), "{err}");
        // The budget: a result larger than what is left is refused.
        let shape = int64(&[1], &[100]);
        let mut budget = 99;
        let err = fold(
            &node("ConstantOfShape", vec![]),
            &[Some(Operand::Tensor(&shape))],
            17,
            &mut budget,
        )
        .unwrap_err();
        assert!(err.contains("past"), "{err}");
    }

    #[test]
    fn float_arithmetic_is_float32s() {
        let a = Tensor {
            name: String::new(),
            shape: vec![],
            data: TensorData::Float32(vec![0.1]),
        };
        let b = Tensor {
            name: String::new(),
            shape: vec![],
            data: TensorData::Float32(vec![0.2]),
        };
        let sum = run(
            &node("Add", vec![]),
            &[Some(Operand::Tensor(&a)), Some(Operand::Tensor(&b))],
        )
        .unwrap();
        assert_eq!(
            sum,
            Folded::Tensor(Tensor {
                name: String::new(),
                shape: vec![],
                data: TensorData::Float32(vec![0.1f32 + 0.2f32]),
            })
        );
    }
}
