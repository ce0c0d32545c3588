//! Convolution and pooling: Conv, BatchNormalization (folded into the convolution before it, or
//! a depthwise 1×1 convolution), Pad (folded into the convolution or pooling after it),
//! MaxPool, AveragePool, GlobalAveragePool; and their window arithmetic.

use crate::import::ImportError;
use crate::import::graph::{Conv, FTensor, Op, Pool, Reduce, Slice};
use crate::model::Node;
use crate::tensor::{Tensor, TensorData};

use super::Lowering;

impl<'a> Lowering<'a> {
    /// Lowers the node if it is one of this family's: Conv, BatchNormalization, Pad, MaxPool, AveragePool, GlobalAveragePool.
    pub(super) fn lower_conv(&mut self, node: &'a Node) -> Option<Result<(), ImportError>> {
        Some(match node.op_type.as_str() {
            "Conv" => self.conv(node),
            "BatchNormalization" => self.batch_norm(node),
            "Pad" => self.pad(node),
            "MaxPool" => self.pool(node, true),
            "AveragePool" => self.pool(node, false),
            "GlobalAveragePool" => self.global_average(node),
            _ => return None,
        })
    }

    /// A pair attribute (two non-negative entries, each at most `max`), or `default`.
    pub(super) fn pair(
        &self,
        node: &Node,
        name: &str,
        default: [usize; 2],
        min: usize,
    ) -> Result<[usize; 2], ImportError> {
        let Some(values) = self.ints(node, name)? else {
            return Ok(default);
        };
        match values.as_slice() {
            [a, b] => {
                let a = usize::try_from(*a).ok().filter(|&a| a >= min && a <= 4096);
                let b = usize::try_from(*b).ok().filter(|&b| b >= min && b <= 4096);
                match (a, b) {
                    (Some(a), Some(b)) => Ok([a, b]),
                    _ => Err(self.error(format!(
                        "attribute {name} = {values:?}: each entry must be in [{min}, 4096]"
                    ))),
                }
            }
            _ => Err(self.error(format!(
                "attribute {name} = {values:?}: a 2-D operator needs two entries"
            ))),
        }
    }

    /// Symmetric (PH, PW) from ONNX `pads` [top, left, bottom, right] and `auto_pad`.
    pub(super) fn pads(
        &self,
        node: &Node,
        input: [usize; 2],
        kernel: [usize; 2],
        strides: [usize; 2],
        dilations: [usize; 2],
    ) -> Result<[usize; 4], ImportError> {
        let auto = self.string(node, "auto_pad")?.unwrap_or_default();
        match auto.as_str() {
            "" | "NOTSET" => {}
            "VALID" => return Ok([0; 4]),
            "SAME_UPPER" | "SAME_LOWER" => {
                let mut pads = [0usize; 4];
                for axis in 0..2 {
                    let out = input[axis].div_ceil(strides[axis]);
                    let extent = dilations[axis] * (kernel[axis] - 1) + 1;
                    let total = ((out - 1) * strides[axis] + extent).saturating_sub(input[axis]);
                    let (small, large) = (total / 2, total - total / 2);
                    let (before, after) = if auto == "SAME_UPPER" {
                        (small, large)
                    } else {
                        (large, small)
                    };
                    pads[axis] = before;
                    pads[axis + 2] = after;
                }
                return Ok(pads);
            }
            other => {
                return Err(self.error(format!(
                    "auto_pad {} is not an ONNX value",
                    cvm_formats::quote(other)
                )));
            }
        }
        let Some(values) = self.ints(node, "pads")? else {
            return Ok([0; 4]);
        };
        let pads: Option<Vec<usize>> = values
            .iter()
            .map(|&p| usize::try_from(p).ok().filter(|&p| p <= 4096))
            .collect();
        match pads.as_deref() {
            Some(&[t, l, b, r]) => Ok([t, l, b, r]),
            _ => Err(self.error(format!(
                "pads {values:?}: a 2-D operator needs four entries in [0, 4096]"
            ))),
        }
    }

    /// A node's own padding (top, left, bottom, right) plus a folded `Pad`'s, as (PH, PW);
    /// refused, with `why` after the message, unless each axis is padded alike on both sides.
    pub(super) fn symmetric_pads(
        &self,
        own: [usize; 4],
        extra: [usize; 4],
        why: &str,
    ) -> Result<[usize; 2], ImportError> {
        let pads: [usize; 4] = std::array::from_fn(|i| own[i] + extra[i]);
        if pads[0] != pads[2] || pads[1] != pads[3] {
            return Err(self.error(format!(
                "padding (top, left, bottom, right) = {pads:?} is not symmetric{why}"
            )));
        }
        Ok([pads[0], pads[1]])
    }

    /// The data input of a convolution or pooling, with a `Pad` it reads folded away: the
    /// value to read and the padding to add (top, left, bottom, right).
    fn through_pad(&self, x: usize) -> ([usize; 4], usize) {
        match &self.values[x].op {
            Op::Pad(pads) if self.readers(x) == 1 => (*pads, self.values[x].inputs[0]),
            _ => ([0; 4], x),
        }
    }

    /// Whether value `id` is the output of a Relu or of a Clip whose lower bound is at least
    /// 0, so that no value of it is negative.
    fn non_negative(&self, id: usize) -> bool {
        match self.values[id].op {
            Op::Relu => true,
            Op::Clip { lo, .. } => lo >= 0.0,
            _ => false,
        }
    }

    /// Refuses a `Pad` value read by a node that cannot absorb it.
    pub(super) fn no_pad(&self, ids: &[usize]) -> Result<(), ImportError> {
        for &id in ids {
            if matches!(self.values[id].op, Op::Pad(_)) {
                return Err(self.error(format!(
                    "it reads the output of {}; only Conv, MaxPool and AveragePool can absorb a \
                     Pad, and only as its single reader",
                    self.values[id].origin
                )));
            }
        }
        Ok(())
    }

    fn conv(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let x = self.value(node, 0)?;
        let Some(weight) = self.float_constant(node, 1)? else {
            return Err(self.error("input 1 (the weights) is missing"));
        };
        let bias = self.float_constant(node, 2)?;
        let (extra, x) = self.through_pad(x);
        let xs = self.values[x].shape.clone();
        let ws = weight.shape.clone();
        let [_, c, h, w] = <[usize; 4]>::try_from(xs.as_slice()).map_err(|_| {
            self.error(format!(
                "data of shape {xs:?}: a 2-D convolution needs rank 4"
            ))
        })?;
        let [oc, icg, kh, kw] = <[usize; 4]>::try_from(ws.as_slice()).map_err(|_| {
            self.error(format!(
                "weights of shape {ws:?}: a 2-D convolution needs rank 4"
            ))
        })?;
        let groups = usize::try_from(self.int(node, "group", 1)?)
            .ok()
            .filter(|&g| g >= 1 && c % g == 0 && oc % g == 0 && c / g == icg)
            .ok_or_else(|| {
                self.error(format!(
                    "group does not fit: data has {c} channels, weights {ws:?}"
                ))
            })?;
        if let Some(kernel) = self.ints(node, "kernel_shape")?
            && kernel != [kh as i64, kw as i64]
        {
            return Err(self.error(format!(
                "kernel_shape {kernel:?} differs from the weights' {ws:?}"
            )));
        }
        if kh == 0 || kw == 0 {
            return Err(self.error("weights with an empty kernel"));
        }
        let strides = self.pair(node, "strides", [1, 1], 1)?;
        let dilations = self.pair(node, "dilations", [1, 1], 1)?;
        let own = self.pads(node, [h, w], [kh, kw], strides, dilations)?;
        let total: [usize; 4] = std::array::from_fn(|i| own[i] + extra[i]);
        let (pads, crop) =
            even_padding(total, [h, w], [kh, kw], strides, dilations).ok_or_else(|| {
                self.error(format!(
                    "the kernel {kh}×{kw} (dilated) is larger than the padded input {h}×{w}"
                ))
            })?;
        if let Some(b) = &bias
            && b.data.len() != oc
        {
            return Err(self.error(format!("bias of shape {:?}, expected [{oc}]", b.shape)));
        }
        let oh = window_out(h, pads[0], kh, strides[0], dilations[0], false);
        let ow = window_out(w, pads[1], kw, strides[1], dilations[1], false);
        let (Some(oh), Some(ow)) = (oh, ow) else {
            return Err(self.error(format!(
                "the kernel {kh}×{kw} (dilated) is larger than the padded input {h}×{w}"
            )));
        };
        let conv = Conv {
            weight,
            weight_scales: self.scales_of(node, 1),
            bias: bias.map(|b| b.data),
            strides,
            pads,
            dilations,
            groups,
        };
        let Some(crop) = crop else {
            return self.define(node, Op::Conv(conv), vec![x], vec![1, oc, oh, ow]);
        };
        // Uneven padding: the convolution padded evenly by more, then the windows ONNX's
        // padding gives cut out of its output (exact: they see the same values).
        let name = node.outputs.first().map(String::as_str).unwrap_or("");
        let padded = self.push(
            Op::Conv(conv),
            vec![x],
            vec![1, oc, oh, ow],
            &format!("{name}_padded"),
        );
        self.notes.push(format!(
            "{}: padding (top, left, bottom, right) = {total:?} computed as {pads:?} on both \
             sides, then the output cut to its windows",
            self.label
        ));
        let slice = Slice {
            starts: vec![0, 0, crop.0[0], crop.0[1]],
            steps: vec![1; 4],
        };
        self.define(
            node,
            Op::Slice(slice),
            vec![padded],
            vec![1, oc, crop.1[0], crop.1[1]],
        )
    }

    fn batch_norm(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let x = self.value(node, 0)?;
        self.no_pad(&[x])?;
        let mut params = Vec::new();
        for k in 1..5 {
            match self.float_constant(node, k)? {
                Some(t) => params.push(t.data),
                None => return Err(self.error(format!("input {k} is missing"))),
            }
        }
        let epsilon = self.float(node, "epsilon", 1e-5)?;
        if self.int(node, "training_mode", 0)? != 0 {
            return Err(self.error(
                "training_mode = 1 normalizes with the batch's own statistics; the importer \
                 folds the running mean and variance of inference (training_mode = 0)",
            ));
        }
        let shape = self.values[x].shape.clone();
        let channels = shape.get(1).copied().unwrap_or(0);
        if shape.len() != 4 || params.iter().any(|p| p.len() != channels) {
            return Err(self.error(format!(
                "data of shape {shape:?} with parameters of {:?} elements: the importer folds \
                 batch normalization of NCHW data with one parameter per channel",
                params.iter().map(Vec::len).collect::<Vec<_>>()
            )));
        }
        let (scale, shift, mean, var) = (&params[0], &params[1], &params[2], &params[3]);
        let mut a = Vec::with_capacity(channels);
        for c in 0..channels {
            let v = var[c] + epsilon;
            if v.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
                return Err(self.error(format!(
                    "channel {c}: variance + epsilon = {v} is not positive"
                )));
            }
            a.push(scale[c] / v.sqrt());
        }
        let b: Vec<f64> = (0..channels).map(|c| shift[c] - mean[c] * a[c]).collect();
        let sole_reader = self.readers(x) == 1;
        if let Op::Conv(conv) = &mut self.values[x].op
            && sole_reader
        {
            let per = conv.weight.data.len() / channels.max(1);
            for (c, row) in conv.weight.data.chunks_mut(per.max(1)).enumerate() {
                for w in row {
                    *w *= a[c];
                }
            }
            let old = conv.bias.take().unwrap_or_else(|| vec![0.0; channels]);
            conv.bias = Some((0..channels).map(|c| old[c] * a[c] + b[c]).collect());
            conv.weight_scales = None;
            let origin = self.values[x].origin.clone();
            self.notes
                .push(format!("{} folded into {origin}", self.label));
            return self.bind(node, x);
        }
        // A batch normalization of its own: a depthwise 1×1 convolution.
        let conv = Conv {
            weight: FTensor {
                shape: vec![channels, 1, 1, 1],
                data: a,
            },
            weight_scales: None,
            bias: Some(b),
            strides: [1, 1],
            pads: [0, 0],
            dilations: [1, 1],
            groups: channels,
        };
        self.notes
            .push(format!("{} became a depthwise 1×1 convolution", self.label));
        self.define(node, Op::Conv(conv), vec![x], shape)
    }

    fn pad(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let x = self.value(node, 0)?;
        self.no_pad(&[x])?;
        let mode = self
            .string(node, "mode")?
            .unwrap_or_else(|| "constant".into());
        if mode != "constant" {
            return Err(self.error(format!(
                "mode {} is not supported: only zero padding",
                cvm_formats::quote(&mode)
            )));
        }
        let pads = match self.constant(node, 1)? {
            Some(Tensor {
                data: TensorData::Int64(v),
                ..
            }) => v.clone(),
            Some(_) => return Err(self.error("pads is not an int64 tensor")),
            None => self
                .ints(node, "pads")?
                .ok_or_else(|| self.error("pads are missing"))?,
        };
        if let Some(value) = self.float_constant(node, 2)?
            && value.data.iter().any(|&v| v != 0.0)
        {
            return Err(self.error("a non-zero padding value is not supported"));
        }
        // Before opset 11 the value is an attribute.
        if self.float(node, "value", 0.0)? != 0.0 {
            return Err(self.error("a non-zero padding value is not supported"));
        }
        if node.inputs.get(3).is_some_and(|n| !n.is_empty()) {
            return Err(self.error("the axes input is not supported"));
        }
        let xs = self.values[x].shape.clone();
        let ok = xs.len() == 4
            && pads.len() == 8
            && [0, 1, 4, 5].iter().all(|&i| pads[i] == 0)
            && pads.iter().all(|&p| (0..=4096).contains(&p));
        if !ok {
            return Err(self.error(format!(
                "pads {pads:?}: the importer pads H and W of NCHW data, by 0 to 4096"
            )));
        }
        let p = [
            pads[2] as usize,
            pads[3] as usize,
            pads[6] as usize,
            pads[7] as usize,
        ];
        let shape = vec![xs[0], xs[1], xs[2] + p[0] + p[2], xs[3] + p[1] + p[3]];
        self.define(node, Op::Pad(p), vec![x], shape)
    }

    fn pool(&mut self, node: &'a Node, max: bool) -> Result<(), ImportError> {
        let x = self.value(node, 0)?;
        let (extra, x) = self.through_pad(x);
        // A Pad's zeros are values MaxPool compares, where max_pool2d never samples its
        // padding: the two agree only when no value is below zero.
        if max && extra != [0; 4] && !self.non_negative(x) {
            return Err(self.error(
                "it reads a Pad of values that may be negative: the Pad's zeros take part in \
                 the maximum, which a CVM max pooling (padding never sampled) cannot express; \
                 the importer folds a Pad into MaxPool only after Relu (or a Clip at 0 or \
                 above)",
            ));
        }
        let xs = self.values[x].shape.clone();
        let [n, c, h, w] = <[usize; 4]>::try_from(xs.as_slice())
            .map_err(|_| self.error(format!("data of shape {xs:?}: 2-D pooling needs rank 4")))?;
        let Some(kernel) = self.ints(node, "kernel_shape")? else {
            return Err(self.error("attribute kernel_shape is missing"));
        };
        let kernel = match kernel.as_slice() {
            &[a, b] if (1..=4096).contains(&a) && (1..=4096).contains(&b) => {
                [a as usize, b as usize]
            }
            _ => {
                return Err(
                    self.error(format!("kernel_shape {kernel:?}: two entries in [1, 4096]"))
                );
            }
        };
        let strides = self.pair(node, "strides", [1, 1], 1)?;
        if self.pair(node, "dilations", [1, 1], 1)? != [1, 1] {
            return Err(self.error("dilated pooling is not supported"));
        }
        if self.int(node, "storage_order", 0)? != 0 {
            return Err(self.error("storage_order 1 is not supported"));
        }
        let ceil = self.int(node, "ceil_mode", 0)? != 0;
        let own = self.pads(node, [h, w], kernel, strides, [1, 1])?;
        if !max && own != [0; 4] && self.int(node, "count_include_pad", 0)? == 0 {
            return Err(self.error(
                "average pooling with padding left out of the count (count_include_pad = 0) \
                 divides border windows by other counts; the importer needs count_include_pad = \
                 1 or no padding",
            ));
        }
        if !max && ceil {
            return Err(self.error(
                "average pooling with ceil_mode = 1 divides border windows by other counts",
            ));
        }
        let pads = self.symmetric_pads(own, extra, "")?;
        if pads[0] >= kernel[0] || pads[1] >= kernel[1] {
            return Err(self.error("padding as large as the window"));
        }
        let pool = Pool {
            kernel,
            strides,
            pads,
            ceil,
        };
        let oh = window_out(h, pool.pads[0], kernel[0], strides[0], 1, ceil);
        let ow = window_out(w, pool.pads[1], kernel[1], strides[1], 1, ceil);
        let (Some(oh), Some(ow)) = (oh, ow) else {
            return Err(self.error(format!(
                "the window {}×{} is larger than the padded input {h}×{w}",
                kernel[0], kernel[1]
            )));
        };
        let op = if max {
            Op::MaxPool(pool)
        } else {
            Op::AvgPool(pool)
        };
        self.define(node, op, vec![x], vec![n, c, oh, ow])
    }

    fn global_average(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let x = self.value(node, 0)?;
        self.no_pad(&[x])?;
        let xs = self.values[x].shape.clone();
        let [n, c, _, _] = <[usize; 4]>::try_from(xs.as_slice())
            .map_err(|_| self.error(format!("data of shape {xs:?}: expected rank 4")))?;
        let op = Op::Reduce(Reduce {
            axes: vec![2, 3],
            mean: true,
        });
        self.define(node, op, vec![x], vec![n, c, 1, 1])
    }
}

/// Even padding for a window with padding `pads` (top, left, bottom, right): the padding per
/// axis (the same on both sides), and, when `pads` is uneven, the first output row and column
/// and the output extents to cut out of the evenly padded output so that it holds exactly the
/// windows of `pads`. Each axis is padded by the least p ≥ both of its sides with p − before a
/// multiple of the stride. `None` when the window does not fit.
#[allow(clippy::type_complexity)]
pub(super) fn even_padding(
    pads: [usize; 4],
    input: [usize; 2],
    kernel: [usize; 2],
    strides: [usize; 2],
    dilations: [usize; 2],
) -> Option<([usize; 2], Option<([usize; 2], [usize; 2])>)> {
    if pads[0] == pads[2] && pads[1] == pads[3] {
        return Some(([pads[0], pads[1]], None));
    }
    let mut even = [0; 2];
    let mut first = [0; 2];
    let mut extent = [0; 2];
    for axis in 0..2 {
        let (before, after) = (pads[axis], pads[axis + 2]);
        let stride = strides[axis];
        let mut p = before.max(after);
        p += (stride - (p - before) % stride) % stride;
        even[axis] = p;
        first[axis] = (p - before) / stride;
        // The windows of the uneven padding: over before + input + after.
        let span = input[axis].checked_add(before)?.checked_add(after)?;
        let window = dilations[axis].checked_mul(kernel[axis].checked_sub(1)?)? + 1;
        extent[axis] = span.checked_sub(window)? / stride + 1;
    }
    Some((even, Some((first, extent))))
}

/// The output extent of a window over an axis of `n` elements, or `None` when the window does
/// not fit in the padded axis.
pub(super) fn window_out(
    n: usize,
    pad: usize,
    kernel: usize,
    stride: usize,
    dilation: usize,
    ceil: bool,
) -> Option<usize> {
    let extent = dilation
        .checked_mul(kernel.checked_sub(1)?)?
        .checked_add(1)?;
    let room = n.checked_add(2 * pad)?.checked_sub(extent)?;
    let mut out = if ceil {
        room.div_ceil(stride)
    } else {
        room / stride
    } + 1;
    // As ONNX and the engine: the last window must start inside the input or its padding
    // before it.
    if ceil && (out - 1) * stride >= n + pad {
        out -= 1;
    }
    Some(out)
}
