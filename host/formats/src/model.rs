//! Reading a model from its files, whatever its form: a canonical binary, a text model
//! ([`crate::text`]), or a directory holding a CVM `symbol` + `params` pair ([`crate::cvm`]),
//! such as the directories `cvm import` writes from ONNX. The `cvm` tool and the Python package
//! load models through [`load_model`].

use std::path::{Path, PathBuf};

use cvm_engine::{Model, Report};

use crate::cvm::{self, CvmMeta, CvmModel};
use crate::{FileLimit, ReadError, read_file, text};

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
    /// A directory is a CVM model (`<dir>/symbol`, `<dir>/params`), or, without a `symbol`
    /// but with a `model.cvm` (what `cvm import` writes for a model of the engine's own
    /// operators), that canonical file; anything else a model file.
    pub fn from_path(path: &Path) -> ModelSource {
        if path.is_dir() && !path.join("symbol").exists() && path.join("model.cvm").is_file() {
            ModelSource::File(path.join("model.cvm"))
        } else if path.is_dir() {
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
pub fn load_model(source: &ModelSource) -> Result<LoadedModel, ReadError> {
    match source {
        ModelSource::File(path) => load_model_file(path),
        ModelSource::Cvm { symbol, params } => {
            let symbol_bytes = read_file(symbol, FileLimit::MODEL)?;
            let params_bytes = read_file(params, FileLimit::MODEL)?;
            Ok(match cvm::import(&symbol_bytes, &params_bytes) {
                Ok(CvmModel { model, meta }) => LoadedModel {
                    bytes: model.encode(),
                    model: Some(model),
                    cvm: Some(meta),
                    rejected: None,
                },
                Err(rejection) => {
                    // The message (never hashed) names the deployed runtime's return code too.
                    let mut error = rejection.error;
                    error.message = format!(
                        "{} (the deployed runtime returns {} = {})",
                        error.message,
                        rejection.class.name(),
                        rejection.class as i32
                    );
                    LoadedModel {
                        bytes: Vec::new(),
                        model: None,
                        cvm: None,
                        rejected: Some(Box::new(Report::failure(error, 0))),
                    }
                }
            })
        }
    }
}

/// Reads a model file: canonical binary (starts with the magic) or text model (JSON, or any
/// file named `.json`).
///
/// # Errors
/// I/O errors and text model errors. Canonical bytes that do not decode are *not* an error
/// here: the engine rejects them deterministically.
pub fn load_model_file(path: &Path) -> Result<LoadedModel, ReadError> {
    let bytes = read_file(path, FileLimit::MODEL)?;
    // A `.json` file is a text model whatever it holds, so that a malformed one is told so.
    let named_json = path
        .extension()
        .is_some_and(|extension| extension.eq_ignore_ascii_case("json"));
    load_model_bytes(
        bytes,
        named_json,
        &text::base_dir_of(path),
        &path.display().to_string(),
    )
}

/// Reads a model held in memory as [`load_model_file`] reads a file: canonical binary (starts
/// with the magic) or text model (JSON; any bytes when `text` says so). A text model's `"file"`
/// parameters are resolved against `base_dir`; `origin` names the model in messages.
///
/// # Errors
/// Text model errors. Canonical bytes that do not decode are *not* an error here: the engine
/// rejects them deterministically.
pub fn load_model_bytes(
    mut bytes: Vec<u8>,
    text: bool,
    base_dir: &Path,
    origin: &str,
) -> Result<LoadedModel, ReadError> {
    // A text model saved with a UTF-8 byte-order mark is still a text model (RFC 8259 lets a
    // parser ignore the mark).
    if bytes.starts_with(UTF8_BOM) && looks_like_json(&bytes[UTF8_BOM.len()..]) {
        bytes.drain(..UTF8_BOM.len());
    }
    if bytes.starts_with(&cvm_engine::MAGIC) || !(text || looks_like_json(&bytes)) {
        let model = Model::decode(&bytes).ok();
        return Ok(LoadedModel {
            bytes,
            model,
            cvm: None,
            rejected: None,
        });
    }
    let source = String::from_utf8(bytes).map_err(|_| ReadError::TextModel {
        path: origin.to_string(),
        message: "not UTF-8 text".into(),
    })?;
    let model = text::parse_text_model(&source, base_dir, origin)?;
    Ok(LoadedModel {
        bytes: model.encode(),
        model: Some(model),
        cvm: None,
        rejected: None,
    })
}

/// The UTF-8 encoding of U+FEFF, the byte-order mark some editors put before a text file.
const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

fn looks_like_json(bytes: &[u8]) -> bool {
    bytes.iter().find(|byte| !byte.is_ascii_whitespace()) == Some(&b'{')
}
