//! engine.wasm may use relaxed SIMD only for its integer dot products
//! (`i32x4.relaxed_dot_i8x16_i7x16_add_s`, `i16x8.relaxed_dot_i8x16_i7x16_s`), on operands the
//! engine proves to lie where every implementation gives the same exact sum
//! (`engine/src/kernels/dot8.rs`). Any other relaxed instruction (swizzle, lane select, fused
//! multiply-add, q15 multiply, truncations, min/max) could differ between hosts: this parses the
//! embedded module and fails on one.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test helpers fail loudly

use cvm_runtime::wasm::ENGINE_WASM;
use wasmparser::{Operator, Parser, Payload};

/// The relaxed instructions allowed, as wasmparser names them.
fn allowed(operator: &Operator<'_>) -> bool {
    matches!(
        operator,
        Operator::I32x4RelaxedDotI8x16I7x16AddS | Operator::I16x8RelaxedDotI8x16I7x16S
    )
}

/// Every relaxed instruction but the allowed ones in `module`, with the offset of its function,
/// and the number of allowed ones.
fn relaxed_findings(module: &[u8]) -> (Vec<String>, usize) {
    let (mut findings, mut dots) = (Vec::new(), 0);
    for payload in Parser::new(0).parse_all(module) {
        if let Payload::CodeSectionEntry(body) = payload.expect("engine.wasm parses") {
            let mut reader = body.get_operators_reader().expect("operators");
            while !reader.eof() {
                let operator = reader.read().expect("operator");
                let name = format!("{operator:?}");
                if !name.contains("Relaxed") {
                    continue;
                }
                if allowed(&operator) {
                    dots += 1;
                } else {
                    findings.push(format!("{name} in function at {}", body.range().start));
                }
            }
        }
    }
    (findings, dots)
}

#[test]
fn engine_wasm_uses_no_relaxed_instruction_but_the_dot_products() {
    let (findings, dots) = relaxed_findings(ENGINE_WASM);
    assert!(
        findings.is_empty(),
        "engine.wasm holds relaxed SIMD other than the i8 dot products:\n{}",
        findings.join("\n")
    );
    assert!(
        dots > 0,
        "engine.wasm holds no relaxed dot product: is dot8.rs built?"
    );
}

/// The scan sees a relaxed instruction other than the dot products: a module with one
/// `i8x16.relaxed_swizzle` fails it, one with the dot product passes.
#[test]
fn the_scan_finds_other_relaxed_instructions() {
    // (module (func (param v128 v128 v128) (result v128) <body>))
    let module = |body: &[u8]| {
        let mut code = vec![0x00]; // no locals
        code.extend_from_slice(body);
        code.push(0x0b); // end
        let mut function = vec![1]; // one body
        function.push(code.len() as u8);
        function.extend(code);
        let mut bytes = b"\0asm\x01\0\0\0".to_vec();
        bytes.extend([0x01, 0x08, 0x01, 0x60, 0x03, 0x7b, 0x7b, 0x7b, 0x01, 0x7b]); // type
        bytes.extend([0x03, 0x02, 0x01, 0x00]); // function
        bytes.push(0x0a);
        bytes.push(function.len() as u8);
        bytes.extend(function);
        bytes
    };
    let get = [0x20, 0x00, 0x20, 0x01, 0x20, 0x02];
    let swizzle = [&get[..4], &[0xfd, 0x80, 0x02]].concat(); // i8x16.relaxed_swizzle
    let dot = [&get[..], &[0xfd, 0x93, 0x02]].concat(); // i32x4.relaxed_dot_i8x16_i7x16_add_s
    assert_eq!(relaxed_findings(&module(&swizzle)).0.len(), 1);
    assert_eq!(relaxed_findings(&module(&dot)), (Vec::new(), 1));
}
