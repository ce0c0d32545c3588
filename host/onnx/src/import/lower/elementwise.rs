//! Elementwise operators: Add, Sub, Mul, Div (by a constant), Sum, Relu, Clip, PRelu, and the
//! functions computed through tables (Sigmoid, Tanh, Erf, Softplus, HardSwish, LeakyRelu, Elu,
//! HardSigmoid, Gelu).

use crate::import::ImportError;
use crate::import::fold::BoolTensor;
use crate::import::graph::{Conv, Dense, FTensor, Function, Op};
use crate::model::Node;
use crate::tensor::TensorData;

use super::{Lowering, Slot, float_tensor};

impl<'a> Lowering<'a> {
    /// Lowers the node if it is one of this family's: Add, Sub, Mul, Div, Sum, Relu, Clip, PRelu
    /// and the tabled functions.
    pub(super) fn lower_elementwise(&mut self, node: &'a Node) -> Option<Result<(), ImportError>> {
        let function = |f| Op::Table(f);
        Some(match node.op_type.as_str() {
            "Add" => self.add(node),
            "Sub" => self.binary(node, Op::Sub),
            "Mul" => self.mul(node),
            "Div" => self.div(node),
            "Sum" => self.sum(node),
            "Relu" => self.unary(node, Op::Relu),
            "Clip" => self.clip(node),
            "PRelu" => self.prelu(node),
            "Sigmoid" => self.unary(node, function(Function::Sigmoid)),
            "Tanh" => self.unary(node, function(Function::Tanh)),
            "Erf" => self.unary(node, function(Function::Erf)),
            "Softplus" => self.unary(node, function(Function::Softplus)),
            "HardSwish" => self.unary(node, function(Function::HardSwish)),
            "LeakyRelu" => self
                .float(node, "alpha", 0.01)
                .and_then(|alpha| self.unary(node, function(Function::LeakyRelu(alpha)))),
            "Elu" => self
                .float(node, "alpha", 1.0)
                .and_then(|alpha| self.unary(node, function(Function::Elu(alpha)))),
            "HardSigmoid" => self.hard_sigmoid(node),
            "Where" => match self.constant_condition(node) {
                Ok(true) => Ok(()),
                Ok(false) => self.causal_mask(node),
                Err(e) => Err(e),
            },
            "IsNaN" => self.is_nan(node),
            "Gelu" => self.gelu(node),
            _ => return None,
        })
    }

    /// Mul: the first of the patterns it completes or folds into (a normalization by
    /// `Reciprocal`, a dynamic quantization's scale, a scale of a product or of a layer
    /// normalization, GELU written out), else a product.
    fn mul(&mut self, node: &'a Node) -> Result<(), ImportError> {
        if self.normalized_product(node)?
            || self.dynamic_mul(node)?.is_some()
            || self.scale_product(node, false)?
            || self.scale_norm(node, false)?
            || self.gelu_product(node)?
        {
            return Ok(());
        }
        self.binary(node, Op::Mul)
    }

    /// Div: a normalization completed, a product scaled, else a division by a constant.
    fn div(&mut self, node: &'a Node) -> Result<(), ImportError> {
        if self.normalized(node)? || self.scale_product(node, true)? {
            return Ok(());
        }
        self.divide(node)
    }

    /// `IsNaN` of a computed tensor: false everywhere, a boolean constant. The exporters guard
    /// a Softmax with `Where(IsNaN(p), 0, p)` against rows masked whole; the integer values the
    /// importer computes are never NaN, and a Softmax it imports never gets a row masked whole
    /// (the causal mask keeps each query's own position).
    fn is_nan(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let x = self.value(node, 0)?;
        let shape = &self.values[x].shape;
        let mask = BoolTensor {
            shape: shape.iter().map(|&d| d as u32).collect(),
            values: vec![false; shape.iter().product()],
        };
        if let Some(name) = node.outputs.first() {
            self.slots.insert(name.as_str(), Slot::Bool(mask));
        }
        Ok(())
    }

    /// `Where` of a boolean constant that is the same everywhere, the side it picks a computed
    /// tensor of the output's shape and the other a scalar constant: that tensor. Returns
    /// whether the node was one.
    fn constant_condition(&mut self, node: &'a Node) -> Result<bool, ImportError> {
        let Some(Slot::Bool(condition)) = self.slot(node, 0) else {
            return Ok(false);
        };
        let Some(&first) = condition.values.first() else {
            return Ok(false);
        };
        if condition.values.iter().any(|&c| c != first) {
            return Ok(false);
        }
        let (picked, other) = if first { (1, 2) } else { (2, 1) };
        let (Some(&Slot::Value(x)), Some(Slot::Const(c))) =
            (self.slot(node, picked), self.slot(node, other))
        else {
            return Ok(false);
        };
        // The condition broadcasts to the tensor without enlarging it.
        let shape = &self.values[x].shape;
        let fits = condition.shape.len() <= shape.len()
            && condition
                .shape
                .iter()
                .rev()
                .zip(shape.iter().rev())
                .all(|(&c, &d)| c == 1 || c as usize == d);
        if c.data.len() != 1 || !fits {
            return Ok(false);
        }
        self.bind(node, x)?;
        Ok(true)
    }

    /// `Where(mask, −∞, scores)` (`masked_fill` of the positions after each query's own), or
    /// `Where(allowed, scores, −∞)` with the complement of that mask (`torch.where` of the
    /// positions kept): the causal mask, left for the Softmax that reads it. The fill may be a
    /// finite value below −10³⁰ (`torch.finfo(torch.float32).min`), which the Softmax makes 0
    /// as it does −∞, since every query keeps its own position. Any other Where of a computed
    /// tensor is refused.
    fn causal_mask(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let refused = |this: &Self, why: &str| {
            Err(this.error(format!(
                "{why}; the importer reads a Where of a computed tensor only as the causal mask \
                 of attention scores: Where(mask, -inf, scores), the mask true exactly after \
                 each query's own position, or Where(allowed, scores, -inf), its complement"
            )))
        };
        let slot = |k: usize| node.inputs.get(k).and_then(|n| self.slots.get(n.as_str()));
        let (mask, fill, x, kept) = match (slot(0), slot(1), slot(2)) {
            (Some(Slot::Bool(mask)), Some(Slot::Const(fill)), Some(Slot::Value(x))) => {
                (mask, fill, *x, false)
            }
            (Some(Slot::Bool(mask)), Some(Slot::Value(x)), Some(Slot::Const(fill))) => {
                (mask, fill, *x, true)
            }
            _ => {
                return refused(
                    self,
                    "its inputs are not a boolean constant, a constant and a value",
                );
            }
        };
        if !matches!(&fill.data, TensorData::Float32(v) if v.len() == 1 && v[0] <= -1e30) {
            return refused(self, "the value filled in is not -inf (or below -1e30)");
        }
        let shape = self.values[x].shape.clone();
        let rank = shape.len();
        let mask_shape: Vec<usize> = mask.shape.iter().map(|&d| d as usize).collect();
        if rank < 2 || mask_shape.len() < 2 || mask_shape.len() > rank {
            return refused(
                self,
                "the mask and the scores are not both of rank 2 or more",
            );
        }
        let (tq, tk) = (shape[rank - 2], shape[rank - 1]);
        let m = mask_shape.len();
        let leading_ones = mask_shape[..m - 2].iter().all(|&d| d == 1);
        if !leading_ones || mask_shape[m - 2] != tq || mask_shape[m - 1] != tk {
            return refused(
                self,
                &format!("the mask of shape {mask_shape:?} is not one (Tq, Tk) for {shape:?}"),
            );
        }
        let causal = (0..tq)
            .all(|i| (0..tk).all(|j| mask.values[i * tk + j] == ((j + tq > i + tk) != kept)));
        if !causal {
            return refused(self, "the mask is not the causal one");
        }
        if let Some(name) = node.outputs.first() {
            self.slots.insert(name.as_str(), Slot::Causal(x));
        }
        Ok(())
    }

    /// Whether value `id` is a constant of one element equal to `c` (within float32's
    /// rounding of it).
    fn is_scalar(&self, id: usize, c: f64) -> bool {
        matches!(&self.values[id].op, Op::Const(t)
            if t.data.len() == 1 && (t.data[0] - c).abs() <= 1e-6 * c.abs())
    }

    /// Value `id` as `a · b` or `b · a`, its other factor when one is the scalar `c`.
    fn times_scalar(&self, id: usize, c: f64) -> Option<usize> {
        match (&self.values[id].op, self.values[id].inputs.as_slice()) {
            (Op::Mul, &[v, k]) if self.is_scalar(k, c) => Some(v),
            (Op::Mul, &[k, v]) if self.is_scalar(k, c) => Some(v),
            _ => None,
        }
    }

    /// Whether value `id` is x³ written as `x · (x · x)` or `(x · x) · x`.
    fn is_cube(&self, id: usize, x: usize) -> bool {
        let is_square = |v: usize| matches!((&self.values[v].op, self.values[v].inputs.as_slice()), (Op::Mul, &[a, b]) if a == x && b == x);
        matches!((&self.values[id].op, self.values[id].inputs.as_slice()),
            (Op::Mul, &[a, b]) if (a == x && is_square(b)) || (b == x && is_square(a)))
    }

    /// For a value `1 + erf(x / √2)` (`Add` of 1 to an `Erf` of x times 1/√2, the division
    /// already a product), its x and `false`; for `1 + tanh(√(2/π) · (x + 0.044715 · x³))`,
    /// GELU's tanh form, its x and `true`.
    fn one_plus_gelu_core(&self, id: usize) -> Option<(usize, bool)> {
        let sum = &self.values[id];
        let core = match (&sum.op, sum.inputs.as_slice()) {
            (Op::Add, &[a, b]) if self.is_scalar(b, 1.0) => a,
            (Op::Add, &[a, b]) if self.is_scalar(a, 1.0) => b,
            _ => return None,
        };
        match (&self.values[core].op, self.values[core].inputs.as_slice()) {
            (Op::Table(Function::Erf), &[scaled]) => Some((
                self.times_scalar(scaled, std::f64::consts::FRAC_1_SQRT_2)?,
                false,
            )),
            (Op::Table(Function::Tanh), &[scaled]) => {
                let inner = self.times_scalar(scaled, (2.0 / std::f64::consts::PI).sqrt())?;
                let (Op::Add, &[a, b]) =
                    (&self.values[inner].op, self.values[inner].inputs.as_slice())
                else {
                    return None;
                };
                [(a, b), (b, a)].into_iter().find_map(|(x, term)| {
                    let cube = self.times_scalar(term, 0.044715)?;
                    self.is_cube(cube, x).then_some((x, true))
                })
            }
            _ => None,
        }
    }

    /// GELU written out with Erf, `x · (1 + erf(x / √2)) · 0.5`, or in its tanh form,
    /// `x · (1 + tanh(√(2/π) · (x + 0.044715 · x³))) · 0.5`, in either order of the products, as
    /// one GELU table (one rounding where the steps would take four or more):
    /// - `Mul(Mul(x, 0.5), 1 + erf(x / √2))`: the GELU of x;
    /// - `Mul(x, 1 + erf(x / √2))`: 2·GELU(x), kept as GELU(x) times 2 until the `Mul` by 0.5
    ///   after it, which then reads the GELU itself;
    /// - the same two with the tanh form's `1 + tanh(…)`.
    ///
    /// The steps stay in the float graph (calibration evaluates them) but nothing reads them.
    fn gelu_product(&mut self, node: &'a Node) -> Result<bool, ImportError> {
        let (Some(Slot::Value(a)), Some(Slot::Value(b))) = (self.slot(node, 0), self.slot(node, 1))
        else {
            // `Mul(2·GELU(x), 0.5)`: the GELU.
            for (v, c) in [(0usize, 1usize), (1, 0)] {
                if let (Some(&Slot::Value(id)), Some(0.5)) =
                    (self.slot(node, v), self.scalar(node, c))
                    && let (Op::Mul, &[g, two]) =
                        (&self.values[id].op, self.values[id].inputs.as_slice())
                    && self.is_scalar(two, 2.0)
                    && matches!(self.values[g].op, Op::Table(Function::Gelu { .. }))
                    && self.readers(id) == 1
                {
                    self.bind(node, g)?;
                    return Ok(true);
                }
            }
            return Ok(false);
        };
        let (a, b) = (*a, *b);
        for (x, sum) in [(a, b), (b, a)] {
            let Some((inner, tanh)) = self.one_plus_gelu_core(sum) else {
                continue;
            };
            let shape = self.values[inner].shape.clone();
            let gelu = Op::Table(Function::Gelu { tanh });
            if inner == x {
                let name = node.outputs.first().map(String::as_str).unwrap_or("");
                let g = self.push(gelu, vec![inner], shape.clone(), &format!("{name}_gelu"));
                let two = self.push(
                    Op::Const(FTensor {
                        shape: Vec::new(),
                        data: vec![2.0],
                    }),
                    Vec::new(),
                    Vec::new(),
                    &format!("{name}_two"),
                );
                self.define(node, Op::Mul, vec![g, two], shape)?;
                return Ok(true);
            }
            if self.times_scalar(x, 0.5) == Some(inner) {
                self.define(node, gelu, vec![inner], shape)?;
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn hard_sigmoid(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let alpha = self.float(node, "alpha", 0.2)?;
        let beta = self.float(node, "beta", 0.5)?;
        self.unary(node, Op::Table(Function::HardSigmoid { alpha, beta }))
    }

    /// Gelu (opset 20), `approximate` "none" (erf) or "tanh".
    fn gelu(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let approximate = self.string(node, "approximate")?.unwrap_or_default();
        let tanh = match approximate.as_str() {
            "" | "none" => false,
            "tanh" => true,
            other => {
                return Err(self.error(format!(
                    "approximate {} is not an ONNX value (\"none\" or \"tanh\")",
                    cvm_formats::quote(other)
                )));
            }
        };
        self.unary(node, Op::Table(Function::Gelu { tanh }))
    }

    fn unary(&mut self, node: &'a Node, op: Op) -> Result<(), ImportError> {
        let x = self.value(node, 0)?;
        self.no_pad(&[x])?;
        let shape = self.values[x].shape.clone();
        self.define(node, op, vec![x], shape)
    }

    /// PRelu with one slope (a scalar, or equal entries): a LeakyRelu table.
    fn prelu(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let Some(slope) = self.float_constant(node, 1)? else {
            return Err(self.error("input 1 (the slope) is missing or not a constant"));
        };
        let Some(&first) = slope.data.first() else {
            return Err(self.error("the slope is empty"));
        };
        if slope.data.iter().any(|&s| s != first) {
            return Err(self.error(format!(
                "a slope per channel (shape {:?}) is not supported: the importer computes \
                 PRelu as one table of its int8 inputs, which takes one slope",
                slope.shape
            )));
        }
        self.unary(node, Op::Table(Function::LeakyRelu(first)))
    }

    /// A product of two computed tensors (MatMul) read by nothing else, multiplied or divided
    /// (`divide`, the product being the dividend) by a scalar constant: the factor is folded
    /// into the product. Returns whether it was.
    fn scale_product(&mut self, node: &'a Node, divide: bool) -> Result<bool, ImportError> {
        for (v, k) in [(0usize, 1usize), (1, 0)] {
            if divide && v == 1 {
                continue;
            }
            let name = node.inputs.get(v).map(String::as_str).unwrap_or("");
            let (Some(Slot::Value(id)), Some(Slot::Const(tensor))) = (
                self.slots.get(name),
                node.inputs.get(k).and_then(|n| self.slots.get(n.as_str())),
            ) else {
                continue;
            };
            let id = *id;
            let Ok(c) = float_tensor(tensor) else {
                continue;
            };
            let [factor] = c.data[..] else {
                continue;
            };
            if !matches!(self.values[id].op, Op::MatMul { .. })
                || self.readers(id) != 1
                || factor == 0.0
            {
                continue;
            }
            let factor = if divide { 1.0 / factor } else { factor };
            if let Op::MatMul { alpha, .. } = &mut self.values[id].op {
                *alpha *= factor;
            }
            let origin = self.values[id].origin.clone();
            self.notes
                .push(format!("{} folded into the factor of {origin}", self.label));
            self.bind(node, id)?;
            return Ok(true);
        }
        Ok(false)
    }

    fn add(&mut self, node: &'a Node) -> Result<(), ImportError> {
        if self.plus_epsilon(node)? || self.scale_norm(node, true)? {
            return Ok(());
        }
        // A constant added to a bias-less-or-not Dense or Conv read by nothing else folds into
        // its bias.
        for (v, k) in [(0usize, 1usize), (1, 0)] {
            let name = node.inputs.get(v).map(String::as_str).unwrap_or("");
            let (Some(Slot::Value(id)), Some(Slot::Const(tensor))) = (
                self.slots.get(name),
                node.inputs.get(k).and_then(|n| self.slots.get(n.as_str())),
            ) else {
                continue;
            };
            let id = *id;
            let Ok(c) = float_tensor(tensor) else {
                continue;
            };
            if self.readers(id) != 1 {
                continue;
            }
            // A dense layer on the rows of a tensor of rank above 2 (MatMul's reshape around
            // it): the bias is one per element of the last axis.
            let inner = match (&self.values[id].op, self.values[id].inputs.as_slice()) {
                (Op::Reshape, &[inner]) => Some(inner),
                _ => None,
            };
            if let Some(inner) = inner {
                let n = self.values[id].shape.last().copied().unwrap_or(0);
                let fits = matches!(c.shape.as_slice(), [len] if *len == n);
                if let (true, Op::Dense(Dense { bias, .. })) = (fits, &mut self.values[inner].op) {
                    let old = bias.take().unwrap_or_else(|| vec![0.0; n]);
                    *bias = Some(old.iter().zip(&c.data).map(|(a, b)| a + b).collect());
                    let origin = self.values[inner].origin.clone();
                    self.notes
                        .push(format!("{} folded into the bias of {origin}", self.label));
                    return self.bind(node, id);
                }
            }
            let shape = self.values[id].shape.clone();
            let channels = shape.get(1).copied().unwrap_or(0);
            let per_channel = match (&self.values[id].op, c.shape.as_slice()) {
                (Op::Dense(_), [n]) | (Op::Dense(_), [1, n]) => *n == channels,
                (Op::Conv(_), [n, 1, 1]) | (Op::Conv(_), [1, n, 1, 1]) => *n == channels,
                _ => false,
            };
            if !per_channel {
                continue;
            }
            let origin = self.values[id].origin.clone();
            if let Op::Dense(Dense { bias, .. }) | Op::Conv(Conv { bias, .. }) =
                &mut self.values[id].op
            {
                let old = bias.take().unwrap_or_else(|| vec![0.0; channels]);
                *bias = Some(old.iter().zip(&c.data).map(|(a, b)| a + b).collect());
            }
            self.notes
                .push(format!("{} folded into the bias of {origin}", self.label));
            return self.bind(node, id);
        }
        self.binary(node, Op::Add)
    }

    fn binary(&mut self, node: &'a Node, op: Op) -> Result<(), ImportError> {
        let a = self.value_or_const(node, 0)?;
        let b = self.value_or_const(node, 1)?;
        self.no_pad(&[a, b])?;
        if matches!(self.values[a].op, Op::Const(_)) && matches!(self.values[b].op, Op::Const(_)) {
            return Err(self.error("both inputs are constants; fold them before importing"));
        }
        let shape = broadcast(&self.values[a].shape, &self.values[b].shape).ok_or_else(|| {
            self.error(format!(
                "shapes {:?} and {:?} do not broadcast",
                self.values[a].shape, self.values[b].shape
            ))
        })?;
        self.define(node, op, vec![a, b], shape)
    }

    /// Division by a constant: a product by its reciprocal (the float model's calibration
    /// then multiplies too; the integer model approximates either by one factor).
    fn divide(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let Some(divisor) = self.float_constant(node, 1).ok().flatten() else {
            return Err(self.error(
                "a division by a computed tensor is not supported; the importer divides by \
                 constants only",
            ));
        };
        if let Some(i) = divisor.data.iter().position(|&d| d == 0.0) {
            return Err(self.error(format!("the divisor is 0 at index {i}")));
        }
        let x = self.value(node, 0)?;
        self.no_pad(&[x])?;
        let reciprocal = FTensor {
            shape: divisor.shape.clone(),
            data: divisor.data.iter().map(|&d| 1.0 / d).collect(),
        };
        let name = node.inputs.get(1).map(String::as_str).unwrap_or("");
        let shape = reciprocal.shape.clone();
        let c = self.push(
            Op::Const(reciprocal),
            Vec::new(),
            shape,
            &format!("{name}_reciprocal"),
        );
        let shape = broadcast(&self.values[x].shape, &self.values[c].shape).ok_or_else(|| {
            self.error(format!(
                "shapes {:?} and {:?} do not broadcast",
                self.values[x].shape, self.values[c].shape
            ))
        })?;
        self.define(node, Op::Mul, vec![x, c], shape)
    }

    /// `Sum` of n inputs: a chain of additions.
    fn sum(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let mut acc = self.value_or_const(node, 0)?;
        if node.inputs.len() == 1 {
            return self.bind(node, acc);
        }
        let name = node.outputs.first().map(String::as_str).unwrap_or("");
        for k in 1..node.inputs.len() {
            let b = self.value_or_const(node, k)?;
            self.no_pad(&[acc, b])?;
            let shape = broadcast(&self.values[acc].shape, &self.values[b].shape)
                .ok_or_else(|| self.error(format!("input {k} does not broadcast")))?;
            if k + 1 == node.inputs.len() {
                return self.define(node, Op::Add, vec![acc, b], shape);
            }
            acc = self.push(Op::Add, vec![acc, b], shape, &format!("{name}_{k}"));
        }
        Ok(())
    }

    /// A Clip's bounds: scalar inputs 1 and 2 (from opset 11), or the `min` and `max`
    /// attributes; −∞ and ∞ when absent.
    pub(super) fn clip_bounds(&self, node: &Node) -> Result<(f64, f64), ImportError> {
        let bound = |k: usize, attribute: &str, default: f64| -> Result<f64, ImportError> {
            match self.float_constant(node, k)? {
                Some(t) if t.data.len() == 1 => Ok(t.data[0]),
                Some(t) => Err(self.error(format!(
                    "input {k} of shape {:?}: Clip bounds are scalars",
                    t.shape
                ))),
                None => self.float(node, attribute, default),
            }
        };
        Ok((
            bound(1, "min", f64::NEG_INFINITY)?,
            bound(2, "max", f64::INFINITY)?,
        ))
    }

    fn clip(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let x = self.value(node, 0)?;
        self.no_pad(&[x])?;
        let (lo, hi) = self.clip_bounds(node)?;
        if lo.partial_cmp(&hi) != Some(std::cmp::Ordering::Less) {
            return Err(self.error(format!("bounds [{lo}, {hi}] are empty or not numbers")));
        }
        let shape = self.values[x].shape.clone();
        let op = if lo == 0.0 && hi == f64::INFINITY {
            Op::Relu
        } else {
            Op::Clip { lo, hi }
        };
        self.define(node, op, vec![x], shape)
    }
}

/// The numpy broadcast of two shapes.
pub(super) fn broadcast(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let rank = a.len().max(b.len());
    let dim = |s: &[usize], i: usize| {
        if i + s.len() >= rank {
            s[i + s.len() - rank]
        } else {
            1
        }
    };
    (0..rank)
        .map(|i| match (dim(a, i), dim(b, i)) {
            (x, y) if x == y => Some(x),
            (1, y) => Some(y),
            (x, 1) => Some(x),
            _ => None,
        })
        .collect()
}
