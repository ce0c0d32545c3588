//! The legacy gas of the deployed runtime (cvm-compat §5): `CVMAPIGetGasFromGraphFile`.

use super::*;

/// `CVMAPIGetGasFromGraphFile`: the legacy gas of a graph JSON (cvm-compat §5), after the
/// checks of [`check_graph`].
///
/// # Errors
/// A failed check, or `LimitExceeded` past the deployed limits (class 1).
pub fn graph_gas(symbol_bytes: &[u8]) -> Result<u64, Rejection> {
    let checked = check_graph(symbol_bytes)?;
    legacy_gas(&checked.symbol).map_err(Rejection::from)
}

/// Gas as `CVMAPIGetGasFromGraphFile` computes it (cvm-compat §5), from declared shapes.
///
/// # Errors
/// `LimitExceeded` when a node's base exceeds 2^30 or the totals exceed 2^40, as the runtime
/// rejects them.
pub fn legacy_gas(graph: &Symbol) -> Result<u64, Error> {
    let size =
        |entry: usize| -> u64 { graph.shapes[entry].iter().map(|&d| u64::from(d)).product() };
    let (mut memory, mut ops) = (0u64, 0u64);
    for (id, node) in graph.nodes.iter().enumerate() {
        let first = graph.node_row_ptr[id];
        let NodeKind::Op(op) = node.kind else {
            memory += 5 * size(first);
            if memory > 1 << 40 {
                return Err(fail!(
                    LimitExceeded,
                    "legacy gas: memory exceeds 2^40 at variable {}",
                    quote(&node.name)
                ));
            }
            continue;
        };
        let input_entry = |k: usize| node.inputs.get(k).map(|&(n, o)| graph.node_row_ptr[n] + o);
        let use_bias = node
            .op_attrs
            .get("use_bias")
            .is_none_or(|v| parse_bool(v).unwrap_or(true));
        let base = match op.name {
            "dense" => {
                let k = input_entry(1)
                    .and_then(|e| graph.shapes[e].get(1).copied())
                    .unwrap_or(0);
                3 * u64::from(k) + u64::from(use_bias)
            }
            "conv2d" => {
                let weight = input_entry(1).map_or(0, size);
                let out_channels = input_entry(1)
                    .and_then(|e| graph.shapes[e].first().copied())
                    .unwrap_or(1)
                    .max(1);
                3 * (weight / u64::from(out_channels)) + u64::from(use_bias)
            }
            "max_pool2d" => {
                let pool = node.op_attrs.get("pool_size").and_then(|t| {
                    parse_attr(op.name, "pool_size", t, Some(AttrKind::Ints))
                        .ok()
                        .flatten()
                });
                match pool {
                    Some(AttrValue::Ints(values)) => {
                        values.iter().take(2).map(|&v| v.max(0) as u64).product()
                    }
                    _ => 1,
                }
            }
            "sum" => {
                let input = input_entry(0).map_or(0, size);
                input / size(first).max(1)
            }
            "non_max_suppression" => {
                20 * input_entry(0)
                    .and_then(|e| graph.shapes[e].first().copied())
                    .map_or(0, u64::from)
            }
            _ => 1,
        };
        if base > 1 << 30 {
            return Err(fail!(
                LimitExceeded,
                "legacy gas: node {} has base cost {base} > 2^30",
                quote(&node.name)
            ));
        }
        ops += base * size(first);
        if ops > 1 << 40 {
            return Err(fail!(
                LimitExceeded,
                "legacy gas: operations exceed 2^40 at node {}",
                quote(&node.name)
            ));
        }
        memory += 5 * (first..graph.node_row_ptr[id + 1]).map(size).sum::<u64>();
        if memory > 1 << 40 {
            return Err(fail!(
                LimitExceeded,
                "legacy gas: memory exceeds 2^40 at node {}",
                quote(&node.name)
            ));
        }
    }
    Ok(ops + memory)
}
