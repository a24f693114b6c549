//! Sharing device memory and events with other processes (driver API "Memory
//! Management" IPC calls, "Virtual Memory Management" shareable handles, "Stream Ordered
//! Memory Allocator" pool export; Programming Guide 4.3.3.4, 4.15, 4.16). Linux, with
//! `std`.
//!
//! Three mechanisms, each with its own ownership rules:
//!
//! - **Legacy IPC** ([`IpcMemHandle`], [`IpcMapping`], [`IpcEventHandle`]): a 64-byte
//!   handle of a `cuMemAlloc` allocation ([`DeviceBuffer::ipc_handle`]) or of an event
//!   created with [`EventFlags::INTERPROCESS`] ([`Event::ipc_handle`]), sent as bytes
//!   by any means. The importer maps it with [`IpcMapping::open`] (closed on drop) and
//!   opens the event with [`Event::open_ipc`]. The exporter must keep its buffer until
//!   every importer has closed its mapping (the driver leaves freeing an open
//!   allocation undefined); the importer's mapping stays valid in the importer
//!   whatever happens to it.
//! - **VMM shareable handles** ([`PhysicalMemory::export_fd`],
//!   [`PhysicalMemory::import_fd`]): a POSIX file descriptor naming physical memory
//!   created with [`PhysicalMemory::new_exportable`], passed over a Unix socket with
//!   [`send_fds`] / [`recv_fds`] (`SCM_RIGHTS`). Each side maps it in its own
//!   [`VirtualRange`](crate::memory::vmm::VirtualRange); the memory lives until the
//!   last handle and mapping in any process are gone, so either side may release first.
//! - **IPC memory pools** ([`MemPool::new_exportable`], [`MemPool::export_fd`],
//!   [`MemPool::import_fd`], [`MemPool::export_pointer`], [`MemPool::import_pointer`]):
//!   the pool's descriptor goes over the socket once, then each allocation as 64 bytes
//!   of [`PoolPtrExport`]. An imported allocation ([`ImportedPoolAlloc`]) is freed by
//!   the importer (on drop) before the exporter frees it; IPC events order the two
//!   processes' streams.
//!
//! A process that dies (even by `SIGKILL`) drops its side: the driver closes its
//! mappings and handles, and memory the other process still holds stays valid
//! (`hw_ipc` kills a child that mapped the parent's memory and uses it afterwards).

use super::device_memory::device_memory;
use core::ffi::c_void;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::vec::Vec;

use cudadrv_sys::{
    CUdeviceptr, CUipcEventHandle, CUipcMemHandle, CUmemAllocationHandleType, CUmemPoolProps,
    CUmemPoolPtrExportData,
};

use crate::driver::context::Context;
use crate::driver::dropping;
use crate::driver::event::{Event, EventFlags};
use crate::error::{Error, Result, drv, enter_for_drop};
use crate::memory::vmm::PhysicalMemory;
use crate::memory::{DeviceBuffer, DeviceView, DeviceViewMut, MemPool, Pod, Release, byte_len};

const POSIX_FD: CUmemAllocationHandleType =
    CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;

/// Size of the legacy IPC handles and of pool pointer export data.
pub const HANDLE_BYTES: usize = 64;

macro_rules! handle_bytes {
    ($(#[$m:meta])* $name:ident($raw:ty)) => {
        $(#[$m])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash)]
        pub struct $name(pub [u8; HANDLE_BYTES]);

        impl $name {
            /// The bytes to send to the other process.
            #[must_use]
            pub const fn to_bytes(self) -> [u8; HANDLE_BYTES] {
                self.0
            }

            /// The handle the other process sent.
            #[must_use]
            pub const fn from_bytes(bytes: [u8; HANDLE_BYTES]) -> Self {
                Self(bytes)
            }

            fn from_raw(raw: $raw) -> Self {
                let mut b = [0u8; HANDLE_BYTES];
                for (d, s) in b.iter_mut().zip(raw.reserved.iter()) {
                    *d = *s as u8;
                }
                Self(b)
            }

            fn to_raw(self) -> $raw {
                let mut raw = <$raw>::default();
                for (d, s) in raw.reserved.iter_mut().zip(self.0.iter()) {
                    *d = *s as _;
                }
                raw
            }
        }

        impl core::fmt::Debug for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                write!(f, concat!(stringify!($name), "("))?;
                for b in &self.0[..8] {
                    write!(f, "{b:02x}")?;
                }
                write!(f, "..)")
            }
        }
    };
}

handle_bytes!(
    /// A legacy IPC handle of device memory (`CUipcMemHandle`): see
    /// [`DeviceBuffer::ipc_handle`], [`IpcMapping::open`].
    IpcMemHandle(CUipcMemHandle)
);
handle_bytes!(
    /// A legacy IPC handle of an event (`CUipcEventHandle`): see [`Event::ipc_handle`],
    /// [`Event::open_ipc`].
    IpcEventHandle(CUipcEventHandle)
);
handle_bytes!(
    /// What identifies one allocation of an exported pool in another process
    /// (`CUmemPoolPtrExportData`): see [`MemPool::export_pointer`].
    PoolPtrExport(CUmemPoolPtrExportData)
);

impl<T: Copy> DeviceBuffer<T> {
    /// `cuIpcGetMemHandle`: a handle another process opens with [`IpcMapping::open`].
    /// Keep this buffer until every importer has closed its mapping.
    ///
    /// # Errors
    /// Driver errors (`CUDA_ERROR_INVALID_VALUE` for an empty buffer, which has no
    /// allocation).
    #[doc(alias = "cuIpcGetMemHandle")]
    pub fn ipc_handle(&self) -> Result<IpcMemHandle> {
        let g = self.context().enter()?;
        let mut raw = CUipcMemHandle::default();
        // SAFETY: valid out-pointer; the buffer's allocation is live; its context is
        // current.
        unsafe { drv!(g.cu, cuIpcGetMemHandle(&mut raw, self.as_raw()))? };
        Ok(IpcMemHandle::from_raw(raw))
    }
}

/// Another process's device memory mapped into this one by a legacy IPC handle
/// (`cuIpcOpenMemHandle`); unmapped (`cuIpcCloseMemHandle`) on drop.
#[derive(Debug)]
pub struct IpcMapping {
    ptr: CUdeviceptr,
    bytes: usize,
    ctx: Context,
}

device_memory!(bytes impl[] IpcMapping, |m| ptr: m.ptr, bytes: m.bytes);

// SAFETY: a device address and a context; the driver calls are thread-safe.
unsafe impl Send for IpcMapping {}
// SAFETY: as above; every method takes `&self` and only reads.
unsafe impl Sync for IpcMapping {}

impl IpcMapping {
    /// `cuIpcOpenMemHandle` (with `CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS`) in `ctx`; the
    /// size is the exported allocation's (`cuMemGetAddressRange`).
    ///
    /// # Errors
    /// Driver errors: `CUDA_ERROR_INVALID_CONTEXT` for a handle of this same process,
    /// `CUDA_ERROR_INVALID_VALUE` / `CUDA_ERROR_INVALID_HANDLE` for a stale one.
    #[doc(alias = "cuIpcOpenMemHandle")]
    pub fn open(ctx: &Context, handle: &IpcMemHandle) -> Result<Self> {
        let g = ctx.enter()?;
        let mut ptr = 0;
        // SAFETY: valid out-pointer; the handle is plain bytes the driver validates;
        // the context is current.
        unsafe {
            drv!(
                g.cu,
                cuIpcOpenMemHandle(
                    &mut ptr,
                    handle.to_raw(),
                    cudadrv_sys::CUipcMem_flags::CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS.0
                )
            )?
        };
        let mut mapping = Self {
            ptr,
            bytes: 0,
            ctx: ctx.clone(),
        };
        let (mut base, mut bytes) = (0, 0);
        // SAFETY: `ptr` is mapped (closed by `mapping`'s drop on the error path).
        unsafe { drv!(g.cu, cuMemGetAddressRange(&mut base, &mut bytes, ptr))? };
        mapping.bytes = bytes - (ptr - base) as usize;
        Ok(mapping)
    }
    /// The mapping as a shared view of values of `T` (as many as fit), usable wherever a
    /// buffer is; its release (`cuIpcCloseMemHandle`) does not wait for queued work, so
    /// the view takes synchronous copies and [`kernel::scope`](crate::kernel::scope)
    /// launches, not asynchronous work of its own.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a zero-sized `T` or a mapping not aligned for it.
    pub fn view<T: Pod>(&self) -> Result<DeviceView<'_, T>> {
        let len = self.typed_len::<T>()?;
        // SAFETY: the mapping's `bytes` bytes, open while `self` is borrowed; the
        // exporting process's writes are device-side races, not host memory.
        Ok(unsafe { DeviceView::new(self.ptr, len, &self.ctx, Release::Unordered) })
    }

    /// The mapping as an exclusive view of values of `T` (as many as fit): written by
    /// copies, memsets and kernels of this process.
    ///
    /// # Errors
    /// As [`view`](Self::view).
    pub fn view_mut<T: Pod>(&mut self) -> Result<DeviceViewMut<'_, T>> {
        let len = self.typed_len::<T>()?;
        // SAFETY: as in `view`, borrowed exclusively.
        Ok(unsafe { DeviceViewMut::new(self.ptr, len, &self.ctx, Release::Unordered) })
    }

    /// How many values of `T` fit, if the mapping is aligned for them.
    fn typed_len<T>(&self) -> Result<usize> {
        if size_of::<T>() == 0 || self.ptr % align_of::<T>() as u64 != 0 {
            return Err(Error::InvalidArgument(
                "an IPC mapping viewed as a zero-sized or more strictly aligned type",
            ));
        }
        Ok(self.bytes / size_of::<T>())
    }

    /// `cuMemcpyDtoH` of `dst.len()` elements from byte `offset` (synchronous).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] past the end of the mapping; driver errors.
    pub fn copy_to_host<T: Pod>(&self, offset: usize, dst: &mut [T]) -> Result<()> {
        let len = byte_len::<T>(dst.len())?;
        check_range(offset, len, self.bytes)?;
        let g = self.ctx.enter()?;
        // SAFETY: the range lies in the mapping; `dst` holds `len` bytes; current ctx.
        unsafe {
            drv!(
                g.cu,
                cuMemcpyDtoH(dst.as_mut_ptr().cast(), self.ptr + offset as u64, len)
            )
        }
    }
}

fn check_range(offset: usize, len: usize, size: usize) -> Result<()> {
    match offset.checked_add(len) {
        Some(end) if end <= size => Ok(()),
        _ => Err(Error::InvalidArgument(
            "copy past the end of the shared memory",
        )),
    }
}

impl Drop for IpcMapping {
    fn drop(&mut self) {
        let _g = enter_for_drop!(self.ctx);
        // SAFETY: opened by `cuIpcOpenMemHandle`, closed once here.
        unsafe { dropping!(cuIpcCloseMemHandle(self.ptr)) };
    }
}

impl Event {
    /// `cuEventCreate` with `CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING`: an event
    /// another process can wait for ([`ipc_handle`](Self::ipc_handle)).
    ///
    /// # Errors
    /// Driver errors.
    pub fn new_interprocess(ctx: &Context) -> Result<Self> {
        Self::new(ctx, EventFlags::INTERPROCESS | EventFlags::DISABLE_TIMING)
    }

    /// `cuIpcGetEventHandle`: a handle another process opens with
    /// [`open_ipc`](Self::open_ipc).
    ///
    /// # Errors
    /// Driver errors (`CUDA_ERROR_INVALID_RESOURCE_HANDLE` for an event without
    /// `INTERPROCESS`).
    #[doc(alias = "cuIpcGetEventHandle")]
    pub fn ipc_handle(&self) -> Result<IpcEventHandle> {
        let g = self.context().enter()?;
        let mut raw = CUipcEventHandle::default();
        // SAFETY: valid out-pointer; live event; its context is current.
        unsafe { drv!(g.cu, cuIpcGetEventHandle(&mut raw, self.as_raw()))? };
        Ok(IpcEventHandle::from_raw(raw))
    }

    /// `cuIpcOpenEventHandle`: the other process's event, in `ctx`; recording and
    /// waiting on it order work across the two processes. Destroyed on drop (the
    /// exporter's event is not affected).
    ///
    /// # Errors
    /// Driver errors (`CUDA_ERROR_INVALID_CONTEXT` for a handle of this same process).
    #[doc(alias = "cuIpcOpenEventHandle")]
    pub fn open_ipc(ctx: &Context, handle: &IpcEventHandle) -> Result<Self> {
        let g = ctx.enter()?;
        let mut raw = core::ptr::null_mut();
        // SAFETY: valid out-pointer; the handle is plain bytes the driver validates.
        unsafe { drv!(g.cu, cuIpcOpenEventHandle(&mut raw, handle.to_raw()))? };
        // SAFETY: a new event of `ctx` owned by nobody else.
        Ok(unsafe { Self::from_raw(raw, ctx) })
    }
}

impl PhysicalMemory {
    /// `cuMemExportToShareableHandle`: a file descriptor naming this memory, for
    /// [`send_fds`]; memory made with [`new_exportable`](Self::new_exportable) only.
    ///
    /// # Errors
    /// Driver errors (`CUDA_ERROR_INVALID_VALUE` for memory not made exportable).
    #[doc(alias = "cuMemExportToShareableHandle")]
    pub fn export_fd(&self) -> Result<OwnedFd> {
        let g = self.context().enter()?;
        let mut fd: core::ffi::c_int = -1;
        // SAFETY: for POSIX_FD the out-parameter is an int; live handle; current ctx.
        unsafe {
            drv!(
                g.cu,
                cuMemExportToShareableHandle(
                    (&raw mut fd).cast::<c_void>(),
                    self.as_raw(),
                    POSIX_FD,
                    0
                )
            )?
        };
        // SAFETY: the driver returned a new descriptor that this process now owns.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// `cuMemImportFromShareableHandle`: memory another process exported with
    /// [`export_fd`](Self::export_fd), of `bytes` bytes (the exporter's size, sent
    /// alongside), in `ctx`'s device. The descriptor may be closed afterwards.
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuMemImportFromShareableHandle")]
    pub fn import_fd(ctx: &Context, fd: BorrowedFd<'_>, bytes: usize) -> Result<Self> {
        let g = ctx.enter()?;
        let mut handle = 0;
        // SAFETY: for POSIX_FD the handle argument is the descriptor cast to a pointer;
        // the descriptor is open for the call (borrowed).
        unsafe {
            drv!(
                g.cu,
                cuMemImportFromShareableHandle(
                    &mut handle,
                    fd.as_raw_fd() as usize as *mut c_void,
                    POSIX_FD
                )
            )?
        };
        Ok(Self::from_owned_handle(ctx, handle, bytes))
    }
}

impl MemPool {
    /// `cuMemPoolCreate` of device memory exportable as a POSIX file descriptor
    /// ([`export_fd`](Self::export_fd)).
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuMemPoolCreate")]
    pub fn new_exportable(ctx: &Context) -> Result<Self> {
        let props = CUmemPoolProps {
            allocType: cudadrv_sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED,
            handleTypes: POSIX_FD,
            location: crate::memory::managed::Location::Device(ctx.device()).as_raw(),
            ..CUmemPoolProps::default()
        };
        Self::with_props(ctx, &props)
    }

    /// `cuMemPoolExportToShareableHandle`: a descriptor of the pool, for [`send_fds`].
    ///
    /// # Errors
    /// Driver errors (`CUDA_ERROR_INVALID_VALUE` for a pool not made exportable).
    #[doc(alias = "cuMemPoolExportToShareableHandle")]
    pub fn export_fd(&self) -> Result<OwnedFd> {
        let g = self.context().enter()?;
        let mut fd: core::ffi::c_int = -1;
        // SAFETY: for POSIX_FD the out-parameter is an int; live pool; current ctx.
        unsafe {
            drv!(
                g.cu,
                cuMemPoolExportToShareableHandle(
                    (&raw mut fd).cast::<c_void>(),
                    self.as_raw(),
                    POSIX_FD,
                    0
                )
            )?
        };
        // SAFETY: a new descriptor this process owns.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// `cuMemPoolImportFromShareableHandle`: the pool another process exported, in
    /// `ctx`; destroyed (this process's view) on drop.
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuMemPoolImportFromShareableHandle")]
    pub fn import_fd(ctx: &Context, fd: BorrowedFd<'_>) -> Result<Self> {
        let g = ctx.enter()?;
        let mut raw = core::ptr::null_mut();
        // SAFETY: the descriptor cast to a pointer, open for the call; valid out-pointer.
        unsafe {
            drv!(
                g.cu,
                cuMemPoolImportFromShareableHandle(
                    &mut raw,
                    fd.as_raw_fd() as usize as *mut c_void,
                    POSIX_FD,
                    0
                )
            )?
        };
        // SAFETY: a new pool handle of `ctx` owned by nobody else.
        Ok(unsafe { Self::from_raw(raw, ctx) })
    }

    /// `cuMemPoolExportPointer`: what identifies an allocation of this (exported) pool
    /// in another process. Keep the allocation until the importer has freed its view.
    ///
    /// # Errors
    /// Driver errors (`CUDA_ERROR_INVALID_VALUE` when `ptr` is not from this pool).
    #[doc(alias = "cuMemPoolExportPointer")]
    pub fn export_pointer(&self, ptr: CUdeviceptr) -> Result<PoolPtrExport> {
        let g = self.context().enter()?;
        let mut raw = CUmemPoolPtrExportData::default();
        // SAFETY: valid out-pointer; the driver checks `ptr` belongs to a pool.
        unsafe { drv!(g.cu, cuMemPoolExportPointer(&mut raw, ptr))? };
        Ok(PoolPtrExport::from_raw(raw))
    }

    /// `cuMemPoolImportPointer`: the allocation `data` names, from this imported pool.
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuMemPoolImportPointer")]
    pub fn import_pointer(&self, data: &PoolPtrExport) -> Result<ImportedPoolAlloc<'_>> {
        let g = self.context().enter()?;
        let mut ptr = 0;
        let mut raw = data.to_raw();
        // SAFETY: valid pointers; the driver validates the export data.
        unsafe {
            drv!(
                g.cu,
                cuMemPoolImportPointer(&mut ptr, self.as_raw(), &mut raw)
            )?
        };
        let mut alloc = ImportedPoolAlloc {
            ptr,
            bytes: 0,
            pool: self,
        };
        let (mut base, mut bytes) = (0, 0);
        // SAFETY: `ptr` is mapped (freed by `alloc`'s drop on the error path).
        unsafe { drv!(g.cu, cuMemGetAddressRange(&mut base, &mut bytes, ptr))? };
        alloc.bytes = bytes - (ptr - base) as usize;
        Ok(alloc)
    }
}

/// An allocation of another process's pool, imported into an imported pool; freed
/// (`cuMemFree`, this process's view only) on drop, which borrows the pool.
#[derive(Debug)]
pub struct ImportedPoolAlloc<'p> {
    ptr: CUdeviceptr,
    bytes: usize,
    pool: &'p MemPool,
}

device_memory!(bytes impl['p] ImportedPoolAlloc<'p>, |m| ptr: m.ptr, bytes: m.bytes);

impl Drop for ImportedPoolAlloc<'_> {
    fn drop(&mut self) {
        let _g = enter_for_drop!(self.pool.context());
        // SAFETY: imported by `cuMemPoolImportPointer`, freed once here (`cuMemFree`
        // waits for the pending work of its own context; work on it is queued only by
        // `unsafe` launches, whose contract covers the rest).
        unsafe { dropping!(cuMemFree(self.ptr)) };
    }
}

/// Sends `bytes` and the descriptors `fds` as one message (`sendmsg` with
/// `SCM_RIGHTS`). `bytes` must not be empty (a message carries at least one byte).
///
/// # Errors
/// The OS error; `InvalidInput` for empty `bytes` or more than 16 descriptors.
pub fn send_fds(sock: &UnixStream, bytes: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<()> {
    if bytes.is_empty() || fds.len() > MAX_FDS {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "send_fds: 1.. bytes and at most 16 descriptors",
        ));
    }
    let mut iov = libc::iovec {
        iov_base: bytes.as_ptr() as *mut c_void,
        iov_len: bytes.len(),
    };
    let mut cmsg_buf = CmsgBuf([0; CMSG_SPACE]);
    // SAFETY: an all-zero msghdr is valid (null pointers, zero lengths).
    let mut msg: libc::msghdr = unsafe { core::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if !fds.is_empty() {
        let data_len = core::mem::size_of_val(fds) as u32;
        // SAFETY: pure arithmetic.
        let space = unsafe { libc::CMSG_SPACE(data_len) } as usize;
        msg.msg_control = cmsg_buf.0.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        // SAFETY: `msg` names a control buffer of `space` bytes (at most CMSG_SPACE,
        // aligned for cmsghdr), so the first header and its data fit in it.
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(data_len) as _;
            let data = libc::CMSG_DATA(cmsg).cast::<RawFd>();
            for (i, fd) in fds.iter().enumerate() {
                data.add(i).write_unaligned(fd.as_raw_fd());
            }
        }
    }
    // SAFETY: `msg` points at live buffers for the duration of the call.
    let n = unsafe { libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    if n as usize != bytes.len() {
        return Err(io::Error::new(
            io::ErrorKind::WriteZero,
            "send_fds: short write",
        ));
    }
    Ok(())
}

/// Receives one message sent by [`send_fds`]: its bytes into `buf` and its
/// descriptors (owned, close-on-exec). Returns the byte count (0 at end of stream).
///
/// # Errors
/// The OS error; `InvalidData` when descriptors were cut off (more than 16 sent).
pub fn recv_fds(sock: &UnixStream, buf: &mut [u8]) -> io::Result<(usize, Vec<OwnedFd>)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let mut cmsg_buf = CmsgBuf([0; CMSG_SPACE]);
    // SAFETY: an all-zero msghdr is valid.
    let mut msg: libc::msghdr = unsafe { core::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cmsg_buf.0.as_mut_ptr().cast();
    msg.msg_controllen = CMSG_SPACE as _;
    // SAFETY: `msg` points at live buffers for the duration of the call.
    let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut fds = Vec::new();
    // SAFETY: the kernel filled `msg`'s control buffer; the CMSG macros walk it within
    // `msg_controllen`; each SCM_RIGHTS payload is an array of new descriptors that this
    // process now owns.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(cmsg).cast::<RawFd>();
                let payload = (*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                for i in 0..payload / core::mem::size_of::<RawFd>() {
                    fds.push(OwnedFd::from_raw_fd(data.add(i).read_unaligned()));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    if msg.msg_flags & libc::MSG_CTRUNC != 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "recv_fds: descriptors cut off",
        ));
    }
    Ok((n as usize, fds))
}

/// The most descriptors one message carries.
const MAX_FDS: usize = 16;
/// Control buffer bytes for [`MAX_FDS`] descriptors (`CMSG_SPACE(16 * 4)` on Linux).
const CMSG_SPACE: usize = 16 + MAX_FDS * 4 + 8;

/// A control-message buffer aligned for `cmsghdr`.
#[repr(C, align(8))]
struct CmsgBuf([u8; CMSG_SPACE]);

#[cfg(test)]
mod tests {
    use super::*;
    use std::format;
    use std::io::{Read, Write};

    #[test]
    fn handles_round_trip_their_bytes() {
        let mut b = [0u8; HANDLE_BYTES];
        for (i, x) in b.iter_mut().enumerate() {
            *x = (i * 7 + 200) as u8;
        }
        let h = IpcMemHandle::from_bytes(b);
        assert_eq!(IpcMemHandle::from_raw(h.to_raw()), h);
        let e = IpcEventHandle::from_bytes(b);
        assert_eq!(IpcEventHandle::from_raw(e.to_raw()).to_bytes(), b);
        let p = PoolPtrExport::from_bytes(b);
        assert_eq!(PoolPtrExport::from_raw(p.to_raw()), p);
        assert!(format!("{h:?}").starts_with("IpcMemHandle(c8cf"));
    }

    #[test]
    fn control_buffer_fits_sixteen_descriptors() {
        // SAFETY: pure arithmetic.
        let need = unsafe { libc::CMSG_SPACE((MAX_FDS * 4) as u32) } as usize;
        assert!(need <= CMSG_SPACE, "{need} > {CMSG_SPACE}");
    }

    #[test]
    #[cfg_attr(miri, ignore = "sendmsg/recvmsg are foreign calls Miri cannot run")]
    fn descriptors_travel_over_a_socket() {
        let (a, b) = UnixStream::pair().unwrap();
        let (mut r1, mut w1) = UnixStream::pair().unwrap();
        let (mut r2, w2) = UnixStream::pair().unwrap();
        send_fds(&a, b"two", &[w1.as_fd_borrowed(), w2.as_fd_borrowed()]).unwrap();
        let mut buf = [0u8; 8];
        let (n, fds) = recv_fds(&b, &mut buf).unwrap();
        assert_eq!(&buf[..n], b"two");
        assert_eq!(fds.len(), 2);
        // Writing through the received descriptors reaches the original sockets' peers.
        let mut fds = fds;
        let got2 = fds.pop().unwrap();
        let mut got1 = UnixStream::from(fds.pop().unwrap());
        got1.write_all(b"x").unwrap();
        let mut one = [0u8; 1];
        r1.read_exact(&mut one).unwrap();
        assert_eq!(&one, b"x");
        w1.write_all(b"y").unwrap();
        drop(w2);
        r2.set_nonblocking(true).unwrap();
        // w2's descriptor was duplicated into the message: the peer is still open.
        assert!(r2.read(&mut one).is_err());
        // Once the received copy closes too, the peer sees the end of the stream.
        drop(got2);
        r2.set_nonblocking(false).unwrap();
        assert_eq!(r2.read(&mut one).unwrap(), 0);
        // No descriptors: plain bytes.
        send_fds(&a, b"z", &[]).unwrap();
        let (n, fds) = recv_fds(&b, &mut buf).unwrap();
        assert_eq!((n, fds.len()), (1, 0));
        assert!(send_fds(&a, b"", &[]).is_err());
    }

    trait Borrowed {
        fn as_fd_borrowed(&self) -> BorrowedFd<'_>;
    }
    impl Borrowed for UnixStream {
        fn as_fd_borrowed(&self) -> BorrowedFd<'_> {
            use std::os::fd::AsFd;
            self.as_fd()
        }
    }

    #[test]
    fn ranges_are_checked() {
        assert!(check_range(0, 8, 8).is_ok());
        assert!(check_range(4, 8, 8).is_err());
        assert!(check_range(usize::MAX, 2, 8).is_err());
    }
}
