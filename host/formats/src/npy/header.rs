//! The `.npy` header: the Python dict literal's parser and the checks of its `descr`,
//! `fortran_order` and `shape` entries.

use super::*;

/// The validated contents of a header dict.
#[derive(Debug)]
pub(super) struct Header {
    pub(super) dtype: Dtype,
    /// The descr string as written (quoted in errors).
    pub(super) descr: String,
    pub(super) fortran_order: bool,
    pub(super) shape: Vec<u32>,
}

/// A Python literal as it may appear in a `.npy` header.
#[derive(Debug)]
enum Literal {
    Str(String),
    Bool(bool),
    /// An integer literal: its sign and decimal digits (without any `L` suffix).
    Int {
        negative: bool,
        digits: String,
    },
    Tuple(Vec<Literal>),
    /// A list; only ever a structured dtype's field list, which is rejected whatever it holds,
    /// so its items are checked for syntax and then dropped.
    List,
}

/// A literal plus the header text it was parsed from, for error messages.
struct SpannedLiteral {
    literal: Literal,
    text: String,
}

/// Recursive-descent parser over the header bytes (already known to be ASCII).
struct HeaderParser<'a> {
    text: &'a [u8],
    pos: usize,
    allow_long_suffix: bool,
}

impl HeaderParser<'_> {
    fn peek(&self) -> Option<u8> {
        self.text.get(self.pos).copied()
    }

    fn error(&self, reason: impl Into<String>) -> NpyError {
        NpyError::HeaderSyntax {
            offset: self.pos,
            reason: reason.into(),
        }
    }

    /// Describes the next character for "expected X, found Y" messages.
    fn found(&self) -> String {
        match self.peek() {
            Some(byte) => format!("found {:?}", char::from(byte)),
            None => "found the end of the header".to_owned(),
        }
    }

    fn skip_whitespace(&mut self) {
        // Python's whitespace between tokens: space, tab, newline, carriage return, form feed.
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r' | b'\x0c')) {
            self.pos += 1;
        }
    }

    fn expect_byte(&mut self, byte: u8) -> Result<(), NpyError> {
        if self.peek() == Some(byte) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.error(format!("expected {:?}, {}", char::from(byte), self.found())))
        }
    }

    /// Parses the whole header: one dict literal, optionally surrounded by whitespace.
    fn parse_dict(&mut self) -> Result<Vec<(String, SpannedLiteral)>, NpyError> {
        self.skip_whitespace();
        self.expect_byte(b'{')?;
        let mut entries = Vec::new();
        loop {
            self.skip_whitespace();
            if self.peek() == Some(b'}') {
                self.pos += 1;
                break;
            }
            if self.peek() != Some(b'\'') && self.peek() != Some(b'"') {
                return Err(self.error(format!("expected a quoted key or '}}', {}", self.found())));
            }
            let key = self.parse_string()?;
            self.skip_whitespace();
            self.expect_byte(b':')?;
            let value = self.parse_spanned(0)?;
            entries.push((key, value));
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    break;
                }
                _ => return Err(self.error(format!("expected ',' or '}}', {}", self.found()))),
            }
        }
        self.skip_whitespace();
        if self.pos < self.text.len() {
            return Err(self.error(format!("unexpected text after the dict, {}", self.found())));
        }
        Ok(entries)
    }

    /// Parses one literal and records the text it spans.
    fn parse_spanned(&mut self, depth: usize) -> Result<SpannedLiteral, NpyError> {
        self.skip_whitespace();
        let start = self.pos;
        let literal = self.parse_literal(depth)?;
        let text = excerpt(self.text.get(start..self.pos).unwrap_or_default());
        Ok(SpannedLiteral { literal, text })
    }

    fn parse_literal(&mut self, depth: usize) -> Result<Literal, NpyError> {
        self.skip_whitespace();
        match self.peek() {
            Some(b'\'' | b'"') => Ok(Literal::Str(self.parse_string()?)),
            Some(b'(') => self.parse_parenthesized(depth),
            Some(b'[') => {
                self.pos += 1;
                self.parse_sequence(b']', depth)?;
                Ok(Literal::List)
            }
            Some(b'-') => {
                self.pos += 1;
                self.skip_whitespace();
                let digits = self.parse_digits()?;
                Ok(Literal::Int {
                    negative: true,
                    digits,
                })
            }
            Some(b'0'..=b'9') => Ok(Literal::Int {
                negative: false,
                digits: self.parse_digits()?,
            }),
            Some(byte) if byte.is_ascii_alphabetic() || byte == b'_' => {
                let name = self.parse_name();
                match name.as_str() {
                    "True" => Ok(Literal::Bool(true)),
                    "False" => Ok(Literal::Bool(false)),
                    _ => Err(NpyError::HeaderSyntax {
                        offset: self.pos.saturating_sub(name.len()),
                        reason: format!("unexpected name '{}'", excerpt(name.as_bytes())),
                    }),
                }
            }
            _ => Err(self.error(format!("expected a value, {}", self.found()))),
        }
    }

    /// `(` has been seen. Like Python, `(x)` is just `x`; a tuple needs a comma or no items.
    fn parse_parenthesized(&mut self, depth: usize) -> Result<Literal, NpyError> {
        self.pos += 1;
        let (mut items, saw_comma) = self.parse_sequence(b')', depth)?;
        if items.len() == 1
            && !saw_comma
            && let Some(inner) = items.pop()
        {
            return Ok(inner);
        }
        Ok(Literal::Tuple(items))
    }

    /// Parses comma-separated literals up to `close` (the opening bracket is consumed).
    /// Returns the items and whether any comma was present.
    fn parse_sequence(
        &mut self,
        close: u8,
        depth: usize,
    ) -> Result<(Vec<Literal>, bool), NpyError> {
        if depth >= MAX_NESTING {
            return Err(self.error(format!("tuples and lists nest deeper than {MAX_NESTING}")));
        }
        let mut items = Vec::new();
        let mut saw_comma = false;
        loop {
            self.skip_whitespace();
            if self.peek() == Some(close) {
                self.pos += 1;
                return Ok((items, saw_comma));
            }
            items.push(self.parse_literal(depth + 1)?);
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => {
                    self.pos += 1;
                    saw_comma = true;
                }
                Some(byte) if byte == close => {
                    self.pos += 1;
                    return Ok((items, saw_comma));
                }
                _ => {
                    return Err(self.error(format!(
                        "expected ',' or {:?}, {}",
                        char::from(close),
                        self.found()
                    )));
                }
            }
        }
    }

    /// Parses a single- or double-quoted string without escape sequences (NumPy's dtype
    /// strings and keys never need them).
    fn parse_string(&mut self) -> Result<String, NpyError> {
        let quote = self.peek().unwrap_or(b'\'');
        self.pos += 1;
        let start = self.pos;
        loop {
            match self.peek() {
                Some(byte) if byte == quote => break,
                Some(b'\\') => {
                    return Err(self.error("escape sequences in strings are not supported"));
                }
                Some(b'\n' | b'\r') | None => {
                    return Err(NpyError::HeaderSyntax {
                        offset: start.saturating_sub(1),
                        reason: "unterminated string".to_owned(),
                    });
                }
                Some(_) => self.pos += 1,
            }
        }
        let content = self.text.get(start..self.pos).unwrap_or_default();
        self.pos += 1;
        // The header was checked to be ASCII, so this conversion is exact.
        Ok(String::from_utf8_lossy(content).into_owned())
    }

    /// Parses a decimal integer literal, with the Python 2 `L` suffix where allowed.
    fn parse_digits(&mut self) -> Result<String, NpyError> {
        let start = self.pos;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.pos += 1;
        }
        let digits = self.text.get(start..self.pos).unwrap_or_default();
        if digits.is_empty() {
            return Err(self.error(format!("expected digits, {}", self.found())));
        }
        if digits.len() > 1 && digits.first() == Some(&b'0') {
            return Err(NpyError::HeaderSyntax {
                offset: start,
                reason: "integer literals may not have leading zeros".to_owned(),
            });
        }
        if self.allow_long_suffix && matches!(self.peek(), Some(b'L' | b'l')) {
            self.pos += 1;
        }
        // Reject `0x10`, `1_000`, `5j` and the like rather than misreading them.
        if matches!(self.peek(), Some(byte) if byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'.')
        {
            return Err(self.error(format!("malformed integer literal, {}", self.found())));
        }
        Ok(String::from_utf8_lossy(digits).into_owned())
    }

    fn parse_name(&mut self) -> String {
        let start = self.pos;
        while matches!(self.peek(), Some(byte) if byte.is_ascii_alphanumeric() || byte == b'_') {
            self.pos += 1;
        }
        String::from_utf8_lossy(self.text.get(start..self.pos).unwrap_or_default()).into_owned()
    }
}

/// Quotes header text in an error message, shortened so a huge header cannot bloat it.
fn excerpt(text: &[u8]) -> String {
    match text.get(..MAX_EXCERPT) {
        Some(prefix) if text.len() > MAX_EXCERPT => {
            format!("{}...", String::from_utf8_lossy(prefix))
        }
        _ => String::from_utf8_lossy(text).into_owned(),
    }
}

/// Parses and validates the header dict.
pub(super) fn parse_header(text: &[u8], allow_long_suffix: bool) -> Result<Header, NpyError> {
    let mut parser = HeaderParser {
        text,
        pos: 0,
        allow_long_suffix,
    };
    let entries = parser.parse_dict()?;

    let mut descr = None;
    let mut fortran_order = None;
    let mut shape = None;
    for (key, value) in entries {
        let slot = match key.as_str() {
            "descr" => &mut descr,
            "fortran_order" => &mut fortran_order,
            "shape" => &mut shape,
            _ => return Err(NpyError::UnknownKey(excerpt(key.as_bytes()))),
        };
        if slot.is_some() {
            return Err(NpyError::DuplicateKey(key));
        }
        *slot = Some(value);
    }
    let descr = descr.ok_or(NpyError::MissingKey("descr"))?;
    let fortran_order = fortran_order.ok_or(NpyError::MissingKey("fortran_order"))?;
    let shape = shape.ok_or(NpyError::MissingKey("shape"))?;

    let (dtype, descr) = match descr.literal {
        Literal::Str(descr) => (parse_descr(&descr)?, excerpt(descr.as_bytes())),
        // A list is a structured dtype; a tuple is a sub-array dtype.
        Literal::List | Literal::Tuple(_) => return Err(NpyError::StructuredDtype(descr.text)),
        _ => {
            return Err(NpyError::InvalidValue {
                key: "descr",
                reason: format!("expected a dtype string, found {}", descr.text),
            });
        }
    };
    let Literal::Bool(fortran_order) = fortran_order.literal else {
        return Err(NpyError::InvalidValue {
            key: "fortran_order",
            reason: format!("expected True or False, found {}", fortran_order.text),
        });
    };
    let shape = parse_shape(shape)?;
    Ok(Header {
        dtype,
        descr,
        fortran_order,
        shape,
    })
}

/// Validates the `shape` value: a tuple of non-negative integers, each fitting in `u32`.
fn parse_shape(shape: SpannedLiteral) -> Result<Vec<u32>, NpyError> {
    let not_a_tuple = |text: &str| NpyError::InvalidValue {
        key: "shape",
        reason: format!("expected a tuple of non-negative integers, found {text}"),
    };
    let Literal::Tuple(items) = shape.literal else {
        return Err(not_a_tuple(&shape.text));
    };
    let mut dims = Vec::with_capacity(items.len());
    for (axis, item) in items.into_iter().enumerate() {
        let Literal::Int { negative, digits } = item else {
            return Err(not_a_tuple(&shape.text));
        };
        let value = digits.bytes().try_fold(0u64, |acc, digit| {
            acc.checked_mul(10)?
                .checked_add(u64::from(digit.wrapping_sub(b'0')))
        });
        let is_zero = value == Some(0);
        if negative && !is_zero {
            return Err(NpyError::InvalidValue {
                key: "shape",
                reason: format!(
                    "dimension -{} on axis {axis} is negative",
                    excerpt(digits.as_bytes())
                ),
            });
        }
        let dim = value
            .and_then(|value| u32::try_from(value).ok())
            .ok_or_else(|| NpyError::DimensionTooLarge {
                axis,
                dimension: excerpt(digits.as_bytes()),
            })?;
        dims.push(dim);
    }
    Ok(dims)
}

/// Interprets a NumPy descr string such as `<i4`, `>u8` or `|b1`.
fn parse_descr(descr: &str) -> Result<Dtype, NpyError> {
    let bytes = descr.as_bytes();
    let unsupported = |reason| NpyError::UnsupportedDtype {
        descr: excerpt(bytes),
        reason,
    };
    let (order_mark, kind_char, size_text) = match bytes {
        [order @ (b'<' | b'>' | b'|' | b'='), kind, size @ ..] => (*order, *kind, size),
        [b'b' | b'i' | b'u' | b'f', ..] => {
            return Err(unsupported(
                "the byte-order character (<, >, = or |) is missing",
            ));
        }
        _ => return Err(NpyError::NotIntegerDtype(excerpt(bytes))),
    };
    let kind = match kind_char {
        b'b' => Kind::Bool,
        b'i' => Kind::Signed,
        b'u' => Kind::Unsigned,
        b'f' if size_text == b"4" => Kind::Float,
        _ => return Err(NpyError::NotIntegerDtype(excerpt(bytes))),
    };
    let size = match size_text {
        b"1" => 1u8,
        b"2" => 2,
        b"4" => 4,
        b"8" => 8,
        _ => return Err(unsupported("integer items must be 1, 2, 4 or 8 bytes")),
    };
    if kind == Kind::Bool && size != 1 {
        return Err(unsupported("bool items must be 1 byte"));
    }
    let order = match order_mark {
        b'>' => ByteOrder::Big,
        // `|` means "byte order not applicable", which NumPy uses only for 1-byte items.
        b'|' if size != 1 => {
            return Err(unsupported(
                "'|' (no byte order) is only valid for 1-byte items",
            ));
        }
        // `=` is native order; the engine's hosts are little-endian, as is every file we write.
        _ => ByteOrder::Little,
    };
    Ok(Dtype { kind, size, order })
}
