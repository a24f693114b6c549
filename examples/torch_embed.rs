//! cudadrv embedded in PyTorch: a shared library that Python loads with `ctypes` and
//! calls on torch's own tensors (DLPack capsules), on torch's current stream and in the
//! context torch made current, as a Rust extension of a framework would be written.
//! `examples/torch_embed.py` drives it; the GPU bundle runs the pair as `hw_torch`.
//!
//! Its `unsafe` is the FFI boundary, which no API can close: the functions take raw
//! DLPack pointers and a raw stream from Python (`unsafe extern "C"`, their contract in
//! `# Safety`), and importing a tensor (`DlpackTensor::from_legacy`) and borrowing
//! torch's stream (`Stream::borrow_raw`) rely on what the caller promises about them.
//! Everything done with them afterwards is safe code.
//!
//! Every function returns 0 on success, else writes the error into `err` (UTF-8, cut to
//! `err_len` bytes, NUL-terminated) and returns a code: 1 for an error of this crate,
//! 2 for a `StreamCapturing` refusal (the caller's capture is running), 3 for a null
//! argument.

use std::ffi::c_char;

use cudadrv::cuda_sys::CUstream;
use cudadrv::memory::dlpack::{self, DLManagedTensor, DLManagedTensorVersioned, DlpackTensor};
use cudadrv::memory::pointer_info;
use cudadrv::{Context, DeviceBuffer, Error, Stream};

/// The context torch made current on this thread (its device's primary context).
fn current() -> Result<Context, Error> {
    Context::current()?.ok_or(Error::InvalidArgument(
        "no current context: call after torch has initialized CUDA",
    ))
}

/// Writes `e` into the caller's buffer and returns its code.
fn report(e: &Error, err: *mut c_char, err_len: usize) -> i32 {
    let code = if matches!(e, Error::StreamCapturing(_)) {
        2
    } else {
        1
    };
    if !err.is_null() && err_len > 0 {
        let text = e.to_string();
        let n = text.len().min(err_len - 1);
        // SAFETY: the caller's buffer of `err_len` bytes; `n + 1 <= err_len`.
        unsafe {
            core::ptr::copy_nonoverlapping(text.as_ptr(), err.cast::<u8>(), n);
            *err.add(n) = 0;
        }
    }
    code
}

/// `dst = src` with its first `head` values set to `value`, both `float32` tensors of
/// one size, as two DLPack tensors (`torch.utils.dlpack.to_dlpack`) whose ownership
/// passes here; the work goes on torch's stream `stream` (`torch.cuda.current_stream()
/// .cuda_stream`), and the tensors go back to torch (their deleters) once it is done.
///
/// # Safety
/// `src` and `dst` are unconsumed DLPack tensors (or null), produced for `stream`;
/// `err` points at `err_len` writable bytes (or is null).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cudadrv_copy_head(
    src: *mut DLManagedTensor,
    dst: *mut DLManagedTensor,
    stream: u64,
    head: u64,
    value: f32,
    err: *mut c_char,
    err_len: usize,
) -> i32 {
    if src.is_null() || dst.is_null() {
        return 3;
    }
    let run = || -> Result<(), Error> {
        let ctx = current()?;
        // SAFETY: torch's stream of its current context, alive across this call; torch
        // begins and ends its captures between calls, on this thread.
        let stream = unsafe { Stream::borrow_raw(stream as usize as CUstream, &ctx) };
        // SAFETY: the caller hands both tensors over (produced for `stream`).
        let src = unsafe { DlpackTensor::from_legacy(src, &ctx, &stream)? };
        // SAFETY: as above.
        let mut dst = unsafe { DlpackTensor::from_legacy(dst, &ctx, &stream)? };
        let head = usize::try_from(head).unwrap_or(usize::MAX);
        let mut out = dst.view_mut::<f32>()?;
        out.copy_from_async(src.view::<f32>()?, &stream)?;
        out.into_slice(..head)?
            .memset_d32_async(value.to_bits(), &stream)?;
        Ok(()) // the tensors drop here: `stream` is synchronized, then their deleters run
    };
    match run() {
        Ok(()) => 0,
        Err(e) => report(&e, err, err_len),
    }
}

/// The CUDA device ordinal of the memory at `ptr` (`-1` for memory CUDA does not know).
#[unsafe(no_mangle)]
pub extern "C" fn cudadrv_pointer_device(ptr: u64) -> i32 {
    pointer_info(ptr).map_or(-2, |i| i.device_ordinal)
}

/// `n` values `0, 1, 2, ...` (`float32`) in a new device buffer, exported as a DLPack
/// tensor for torch (`torch.from_dlpack` of a `dltensor_versioned` capsule) with the
/// stream handshake: written on a stream of this library, which torch's `stream` then
/// waits for. Null on an error (written into `err`).
///
/// # Safety
/// `stream` is a stream of the current context (or a default-stream handle); `err` as
/// for [`cudadrv_copy_head`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cudadrv_export_iota(
    n: u64,
    stream: u64,
    err: *mut c_char,
    err_len: usize,
) -> *mut DLManagedTensorVersioned {
    let run = || -> Result<*mut DLManagedTensorVersioned, Error> {
        let ctx = current()?;
        let ours = Stream::non_blocking(&ctx)?;
        let n = usize::try_from(n).unwrap_or(usize::MAX);
        let values: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let mut buf = DeviceBuffer::<f32>::new(&ctx, n)?;
        // SAFETY: `values` lives until `ours` is synchronized below, before it drops.
        unsafe { buf.view_mut().copy_from_host_async(&values, &ours)? };
        let tensor = dlpack::export(buf, &ours, Some(stream as usize as CUstream))?;
        ours.synchronize()?; // `values` may go; torch's stream was ordered by an event
        Ok(tensor)
    };
    match run() {
        Ok(t) => t,
        Err(e) => {
            report(&e, err, err_len);
            core::ptr::null_mut()
        }
    }
}
