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

use cvm_engine::Report;
use wasmtime::{
    Config, Engine, Instance, Memory, Module, OptLevel, Store, StoreLimits, StoreLimitsBuilder,
    TypedFunc,
};

use crate::error::HostError;

/// The engine module, built by `build.rs` from the `cvm-engine` crate.
pub static ENGINE_WASM: &[u8] = include_bytes!(env!("CVM_ENGINE_WASM_PATH"));

/// The ABI version this host speaks (see `engine/src/abi.rs`).
pub const ABI_VERSION: u32 = 1;

/// Most linear memory the engine instance may grow to.
pub const MEMORY_CAP_BYTES: usize = 3 << 30;

/// Fuel granted per unit of gas of the limit (capped at `MAX_GAS_PER_RUN`, the most gas any
/// accepted model can cost). Engine gas runs out first: `fuel_stays_within_a_tenth_of_its_budget`
/// (host/tests/engine_session.rs) measures the fuel every fixture burns and requires it to stay
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

/// A compiled engine module, shared by any number of sessions.
pub struct WasmEngine {
    engine: Engine,
    module: Module,
}

struct Exports {
    memory: Memory,
    alloc: TypedFunc<u32, u32>,
    load: TypedFunc<(u32, u32), u32>,
    run: TypedFunc<(u32, u32, u64), u32>,
    reply_ptr: TypedFunc<(), u32>,
    reply_len: TypedFunc<(), u32>,
}

/// One instance of the engine with (at most) one loaded model.
pub struct WasmSession {
    store: Store<StoreLimits>,
    exports: Exports,
    /// Fuel granted to the latest call.
    budget: u64,
}

fn wasm_error(context: &str, error: impl std::fmt::Display) -> HostError {
    HostError::Wasm(format!("{context}: {error}"))
}

impl WasmEngine {
    /// Compiles the embedded engine module.
    ///
    /// # Errors
    /// [`HostError::Wasm`] if wasmtime rejects the configuration or the module, or the module
    /// imports anything.
    pub fn new() -> Result<WasmEngine, HostError> {
        WasmEngine::from_module_bytes(ENGINE_WASM)
    }

    /// Compiles an engine module from bytes.
    ///
    /// # Errors
    /// As [`WasmEngine::new`].
    pub fn from_module_bytes(bytes: &[u8]) -> Result<WasmEngine, HostError> {
        let engine = Engine::new(&config()).map_err(|e| wasm_error("configuring wasmtime", e))?;
        let module =
            Module::new(&engine, bytes).map_err(|e| wasm_error("compiling engine.wasm", e))?;
        if let Some(import) = module.imports().next() {
            return Err(HostError::Wasm(format!(
                "engine.wasm imports {}::{}; the engine must import nothing",
                import.module(),
                import.name()
            )));
        }
        Ok(WasmEngine { engine, module })
    }

    /// A fresh instance with its own memory.
    ///
    /// # Errors
    /// [`HostError::Wasm`] on instantiation failure or an ABI version mismatch.
    pub fn session(&self) -> Result<WasmSession, HostError> {
        let limits = StoreLimitsBuilder::new()
            .memory_size(MEMORY_CAP_BYTES)
            .instances(1)
            .memories(1)
            .tables(1)
            .build();
        let mut store = Store::new(&self.engine, limits);
        store.limiter(|limits| limits);
        store
            .set_fuel(FUEL_BASE)
            .map_err(|e| wasm_error("setting fuel", e))?;
        let instance = Instance::new(&mut store, &self.module, &[])
            .map_err(|e| wasm_error("instantiating engine.wasm", e))?;
        let exports = Exports::find(&instance, &mut store)?;
        let version: TypedFunc<(), u32> = typed(&instance, &mut store, "cvm_abi_version")?;
        let found = version
            .call(&mut store, ())
            .map_err(|e| wasm_error("cvm_abi_version", e))?;
        if found != ABI_VERSION {
            return Err(HostError::Wasm(format!(
                "engine.wasm speaks ABI version {found}, this host speaks {ABI_VERSION}"
            )));
        }
        Ok(WasmSession {
            store,
            exports,
            budget: FUEL_BASE,
        })
    }
}

fn typed<P: wasmtime::WasmParams, R: wasmtime::WasmResults>(
    instance: &Instance,
    store: &mut Store<StoreLimits>,
    name: &str,
) -> Result<TypedFunc<P, R>, HostError> {
    instance
        .get_typed_func::<P, R>(&mut *store, name)
        .map_err(|e| wasm_error(&format!("engine.wasm export {name}"), e))
}

impl Exports {
    fn find(instance: &Instance, store: &mut Store<StoreLimits>) -> Result<Exports, HostError> {
        Ok(Exports {
            memory: instance
                .get_memory(&mut *store, "memory")
                .ok_or_else(|| HostError::Wasm("engine.wasm exports no memory".into()))?,
            alloc: typed(instance, store, "cvm_alloc")?,
            load: typed(instance, store, "cvm_load")?,
            run: typed(instance, store, "cvm_run")?,
            reply_ptr: typed(instance, store, "cvm_reply_ptr")?,
            reply_len: typed(instance, store, "cvm_reply_len")?,
        })
    }
}

/// Fuel for a call handling `bytes` bytes of request and at most `gas` gas. With
/// `MAX_GAS_PER_RUN` = 2^40 and requests below 4 GiB the sum stays far below `u64::MAX`.
pub fn fuel_for(bytes: usize, gas: u64) -> u64 {
    let gas = gas.min(cvm_engine::limits::MAX_GAS_PER_RUN);
    FUEL_BASE + (bytes as u64) * FUEL_PER_BYTE + gas * FUEL_PER_GAS
}

impl WasmSession {
    /// Copies `bytes` into a fresh engine buffer; returns its address and length.
    fn put(&mut self, bytes: &[u8]) -> Result<(u32, u32), HostError> {
        let len = u32::try_from(bytes.len()).map_err(|_| {
            HostError::Input(format!("request of {} bytes exceeds 4 GiB", bytes.len()))
        })?;
        let ptr = self
            .exports
            .alloc
            .call(&mut self.store, len)
            .map_err(|e| wasm_error("cvm_alloc", e))?;
        if ptr == 0 {
            return Err(HostError::Wasm(format!(
                "engine.wasm cannot allocate {len} bytes"
            )));
        }
        self.exports
            .memory
            .write(&mut self.store, ptr as usize, bytes)
            .map_err(|e| wasm_error("writing the request", e))?;
        Ok((ptr, len))
    }

    fn reply(&mut self) -> Result<Report, HostError> {
        let ptr = self
            .exports
            .reply_ptr
            .call(&mut self.store, ())
            .map_err(|e| wasm_error("cvm_reply_ptr", e))?;
        let len = self
            .exports
            .reply_len
            .call(&mut self.store, ())
            .map_err(|e| wasm_error("cvm_reply_len", e))?;
        let mut bytes = vec![0u8; len as usize];
        self.exports
            .memory
            .read(&self.store, ptr as usize, &mut bytes)
            .map_err(|e| wasm_error("reading the reply", e))?;
        borsh::from_slice(&bytes).map_err(|e| wasm_error("decoding the reply", e))
    }

    /// Loads canonical model bytes. `Ok(None)`: loaded. `Ok(Some(report))`: the engine rejected
    /// the model deterministically.
    ///
    /// # Errors
    /// [`HostError::Wasm`] on a trap or fuel exhaustion.
    pub fn load(&mut self, model: &[u8]) -> Result<Option<Report>, HostError> {
        self.budget = fuel_for(model.len(), 0);
        self.store
            .set_fuel(self.budget)
            .map_err(|e| wasm_error("setting fuel", e))?;
        let (ptr, len) = self.put(model)?;
        match self
            .exports
            .load
            .call(&mut self.store, (ptr, len))
            .map_err(|e| wasm_error("cvm_load", e))?
        {
            0 => Ok(None),
            _ => self.reply().map(Some),
        }
    }

    /// Runs the loaded model on borsh-encoded inputs.
    ///
    /// # Errors
    /// [`HostError::Wasm`] on a trap, fuel exhaustion, or when no model is loaded.
    pub fn run(&mut self, inputs: &[u8], gas_limit: u64) -> Result<Report, HostError> {
        self.budget = fuel_for(inputs.len(), gas_limit);
        self.store
            .set_fuel(self.budget)
            .map_err(|e| wasm_error("setting fuel", e))?;
        let (ptr, len) = self.put(inputs)?;
        match self
            .exports
            .run
            .call(&mut self.store, (ptr, len, gas_limit))
            .map_err(|e| wasm_error("cvm_run", e))?
        {
            0 => self.reply(),
            _ => Err(HostError::Wasm(
                "cvm_run called with no model loaded".into(),
            )),
        }
    }

    /// Fuel the latest `load` or `run` burned (for tests of the fuel/gas ratio).
    ///
    /// # Errors
    /// [`HostError::Wasm`] if fuel metering is off.
    pub fn fuel_used(&self) -> Result<u64, HostError> {
        let left = self
            .store
            .get_fuel()
            .map_err(|e| wasm_error("reading fuel", e))?;
        Ok(self.budget.saturating_sub(left))
    }
}
