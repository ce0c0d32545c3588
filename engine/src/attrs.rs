//! Attribute schemas and typed attribute access for operator parsers.
//!
//! Every operator declares the attributes it takes as a list of [`AttrSpec`]. Validation checks
//! a node's attributes against that list (sorted, unique, known, right kind) and hands the
//! operator's parser an [`Attrs`] with typed getters that apply defaults and ranges and report
//! errors naming the attribute. Importers (text and CVM formats) use the same schemas to type
//! attribute values.

use alloc::string::String;
use alloc::vec::Vec;

use crate::error::Result;
use crate::fail;
use crate::limits;
use crate::model::{Attr, AttrValue};

/// The kind of value an attribute holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttrKind {
    /// An integer.
    Int,
    /// A boolean.
    Bool,
    /// A list of integers.
    Ints,
    /// A string.
    Str,
    /// A real number in Q(`frac_bits`): stored as the integer x standing for x / 2^F. Text models
    /// write the real number and convert it once with the node's `frac_bits`.
    Fixed,
}

impl AttrKind {
    /// The kind's name in messages.
    pub const fn name(self) -> &'static str {
        match self {
            AttrKind::Int => "an integer",
            AttrKind::Bool => "a boolean",
            AttrKind::Ints => "a list of integers",
            AttrKind::Str => "a string",
            AttrKind::Fixed => "a fixed-point number (an integer in Q(frac_bits))",
        }
    }

    /// The kind of `value`.
    pub fn of(value: &AttrValue) -> AttrKind {
        match value {
            AttrValue::Int(_) => AttrKind::Int,
            AttrValue::Bool(_) => AttrKind::Bool,
            AttrValue::Ints(_) => AttrKind::Ints,
            AttrValue::Str(_) => AttrKind::Str,
        }
    }
}

/// One attribute an operator accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttrSpec {
    /// Name as in the specification.
    pub name: &'static str,
    /// Kind of value.
    pub kind: AttrKind,
}

/// Shorthand for an [`AttrSpec`] in operator tables.
pub const fn spec(name: &'static str, kind: AttrKind) -> AttrSpec {
    AttrSpec { name, kind }
}

/// A node's attributes, checked against the operator's schema, with typed getters.
#[derive(Debug)]
pub struct Attrs<'a> {
    attrs: &'a [Attr],
}

impl<'a> Attrs<'a> {
    /// Checks `attrs` against `schema`: sorted by name, unique, every name known, every value of
    /// the declared kind, lists and names within limits.
    ///
    /// # Errors
    /// `DuplicateName`, `UnknownAttribute`, `AttributeType` or `LimitExceeded`, naming the
    /// attribute.
    pub fn check(attrs: &'a [Attr], schema: &[AttrSpec]) -> Result<Attrs<'a>> {
        if attrs.len() > limits::MAX_ATTRS {
            return Err(fail!(
                LimitExceeded,
                "{} attributes exceed the limit of {}",
                attrs.len(),
                limits::MAX_ATTRS
            ));
        }
        for (index, attr) in attrs.iter().enumerate() {
            if let Some(previous) = index.checked_sub(1).map(|i| &attrs[i])
                && previous.name >= attr.name
            {
                return Err(fail!(
                    DuplicateName,
                    "attributes must be sorted by name and unique: \"{}\" follows \"{}\"",
                    attr.name,
                    previous.name
                ));
            }
            let Some(expected) = schema.iter().find(|spec| spec.name == attr.name) else {
                let known: Vec<&str> = schema.iter().map(|spec| spec.name).collect();
                return Err(fail!(
                    UnknownAttribute,
                    "unknown attribute \"{}\" (this operator takes: {})",
                    truncated(&attr.name),
                    if known.is_empty() {
                        String::from("none")
                    } else {
                        known.join(", ")
                    }
                ));
            };
            let kind = AttrKind::of(&attr.value);
            let fixed_as_int = expected.kind == AttrKind::Fixed && kind == AttrKind::Int;
            if kind != expected.kind && !fixed_as_int {
                return Err(fail!(
                    AttributeType,
                    "attribute \"{}\" must be {}, not {}",
                    attr.name,
                    expected.kind.name(),
                    kind.name()
                ));
            }
            if let AttrValue::Ints(list) = &attr.value
                && list.len() > limits::MAX_ATTR_LIST
            {
                return Err(fail!(
                    LimitExceeded,
                    "attribute \"{}\" has {} entries, more than the limit of {}",
                    attr.name,
                    list.len(),
                    limits::MAX_ATTR_LIST
                ));
            }
            if let AttrValue::Str(text) = &attr.value
                && text.len() > limits::MAX_NAME_BYTES
            {
                return Err(fail!(
                    LimitExceeded,
                    "attribute \"{}\" is a string of more than {} bytes",
                    attr.name,
                    limits::MAX_NAME_BYTES
                ));
            }
        }
        Ok(Attrs { attrs })
    }

    fn get(&self, name: &str) -> Option<&'a AttrValue> {
        self.attrs
            .iter()
            .find(|attr| attr.name == name)
            .map(|attr| &attr.value)
    }

    /// An optional integer attribute.
    pub fn opt_int(&self, name: &str) -> Option<i64> {
        match self.get(name) {
            Some(AttrValue::Int(value)) => Some(*value),
            _ => None,
        }
    }

    /// A required integer attribute.
    ///
    /// # Errors
    /// `MissingAttribute` when absent.
    pub fn int(&self, name: &str) -> Result<i64> {
        self.opt_int(name)
            .ok_or_else(|| fail!(MissingAttribute, "attribute \"{name}\" is required"))
    }

    /// An integer attribute with a default.
    pub fn int_or(&self, name: &str, default: i64) -> i64 {
        self.opt_int(name).unwrap_or(default)
    }

    /// A boolean attribute with a default.
    pub fn bool_or(&self, name: &str, default: bool) -> bool {
        match self.get(name) {
            Some(AttrValue::Bool(value)) => *value,
            _ => default,
        }
    }

    /// An optional list-of-integers attribute.
    pub fn opt_ints(&self, name: &str) -> Option<&'a [i64]> {
        match self.get(name) {
            Some(AttrValue::Ints(values)) => Some(values),
            _ => None,
        }
    }

    /// A required list-of-integers attribute.
    ///
    /// # Errors
    /// `MissingAttribute` when absent.
    pub fn ints(&self, name: &str) -> Result<&'a [i64]> {
        self.opt_ints(name)
            .ok_or_else(|| fail!(MissingAttribute, "attribute \"{name}\" is required"))
    }

    /// An optional string attribute.
    pub fn opt_str(&self, name: &str) -> Option<&'a str> {
        match self.get(name) {
            Some(AttrValue::Str(value)) => Some(value),
            _ => None,
        }
    }
}

/// Checks that integer attribute `name` = `value` lies in `low..=high` and converts it.
///
/// # Errors
/// `AttributeOutOfRange` naming the attribute and the range.
pub fn in_range<T: TryFrom<i64>>(name: &str, value: i64, low: i64, high: i64) -> Result<T> {
    if (low..=high).contains(&value)
        && let Ok(converted) = T::try_from(value)
    {
        return Ok(converted);
    }
    Err(fail!(
        AttributeOutOfRange,
        "attribute \"{name}\" = {value} is outside {low}..={high}"
    ))
}

/// Checks that list attribute `name` has exactly `len` entries, each in `low..=high`.
///
/// # Errors
/// `AttributeOutOfRange` naming the attribute.
pub fn pair_in_range(name: &str, values: &[i64], low: i64, high: i64) -> Result<[u32; 2]> {
    match values {
        [first, second] => Ok([
            in_range(name, *first, low, high)?,
            in_range(name, *second, low, high)?,
        ]),
        _ => Err(fail!(
            AttributeOutOfRange,
            "attribute \"{name}\" must have 2 entries, not {}",
            values.len()
        )),
    }
}

/// The first `MAX_NAME_BYTES` bytes of a name for messages (names are not yet length-checked
/// when some messages are built).
fn truncated(name: &str) -> &str {
    let mut end = name.len().min(limits::MAX_NAME_BYTES);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    &name[..end]
}
