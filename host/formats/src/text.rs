//! The text model format (`cvm-text/1`): hand-writable JSON, converted to the canonical model.
//!
//! The conversion is syntactic: names become references, attribute JSON values become typed
//! attribute values (using the operator's schema to tell a list from a single integer), and
//! parameter data is read inline or from `.npy` files. Everything semantic (arity, ranges,
//! shapes, precision) is left to engine validation, so a text model and its canonical bytes are
//! rejected for the same reasons. See `docs/model-format.md`.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use cvm_engine::attrs::AttrKind;
use cvm_engine::model::{
    Attr, AttrValue, InputDecl, Model, Node, OutputDecl, ParamData, ParamDecl, ValueRef,
};
use cvm_engine::ops;
use serde_json::{Map, Value};

use crate::error::{FileLimit, ReadError, excerpt, quote, read_file};
use crate::npy;

/// The value of the `format` field this version reads.
pub const TEXT_FORMAT: &str = "cvm-text/1";

/// Parses a text model. `base_dir` resolves `"file"` parameters; `origin` names the model in
/// messages.
///
/// # Errors
/// [`ReadError::TextModel`] naming the node (or input, parameter) and field; I/O errors of
/// parameter files.
pub fn parse_text_model(text: &str, base_dir: &Path, origin: &str) -> Result<Model, ReadError> {
    if let Some(offset) = past_json_value_limit(text.as_bytes()) {
        return Err(ReadError::TextModel {
            path: origin.to_string(),
            message: format!(
                "more than {MAX_JSON_VALUES} JSON values (the limit is passed at byte {offset}); \
                 a text model keeps large tensors in .npy files (a parameter's \"file\")"
            ),
        });
    }
    let value: Value = serde_json::from_str(text).map_err(|err| ReadError::TextModel {
        path: origin.to_string(),
        message: format!("not valid JSON: {err}"),
    })?;
    from_json(&value, base_dir).map_err(|message| ReadError::TextModel {
        path: origin.to_string(),
        message,
    })
}

/// Most JSON values a text model may hold, counted as its structural characters (`[`, `{`, `,`
/// and `:` outside strings), a little above the count of its values: 2^22. A parsed value takes
/// about 50 to 100 bytes where its text may take 2, so the bound keeps the parsed tree under
/// about 0.5 GB; parameters larger than a few million values belong in `.npy` files, which are
/// read at 4 bytes a value.
pub const MAX_JSON_VALUES: usize = 1 << 22;

/// The byte offset at which `text` passes [`MAX_JSON_VALUES`] structural characters, if it does:
/// one pass over the bytes, nothing built.
fn past_json_value_limit(text: &[u8]) -> Option<usize> {
    let mut count = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for (offset, &byte) in text.iter().enumerate() {
        if in_string {
            match (escaped, byte) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
        } else if byte == b'"' {
            in_string = true;
        } else if matches!(byte, b'[' | b'{' | b',' | b':') {
            count += 1;
            if count > MAX_JSON_VALUES {
                return Some(offset);
            }
        }
    }
    None
}

/// Converts an already parsed text model.
///
/// # Errors
/// A message naming the offending element and field.
pub fn from_json(value: &Value, base_dir: &Path) -> Result<Model, String> {
    let top = object(value, "the model")?;
    check_keys(
        top,
        &["format", "inputs", "params", "nodes", "outputs"],
        "the model",
    )?;
    match top.get("format") {
        Some(Value::String(format)) if format == TEXT_FORMAT => {}
        Some(other) => {
            return Err(format!(
                "field \"format\" must be \"{TEXT_FORMAT}\", found {}",
                excerpt(&other.to_string())
            ));
        }
        None => {
            return Err(format!(
                "field \"format\" is missing (expected \"{TEXT_FORMAT}\")"
            ));
        }
    }

    let mut references: HashMap<String, ValueRef> = HashMap::new();

    let mut inputs = Vec::new();
    for (index, entry) in list(top, "inputs", "the model")?.iter().enumerate() {
        let what = format!("inputs[{index}]");
        let fields = object(entry, &what)?;
        check_keys(fields, &["name", "shape", "precision"], &what)?;
        let name = string(fields, "name", &what)?;
        let what = format!("input {}", quote(&name));
        declare(&mut references, &name, ValueRef::Input(index as u32), &what)?;
        inputs.push(InputDecl {
            shape: shape(fields, "shape", &what)?,
            precision: precision(fields, &what)?,
            name,
        });
    }

    let mut params = Vec::new();
    // Values of every parameter so far, inline and from files, against PARAM_VALUES_LIMIT.
    let mut param_values: u64 = 0;
    for (index, entry) in optional_list(top, "params", "the model")?
        .iter()
        .enumerate()
    {
        let what = format!("params[{index}]");
        let fields = object(entry, &what)?;
        check_keys(
            fields,
            &["name", "shape", "precision", "data", "file"],
            &what,
        )?;
        let name = string(fields, "name", &what)?;
        let what = format!("parameter {}", quote(&name));
        declare(&mut references, &name, ValueRef::Param(index as u32), &what)?;
        let precision = precision(fields, &what)?;
        let (shape, values) = match (fields.get("data"), fields.get("file")) {
            (Some(data), None) => (
                shape(fields, "shape", &what)?,
                int32_list(data, &format!("{what}, field \"data\""))?,
            ),
            (None, Some(Value::String(file))) => {
                let path = base_dir.join(file);
                let array = read_param_file(&path, param_values)
                    .map_err(|err| format!("{what}, field \"file\": {err}"))?;
                if fields.contains_key("shape") {
                    let declared = shape(fields, "shape", &what)?;
                    if declared != array.shape {
                        return Err(format!(
                            "{what}: field \"shape\" {declared:?} differs from the shape {:?} of {}",
                            array.shape,
                            path.display()
                        ));
                    }
                }
                (array.shape, array.data)
            }
            (None, Some(_)) => {
                return Err(format!("{what}, field \"file\": must be a path string"));
            }
            (Some(_), Some(_)) => {
                return Err(format!(
                    "{what}: give either \"data\" or \"file\", not both"
                ));
            }
            (None, None) => return Err(format!("{what}: field \"data\" (or \"file\") is missing")),
        };
        param_values = param_values.saturating_add(values.len() as u64);
        if param_values > PARAM_VALUES_LIMIT {
            return Err(format!("{what}: {}", param_values_refusal(param_values)));
        }
        params.push(ParamDecl {
            name,
            shape,
            precision,
            data: ParamData::narrowest(values),
        });
    }

    let node_entries = list(top, "nodes", "the model")?;
    let mut nodes = Vec::with_capacity(node_entries.len());
    for (index, entry) in node_entries.iter().enumerate() {
        let what = format!("nodes[{index}]");
        let fields = object(entry, &what)?;
        check_keys(fields, &["name", "op", "inputs", "attrs"], &what)?;
        let name = string(fields, "name", &what)?;
        let what = format!("node {}", quote(&name));
        let op_name = string(fields, "op", &what)?;
        let op = ops::by_name(&op_name)
            .ok_or_else(|| format!("{what}, field \"op\": unknown operator {}", quote(&op_name)))?;
        let mut node_inputs = Vec::new();
        for (position, reference) in list(fields, "inputs", &what)?.iter().enumerate() {
            let Value::String(reference) = reference else {
                return Err(format!(
                    "{what}, field \"inputs\"[{position}]: must be a name string"
                ));
            };
            node_inputs.push(resolve(&references, reference).ok_or_else(|| {
                format!("{what}, field \"inputs\"[{position}]: {} names no input, parameter or earlier node", quote(reference))
            })?);
        }
        let mut attrs = Vec::new();
        if let Some(attr_value) = fields.get("attrs") {
            let attr_fields = object(attr_value, &format!("{what}, field \"attrs\""))?;
            // BTreeMap orders by name, which is the canonical attribute order.
            let sorted: BTreeMap<&String, &Value> = attr_fields.iter().collect();
            // Fixed-point attributes are converted with the node's own F. An F outside 0..=30 is
            // left for validation to reject, unless a conversion needs it.
            let frac_bits = attr_fields.get("frac_bits").map_or(Some(0), |value| {
                value
                    .as_u64()
                    .and_then(|f| u32::try_from(f).ok())
                    .filter(|&f| f <= 30)
            });
            for (attr_name, json) in sorted {
                let expected = op
                    .attrs
                    .iter()
                    .find(|spec| spec.name == attr_name)
                    .map(|spec| spec.kind);
                if expected == Some(AttrKind::Fixed) && frac_bits.is_none() {
                    return Err(format!(
                        "{what}, attribute {}: converting it needs \"frac_bits\" in 0..=30",
                        quote(attr_name)
                    ));
                }
                let value = attr_value_from_json(json, expected, frac_bits.unwrap_or(0))
                    .map_err(|err| format!("{what}, attribute {}: {err}", quote(attr_name)))?;
                attrs.push(Attr {
                    name: attr_name.clone(),
                    value,
                });
            }
        }
        for output in 0..op.outputs {
            let value = ValueRef::Node {
                node: index as u32,
                output,
            };
            if output == 0 {
                declare(&mut references, &name, value, &what)?;
            }
            references.insert(format!("{name}:{output}"), value);
        }
        nodes.push(Node {
            name,
            op: op.code,
            inputs: node_inputs,
            attrs,
        });
    }

    let mut outputs = Vec::new();
    for (position, entry) in list(top, "outputs", "the model")?.iter().enumerate() {
        let Value::String(reference) = entry else {
            return Err(format!("outputs[{position}]: must be a name string"));
        };
        let value = resolve(&references, reference).ok_or_else(|| {
            format!(
                "outputs[{position}]: {} names no input, parameter or node",
                quote(reference)
            )
        })?;
        outputs.push(OutputDecl {
            name: reference.clone(),
            value,
        });
    }
    Ok(Model {
        inputs,
        params,
        nodes,
        outputs,
    })
}

/// Registers a referable name.
fn declare(
    references: &mut HashMap<String, ValueRef>,
    name: &str,
    value: ValueRef,
    what: &str,
) -> Result<(), String> {
    if references.insert(name.to_string(), value).is_some() {
        return Err(format!("{what}: the name is already used"));
    }
    Ok(())
}

/// Resolves `name` or `name:k` to a value.
fn resolve(references: &HashMap<String, ValueRef>, reference: &str) -> Option<ValueRef> {
    references.get(reference).copied()
}

/// Converts an attribute's JSON value. `expected` is the schema kind when the operator knows the
/// attribute; unknown attributes are typed by their JSON form and rejected by validation.
/// `frac_bits` is the node's F, used for fixed-point attributes.
///
/// # Errors
/// A message for values no attribute kind can hold (non-integer numbers where an integer is
/// expected, nested lists, null), or a fixed-point value outside int32.
pub fn attr_value_from_json(
    json: &Value,
    expected: Option<AttrKind>,
    frac_bits: u32,
) -> Result<AttrValue, String> {
    match json {
        Value::Bool(flag) => Ok(AttrValue::Bool(*flag)),
        Value::Number(number) if expected == Some(AttrKind::Fixed) => {
            fixed_from_decimal(&number.to_string(), frac_bits).map(AttrValue::Int)
        }
        Value::Number(_) => {
            let value = integer(json)?;
            Ok(if expected == Some(AttrKind::Ints) {
                AttrValue::Ints(vec![value])
            } else {
                AttrValue::Int(value)
            })
        }
        Value::Array(items) => items
            .iter()
            .map(integer)
            .collect::<Result<Vec<_>, _>>()
            .map(AttrValue::Ints),
        Value::String(text) => Ok(AttrValue::Str(text.clone())),
        Value::Null => {
            Err("null is not an attribute value; leave the attribute out for its default".into())
        }
        Value::Object(_) => Err("an object is not an attribute value".into()),
    }
}

/// The Q(`frac_bits`) integer nearest to the decimal number `text` (ties away from zero),
/// computed exactly from its digits: `-1.5e-3`, `0.1`, `42`.
///
/// # Errors
/// When `text` is not a decimal number or the result does not fit int32.
pub fn fixed_from_decimal(text: &str, frac_bits: u32) -> Result<i64, String> {
    let invalid = || format!("{} is not a decimal number", quote(text));
    let (negative, body) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (mantissa_text, exponent) = match body.split_once(['e', 'E']) {
        Some((mantissa, exponent)) => (mantissa, exponent.parse::<i32>().map_err(|_| invalid())?),
        None => (body, 0),
    };
    let (whole, fraction) = mantissa_text.split_once('.').unwrap_or((mantissa_text, ""));
    let all_digits = whole
        .chars()
        .chain(fraction.chars())
        .all(|c| c.is_ascii_digit());
    if (whole.is_empty() && fraction.is_empty()) || !all_digits {
        return Err(invalid());
    }
    let digits: String = whole.chars().chain(fraction.chars()).collect();
    let digits = digits.trim_start_matches('0');
    let too_large = || format!("{} does not fit int32 in Q({frac_bits})", quote(text));
    if digits.len() > 30 {
        return Err(too_large());
    }
    let mantissa: u128 = if digits.is_empty() {
        0
    } else {
        digits.parse().map_err(|_| invalid())?
    };
    let exponent = exponent.saturating_sub(fraction.len() as i32);
    // value = mantissa · 10^exponent · 2^F, rounded once.
    let scaled = mantissa
        .checked_mul(1u128 << frac_bits)
        .ok_or_else(too_large)?;
    let magnitude = if exponent >= 0 {
        10u128
            .checked_pow(exponent.unsigned_abs())
            .and_then(|p| scaled.checked_mul(p))
            .ok_or_else(too_large)?
    } else {
        match 10u128.checked_pow(exponent.unsigned_abs()) {
            // Half away from zero on the magnitude: ⌈⌊2s/d⌋ / 2⌉.
            Some(denominator) => (2 * scaled / denominator).div_ceil(2),
            None => 0, // below 10^−38 · 2^30: rounds to 0
        }
    };
    let value = i64::try_from(magnitude)
        .ok()
        .filter(|&m| m <= i64::from(i32::MAX))
        .ok_or_else(too_large)?;
    Ok(if negative { -value } else { value })
}

fn integer(json: &Value) -> Result<i64, String> {
    json.as_i64().ok_or_else(|| {
        format!(
            "{} is not an integer in the 64-bit range",
            excerpt(&json.to_string())
        )
    })
}

fn object<'a>(value: &'a Value, what: &str) -> Result<&'a Map<String, Value>, String> {
    value
        .as_object()
        .ok_or_else(|| format!("{what} must be a JSON object"))
}

fn check_keys(fields: &Map<String, Value>, allowed: &[&str], what: &str) -> Result<(), String> {
    match fields.keys().find(|key| !allowed.contains(&key.as_str())) {
        Some(key) => Err(format!(
            "{what}: unknown field {} (allowed: {})",
            quote(key),
            allowed.join(", ")
        )),
        None => Ok(()),
    }
}

fn list<'a>(
    fields: &'a Map<String, Value>,
    key: &str,
    what: &str,
) -> Result<&'a Vec<Value>, String> {
    match fields.get(key) {
        Some(Value::Array(items)) => Ok(items),
        Some(_) => Err(format!("{what}, field \"{key}\": must be a list")),
        None => Err(format!("{what}: field \"{key}\" is missing")),
    }
}

fn optional_list<'a>(
    fields: &'a Map<String, Value>,
    key: &str,
    what: &str,
) -> Result<&'a [Value], String> {
    match fields.get(key) {
        None => Ok(&[]),
        Some(_) => list(fields, key, what).map(Vec::as_slice),
    }
}

fn string(fields: &Map<String, Value>, key: &str, what: &str) -> Result<String, String> {
    match fields.get(key) {
        Some(Value::String(text)) => Ok(text.clone()),
        Some(_) => Err(format!("{what}, field \"{key}\": must be a string")),
        None => Err(format!("{what}: field \"{key}\" is missing")),
    }
}

fn shape(fields: &Map<String, Value>, key: &str, what: &str) -> Result<Vec<u32>, String> {
    list(fields, key, what)?
        .iter()
        .map(|dim| {
            dim.as_u64()
                .and_then(|d| u32::try_from(d).ok())
                .ok_or_else(|| {
                    format!(
                        "{what}, field \"{key}\": {} is not a dimension (0..=4294967295)",
                        excerpt(&dim.to_string())
                    )
                })
        })
        .collect()
}

fn precision(fields: &Map<String, Value>, what: &str) -> Result<u8, String> {
    match fields.get("precision") {
        Some(value) => value
            .as_u64()
            .and_then(|p| u8::try_from(p).ok())
            .ok_or_else(|| {
                format!("{what}, field \"precision\": {} is not a small non-negative integer (validation requires 1..=32)", excerpt(&value.to_string()))
            }),
        None => Err(format!("{what}: field \"precision\" is missing")),
    }
}

/// A JSON list of int32 values.
///
/// # Errors
/// A message naming the first value that is not an int32.
pub fn int32_list(value: &Value, what: &str) -> Result<Vec<i32>, String> {
    let Value::Array(items) = value else {
        return Err(format!("{what}: must be a list of integers"));
    };
    items
        .iter()
        .enumerate()
        .map(|(index, item)| {
            item.as_i64()
                .and_then(|v| i32::try_from(v).ok())
                .ok_or_else(|| format!("{what}: element {index} ({item}) is not an int32"))
        })
        .collect()
}

/// Reads an `.npy` file of integers.
///
/// # Errors
/// A message naming the file and the problem.
pub fn read_npy_file(path: &Path) -> Result<npy::NpyArray, String> {
    decode_npy(path, &read_npy_bytes(path)?)
}

/// The bytes of an `.npy` file, at most a tensor file's limit.
fn read_npy_bytes(path: &Path) -> Result<Vec<u8>, String> {
    read_file(path, FileLimit::TENSOR).map_err(|err| match err {
        ReadError::Io { source, .. } => format!("cannot read {}: {source}", path.display()),
        other => other.to_string(),
    })
}

/// Decodes the bytes of the `.npy` file at `path` (named in the message).
///
/// # Errors
/// A message naming the file and the problem.
pub fn decode_npy(path: &Path, bytes: &[u8]) -> Result<npy::NpyArray, String> {
    npy::read_npy(bytes).map_err(|err| format!("{}: {err}", path.display()))
}

/// Most values a text model's parameters may hold in all, inline and from files: 2^28, the
/// int32 values that fit in the most memory a model may plan for
/// (`cvm_engine::limits::MAX_PEAK_MEMORY_BYTES`, which counts the parameters). Checked before a
/// parameter file's values are decoded, so that a model naming one large file many times is
/// refused in bounded memory.
pub const PARAM_VALUES_LIMIT: u64 = cvm_engine::limits::MAX_PEAK_MEMORY_BYTES / 4;

fn param_values_refusal(values: u64) -> String {
    format!(
        "the parameters hold {values} values so far, more than the {PARAM_VALUES_LIMIT} a \
         model may hold in all (int32 values within the 1 GiB a model may plan for)"
    )
}

/// A parameter's `.npy` file, refused before its values are decoded when it holds more values
/// than one tensor may (`cvm_engine::limits::MAX_TENSOR_ELEMENTS`) or than the parameters
/// before it (`values_before`) leave of [`PARAM_VALUES_LIMIT`].
fn read_param_file(path: &Path, values_before: u64) -> Result<npy::NpyArray, String> {
    let bytes = read_npy_bytes(path)?;
    let declared =
        npy::element_count(&bytes).map_err(|err| format!("{}: {err}", path.display()))?;
    let tensor_limit = cvm_engine::limits::MAX_TENSOR_ELEMENTS;
    if declared > tensor_limit {
        return Err(format!(
            "{} holds {declared} values, more than the {tensor_limit} one tensor may hold",
            path.display()
        ));
    }
    let total = values_before.saturating_add(declared);
    if total > PARAM_VALUES_LIMIT {
        return Err(format!(
            "{}: {}",
            path.display(),
            param_values_refusal(total)
        ));
    }
    decode_npy(path, &bytes)
}

/// The directory relative file references of a model at `path` resolve against.
pub fn base_dir_of(path: &Path) -> PathBuf {
    path.parent().map(Path::to_path_buf).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(value: Value) -> Result<Model, String> {
        from_json(&value, Path::new("."))
    }

    /// A scratch directory of this test process.
    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("cvm-text-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn json_values_are_counted_outside_strings_and_refused_past_the_limit() {
        // Structural characters inside strings (escaped quotes included) do not count.
        let quoted = format!("{{\"a\": \"{}\\\",[\"}}", "[,:{".repeat(MAX_JSON_VALUES));
        assert_eq!(past_json_value_limit(quoted.as_bytes()), None);
        let at_limit = format!("[{}0]", "0,".repeat(MAX_JSON_VALUES - 1));
        assert_eq!(past_json_value_limit(at_limit.as_bytes()), None);
        let past = format!("[{}0]", "0,".repeat(MAX_JSON_VALUES));
        assert_eq!(
            past_json_value_limit(past.as_bytes()),
            Some(2 * MAX_JSON_VALUES)
        );
        let err = parse_text_model(&past, Path::new("."), "big.json").unwrap_err();
        assert!(
            err.to_string().contains("more than 4194304 JSON values"),
            "{err}"
        );
    }

    #[test]
    fn parameter_files_are_refused_past_the_limits_before_their_values_are_decoded() {
        let dir = scratch("limits");
        // A header declaring one value more than a tensor may hold, and no data: refused on
        // the declared count, not on the missing data.
        let mut header = npy::write_npy(&npy::NpyArray {
            shape: vec![1],
            data: vec![0],
        });
        let at = header.windows(4).position(|w| w == b"(1,)").unwrap();
        let declared = format!("({},)", cvm_engine::limits::MAX_TENSOR_ELEMENTS + 1);
        header.splice(at..at + 4, declared.bytes());
        // Keep the header's length: take as many of its padding spaces as were added.
        let added = declared.len() - 4;
        let end = header.iter().rposition(|&byte| byte == b'\n').unwrap();
        header.drain(end - added..end);
        header.truncate(end - added + 1);
        let huge = dir.join("huge.npy");
        std::fs::write(&huge, &header).unwrap();
        let err = read_param_file(&huge, 0).unwrap_err();
        assert!(
            err.contains("holds 67108865 values, more than the 67108864"),
            "{err}"
        );
        let model = json!({
            "format": "cvm-text/1",
            "inputs": [{"name": "x", "shape": [1], "precision": 8}],
            "params": [{"name": "p", "precision": 8, "file": "huge.npy"}],
            "nodes": [],
            "outputs": ["x"]
        });
        let err = from_json(&model, &dir).unwrap_err();
        assert!(err.starts_with("parameter \"p\", field \"file\":"), "{err}");

        // Ten values fit in what ten values leave of the total; eleven do not.
        let ten = dir.join("ten.npy");
        std::fs::write(
            &ten,
            npy::write_npy(&npy::NpyArray {
                shape: vec![10],
                data: vec![3; 10],
            }),
        )
        .unwrap();
        assert_eq!(
            read_param_file(&ten, PARAM_VALUES_LIMIT - 10)
                .unwrap()
                .data
                .len(),
            10
        );
        let err = read_param_file(&ten, PARAM_VALUES_LIMIT - 9).unwrap_err();
        assert!(
            err.contains("more than the 268435456 a model may hold in all"),
            "{err}"
        );
    }

    fn example() -> Value {
        json!({
            "format": "cvm-text/1",
            "inputs": [{"name": "data", "shape": [1, 4], "precision": 8}],
            "params": [{"name": "w", "shape": [3, 4], "precision": 8, "data": [1,0,3,1, 5,-6,7,8, 12,-1,10,-1]}],
            "nodes": [
                {"name": "d", "op": "dense", "inputs": ["data", "w"], "attrs": {"units": 3, "use_bias": false}},
                {"name": "y", "op": "cvm_right_shift", "inputs": ["d"], "attrs": {"shift_bit": 2, "precision": 8}}
            ],
            "outputs": ["y"]
        })
    }

    #[test]
    fn converts_the_documented_example() {
        let model = parse(example());
        let Ok(model) = model else {
            panic!("{model:?}")
        };
        assert_eq!(model.nodes.len(), 2);
        assert_eq!(
            model.nodes[0].inputs,
            [ValueRef::Input(0), ValueRef::Param(0)]
        );
        // Attributes come out sorted by name.
        let names: Vec<&str> = model.nodes[1]
            .attrs
            .iter()
            .map(|a| a.name.as_str())
            .collect();
        assert_eq!(names, ["precision", "shift_bit"]);
        assert_eq!(
            model.params[0].data,
            ParamData::I8(vec![1, 0, 3, 1, 5, -6, 7, 8, 12, -1, 10, -1])
        );
        assert_eq!(
            model.outputs[0].value,
            ValueRef::Node { node: 1, output: 0 }
        );
    }

    fn error_of(mutate: impl FnOnce(&mut Value)) -> String {
        let mut value = example();
        mutate(&mut value);
        match parse(value) {
            Ok(_) => String::from("<accepted>"),
            Err(message) => message,
        }
    }

    /// A change to the example model and a fragment of the error it must produce.
    type Mutation = (Box<dyn FnOnce(&mut Value)>, &'static str);

    #[test]
    fn errors_name_the_node_and_field() {
        let cases: Vec<Mutation> = vec![
            (
                Box::new(|v| v["nodes"][0]["op"] = json!("densse")),
                "node \"d\", field \"op\": unknown operator \"densse\"",
            ),
            (
                Box::new(|v| v["nodes"][1]["inputs"] = json!(["nope"])),
                "node \"y\", field \"inputs\"[0]: \"nope\"",
            ),
            (
                Box::new(|v| v["nodes"][0]["attrs"]["units"] = json!(1.5)),
                "node \"d\", attribute \"units\": 1.5 is not an integer",
            ),
            (
                Box::new(|v| v["format"] = json!("cvm-text/9")),
                "field \"format\" must be",
            ),
            (
                Box::new(|v| v["nodes"][0]["extra"] = json!(1)),
                "nodes[0]: unknown field \"extra\"",
            ),
            (
                Box::new(|v| v["params"][0]["data"][2] = json!(3_000_000_000i64)),
                "parameter \"w\", field \"data\": element 2",
            ),
            (
                Box::new(|v| v["inputs"][0]["shape"] = json!([1, -4])),
                "input \"data\", field \"shape\": -4 is not a dimension",
            ),
            (
                Box::new(|v| v["outputs"] = json!(["d:1"])),
                "outputs[0]: \"d:1\"",
            ),
            (
                Box::new(|v| v["nodes"][1]["name"] = json!("d")),
                "node \"d\": the name is already used",
            ),
            (
                Box::new(|v| v["nodes"][0]["inputs"] = json!(["y", "w"])),
                "node \"d\", field \"inputs\"[0]: \"y\" names no input",
            ),
        ];
        for (mutate, expected) in cases {
            let message = error_of(mutate);
            assert!(
                message.contains(expected),
                "{message:?} should contain {expected:?}"
            );
        }
    }

    #[test]
    fn single_integer_for_a_list_attribute_is_a_one_element_list() {
        assert_eq!(
            attr_value_from_json(&json!(2), Some(AttrKind::Ints), 0),
            Ok(AttrValue::Ints(vec![2]))
        );
        assert_eq!(
            attr_value_from_json(&json!(2), Some(AttrKind::Int), 0),
            Ok(AttrValue::Int(2))
        );
        assert_eq!(
            attr_value_from_json(&json!(2), None, 0),
            Ok(AttrValue::Int(2))
        );
        assert!(attr_value_from_json(&json!(null), None, 0).is_err());
        assert!(attr_value_from_json(&json!([[1]]), None, 0).is_err());
    }

    #[test]
    fn parameters_may_come_from_npy_files_next_to_the_model() {
        let dir = std::env::temp_dir().join(format!("cvm-text-file-param-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let weights = npy::NpyArray {
            shape: vec![3, 4],
            data: vec![1, 0, 3, 1, 5, -6, 7, 8, 12, -1, 10, -1],
        };
        std::fs::write(dir.join("w.npy"), npy::write_npy(&weights)).unwrap();
        let mut value = example();
        value["params"][0] = json!({"name": "w", "precision": 8, "file": "w.npy"});
        let model = from_json(&value, &dir).unwrap();
        let Ok(inline) = parse(example()) else {
            panic!("example rejected")
        };
        assert_eq!(
            model, inline,
            "a file parameter equals the same values written inline"
        );

        value["params"][0]["shape"] = json!([4, 3]);
        let message = from_json(&value, &dir).err().unwrap_or_default();
        assert!(
            message.contains("parameter \"w\": field \"shape\" [4, 3] differs"),
            "{message}"
        );
        value["params"][0] = json!({"name": "w", "precision": 8, "file": "missing.npy"});
        let message = from_json(&value, &dir).err().unwrap_or_default();
        assert!(
            message.contains("parameter \"w\", field \"file\": cannot read"),
            "{message}"
        );
    }

    #[test]
    fn fixed_point_values_are_converted_exactly() {
        let fixed = |text: &str, f: u32| fixed_from_decimal(text, f);
        assert_eq!(fixed("2", 8), Ok(512));
        assert_eq!(fixed("0.5", 1), Ok(1));
        assert_eq!(fixed("0.1", 16), Ok(6554)); // 6553.6 → 6554
        assert_eq!(fixed("-0.1", 16), Ok(-6554));
        assert_eq!(fixed("0.25", 1), Ok(1)); // 0.5 ulp: away from zero
        assert_eq!(fixed("-0.25", 1), Ok(-1));
        assert_eq!(fixed("1.5e-3", 20), Ok(1573)); // 1572.864
        assert_eq!(fixed("1e-40", 30), Ok(0));
        assert_eq!(fixed("2147483647", 0), Ok(2147483647));
        assert!(fixed("2147483648", 0).is_err());
        assert!(fixed("2", 30).is_err());
        assert!(fixed("abc", 0).is_err());
        assert!(fixed("1.2.3", 0).is_err());
        assert_eq!(
            attr_value_from_json(&json!(0.75), Some(AttrKind::Fixed), 4),
            Ok(AttrValue::Int(12))
        );
    }

    #[test]
    fn node_outputs_are_addressable_by_index() {
        let mut value = example();
        value["outputs"] = json!(["d:0", "y"]);
        let Ok(model) = parse(value) else {
            panic!("rejected")
        };
        assert_eq!(
            model.outputs[0].value,
            ValueRef::Node { node: 0, output: 0 }
        );
        assert_eq!(model.outputs[0].name, "d:0");
    }
}
