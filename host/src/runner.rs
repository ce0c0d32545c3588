//! Running a model natively or in wasm behind one interface, and loading models from files.
//!
//! Both paths feed the same canonical model bytes and the same borsh-encoded inputs to the same
//! engine code (`cvm_engine::load` + `run_encoded`); the wasm path does it inside wasmtime.

use std::path::{Path, PathBuf};

use cvm_engine::exec::InputTensor;
use cvm_engine::{Model, Report, ValidatedModel};

use crate::cvm::{self, CvmMeta, CvmModel};
use crate::error::{HostError, read_file};
use crate::text;
use crate::wasm::WasmEngine;

/// Which engine build executes the model.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EngineKind {
    /// `engine.wasm` inside wasmtime (the consensus configuration).
    #[default]
    Wasm,
    /// The same engine compiled for this machine.
    Native,
}

impl EngineKind {
    /// Name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Wasm => "wasm",
            EngineKind::Native => "native",
        }
    }
}

/// Encodes inputs the way the ABI takes them.
pub fn encode_inputs(inputs: &[InputTensor]) -> Vec<u8> {
    borsh::to_vec(inputs).unwrap_or_default()
}

/// Loads `model` and runs it on `inputs` with `engine`; a load failure is returned as the
/// (deterministic) failure report.
///
/// # Errors
/// [`HostError::Wasm`] for failures of the wasm runtime (never for the model's own errors).
pub fn execute(
    engine: EngineKind,
    wasm: Option<&WasmEngine>,
    model: &[u8],
    inputs: &[InputTensor],
    gas_limit: u64,
) -> Result<Report, HostError> {
    let encoded = encode_inputs(inputs);
    match engine {
        EngineKind::Native => Ok(match cvm_engine::load(model) {
            Ok(validated) => cvm_engine::run_encoded(&validated, &encoded, gas_limit),
            Err(report) => *report,
        }),
        EngineKind::Wasm => {
            let owned;
            let wasm = match wasm {
                Some(wasm) => wasm,
                None => {
                    owned = WasmEngine::new()?;
                    &owned
                }
            };
            let mut session = wasm.session()?;
            match session.load(model)? {
                Some(report) => Ok(report),
                None => session.run(&encoded, gas_limit),
            }
        }
    }
}

/// Where a model comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModelSource {
    /// A canonical binary or text model file.
    File(PathBuf),
    /// A CVM model: `symbol` and `params` files.
    Cvm {
        /// The graph JSON.
        symbol: PathBuf,
        /// The parameter binary.
        params: PathBuf,
    },
}

impl ModelSource {
    /// A directory is a CVM model (`<dir>/symbol`, `<dir>/params`); anything else a model file.
    pub fn from_path(path: &Path) -> ModelSource {
        if path.is_dir() {
            ModelSource::Cvm {
                symbol: path.join("symbol"),
                params: path.join("params"),
            }
        } else {
            ModelSource::File(path.to_path_buf())
        }
    }
}

/// A model read from its files: canonical bytes and decoded form, or the deterministic reason a
/// CVM model was rejected.
#[derive(Debug)]
pub struct LoadedModel {
    /// Canonical bytes (as read, as built from a text model, or as converted from CVM files).
    pub bytes: Vec<u8>,
    /// Decoded model, when the bytes decode (validation is the engine's job).
    pub model: Option<Model>,
    /// For CVM models: the byte contract and legacy gas.
    pub cvm: Option<CvmMeta>,
    /// For CVM models that fail their load checks: the failure, as an outcome to hash.
    pub rejected: Option<Box<Report>>,
}

/// Loads a model from `source`.
///
/// # Errors
/// I/O errors and text model errors (node-local). CVM load failures are not errors here: they
/// come back in [`LoadedModel::rejected`].
pub fn load_model(source: &ModelSource) -> Result<LoadedModel, HostError> {
    match source {
        ModelSource::File(path) => load_model_file(path),
        ModelSource::Cvm { symbol, params } => {
            let symbol_bytes = read_file(symbol)?;
            let params_bytes = read_file(params)?;
            Ok(match cvm::import(&symbol_bytes, &params_bytes) {
                Ok(CvmModel { model, meta }) => LoadedModel {
                    bytes: model.encode(),
                    model: Some(model),
                    cvm: Some(meta),
                    rejected: None,
                },
                Err(error) => LoadedModel {
                    bytes: Vec::new(),
                    model: None,
                    cvm: None,
                    rejected: Some(Box::new(Report::failure(error, 0))),
                },
            })
        }
    }
}

/// Reads a model file: canonical binary (starts with the magic) or text model (JSON).
///
/// # Errors
/// I/O errors and text model errors. Canonical bytes that do not decode are *not* an error
/// here: the engine rejects them deterministically.
pub fn load_model_file(path: &Path) -> Result<LoadedModel, HostError> {
    let bytes = read_file(path)?;
    if bytes.starts_with(&cvm_engine::MAGIC) || !looks_like_json(&bytes) {
        let model = Model::decode(&bytes).ok();
        return Ok(LoadedModel {
            bytes,
            model,
            cvm: None,
            rejected: None,
        });
    }
    let text = String::from_utf8(bytes).map_err(|_| HostError::TextModel {
        path: path.display().to_string(),
        message: "not UTF-8 text".into(),
    })?;
    let model =
        text::parse_text_model(&text, &text::base_dir_of(path), &path.display().to_string())?;
    Ok(LoadedModel {
        bytes: model.encode(),
        model: Some(model),
        cvm: None,
        rejected: None,
    })
}

fn looks_like_json(bytes: &[u8]) -> bool {
    bytes.iter().find(|byte| !byte.is_ascii_whitespace()) == Some(&b'{')
}

/// Decodes and validates natively, for `estimate` and `inspect`.
///
/// # Errors
/// The engine's deterministic rejection, as a report.
pub fn validate_natively(bytes: &[u8]) -> Result<ValidatedModel, Box<Report>> {
    cvm_engine::load(bytes)
}
