//! What a node links: the runtime's normal dependencies are the engine, wasmtime, sha3, borsh,
//! thiserror, the cache checksum and blake3 (the trace's tensor digests), never the CLI's (clap, JSON), the fixtures or the test
//! generators. `cargo tree -e normal -p cvm-runtime` shows the whole graph; this test keeps the
//! direct list from growing unnoticed.

/// The direct normal dependencies a node may get from the runtime.
const ALLOWED: &[&str] = &[
    "cvm-engine",
    "borsh",
    "thiserror",
    "sha3",
    "wasmtime",
    "xxhash-rust",
    "blake3",
];

#[test]
fn the_runtime_links_only_what_a_node_needs() {
    let manifest = include_str!("../Cargo.toml");
    let mut in_dependencies = false;
    let mut found = Vec::new();
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_dependencies = line == "[dependencies]";
            continue;
        }
        if in_dependencies && let Some((name, _)) = line.split_once(['=', '.']) {
            found.push(name.trim().to_string());
        }
    }
    assert!(found.iter().any(|name| name == "wasmtime"), "{found:?}");
    for name in &found {
        assert!(
            ALLOWED.contains(&name.as_str()),
            "cvm-runtime depends on {name}: a node linking the runtime would get it too"
        );
    }
}
