//! The exported C functions: the 12 `CVMAPI*` functions of `c_api.h`, with the deployed
//! signatures. The only `unsafe` of this crate: each block dereferences a pointer the caller
//! passed, under the contract `docs/embedding.md` states for that function, and says so.
//!
//! Every export runs its body inside `catch_unwind`: a panic (an engine bug) becomes
//! `ERROR_RUNTIME`, never an unwind across the C boundary nor an abort of the caller's process.
//! Null pointers get the deployed runtime's class: `ERROR_RUNTIME` where it `CHECK`s them (a
//! handle, an output pointer), `ERROR_LOGIC` where it builds a `std::string` from them (the
//! graph and params of `CVMAPILoadModel` with a length above 0, the graph of
//! `CVMAPIGetGasFromGraphFile`: libstdc++ throws a `logic_error`), as for a negative length.
#![allow(unsafe_code)]

use std::ffi::{CStr, c_char, c_int, c_ulonglong, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};

use cvm_formats::cvm;

use crate::{Net, Status, gas_from_graph};

/// Runs `body`, turning a panic into [`Status::Runtime`].
fn guarded(body: impl FnOnce() -> Result<(), Status>) -> c_int {
    // AssertUnwindSafe: after a panic nothing `body` touched is used again; a `Net` whose run
    // panicked stays valid (its pool drops the instance that failed).
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => Status::Succeed as c_int,
        Ok(Err(status)) => status as c_int,
        Err(_) => Status::Runtime as c_int,
    }
}

/// `len` bytes at `ptr`, or `None` when `ptr` is null or `len` negative.
///
/// # Safety
/// When `ptr` is not null it must point to `len` readable bytes that stay unchanged for `'a`.
unsafe fn bytes<'a>(ptr: *const c_char, len: c_int) -> Option<&'a [u8]> {
    let len = usize::try_from(len).ok()?;
    if ptr.is_null() {
        return None;
    }
    // SAFETY: not null, and by this function's contract `len` readable bytes.
    Some(unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) })
}

/// The model behind a handle from `CVMAPILoadModel`, or `None` for a null handle.
///
/// # Safety
/// A non-null `net` must come from `CVMAPILoadModel` and not have been passed to
/// `CVMAPIFreeModel` (nor be freed while `'a` lasts).
unsafe fn net<'a>(net: *mut c_void) -> Option<&'a Net> {
    // SAFETY: by this function's contract a non-null `net` is a live `Box<Net>` from
    // `CVMAPILoadModel`; `Net` is `Sync`, so shared references from several threads are fine.
    unsafe { net.cast::<Net>().as_ref() }
}

/// Writes `value` to `*out`.
///
/// # Safety
/// A non-null `out` must point to a writable `unsigned long long`.
unsafe fn put(out: *mut c_ulonglong, value: u64) -> Result<(), Status> {
    if out.is_null() {
        return Err(Status::Runtime);
    }
    // SAFETY: not null, and by this function's contract writable.
    unsafe { out.write(value) };
    Ok(())
}

/// Copies `text` and a terminating NUL to `out`.
///
/// # Safety
/// A non-null `out` must have room for `text.len() + 1` bytes (every string written here is at
/// most 31 bytes, a `postprocess` name without NUL; the Cortex node passes 34).
unsafe fn put_str(out: *mut c_char, text: &[u8]) -> Result<(), Status> {
    if out.is_null() {
        return Err(Status::Runtime);
    }
    // SAFETY: not null, and by this function's contract `text.len() + 1` writable bytes, which
    // cannot overlap `text` (bytes this library owns).
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr(), out.cast::<u8>(), text.len());
        out.add(text.len()).write(0);
    }
    Ok(())
}

/// `len` bytes at `ptr` as the deployed `CVMAPILoadModel` takes them into a `std::string`: a
/// null pointer with length 0 is the empty string; with a length above 0, or a negative length,
/// the string's constructor throws a `logic_error` ([`Status::Logic`]).
///
/// # Safety
/// As [`bytes`].
unsafe fn string_bytes<'a>(ptr: *const c_char, len: c_int) -> Result<&'a [u8], Status> {
    if ptr.is_null() && len == 0 {
        return Ok(&[]);
    }
    // SAFETY: this function's contract.
    unsafe { bytes(ptr, len) }.ok_or(Status::Logic)
}

/// Loads a CVM model: `graph_strlen` bytes of graph JSON and `param_strlen` bytes of params.
/// On success `*net` receives the handle.
///
/// # Safety
/// `graph_json` and `param_bytes` point to that many readable bytes; `net` to a writable
/// pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn CVMAPILoadModel(
    graph_json: *const c_char,
    graph_strlen: c_int,
    param_bytes: *const c_char,
    param_strlen: c_int,
    net: *mut *mut c_void,
    device_type: c_int,
    _device_id: c_int,
) -> c_int {
    guarded(|| {
        // SAFETY: the function's contract.
        let graph = unsafe { string_bytes(graph_json, graph_strlen) }?;
        // SAFETY: the function's contract.
        let params = unsafe { string_bytes(param_bytes, param_strlen) }?;
        if net.is_null() {
            return Err(Status::Runtime);
        }
        let loaded = Box::new(Net::load(graph, params, device_type)?);
        // SAFETY: `net` is not null and, by the function's contract, writable.
        unsafe { net.write(Box::into_raw(loaded).cast::<c_void>()) };
        Ok(())
    })
}

/// Frees a handle from `CVMAPILoadModel`; a null handle is a no-op.
///
/// # Safety
/// `net` is null or a handle from `CVMAPILoadModel` not freed yet, which no other call uses now
/// or later.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn CVMAPIFreeModel(net: *mut c_void) -> c_int {
    guarded(|| {
        if !net.is_null() {
            // SAFETY: by the function's contract, a live `Box<Net>` from `CVMAPILoadModel`
            // that nothing else uses: this takes it back and drops it, once.
            drop(unsafe { Box::from_raw(net.cast::<Net>()) });
        }
        Ok(())
    })
}

/// Runs a model on `input_len` bytes of input and writes `CVMAPIGetOutputLength` bytes of
/// output.
///
/// # Safety
/// `net` is a live handle; `input_data` points to `input_len` readable bytes; `output_data` to
/// `CVMAPIGetOutputLength` writable bytes that do not overlap the input.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn CVMAPIInference(
    net: *mut c_void,
    input_data: *mut c_char,
    input_len: c_int,
    output_data: *mut c_char,
) -> c_int {
    guarded(|| {
        // SAFETY: the function's contract.
        let model = unsafe { self::net(net) }.ok_or(Status::Runtime)?;
        if input_data.is_null() || output_data.is_null() {
            return Err(Status::Runtime);
        }
        // A negative length cannot be the model's input length: the deployed VERIFY_EQ class.
        // SAFETY: the function's contract.
        let input = unsafe { bytes(input_data, input_len) }.ok_or(Status::Logic)?;
        let output = model.infer(input)?;
        // SAFETY: `infer` returns exactly `CVMAPIGetOutputLength` bytes, which the function's
        // contract makes writable at `output_data`, apart from the input.
        unsafe {
            std::ptr::copy_nonoverlapping(output.as_ptr(), output_data.cast::<u8>(), output.len())
        };
        Ok(())
    })
}

/// Writes the graph version (`cvm_1.0.0` or `cvm_1.1.0`) and a NUL.
///
/// # Safety
/// `net` is a live handle; `version` has room for 10 bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn CVMAPIGetVersion(net: *mut c_void, version: *mut c_char) -> c_int {
    guarded(|| {
        // SAFETY: the function's contract.
        let model = unsafe { self::net(net) }.ok_or(Status::Runtime)?;
        // SAFETY: the function's contract.
        unsafe { put_str(version, model.meta().version.name().as_bytes()) }
    })
}

/// Writes the graph's `postprocess` as the deployed runtime keeps it (``, `argmax`,
/// `detection`, or any other string of at most 31 bytes) and a NUL.
///
/// # Safety
/// `net` is a live handle; `method` has room for 32 bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn CVMAPIGetPreprocessMethod(net: *mut c_void, method: *mut c_char) -> c_int {
    guarded(|| {
        // SAFETY: the function's contract.
        let model = unsafe { self::net(net) }.ok_or(Status::Runtime)?;
        // SAFETY: the function's contract.
        unsafe { put_str(method, &cvm::bytes_of_text(&model.meta().postprocess_name)) }
    })
}

/// Defines a getter that writes one figure of a loaded model to `*out`.
macro_rules! getter {
    ($(#[$doc:meta])* $name:ident, |$net:ident| $value:expr) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// `net` is a live handle; `out` points to a writable `unsigned long long`.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(net: *mut c_void, out: *mut c_ulonglong) -> c_int {
            guarded(|| {
                // SAFETY: the function's contract.
                let $net = unsafe { self::net(net) }.ok_or(Status::Runtime)?;
                // SAFETY: the function's contract.
                unsafe { put(out, $value) }
            })
        }
    };
}

getter!(
    /// Bytes `CVMAPIInference` takes.
    CVMAPIGetInputLength,
    |model| model.meta().contract.input_length
);
getter!(
    /// Bytes `CVMAPIInference` writes.
    CVMAPIGetOutputLength,
    |model| model.meta().contract.output_length
);
getter!(
    /// Bytes per input element: 1 or 4.
    CVMAPIGetInputTypeSize,
    |model| model.meta().contract.input_type_size
);
getter!(
    /// Bytes per output element: 1 or 4.
    CVMAPIGetOutputTypeSize,
    |model| model.meta().contract.output_type_size
);
getter!(
    /// The deployed runtime's storage size (the Cortex node sizes its model cache by it).
    CVMAPIGetStorageSize,
    |model| model.meta().contract.storage_size
);
getter!(
    /// The legacy gas of the model's graph (what the chain charges); `ERROR_LOGIC` when it
    /// exceeds the deployed limits, which the deployed runtime checks here and not at load.
    CVMAPIGetGasFromModel,
    |model| model.meta().legacy_gas.clone().map_err(|_| Status::Logic)?
);

/// The legacy gas of a graph JSON given as a NUL-terminated string.
///
/// # Safety
/// `graph_json` is a NUL-terminated string (the graph's bytes are read up to the first NUL);
/// `gas` points to a writable `unsigned long long`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn CVMAPIGetGasFromGraphFile(
    graph_json: *const c_char,
    gas: *mut c_ulonglong,
) -> c_int {
    guarded(|| {
        // The deployed runtime builds a `std::string` from it: a `logic_error` for null.
        if graph_json.is_null() {
            return Err(Status::Logic);
        }
        // SAFETY: not null, and NUL-terminated by the function's contract.
        let graph = unsafe { CStr::from_ptr(graph_json) }.to_bytes();
        let value = gas_from_graph(graph)?;
        // SAFETY: the function's contract.
        unsafe { put(gas, value) }
    })
}
