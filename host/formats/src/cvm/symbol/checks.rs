//! The checks `parse` applies to a graph's parts: operator names (suffixes, aliases), the
//! storage plan, declared shapes and the attribute objects.

use super::*;

/// `dense_3` → `dense`: the deployed loader skips trailing digits and, when an underscore
/// precedes them, cuts there (cvm-compat §1; `dense_` → `dense` and `_5` → the empty name as
/// the deployed `Node::GetOpName` does, `docs/cvm.md`).
pub(super) fn strip_suffix(name: &str) -> &str {
    let base = name.trim_end_matches(|c: char| c.is_ascii_digit());
    base.strip_suffix('_').unwrap_or(name)
}

/// The operator of a CVM graph named `name`: one of the 37 operators the deployed runtime has
/// kernels for (engine codes below 100).
pub fn cvm_op(name: &str) -> Option<&'static ops::OpDef> {
    ops::by_name(name).filter(|op| op.code < 100)
}

/// Other names the deployed runtime registers for its operators (`add_alias` under `src/top/`),
/// with the operator each names. The graph checks and the legacy gas treat such a node as that
/// operator, but no kernel is registered under the alias: loading the model fails with a
/// `VERIFY` ("function undefined", class 1). The `__x__` names are reached through a suffix
/// (`__add_symbol___1`), since a trailing `_` is cut.
pub const ALIASES: [(&str, &str); 11] = [
    ("add", "broadcast_add"),
    ("subtract", "broadcast_sub"),
    ("multiply", "broadcast_mul"),
    ("__add_symbol__", "broadcast_add"),
    ("__sub_symbol__", "broadcast_sub"),
    ("__mul_symbol__", "broadcast_mul"),
    ("__max_symbol__", "broadcast_max"),
    ("__div_symbol__", "broadcast_div"),
    ("__greater_symbol__", "broadcast_greater"),
    ("nn.relu", "relu"),
    ("vision.non_max_suppression", "non_max_suppression"),
];

/// Operators the deployed loader lets write an output into the storage of one of their inputs,
/// spelled as deployed (`nagetive`: `negative` never qualifies; cvm-compat §1).
pub const IN_PLACE_OPS: [&str; 14] = [
    "flatten",
    "relu",
    "expand_dims",
    "reshape",
    "squeeze",
    "abs",
    "cvm_precision",
    "elemwise_add",
    "elemwise_sub",
    "nagetive",
    "clip",
    "cvm_clip",
    "cvm_right_shift",
    "cvm_left_shift",
];

/// The in-place check of the deployed loader's memory plan: an operator off [`IN_PLACE_OPS`]
/// writes no output into the storage id of one of its inputs. (The plan's size is checked when a
/// model is built: [`storage_size`].)
///
/// The in-place check reads the inputs as written and the row pointers of the JSON
/// (`written_rows`, empty when absent), before either is checked (cvm_1.0.0) or replaced
/// (cvm_1.1.0): an entry past those arrays is read out of bounds there (undefined behaviour; a
/// crash when `node_row_ptr` is absent).
pub(super) fn check_storage(
    nodes: &[SymbolNode],
    written_inputs: &[Vec<(usize, usize)>],
    written_rows: &[usize],
    storage_ids: &[u64],
) -> Result<(), Rejection> {
    let storage = |node: usize, index: usize| {
        written_rows
            .get(node)
            .map(|&row| entry_id(row, index))
            .and_then(|entry| storage_ids.get(entry))
            .ok_or_else(|| {
                bad(format!(
                    "the in-place check reads entry ({node}, {index}) through node_row_ptr {written_rows:?}, past its arrays (undefined behaviour in the deployed loader)"
                ))
            })
    };
    for (id, node) in nodes.iter().enumerate() {
        let NodeKind::Op(op) = node.kind else {
            continue;
        };
        if IN_PLACE_OPS.contains(&op.name) {
            continue;
        }
        for output in 0..node.outputs() {
            let written = storage(id, output)?;
            for &(input, index) in &written_inputs[id] {
                if storage(input, index)? == written {
                    return Err(bad(format!(
                        "node {id} ({}): operator {} writes output {output} into storage id {written} of its input ({input}, {index}); only {} may reuse an input's storage",
                        quote(&node.name),
                        op.name,
                        IN_PLACE_OPS.join(", ")
                    )));
                }
            }
        }
    }
    Ok(())
}

/// The deployed runtime's storage size (`CVMAPIGetStorageSize`): every entry needs 4 bytes per
/// element (every entry is int32), entries with one storage id share the largest of their
/// sizes, and the sizes of all ids are summed.
///
/// # Errors
/// `LimitExceeded` above 2^32 bytes, as the deployed loader rejects it.
pub fn storage_size(storage_ids: &[u64], shapes: &[Vec<u32>]) -> Result<u64, Rejection> {
    let mut pool: BTreeMap<u64, u64> = BTreeMap::new();
    for (storage, shape) in storage_ids.iter().zip(shapes) {
        // Shapes are checked first: at most 2^30 elements each.
        let bytes = 4 * shape.iter().map(|&d| u64::from(d)).product::<u64>();
        let slot = pool.entry(*storage).or_insert(0);
        *slot = (*slot).max(bytes);
    }
    let total = pool
        .values()
        .fold(0u64, |total, &bytes| total.saturating_add(bytes));
    if total > 1 << 32 {
        return Err(fail!(
            LimitExceeded,
            "symbol: the storage plan needs {total} bytes, more than 2^32"
        )
        .into());
    }
    Ok(total)
}

/// Checks one declared shape: 1..=6 dims, each in 1..=2^24, running product ≤ 2^30.
pub(super) fn check_shape(value: &Value, entry_id: usize) -> Result<Vec<u32>, Rejection> {
    let dims = array(value, &format!("attrs.shape[{entry_id}]"))?;
    if dims.is_empty() || dims.len() > 6 {
        return Err(fail!(
            LimitExceeded,
            "symbol: attrs.shape[{entry_id}] has {} dimensions, not 1..=6",
            dims.len()
        )
        .into());
    }
    let mut size = 1u64;
    dims.iter()
        .map(|dim| {
            let d = dim.as_i64().ok_or_else(|| {
                fatal(format!(
                    "attrs.shape[{entry_id}] has a dimension that is not a 64-bit integer{}",
                    if dim.is_null() {
                        // The reader keeps every other bare token as null.
                        " (a fraction, an exponent, true, false, null or a wider number)".into()
                    } else {
                        format!(": {}", excerpt(&dim.to_string()))
                    }
                ))
            })?;
            if !(1..=1 << 24).contains(&d) {
                return Err(fail!(
                    LimitExceeded,
                    "symbol: attrs.shape[{entry_id}] has dimension {dim}, not in 1..=2^24"
                )
                .into());
            }
            size *= d.unsigned_abs();
            if size > 1 << 30 {
                return Err(fail!(
                    LimitExceeded,
                    "symbol: attrs.shape[{entry_id}] has more than 2^30 elements"
                )
                .into());
            }
            Ok(d as u32)
        })
        .collect()
}

/// Parses one operator's `op_attrs` string as the deployed loader does: a JSON object whose
/// values are all strings (an empty string is not one). Every key is kept, hidden ones
/// (`__x__`) included: whether they are allowed depends on the operator.
pub(super) fn parse_op_attrs(text: &str) -> Result<BTreeMap<String, String>, String> {
    let parsed = crate::cvm::json::parse(text.as_bytes())?;
    let object = parsed.as_object().ok_or("not a JSON object")?;
    let mut out = BTreeMap::new();
    for (key, value) in object {
        let text = value.as_str().ok_or_else(|| {
            format!(
                "the value of {} is {}, not a string",
                quote(key),
                excerpt(&value.to_string())
            )
        })?;
        out.insert(key.clone(), text.to_string());
    }
    Ok(out)
}

/// Whether `key` is hidden from parameter parsers (`kAllowHidden`): more than 4 bytes, starting
/// and ending with `__`. A parser ignores it; an operator without parameters still counts it.
pub fn is_hidden_key(key: &str) -> bool {
    key.len() > 4 && key.starts_with("__") && key.ends_with("__")
}

/// The operators the deployed runtime registers without a parameter parser: any attribute on
/// them is rejected by a `VERIFY` (class 1), where an operator with parameters rejects an
/// unknown one with a parameter error (class 2).
pub const PARAMETERLESS_OPS: [&str; 14] = [
    "relu",
    "abs",
    "negative",
    "cvm_precision",
    "elemwise_add",
    "elemwise_sub",
    "flatten",
    "where",
    "broadcast_add",
    "broadcast_sub",
    "broadcast_mul",
    "broadcast_div",
    "broadcast_max",
    "broadcast_greater",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suffixes_are_stripped() {
        assert_eq!(strip_suffix("dense_3"), "dense");
        assert_eq!(strip_suffix("cvm_right_shift"), "cvm_right_shift");
        assert_eq!(strip_suffix("cvm_right_shift_12"), "cvm_right_shift");
        assert_eq!(strip_suffix("relu"), "relu");
        assert_eq!(strip_suffix("_5"), "");
        assert_eq!(strip_suffix("dense_"), "dense");
        assert_eq!(strip_suffix("dense__3"), "dense_");
        assert_eq!(strip_suffix("conv2d"), "conv2d");
        assert_eq!(strip_suffix("123"), "123");
    }
}
