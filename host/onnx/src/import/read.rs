//! Reading the ONNX graph's signature: its inputs (at most one of float values; token ids and
//! attention masks, integer), the shape each of their axes takes (fixed in the file, given by
//! `--input-shape`, or an open batch axis taken as 1), and the output imported (the only one,
//! or the one named). What the ONNX file itself holds is read and checked by [`crate::read`]
//! first.

use crate::model::{Dimension, GraphInput, GraphOutput, OnnxModel};

use super::{ImportError, InputShape};

/// One input of the graph as the lowering starts from it.
pub struct SignatureInput<'a> {
    /// The ONNX input.
    pub input: &'a GraphInput,
    /// Its static shape, batch of 1 first.
    pub shape: Vec<usize>,
    /// It holds integers (int64 or int32: token ids or an attention mask), passed through
    /// unquantized.
    pub integer: bool,
}

/// The graph's edges as the lowering starts from them.
pub struct Signature<'a> {
    /// The inputs, in the graph's order.
    pub inputs: Vec<SignatureInput<'a>>,
    /// The output imported.
    pub output: &'a GraphOutput,
    /// What was assumed (an open batch axis taken as 1), for the report.
    pub notes: Vec<String>,
}

/// Reads the signature of `model` with the input dimensions `shapes` gives, importing the
/// output named `output` (required when the graph has several).
///
/// # Errors
/// [`ImportError::Graph`]: no input, an input neither float32 nor int64 or int32, two float
/// inputs, `--input-shape` naming no input or contradicting the file, an open dimension past
/// the batch, a shape without a batch of 1 or holding 0; several outputs and none named, or
/// a name that is not an output.
pub fn signature<'a>(
    model: &'a OnnxModel,
    shapes: &[InputShape],
    output: Option<&str>,
) -> Result<Signature<'a>, ImportError> {
    let names = |list: &mut dyn Iterator<Item = &str>| {
        list.map(cvm_formats::quote).collect::<Vec<_>>().join(", ")
    };
    if model.inputs.is_empty() {
        return Err(ImportError::Graph(
            "the model has no input; the importer needs at least one".into(),
        ));
    }
    if model.inputs.len() > MAX_INPUTS {
        return Err(ImportError::Graph(format!(
            "the model has {} inputs; the importer takes at most {MAX_INPUTS}",
            model.inputs.len()
        )));
    }
    for given in shapes {
        if !model.inputs.iter().any(|i| i.name == given.name) {
            return Err(ImportError::Graph(format!(
                "--input-shape names {}, which is not an input of the model (its inputs: {})",
                cvm_formats::quote(&given.name),
                names(&mut model.inputs.iter().map(|i| i.name.as_str()))
            )));
        }
    }
    let mut notes = Vec::new();
    let mut inputs = Vec::with_capacity(model.inputs.len());
    for input in &model.inputs {
        let integer = matches!(
            input.element_type,
            crate::ElementType::Int64 | crate::ElementType::Int32
        );
        if input.element_type != crate::ElementType::Float32 && !integer {
            return Err(ImportError::Graph(format!(
                "input {}: element type {:?}; the importer reads float32 inputs, and int64 or \
                 int32 token ids and attention masks",
                cvm_formats::quote(&input.name),
                input.element_type
            )));
        }
        if !integer && inputs.iter().any(|i: &SignatureInput<'_>| !i.integer) {
            return Err(ImportError::Graph(format!(
                "inputs {} and {} are both float32; the importer takes one float input (beside \
                 integer token ids and masks)",
                cvm_formats::quote(
                    inputs
                        .iter()
                        .find(|i| !i.integer)
                        .map_or("", |i| &i.input.name)
                ),
                cvm_formats::quote(&input.name)
            )));
        }
        let shape = input_shape(input, shapes, &mut notes)?;
        if shape.len() < 2 || shape.first() != Some(&1) {
            return Err(ImportError::Graph(format!(
                "input {}: shape {shape:?}; the importer needs a batch of 1 and at least one \
                 more axis, such as (1, C, H, W) or (1, K)",
                cvm_formats::quote(&input.name)
            )));
        }
        if shape.contains(&0) {
            return Err(ImportError::Graph(format!(
                "input {}: shape {shape:?} holds no value; the importer needs every dimension \
                 above 0",
                cvm_formats::quote(&input.name)
            )));
        }
        inputs.push(SignatureInput {
            input,
            shape,
            integer,
        });
    }
    let output = match (output, model.outputs.as_slice()) {
        (None, [only]) => only,
        (None, outputs) => {
            return Err(ImportError::Graph(format!(
                "the model has {} outputs ({}); name the one to import with --graph-output NAME",
                outputs.len(),
                names(&mut outputs.iter().map(|o| o.name.as_str()))
            )));
        }
        (Some(name), outputs) => outputs.iter().find(|o| o.name == name).ok_or_else(|| {
            ImportError::Graph(format!(
                "--graph-output {}: not an output of the model (its outputs: {})",
                cvm_formats::quote(name),
                names(&mut outputs.iter().map(|o| o.name.as_str()))
            ))
        })?,
    };
    Ok(Signature {
        inputs,
        output,
        notes,
    })
}

/// Most inputs of a model the importer takes.
pub const MAX_INPUTS: usize = 8;

/// The shape of the graph input: its fixed dimensions, `--input-shape`'s where given, and 1 for
/// a leading axis the file leaves open (the exporters' batch axis), which `notes` records.
fn input_shape(
    input: &GraphInput,
    shapes: &[InputShape],
    notes: &mut Vec<String>,
) -> Result<Vec<usize>, ImportError> {
    let quoted = cvm_formats::quote(&input.name);
    if let Some(given) = shapes.iter().find(|s| s.name == input.name) {
        if given.dims.len() != input.shape.len() {
            return Err(ImportError::Graph(format!(
                "--input-shape {quoted}: {} dimensions given, but the input has {} ({})",
                given.dims.len(),
                input.shape.len(),
                dims_text(&input.shape)
            )));
        }
        for (axis, (dim, &size)) in input.shape.iter().zip(&given.dims).enumerate() {
            if let Dimension::Fixed(fixed) = dim
                && *fixed != size
            {
                return Err(ImportError::Graph(format!(
                    "--input-shape {quoted}: axis {axis} is {size}, but the file fixes it at \
                     {fixed}"
                )));
            }
        }
        return Ok(given.dims.iter().map(|&d| d as usize).collect());
    }
    let mut shape = Vec::with_capacity(input.shape.len());
    for (axis, dim) in input.shape.iter().enumerate() {
        shape.push(match dim {
            Dimension::Fixed(size) => *size as usize,
            open if axis == 0 => {
                notes.push(format!(
                    "input {quoted}: axis 0 ({open}) taken as a batch of 1"
                ));
                1
            }
            open => {
                return Err(ImportError::Graph(format!(
                    "input {quoted}, axis {axis}: the dimension {open} is not fixed (shape {}); \
                     give the input's shape with --input-shape {}={}",
                    dims_text(&input.shape),
                    input.name,
                    input
                        .shape
                        .iter()
                        .enumerate()
                        .map(|(a, d)| d.size().map_or_else(
                            || if a == 0 {
                                "1".to_string()
                            } else {
                                "D".to_string()
                            },
                            |s| s.to_string()
                        ))
                        .collect::<Vec<_>>()
                        .join(",")
                )));
            }
        });
    }
    Ok(shape)
}

/// `[batch, 3, 32, 32]`-style text of declared dimensions.
fn dims_text(dims: &[Dimension]) -> String {
    format!(
        "[{}]",
        dims.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    )
}
