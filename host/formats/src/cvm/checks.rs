//! The deployed runtime's load checks that go beyond reading the graph: its memory plan,
//! kernel behaviour it leaves undefined, its parameter parsers' checks and the stored
//! parameters against their declared shapes and precisions.

use super::*;

/// The deployed runtime computes in the graph's memory plan: every entry is a view of the
/// buffer of its storage id, the parameters are written there once at load (in the order of
/// the params file), `data` before every inference, and each operator's outputs when it runs.
/// A plan in which an entry is written while another entry of its storage id is still to be
/// read makes the deployed runtime compute with the overwritten value, which the engine (that
/// keeps every value) does not reproduce: such a plan is rejected (class 1). An operator may
/// write into the storage of an input it reads last (in place); a parameter that is read must
/// keep its storage to itself, since it is read again at every inference.
pub(super) fn check_memory_plan(
    graph: &Symbol,
    data_node: usize,
    arrays: &[params::Array],
) -> Result<(), Rejection> {
    const AFTER_ALL: usize = usize::MAX;
    let rows = &graph.node_row_ptr;
    let entries = rows.last().copied().unwrap_or(0);
    let mut last_read = vec![None::<usize>; entries];
    for (id, node) in graph.nodes.iter().enumerate() {
        for &(n, k) in &node.inputs {
            let read = &mut last_read[rows[n] + k];
            *read = Some(read.map_or(id, |r: usize| r.max(id)));
        }
    }
    for &(n, k) in &graph.heads {
        last_read[rows[n] + k] = Some(AFTER_ALL);
    }
    // When each array is loaded last (a name given twice is loaded twice).
    let mut loaded: HashMap<&str, usize> = HashMap::new();
    for (order, array) in arrays.iter().enumerate() {
        loaded.insert(array.name.as_str(), order);
    }
    let describe = |entry: usize| {
        let node = rows.partition_point(|&row| row <= entry) - 1;
        format!("entry {entry} ({})", quote(&graph.nodes[node].name))
    };
    let conflict = |kept: usize, written: usize| -> Rejection {
        fail!(
            MalformedModel,
            "symbol: the memory plan writes {} into storage id {} while {} is still to be read there: the deployed runtime computes with the overwritten value",
            describe(written),
            graph.storage_ids[written],
            describe(kept)
        )
        .into()
    };
    let is_parameter =
        |node: usize| graph.nodes[node].kind == NodeKind::Variable && node != data_node;
    // The entries of each storage id: parameters with their load order, and the entries
    // written at an inference with their time (`data` at 0, node n's outputs at n + 1).
    // (time or load order, entry), for the parameters and for the rest of one storage id.
    type Timed = Vec<(usize, usize)>;
    let mut by_storage: BTreeMap<u64, (Timed, Timed)> = BTreeMap::new();
    for (id, node) in graph.nodes.iter().enumerate() {
        for output in 0..node.outputs() {
            let entry = rows[id] + output;
            let (parameters, written) = by_storage.entry(graph.storage_ids[entry]).or_default();
            if is_parameter(id) {
                let order = loaded.get(node.name.as_str()).copied().unwrap_or(0);
                parameters.push((order, entry));
            } else {
                written.push((if id == data_node { 0 } else { id + 1 }, entry));
            }
        }
    }
    for (parameters, written) in by_storage.values_mut() {
        // A parameter that is read keeps its storage: nothing written at an inference, and no
        // parameter loaded after it, may share it.
        parameters.sort_unstable();
        for (position, &(order, entry)) in parameters.iter().enumerate() {
            if last_read[entry].is_none() {
                continue;
            }
            if let Some(&(_, over)) = written.first() {
                return Err(conflict(entry, over));
            }
            if let Some(&(_, over)) = parameters[position + 1..]
                .iter()
                .find(|&&(later, _)| later > order)
            {
                return Err(conflict(entry, over));
            }
        }
        // An entry written at an inference is overwritten by the next one written there, if
        // that comes before its last read (an operator reading it last may write in place).
        written.sort_unstable();
        let read_time = |entry: usize| last_read[entry].map(|r| r.saturating_add(1));
        for pair in written.windows(2) {
            let [(kept_at, kept), (at, over)] = [pair[0], pair[1]];
            if read_time(kept).is_some_and(|read| kept_at <= at && at < read) {
                return Err(conflict(kept, over));
            }
            // Two outputs of one operator: whichever is read later is overwritten by the other.
            if kept_at == at && read_time(over).is_some_and(|read| at < read) {
                return Err(conflict(over, kept));
            }
        }
    }
    Ok(())
}

/// Whether `node` is a `max` that reduces the whole tensor through the deployed kernels' branch
/// that starts from 0 (no `axis`, or an empty one, and no `exclude`): both deployed backends
/// then give max(0, x…) where spec 001 gives the true maximum (cvm-compat §6).
pub(super) fn starts_from_zero(node: &SymbolNode, attrs: &[Attr]) -> bool {
    let is_max = matches!(node.kind, NodeKind::Op(op) if op.name == "max");
    let attr = |name: &str| attr(attrs, name);
    let every_axis = match attr("axis") {
        None => true,
        Some(AttrValue::Ints(axes)) => axes.is_empty(),
        Some(_) => false,
    };
    let exclude = matches!(attr("exclude"), Some(AttrValue::Bool(true)));
    is_max && every_axis && !exclude
}

/// Operator node `id` where a deployed kernel has undefined behaviour on shapes its loader
/// accepts: a conv2d weight that disagrees with `channels` or `kernel_size` (the kernel overruns
/// memory), a `where` whose condition is not of x's shape (it copies bytes, not elements).
pub(super) fn undefined_kernel_behaviour(
    graph: &Symbol,
    id: usize,
    op: &ops::OpDef,
    attrs: &[Attr],
    index: u32,
) -> Option<Error> {
    let node = &graph.nodes[id];
    let entry = |id: usize| graph.node_row_ptr[id];
    if op.name == "conv2d"
        && let Some(&(w, k)) = node.inputs.get(1)
    {
        let weight = &graph.shapes[entry(w) + k];
        let groups = int(attrs, "groups").unwrap_or(1);
        let per_group = node
            .inputs
            .first()
            .and_then(|&(n, k)| graph.shapes[entry(n) + k].get(1))
            .and_then(|&c| i64::from(c).checked_div(groups))
            .map(|c| vec![c]);
        let declared = [
            ints(attrs, "channels"),
            ints(attrs, "kernel_size"),
            per_group,
        ];
        let from_weight = [
            weight.first().map(|&c| vec![i64::from(c)]),
            weight
                .get(2..4)
                .map(|d| d.iter().map(|&v| i64::from(v)).collect()),
            weight.get(1).map(|&c| vec![i64::from(c)]),
        ];
        for ((name, declared), actual) in ["channels", "kernel_size", "input channels per group"]
            .iter()
            .zip(declared)
            .zip(from_weight)
        {
            if let (Some(declared), Some(actual)) = (declared, actual)
                && declared != actual
            {
                return Some(fail!(
                    ShapeMismatch,
                    "symbol: node {id} ({}): conv2d {name} {declared:?} disagrees with the weight {weight:?}: the deployed runtime never checks it and overruns memory (undefined behaviour)", quote(&node.name))
                .at_node(index, &node.name, op.name));
            }
        }
    }
    if op.name == "where"
        && let [cond, x, ..] = node.inputs.as_slice()
    {
        let shape_of = |(n, k): (usize, usize)| &graph.shapes[entry(n) + k];
        if shape_of(*cond) != shape_of(*x) {
            return Some(fail!(
                ShapeMismatch,
                "symbol: node {id} ({}): where with a condition of shape {:?} selecting rows of {:?}: the deployed runtime copies bytes instead of elements (undefined behaviour)", quote(&node.name),
                shape_of(*cond),
                shape_of(*x)
            )
            .at_node(index, &node.name, op.name));
        }
    }
    None
}

/// Names of the graph's nodes in the canonical model, which needs them unique, non-empty and at
/// most [`cvm_engine::limits::MAX_NAME_BYTES`] bytes where the deployed runtime asks nothing of
/// a name but that variables differ: a name that is empty, too long or (for an operator) already
/// taken by a variable or an earlier node becomes `#<node id>` (with more `#` in front while that
/// is taken too). Names are labels only: the input is always `data`, parameters are matched to
/// their arrays by their names in the graph before this renaming.
pub(super) fn canonical_names(graph: &Symbol) -> Vec<String> {
    let usable = |name: &str| !name.is_empty() && name.len() <= cvm_engine::limits::MAX_NAME_BYTES;
    let mut taken: std::collections::HashSet<String> = graph
        .nodes
        .iter()
        .filter(|node| node.kind == NodeKind::Variable && usable(&node.name))
        .map(|node| node.name.clone())
        .collect();
    graph
        .nodes
        .iter()
        .enumerate()
        .map(|(id, node)| {
            let variable = node.kind == NodeKind::Variable;
            if usable(&node.name) && (variable || !taken.contains(&node.name)) {
                taken.insert(node.name.clone());
                return node.name.clone();
            }
            let mut name = format!("#{id}");
            while taken.contains(&name) {
                name.insert(0, '#');
            }
            taken.insert(name.clone());
            name
        })
        .collect()
}

/// The deployed checks of node `id` (operator `op`) that fail with `LOG(FATAL)` or a parameter
/// error (class 2) where the engine's own validation would find the same fault with a code of
/// class 1: a lower bound of the parameter declarations (dense `units` ≥ 1, expand_dims
/// `num_newaxis` ≥ 1) and the shapes `CVM_ASSIGN_INPUT_SHAPE` imposes (dense weight (units, K) and
/// bias (units), conv2d bias (channels)).
pub(super) fn deployed_parameter_check(
    graph: &Symbol,
    id: usize,
    op: &ops::OpDef,
    attrs: &[Attr],
) -> Option<Error> {
    let node = &graph.nodes[id];
    let int = |key: &str| int(attrs, key);
    let shape = |input: usize| {
        node.inputs
            .get(input)
            .map(|&(n, k)| &graph.shapes[graph.node_row_ptr[n] + k])
    };
    let below_one = |key: &str| {
        int(key).filter(|&v| v < 1).map(|value| {
            fail!(
                AttributeOutOfRange,
                "symbol: node {id} ({}): {} attribute {} = {value} is below its lower bound 1",
                quote(&node.name),
                op.name,
                quote(key)
            )
        })
    };
    let assigned = |input: usize, what: &str, expected: Vec<i64>| {
        let declared = shape(input)?;
        let declared: Vec<i64> = declared.iter().map(|&d| i64::from(d)).collect();
        (declared != expected).then(|| {
            fail!(
                ShapeMismatch,
                "symbol: node {id} ({}): the {what} is declared {declared:?}, {} needs {expected:?}", quote(&node.name),
                op.name
            )
        })
    };
    let use_bias = !matches!(attr(attrs, "use_bias"), Some(AttrValue::Bool(false)));
    match op.name {
        "dense" => below_one("units").or_else(|| {
            let units = int("units")?;
            let data = shape(0).filter(|s| s.len() == 2)?;
            shape(1).filter(|s| s.len() == 2)?;
            assigned(1, "weight", vec![units, i64::from(data[1])])
                .or_else(|| use_bias.then(|| assigned(2, "bias", vec![units])).flatten())
        }),
        "expand_dims" => below_one("num_newaxis"),
        "conv2d" if use_bias => {
            // Only once the `VERIFY`s before it pass: 4-D data, two entries each of
            // kernel_size, padding (0..=4096), strides and dilation (1..=4096), and groups that
            // divide the input channels and `channels`.
            let channels = int("channels")?;
            let tuple = |key: &str, default: [i64; 2]| ints(attrs, key).unwrap_or(default.to_vec());
            let pairs_in = |key: &str, default, low| {
                let values = tuple(key, default);
                values.len() == 2 && values.iter().all(|d| (low..=4096).contains(d))
            };
            let groups = int("groups").unwrap_or(1);
            let data_channels = shape(0).filter(|s| s.len() == 4).map(|s| i64::from(s[1]))?;
            let verified = tuple("kernel_size", [0, 0]).len() == 2
                && pairs_in("padding", [0, 0], 0)
                && pairs_in("strides", [1, 1], 1)
                && pairs_in("dilation", [1, 1], 1)
                && groups > 0
                && data_channels % groups == 0
                && channels % groups == 0;
            verified
                .then(|| assigned(2, "bias", vec![channels]))
                .flatten()
        }
        _ => None,
    }
}

/// The data types a deployed parameter declared with `CVMUTIL_DECLARE_DTYPE_FIELD` reads.
const DEPLOYED_DTYPES: [&str; 11] = [
    "float16", "float32", "float64", "uint8", "uint16", "uint32", "uint64", "int8", "int16",
    "int32", "int64",
];

/// Why the deployed parser cannot read attribute `key` = `text` of `op` as the data type or
/// layout it declares (`include/cvm/top/`, `include/cvm/layout.h`), if it cannot. Values it
/// reads but the operator does not support are left to the operator's own checks (class 1).
pub(super) fn deployed_enum_problem(op: &str, key: &str, text: &str) -> Option<String> {
    let value = text;
    match (op, key) {
        ("conv2d", "out_dtype") if value != "same" && !DEPLOYED_DTYPES.contains(&value) => {
            Some("not a data type".into())
        }
        ("sum" | "max", "dtype") if !DEPLOYED_DTYPES.contains(&value) => {
            Some("not a data type".into())
        }
        ("conv2d", "out_layout") if value != "__undef__" => layout_problem(value),
        _ => None,
    }
}

/// Why `layout` is not a layout as `Layout::parse` reads one: upper-case axes, each once, and
/// lower-case sub-axes of a present axis, each once and after a size; nothing else, and not
/// empty.
fn layout_problem(layout: &str) -> Option<String> {
    let (mut axes, mut subaxes) = ([false; 26], [false; 26]);
    let mut factor = 0u64;
    let mut any = false;
    for c in layout.bytes() {
        match c {
            b'A'..=b'Z' => {
                let axis = usize::from(c - b'A');
                if factor != 0 || axes[axis] {
                    return Some(format!(
                        "not a layout: axis {} misplaced or repeated",
                        char::from(c)
                    ));
                }
                axes[axis] = true;
            }
            b'a'..=b'z' => {
                let axis = usize::from(c - b'a');
                if factor == 0 || subaxes[axis] {
                    return Some(format!(
                        "not a layout: sub-axis {} without a size or repeated",
                        char::from(c)
                    ));
                }
                subaxes[axis] = true;
                factor = 0;
            }
            b'0'..=b'9' => {
                factor = factor
                    .saturating_mul(10)
                    .saturating_add(u64::from(c - b'0'))
            }
            _ => return Some(format!("not a layout: '{}'", c.escape_ascii())),
        }
        any |= c.is_ascii_alphabetic();
    }
    if !any {
        return Some("not a layout: no axis".into());
    }
    (0..26)
        .find(|&axis| subaxes[axis] && !axes[axis])
        .map(|axis| {
            format!(
                "not a layout: sub-axis of the missing axis {}",
                char::from(b'A' + axis as u8)
            )
        })
}

/// A reshape `shape` without the entries the deployed shape rule passes over: those below −4,
/// except the two that follow a −4 (the sizes it splits into, checked as such).
pub(super) fn without_skipped_reshape_codes(target: &[i64]) -> Vec<i64> {
    let mut kept = Vec::with_capacity(target.len());
    let mut split_arguments = 0;
    for &value in target {
        if split_arguments > 0 {
            split_arguments -= 1;
            kept.push(value);
        } else if value == -4 {
            split_arguments = 2;
            kept.push(value);
        } else if value >= -4 {
            kept.push(value);
        }
    }
    kept
}

/// Names of the graph's outputs in the canonical model: the node's name, with `:<index>` for a
/// second output. The canonical model needs them unique and at most
/// [`cvm_engine::limits::MAX_NAME_BYTES`] bytes, where the deployed runtime takes any list of
/// heads, the same entry twice included: a name that is too long or already used becomes
/// `#head<index>` (with more `#` in front while that is used too).
pub(super) fn head_names(graph: &Symbol, names: &[String]) -> Vec<String> {
    let mut used = std::collections::HashSet::new();
    graph
        .heads
        .iter()
        .enumerate()
        .map(|(index, &(node, output))| {
            let mut name = match output {
                0 => names[node].clone(),
                _ => format!("{}:{output}", names[node]),
            };
            if name.len() > cvm_engine::limits::MAX_NAME_BYTES || used.contains(&name) {
                name = format!("#head{index}");
                while used.contains(&name) {
                    name.insert(0, '#');
                }
            }
            used.insert(name.clone());
            name
        })
        .collect()
}

/// Attributes without a default in the deployed runtime's parameter declarations
/// (`include/cvm/top/nn.h`, `tensor.h`): a CVM graph must give them even where the engine's
/// operator has a default or derives the value from the shapes.
pub fn required_attrs(op: &str) -> &'static [&'static str] {
    match op {
        "dense" => &["units"],
        "conv2d" => &["channels", "kernel_size"],
        "max_pool2d" => &["pool_size"],
        "upsampling" => &["scale"],
        "cvm_lut" => &["in_dim"],
        "cvm_clip" => &["precision"],
        "cvm_left_shift" | "cvm_right_shift" => &["precision", "shift_bit"],
        "clip" => &["a_max", "a_min"],
        "repeat" => &["repeats"],
        "expand_dims" => &["axis"],
        "reshape" => &["shape"],
        _ => &[],
    }
}

pub(super) fn same_shape(stored: &[i64], declared: &[u32]) -> bool {
    stored.len() == declared.len()
        && stored
            .iter()
            .zip(declared)
            .all(|(&a, &b)| a == i64::from(b))
}

/// A parameter array's shape equals the declared one and its values lie within the precision.
pub(super) fn check_param(
    array: &params::Array,
    shape: &[u32],
    precision: u8,
) -> Result<(), Error> {
    let name = &array.name;
    if !same_shape(&array.shape, shape) {
        return Err(fail!(
            ShapeMismatch,
            "params: parameter {} has shape {:?}, the graph declares {shape:?}",
            quote(name),
            array.shape
        ));
    }
    let bound = precision_bound(precision);
    if let Some((index, value)) = array
        .data
        .values()
        .iter()
        .enumerate()
        .find(|&(_, &v)| i64::from(v).abs() > bound)
    {
        return Err(fail!(
            InvalidParam,
            "params: parameter {}: value {value} at index {index} exceeds precision {precision}",
            quote(name)
        ));
    }
    Ok(())
}
