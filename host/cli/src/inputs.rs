//! Assembling model inputs from `--input` arguments and `.npy` files.

use std::path::{Path, PathBuf};

use cvm_engine::exec::InputTensor;
use cvm_engine::validate::ValidatedInput;

use crate::error::HostError;
use cvm_formats::npy::{NpyArray, NpyError, read_npy_f32};
use cvm_formats::text::{decode_npy, read_npy_file};
use cvm_formats::{FileLimit, read_file};
use cvm_onnx::import::Quantization;

/// One `--input` argument: `FILE` (the next unnamed input) or `NAME=FILE`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputArg {
    /// The input it is for, when named.
    pub name: Option<String>,
    /// The `.npy` file.
    pub path: PathBuf,
}

impl InputArg {
    /// Parses `FILE` or `NAME=FILE`. A path that itself contains `=` can be given as `NAME=FILE`.
    pub fn parse(argument: &str) -> InputArg {
        match argument.split_once('=') {
            Some((name, path)) if !name.is_empty() && !name.contains('/') => InputArg {
                name: Some(name.to_string()),
                path: PathBuf::from(path),
            },
            _ => InputArg {
                name: None,
                path: PathBuf::from(argument),
            },
        }
    }
}

/// Matches `arguments` to the declared inputs: named ones by name, the others in declared
/// order to the inputs not named. Returns each declared input's file.
///
/// # Errors
/// [`HostError::Usage`] for an unknown or repeated name, a missing input, or extra files.
pub fn assign(
    declared: &[(String, Vec<u32>)],
    arguments: &[InputArg],
) -> Result<Vec<PathBuf>, HostError> {
    let mut assigned: Vec<Option<PathBuf>> = vec![None; declared.len()];
    for argument in arguments.iter().filter(|a| a.name.is_some()) {
        let name = argument.name.as_deref().unwrap_or_default();
        let Some(index) = declared
            .iter()
            .position(|(declared_name, _)| declared_name == name)
        else {
            let names: Vec<&str> = declared.iter().map(|(n, _)| n.as_str()).collect();
            return Err(HostError::Usage(format!(
                "--input {name}=…: the model has no input \"{name}\" (its inputs: {})",
                names.join(", ")
            )));
        };
        if assigned[index].replace(argument.path.clone()).is_some() {
            return Err(HostError::Usage(format!("input \"{name}\" is given twice")));
        }
    }
    let mut unnamed = arguments.iter().filter(|a| a.name.is_none());
    for slot in assigned.iter_mut().filter(|slot| slot.is_none()) {
        if let Some(argument) = unnamed.next() {
            *slot = Some(argument.path.clone());
        }
    }
    if let Some(extra) = unnamed.next() {
        return Err(HostError::Usage(format!(
            "--input {}: the model takes {} input(s), and all are already given",
            extra.path.display(),
            declared.len()
        )));
    }
    assigned
        .into_iter()
        .zip(declared)
        .map(|(slot, (name, shape))| {
            slot.ok_or_else(|| {
                HostError::Usage(format!(
                    "no value for input \"{name}\" (shape {shape:?}); pass --input {name}=FILE.npy"
                ))
            })
        })
        .collect()
}

/// Reads one input `.npy` file as the engine takes it. Shape and precision are checked by the
/// engine (deterministically); here only the file format is.
///
/// # Errors
/// [`ReadError::Input`] naming the file.
pub fn read_input(path: &Path) -> Result<InputTensor, HostError> {
    input_tensor(read_npy_file(path))
}

fn input_tensor(array: Result<NpyArray, String>) -> Result<InputTensor, HostError> {
    let array = array.map_err(HostError::input)?;
    Ok(InputTensor {
        shape: array.shape,
        data: array.data,
    })
}

/// Reads one input `.npy` file: an integer file as [`read_input`] does; a float32 file, for a
/// model imported from ONNX, quantized with its `quantization` (shape checked against it).
///
/// # Errors
/// [`ReadError::Input`] naming the file: a float32 file without a quantization, or of another
/// shape than the quantization's input.
pub fn read_input_quantized(
    path: &Path,
    quantization: Option<&Quantization>,
) -> Result<InputTensor, HostError> {
    // Read once: the path may be a pipe, which a second open would find empty.
    let bytes = read_file(path, FileLimit::TENSOR)?;
    let array = match read_npy_f32(&bytes) {
        Ok(array) => array,
        Err(NpyError::NotFloat32(_)) => return input_tensor(decode_npy(path, &bytes)),
        Err(error) => return Err(HostError::input(format!("{}: {error}", path.display()))),
    };
    let Some(quantization) = quantization else {
        return Err(HostError::input(format!(
            "{}: a float32 input needs the model's quantization (the quantization.json `cvm \
             import` writes beside an imported model; pass it with --quantization FILE)",
            path.display()
        )));
    };
    let data = cvm_onnx::workflow::quantize_input(quantization, &array.shape, &array.data)
        .map_err(|message| HostError::input(format!("{}: {message}", path.display())))?;
    Ok(InputTensor {
        data,
        shape: array.shape,
    })
}

pub use cvm_runtime::batch::{batch_shape, sample_shape};

/// The samples of one input of `cvm run --batch`: N rows of the input's declared shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchInput {
    /// The declared shape each sample is run with.
    pub shape: Vec<u32>,
    /// How many samples the batch holds (N ≥ 1).
    pub samples: usize,
    /// The values of every sample, sample after sample, each the input's number of elements.
    pub data: Vec<i32>,
}

impl BatchInput {
    /// Sample `index` as the engine takes it; `None` past the last sample.
    pub fn sample(&self, index: usize) -> Option<InputTensor> {
        let size = self.data.len() / self.samples.max(1);
        let start = index.checked_mul(size)?;
        let data = self.data.get(start..start.checked_add(size)?)?;
        Some(InputTensor {
            shape: self.shape.clone(),
            data: data.to_vec(),
        })
    }
}

/// Reads the batch `path` for the input `name` of `declared` shape: an (N, …) array as
/// [`sample_shape`] says, N ≥ 1, of any integer dtype (passed through), or of float32 for a
/// model imported from ONNX, quantized with its `quantization` as [`read_input_quantized`]
/// quantizes one sample. The file is read whole, at most a tensor file's size
/// ([`FileLimit::TENSOR`]).
///
/// # Errors
/// [`HostError::Usage`] naming the file and both shapes when the array's shape does not follow
/// the rule, or when it holds no sample; [`ReadError::Input`] naming the file when it cannot be
/// read or decoded, when it is float32 without a quantization, or when the quantization's input
/// shape is not the declared one.
pub fn read_batch(
    path: &Path,
    name: &str,
    declared: &[u32],
    quantization: Option<&Quantization>,
) -> Result<BatchInput, HostError> {
    let bytes = read_file(path, FileLimit::TENSOR)?;
    let (shape, data) = match read_npy_f32(&bytes) {
        Ok(array) => {
            let Some(quantization) = quantization else {
                return Err(HostError::input(format!(
                    "{}: a float32 input needs the model's quantization (the quantization.json \
                     `cvm import` writes beside an imported model; pass it with --quantization \
                     FILE)",
                    path.display()
                )));
            };
            check_batch_shape(path, name, declared, &array.shape)?;
            if quantization.input_shape != declared {
                return Err(HostError::input(format!(
                    "{}: the quantization's input is {:?}, the model's input \"{name}\" {declared:?}",
                    path.display(),
                    quantization.input_shape
                )));
            }
            drop(bytes);
            let data = quantization.quantize_input(&array.data);
            (array.shape, data)
        }
        Err(NpyError::NotFloat32(_)) => {
            let array = decode_npy(path, &bytes).map_err(HostError::input)?;
            check_batch_shape(path, name, declared, &array.shape)?;
            (array.shape, array.data)
        }
        Err(error) => return Err(HostError::input(format!("{}: {error}", path.display()))),
    };
    Ok(BatchInput {
        shape: declared.to_vec(),
        samples: shape.first().map_or(0, |&n| n as usize),
        data,
    })
}

/// Refuses a batch whose `shape` is not (N, sample shape…) with N ≥ 1.
fn check_batch_shape(
    path: &Path,
    name: &str,
    declared: &[u32],
    shape: &[u32],
) -> Result<(), HostError> {
    let sample = sample_shape(declared);
    let rule = || {
        let dims: Vec<String> = sample.iter().map(u32::to_string).collect();
        let dims = std::iter::once("N".to_string())
            .chain(dims)
            .collect::<Vec<_>>()
            .join(", ");
        format!("the batch of input \"{name}\" {declared:?} is an array of shape ({dims})")
    };
    match shape.split_first() {
        Some((&n, rest)) if rest == sample => {
            if n == 0 {
                return Err(HostError::Usage(format!(
                    "{}: holds no sample (shape {shape:?}); {}",
                    path.display(),
                    rule()
                )));
            }
            Ok(())
        }
        _ => Err(HostError::Usage(format!(
            "{}: shape {shape:?}; {}, one sample per row{}",
            path.display(),
            rule(),
            if sample.len() == declared.len() {
                ""
            } else {
                " (the input's leading 1 dropped)"
            }
        ))),
    }
}

/// The declared inputs of a validated model as (name, shape) pairs.
pub fn declared(inputs: &[ValidatedInput]) -> Vec<(String, Vec<u32>)> {
    inputs
        .iter()
        .map(|input| (input.name.clone(), input.ty.shape.0.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn declared_ab() -> Vec<(String, Vec<u32>)> {
        vec![("a".into(), vec![1]), ("b".into(), vec![2])]
    }

    #[test]
    fn named_and_positional_arguments() {
        let args = [InputArg::parse("b=y.npy"), InputArg::parse("x.npy")];
        let paths = assign(&declared_ab(), &args).map_err(|e| e.to_string());
        assert_eq!(
            paths,
            Ok(vec![PathBuf::from("x.npy"), PathBuf::from("y.npy")])
        );
    }

    #[test]
    fn usage_errors() {
        let err = |args: &[&str]| {
            let args: Vec<InputArg> = args.iter().map(|a| InputArg::parse(a)).collect();
            assign(&declared_ab(), &args)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        };
        assert!(err(&["c=z.npy"]).contains("no input \"c\""));
        assert!(err(&["a=x.npy", "a=y.npy"]).contains("given twice"));
        assert!(err(&["x.npy"]).contains("no value for input \"b\""));
        assert!(err(&["x.npy", "y.npy", "z.npy"]).contains("already given"));
    }

    #[test]
    fn a_batch_drops_the_leading_1_of_the_input() {
        assert_eq!(sample_shape(&[1, 1, 28, 28]), &[1, 28, 28]);
        assert_eq!(sample_shape(&[4, 3]), &[4, 3]);
        assert_eq!(sample_shape(&[1]), &[] as &[u32]);
        assert_eq!(sample_shape(&[]), &[] as &[u32]);
        assert_eq!(batch_shape(7, &[1, 10]), vec![7, 10]);
        assert_eq!(batch_shape(7, &[2, 10]), vec![7, 2, 10]);
        let path = Path::new("b.npy");
        assert!(check_batch_shape(path, "x", &[1, 4], &[9, 4]).is_ok());
        let refused = |shape: &[u32]| {
            check_batch_shape(path, "x", &[1, 4], shape)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        };
        assert!(refused(&[9, 1, 4]).contains(
            "shape [9, 1, 4]; the batch of input \"x\" [1, 4] is an array of shape (N, 4)"
        ));
        assert!(refused(&[4]).contains("(N, 4)"));
        assert!(refused(&[]).contains("(N, 4)"));
        assert!(refused(&[0, 4]).contains("holds no sample"));
    }

    #[test]
    fn samples_are_rows() {
        let batch = BatchInput {
            shape: vec![1, 2],
            samples: 3,
            data: vec![1, 2, 3, 4, 5, 6],
        };
        assert_eq!(batch.sample(1).map(|t| t.data), Some(vec![3, 4]));
        assert_eq!(batch.sample(1).map(|t| t.shape), Some(vec![1, 2]));
        assert_eq!(batch.sample(3), None);
    }

    #[test]
    fn paths_with_directories_are_not_names() {
        assert_eq!(InputArg::parse("./dir=1/x.npy").name, None);
        assert_eq!(
            InputArg::parse("data=./x.npy").name.as_deref(),
            Some("data")
        );
    }
}
