//! The engine's modules depend on each other without a cycle.
//!
//! A module is a source file under `engine/src` (`ops/mod.rs` is `ops`, `kernels/gemm.rs` is
//! `kernels::gemm`). Module A depends on module B when A's source names a path into B:
//! `crate::…` or `super::…`, in a `use` (braces expanded) or inline; the path's longest prefix
//! that is a module is B. A module naming its own descendants is the module tree (a parent
//! declares its children, the operator table lists their rows) and is not counted; a child
//! naming its parent's items is. The test fails on any cycle and prints it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a cycle fails the test

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// `kernels/gemm.rs` → `["kernels", "gemm"]`; `ops/mod.rs` → `["ops"]`; `lib.rs` → `[]`.
fn module_of(relative: &Path) -> Vec<String> {
    let mut parts: Vec<String> = relative
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let file = parts.pop().unwrap();
    let stem = file.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" {
        parts.push(stem.to_owned());
    }
    parts
}

fn sources(dir: &Path, root: &Path, out: &mut Vec<(Vec<String>, String)>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, root, out);
        } else if path.extension() == Some("rs".as_ref()) {
            let text = std::fs::read_to_string(&path).unwrap();
            out.push((module_of(path.strip_prefix(root).unwrap()), text));
        }
    }
}

/// Removes comments and string literals, so that only code names paths.
fn code_only(text: &str) -> String {
    text.lines()
        .map(|line| {
            let line = line.split("//").next().unwrap_or("");
            let mut out = String::new();
            let mut in_string = false;
            let mut previous = ' ';
            for c in line.chars() {
                if c == '"' && previous != '\\' {
                    in_string = !in_string;
                } else if !in_string {
                    out.push(c);
                }
                previous = c;
            }
            out
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Expands the path that starts at `text` (after `crate::` or `super::`) into its segment lists:
/// `a::{b::C, d}` gives `[a, b, C]` and `[a, d]`.
fn expand(text: &str) -> Vec<Vec<String>> {
    fn parse(chars: &[char], at: &mut usize) -> Vec<Vec<String>> {
        let mut prefix: Vec<String> = Vec::new();
        loop {
            while *at < chars.len() && chars[*at].is_whitespace() {
                *at += 1;
            }
            if *at < chars.len() && chars[*at] == '{' {
                *at += 1;
                let mut all = Vec::new();
                loop {
                    for tail in parse(chars, at) {
                        let mut path = prefix.clone();
                        path.extend(tail);
                        all.push(path);
                    }
                    while *at < chars.len() && chars[*at].is_whitespace() {
                        *at += 1;
                    }
                    match chars.get(*at) {
                        Some(',') => *at += 1,
                        Some('}') => {
                            *at += 1;
                            return all;
                        }
                        _ => return all,
                    }
                    while *at < chars.len() && chars[*at].is_whitespace() {
                        *at += 1;
                    }
                    if chars.get(*at) == Some(&'}') {
                        *at += 1;
                        return all;
                    }
                }
            }
            let start = *at;
            while *at < chars.len() && (chars[*at].is_alphanumeric() || chars[*at] == '_') {
                *at += 1;
            }
            if *at == start {
                return vec![prefix];
            }
            prefix.push(chars[start..*at].iter().collect());
            if chars.get(*at) == Some(&':') && chars.get(*at + 1) == Some(&':') {
                *at += 2;
            } else {
                return vec![prefix];
            }
        }
    }
    let chars: Vec<char> = text.chars().collect();
    parse(&chars, &mut 0)
}

/// The modules `module` depends on.
fn dependencies(
    module: &[String],
    text: &str,
    modules: &BTreeSet<Vec<String>>,
) -> BTreeSet<Vec<String>> {
    let code = code_only(text);
    let mut found = BTreeSet::new();
    let mut add = |base: Vec<String>, path: Vec<String>| {
        let mut full = base;
        full.extend(path.into_iter().filter(|s| s != "self"));
        let target = (0..=full.len())
            .rev()
            .map(|n| full[..n].to_vec())
            .find(|p| modules.contains(p));
        if let Some(target) = target {
            // Not itself, and not one of its own descendants.
            if !target.starts_with(module) {
                found.insert(target);
            }
        }
    };
    for (at, _) in code.match_indices("crate::") {
        let before = code[..at].chars().last();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        for path in expand(&code[at + "crate::".len()..]) {
            add(Vec::new(), path);
        }
    }
    for (at, _) in code.match_indices("super::") {
        let before = code[..at].chars().last();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue; // counted with the `super::` that starts the chain
        }
        let mut rest = &code[at..];
        let mut base = module.to_vec();
        while let Some(tail) = rest.strip_prefix("super::") {
            base.pop();
            rest = tail;
        }
        for path in expand(rest) {
            add(base.clone(), path);
        }
    }
    found
}

fn show(module: &[String]) -> String {
    if module.is_empty() {
        "crate".to_owned()
    } else {
        module.join("::")
    }
}

#[test]
fn engine_modules_have_no_dependency_cycle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&root, &root, &mut files);
    let modules: BTreeSet<Vec<String>> = files.iter().map(|(m, _)| m.clone()).collect();
    let graph: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = files
        .iter()
        .map(|(m, text)| (m.clone(), dependencies(m, text, &modules)))
        .collect();
    assert!(
        graph.values().map(BTreeSet::len).sum::<usize>() > modules.len(),
        "the scan found too few dependencies"
    );

    // Depth-first search; a module met again while on the stack closes a cycle.
    fn visit<'a>(
        node: &'a Vec<String>,
        graph: &'a BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        state: &mut BTreeMap<&'a Vec<String>, bool>,
        stack: &mut Vec<&'a Vec<String>>,
    ) -> Option<Vec<String>> {
        match state.get(node) {
            Some(true) => return None,
            Some(false) => {
                let from = stack.iter().position(|m| *m == node).unwrap();
                let mut cycle: Vec<String> = stack[from..].iter().map(|m| show(m)).collect();
                cycle.push(show(node));
                return Some(cycle);
            }
            None => {}
        }
        state.insert(node, false);
        stack.push(node);
        for next in &graph[node] {
            if let Some(cycle) = visit(next, graph, state, stack) {
                return Some(cycle);
            }
        }
        stack.pop();
        state.insert(node, true);
        None
    }
    let mut state = BTreeMap::new();
    for node in graph.keys() {
        if let Some(cycle) = visit(node, &graph, &mut state, &mut Vec::new()) {
            panic!(
                "the engine's modules depend on each other in a cycle: {}",
                cycle.join(" → ")
            );
        }
    }
}

#[test]
fn paths_are_expanded() {
    let paths = expand("kernels::{gemm::{self, PackOrder}, simd::Simd};");
    let shown: Vec<String> = paths.iter().map(|p| p.join("::")).collect();
    assert_eq!(
        shown,
        [
            "kernels::gemm::self",
            "kernels::gemm::PackOrder",
            "kernels::simd::Simd"
        ]
    );
    let modules: BTreeSet<Vec<String>> = [
        vec![],
        vec!["ops".to_owned()],
        vec!["ops".to_owned(), "nn".to_owned()],
        vec!["kernels".to_owned()],
    ]
    .into_iter()
    .collect();
    let deps = dependencies(
        &["ops".to_owned(), "nn".to_owned()],
        "use super::{Operator, io_usage};\nuse crate::kernels::map; // crate::nothing\nlet s = \"crate::ops\";",
        &modules,
    );
    assert_eq!(
        deps,
        [vec!["kernels".to_owned()], vec!["ops".to_owned()]]
            .into_iter()
            .collect()
    );
}
