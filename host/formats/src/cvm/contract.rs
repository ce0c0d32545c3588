//! The input/output byte contract of `CVMAPIInference` (cvm-compat §4): the sizes the
//! deployed runtime reports, input decoding, and output checking and encoding.

use super::*;

/// The sizes `CVMAPIGetInputLength`, `CVMAPIGetOutputLength`, `CVMAPIGetInputTypeSize`,
/// `CVMAPIGetOutputTypeSize` (cvm-compat §4) and `CVMAPIGetStorageSize` (`docs/cvm.md`) report, computed at
/// load as the deployed runtime computes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Contract {
    /// Bytes of one input: elements of `data` × [`Contract::input_type_size`].
    pub input_length: u64,
    /// Bytes of one output, as [`encode_output`] writes them: with `argmax` one int32 per row of
    /// each head, otherwise every element of every head × [`Contract::output_type_size`].
    pub output_length: u64,
    /// 1 when the precision of `data` is ≤ 8, else 4.
    pub input_type_size: u64,
    /// 4 with `argmax` or `detection` post-processing or when some head's precision is > 8,
    /// else 1.
    pub output_type_size: u64,
    /// The deployed runtime's memory plan: for every storage id, the largest entry that uses it
    /// (4 bytes per element), summed.
    pub storage_size: u64,
}

/// The byte contract's sizes for a graph whose heads have the inferred `head_types`.
pub(super) fn contract(
    graph: &Symbol,
    input_elements: u64,
    input_precision: u8,
    head_types: &[&cvm_engine::TensorType],
) -> Result<Contract, Rejection> {
    let input_type_size = if input_precision <= 8 { 1 } else { 4 };
    let wide = head_types.iter().any(|ty| ty.precision > 8);
    let output_type_size = match graph.postprocess {
        Postprocess::Argmax | Postprocess::Detection => 4,
        Postprocess::None if wide => 4,
        Postprocess::None => 1,
    };
    let output_length = head_types
        .iter()
        .map(|ty| {
            let elements = ty.shape.elements();
            match graph.postprocess {
                Postprocess::Argmax => {
                    let last = ty.dims().last().map_or(1, |&d| u64::from(d)).max(1);
                    elements / last * output_type_size
                }
                _ => elements * output_type_size,
            }
        })
        .sum();
    Ok(Contract {
        input_length: input_elements * input_type_size,
        output_length,
        input_type_size,
        output_type_size,
        storage_size: symbol::storage_size(&graph.storage_ids, &graph.shapes)?,
    })
}

/// Decodes the raw input bytes of `CVMAPIInference` (cvm-compat §4): one byte per element when
/// the input precision is ≤ 8, else four (little endian, or big endian as on chain); values
/// are clipped to the precision on entry.
///
/// # Errors
/// `MalformedInput` when the byte length is wrong: the deployed runtime's `VERIFY` fails, a
/// deterministic error of the run.
pub fn decode_input(model: &CvmMeta, bytes: &[u8], big_endian: bool) -> Result<InputTensor, Error> {
    if model.deployed_input_shape != model.input_shape {
        return Err(fail!(
            MalformedInput,
            "the deployed runtime shapes this model's input as entry {:?}, not as data {:?} (an input index read as an entry id), and fails every inference of it",
            model.deployed_input_shape,
            model.input_shape
        ));
    }
    let elements: usize = model.input_shape.iter().map(|&d| d as usize).product();
    let width = if model.input_precision <= 8 { 1 } else { 4 };
    if bytes.len() != elements * width {
        return Err(fail!(
            MalformedInput,
            "CVM input must be {} bytes ({elements} elements of {width} byte(s) for precision {}), got {}",
            elements * width,
            model.input_precision,
            bytes.len()
        ));
    }
    let bound = precision_bound(model.input_precision);
    let data = if width == 1 {
        bytes
            .iter()
            .map(|&b| i64::from(b as i8))
            .collect::<Vec<_>>()
    } else {
        bytes
            .chunks_exact(4)
            .map(|c| {
                let raw = [c[0], c[1], c[2], c[3]];
                i64::from(if big_endian {
                    i32::from_be_bytes(raw)
                } else {
                    i32::from_le_bytes(raw)
                })
            })
            .collect()
    };
    Ok(InputTensor {
        shape: model.input_shape.clone(),
        data: data
            .into_iter()
            .map(|v| v.clamp(-bound, bound) as i32)
            .collect(),
    })
}

/// Rows (elements over the last axis) and last-axis length of a head shape.
fn rows_and_width(shape: &[u32]) -> (u64, u64) {
    let width = shape.last().map_or(1, |&d| u64::from(d));
    let size: u64 = shape.iter().map(|&d| u64::from(d)).product();
    (size / width.max(1), width)
}

/// The conditions under which the deployed `CVMAPIInference` fails, or writes bytes its own
/// output length does not cover, after a successful load (cvm-compat §4, §6). They depend on
/// the head shapes alone, so they are checked before the run.
///
/// - `argmax`: the runtime fills `ceil(rows / width)` of a head's `rows` values; a head with
///   more than one row and a last axis longer than 1 leaves values unwritten (undefined).
/// - `detection`, or more than one head: a single head, or heads with unequal row counts,
///   cannot be interleaved (the runtime's `VERIFY` fails); under `detection` the output length
///   is `shape[-2]` of the first head times the sum of the last axes, and a first head whose
///   row count differs from that (more than two axes, or one) makes the runtime write past or
///   short of it (undefined).
///
/// # Errors
/// `ShapeMismatch`, with a message saying which of these it is.
pub fn check_output_contract(
    postprocess: Postprocess,
    output_shapes: &[Vec<u32>],
) -> Result<(), Error> {
    let heads: Vec<(u64, u64)> = output_shapes.iter().map(|s| rows_and_width(s)).collect();
    match postprocess {
        Postprocess::Argmax => {
            if let Some((k, &(rows, width))) = heads
                .iter()
                .enumerate()
                .find(|&(_, &(rows, width))| rows > 1 && width > 1)
            {
                return Err(fail!(
                    ShapeMismatch,
                    "CVM output: argmax over head {k} with {rows} rows of {width}: the deployed runtime writes only the first {} row(s), the rest is undefined behaviour",
                    rows.div_ceil(width)
                ));
            }
        }
        _ if postprocess == Postprocess::Detection || heads.len() > 1 => {
            if heads.len() == 1 {
                return Err(fail!(
                    ShapeMismatch,
                    "CVM output: detection post-processing needs more than one head to interleave (the deployed runtime rejects a single head)"
                ));
            }
            let rows: Vec<u64> = heads.iter().map(|&(rows, _)| rows).collect();
            if rows.windows(2).any(|pair| pair[0] != pair[1]) {
                return Err(fail!(
                    ShapeMismatch,
                    "CVM output: heads with row counts {rows:?} cannot be interleaved"
                ));
            }
            let first = &output_shapes[0];
            let declared = match first.len() {
                0 | 1 => 0,
                n => u64::from(first[n - 2]),
            };
            if postprocess == Postprocess::Detection && declared != rows[0] {
                return Err(fail!(
                    ShapeMismatch,
                    "CVM output: detection writes {} rows but the deployed output length counts shape[-2] = {declared} rows of the first head {first:?}: undefined behaviour",
                    rows[0]
                ));
            }
        }
        _ => {}
    }
    Ok(())
}

/// Encodes the model outputs as `CVMAPIInference` returns them (cvm-compat §4), for models
/// that pass [`check_output_contract`].
///
/// - `argmax`: per head, one int32 per row: the index of the largest value over the last axis,
///   comparing the values truncated to 8 bits (`int8_t(v)`) as both deployed backends do, the
///   first index on ties;
/// - `detection`, or more than one head: rows of all heads interleaved (row x of head 0, row x of
///   head 1, …); int32 for detection, else by precision;
/// - otherwise: every element, one byte each when every head's precision is ≤ 8, else int32.
///
/// # Errors
/// The error of [`check_output_contract`] for the outputs' shapes.
pub fn encode_output(
    postprocess: Postprocess,
    outputs: &[OutputTensor],
    big_endian: bool,
) -> Result<Vec<u8>, Error> {
    let shapes: Vec<Vec<u32>> = outputs.iter().map(|t| t.shape.clone()).collect();
    check_output_contract(postprocess, &shapes)?;
    let push32 = |out: &mut Vec<u8>, value: i32| {
        out.extend_from_slice(&if big_endian {
            value.to_be_bytes()
        } else {
            value.to_le_bytes()
        });
    };
    let narrow = outputs.iter().all(|t| t.precision <= 8);
    let last_dim = |t: &OutputTensor| t.shape.last().map_or(1, |&d| d as usize).max(1);
    let mut out = Vec::new();
    match postprocess {
        Postprocess::Argmax => {
            for tensor in outputs {
                for row in tensor.data.chunks_exact(last_dim(tensor)) {
                    let mut best = 0;
                    for (index, &value) in row.iter().enumerate() {
                        if value as i8 > row[best] as i8 {
                            best = index;
                        }
                    }
                    push32(&mut out, best as i32);
                }
            }
        }
        _ if postprocess == Postprocess::Detection || outputs.len() > 1 => {
            let rows = outputs[0].data.len() / last_dim(&outputs[0]);
            let wide = postprocess == Postprocess::Detection || !narrow;
            for row in 0..rows {
                for tensor in outputs {
                    let width = last_dim(tensor);
                    for &value in &tensor.data[row * width..(row + 1) * width] {
                        if wide {
                            push32(&mut out, value)
                        } else {
                            out.push(value as i8 as u8)
                        }
                    }
                }
            }
        }
        _ => {
            for tensor in outputs {
                for &value in &tensor.data {
                    if narrow {
                        out.push(value as i8 as u8)
                    } else {
                        push32(&mut out, value)
                    }
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tensor(shape: &[u32], precision: u8, data: &[i32]) -> OutputTensor {
        OutputTensor {
            shape: shape.to_vec(),
            precision,
            data: data.to_vec(),
        }
    }

    #[test]
    fn output_layouts() {
        let head = tensor(&[2, 3], 8, &[1, 9, 9, -1, -2, -3]);
        let row = tensor(&[1, 3], 8, &[1, 9, 9]);
        // argmax: first index wins ties.
        assert_eq!(
            encode_output(Postprocess::Argmax, std::slice::from_ref(&row), false),
            Ok(vec![1, 0, 0, 0])
        );
        assert_eq!(
            encode_output(Postprocess::Argmax, std::slice::from_ref(&row), true),
            Ok(vec![0, 0, 0, 1])
        );
        // argmax compares int8 truncations: 200 → −56 < 100, 300 → 44 > 9.
        let wide_row = tensor(&[1, 2], 16, &[200, 100]);
        assert_eq!(
            encode_output(Postprocess::Argmax, &[wide_row], false),
            Ok(vec![1, 0, 0, 0])
        );
        let wide_row = tensor(&[1, 3], 16, &[1, 300, 9]);
        assert_eq!(
            encode_output(Postprocess::Argmax, &[wide_row], false),
            Ok(vec![1, 0, 0, 0])
        );
        // A column (last axis 1) fills every row.
        let column = tensor(&[3, 1], 8, &[5, 6, 7]);
        assert_eq!(
            encode_output(Postprocess::Argmax, &[column], false).map(|b| b.len()),
            Ok(12)
        );
        // Several rows of more than one value: the deployed runtime leaves rows unwritten.
        let error = encode_output(Postprocess::Argmax, std::slice::from_ref(&head), false);
        assert!(
            error
                .as_ref()
                .is_err_and(|e| e.message.contains("undefined behaviour")),
            "{error:?}"
        );
        // Plain, narrow: one byte per element.
        assert_eq!(
            encode_output(Postprocess::None, std::slice::from_ref(&head), false),
            Ok(vec![1, 9, 9, 255, 254, 253])
        );
        // Two heads interleave rows.
        let second = tensor(&[2, 1], 8, &[7, 8]);
        assert_eq!(
            encode_output(Postprocess::None, &[head.clone(), second.clone()], false),
            Ok(vec![1, 9, 9, 7, 255, 254, 253, 8])
        );
        // Detection writes int32.
        let detection = encode_output(Postprocess::Detection, &[head.clone(), second], true);
        assert_eq!(detection.as_ref().map(Vec::len), Ok(32));
        assert_eq!(
            detection.map(|b| b[..8].to_vec()),
            Ok(vec![0, 0, 0, 1, 0, 0, 0, 9])
        );
        // Wide precision: int32 per element.
        let wide = tensor(&[1], 16, &[-2]);
        assert_eq!(
            encode_output(Postprocess::None, &[wide], false),
            Ok(vec![254, 255, 255, 255])
        );
        // Mismatched row counts cannot be interleaved; a single detection head neither.
        let odd = tensor(&[3, 1], 8, &[1, 2, 3]);
        assert!(
            encode_output(Postprocess::Detection, &[head.clone(), odd.clone()], false).is_err()
        );
        assert!(encode_output(Postprocess::None, &[head.clone(), odd], false).is_err());
        assert!(encode_output(Postprocess::Detection, std::slice::from_ref(&head), false).is_err());
        // Detection counts shape[-2] of the first head: a 3-axis head with 1 × 2 rows is not 2.
        let deep = tensor(&[2, 1, 3], 8, &[0; 6]);
        let rows = tensor(&[2, 1], 8, &[0; 2]);
        assert!(
            encode_output(Postprocess::Detection, &[deep.clone(), rows.clone()], false).is_err()
        );
        assert!(encode_output(Postprocess::None, &[deep, rows], false).is_ok());
    }
}
