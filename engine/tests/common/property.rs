//! The property harness of both operator families: cases, verdicts, the engine through the
//! operator table, the comparison and the report.
//!
//! A suite (`properties.rs` for the CVM operators, `cinn_properties.rs` for the CINN primitives)
//! is a [`Suite`] value and, per operator, a generator of random [`Case`]s and a plain reference
//! that gives a [`Verdict`]: a refusal, or every output's shape, precision and elements
//! ([`Want`]: exact, within a tolerance of a real result, or a run-time failure).
//! [`Suite::check`] builds the operator from the attributes through its row of `ops::OPS`,
//! infers, prices and runs it, and panics with a report naming the operator, the case number
//! and seed, the attributes, the inputs and the first differing element when the engine and the
//! reference disagree.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a failing property reports by panicking

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Instant;

use super::Rng;
use cvm_engine::attrs::{AttrKind, Attrs};
use cvm_engine::error::ErrorCode;
use cvm_engine::model::{Attr, AttrValue};
use cvm_engine::ops::{self, OpDef, Operator};
use cvm_engine::tensor::{Shape, Tensor, TensorMut, TensorType};

/// 2^31 − 1: the largest magnitude of a precision-32 value.
pub const MAX: i64 = 2_147_483_647;

// ---------------------------------------------------------------------------------------------
// Cases
// ---------------------------------------------------------------------------------------------

/// One application of an operator: attributes and input tensors.
#[derive(Default)]
pub struct Case {
    pub attrs: Vec<Attr>,
    pub inputs: Vec<Tensor>,
}

impl Case {
    /// Sets attribute `name`, replacing an earlier value.
    pub fn set(&mut self, name: &str, value: AttrValue) {
        self.attrs.retain(|attr| attr.name != name);
        self.attrs.push(Attr {
            name: name.into(),
            value,
        });
    }

    /// Adds attribute `name` (an earlier one of that name stays: a duplicate).
    pub fn with(mut self, name: &str, value: AttrValue) -> Case {
        self.attrs.push(Attr {
            name: name.into(),
            value,
        });
        self
    }

    pub fn int(self, name: &str, value: i64) -> Case {
        self.with(name, AttrValue::Int(value))
    }

    pub fn ints(self, name: &str, values: &[i64]) -> Case {
        self.with(name, AttrValue::Ints(values.to_vec()))
    }

    pub fn flag(self, name: &str, value: bool) -> Case {
        self.with(name, AttrValue::Bool(value))
    }

    pub fn text(self, name: &str, value: &str) -> Case {
        self.with(name, AttrValue::Str(value.into()))
    }

    pub fn input(mut self, tensor: Tensor) -> Case {
        self.inputs.push(tensor);
        self
    }

    pub fn attr(&self, name: &str) -> Option<&AttrValue> {
        self.attrs
            .iter()
            .find(|attr| attr.name == name)
            .map(|attr| &attr.value)
    }

    pub fn int_attr(&self, name: &str) -> Option<i64> {
        match self.attr(name) {
            Some(AttrValue::Int(value)) => Some(*value),
            _ => None,
        }
    }

    pub fn ints_attr(&self, name: &str) -> Option<Vec<i64>> {
        match self.attr(name) {
            Some(AttrValue::Ints(values)) => Some(values.clone()),
            _ => None,
        }
    }

    pub fn bool_attr(&self, name: &str) -> Option<bool> {
        match self.attr(name) {
            Some(AttrValue::Bool(value)) => Some(*value),
            _ => None,
        }
    }

    pub fn str_attr(&self, name: &str) -> Option<&str> {
        match self.attr(name) {
            Some(AttrValue::Str(value)) => Some(value),
            _ => None,
        }
    }

    /// A two-entry list attribute with both entries in [low, high], `default` when absent;
    /// `None` when it has another length or an entry outside.
    pub fn pair(&self, name: &str, default: [i64; 2], low: i64, high: i64) -> Option<[i64; 2]> {
        match self.ints_attr(name).as_deref().unwrap_or(&default) {
            &[a, b] if (low..=high).contains(&a) && (low..=high).contains(&b) => Some([a, b]),
            _ => None,
        }
    }

    /// Everything needed to rebuild the case by hand.
    pub fn describe(&self) -> String {
        let attrs: Vec<String> = self
            .attrs
            .iter()
            .map(|attr| format!("{} = {:?}", attr.name, attr.value))
            .collect();
        let mut text = format!("  attributes: [{}]\n", attrs.join(", "));
        for (position, input) in self.inputs.iter().enumerate() {
            text.push_str(&format!(
                "  input {position}: shape {:?}, precision {}",
                input.shape.dims(),
                input.precision
            ));
            if input.data.len() <= 64 {
                text.push_str(&format!(", data {:?}", input.data));
            }
            text.push('\n');
        }
        text
    }
}

/// Spoils the attributes of `case` with an unknown name, a value of the wrong kind or a
/// duplicated name, one of the three at random; the attribute check must refuse each.
pub fn malform(rng: &mut Rng, case: &mut Case, def: &OpDef) {
    match rng.below(3) {
        1 if !def.attrs.is_empty() => {
            let spec = def.attrs[rng.below(def.attrs.len() as u64) as usize];
            case.attrs.retain(|attr| attr.name != spec.name);
            let value = match spec.kind {
                AttrKind::Int | AttrKind::Fixed => AttrValue::Bool(true),
                AttrKind::Bool => AttrValue::Int(1),
                AttrKind::Ints => AttrValue::Str("1".into()),
                AttrKind::Str => AttrValue::Ints(vec![1]),
            };
            case.attrs.push(Attr {
                name: spec.name.into(),
                value,
            });
        }
        2 if !case.attrs.is_empty() => {
            let copy = case.attrs[rng.below(case.attrs.len() as u64) as usize].clone();
            case.attrs.push(copy);
        }
        _ => case.set("no_such_attribute", AttrValue::Int(1)),
    }
}

// ---------------------------------------------------------------------------------------------
// Tensors and indices, for generators and references
// ---------------------------------------------------------------------------------------------

/// A tensor of `dims` and `precision` holding `data` (row-major; every value fits i32).
pub fn tensor(dims: &[u32], precision: u8, data: Vec<i64>) -> Tensor {
    assert_eq!(data.len(), numel(dims), "data for {dims:?}");
    Tensor {
        shape: Shape::new(dims.to_vec()),
        precision,
        data: data
            .into_iter()
            .map(|v| i32::try_from(v).unwrap())
            .collect(),
    }
}

/// 2^(p−1) − 1, the largest magnitude of precision p (0 for p = 0).
pub fn bound(p: u8) -> i64 {
    (1i64 << p.saturating_sub(1)) - 1
}

pub fn numel(dims: &[u32]) -> usize {
    dims.iter().map(|&d| d as usize).product()
}

/// Row-major position of `index` in a tensor of dimensions `dims`:
/// Σ_i index_i · Π_{j>i} dims_j.
pub fn flat(index: &[usize], dims: &[u32]) -> usize {
    assert_eq!(index.len(), dims.len(), "index {index:?} for dims {dims:?}");
    index.iter().zip(dims).fold(0, |acc, (&i, &d)| {
        assert!(i < d as usize, "index {index:?} outside {dims:?}");
        acc * d as usize + i
    })
}

/// The index at row-major position `position` of dimensions `dims`.
pub fn unflat(mut position: usize, dims: &[u32]) -> Vec<usize> {
    let mut index = vec![0; dims.len()];
    for (axis, &dim) in dims.iter().enumerate().rev() {
        let dim = (dim as usize).max(1);
        index[axis] = position % dim;
        position /= dim;
    }
    index
}

/// Every index of `dims`, row-major, the last axis fastest (one, [], for rank 0; none when a
/// dimension is 0).
pub fn indices(dims: &[u32]) -> Vec<Vec<usize>> {
    (0..numel(dims)).map(|p| unflat(p, dims)).collect()
}

/// The element of `t` at `index`.
pub fn at(t: &Tensor, index: &[usize]) -> i64 {
    i64::from(t.data[flat(index, t.shape.dims())])
}

/// The dimensions of the concatenation of `inputs` along `axis` (an axis of the first input):
/// the first input's, with the axis summed over all; `None` when an input's rank or one of its
/// dimensions off the axis differs from the first input's.
pub fn concat_dims(inputs: &[Tensor], axis: usize) -> Option<Vec<u32>> {
    let mut out = inputs[0].shape.dims().to_vec();
    out[axis] = 0;
    for input in inputs {
        let dims = input.shape.dims();
        let agrees =
            dims.len() == out.len() && (0..out.len()).all(|i| i == axis || dims[i] == out[i]);
        if !agrees {
            return None;
        }
        out[axis] += dims[axis];
    }
    Some(out)
}

/// The element at output index `y` of the concatenation of `inputs` along `axis`: of the input
/// whose stretch of the axis holds y_axis, at y_axis less the lengths of the inputs before it.
pub fn concat_at(inputs: &[Tensor], axis: usize, y: &[usize]) -> i64 {
    let mut position = y[axis];
    for input in inputs {
        let length = input.shape.dims()[axis] as usize;
        if position < length {
            let mut index = y.to_vec();
            index[axis] = position;
            return at(input, &index);
        }
        position -= length;
    }
    unreachable!("output index {y:?} beyond every input")
}

// ---------------------------------------------------------------------------------------------
// Verdicts
// ---------------------------------------------------------------------------------------------

/// What the reference says about one output element.
#[derive(Clone, Copy, Debug)]
pub enum Want {
    /// Exactly this value.
    Exact(i64),
    /// A value within `tol` of the real result `exact` (both in units of the output's last
    /// place).
    Near { exact: f64, tol: f64 },
    /// Like `Near`, but the real result lies within `tol` of ±(2^31 − 1): `IntegerOverflow`
    /// is an acceptable answer too.
    Edge { exact: f64, tol: f64 },
    /// No value: the run fails with this code (at the first such element).
    Fail(ErrorCode),
}

impl From<i64> for Want {
    fn from(value: i64) -> Want {
        Want::Exact(value)
    }
}

/// Slack on the f64-based tolerances, in ulp: far above the f64 references' own error (below
/// 2^−18 ulp for results below 2^33), far below any real disagreement.
pub const SLACK: f64 = 1e-3;

/// An exact integer result: the value, or `IntegerOverflow` outside ±(2^31 − 1).
pub fn exact(v: i128) -> Want {
    if v.abs() <= i128::from(MAX) {
        Want::Exact(v as i64)
    } else {
        Want::Fail(ErrorCode::IntegerOverflow)
    }
}

/// A real result (in ulp) the engine must reach within `tol`, with the overflow decision
/// tolerant within `tol` of the limit: the tolerance hook of the f64-based references.
#[allow(clippy::float_arithmetic, clippy::cast_precision_loss)] // the f64 tolerance itself
pub fn near(real: f64, tol: f64) -> Want {
    assert!(!real.is_nan(), "NaN reference");
    let limit = MAX as f64;
    let magnitude = real.abs();
    if magnitude < limit - tol - SLACK {
        Want::Near { exact: real, tol }
    } else if magnitude <= limit + tol + SLACK {
        Want::Edge { exact: real, tol }
    } else {
        Want::Fail(ErrorCode::IntegerOverflow)
    }
}

/// What the reference expects of one output.
pub struct Expect {
    pub dims: Vec<u32>,
    pub precision: u8,
    pub data: Vec<Want>,
}

/// An output of dimensions `dims` whose element at every index `y` is `value(y)` (an `i64` is
/// an exact value).
pub fn expect<W: Into<Want>>(
    dims: Vec<u32>,
    precision: u8,
    mut value: impl FnMut(&[usize]) -> W,
) -> Expect {
    let count = dims
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(u64::from(d)));
    assert!(
        count.is_some_and(|n| n <= 1 << 22),
        "generated case too large: output {dims:?}"
    );
    let data = indices(&dims).iter().map(|y| value(y).into()).collect();
    Expect {
        dims,
        precision,
        data,
    }
}

/// Why the reference refuses a case: a reason (any refusal of the engine agrees) or an error
/// code (the engine must refuse with that code).
pub trait Refusal: fmt::Display {
    /// The code the engine must refuse with, when the reference names one.
    fn code(&self) -> Option<ErrorCode>;
}

impl Refusal for String {
    fn code(&self) -> Option<ErrorCode> {
        None
    }
}

impl Refusal for ErrorCode {
    fn code(&self) -> Option<ErrorCode> {
        Some(*self)
    }
}

/// The reference's verdict: the outputs (whose elements may be run-time failures), or why the
/// engine must refuse the case before running it.
pub type Verdict<R> = Result<Vec<Expect>, R>;

// ---------------------------------------------------------------------------------------------
// The engine, through its operator table
// ---------------------------------------------------------------------------------------------

/// What the engine did with a case.
enum Outcome {
    /// Refused before running (attribute check, table arity, build, infer).
    Refused(ErrorCode, String),
    /// Inferred these output types and ran: outputs, or a run-time failure.
    Ran(Vec<TensorType>, Result<Vec<Tensor>, (ErrorCode, String)>),
}

/// Checks the attributes, builds the operator of row `def`, infers and prices its outputs and
/// runs it on zeroed outputs of the inferred types.
fn engine(def: &OpDef, case: &Case) -> Outcome {
    let refused = |e: cvm_engine::Error| Outcome::Refused(e.code, e.message);
    let attrs = match Attrs::check(&case.attrs, def.attrs) {
        Ok(attrs) => attrs,
        Err(e) => return refused(e),
    };
    // Validation checks the table's arity before building; builders refine it.
    if !def.arity.accepts(case.inputs.len()) {
        return Outcome::Refused(
            ErrorCode::ArityMismatch,
            format!("arity {} refuses {} inputs", def.arity, case.inputs.len()),
        );
    }
    let op: Box<dyn Operator> = match (def.build)(&attrs, case.inputs.len()) {
        Ok(op) => op,
        Err(e) => return refused(e),
    };
    let in_types: Vec<TensorType> = case
        .inputs
        .iter()
        .map(|t| TensorType {
            shape: t.shape.clone(),
            precision: t.precision,
        })
        .collect();
    let types = match op.infer(&in_types) {
        Ok(types) => types,
        Err(e) => return refused(e),
    };
    if let Err(e) = op.usage(&in_types, &types) {
        panic!("usage fails for types infer accepted: {e}");
    }
    let mut outputs: Vec<Tensor> = types
        .iter()
        .map(|t| Tensor::zeroed(t).expect("output buffers allocate"))
        .collect();
    let views: Vec<_> = case.inputs.iter().map(Tensor::view).collect();
    let mut muts: Vec<TensorMut<'_>> = outputs.iter_mut().map(Tensor::view_mut).collect();
    let result = op.run(&views, &mut muts);
    drop(muts);
    Outcome::Ran(
        types,
        result.map(|()| outputs).map_err(|e| (e.code, e.message)),
    )
}

fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_string()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "non-string panic".to_string()
    }
}

// ---------------------------------------------------------------------------------------------
// Comparison
// ---------------------------------------------------------------------------------------------

/// Counts of one property run.
#[derive(Default)]
pub struct Stats {
    name: &'static str,
    computed: usize,
    refused: usize,
    failed: usize,
    elements: usize,
    /// Largest |engine − exact| over the f64-based elements, in ulp.
    max_error: Option<f64>,
}

impl Stats {
    /// Asserts the generator reached every path, guarding against one that stopped producing
    /// useful cases: at least `computed` computed cases, `refused` refusals and `failed`
    /// run-time failures.
    pub fn require(&self, computed: usize, refused: usize, failed: usize) {
        assert!(
            self.computed >= computed && self.refused >= refused && self.failed >= failed,
            "{}: the generator reached too few paths: {} computed (want {computed}), {} refused (want {refused}), {} failed at run time (want {failed})",
            self.name,
            self.computed,
            self.refused,
            self.failed
        );
    }
}

/// The codes a run may fail with: the first failing element's (row-major, outputs in order),
/// and `IntegerOverflow` when an element at the edge of the range comes before it.
fn run_codes(expected: &[Expect]) -> Vec<ErrorCode> {
    let mut codes = Vec::new();
    for want in expected.iter().flat_map(|e| &e.data) {
        match want {
            Want::Fail(code) => {
                codes.push(*code);
                return codes;
            }
            Want::Edge { .. } if !codes.contains(&ErrorCode::IntegerOverflow) => {
                codes.push(ErrorCode::IntegerOverflow);
            }
            _ => {}
        }
    }
    codes
}

/// The first few expected elements, for messages.
fn first_values(expected: &[Expect]) -> String {
    let shown: Vec<String> = expected
        .iter()
        .flat_map(|e| &e.data)
        .take(12)
        .map(|w| format!("{w:?}"))
        .collect();
    shown.join(", ")
}

/// Compares the engine's outcome with the verdict; the reason when they disagree.
#[allow(clippy::float_arithmetic, clippy::cast_precision_loss)] // the f64 tolerance of `Near`
fn compare<R: Refusal>(
    def: &OpDef,
    verdict: &Verdict<R>,
    outcome: &Outcome,
    stats: &mut Stats,
) -> Result<(), String> {
    let (expected, types, result) = match (verdict, outcome) {
        (Err(why), Outcome::Refused(got, message)) => {
            return match why.code() {
                Some(code) if code != *got => Err(format!(
                    "the engine refuses with {got} ({message}), the reference with {code}"
                )),
                _ => {
                    stats.refused += 1;
                    Ok(())
                }
            };
        }
        (Err(why), Outcome::Ran(types, _)) => {
            let dims: Vec<_> = types.iter().map(|t| (t.dims(), t.precision)).collect();
            return Err(format!(
                "the engine accepts the case (outputs {dims:?}), the reference refuses it: {why}"
            ));
        }
        (Ok(expected), Outcome::Refused(got, message)) => {
            let dims: Vec<_> = expected.iter().map(|e| (&e.dims, e.precision)).collect();
            return Err(format!(
                "the engine refuses with {got} ({message}), the reference expects outputs {dims:?}"
            ));
        }
        (Ok(expected), Outcome::Ran(types, result)) => (expected, types, result),
    };
    if types.len() != expected.len() || types.len() != usize::from(def.outputs) {
        return Err(format!(
            "the engine infers {} outputs, the reference {} (table: {})",
            types.len(),
            expected.len(),
            def.outputs
        ));
    }
    for (k, (ty, want)) in types.iter().zip(expected).enumerate() {
        if ty.dims() != want.dims.as_slice() || ty.precision != want.precision {
            return Err(format!(
                "output {k}: the engine infers shape {:?} precision {}, the reference shape {:?} precision {}",
                ty.dims(),
                ty.precision,
                want.dims,
                want.precision
            ));
        }
    }
    let outputs = match result {
        Ok(outputs) => outputs,
        Err((code, message)) => {
            let codes = run_codes(expected);
            return if codes.contains(code) {
                stats.failed += 1;
                Ok(())
            } else {
                Err(format!(
                    "the run fails with {code} ({message}); the reference expects {} (elements: {})",
                    if codes.is_empty() {
                        "success".to_string()
                    } else {
                        format!("{codes:?}")
                    },
                    first_values(expected)
                ))
            };
        }
    };
    for (k, (out, want)) in outputs.iter().zip(expected).enumerate() {
        assert_eq!(out.data.len(), want.data.len(), "output {k} length");
        for (i, (&got, w)) in out.data.iter().zip(&want.data).enumerate() {
            let got = i64::from(got);
            let ok = match *w {
                Want::Exact(v) => got == v,
                Want::Near { exact, tol } | Want::Edge { exact, tol } => {
                    let error = (got as f64 - exact).abs();
                    stats.max_error = Some(stats.max_error.unwrap_or(0.0).max(error));
                    error <= tol + SLACK
                }
                Want::Fail(_) => false,
            };
            if !ok {
                return Err(format!(
                    "output {k} (shape {:?}) first differs at index {:?} (element {i}): the engine computes {got}, the reference expects {w:?}",
                    want.dims,
                    unflat(i, &want.dims)
                ));
            }
        }
        stats.elements += out.data.len();
    }
    stats.computed += 1;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Suites
// ---------------------------------------------------------------------------------------------

/// A property suite: which rows of the operator table it covers and how it spoils cases.
pub struct Suite<R> {
    /// What the suite calls its rows, for messages ("CVM operator", "CINN primitive").
    pub what: &'static str,
    /// The rows of `ops::OPS` the suite covers.
    pub covers: fn(&OpDef) -> bool,
    /// Spoils a freshly generated case now and then (drawing from the case's generator), and
    /// then returns the refusal the engine owes it.
    pub spoil: fn(&mut Rng, &mut Case, &OpDef) -> Option<R>,
}

impl<R: Refusal> Suite<R> {
    /// Runs `cases` random cases of operator `name` from `seed`: each is generated, perhaps
    /// spoiled, handed to the engine and to the reference, and the two must agree; a
    /// disagreement or a panic of the engine panics with the case. Prints the counts.
    pub fn check(
        &self,
        name: &'static str,
        seed: u64,
        cases: usize,
        mut generate: impl FnMut(&mut Rng) -> Case,
        reference: impl Fn(&Case) -> Verdict<R>,
    ) -> Stats {
        let def =
            ops::by_name(name).unwrap_or_else(|| panic!("{name} is not in the operator table"));
        assert!((self.covers)(def), "{name} is not a {}", self.what);
        let start = Instant::now();
        let mut rng = Rng(seed);
        let mut stats = Stats {
            name,
            ..Stats::default()
        };
        for number in 0..cases {
            let mut case = generate(&mut rng);
            let spoiled = (self.spoil)(&mut rng, &mut case, def);
            case.attrs.sort_by(|a, b| a.name.cmp(&b.name));
            let verdict = match spoiled {
                Some(why) => Err(why),
                None => reference(&case),
            };
            let outcome = catch_unwind(AssertUnwindSafe(|| engine(def, &case)));
            let result = match outcome {
                Ok(outcome) => compare(def, &verdict, &outcome, &mut stats),
                Err(payload) => Err(format!("the engine panicked: {}", panic_text(&*payload))),
            };
            if let Err(what) = result {
                panic!(
                    "{name}: {what}\n  (case #{number} of seed {seed:#x})\n{}",
                    case.describe()
                );
            }
        }
        let error = stats
            .max_error
            .map(|e| format!(", largest error {e:.4} ulp"))
            .unwrap_or_default();
        println!(
            "{name:<20} {cases:>5} cases: {:>5} computed, {:>4} refused, {:>4} failed at run time; {:>7} elements{error} ({} ms)",
            stats.computed,
            stats.refused,
            stats.failed,
            stats.elements,
            start.elapsed().as_millis()
        );
        stats
    }

    /// Asserts that `covered`, the operators with a property in the suite, are exactly the rows
    /// of the table the suite covers: a new operator must get a property.
    pub fn assert_covers(&self, covered: &[&str]) {
        let mut table: Vec<&str> = ops::OPS
            .iter()
            .filter(|def| (self.covers)(def))
            .map(|def| def.name)
            .collect();
        let mut listed = covered.to_vec();
        table.sort_unstable();
        listed.sort_unstable();
        listed.dedup();
        assert_eq!(listed.len(), covered.len(), "a name is listed twice");
        assert_eq!(
            listed, table,
            "the rows of the operator table and the {}s with a property differ",
            self.what
        );
    }
}
