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
    if array.shape != quantization.input_shape {
        return Err(HostError::input(format!(
            "{}: float32 input of shape {:?}, the quantization's input is {:?}",
            path.display(),
            array.shape,
            quantization.input_shape
        )));
    }
    Ok(InputTensor {
        data: quantization.quantize_input(&array.data),
        shape: array.shape,
    })
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
    fn paths_with_directories_are_not_names() {
        assert_eq!(InputArg::parse("./dir=1/x.npy").name, None);
        assert_eq!(
            InputArg::parse("data=./x.npy").name.as_deref(),
            Some("data")
        );
    }
}
