//! engine.wasm is a consensus artifact: nodes compare its SHA3-256 (`cvm version`), so its bytes
//! must not depend on who builds it, and a change to them must be deliberate. The module embedded
//! in this build must be the one `host/runtime/engine.wasm.sha3` pins, and must hold no path of the
//! machine that built it (`host/runtime/build.rs` remaps them).
#![allow(clippy::panic)] // test assertions fail loudly

use std::path::Path;

use cvm_runtime::wasm::{ENGINE_WASM, ENGINE_WASM_SHA3_PIN, engine_wasm_sha3};

#[test]
fn engine_wasm_is_the_pinned_module() {
    let built = engine_wasm_sha3();
    let pinned = ENGINE_WASM_SHA3_PIN.trim();
    assert!(
        built == pinned,
        "engine.wasm changed: this build's module has sha3-256 {built}, but host/runtime/engine.wasm.sha3 \
         pins {pinned}.\n\
         Every node must run byte-identical engine bytes, and operators compare this hash \
         (`cvm version`) across nodes. If the change to the engine (its sources, the gas crate, \
         Cargo.lock, the toolchain or the wasm profile) is intended, write the new hash into the \
         pin and say in the commit message why the module changed:\n    \
         cargo run --locked --bin cvm -- version   # prints the new hash\n    \
         echo {built} > host/runtime/engine.wasm.sha3\n\
         If it is not intended, the build picked up something of this machine (see host/runtime/build.rs)."
    );
}

#[test]
fn engine_wasm_holds_no_path_of_the_build_machine() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .and_then(Path::parent)
        .and_then(Path::to_str)
        .unwrap_or_default()
        .to_owned();
    let mut builder_paths = vec![workspace];
    for variable in ["CARGO_HOME", "HOME", "USER"] {
        if let Some(value) = std::env::var_os(variable).and_then(|value| value.into_string().ok()) {
            if variable == "HOME" {
                builder_paths.push(format!("{value}/.cargo"));
            }
            builder_paths.push(value);
        }
    }
    for path in builder_paths {
        // Short values ("/", "/root", a user name of two letters) could occur by chance.
        if path.len() < 6 {
            continue;
        }
        assert!(
            !ENGINE_WASM
                .windows(path.len())
                .any(|window| window == path.as_bytes()),
            "engine.wasm contains {path:?}, a path or name of the machine that built it"
        );
    }
}
