//! Models quantized by onnxruntime: the QDQ pairs QuantizeLinear/DequantizeLinear, the
//! QOperator layers QLinearConv, QLinearMatMul and `com.microsoft` QGemm, and
//! `quantize_dynamic`'s DynamicQuantizeLinear, MatMulInteger and the Mul by its scale.

use crate::import::ImportError;
use crate::import::graph::{Conv, Dense, FTensor, Op};
use crate::model::Node;
use crate::tensor::{Tensor, TensorData};

use super::conv::window_out;
use super::matmul::transpose2;
use super::{Lowering, Slot};

/// The QOperator layers onnxruntime writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum QLinear {
    Conv,
    MatMul,
    Gemm,
}

impl<'a> Lowering<'a> {
    /// Lowers the node if it is one of this family's: QuantizeLinear, DequantizeLinear, QLinearConv, QLinearMatMul, QGemm, DynamicQuantizeLinear, MatMulInteger.
    pub(super) fn lower_quantized(&mut self, node: &'a Node) -> Option<Result<(), ImportError>> {
        Some(match node.op_type.as_str() {
            "QGemm" if node.domain == "com.microsoft" => self.qlinear(node, QLinear::Gemm),
            "QuantizeLinear" => self.quantize_linear(node),
            "DequantizeLinear" => self.dequantize_linear(node),
            "QLinearConv" => self.qlinear(node, QLinear::Conv),
            "QLinearMatMul" => self.qlinear(node, QLinear::MatMul),
            "DynamicQuantizeLinear" => self.dynamic_quantize(node),
            "MatMulInteger" => self.matmul_integer(node),
            _ => return None,
        })
    }

    /// The float range a quantized tensor represents: `[(qmin − z)·s, (qmax − z)·s]` for the
    /// scalar scale at input `scale` and zero point at input `zero` (absent: uint8 zero).
    fn representable(
        &self,
        node: &Node,
        scale: usize,
        zero: usize,
    ) -> Result<(f64, f64), ImportError> {
        let scales = match self.float_constant(node, scale)? {
            Some(t) => t.data,
            None => return Err(self.error(format!("input {scale} (a scale) is missing"))),
        };
        let [s] = scales[..] else {
            return Err(self.error(format!(
                "input {scale}: a scale per channel for activations is not supported"
            )));
        };
        if s.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) || !s.is_finite() {
            return Err(self.error(format!("input {scale}: the scale {s} is not positive")));
        }
        let (zero_point, qmin, qmax) = match self.constant(node, zero)? {
            None => (0.0, 0.0, 255.0),
            Some(Tensor {
                data: TensorData::Uint8(z),
                ..
            }) if z.len() == 1 => (f64::from(z[0]), 0.0, 255.0),
            Some(Tensor {
                data: TensorData::Int8(z),
                ..
            }) if z.len() == 1 => (f64::from(z[0]), -128.0, 127.0),
            Some(_) => {
                return Err(self.error(format!(
                    "input {zero}: the zero point of an activation must be one int8 or uint8 value"
                )));
            }
        };
        Ok(((qmin - zero_point) * s, (qmax - zero_point) * s))
    }

    /// An int8 or uint8 constant at input `k`, if present; `what`
    /// names it in the refusal of another type.
    fn eight_bit(&self, node: &Node, k: usize, what: &str) -> Result<Option<FTensor>, ImportError> {
        let Some(tensor) = self.constant(node, k)? else {
            return Ok(None);
        };
        let data = match &tensor.data {
            TensorData::Int8(v) => v.iter().map(|&q| f64::from(q)).collect(),
            TensorData::Uint8(v) => v.iter().map(|&q| f64::from(q)).collect(),
            _ => return Err(self.error(format!("{what} is not int8 or uint8"))),
        };
        let shape = tensor.shape.iter().map(|&d| d as usize).collect();
        Ok(Some(FTensor { shape, data }))
    }

    /// Quantized weights at input `k` dequantized, `(q − z) · s`, with their scales (one, or
    /// one per entry of `axis`, the output channels), and the zero points for the check that
    /// they are all 0.
    fn quantized_weights(
        &self,
        node: &Node,
        k: usize,
        axis: usize,
    ) -> Result<(FTensor, Vec<f64>), ImportError> {
        let Some(FTensor {
            shape,
            data: values,
        }) = self.eight_bit(node, k, "the weights")?
        else {
            return Err(self.error(format!("input {k} (the weights) is missing")));
        };
        let scales = match self.float_constant(node, k + 1)? {
            Some(t) => t.data,
            None => {
                return Err(self.error(format!("input {} (the weight scale) is missing", k + 1)));
            }
        };
        let zeros = self
            .eight_bit(node, k + 2, "the weight zero point")?
            .map_or_else(|| vec![0.0], |zeros| zeros.data);
        let channels = shape.get(axis).copied().unwrap_or(0);
        let fits = |n: usize| n == 1 || n == channels;
        if !fits(scales.len()) || !fits(zeros.len()) {
            return Err(self.error(format!(
                "weights of shape {shape:?} with {} scales and {} zero points: one, or one per \
                 output channel",
                scales.len(),
                zeros.len()
            )));
        }
        if scales
            .iter()
            .any(|&s| s.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) || !s.is_finite())
        {
            return Err(self.error("a weight scale is not positive"));
        }
        let inner: usize = shape[axis + 1..].iter().product();
        let data = values
            .iter()
            .enumerate()
            .map(|(i, &q)| {
                let c = (i / inner.max(1)) % channels.max(1);
                let pick = |v: &[f64]| v[if v.len() == 1 { 0 } else { c }];
                (q - pick(&zeros)) * pick(&scales)
            })
            .collect();
        // Symmetric weights keep their own scales, exactly; others are quantized afresh.
        let fixed = if zeros.iter().all(|&z| z == 0.0) {
            scales
        } else {
            Vec::new()
        };
        Ok((FTensor { shape, data }, fixed))
    }

    /// The data input of a QOperator node: a value carried in float (an asymmetric
    /// QuantizeLinear's clip, or a symmetric one's source).
    fn quantized_value(&self, node: &Node, k: usize) -> Result<usize, ImportError> {
        let name = node.inputs.get(k).map(String::as_str).unwrap_or("");
        match self.slots.get(name) {
            Some(&Slot::Quantized { value, .. }) => Ok(value),
            _ => self.value(node, k),
        }
    }

    /// QLinearConv, QLinearMatMul and com.microsoft QGemm: the layer on the dequantized
    /// weights (their scales kept when symmetric), its int32 bias at the input scale times the
    /// weight scale, then a clip to the range the output's quantization represents (where
    /// onnxruntime's fused Relu lives). The activations are calibrated, not the file's.
    fn qlinear(&mut self, node: &'a Node, kind: QLinear) -> Result<(), ImportError> {
        let x = self.quantized_value(node, 0)?;
        self.no_pad(&[x])?;
        let input_scale = match self.float_constant(node, 1)? {
            Some(t) if t.data.len() == 1 => t.data[0],
            _ => return Err(self.error("input 1 (the input scale) is not one constant")),
        };
        let (weight, fixed) = self.quantized_weights(node, 3, 0)?;
        let (bias_input, output_scale) = match kind {
            QLinear::Conv => (Some(8), Some(6)),
            QLinear::MatMul => (None, Some(6)),
            QLinear::Gemm => (
                Some(6),
                node.inputs.get(7).filter(|n| !n.is_empty()).map(|_| 7),
            ),
        };
        let bias = match bias_input
            .map(|k| self.constant(node, k))
            .transpose()?
            .flatten()
        {
            None => None,
            Some(Tensor {
                data: TensorData::Int32(b),
                ..
            }) => Some(
                b.iter()
                    .enumerate()
                    .map(|(i, &q)| {
                        let w = if fixed.len() > 1 {
                            fixed[i.min(fixed.len() - 1)]
                        } else {
                            fixed.first().copied().unwrap_or(1.0)
                        };
                        f64::from(q) * input_scale * w
                    })
                    .collect::<Vec<f64>>(),
            ),
            Some(_) => return Err(self.error("the bias is not an int32 tensor")),
        };
        if bias.is_some() && fixed.is_empty() {
            return Err(self.error(
                "an int32 bias with asymmetric weights: its scale is not defined by the file",
            ));
        }
        let xs = self.values[x].shape.clone();
        let scales = (!fixed.is_empty()).then(|| fixed.clone());
        let (op, shape) = match kind {
            QLinear::Conv => {
                let [_, c, h, w] = <[usize; 4]>::try_from(xs.as_slice())
                    .map_err(|_| self.error(format!("data of shape {xs:?}: rank 4")))?;
                let Ok([oc, icg, kh, kw]) = <[usize; 4]>::try_from(weight.shape.as_slice()) else {
                    return Err(self.error("weights of rank 4 expected"));
                };
                let groups = usize::try_from(self.int(node, "group", 1)?)
                    .ok()
                    .filter(|&g| g >= 1 && c % g == 0 && oc % g == 0 && c / g == icg)
                    .ok_or_else(|| self.error("group does not fit the weights"))?;
                let strides = self.pair(node, "strides", [1, 1], 1)?;
                let dilations = self.pair(node, "dilations", [1, 1], 1)?;
                let own = self.pads(node, [h, w], [kh, kw], strides, dilations)?;
                let pads = self.symmetric_pads(own, [0; 4], "")?;
                let (Some(oh), Some(ow)) = (
                    window_out(h, pads[0], kh, strides[0], dilations[0], false),
                    window_out(w, pads[1], kw, strides[1], dilations[1], false),
                ) else {
                    return Err(self.error("the kernel is larger than the padded input"));
                };
                let conv = Conv {
                    weight,
                    weight_scales: scales,
                    bias,
                    strides,
                    pads,
                    dilations,
                    groups,
                };
                (Op::Conv(conv), vec![1, oc, oh, ow])
            }
            QLinear::MatMul | QLinear::Gemm => {
                let [m, k] = <[usize; 2]>::try_from(xs.as_slice())
                    .map_err(|_| self.error(format!("A of shape {xs:?}: rank 2")))?;
                let trans_b = matches!(kind, QLinear::Gemm) && self.int(node, "transB", 0)? != 0;
                if matches!(kind, QLinear::Gemm)
                    && (self.int(node, "transA", 0)? != 0 || self.float(node, "alpha", 1.0)? != 1.0)
                {
                    return Err(self.error("transA = 1 or alpha ≠ 1 is not supported"));
                }
                let weight = match <[usize; 2]>::try_from(weight.shape.as_slice()) {
                    Ok([_, cols]) if trans_b && cols == k => weight,
                    Ok([rows, cols]) if !trans_b && rows == k => {
                        // Per-column scales of a (K, N) matrix are per row once transposed;
                        // quantized_weights read them along axis 0, so only one scale fits.
                        if fixed.len() > 1 {
                            return Err(self.error(
                                "a scale per column of a (K, N) weight matrix is not supported",
                            ));
                        }
                        transpose2(&weight.data, rows, cols)
                    }
                    _ => return Err(self.error("the weights do not multiply the data")),
                };
                let n = weight.shape[0];
                let dense = Dense {
                    weight,
                    weight_scales: scales,
                    bias,
                };
                (Op::Dense(dense), vec![m, n])
            }
        };
        let Some(output_scale) = output_scale else {
            return self.define(node, op, vec![x], shape);
        };
        let name = node.outputs.first().map(String::as_str).unwrap_or("");
        let layer = self.push(op, vec![x], shape.clone(), &format!("{name}_layer"));
        let (lo, hi) = self.representable(node, output_scale, output_scale + 1)?;
        self.define(node, Op::Clip { lo, hi }, vec![layer], shape)
    }

    /// DynamicQuantizeLinear: the value stands for itself (its scale 1, its zero point 0), and
    /// is quantized at its calibrated range like any value.
    fn dynamic_quantize(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let x = self.value(node, 0)?;
        self.no_pad(&[x])?;
        if let Some(name) = node.outputs.get(1).filter(|n| !n.is_empty()) {
            self.slots
                .insert(name.as_str(), Slot::DynamicScale(vec![1.0]));
        }
        if let Some(name) = node.outputs.get(2).filter(|n| !n.is_empty()) {
            self.slots.insert(name.as_str(), Slot::DynamicZero);
        }
        self.notes.push(format!(
            "{}: the dynamic quantization replaced by the calibrated symmetric int8 of the value",
            self.label
        ));
        if let Some(name) = node.outputs.first() {
            self.bind_name(name.as_str(), x);
        }
        Ok(())
    }

    /// MatMulInteger of a dynamically quantized value by constant weights: a dense layer on
    /// `W − z`, whose scale the Mul by the dynamic scale after it supplies.
    fn matmul_integer(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let x = self.value(node, 0)?;
        self.no_pad(&[x])?;
        match node.inputs.get(2).and_then(|n| self.slots.get(n.as_str())) {
            None | Some(Slot::DynamicZero) => {}
            Some(_) => {
                return Err(self.error(
                    "input 2 (A's zero point) is not a DynamicQuantizeLinear's: the importer \
                     reads MatMulInteger after DynamicQuantizeLinear (quantize_dynamic)",
                ));
            }
        }
        let Some(FTensor {
            shape,
            data: values,
        }) = self.eight_bit(node, 1, "B")?
        else {
            return Err(self.error("input 1 (B) is missing"));
        };
        let Ok([rows, cols]) = <[usize; 2]>::try_from(shape.as_slice()) else {
            return Err(self.error("B is not a matrix"));
        };
        let zero = self
            .eight_bit(node, 3, "B's zero point")?
            .map_or_else(|| vec![0.0], |zeros| zeros.data);
        if zero.len() != 1 && zero.len() != cols {
            return Err(self.error("B's zero point: one, or one per column"));
        }
        let xs = self.values[x].shape.clone();
        let [m, k] = <[usize; 2]>::try_from(xs.as_slice())
            .map_err(|_| self.error(format!("A of shape {xs:?}: rank 2")))?;
        if rows != k {
            return Err(self.error("A and B do not multiply"));
        }
        let centered: Vec<f64> = values
            .iter()
            .enumerate()
            .map(|(i, &q)| q - zero[if zero.len() == 1 { 0 } else { i % cols }])
            .collect();
        let dense = Dense {
            weight: transpose2(&centered, rows, cols),
            weight_scales: None,
            bias: None,
        };
        self.define(node, Op::Dense(dense), vec![x], vec![m, cols])?;
        self.unscaled.insert(self.values.len() - 1);
        Ok(())
    }

    /// A Mul that involves a dynamic scale: of the scale by a constant (the weights' scale), or
    /// of a MatMulInteger's product by the scale, which scales that layer's weights. `None`
    /// when the Mul is an ordinary one.
    pub(super) fn dynamic_mul(&mut self, node: &'a Node) -> Result<Option<()>, ImportError> {
        let slot = |k: usize| node.inputs.get(k).and_then(|n| self.slots.get(n.as_str()));
        let (scale_k, other_k) = match (slot(0), slot(1)) {
            (Some(Slot::DynamicScale(_)), _) => (0, 1),
            (_, Some(Slot::DynamicScale(_))) => (1, 0),
            _ => return Ok(None),
        };
        let Some(Slot::DynamicScale(factor)) = slot(scale_k) else {
            return Ok(None);
        };
        let factor = factor.clone();
        match slot(other_k) {
            Some(Slot::Const(_)) => {
                let c = self
                    .float_constant(node, other_k)?
                    .ok_or_else(|| self.error("a missing factor"))?;
                let product: Vec<f64> = if factor.len() == 1 {
                    c.data.iter().map(|&v| v * factor[0]).collect()
                } else if c.data.len() == 1 {
                    factor.iter().map(|&f| f * c.data[0]).collect()
                } else {
                    return Err(self.error("two factors of several values each"));
                };
                if let Some(name) = node.outputs.first() {
                    self.slots
                        .insert(name.as_str(), Slot::DynamicScale(product));
                }
                Ok(Some(()))
            }
            Some(&Slot::Value(id)) if self.unscaled.contains(&id) && self.readers(id) == 1 => {
                let Op::Dense(dense) = &mut self.values[id].op else {
                    return Err(self.error("the dynamic scale multiplies no MatMulInteger"));
                };
                let units = dense.weight.shape[0];
                let inner = dense.weight.shape[1];
                if factor.len() != 1 && factor.len() != units {
                    return Err(self.error(format!(
                        "a scale of {} values for {units} output columns",
                        factor.len()
                    )));
                }
                for (i, w) in dense.weight.data.iter_mut().enumerate() {
                    *w *= factor[if factor.len() == 1 { 0 } else { i / inner }];
                }
                self.unscaled.remove(&id);
                self.bind(node, id)?;
                Ok(Some(()))
            }
            _ => Err(self.error(
                "a dynamic scale multiplies something other than a constant or the \
                 MatMulInteger it belongs to",
            )),
        }
    }

    /// A zero point input: absent, or int8 zeros (symmetric quantization).
    fn symmetric(&self, node: &Node) -> Result<(), ImportError> {
        match self.constant(node, 2)? {
            None => Err(self.error(
                "no zero point: ONNX then quantizes to uint8, which the importer does not \
                 support; quantize activations and weights as signed int8 (QInt8)",
            )),
            Some(Tensor {
                data: TensorData::Int8(z),
                ..
            }) if z.iter().all(|&z| z == 0) => Ok(()),
            Some(Tensor {
                data: TensorData::Int32(z),
                ..
            }) if z.iter().all(|&z| z == 0) => Ok(()),
            Some(_) => Err(self.error(
                "the zero point is not int8 (or int32) zeros: only symmetric signed \
                 quantization is supported (ActivationSymmetric and WeightSymmetric)",
            )),
        }
    }

    /// A scale input: positive and finite float32 values.
    fn scales(&self, node: &Node) -> Result<Vec<f64>, ImportError> {
        if self.int(node, "block_size", 0)? != 0 {
            return Err(self.error(
                "blocked quantization (block_size) is not supported: the importer takes one \
                 scale, or one per entry of axis 0",
            ));
        }
        let Some(scales) = self.float_constant(node, 1)? else {
            return Err(self.error("input 1 (the scale) is missing"));
        };
        if scales.data.is_empty()
            || scales
                .data
                .iter()
                .any(|&s| s.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater))
        {
            return Err(self.error("the scale is empty or not positive"));
        }
        Ok(scales.data)
    }

    fn quantize_linear(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let x = self.value(node, 0)?;
        self.no_pad(&[x])?;
        let scales = self.scales(node)?;
        if self.symmetric(node).is_err() {
            // Unsigned or asymmetric activations (onnxruntime's QOperator format, uint8 QDQ):
            // the value carried in float, clipped to what the quantized tensor represents,
            // and quantized to symmetric int8 at its calibrated range like any value.
            let (lo, hi) = self.representable(node, 1, 2)?;
            let shape = self.values[x].shape.clone();
            self.notes.push(format!(
                "{}: its asymmetric quantization replaced by the calibrated symmetric int8 of \
                 the value, clipped to [{lo}, {hi}]",
                self.label
            ));
            return self.define(node, Op::Clip { lo, hi }, vec![x], shape);
        }
        let [scale] = scales[..] else {
            return Err(self.error(
                "a scale per channel for activations is not supported: one scale per tensor",
            ));
        };
        if let Some(name) = node.outputs.first() {
            self.slots
                .insert(name.as_str(), Slot::Quantized { value: x, scale });
        }
        Ok(())
    }

    fn dequantize_linear(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let name = node.inputs.first().map(String::as_str).unwrap_or("");
        if let Some(&Slot::Value(value)) = self.slots.get(name) {
            // A tensor carried in float (see quantize_linear): it stands for itself.
            self.representable(node, 1, 2)?;
            return self.bind(node, value);
        }
        let scales = self.scales(node)?;
        self.symmetric(node)?;
        match self.slots.get(name) {
            Some(&Slot::Quantized { value, scale }) => {
                if scales != [scale] {
                    return Err(self.error(format!(
                        "its scale {scales:?} differs from its QuantizeLinear's {scale}"
                    )));
                }
                let shape = self.values[value].shape.clone();
                self.define(node, Op::Fake(scale), vec![value], shape)
            }
            Some(Slot::Const(tensor)) => {
                let tensor: &Tensor = tensor;
                let values: Vec<f64> = match &tensor.data {
                    TensorData::Int8(v) => v.iter().map(|&q| f64::from(q)).collect(),
                    TensorData::Int32(v) => v.iter().map(|&q| f64::from(q)).collect(),
                    _ => {
                        return Err(self.error(
                            "only int8 and int32 constants are dequantized by the importer",
                        ));
                    }
                };
                let shape: Vec<usize> = tensor.shape.iter().map(|&d| d as usize).collect();
                let axis = self.int(node, "axis", 1)?;
                let per = if scales.len() == 1 {
                    values.len().max(1)
                } else if (axis == 0 || (axis == -(shape.len() as i64)))
                    && shape.first() == Some(&scales.len())
                {
                    values.len() / scales.len()
                } else {
                    return Err(self.error(format!(
                        "scales of {} entries on axis {axis} of shape {shape:?}: the importer \
                         takes one scale, or one per entry of axis 0",
                        scales.len()
                    )));
                };
                let data = values
                    .iter()
                    .enumerate()
                    .map(|(i, &q)| q * scales[(i / per.max(1)).min(scales.len() - 1)])
                    .collect();
                if let Some(out) = node.outputs.first() {
                    self.slots.insert(
                        out.as_str(),
                        Slot::Dequantized(FTensor { shape, data }, scales),
                    );
                }
                Ok(())
            }
            _ => Err(self.error(
                "input 0 is neither a constant nor a QuantizeLinear output; the importer reads \
                 QDQ models (QuantizeLinear–DequantizeLinear pairs)",
            )),
        }
    }
}
