//! `cvm_onnx::read_file` on models whose tensors are stored as external data, written here with
//! the prost types into scratch directories: external weights read back equal to the same
//! weights inline and import to the same bytes; every hostile location, range and entry is
//! refused naming the tensor and what is wrong, before anything outside the model's directory
//! is opened and before any buffer is sized from a file.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test helpers fail loudly

mod common;

use std::path::{Path, PathBuf};

use common::*;
use cvm_formats::npy::NpyF32Array;
use cvm_onnx::OnnxError;
use cvm_onnx::error::ExternalDataError;
use cvm_onnx::import::{Importer, Options};
use cvm_onnx::proto::{ModelProto, StringStringEntryProto, TensorProto};

/// A directory of its own for one test, removed when the test ends.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("cvm-onnx-external-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        // Messages show the directory with symbolic links followed (`/tmp` may be one).
        Scratch(std::fs::canonicalize(&dir).unwrap())
    }

    fn path(&self, relative: &str) -> PathBuf {
        self.0.join(relative)
    }

    fn write(&self, relative: &str, bytes: &[u8]) -> PathBuf {
        let path = self.path(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, bytes).unwrap();
        path
    }

    /// Writes `model` as `model.onnx` and reads it back with `read_file`.
    fn read(&self, model: &ModelProto) -> Result<cvm_onnx::OnnxModel, OnnxError> {
        cvm_onnx::read_file(&self.write("model.onnx", &encode(model)))
    }

    /// The problem `read_file` finds with the external data of `tensor`.
    fn refusal(&self, model: &ModelProto, tensor: &str) -> (ExternalDataError, String) {
        match self.read(model) {
            Ok(_) => panic!("expected a refusal"),
            Err(error) => {
                let message = error.to_string();
                match error {
                    OnnxError::ExternalData {
                        tensor: named,
                        problem,
                    } => {
                        assert_eq!(named, tensor, "{message}");
                        (problem, message)
                    }
                    other => panic!("not an external data error: {other}"),
                }
            }
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn entries(pairs: &[(&str, &str)]) -> Vec<StringStringEntryProto> {
    pairs
        .iter()
        .map(|(key, value)| StringStringEntryProto {
            key: Some(key.to_string()),
            value: Some(value.to_string()),
        })
        .collect()
}

/// The little-endian bytes of a tensor's data, as `raw_data` holds them.
fn tensor_bytes(tensor: &TensorProto) -> Vec<u8> {
    if let Some(raw) = &tensor.raw_data {
        return raw.clone();
    }
    match tensor.data_type.unwrap() {
        FLOAT => tensor
            .float_data
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect(),
        INT8 => tensor.int32_data.iter().map(|&v| v as i8 as u8).collect(),
        UINT8 => tensor.int32_data.iter().map(|&v| v as u8).collect(),
        INT32 => tensor
            .int32_data
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect(),
        INT64 => tensor
            .int64_data
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect(),
        other => panic!("type {other}"),
    }
}

/// Moves `tensor`'s data to the end of `data` (after three bytes of padding, so that offsets
/// are not aligned), pointing its entries at `location`; the length is left out when
/// `with_length` is false.
fn move_out(tensor: &mut TensorProto, location: &str, data: &mut Vec<u8>, with_length: bool) {
    let bytes = tensor_bytes(tensor);
    data.extend_from_slice(&[0xaa; 3]);
    let offset = data.len().to_string();
    let length = bytes.len().to_string();
    data.extend_from_slice(&bytes);
    tensor.raw_data = None;
    tensor.float_data.clear();
    tensor.int32_data.clear();
    tensor.int64_data.clear();
    tensor.data_location = Some(1);
    let mut pairs = vec![("location", location), ("offset", offset.as_str())];
    if with_length {
        pairs.push(("length", length.as_str()));
    }
    tensor.external_data = entries(&pairs);
}

/// `model` with every initializer and tensor attribute moved to `location` in `scratch`, as
/// PyTorch's exporter writes them.
fn externalized(model: &ModelProto, scratch: &Scratch, location: &str) -> ModelProto {
    let (model, data) = moved_out_all(model, location);
    scratch.write(location, &data);
    model
}

/// `model` with every initializer and tensor attribute pointing at `location`, and the bytes
/// that file must hold.
fn moved_out_all(model: &ModelProto, location: &str) -> (ModelProto, Vec<u8>) {
    let mut model = model.clone();
    let mut data = Vec::new();
    let graph = model.graph.as_mut().unwrap();
    for tensor in &mut graph.initializer {
        move_out(tensor, location, &mut data, true);
    }
    for node in &mut graph.node {
        for attribute in &mut node.attribute {
            if let Some(tensor) = &mut attribute.t {
                move_out(tensor, location, &mut data, true);
            }
        }
    }
    (model, data)
}

/// The MLP of `common` with its first weight named as PyTorch names it, and a `Constant` shape
/// feeding a final Reshape, so that a tensor attribute reaches the importer.
fn mlp_model() -> ModelProto {
    let mut model = mlp();
    let graph = model.graph.as_mut().unwrap();
    graph.initializer[0].name = Some("fc1.weight".into());
    graph.node[0].input[1] = "fc1.weight".into();
    graph.node[2].output[0] = "logits".into();
    graph.node.push(with_attrs(
        named("shape", node("Constant", &[], &["shape"])),
        vec![attr_tensor("value", raw_i64("", &[2], &[1, 2]))],
    ));
    graph
        .node
        .push(node("Reshape", &["logits", "shape"], &["y"]));
    model
}

/// `mlp_model()` with `fc1.weight` (float32 [3, 4], 48 bytes) external with `pairs`.
fn fc1_with(pairs: &[(&str, &str)]) -> ModelProto {
    let mut model = mlp_model();
    let weight = &mut model.graph.as_mut().unwrap().initializer[0];
    weight.raw_data = None;
    weight.data_location = Some(1);
    weight.external_data = entries(pairs);
    model
}

/// The 48 bytes of `fc1.weight`.
fn fc1_bytes() -> Vec<u8> {
    tensor_bytes(&mlp_model().graph.unwrap().initializer[0])
}

const FC1: &str = "initializer \"fc1.weight\"";

fn imported(model: &cvm_onnx::OnnxModel) -> cvm_onnx::import::Imported {
    let importer = Importer::new(model).unwrap();
    let samples = NpyF32Array {
        shape: vec![8, 4],
        data: (0..32i16).map(|i| f32::from((i * 5) % 9 - 4)).collect(),
    };
    let calibration = importer.calibrate(&samples, &mut |_, _| {}).unwrap();
    importer
        .quantize(
            &calibration,
            Options {
                per_channel: true,
                schedule: 1,
                ..Options::default()
            },
        )
        .unwrap()
}

#[test]
fn external_weights_read_and_import_as_inline_ones() {
    let scratch = Scratch::new("good");
    let inline = mlp_model();
    let external = externalized(&inline, &scratch, "model.onnx.data");
    let from_file = scratch.read(&external).unwrap();
    let from_bytes = cvm_onnx::read(&encode(&inline)).unwrap();
    assert_eq!(from_file, from_bytes);
    let (a, b) = (imported(&from_file), imported(&from_bytes));
    assert_eq!(a.symbol, b.symbol);
    assert_eq!(a.params, b.params);
    assert_eq!(a.canonical, b.canonical);

    // Every element type, int8 and uint8 from int32_data, and a scalar Constant attribute.
    let conv = conv_net();
    let external = externalized(&conv, &scratch, "conv.data");
    // The net holds a NaN attribute, which is not equal to itself: compare what is printed.
    assert_eq!(
        format!("{:?}", scratch.read(&external).unwrap()),
        format!("{:?}", cvm_onnx::read(&encode(&conv)).unwrap())
    );
}

/// Files in a subdirectory, a symbolic link that stays inside the directory, a range read to
/// the end of the file with no length, a checksum, and a model named by a relative path.
#[test]
fn locations_offsets_and_lengths_as_onnx_writes_them() {
    let scratch = Scratch::new("forms");
    let inline = mlp_model();
    let mut external = inline.clone();
    let graph = external.graph.as_mut().unwrap();
    let mut shared = Vec::new();
    move_out(
        &mut graph.initializer[0],
        "weights/all.bin",
        &mut shared,
        true,
    );
    move_out(
        &mut graph.initializer[1],
        "weights/all.bin",
        &mut shared,
        true,
    );
    graph.initializer[1]
        .external_data
        .extend(entries(&[("checksum", "0123456789abcdef")]));
    scratch.write("weights/all.bin", &shared);
    let mut single = Vec::new();
    move_out(&mut graph.initializer[2], "w2.bin", &mut single, false);
    scratch.write("w2.bin", &single);
    let mut linked = Vec::new();
    move_out(&mut graph.initializer[3], "b2-link.bin", &mut linked, true);
    scratch.write("weights/b2.bin", &linked);
    #[cfg(unix)]
    std::os::unix::fs::symlink("weights/b2.bin", scratch.path("b2-link.bin")).unwrap();
    #[cfg(not(unix))]
    scratch.write("b2-link.bin", &linked);
    let shape = graph.node[3].attribute[0].t.as_mut().unwrap();
    let bytes = tensor_bytes(shape);
    shape.raw_data = None;
    shape.data_location = Some(1);
    shape.external_data = entries(&[("location", "shape.bin"), ("offset", "0")]);
    scratch.write("shape.bin", &bytes);

    let expected = cvm_onnx::read(&encode(&inline)).unwrap();
    assert_eq!(scratch.read(&external).unwrap(), expected);
    // A model named relative to the working directory reads its data from its own directory.
    std::fs::write(scratch.path("model.onnx"), encode(&external)).unwrap();
    let cwd = std::env::current_dir().unwrap();
    let relative = pathdiff(&scratch.path("model.onnx"), &cwd);
    assert_eq!(cvm_onnx::read_file(&relative).unwrap(), expected);
}

/// `path` relative to `base`, both absolute.
fn pathdiff(path: &Path, base: &Path) -> PathBuf {
    let base = std::fs::canonicalize(base).unwrap();
    let mut up = PathBuf::new();
    let mut ancestor = base.as_path();
    loop {
        if let Ok(rest) = path.strip_prefix(ancestor) {
            return up.join(rest);
        }
        up.push("..");
        ancestor = ancestor.parent().unwrap();
    }
}

#[test]
fn a_model_read_from_memory_is_told_to_read_its_file() {
    let scratch = Scratch::new("memory");
    let external = externalized(&mlp_model(), &scratch, "model.onnx.data");
    let error = cvm_onnx::read(&encode(&external)).unwrap_err();
    assert!(
        matches!(
            &error,
            OnnxError::ExternalData {
                problem: ExternalDataError::InMemory,
                ..
            }
        ),
        "{error}"
    );
    assert_eq!(
        error.to_string(),
        "initializer \"fc1.weight\": its data is external (data_location = EXTERNAL), in a file \
         beside the model; read the model from its file (cvm_onnx::read_file), which reads \
         external data from the model's directory"
    );
}

#[test]
fn locations_outside_the_directory_are_refused_before_opening() {
    let scratch = Scratch::new("outside");
    let inner = Scratch(scratch.path("model"));
    std::fs::create_dir_all(&inner.0).unwrap();
    // The right bytes, outside the model's directory: never to be read.
    scratch.write("w.bin", &fc1_bytes());

    let (problem, message) = inner.refusal(&fc1_with(&[("location", "../w.bin")]), FC1);
    assert!(
        matches!(problem, ExternalDataError::LocationComponent { .. }),
        "{message}"
    );
    assert_eq!(
        message,
        "initializer \"fc1.weight\": its external data location \"../w.bin\" has the component \
         \"..\"; each component must be a plain name (not \"..\", \".\" or empty), so that it \
         stays inside the model's directory"
    );
    let (problem, _) = inner.refusal(&fc1_with(&[("location", "sub/../../w.bin")]), FC1);
    assert!(matches!(
        problem,
        ExternalDataError::LocationComponent { .. }
    ));
    let (problem, _) = inner.refusal(&fc1_with(&[("location", "./w.bin")]), FC1);
    assert!(matches!(
        problem,
        ExternalDataError::LocationComponent { .. }
    ));

    let absolute = scratch.path("w.bin").display().to_string();
    for location in [absolute.as_str(), "/dev/zero", "/etc/passwd"] {
        let (problem, message) = inner.refusal(&fc1_with(&[("location", location)]), FC1);
        assert!(
            matches!(problem, ExternalDataError::AbsoluteLocation { .. }),
            "{message}"
        );
        assert_eq!(
            message,
            format!(
                "initializer \"fc1.weight\": its external data location \"{location}\" is an \
                 absolute path; a location is relative to the model's directory"
            )
        );
    }
    let (problem, _) = inner.refusal(&fc1_with(&[("location", "")]), FC1);
    assert!(matches!(problem, ExternalDataError::EmptyLocation));
}

#[cfg(unix)]
#[test]
fn symbolic_links_out_of_the_directory_are_refused() {
    let scratch = Scratch::new("links");
    let inner = Scratch(scratch.path("model"));
    std::fs::create_dir_all(&inner.0).unwrap();
    let outside = scratch.write("w.bin", &fc1_bytes());
    std::os::unix::fs::symlink(&outside, inner.path("w.bin")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", inner.path("zero.bin")).unwrap();
    // A directory link: the file's own name is plain, its directory is not inside.
    std::os::unix::fs::symlink(&scratch.0, inner.path("up")).unwrap();

    let (problem, message) = inner.refusal(&fc1_with(&[("location", "w.bin")]), FC1);
    assert!(
        matches!(problem, ExternalDataError::Outside { .. }),
        "{message}"
    );
    assert_eq!(
        message,
        format!(
            "initializer \"fc1.weight\": its external data location \"w.bin\" resolves to {}, \
             outside the model's directory {}",
            outside.display(),
            inner.0.display()
        )
    );
    let (problem, message) = inner.refusal(&fc1_with(&[("location", "zero.bin")]), FC1);
    assert!(
        message.contains("resolves to /dev/zero, outside the model's directory"),
        "{message}"
    );
    assert!(matches!(problem, ExternalDataError::Outside { .. }));
    let (problem, _) = inner.refusal(&fc1_with(&[("location", "up/w.bin")]), FC1);
    assert!(matches!(problem, ExternalDataError::Outside { .. }));
}

#[test]
fn a_directory_or_a_missing_file_is_refused() {
    let scratch = Scratch::new("kinds");
    std::fs::create_dir_all(scratch.path("weights")).unwrap();
    let (problem, message) = scratch.refusal(&fc1_with(&[("location", "weights")]), FC1);
    assert!(
        matches!(problem, ExternalDataError::NotAFile { .. }),
        "{message}"
    );
    assert_eq!(
        message,
        "initializer \"fc1.weight\": its external data location \"weights\" is a directory, not \
         a regular file"
    );
    let (problem, message) = scratch.refusal(&fc1_with(&[("location", "missing.bin")]), FC1);
    let ExternalDataError::Io { source, .. } = &problem else {
        panic!("{message}");
    };
    assert_eq!(source.kind(), std::io::ErrorKind::NotFound, "{message}");
    assert!(
        message.starts_with(&format!(
            "initializer \"fc1.weight\": its external data file \"missing.bin\" cannot be read \
             ({}): ",
            scratch.path("missing.bin").display()
        )),
        "{message}"
    );
}

/// A FIFO is refused from its type, without being opened (which would wait for a writer).
#[cfg(unix)]
#[test]
fn a_fifo_is_refused_without_waiting() {
    let scratch = Scratch::new("fifo");
    let status = std::process::Command::new("mkfifo")
        .arg(scratch.path("w.bin"))
        .status()
        .unwrap();
    assert!(status.success());
    let (problem, message) = scratch.refusal(&fc1_with(&[("location", "w.bin")]), FC1);
    assert!(
        matches!(problem, ExternalDataError::NotAFile { .. }),
        "{message}"
    );
    assert_eq!(
        message,
        "initializer \"fc1.weight\": its external data location \"w.bin\" is a device, FIFO or \
         socket, not a regular file"
    );
}

#[test]
fn ranges_must_lie_in_the_file_and_match_the_shape() {
    let scratch = Scratch::new("ranges");
    scratch.write("w.bin", &fc1_bytes());
    let refusal = |pairs: &[(&str, &str)]| {
        let mut all = vec![("location", "w.bin")];
        all.extend_from_slice(pairs);
        scratch.refusal(&fc1_with(&all), FC1)
    };
    let (problem, message) = refusal(&[("offset", "49")]);
    assert!(
        matches!(problem, ExternalDataError::OffsetPastEnd { .. }),
        "{message}"
    );
    assert_eq!(
        message,
        "initializer \"fc1.weight\": its external data offset 49 is past the end of \"w.bin\", \
         which holds 48 bytes"
    );
    let (problem, message) = refusal(&[("offset", "8"), ("length", "48")]);
    assert!(
        matches!(problem, ExternalDataError::LengthPastEnd { .. }),
        "{message}"
    );
    assert_eq!(
        message,
        "initializer \"fc1.weight\": its external data, 48 bytes from offset 8, runs past the end \
         of \"w.bin\", which holds 48 bytes"
    );
    let (problem, message) = refusal(&[("length", "40")]);
    assert!(
        matches!(problem, ExternalDataError::LengthMismatch { .. }),
        "{message}"
    );
    assert_eq!(
        message,
        "initializer \"fc1.weight\": its external data length 40 disagrees with its shape [3, 4]: \
         12 float32 elements take 48 bytes"
    );
    let (_, message) = refusal(&[("offset", "8")]);
    assert_eq!(
        message,
        "initializer \"fc1.weight\": its external data length 40 (from its offset to the end of \
         the file) disagrees with its shape [3, 4]: 12 float32 elements take 48 bytes"
    );
    let (problem, message) = refusal(&[("offset", "1"), ("length", "18446744073709551615")]);
    assert!(
        matches!(problem, ExternalDataError::Overflow { .. }),
        "{message}"
    );
    assert_eq!(
        message,
        "initializer \"fc1.weight\": its external data offset 1 + length 18446744073709551615 \
         overflows 64 bits"
    );
    // An offset past the end with a length that fits the shape: past the end, not read.
    let (problem, _) = refusal(&[("offset", "18446744073709551000"), ("length", "48")]);
    assert!(matches!(problem, ExternalDataError::OffsetPastEnd { .. }));
}

/// A shape past the element limit is refused from the shape, before the file (of that many
/// bytes, sparse) is opened; a length past it disagrees with any shape the reader accepts.
#[test]
fn lengths_past_the_limits_are_refused_before_reading() {
    let scratch = Scratch::new("limits");
    let elements = cvm_onnx::limits::MAX_TENSOR_ELEMENTS + 1;
    let file = std::fs::File::create(scratch.path("huge.bin")).unwrap();
    file.set_len(elements * 4).unwrap();
    let huge = (elements * 4).to_string();
    let mut model = fc1_with(&[("location", "huge.bin"), ("length", &huge)]);
    model.graph.as_mut().unwrap().initializer[0].dims = vec![elements as i64];
    let error = scratch.read(&model).unwrap_err();
    assert!(matches!(error, OnnxError::Shape { .. }), "{error}");
    assert_eq!(
        error.to_string(),
        "initializer \"fc1.weight\": shape [67108865] has more than the 67108864 elements the \
         engine allows in a tensor"
    );
    let (problem, message) = scratch.refusal(&fc1_with(&[("location", "huge.bin")]), FC1);
    assert!(
        matches!(problem, ExternalDataError::LengthMismatch { .. }),
        "{message}"
    );
    let (problem, _) = scratch.refusal(
        &fc1_with(&[("location", "huge.bin"), ("length", &huge)]),
        FC1,
    );
    assert!(matches!(problem, ExternalDataError::LengthMismatch { .. }));
}

#[test]
fn entries_must_be_known_once_and_numbers() {
    let scratch = Scratch::new("entries");
    scratch.write("w.bin", &fc1_bytes());
    let (problem, message) =
        scratch.refusal(&fc1_with(&[("location", "w.bin"), ("basepath", "/")]), FC1);
    assert!(
        matches!(problem, ExternalDataError::UnknownKey { .. }),
        "{message}"
    );
    assert_eq!(
        message,
        "initializer \"fc1.weight\": its external_data has the key \"basepath\", which is not one \
         of location, offset, length and checksum"
    );
    let (problem, message) =
        scratch.refusal(&fc1_with(&[("location", "w.bin"), ("offset", "-8")]), FC1);
    assert!(
        matches!(problem, ExternalDataError::BadNumber { .. }),
        "{message}"
    );
    assert_eq!(
        message,
        "initializer \"fc1.weight\": its external_data offset \"-8\" is not a byte count \
         (decimal digits, at most 18446744073709551615)"
    );
    let (problem, message) = scratch.refusal(&fc1_with(&[("offset", "0")]), FC1);
    assert!(
        matches!(problem, ExternalDataError::MissingLocation),
        "{message}"
    );
    assert_eq!(
        message,
        "initializer \"fc1.weight\": its external_data has no location, the file that holds its \
         data"
    );
    let (problem, _) = scratch.refusal(
        &fc1_with(&[("location", "w.bin"), ("length", "48"), ("length", "48")]),
        FC1,
    );
    assert!(matches!(
        problem,
        ExternalDataError::RepeatedKey { key: "length" }
    ));
    // Data both in the file and inline, and entries on a tensor not marked external.
    let mut both = fc1_with(&[("location", "w.bin")]);
    both.graph.as_mut().unwrap().initializer[0].raw_data = Some(fc1_bytes());
    let (problem, message) = scratch.refusal(&both, FC1);
    assert!(
        matches!(problem, ExternalDataError::AlsoInline { field: "raw_data" }),
        "{message}"
    );
    let mut unmarked = fc1_with(&[("location", "w.bin")]);
    unmarked.graph.as_mut().unwrap().initializer[0].data_location = None;
    let (problem, message) = scratch.refusal(&unmarked, FC1);
    assert!(
        matches!(problem, ExternalDataError::NotMarkedExternal),
        "{message}"
    );
}

/// A `Constant`'s tensor attribute is read, and refused, like an initializer.
#[test]
fn a_constant_attribute_is_checked_like_an_initializer() {
    let scratch = Scratch::new("constant");
    let mut model = mlp_model();
    let value = model.graph.as_mut().unwrap().node[3].attribute[0]
        .t
        .as_mut()
        .unwrap();
    value.raw_data = None;
    value.data_location = Some(1);
    value.external_data = entries(&[("location", "../shape.bin")]);
    let (problem, message) =
        scratch.refusal(&model, "node 3 \"shape\" (Constant), attribute \"value\"");
    assert!(
        matches!(problem, ExternalDataError::LocationComponent { .. }),
        "{message}"
    );
}

/// Seeds of the fuzz target `onnx_read_file`, which writes each input as `model.onnx` beside
/// a `model.onnx.data` of 4096 bytes (and `weights/model.onnx.data`, `link.data`): models
/// whose tensors are ranges of it, checked to read here. With `CVM_WRITE_FUZZ_CORPUS=<dir>`
/// they are written to `<dir>/onnx_read_file/` (`scripts/fuzz.sh`).
#[test]
fn seeds_of_the_read_file_fuzz_target_read() {
    const FUZZ_DATA_BYTES: usize = 4096;
    let scratch = Scratch::new("fuzz-seeds");
    scratch.write("model.onnx.data", &[0; FUZZ_DATA_BYTES]);
    scratch.write("weights/model.onnx.data", &[0; FUZZ_DATA_BYTES]);
    let mut seeds = Vec::new();
    for location in ["model.onnx.data", "weights/model.onnx.data"] {
        for model in [mlp_model(), conv_net()] {
            let (model, data) = moved_out_all(&model, location);
            assert!(data.len() <= FUZZ_DATA_BYTES);
            scratch.read(&model).unwrap();
            seeds.push(encode(&model));
        }
    }
    if let Some(dir) = std::env::var_os("CVM_WRITE_FUZZ_CORPUS") {
        let dir = PathBuf::from(dir).join("onnx_read_file");
        std::fs::create_dir_all(&dir).unwrap();
        for (index, seed) in seeds.iter().enumerate() {
            std::fs::write(dir.join(format!("external-{index}")), seed).unwrap();
        }
    }
}
