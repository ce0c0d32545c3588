//! The wasm32 ABI of `engine.wasm`: the exports a host calls. The only file with `unsafe`.
//!
//! Protocol (all integers are wasm `i32`/`i64`; buffers are borsh bytes):
//! 1. `cvm_alloc(len) -> ptr` reserves `len` bytes in the module's memory (0 if it cannot);
//!    the host writes a request there. `cvm_load` and `cvm_run` take
//!    ownership of that buffer and free it; `cvm_free(ptr, len)` frees one that was never
//!    handed over.
//! 2. `cvm_load(ptr, len, version) -> status` decodes and validates canonical
//!    model bytes, pricing them with gas schedule `version`, and keeps the model for any number
//!    of runs. Status 0: loaded. Status 1: rejected; the reply holds the failure [`Report`]
//!    (`UnsupportedVersion` with gas 0 when the engine defines no schedule `version`). There
//!    is no default version.
//! 3. `cvm_run(ptr, len, gas_limit) -> status` runs the loaded model on inputs (borsh
//!    `Vec<InputTensor>`). The reply holds the [`Report`]. Status 0: a report was produced;
//!    status 1: no model is loaded.
//! 4. `cvm_reply_ptr()` and `cvm_reply_len()` locate the latest reply, valid until the next call.
//! 5. `cvm_peak_memory_bytes() -> u64` is the loaded model's planned peak of tensor memory
//!    ([`ValidatedModel::peak_memory_bytes`]; 0 when none is loaded), from which a host derives
//!    how far a run may grow the memory.
//! 6. `cvm_run_trace(ptr, len, gas_limit) -> status` runs as `cvm_run` does (the same reply)
//!    and also keeps the run's trace ([`crate::trace::run_trace_reply`]), located by
//!    `cvm_trace_ptr()` and `cvm_trace_len()` and valid until the next call. Status 0: a report
//!    and a trace were produced; 1: no model is loaded; 2: the room for the trace cannot be
//!    allocated (nothing ran). `cvm_trace_bytes() -> u64` is the most bytes a trace of the
//!    loaded model takes ([`crate::trace::trace_bytes`]; 0 when none is loaded), by which a host
//!    raises the memory cap of a traced run.
//!
//! Memory of a run: the request's bytes are freed once the inputs are decoded, before the run,
//! and the previous reply before the run; the reply is reserved at its exact length and written
//! straight from where the run left the outputs ([`crate::exec::run_reply`]), before the arena is
//! freed but after the inputs no output lists. So a run adds to the loaded model the request,
//! then the buffers of its plan, then the reply (the outputs once, never a second copy) in the
//! place of the request and the freed inputs: the freed space of each step serves the next.
//!
//! Safety rests on two facts: wasm32 here has no threads (the module is instantiated without
//! shared memory), so the global state is never accessed concurrently; and the host passes back
//! only pointers and lengths returned by `cvm_alloc`.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::alloc::Layout;
use core::cell::RefCell;

use crate::outcome::Report;
use crate::validate::ValidatedModel;

#[global_allocator]
static ALLOCATOR: dlmalloc::GlobalDlmalloc = dlmalloc::GlobalDlmalloc;

/// A panic is an engine bug: trap, and let the host report a node-local failure.
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo<'_>) -> ! {
    core::arch::wasm32::unreachable()
}

/// Version of this export protocol; a host refuses modules of another version. Version 3: the
/// gas schedule version is a required argument of `cvm_load`; version 4: `cvm_peak_memory_bytes`;
/// version 5: traced runs (`cvm_run_trace`, `cvm_trace_ptr`, `cvm_trace_len`, `cvm_trace_bytes`).
pub const ABI_VERSION: u32 = 5;

struct State {
    model: Option<ValidatedModel>,
    reply: Vec<u8>,
    trace: Vec<u8>,
}

struct Global(RefCell<State>);

// SAFETY: engine.wasm runs single-threaded (no threads proposal, no shared memory), so the
// state is only ever touched by one thread.
unsafe impl Sync for Global {}

static STATE: Global = Global(RefCell::new(State {
    model: None,
    reply: Vec::new(),
    trace: Vec::new(),
}));

fn layout(len: u32) -> Option<Layout> {
    Layout::from_size_align(len.max(1) as usize, 1).ok()
}

/// Takes back a buffer handed out by `cvm_alloc`, as an owned vector.
///
/// # Safety
/// `ptr` and `len` must come from one `cvm_alloc(len)` call and not have been freed.
unsafe fn take_buffer(ptr: u32, len: u32) -> Vec<u8> {
    // SAFETY: per the contract, `ptr` points to `len.max(1)` bytes allocated by the global
    // allocator with alignment 1, which the host has initialised.
    unsafe { Vec::from_raw_parts(ptr as *mut u8, len as usize, len.max(1) as usize) }
}

/// Frees the previous reply and trace, so that their memory serves the next call.
fn forget_reply() {
    let mut state = STATE.0.borrow_mut();
    state.reply = Vec::new();
    state.trace = Vec::new();
}

/// The encoding of `report`, in a buffer of exactly its length.
fn encoded(report: &Report) -> Vec<u8> {
    let mut bytes = Vec::new();
    if let Ok(len) = borsh::object_length(report) {
        // Without the room, writing grows the vector as usual.
        let _ = bytes.try_reserve_exact(len);
    }
    // Writing into a Vec cannot fail.
    let _ = borsh::to_writer(&mut bytes, report);
    bytes
}

/// Encodes `report` as the reply.
fn reply(report: &Report) {
    let bytes = encoded(report);
    STATE.0.borrow_mut().reply = bytes;
}

/// The export protocol's version.
#[unsafe(no_mangle)]
pub extern "C" fn cvm_abi_version() -> u32 {
    ABI_VERSION
}

/// Reserves `len` bytes; returns their address, or 0 if memory is exhausted.
#[unsafe(no_mangle)]
pub extern "C" fn cvm_alloc(len: u32) -> u32 {
    match layout(len) {
        // SAFETY: the layout has a non-zero size.
        Some(layout) => unsafe { alloc::alloc::alloc(layout) as u32 },
        None => 0,
    }
}

/// Frees a buffer from `cvm_alloc` that was not handed to `cvm_load` or `cvm_run`.
///
/// # Safety
/// `ptr` and `len` must come from one `cvm_alloc(len)` call and not have been freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cvm_free(ptr: u32, len: u32) {
    if let Some(layout) = layout(len) {
        // SAFETY: per the contract, the block was allocated with this layout.
        unsafe { alloc::alloc::dealloc(ptr as *mut u8, layout) }
    }
}

/// Loads canonical model bytes with gas schedule `version`; 0 when loaded, 1 when rejected
/// (reply holds the report; `UnsupportedVersion` when no schedule `version` is defined).
///
/// # Safety
/// `ptr` and `len` must come from one `cvm_alloc(len)` call, filled by the host.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cvm_load(ptr: u32, len: u32, version: u32) -> u32 {
    // SAFETY: forwarded contract.
    let bytes = unsafe { take_buffer(ptr, len) };
    keep_loaded(bytes, |bytes| crate::load(bytes, version))
}

/// Drops any loaded model, loads `bytes` with `load` and keeps the result: 0 when loaded, 1
/// when rejected (the reply holds the report).
fn keep_loaded(
    bytes: Vec<u8>,
    load: impl FnOnce(&[u8]) -> Result<ValidatedModel, Box<Report>>,
) -> u32 {
    STATE.0.borrow_mut().model = None;
    forget_reply();
    let loaded = load(&bytes);
    drop(bytes);
    match loaded {
        Ok(model) => {
            let mut state = STATE.0.borrow_mut();
            state.model = Some(model);
            state.reply.clear();
            0
        }
        Err(report) => {
            reply(&report);
            1
        }
    }
}

/// Runs the loaded model on borsh-encoded inputs with a gas limit; 0 when a report was
/// produced, 1 when no model is loaded.
///
/// # Safety
/// `ptr` and `len` must come from one `cvm_alloc(len)` call, filled by the host.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cvm_run(ptr: u32, len: u32, gas_limit: u64) -> u32 {
    // SAFETY: forwarded contract.
    let bytes = unsafe { take_buffer(ptr, len) };
    forget_reply();
    let inputs = crate::decode_inputs(&bytes);
    drop(bytes);
    let reply_bytes = {
        let state = STATE.0.borrow();
        let Some(model) = &state.model else {
            return 1;
        };
        match inputs {
            // The report's encoding, written from where the run left the outputs.
            Ok(inputs) => crate::exec::run_reply(model, inputs, gas_limit),
            // Encoded here and stored below, once the model is no longer borrowed.
            Err(error) => encoded(&Report::failure(error, 0)),
        }
    };
    STATE.0.borrow_mut().reply = reply_bytes;
    0
}

/// Runs the loaded model as `cvm_run` does and keeps the run's trace as well; 0 when a report
/// and a trace were produced, 1 when no model is loaded, 2 when the trace's room cannot be
/// allocated.
///
/// # Safety
/// `ptr` and `len` must come from one `cvm_alloc(len)` call, filled by the host.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cvm_run_trace(ptr: u32, len: u32, gas_limit: u64) -> u32 {
    // SAFETY: forwarded contract.
    let bytes = unsafe { take_buffer(ptr, len) };
    forget_reply();
    let inputs = crate::decode_inputs(&bytes);
    drop(bytes);
    let (reply_bytes, trace) = {
        let state = STATE.0.borrow();
        let Some(model) = &state.model else {
            return 1;
        };
        match inputs {
            Ok(inputs) => match crate::trace::run_trace_reply(model, inputs, gas_limit) {
                Some(traced) => traced,
                None => return 2,
            },
            // Inputs that do not decode: no node ran, the trace is empty.
            Err(error) => (
                encoded(&Report::failure(error, 0)),
                0u32.to_le_bytes().to_vec(),
            ),
        }
    };
    let mut state = STATE.0.borrow_mut();
    state.reply = reply_bytes;
    state.trace = trace;
    0
}

/// The most bytes a trace of the loaded model takes; 0 when no model is loaded.
#[unsafe(no_mangle)]
pub extern "C" fn cvm_trace_bytes() -> u64 {
    STATE
        .0
        .borrow()
        .model
        .as_ref()
        .and_then(crate::trace::trace_bytes)
        .unwrap_or(0)
}

/// Address of the latest trace.
#[unsafe(no_mangle)]
pub extern "C" fn cvm_trace_ptr() -> u32 {
    STATE.0.borrow().trace.as_ptr() as u32
}

/// Length of the latest trace.
#[unsafe(no_mangle)]
pub extern "C" fn cvm_trace_len() -> u32 {
    STATE.0.borrow().trace.len() as u32
}

/// The loaded model's planned peak of tensor memory in bytes; 0 when no model is loaded.
#[unsafe(no_mangle)]
pub extern "C" fn cvm_peak_memory_bytes() -> u64 {
    STATE
        .0
        .borrow()
        .model
        .as_ref()
        .map_or(0, |model| model.peak_memory_bytes)
}

/// Address of the latest reply.
#[unsafe(no_mangle)]
pub extern "C" fn cvm_reply_ptr() -> u32 {
    STATE.0.borrow().reply.as_ptr() as u32
}

/// Length of the latest reply.
#[unsafe(no_mangle)]
pub extern "C" fn cvm_reply_len() -> u32 {
    STATE.0.borrow().reply.len() as u32
}
