//! Operator attributes of a CVM graph, read as the deployed runtime's parameter parser reads
//! them (`include/utils/parameter.h`, `include/cvm/tuple.h`, `include/utils/optional.h`): every
//! value is a string, read by the C++ type of its field, and anything left after the value but
//! white space is an error (a `ParamError`, class 2).
//!
//! - `int`: a C++ stream's integer: white space, an optional sign, decimal digits, within 32
//!   bits (`3L` and `0x10` fail).
//! - `bool`: exactly `true`, `false`, `1` or `0` in any case, nothing around it.
//! - tuples (`TShape`, 64-bit entries; `Tuple<int>`, 32-bit): a bare integer is a tuple of one;
//!   otherwise `(` or `[`, integers separated by commas (each may be followed by one `L`, a
//!   trailing comma is allowed), closed by `)` or `]` (either closes either).
//! - `optional<int>` (take's `axis`): `None` or an `int` (which may be followed by one `L`).
//! - strings (layouts, data types): as written.

use cvm_engine::attrs::AttrKind;
use cvm_engine::model::AttrValue;

use super::json::is_space;

/// A C++ `istream` over the bytes of one attribute value.
struct Stream<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Stream<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn get(&mut self) -> Option<u8> {
        let byte = self.peek();
        self.at += usize::from(byte.is_some());
        byte
    }

    fn skip_space(&mut self) {
        while self.peek().is_some_and(is_space) {
            self.at += 1;
        }
    }

    /// `is >> value` for an integer of `bits` bits (32 or 64): white space, a sign, digits.
    fn integer(&mut self, bits: u32) -> Option<i64> {
        self.skip_space();
        let negative = match self.peek() {
            Some(b'-') => true,
            Some(b'+') => false,
            _ => {
                return self.digits(false, bits);
            }
        };
        self.at += 1;
        self.digits(negative, bits)
    }

    fn digits(&mut self, negative: bool, bits: u32) -> Option<i64> {
        let start = self.at;
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.at += 1;
        }
        let digits = std::str::from_utf8(&self.bytes[start..self.at]).ok()?;
        if digits.is_empty() {
            return None;
        }
        let magnitude: i128 = digits.parse().ok()?;
        let value = if negative { -magnitude } else { magnitude };
        let (low, high) = if bits == 32 {
            (i128::from(i32::MIN), i128::from(i32::MAX))
        } else {
            (i128::from(i64::MIN), i128::from(i64::MAX))
        };
        (low..=high)
            .contains(&value)
            .then(|| i64::try_from(value).ok())
            .flatten()
    }

    /// Whether nothing but white space is left (what `FieldEntryBase::Set` requires).
    fn rest_is_space(&self) -> bool {
        self.bytes[self.at..].iter().all(|&b| is_space(b))
    }

    /// `is >> tuple` (`Tuple::operator>>`), entries of `bits` bits.
    fn tuple(&mut self, bits: u32) -> Option<Vec<i64>> {
        loop {
            let byte = self.peek()?;
            if byte.is_ascii_digit() || byte == b'-' {
                return self.integer(bits).map(|value| vec![value]);
            }
            self.at += 1;
            if byte == b'(' || byte == b'[' {
                break;
            }
            if !is_space(byte) {
                return None;
            }
        }
        self.skip_space();
        if matches!(self.peek(), Some(b')' | b']')) {
            self.at += 1;
            return Some(Vec::new());
        }
        let mut values = Vec::new();
        loop {
            values.push(self.integer(bits)?);
            let mut byte = self.get();
            while byte.is_some_and(is_space) {
                byte = self.get();
            }
            if byte == Some(b'L') {
                byte = self.get();
            }
            match byte {
                Some(b',') => {
                    self.skip_space();
                    if matches!(self.peek(), Some(b')' | b']')) {
                        self.at += 1;
                        return Some(values);
                    }
                }
                Some(b')' | b']') => return Some(values),
                _ => return None,
            }
        }
    }
}

/// Whether the deployed field `key` of operator `op` is an `optional<int>`.
fn optional(op: &str, key: &str) -> bool {
    op == "take" && key == "axis"
}

/// Whether the deployed field `key` of operator `op` is a `Tuple<int>` (32-bit entries) rather
/// than a `TShape` (64-bit).
fn tuple_of_int(op: &str, key: &str) -> bool {
    op == "slice_like" && key == "axis"
}

/// Types attribute `key` = `text` of operator `op` as the engine's schema gives its `kind`,
/// reading it as the deployed field of that name reads it (module docs). `Ok(None)` is an
/// absent optional value (`None`).
///
/// # Errors
/// What the deployed parser cannot read, described.
pub fn parse_attr(
    op: &str,
    key: &str,
    text: &str,
    kind: Option<AttrKind>,
) -> Result<Option<AttrValue>, String> {
    let mut stream = Stream {
        bytes: text.as_bytes(),
        at: 0,
    };
    let whole = |stream: &Stream<'_>, value: Option<AttrValue>, what: &str| match value {
        Some(value) if stream.rest_is_space() => Ok(Some(value)),
        _ => Err(format!("not {what} as the deployed parser reads one")),
    };
    match kind {
        None | Some(AttrKind::Str) => Ok(Some(AttrValue::Str(text.to_string()))),
        Some(AttrKind::Bool) => match text.to_ascii_lowercase().as_str() {
            "true" | "1" => Ok(Some(AttrValue::Bool(true))),
            "false" | "0" => Ok(Some(AttrValue::Bool(false))),
            _ => Err("not a boolean (exactly true, false, 1 or 0)".into()),
        },
        Some(AttrKind::Int | AttrKind::Fixed) if optional(op, key) => {
            if text.as_bytes().starts_with(b"None") {
                stream.at = 4;
                return whole(&stream, Some(AttrValue::Str(String::new())), "None").map(|_| None);
            }
            let value = stream.integer(32);
            if value.is_some() && stream.peek() == Some(b'L') {
                stream.at += 1;
            }
            whole(&stream, value.map(AttrValue::Int), "an integer or None")
        }
        Some(AttrKind::Int | AttrKind::Fixed) => {
            let value = stream.integer(32);
            whole(&stream, value.map(AttrValue::Int), "a 32-bit integer")
        }
        Some(AttrKind::Ints) => {
            let bits = if tuple_of_int(op, key) { 32 } else { 64 };
            let value = stream.tuple(bits);
            whole(&stream, value.map(AttrValue::Ints), "a tuple of integers")
        }
    }
}

/// A boolean as the deployed parser reads one, or `None`.
pub fn parse_bool(text: &str) -> Option<bool> {
    match parse_attr("", "", text, Some(AttrKind::Bool)) {
        Ok(Some(AttrValue::Bool(value))) => Some(value),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ints(text: &str) -> Result<Option<AttrValue>, String> {
        parse_attr("conv2d", "padding", text, Some(AttrKind::Ints))
    }

    fn int(text: &str) -> Result<Option<AttrValue>, String> {
        parse_attr("dense", "units", text, Some(AttrKind::Int))
    }

    #[test]
    fn tuples_as_the_deployed_parser_reads_them() {
        for (text, values) in [
            ("(1, 2)", vec![1, 2]),
            ("[1,2]", vec![1, 2]),
            (" (1, 2) ", vec![1, 2]),
            ("3", vec![3]),
            ("-3 ", vec![-3]),
            ("()", vec![]),
            ("[ ]", vec![]),
            ("(2L, -1L)", vec![2, -1]),
            ("(3 L)", vec![3]),
            ("(1, 2,)", vec![1, 2]),
            ("(1, 2]", vec![1, 2]),
            ("(+1, 2)", vec![1, 2]),
            ("(9223372036854775807)", vec![i64::MAX]),
        ] {
            assert_eq!(ints(text), Ok(Some(AttrValue::Ints(values))), "{text:?}");
        }
        for text in [
            "",
            " ",
            "1, 2",
            "+3",
            "(1,,2)",
            "(,1)",
            "(1 2)",
            "(1, x)",
            "(1.5)",
            "(1",
            "None",
            "(9223372036854775808)",
            "(1) x",
        ] {
            assert!(ints(text).is_err(), "{text:?}");
        }
        let slice_like = |text| parse_attr("slice_like", "axis", text, Some(AttrKind::Ints));
        assert!(slice_like("(2147483648)").is_err());
        assert_eq!(
            slice_like("(2147483647)"),
            Ok(Some(AttrValue::Ints(vec![2_147_483_647])))
        );
    }

    #[test]
    fn integers_booleans_and_optionals() {
        assert_eq!(int(" -7 "), Ok(Some(AttrValue::Int(-7))));
        assert_eq!(int("+7"), Ok(Some(AttrValue::Int(7))));
        assert_eq!(int("007"), Ok(Some(AttrValue::Int(7))));
        for text in ["3L", "0x10", "1.5", "", "None", "2147483648", "- 1"] {
            assert!(int(text).is_err(), "{text:?}");
        }
        let axis = |text| parse_attr("take", "axis", text, Some(AttrKind::Int));
        assert_eq!(axis("None"), Ok(None));
        assert_eq!(axis("None "), Ok(None));
        assert_eq!(axis("1L"), Ok(Some(AttrValue::Int(1))));
        assert!(axis("Nonex").is_err());
        for (text, value) in [("True", true), ("false", false), ("1", true), ("0", false)] {
            assert_eq!(parse_bool(text), Some(value));
        }
        for text in [" true", "True\n", "yes", "", "None"] {
            assert_eq!(parse_bool(text), None, "{text:?}");
        }
        assert_eq!(
            parse_attr("conv2d", "layout", " NCHW", Some(AttrKind::Str)),
            Ok(Some(AttrValue::Str(" NCHW".into())))
        );
    }
}
