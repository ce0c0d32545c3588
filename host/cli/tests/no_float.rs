//! engine.wasm must hold no floating-point instruction or value type: consensus arithmetic is
//! integer only (STYLE habit 1). This parses the embedded module and checks every function
//! signature, global, local and operator.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test helpers fail loudly

use cvm_runtime::wasm::ENGINE_WASM;
use wasmparser::{Parser, Payload, TypeRef, ValType};

fn is_float(ty: ValType) -> bool {
    matches!(ty, ValType::F32 | ValType::F64)
}

#[test]
fn engine_wasm_has_no_float_instruction() {
    let mut findings = Vec::new();
    let mut operators_seen = 0usize;
    for payload in Parser::new(0).parse_all(ENGINE_WASM) {
        match payload.expect("engine.wasm parses") {
            Payload::TypeSection(reader) => {
                for group in reader {
                    for sub in group.expect("type group").into_types() {
                        if let wasmparser::CompositeInnerType::Func(func) =
                            &sub.composite_type.inner
                            && func
                                .params()
                                .iter()
                                .chain(func.results())
                                .any(|&t| is_float(t))
                        {
                            findings.push(format!("function type with a float: {func:?}"));
                        }
                    }
                }
            }
            Payload::GlobalSection(reader) => {
                for global in reader {
                    let global = global.expect("global");
                    if is_float(global.ty.content_type) {
                        findings.push(format!("float global: {:?}", global.ty));
                    }
                }
            }
            Payload::ImportSection(reader) => {
                for import in reader.into_imports() {
                    let import = import.expect("import");
                    if let TypeRef::Global(global) = import.ty
                        && is_float(global.content_type)
                    {
                        findings.push(format!("float global import {}", import.name));
                    }
                }
            }
            Payload::CodeSectionEntry(body) => {
                for local in body.get_locals_reader().expect("locals") {
                    let (_, ty) = local.expect("local");
                    if is_float(ty) {
                        findings.push(format!("float local in function at {}", body.range().start));
                    }
                }
                let mut reader = body.get_operators_reader().expect("operators");
                while !reader.eof() {
                    let operator = reader.read().expect("operator");
                    operators_seen += 1;
                    let name = format!("{operator:?}");
                    if name.contains("F32") || name.contains("F64") {
                        findings.push(format!("{name} in function at {}", body.range().start));
                    }
                }
            }
            _ => {}
        }
    }
    assert!(
        operators_seen > 10_000,
        "only {operators_seen} operators parsed; is engine.wasm real?"
    );
    assert!(
        findings.is_empty(),
        "engine.wasm holds floating point:\n{}",
        findings.join("\n")
    );
}

#[test]
fn the_float_check_detects_floats() {
    // A module with one f32.add, hand-assembled: the detector above must see it.
    let module: &[u8] = &[
        0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version
        0x01, 0x05, 0x01, 0x60, 0x00, 0x01, 0x7d, // type: () -> f32
        0x03, 0x02, 0x01, 0x00, // one function of type 0
        0x0a, 0x0f, 0x01, 0x0d, 0x00, // code: one 13-byte body, no locals
        0x43, 0x00, 0x00, 0x80, 0x3f, // f32.const 1.0
        0x43, 0x00, 0x00, 0x80, 0x3f, // f32.const 1.0
        0x92, 0x0b, // f32.add, end
    ];
    let mut names = Vec::new();
    for payload in Parser::new(0).parse_all(module) {
        if let Payload::CodeSectionEntry(body) = payload.expect("parses") {
            let mut reader = body.get_operators_reader().expect("operators");
            while !reader.eof() {
                names.push(format!("{:?}", reader.read().expect("operator")));
            }
        }
    }
    assert!(
        names.iter().any(|name| name.contains("F32Add")),
        "{names:?}"
    );
}
