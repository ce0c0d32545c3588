//! The JSON the deployed loader reads (`include/utils/json.h` of the runtime): its reader is
//! more lenient than JSON in some places and stricter in others, and a CVM graph must load here
//! exactly when it loads there.
//!
//! - **Lenient.** End of input after at least one item closes an open object or list, so a
//!   file missing its final brackets loads; nothing after the top-level value is read. Numbers
//!   are read as C++ streams read them: a leading `+` and leading zeros are accepted.
//! - **Strict.** A string may hold the escapes `\"`, `\\`, `\n`, `\r`, `\t` only (no `\u`, `\/`,
//!   `\b`, `\f`), and no raw line break. Where a number is expected only an integer is read, so
//!   `8.5` or `1e3` fails when the reader meets the `.` or `e`.
//!
//! [`parse`] turns the text into a [`serde_json::Value`] for the structural checks of
//! `symbol.rs`. A token that is no integer (`8.5`, `true`, `null`, `0x10`) becomes
//! [`Value::Null`], which every typed read rejects, as the deployed reader rejects it wherever it
//! meets it (a number where a string belongs, a string where a number belongs). An integer
//! outside 64 bits becomes [`Value::Null`] too: no field of the graph is wider. Strings are
//! bytes there; [`from_bytes`] turns them into text one to one, so names compare as there.
//!
//! Every failure is a failed `CHECK` or `LOG(FATAL)` there: class 2 ([`super::Class::Runtime`]).

use serde_json::{Map, Number, Value};

/// Parses `text` as the deployed reader would read it; `Err` says where it fails.
///
/// # Errors
/// A message naming the byte offset and what the reader expected.
pub fn parse(text: &[u8]) -> Result<Value, String> {
    let mut reader = Reader {
        text,
        at: 0,
        values: 0,
    };
    reader.value(0)
}

/// Deepest nesting accepted. The deployed reader recurses without a bound; no graph nests
/// deeper than 5, and this bound keeps a crafted file from exhausting the stack here.
const MAX_DEPTH: usize = 64;

/// Most values (numbers, strings, lists, objects and other tokens, at any depth) accepted:
/// 2^22, 64 for each node of a graph at the engine's node limit (a graph describes a node in
/// about 20, plus four per input). A parsed value takes about 100 bytes where its text may
/// take 2 (`0,`), so without a bound a crafted graph of a few hundred megabytes would take
/// tens of gigabytes before any check; with it the tree stays under about 0.5 GB. The deployed
/// reader has no such bound; a graph past it fails as its failed `CHECK`s do.
pub const MAX_VALUES: usize = 1 << 22;

struct Reader<'a> {
    text: &'a [u8],
    at: usize,
    /// Values read so far, against [`MAX_VALUES`].
    values: usize,
}

/// `isspace` in the C locale.
pub(super) fn is_space(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r')
}

impl Reader<'_> {
    fn peek(&self) -> Option<u8> {
        self.text.get(self.at).copied()
    }

    fn peek_non_space(&mut self) -> Option<u8> {
        while let Some(byte) = self.peek() {
            if !is_space(byte) {
                return Some(byte);
            }
            self.at += 1;
        }
        None
    }

    fn next_non_space(&mut self) -> Option<u8> {
        let byte = self.peek_non_space();
        if byte.is_some() {
            self.at += 1;
        }
        byte
    }

    fn error(&self, message: &str) -> String {
        format!("at byte {}: {message}", self.at)
    }

    fn value(&mut self, depth: usize) -> Result<Value, String> {
        if depth > MAX_DEPTH {
            return Err(self.error(&format!("more than {MAX_DEPTH} levels of nesting")));
        }
        self.values += 1;
        if self.values > MAX_VALUES {
            return Err(self.error(&format!(
                "more than {MAX_VALUES} values (numbers, strings, lists and objects), more than \
                 a graph within the engine's limits holds"
            )));
        }
        match self.peek_non_space() {
            Some(b'{') => self.object(depth),
            Some(b'[') => self.list(depth),
            Some(b'"') => self.string().map(Value::String),
            Some(_) => self.scalar(),
            None => Err(self.error("expected a value, found the end of the input")),
        }
    }

    /// Whether another item follows in an object or list that already holds `items` items,
    /// consuming the separator or the closing bracket (`NextObjectItem`, `NextArrayItem`).
    fn more(&mut self, items: usize, close: u8) -> Result<bool, String> {
        if items == 0 {
            if self.peek_non_space() == Some(close) {
                self.at += 1;
                return Ok(false);
            }
            return Ok(true);
        }
        match self.next_non_space() {
            None => Ok(false),
            Some(byte) if byte == close => Ok(false),
            Some(b',') => Ok(true),
            Some(other) => Err(self.error(&format!(
                "expected ',' or '{}', found '{}'",
                char::from(close),
                other.escape_ascii()
            ))),
        }
    }

    fn object(&mut self, depth: usize) -> Result<Value, String> {
        self.at += 1;
        let mut map = Map::new();
        while self.more(map.len(), b'}')? {
            let key = self.string()?;
            if self.next_non_space() != Some(b':') {
                return Err(self.error(&format!("expected ':' after the key \"{key}\"")));
            }
            let value = self.value(depth + 1)?;
            // A repeated key is read again: the last value wins, except for the graph's `attrs`,
            // a structure the reader loads into the one it has, key by key.
            match (map.get_mut(&key), value) {
                (Some(Value::Object(first)), Value::Object(second))
                    if depth == 0 && key == "attrs" =>
                {
                    for (name, value) in second {
                        first.remove(&name);
                        first.insert(name, value);
                    }
                }
                (_, value) => {
                    map.remove(&key);
                    map.insert(key, value);
                }
            }
        }
        Ok(Value::Object(map))
    }

    fn list(&mut self, depth: usize) -> Result<Value, String> {
        self.at += 1;
        let mut items = Vec::new();
        while self.more(items.len(), b']')? {
            items.push(self.value(depth + 1)?);
        }
        Ok(Value::Array(items))
    }

    fn string(&mut self) -> Result<String, String> {
        if self.next_non_space() != Some(b'"') {
            return Err(self.error("expected '\"'"));
        }
        let mut bytes = Vec::new();
        loop {
            let Some(byte) = self.peek() else {
                return Err(self.error("the input ends inside a string"));
            };
            self.at += 1;
            match byte {
                b'"' => break,
                b'\\' => {
                    let escaped = match self.peek() {
                        Some(b'r') => b'\r',
                        Some(b'n') => b'\n',
                        Some(b'\\') => b'\\',
                        Some(b't') => b'\t',
                        Some(b'"') => b'"',
                        other => {
                            return Err(self.error(&format!(
                                "unknown string escape \\{} (only \\\" \\\\ \\n \\r \\t)",
                                other.map_or_else(
                                    || "<end>".into(),
                                    |b| b.escape_ascii().to_string()
                                )
                            )));
                        }
                    };
                    self.at += 1;
                    bytes.push(escaped);
                }
                b'\r' | b'\n' => return Err(self.error("a line break inside a string")),
                other => bytes.push(other),
            }
        }
        Ok(from_bytes(&bytes))
    }

    /// A number or any other bare token, up to the next separator.
    fn scalar(&mut self) -> Result<Value, String> {
        let start = self.at;
        while let Some(byte) = self.peek() {
            if is_space(byte) || matches!(byte, b',' | b']' | b'}') {
                break;
            }
            self.at += 1;
        }
        if start == self.at {
            return Err(self.error("expected a value"));
        }
        Ok(integer(&self.text[start..self.at]).map_or(Value::Null, Value::Number))
    }
}

/// First of the 128 private-use characters (U+10FF80..=U+10FFFF) that stand for single bytes in
/// [`from_bytes`].
const ESCAPED_BYTE: u32 = 0x10_FF80;

/// A string of the deployed runtime's bytes as text, one to one: valid UTF-8 stays as it is,
/// except characters of U+10FF80..=U+10FFFF, which are taken byte by byte like invalid ones,
/// and each such byte b (always ≥ 0x80) becomes the character U+10FF00 + b. Distinct byte
/// strings stay distinct, so names compare as the deployed runtime compares them;
/// [`to_bytes`] gives the bytes back.
pub fn from_bytes(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    let mut rest = bytes;
    while !rest.is_empty() {
        let (valid, after) = match std::str::from_utf8(rest) {
            Ok(text) => (text, &rest[rest.len()..]),
            Err(error) => {
                let (valid, after) = rest.split_at(error.valid_up_to());
                (std::str::from_utf8(valid).unwrap_or_default(), after)
            }
        };
        for c in valid.chars() {
            if u32::from(c) >= ESCAPED_BYTE {
                let mut buffer = [0u8; 4];
                for &byte in c.encode_utf8(&mut buffer).as_bytes() {
                    out.push(escaped(byte));
                }
            } else {
                out.push(c);
            }
        }
        if let Some((&byte, tail)) = after.split_first() {
            out.push(escaped(byte));
            rest = tail;
        } else {
            rest = after;
        }
    }
    out
}

/// The character that stands for `byte` (≥ 0x80) in [`from_bytes`].
fn escaped(byte: u8) -> char {
    char::from_u32(ESCAPED_BYTE - 0x80 + u32::from(byte)).unwrap_or(char::REPLACEMENT_CHARACTER)
}

/// The bytes [`from_bytes`] made `text` from.
pub fn to_bytes(text: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    for c in text.chars() {
        let code = u32::from(c);
        if code >= ESCAPED_BYTE {
            out.push((code - ESCAPED_BYTE + 0x80) as u8);
        } else {
            let mut buffer = [0u8; 4];
            out.extend_from_slice(c.encode_utf8(&mut buffer).as_bytes());
        }
    }
    out
}

/// An integer as a C++ stream reads one whole: an optional sign, then decimal digits.
fn integer(token: &[u8]) -> Option<Number> {
    let (negative, digits) = match token {
        [b'-', rest @ ..] => (true, rest),
        [b'+', rest @ ..] => (false, rest),
        rest => (false, rest),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let magnitude: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    if negative {
        let value = 0i128 - i128::from(magnitude);
        i64::try_from(value).ok().map(Number::from)
    } else {
        Some(Number::from(magnitude))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(text: &str) -> Result<Value, String> {
        parse(text.as_bytes())
    }

    #[test]
    fn reads_what_the_deployed_reader_reads() {
        assert_eq!(
            read(r#" {"a": [1, -2, +3, 007], "b": "x"} "#).unwrap(),
            json!({"a": [1, -2, 3, 7], "b": "x"})
        );
        // End of input after an item closes what is open; trailing text is never read.
        assert_eq!(read(r#"{"a": [1, 2"#).unwrap(), json!({"a": [1, 2]}));
        assert_eq!(read(r#"{"a": "x"} trailing {"#).unwrap(), json!({"a": "x"}));
        // Repeated keys: the last wins.
        assert_eq!(read(r#"{"a": 1, "a": 2}"#).unwrap(), json!({"a": 2}));
        // Escapes of the reader.
        assert_eq!(read(r#"["\"\\\n\r\t"]"#).unwrap(), json!(["\"\\\n\r\t"]));
        assert_eq!(read("[-9223372036854775808]").unwrap(), json!([i64::MIN]));
        // A repeated graph `attrs` is loaded into the first, key by key.
        assert_eq!(
            read(r#"{"attrs": {"a": 1, "b": 2}, "attrs": {"b": 3}}"#).unwrap(),
            json!({"attrs": {"a": 1, "b": 3}})
        );
        // Tokens that are no integer read as null, which every typed read rejects.
        assert_eq!(
            read("[8.5, 1e3, true, null, 0x10, 99999999999999999999]").unwrap(),
            json!([null, null, null, null, null, null])
        );
    }

    #[test]
    fn bytes_and_text_correspond_one_to_one() {
        let mut mixed = "é\u{10FF80}".as_bytes().to_vec();
        mixed.extend_from_slice(b"\xffz");
        let cases: [&[u8]; 6] = [
            b"plain",
            b"\xff",
            b"\xfe",
            "\u{10FFFF}".as_bytes(),
            b"a\xc3",
            &mixed,
        ];
        let texts: Vec<String> = cases.iter().map(|bytes| from_bytes(bytes)).collect();
        for (bytes, text) in cases.iter().zip(&texts) {
            assert_eq!(&to_bytes(text), bytes);
        }
        for (i, a) in texts.iter().enumerate() {
            for b in &texts[i + 1..] {
                assert_ne!(a, b);
            }
        }
        assert_eq!(from_bytes(b"plain"), "plain");
    }

    #[test]
    fn rejects_what_the_deployed_reader_rejects() {
        for (text, needle) in [
            (r#"{"nodes": ["#, "expected a value"),
            ("{", "expected '\"'"),
            ("", "expected a value"),
            (r#"["\u0041"]"#, "unknown string escape \\u"),
            (r#"["\/"]"#, "unknown string escape \\/"),
            ("[\"a\nb\"]", "a line break inside a string"),
            (r#"["abc"#, "the input ends inside a string"),
            (r#"{"a" 1}"#, "expected ':'"),
            (r#"[1 2]"#, "expected ',' or ']'"),
            (r#"{"a": 1 "b": 2}"#, "expected ',' or '}'"),
            (r#"{1: 2}"#, "expected '\"'"),
            ("[1,]", "expected a value"),
        ] {
            let error = read(text).unwrap_err();
            assert!(error.contains(needle), "{text:?}: {error}");
        }
        let deep = "[".repeat(MAX_DEPTH + 2);
        assert!(read(&deep).unwrap_err().contains("levels of nesting"));
    }

    #[test]
    fn values_past_the_bound_are_refused_where_they_start() {
        // The list itself and MAX_VALUES − 1 numbers: at the bound.
        let at_bound = format!("[{}0]", "0,".repeat(MAX_VALUES - 2));
        let Ok(Value::Array(items)) = read(&at_bound) else {
            panic!("at the bound");
        };
        assert_eq!(items.len(), MAX_VALUES - 1);
        let past = format!("[{}0]", "0,".repeat(MAX_VALUES - 1));
        let error = read(&past).unwrap_err();
        let offset = 1 + 2 * (MAX_VALUES - 1);
        assert!(
            error.starts_with(&format!("at byte {offset}: more than {MAX_VALUES} values")),
            "{error}"
        );
    }
}
