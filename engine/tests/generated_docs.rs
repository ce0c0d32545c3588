//! The generated parts of the docs are current. In docs/ops.md: the operator table and the
//! per-operator reference, made from the operator table (`OPS`), the operators' doc comments in
//! `engine/src/ops/`, the gas schedule and the fixture directories; the table of error codes,
//! from `ErrorCode` and its doc comments. In docs/gas.md: the run rates of every schedule. They
//! must equal what the files hold.
//!
//! `CVM_BLESS=1 cargo test -p cvm-engine --test generated_docs` rewrites them.
//!
//! The doc comment of an operator is the `///` block directly above its row: an item
//! `pub const NAME: OpDef = …` whose first string literal is the operator's name, or a line
//! `NAME = code, "Name", …;` of a macro that makes rows. Intra-doc links (``[`Type`]``) are
//! written as plain code. An attribute table in a doc (rows beginning ``| `name` |``) must name
//! exactly the attributes of the operator's schema.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a stale doc fails the test

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use cvm_engine::error::ErrorCode;
use cvm_engine::ops::{Family, OPS, OpDef};
use cvm_gas::Schedule;

const TABLE: &str = "operator table";
const REFERENCE: &str = "operator reference";
const ERRORS: &str = "error codes";
const RUN_RATES: &str = "run rates";

/// One operator's documentation found in the sources.
struct Doc {
    /// The doc comment, as markdown.
    text: String,
    /// The source file, relative to the workspace root.
    file: String,
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn rust_files(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, files);
        } else if path.extension() == Some("rs".as_ref()) {
            files.push(path);
        }
    }
}

/// The first string literal of `text`.
fn first_literal(text: &str) -> Option<&str> {
    let start = text.find('"')? + 1;
    let len = text[start..].find('"')?;
    Some(&text[start..start + len])
}

/// Whether `line` starts an operator row: `pub const NAME: OpDef` or a macro row `NAME = 1, "x"`.
fn starts_row(line: &str) -> bool {
    let line = line.trim();
    if line.starts_with("pub const ") && line.contains(": OpDef") {
        return true;
    }
    let Some((constant, rest)) = line.split_once(" = ") else {
        return false;
    };
    !constant.is_empty()
        && constant
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        && rest
            .split_once(", \"")
            .is_some_and(|(code, _)| code.parse::<u16>().is_ok())
}

/// `[`X`]` (an intra-doc link) becomes `` `X` ``; links with a target stay.
fn plain_links(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(at) = rest.find("[`") {
        let close = rest[at..].find("`]").map(|c| at + c);
        match close {
            Some(close) if !rest[close + 2..].starts_with('(') => {
                out.push_str(&rest[..at]);
                out.push_str(&rest[at + 1..close + 1]);
                rest = &rest[close + 2..];
            }
            _ => {
                out.push_str(&rest[..at + 2]);
                rest = &rest[at + 2..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Every operator row's doc comment under `engine/src/ops`, by operator name.
fn docs() -> BTreeMap<String, Doc> {
    let root = workspace();
    let mut files = Vec::new();
    rust_files(&root.join("engine/src/ops"), &mut files);
    files.sort();
    let mut docs = BTreeMap::new();
    for path in files {
        let source = std::fs::read_to_string(&path).unwrap();
        let file = path
            .strip_prefix(&root)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let lines: Vec<&str> = source.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            if !starts_row(line) {
                continue;
            }
            // The item runs to its first `;`; its first literal is the operator's name.
            let item: String = lines[i..]
                .iter()
                .take_while(|l| !l.trim_end().ends_with(';'))
                .chain(lines[i..].iter().find(|l| l.trim_end().ends_with(';')))
                .copied()
                .collect::<Vec<_>>()
                .join("\n");
            let Some(name) = first_literal(&item) else {
                continue;
            };
            let mut block = Vec::new();
            for above in lines[..i].iter().rev() {
                let above = above.trim();
                if let Some(text) = above.strip_prefix("///") {
                    block.push(text.strip_prefix(' ').unwrap_or(text));
                } else if !above.starts_with("#[") {
                    break;
                }
            }
            block.reverse();
            let text = block
                .iter()
                .map(|l| plain_links(l))
                .collect::<Vec<_>>()
                .join("\n");
            let previous = docs.insert(
                name.to_owned(),
                Doc {
                    text,
                    file: file.clone(),
                },
            );
            assert!(
                previous.is_none(),
                "two rows named {name:?} in engine/src/ops"
            );
        }
    }
    docs
}

/// Where the operator comes from.
fn source_of(op: &OpDef) -> &'static str {
    match op.family {
        Family::Cinn => "CINN (spec 002)",
        Family::Vision if op.name == "generate_proposals_v2" => "detection (spec 003)",
        Family::Reduce => "reduce (spec 001)",
        Family::Broadcast => "broadcast (spec 001)",
        Family::Nn => "NN (spec 001)",
        Family::Elemwise => "elementwise (spec 001)",
        Family::Transform => "transform (spec 001)",
        Family::Vision => "vision (spec 001)",
        Family::Transformer => "transformer (engine)",
    }
}

/// The heading of an operator's section: its name, marked `(CINN)` when a CVM operator has the
/// same name but for case (markdown anchors ignore case).
fn heading(op: &OpDef) -> String {
    let clash = OPS
        .iter()
        .any(|other| other.family != Family::Cinn && other.name.eq_ignore_ascii_case(op.name));
    if op.family == Family::Cinn && clash {
        format!("{} (CINN)", op.name)
    } else {
        op.name.to_owned()
    }
}

fn fixture_dir(op: &OpDef) -> String {
    if op.family == Family::Cinn {
        format!("fixtures/ops/cinn/{}", op.name)
    } else {
        format!("fixtures/ops/{}", op.name)
    }
}

/// The cases of an operator's fixture directory: accepted ones, and rejections with their code.
fn fixtures(op: &OpDef) -> (Vec<String>, Vec<(String, String)>) {
    let dir = workspace().join(fixture_dir(op));
    let mut accepted = Vec::new();
    let mut rejected = Vec::new();
    if !dir.is_dir() {
        return (accepted, rejected);
    }
    for case in cvm_fixtures::cases_in(&dir).unwrap() {
        let code = case
            .expected
            .as_ref()
            .and_then(|e| e["error"]["code"].as_str());
        match code {
            Some(code) => rejected.push((case.name, code.to_owned())),
            None => accepted.push(case.name),
        }
    }
    (accepted, rejected)
}

fn table(docs: &BTreeMap<String, Doc>) -> String {
    let mut out = String::from(
        "| code | name | from | inputs | outputs | defined in | fixtures |\n\
         | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for op in OPS {
        let file = docs.get(op.name).map_or("", |d| d.file.as_str());
        writeln!(
            out,
            "| {} | [`{}`](#{}) | {} | {} | {} | `{}` | `{}/` |",
            op.code,
            op.name,
            anchor(&heading(op)),
            source_of(op),
            op.arity,
            op.outputs,
            file.trim_start_matches("engine/src/"),
            fixture_dir(op),
        )
        .unwrap();
    }
    out
}

/// GitHub's anchor of a heading: lower case, spaces to `-`, other punctuation dropped.
fn anchor(heading: &str) -> String {
    heading
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '_' || c == '-' => Some(c.to_ascii_lowercase()),
            _ => None,
        })
        .collect()
}

/// The attribute names of a doc's attribute table.
fn table_attributes(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|line| line.trim().strip_prefix("| `"))
        .filter_map(|rest| rest.split_once("` |").map(|(name, _)| name.to_owned()))
        .filter(|name| {
            !name.contains(' ') && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
        .collect()
}

fn reference(docs: &BTreeMap<String, Doc>) -> String {
    let mut out = String::new();
    let mut file = "";
    for op in OPS {
        let doc = docs.get(op.name).unwrap_or_else(|| {
            panic!(
                "no doc comment above the row of {:?} in engine/src/ops",
                op.name
            )
        });
        if doc.file != file {
            file = &doc.file;
            writeln!(out, "## `{}`\n", file.trim_start_matches("engine/src/")).unwrap();
        }
        let attributes = table_attributes(&doc.text);
        if !attributes.is_empty() {
            let mut schema: Vec<&str> = op.attrs.iter().map(|a| a.name).collect();
            let mut listed: Vec<&str> = attributes.iter().map(String::as_str).collect();
            schema.sort_unstable();
            listed.sort_unstable();
            assert_eq!(
                listed, schema,
                "the attribute table of {:?} ({}) differs from its schema",
                op.name, doc.file
            );
        }
        writeln!(out, "### {}\n", heading(op)).unwrap();
        writeln!(out, "{}\n", doc.text.trim_end()).unwrap();
        let attrs = if op.attrs.is_empty() {
            "none".to_owned()
        } else {
            op.attrs
                .iter()
                .map(|a| format!("`{}`", a.name))
                .collect::<Vec<_>>()
                .join(", ")
        };
        writeln!(
            out,
            "- **Row**: code {}, {} input{}, {} output{}, attributes {attrs}; {}.",
            op.code,
            op.arity,
            if op.arity == cvm_engine::ops::Arity::Exactly(1) {
                ""
            } else {
                "s"
            },
            op.outputs,
            if op.outputs == 1 { "" } else { "s" },
            source_of(op),
        )
        .unwrap();
        writeln!(out, "{}", gas(op)).unwrap();
        let (accepted, rejected) = fixtures(op);
        let mut line = format!("- **Fixtures**: `{}/`", fixture_dir(op));
        if accepted.is_empty() && rejected.is_empty() {
            line.push_str(" (none)");
        } else {
            let names: Vec<String> = accepted.iter().map(|n| format!("`{n}`")).collect();
            let errors: Vec<String> = rejected
                .iter()
                .map(|(n, code)| format!("`{n}` (`{code}`)"))
                .collect();
            line.push_str(": ");
            line.push_str(&names.join(", "));
            if !errors.is_empty() {
                if !names.is_empty() {
                    line.push_str("; ");
                }
                line.push_str("rejections ");
                line.push_str(&errors.join(", "));
            }
        }
        writeln!(out, "{line}.\n").unwrap();
    }
    out
}

/// `rate` hundredths of gas as a decimal: 1250 → `12.5`, 7 → `0.07`.
fn hundredths(rate: u64) -> String {
    let (whole, cents) = (rate / 100, rate % 100);
    match cents {
        0 => whole.to_string(),
        c if c % 10 == 0 => format!("{whole}.{}", c / 10),
        c => format!("{whole}.{c:02}"),
    }
}

/// The operator's rows in the newest gas schedule: base and the rates it charges.
fn gas(op: &OpDef) -> String {
    let schedule = Schedule::NEWEST;
    let rows: Vec<String> = schedule
        .table
        .iter()
        .filter(|row| row.op == op.name)
        .map(|row| {
            let r = row.rates;
            let rates: Vec<String> = [
                (r.mac, "multiply-accumulate"),
                (r.read, "element read"),
                (r.write, "element written"),
                (r.tap, "window tap"),
                (r.pair, "candidate pair"),
                (r.eval, "evaluation"),
                (r.slice, "slice"),
            ]
            .iter()
            .filter(|(rate, _)| *rate != 0)
            .map(|(rate, unit)| format!("{} per {unit}", hundredths(*rate)))
            .collect();
            let class = if row.class.is_empty() {
                String::new()
            } else {
                format!("class `{}`: ", row.class)
            };
            let rates = if rates.is_empty() {
                "no rate".to_owned()
            } else {
                rates.join(", ")
            };
            format!("{class}{} per node, {rates}", row.base)
        })
        .collect();
    assert!(
        !rows.is_empty(),
        "schedule {} has no row for {:?}",
        schedule.version,
        op.name
    );
    format!(
        "- **Gas** (schedule {}, [gas.md](gas.md#node-gas)): {}.",
        schedule.version,
        rows.join("; ")
    )
}

/// The table of error codes, from `ErrorCode`'s variants and their doc comments.
fn error_codes() -> String {
    let source = std::fs::read_to_string(workspace().join("engine/src/error.rs")).unwrap();
    let start = source
        .find("pub enum ErrorCode {")
        .expect("engine/src/error.rs defines ErrorCode");
    let body = &source[start..start + source[start..].find("\n}").unwrap()];
    let mut documented = Vec::new();
    let mut doc: Vec<&str> = Vec::new();
    for line in body.lines().skip(1) {
        let line = line.trim();
        if let Some(text) = line.strip_prefix("///") {
            doc.push(text.trim());
        } else if let Some((name, code)) = line.trim_end_matches(',').split_once(" = ") {
            documented.push((name.to_owned(), code.parse::<u16>().unwrap(), doc.join(" ")));
            doc.clear();
        }
    }
    let listed: Vec<(String, u16)> = ErrorCode::ALL
        .iter()
        .map(|c| (c.name().to_owned(), c.number()))
        .collect();
    let parsed: Vec<(String, u16)> = documented.iter().map(|(n, c, _)| (n.clone(), *c)).collect();
    assert_eq!(
        parsed, listed,
        "ErrorCode's variants in engine/src/error.rs differ from ErrorCode::ALL"
    );
    let mut out = String::from("| code | name | phase | meaning |\n| --- | --- | --- | --- |\n");
    for (name, code, doc) in documented {
        assert!(!doc.is_empty(), "ErrorCode::{name} has no doc comment");
        let phase = match code / 100 {
            1 => "decoding",
            2 => "validation",
            3 => "input check",
            _ => "execution",
        };
        writeln!(
            out,
            "| {code} | `{name}` | {phase} | {} |",
            doc.replace('|', "\\|")
        )
        .unwrap();
    }
    out
}

/// The run rates of every schedule ([`cvm_gas::RunRates`]).
fn run_rates() -> String {
    let mut out = String::from(
        "| schedule | every run (gas) | per input element | per output element | per new arena element |\n\
         | --- | --- | --- | --- | --- |\n",
    );
    for schedule in Schedule::ALL {
        let run = schedule.run;
        writeln!(
            out,
            "| {} | {} | {} | {} | {} |",
            schedule.version,
            run.base,
            hundredths(run.input),
            hundredths(run.output),
            hundredths(run.arena)
        )
        .unwrap();
    }
    out.push_str(
        "\nThe per-element rates are in gas: inputs for writing, decoding and checking them, outputs \
         for copying and encoding them, arena elements (4 bytes each) for growing the memory and \
         touching it first; the base pays for crossing into the engine, setting up and encoding \
         the report.\n",
    );
    out
}

/// Replaces the text between `<!-- BEGIN GENERATED: {name} -->` and `<!-- END GENERATED: {name} -->`.
fn splice(document: &str, name: &str, body: &str) -> String {
    let begin = format!("<!-- BEGIN GENERATED: {name} -->\n");
    let end = format!("<!-- END GENERATED: {name} -->");
    let start = document
        .find(&begin)
        .unwrap_or_else(|| panic!("the doc lacks {begin:?}"))
        + begin.len();
    let stop = document[start..]
        .find(&end)
        .unwrap_or_else(|| panic!("the doc lacks {end:?}"))
        + start;
    format!("{}{}{}", &document[..start], body, &document[stop..])
}

#[test]
fn generated_docs_are_current() {
    check_generated("docs/ops.md", |current| {
        let docs = docs();
        let unknown: Vec<&String> = docs
            .keys()
            .filter(|name| cvm_engine::ops::by_name(name).is_none())
            .collect();
        assert!(
            unknown.is_empty(),
            "rows documented in engine/src/ops but not in OPS: {unknown:?}"
        );
        let mut wanted = splice(current, TABLE, &table(&docs));
        wanted = splice(&wanted, REFERENCE, &reference(&docs));
        splice(&wanted, ERRORS, &error_codes())
    });
    check_generated("docs/gas.md", |current| {
        splice(current, RUN_RATES, &run_rates())
    });
}

/// Compares the file at `relative` with what `generate` makes of it; rewrites it when blessing.
fn check_generated(relative: &str, generate: impl Fn(&str) -> String) {
    let path = workspace().join(relative);
    let current = std::fs::read_to_string(&path).unwrap();
    let wanted = generate(&current);
    if wanted == current {
        return;
    }
    if cvm_fixtures::blessing() {
        std::fs::write(&path, wanted).unwrap();
        return;
    }
    let line = current
        .lines()
        .zip(wanted.lines())
        .position(|(a, b)| a != b)
        .map_or(0, |i| i + 1);
    panic!(
        "{relative} is out of date (first difference at line {line}); \
         run `CVM_BLESS=1 cargo test -p cvm-engine --test generated_docs` and commit the result"
    );
}
