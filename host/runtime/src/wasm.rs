//! Runs `engine.wasm` inside wasmtime, with the one locked-down configuration every node uses.
//!
//! Determinism knobs, all set in [`config`]: NaN canonicalization on (the engine has no float
//! instruction, a test proves it; this is defence in depth), relaxed SIMD off (and deterministic
//! were it on), no multi-memory, no memory64, no custom page sizes. Threads, GC, function
//! references and the component model are not compiled into this wasmtime (its `threads`, `gc`
//! and `component-model` features are off), so those proposals cannot be enabled. The module may
//! import nothing. Fuel metering is a
//! backstop against engine bugs, set from the gas limit ([`FUEL_PER_GAS`]); memory is capped by
//! [`MEMORY_CAP_BYTES`].
//!
//! Compiling `engine.wasm` with Cranelift takes seconds; [`WasmEngine::with_cache`] keeps the
//! compiled module on disk (see "The compiled-module cache" in `docs/host.md`), so a node pays
//! it once per engine build, wasmtime release, configuration and CPU.

use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use cvm_engine::{InputTensor, Report};
use sha3::{Digest, Sha3_256};
use wasmtime::{
    Config, Engine, Instance, Memory, Module, OptLevel, Store, StoreLimits, StoreLimitsBuilder,
    TypedFunc,
};

use crate::error::NodeError;

/// The engine module, built by `build.rs` from the `cvm-engine` crate.
pub static ENGINE_WASM: &[u8] = include_bytes!(env!("CVM_ENGINE_WASM_PATH"));

/// The SHA3-256 (hex) that [`ENGINE_WASM`] must have: `host/runtime/engine.wasm.sha3`, committed with the
/// engine sources it is built from. Nodes compare the module's hash (`cvm version`), so a
/// change of the engine's bytes is a reviewed change of this file; `host/runtime/tests/engine_pin.rs`
/// checks the two agree.
pub const ENGINE_WASM_SHA3_PIN: &str = include_str!("../engine.wasm.sha3");

/// The SHA3-256 of [`ENGINE_WASM`], in lower-case hex.
pub fn engine_wasm_sha3() -> String {
    crate::hash::hex(&Sha3_256::digest(ENGINE_WASM))
}

/// Whether [`ENGINE_WASM`] is the module [`ENGINE_WASM_SHA3_PIN`] names.
pub fn engine_wasm_matches_pin() -> bool {
    engine_wasm_sha3() == ENGINE_WASM_SHA3_PIN.trim()
}

/// The ABI version this host speaks (see `engine/src/abi.rs`): version 5, whose `cvm_load`
/// takes the gas schedule version, which reports a loaded model's planned memory
/// (`cvm_peak_memory_bytes`) and which runs with a trace (`cvm_run_trace`).
pub const ABI_VERSION: u32 = 5;

/// Most linear memory the engine instance may ever grow to.
pub const MEMORY_CAP_BYTES: usize = 3 << 30;

/// How much linear memory a run may add, per byte of the loaded model's planned peak
/// (`Estimate::peak_memory_bytes`), beyond the memory it starts with (the loaded model and the
/// request) and the inputs decoded from the request: the plan's buffers, the operators'
/// working memory and the reply (the outputs once more) are each at most the plan.
pub const RUN_MEMORY_PER_PLANNED_BYTE: usize = 3;

/// How much linear memory a run may add whatever its plan: the executor's bookkeeping (shapes,
/// per-node lists) and the allocator's own.
pub const RUN_MEMORY_SLACK_BYTES: usize = 64 << 20;

/// Fuel granted per unit of gas of the limit (capped at `MAX_GAS_PER_RUN`, the most gas any
/// accepted model can cost). Engine gas runs out first: `fuel_stays_within_a_tenth_of_its_budget`
/// (host/cli/tests/engine_session.rs) measures the fuel every fixture burns and requires it to stay
/// under a tenth of this budget.
pub const FUEL_PER_GAS: u64 = 2_000;

/// Fuel granted per byte of a request (model or inputs): decoding and validation are linear in
/// the bytes and not metered by gas.
pub const FUEL_PER_BYTE: u64 = 2_000;

/// Fuel granted to every call regardless of size.
pub const FUEL_BASE: u64 = 100_000_000;

/// The wasmtime configuration every node must use.
///
/// # Errors
/// Never in practice; wasmtime validates the combination.
pub fn config() -> Config {
    let mut config = Config::new();
    config
        .consume_fuel(true)
        .cranelift_nan_canonicalization(true)
        .cranelift_opt_level(OptLevel::Speed)
        .wasm_relaxed_simd(false)
        .relaxed_simd_deterministic(true)
        .wasm_simd(true)
        .wasm_multi_memory(false)
        .wasm_memory64(false)
        .wasm_custom_page_sizes(false)
        .wasm_backtrace_max_frames(None)
        .debug_info(false);
    config
}

/// The wasmtime release this host is built against; pinned with `=` in the workspace
/// `Cargo.toml` (a test checks the two agree). Part of the module cache key.
pub const WASMTIME_VERSION: &str = "48.0.8";

/// Where a [`WasmEngine`]'s compiled module came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModuleOrigin {
    /// Compiled by Cranelift in this process.
    Compiled,
    /// Loaded from the on-disk module cache.
    Cached,
}

/// A compiled engine module, shared by any number of sessions.
pub struct WasmEngine {
    engine: Engine,
    module: Module,
    origin: ModuleOrigin,
    /// Whether sessions meter fuel: always, except for [`WasmEngine::unmetered_for_benchmarks`].
    metered: bool,
    /// The cache entry this engine read or wrote, when built with a cache.
    cache_file: Option<PathBuf>,
    /// Cache problems met on the way (each fell back to compiling).
    cache_problems: Vec<String>,
}

struct Exports {
    memory: Memory,
    alloc: TypedFunc<u32, u32>,
    load: TypedFunc<(u32, u32, u32), u32>,
    run: TypedFunc<(u32, u32, u64), u32>,
    reply_ptr: TypedFunc<(), u32>,
    reply_len: TypedFunc<(), u32>,
    peak_memory_bytes: TypedFunc<(), u64>,
    run_trace: TypedFunc<(u32, u32, u64), u32>,
    trace_ptr: TypedFunc<(), u32>,
    trace_len: TypedFunc<(), u32>,
    trace_bytes: TypedFunc<(), u64>,
}

/// One instance of the engine with (at most) one loaded model.
pub struct WasmSession {
    store: Store<StoreLimits>,
    exports: Exports,
    /// Fuel granted to the latest call.
    budget: u64,
    /// Whether the store consumes fuel (see [`WasmEngine::unmetered_for_benchmarks`]).
    metered: bool,
    /// The loaded model's planned peak of tensor memory (0 without a loaded model).
    planned_bytes: u64,
}

/// The store limits with a memory cap of `bytes`: one instance, one memory, one table.
/// Growing past the cap traps (`trap_on_grow_failure`) rather than failing the growth: the engine
/// would report a failed allocation as a `MemoryLimit` outcome, and a host's cap must never
/// decide an outcome.
fn limits(bytes: usize) -> StoreLimits {
    StoreLimitsBuilder::new()
        .memory_size(bytes)
        .trap_on_grow_failure(true)
        .instances(1)
        .memories(1)
        .tables(1)
        .build()
}

fn wasm_error(context: &str, error: impl std::fmt::Display) -> NodeError {
    NodeError::Wasm(format!("{context}: {error}"))
}

fn new_engine(config: &Config) -> Result<Engine, NodeError> {
    Engine::new(config).map_err(|e| wasm_error("configuring wasmtime", e))
}

fn compile(engine: &Engine, bytes: &[u8]) -> Result<Module, NodeError> {
    Module::new(engine, bytes).map_err(|e| wasm_error("compiling engine.wasm", e))
}

impl WasmEngine {
    /// Compiles the embedded engine module (no cache).
    ///
    /// # Errors
    /// [`NodeError::Wasm`] if wasmtime rejects the configuration or the module, or the module
    /// imports anything.
    pub fn new() -> Result<WasmEngine, NodeError> {
        WasmEngine::from_module_bytes(ENGINE_WASM)
    }

    /// Compiles an engine module from bytes (no cache).
    ///
    /// # Errors
    /// As [`WasmEngine::new`].
    pub fn from_module_bytes(bytes: &[u8]) -> Result<WasmEngine, NodeError> {
        let engine = new_engine(&config())?;
        let module = compile(&engine, bytes)?;
        WasmEngine::checked(engine, module, ModuleOrigin::Compiled, true)
    }

    /// The embedded engine module, loaded from the module cache in `dir` when a valid entry for
    /// it is there, otherwise compiled and stored there (see [`WasmEngine::from_module_bytes_cached`]).
    ///
    /// # Errors
    /// As [`WasmEngine::new`]; never because of the cache.
    pub fn with_cache(dir: &Path) -> Result<WasmEngine, NodeError> {
        WasmEngine::from_module_bytes_cached(ENGINE_WASM, dir)
    }

    /// An engine module from bytes, through the module cache in `dir`.
    ///
    /// The entry's file name is [`cache_file_name`] (a key over the module bytes, the wasmtime
    /// release and the compilation configuration), so a changed engine, wasmtime or
    /// configuration never reads another's entry. An entry is used only when its stored
    /// checksum ([`checksum`]) matches its contents and wasmtime accepts it;
    /// anything else (no entry, an unreadable, corrupt or truncated one, an unwritable
    /// directory) falls back to compiling, and the fresh module replaces the entry. Problems are
    /// kept in [`WasmEngine::cache_problems`] rather than failing the run.
    ///
    /// # Errors
    /// As [`WasmEngine::new`]; never because of the cache.
    pub fn from_module_bytes_cached(bytes: &[u8], dir: &Path) -> Result<WasmEngine, NodeError> {
        let engine = new_engine(&config())?;
        let path = dir.join(cache_file_name(&engine, bytes));
        let mut problems = Vec::new();
        let cached = match std::fs::read(&path) {
            Ok(entry) => match deserialize_entry(&engine, &entry) {
                Ok(module) => Some(module),
                Err(problem) => {
                    problems.push(format!("{}: {problem}; recompiling", path.display()));
                    None
                }
            },
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
            Err(error) => {
                problems.push(format!("{}: {error}; recompiling", path.display()));
                None
            }
        };
        let (module, origin) = match cached {
            Some(module) => (module, ModuleOrigin::Cached),
            None => {
                let module = compile(&engine, bytes)?;
                if let Err(problem) = store_entry(&path, &module) {
                    problems.push(format!("{}: not cached: {problem}", path.display()));
                }
                (module, ModuleOrigin::Compiled)
            }
        };
        let mut wasm = WasmEngine::checked(engine, module, origin, true)?;
        wasm.cache_file = Some(path);
        wasm.cache_problems = problems;
        Ok(wasm)
    }

    /// The embedded engine compiled with [`config`] except that fuel is not consumed; its
    /// sessions neither set nor read fuel ([`WasmSession::fuel_used`] fails). Benchmarks use it
    /// to measure what fuel metering costs. **Never used for consensus**: without fuel the
    /// backstop against an engine bug that loops is gone, and the CLI never builds it.
    ///
    /// # Errors
    /// As [`WasmEngine::new`].
    #[doc(hidden)]
    pub fn unmetered_for_benchmarks() -> Result<WasmEngine, NodeError> {
        let mut unmetered = config();
        unmetered.consume_fuel(false);
        let engine = new_engine(&unmetered)?;
        let module = compile(&engine, ENGINE_WASM)?;
        WasmEngine::checked(engine, module, ModuleOrigin::Compiled, false)
    }

    fn checked(
        engine: Engine,
        module: Module,
        origin: ModuleOrigin,
        metered: bool,
    ) -> Result<WasmEngine, NodeError> {
        if let Some(import) = module.imports().next() {
            return Err(NodeError::Wasm(format!(
                "engine.wasm imports {}::{}; the engine must import nothing",
                import.module(),
                import.name()
            )));
        }
        Ok(WasmEngine {
            engine,
            module,
            origin,
            metered,
            cache_file: None,
            cache_problems: Vec::new(),
        })
    }

    /// Whether the module was compiled here or loaded from the cache.
    pub fn origin(&self) -> ModuleOrigin {
        self.origin
    }

    /// The cache entry this engine read or wrote (`None` without a cache).
    pub fn cache_file(&self) -> Option<&Path> {
        self.cache_file.as_deref()
    }

    /// Cache problems met while building this engine, each already handled by compiling (an
    /// unreadable or corrupt entry, an unwritable directory). Empty when all went well.
    pub fn cache_problems(&self) -> &[String] {
        &self.cache_problems
    }

    /// A fresh instance with its own memory. The module's ABI version is checked before its
    /// other exports are looked up, so a module of another version is refused as such.
    ///
    /// # Errors
    /// [`NodeError::Wasm`] on instantiation failure, an ABI version mismatch or a missing
    /// export.
    pub fn session(&self) -> Result<WasmSession, NodeError> {
        let mut store = Store::new(&self.engine, limits(MEMORY_CAP_BYTES));
        store.limiter(|limits| limits);
        if self.metered {
            store
                .set_fuel(FUEL_BASE)
                .map_err(|e| wasm_error("setting fuel", e))?;
        }
        let instance = Instance::new(&mut store, &self.module, &[])
            .map_err(|e| wasm_error("instantiating engine.wasm", e))?;
        let version: TypedFunc<(), u32> = typed(&instance, &mut store, "cvm_abi_version")?;
        let found = version
            .call(&mut store, ())
            .map_err(|e| wasm_error("cvm_abi_version", e))?;
        if found != ABI_VERSION {
            return Err(NodeError::Wasm(format!(
                "engine.wasm speaks ABI version {found}, this host speaks {ABI_VERSION}"
            )));
        }
        let exports = Exports::find(&instance, &mut store)?;
        Ok(WasmSession {
            store,
            exports,
            budget: FUEL_BASE,
            metered: self.metered,
            planned_bytes: 0,
        })
    }
}

/// The default module cache directory: `$CVM_CACHE_DIR` if set, else `$XDG_CACHE_HOME/cvm`
/// (when absolute, as the XDG specification requires), else `$HOME/.cache/cvm`; `None` when
/// none of them is set.
pub fn default_cache_dir() -> Option<PathBuf> {
    let var = |name: &str| {
        std::env::var_os(name)
            .filter(|value| !value.is_empty())
            .map(PathBuf::from)
    };
    var("CVM_CACHE_DIR")
        .or_else(|| {
            var("XDG_CACHE_HOME")
                .filter(|dir| dir.is_absolute())
                .map(|dir| dir.join("cvm"))
        })
        .or_else(|| var("HOME").map(|home| home.join(".cache").join("cvm")))
}

/// Feeds what a [`Hash`] implementation writes into SHA3-256.
struct Sha3Hasher(Sha3_256);

impl Hasher for Sha3Hasher {
    fn finish(&self) -> u64 {
        let digest = self.0.clone().finalize();
        u64::from_le_bytes(digest[..8].try_into().unwrap_or_default())
    }

    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

/// The module cache key: SHA3-256 over a format tag, the [`checksum`] of the module bytes,
/// [`WASMTIME_VERSION`], and wasmtime's `precompile_compatibility_hash` of `engine` (target,
/// Cranelift flags and detected CPU features, tunables such as fuel metering, enabled wasm
/// features, wasmtime's own module version). The compatibility hash goes through Rust's `Hash`,
/// which is stable within one build of this program: that is all a local cache key needs.
pub fn cache_key(engine: &Engine, module_bytes: &[u8]) -> [u8; 32] {
    let mut hasher = Sha3Hasher(Sha3_256::new());
    hasher.write(CACHE_MAGIC);
    hasher.write(&checksum(module_bytes));
    hasher.write(WASMTIME_VERSION.as_bytes());
    hasher.write(&[0]);
    engine.precompile_compatibility_hash().hash(&mut hasher);
    hasher.0.finalize().into()
}

/// The cache entry's file name for `module_bytes` compiled by `engine`:
/// `engine-<key in hex>.cwasm`.
pub fn cache_file_name(engine: &Engine, module_bytes: &[u8]) -> String {
    format!(
        "engine-{}.cwasm",
        crate::hash::hex(&cache_key(engine, module_bytes))
    )
}

/// XXH3-128 of `bytes` (little endian): the checksum of cache entries and of `engine.wasm` in the
/// cache key. A fast non-cryptographic hash is enough here: it detects accidental damage
/// (truncation, flipped bits, a foreign file), which is all a checksum can do against a cache
/// directory anyone untrusted could write to (see `docs/host.md`), and it keeps a cached start
/// short: about 0.2 ms for the 3 MB entry, where SHA3-256 took about 3.5 ms.
pub fn checksum(bytes: &[u8]) -> [u8; 16] {
    xxhash_rust::xxh3::xxh3_128(bytes).to_le_bytes()
}

/// First bytes of a cache entry (format tag and version). An entry is this tag, the
/// [`checksum`] of the rest, then the bytes of `Module::serialize`.
const CACHE_MAGIC: &[u8; 8] = b"CVMCWSM2";

/// Length of the entry header: tag and checksum.
const CACHE_HEADER_LEN: usize = CACHE_MAGIC.len() + 16;

/// The serialized module inside a cache entry, if the entry is intact.
fn verified_payload(entry: &[u8]) -> Result<&[u8], &'static str> {
    let (header, payload) = entry
        .split_at_checked(CACHE_HEADER_LEN)
        .ok_or("truncated cache entry (shorter than its header)")?;
    let (magic, digest) = header.split_at(CACHE_MAGIC.len());
    if magic != CACHE_MAGIC {
        return Err("not a cvm module cache entry");
    }
    if checksum(payload).as_slice() != digest {
        return Err("corrupt cache entry (checksum mismatch)");
    }
    Ok(payload)
}

/// Deserializes a cache entry, after checking its digest.
#[allow(unsafe_code)]
fn deserialize_entry(engine: &Engine, entry: &[u8]) -> Result<Module, String> {
    let payload = verified_payload(entry)?;
    // SAFETY: `Module::deserialize` requires bytes produced by `Module::serialize` or
    // `Engine::precompile_module`, unmodified. Cache entries are written only by
    // `store_entry` (below) from `Module::serialize`, into a temporary file renamed into place,
    // so a reader never sees a partial write; `verified_payload` has just checked that these
    // bytes hash to the checksum (`checksum`) stored with them, so a corrupted or
    // truncated entry is refused before it gets here. The file name keys the module bytes, the
    // wasmtime release and the configuration, and wasmtime itself rejects an artifact of another
    // release or an incompatible configuration with an error. The cache directory must be as
    // trusted as this program's binary: the checksum detects accidents, not a forger with write
    // access there.
    let module = unsafe { Module::deserialize(engine, payload) };
    module.map_err(|error| format!("wasmtime refused the cache entry: {error}"))
}

/// Writes `module` as a cache entry at `path` atomically: a temporary file in the same
/// directory, synced, then renamed over `path`.
fn store_entry(path: &Path, module: &Module) -> Result<(), String> {
    static TEMPORARY: AtomicU64 = AtomicU64::new(0);
    let payload = module
        .serialize()
        .map_err(|error| format!("serializing the module: {error}"))?;
    let dir = path.parent().ok_or("the cache path has no directory")?;
    std::fs::create_dir_all(dir).map_err(|error| format!("creating the directory: {error}"))?;
    let name = path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temporary = dir.join(format!(
        ".{name}.{}.{}.tmp",
        std::process::id(),
        TEMPORARY.fetch_add(1, Ordering::Relaxed)
    ));
    let written = (|| {
        let mut file = std::fs::File::create_new(&temporary)?;
        file.write_all(CACHE_MAGIC)?;
        file.write_all(&checksum(&payload))?;
        file.write_all(&payload)?;
        file.sync_all()?;
        std::fs::rename(&temporary, path)
    })();
    written.map_err(|error| {
        let _ = std::fs::remove_file(&temporary);
        format!("writing {}: {error}", temporary.display())
    })
}

fn typed<P: wasmtime::WasmParams, R: wasmtime::WasmResults>(
    instance: &Instance,
    store: &mut Store<StoreLimits>,
    name: &str,
) -> Result<TypedFunc<P, R>, NodeError> {
    instance
        .get_typed_func::<P, R>(&mut *store, name)
        .map_err(|e| wasm_error(&format!("engine.wasm export {name}"), e))
}

impl Exports {
    fn find(instance: &Instance, store: &mut Store<StoreLimits>) -> Result<Exports, NodeError> {
        Ok(Exports {
            memory: instance
                .get_memory(&mut *store, "memory")
                .ok_or_else(|| NodeError::Wasm("engine.wasm exports no memory".into()))?,
            alloc: typed(instance, store, "cvm_alloc")?,
            load: typed(instance, store, "cvm_load")?,
            run: typed(instance, store, "cvm_run")?,
            reply_ptr: typed(instance, store, "cvm_reply_ptr")?,
            reply_len: typed(instance, store, "cvm_reply_len")?,
            peak_memory_bytes: typed(instance, store, "cvm_peak_memory_bytes")?,
            run_trace: typed(instance, store, "cvm_run_trace")?,
            trace_ptr: typed(instance, store, "cvm_trace_ptr")?,
            trace_len: typed(instance, store, "cvm_trace_len")?,
            trace_bytes: typed(instance, store, "cvm_trace_bytes")?,
        })
    }
}

/// Fuel for a call handling `bytes` bytes of request and at most `gas` gas. With
/// `MAX_GAS_PER_RUN` = 2^33 and requests below 4 GiB the sum stays far below `u64::MAX`.
pub fn fuel_for(bytes: usize, gas: u64) -> u64 {
    let gas = gas.min(cvm_engine::limits::MAX_GAS_PER_RUN);
    FUEL_BASE + (bytes as u64) * FUEL_PER_BYTE + gas * FUEL_PER_GAS
}

/// Bytes of a request placed in the engine's memory, ready for `cvm_run`
/// ([`WasmSession::put_inputs`], [`WasmSession::run_request`]).
#[derive(Debug)]
#[must_use = "a placed request is freed only by running it"]
pub struct Request {
    ptr: u32,
    len: u32,
}

impl WasmSession {
    /// Reserves `len` bytes in the engine's memory (`cvm_alloc`); returns their address.
    fn alloc(&mut self, len: usize) -> Result<Request, NodeError> {
        let len = u32::try_from(len)
            .map_err(|_| NodeError::Request(format!("request of {len} bytes exceeds 4 GiB")))?;
        let ptr = self
            .exports
            .alloc
            .call(&mut self.store, len)
            .map_err(|e| wasm_error("cvm_alloc", e))?;
        if ptr == 0 {
            return Err(NodeError::Wasm(format!(
                "engine.wasm cannot allocate {len} bytes"
            )));
        }
        Ok(Request { ptr, len })
    }

    /// The engine's memory at `request`.
    fn request_bytes(&mut self, request: &Request) -> Result<&mut [u8], NodeError> {
        let start = request.ptr as usize;
        self.exports
            .memory
            .data_mut(&mut self.store)
            .get_mut(start..start + request.len as usize)
            .ok_or_else(|| NodeError::Wasm("cvm_alloc returned memory out of bounds".into()))
    }

    /// Copies `bytes` into a fresh engine buffer.
    fn put(&mut self, bytes: &[u8]) -> Result<Request, NodeError> {
        let request = self.alloc(bytes.len())?;
        self.request_bytes(&request)?.copy_from_slice(bytes);
        Ok(request)
    }

    /// Places `inputs` in the engine's memory as run request bytes (the borsh encoding of
    /// `Vec<InputTensor>`), written straight into the engine's buffer a whole value array at a
    /// time (`cvm_engine::exec::encode_inputs_into`): the host makes no encoded copy of its own.
    ///
    /// # Errors
    /// [`NodeError::Request`] when the encoding exceeds 4 GiB; [`NodeError::Wasm`] when the
    /// engine cannot allocate it.
    pub fn put_inputs(&mut self, inputs: &[InputTensor]) -> Result<Request, NodeError> {
        let len = cvm_engine::exec::encoded_inputs_len(inputs).ok_or_else(|| {
            NodeError::Request("encoding the inputs: a length exceeds u32::MAX".into())
        })?;
        self.cap_memory_for_request(len);
        let request = self.alloc(len)?;
        // The buffer is exactly the encoding's length.
        if !cvm_engine::exec::encode_inputs_into(inputs, self.request_bytes(&request)?) {
            return Err(NodeError::Request(
                "encoding the inputs: the buffer is not the encoding's length".into(),
            ));
        }
        Ok(request)
    }

    /// The engine's latest reply (a borsh-encoded report), decoded where it lies in the engine's
    /// memory, without a copy of its bytes.
    ///
    /// # Errors
    /// [`NodeError::Wasm`] when the reply is out of bounds or not a report (an engine bug).
    pub fn report(&mut self) -> Result<Report, NodeError> {
        let (ptr, len) = (
            self.exports.reply_ptr.clone(),
            self.exports.reply_len.clone(),
        );
        let bytes = self.region(&ptr, &len, "reply")?;
        borsh::from_slice(bytes).map_err(|e| wasm_error("decoding the reply", e))
    }

    /// The bytes of the engine's `what` (its reply or its trace), where the export pair
    /// `ptr`, `len` says they lie in the engine's memory.
    fn region(
        &mut self,
        ptr: &TypedFunc<(), u32>,
        len: &TypedFunc<(), u32>,
        what: &str,
    ) -> Result<&[u8], NodeError> {
        let start = ptr
            .call(&mut self.store, ())
            .map_err(|e| wasm_error(&format!("cvm_{what}_ptr"), e))? as usize;
        let len = len
            .call(&mut self.store, ())
            .map_err(|e| wasm_error(&format!("cvm_{what}_len"), e))? as usize;
        self.exports
            .memory
            .data(&self.store)
            .get(start..start + len)
            .ok_or_else(|| NodeError::Wasm(format!("the {what} lies out of the engine's memory")))
    }

    /// Caps the engine's memory for placing a run request of `len` bytes: what it holds now,
    /// plus the request's length twice (the request, and the inputs decoded from it), plus what
    /// a run may add ([`WasmSession::cap_memory_for_run`]). The cap the previous run left is
    /// derived from that run's request, and must not decide whether this one can be placed:
    /// an input that does not match the model is a deterministic outcome whatever ran before.
    fn cap_memory_for_request(&mut self, len: usize) {
        let now = self.exports.memory.data_size(&self.store);
        *self.store.data_mut() = limits(self.run_cap(now.saturating_add(len), len));
    }

    /// The memory cap of a run whose request of `request_len` bytes is placed, the engine then
    /// holding `now` bytes.
    fn run_cap(&self, now: usize, request_len: usize) -> usize {
        let planned = usize::try_from(self.planned_bytes).unwrap_or(usize::MAX);
        planned
            .saturating_mul(RUN_MEMORY_PER_PLANNED_BYTE)
            .saturating_add(RUN_MEMORY_SLACK_BYTES)
            .saturating_add(request_len)
            .saturating_add(now)
            .min(MEMORY_CAP_BYTES)
    }

    /// Caps the engine's memory for a run of `request`: what it holds now (the request
    /// included), plus the request's length once more (the inputs decoded from it, whatever
    /// their shapes: inputs that do not match the model are a deterministic outcome, which a cap
    /// must never turn into a failure), plus [`RUN_MEMORY_PER_PLANNED_BYTE`] times the loaded
    /// model's plan, plus [`RUN_MEMORY_SLACK_BYTES`]; at most [`MEMORY_CAP_BYTES`]. Returns the
    /// cap.
    fn cap_memory_for_run(&mut self, request: &Request) -> usize {
        let now = self.exports.memory.data_size(&self.store);
        let cap = self.run_cap(now, request.len as usize);
        *self.store.data_mut() = limits(cap);
        cap
    }

    /// The loaded model's planned peak of tensor memory, as the engine reported it at load
    /// (`Estimate::peak_memory_bytes`); 0 without a loaded model.
    pub fn planned_bytes(&self) -> u64 {
        self.planned_bytes
    }

    /// How many bytes of linear memory the engine instance has.
    pub fn memory_bytes(&self) -> usize {
        self.exports.memory.data_size(&self.store)
    }

    /// Grants `budget` fuel to the next call (nothing when fuel metering is off).
    fn grant_fuel(&mut self, budget: u64) -> Result<(), NodeError> {
        self.budget = budget;
        if self.metered {
            self.store
                .set_fuel(budget)
                .map_err(|e| wasm_error("setting fuel", e))?;
        }
        Ok(())
    }

    /// Loads canonical model bytes priced with gas schedule `version` (`cvm_load`).
    /// `Ok(None)`: loaded. `Ok(Some(report))`: the engine rejected
    /// the model deterministically, with `UnsupportedVersion` when it defines no schedule
    /// `version`. Loading may grow the memory up to [`MEMORY_CAP_BYTES`].
    ///
    /// # Errors
    /// [`NodeError::Wasm`] on a trap or fuel exhaustion.
    pub fn load(&mut self, model: &[u8], version: u32) -> Result<Option<Report>, NodeError> {
        self.planned_bytes = 0;
        *self.store.data_mut() = limits(MEMORY_CAP_BYTES);
        self.grant_fuel(fuel_for(model.len(), 0))?;
        let request = self.put(model)?;
        let status = self
            .exports
            .load
            .call(&mut self.store, (request.ptr, request.len, version))
            .map_err(|e| wasm_error("cvm_load", e))?;
        match status {
            0 => {
                self.planned_bytes = self
                    .exports
                    .peak_memory_bytes
                    .call(&mut self.store, ())
                    .map_err(|e| wasm_error("cvm_peak_memory_bytes", e))?;
                Ok(None)
            }
            _ => self.report().map(Some),
        }
    }

    /// Runs the loaded model on borsh-encoded inputs.
    ///
    /// # Errors
    /// [`NodeError::Wasm`] on a trap, fuel exhaustion, memory growth past the run's cap, or
    /// when no model is loaded.
    pub fn run(&mut self, inputs: &[u8], gas_limit: u64) -> Result<Report, NodeError> {
        self.cap_memory_for_request(inputs.len());
        let request = self.put(inputs)?;
        self.run_request(request, gas_limit)?;
        self.report()
    }

    /// Runs the loaded model on `inputs`, written straight into the engine's memory
    /// ([`WasmSession::put_inputs`]) and the report decoded where it lies
    /// ([`WasmSession::report`]).
    ///
    /// # Errors
    /// As [`WasmSession::run`].
    pub fn run_inputs(
        &mut self,
        inputs: &[InputTensor],
        gas_limit: u64,
    ) -> Result<Report, NodeError> {
        let request = self.put_inputs(inputs)?;
        self.run_request(request, gas_limit)?;
        self.report()
    }

    /// Runs the loaded model on a request placed by [`WasmSession::put_inputs`] (`cvm_run`,
    /// which frees it), leaving the report for [`WasmSession::report`]. The engine frees the
    /// request once it has decoded the inputs; the run may grow the memory by at most
    /// [`RUN_MEMORY_PER_PLANNED_BYTE`] times the model's plan plus [`RUN_MEMORY_SLACK_BYTES`],
    /// and growing past that cap traps (a node-local failure, never an outcome).
    ///
    /// # Errors
    /// As [`WasmSession::run`].
    pub fn run_request(&mut self, request: Request, gas_limit: u64) -> Result<(), NodeError> {
        self.grant_fuel(fuel_for(request.len as usize, gas_limit))?;
        let cap = self.cap_memory_for_run(&request);
        let status = self
            .exports
            .run
            .call(&mut self.store, (request.ptr, request.len, gas_limit))
            .map_err(|e| {
                wasm_error(
                    &format!(
                        "cvm_run (memory capped at {cap} bytes for a plan of {} bytes)",
                        self.planned_bytes
                    ),
                    e,
                )
            })?;
        match status {
            0 => Ok(()),
            _ => Err(NodeError::Wasm(
                "cvm_run called with no model loaded".into(),
            )),
        }
    }

    /// Runs the loaded model on `inputs` as [`WasmSession::run_inputs`] does (`cvm_run_trace`,
    /// the same report) and hands `read` the run's trace where it lies in the engine's memory:
    /// the borsh encoding of every node that ran with its gas so far and its outputs' canonical
    /// bytes (`cvm_engine::trace`). The run's memory cap is raised by the most bytes the trace
    /// takes (`cvm_trace_bytes`).
    ///
    /// # Errors
    /// As [`WasmSession::run`]; also when the engine cannot allocate the trace's room.
    pub fn run_traced<R>(
        &mut self,
        inputs: &[InputTensor],
        gas_limit: u64,
        read: impl FnOnce(&[u8]) -> R,
    ) -> Result<(Report, R), NodeError> {
        let trace_bytes = self
            .exports
            .trace_bytes
            .call(&mut self.store, ())
            .map_err(|e| wasm_error("cvm_trace_bytes", e))?;
        let request = self.put_inputs(inputs)?;
        self.grant_fuel(fuel_for(request.len as usize, gas_limit))?;
        let now = self.exports.memory.data_size(&self.store);
        let cap = self
            .run_cap(now, request.len as usize)
            .saturating_add(usize::try_from(trace_bytes).unwrap_or(usize::MAX))
            .min(MEMORY_CAP_BYTES);
        *self.store.data_mut() = limits(cap);
        let status = self
            .exports
            .run_trace
            .call(&mut self.store, (request.ptr, request.len, gas_limit))
            .map_err(|e| {
                wasm_error(
                    &format!(
                        "cvm_run_trace (memory capped at {cap} bytes for a plan of {} bytes \
                         and a trace of {trace_bytes})",
                        self.planned_bytes
                    ),
                    e,
                )
            })?;
        match status {
            0 => {}
            1 => {
                return Err(NodeError::Wasm(
                    "cvm_run_trace called with no model loaded".into(),
                ));
            }
            _ => {
                return Err(NodeError::Wasm(format!(
                    "engine.wasm cannot allocate the trace of {trace_bytes} bytes"
                )));
            }
        }
        let report = self.report()?;
        let (ptr, len) = (
            self.exports.trace_ptr.clone(),
            self.exports.trace_len.clone(),
        );
        let bytes = self.region(&ptr, &len, "trace")?;
        Ok((report, read(bytes)))
    }

    /// Fuel the latest `load` or `run` burned (for tests of the fuel/gas ratio).
    ///
    /// # Errors
    /// [`NodeError::Wasm`] if fuel metering is off (an engine from
    /// [`WasmEngine::unmetered_for_benchmarks`]).
    pub fn fuel_used(&self) -> Result<u64, NodeError> {
        if !self.metered {
            return Err(NodeError::Wasm(
                "fuel metering is off in this benchmark-only engine".into(),
            ));
        }
        let left = self
            .store
            .get_fuel()
            .map_err(|e| wasm_error("reading fuel", e))?;
        Ok(self.budget.saturating_sub(left))
    }
}
