//! A minimal JSON writer for the raw measurements (the benches crate has no JSON dependency).

use std::fmt::Write as _;

/// A JSON value.
#[derive(Clone, Debug, PartialEq)]
pub enum Json {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// An unsigned integer, written exactly.
    Int(u64),
    /// A number; non-finite values are written as `null`.
    Num(f64),
    /// A string.
    Str(String),
    /// An array.
    Arr(Vec<Json>),
    /// An object, keys in the given order.
    Obj(Vec<(String, Json)>),
}

impl Json {
    /// An object from `(key, value)` pairs.
    pub fn obj<'a>(pairs: impl IntoIterator<Item = (&'a str, Json)>) -> Json {
        Json::Obj(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
    }

    /// A string value.
    pub fn str(value: impl Into<String>) -> Json {
        Json::Str(value.into())
    }

    /// A number, or `null` for `None`.
    pub fn opt(value: Option<f64>) -> Json {
        value.map_or(Json::Null, Json::Num)
    }

    /// The value as text: object members, and arrays holding arrays or objects, one per line.
    pub fn render(&self) -> String {
        let mut out = String::new();
        self.write(&mut out, 0);
        out.push('\n');
        out
    }

    fn write(&self, out: &mut String, indent: usize) {
        match self {
            Json::Null => out.push_str("null"),
            Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Json::Int(i) => {
                let _ = write!(out, "{i}");
            }
            Json::Num(x) if x.is_finite() => {
                let _ = write!(out, "{x}");
            }
            Json::Num(_) => out.push_str("null"),
            Json::Str(s) => write_string(out, s),
            Json::Arr(items) => {
                let simple = items
                    .iter()
                    .all(|i| !matches!(i, Json::Arr(_) | Json::Obj(_)));
                out.push('[');
                for (n, item) in items.iter().enumerate() {
                    if n > 0 {
                        out.push_str(if simple { ", " } else { "," });
                    }
                    if !simple {
                        newline(out, indent + 1);
                    }
                    item.write(out, indent + 1);
                }
                if !simple && !items.is_empty() {
                    newline(out, indent);
                }
                out.push(']');
            }
            Json::Obj(members) => {
                out.push('{');
                for (n, (key, value)) in members.iter().enumerate() {
                    if n > 0 {
                        out.push(',');
                    }
                    newline(out, indent + 1);
                    write_string(out, key);
                    out.push_str(": ");
                    value.write(out, indent + 1);
                }
                if !members.is_empty() {
                    newline(out, indent);
                }
                out.push('}');
            }
        }
    }
}

fn newline(out: &mut String, indent: usize) {
    out.push('\n');
    for _ in 0..indent {
        out.push_str("  ");
    }
}

fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_nested_values() {
        let value = Json::obj([
            (
                "a",
                Json::Arr(vec![Json::Int(1), Json::Num(0.5), Json::Null]),
            ),
            ("b", Json::str("x\"y")),
            ("c", Json::Num(f64::NAN)),
        ]);
        assert_eq!(
            value.render(),
            "{\n  \"a\": [1, 0.5, null],\n  \"b\": \"x\\\"y\",\n  \"c\": null\n}\n"
        );
    }
}
