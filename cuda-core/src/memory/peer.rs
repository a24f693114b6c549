//! Several devices in one process (driver API sections "Peer Context Memory Access" and
//! the peer copies of "Memory Management"; Programming Guide 4.3.3): what two devices can
//! do with each other's memory, turning peer access on and off, copies between contexts,
//! and the access types used by [`MemPool::set_access`](crate::MemPool::set_access) and
//! [`Graph::add_mem_alloc_node_with_peers`](crate::Graph::add_mem_alloc_node_with_peers).
//!
//! - [`Device::can_access_peer`] (`cuDeviceCanAccessPeer`) and
//!   [`Device::p2p_attributes`] (`cuDeviceGetP2PAttribute`: performance rank, access,
//!   native atomics, CUDA array access).
//! - [`Context::enable_peer_access`] / [`Context::disable_peer_access`]
//!   (`cuCtxEnablePeerAccess` / `cuCtxDisablePeerAccess`): idempotent, each returns
//!   whether it changed anything.
//! - [`DeviceBuffer::copy_from_peer`] (`cuMemcpyPeer`, complete on return) and
//!   [`DeviceBuffer::copy_from_peer_async`] (`cuMemcpyPeerAsync` on a stream). Neither
//!   needs peer access: without it the driver stages the copy through the host.
//! - Events across devices need nothing new: [`Stream::wait_event`] takes an
//!   [`Event`](crate::Event) of any context, of this device or another
//!   (`cuStreamWaitEvent` allows it), so a stream of device 1 can wait for work recorded
//!   on device 0.
//!
//! ```no_run
//! # fn main() -> cudadrv::Result<()> {
//! use cudadrv::{Context, Device, DeviceBuffer, Event, EventFlags, Stream};
//! let (d0, d1) = (Device::get(0)?, Device::get(1)?);
//! let (c0, c1) = (Context::primary(d0)?, Context::primary(d1)?);
//! if d1.can_access_peer(d0)? {
//!     c1.enable_peer_access(&c0)?; // kernels in `c1` may now dereference `c0`'s memory
//! }
//! let src = DeviceBuffer::from_slice(&c0, &[1u32, 2, 3])?;
//! let mut dst = DeviceBuffer::<u32>::zeroed(&c1, 3)?;
//! dst.copy_from_peer(&src)?; // device 0 -> device 1
//!
//! // Order work on device 1 after work on device 0.
//! let (s0, mut s1) = (Stream::non_blocking(&c0)?, Stream::non_blocking(&c1)?);
//! let done = Event::new(&c0, EventFlags::DISABLE_TIMING)?;
//! done.record(&s0)?;
//! s1.wait_event(&done)?;
//! # Ok(()) }
//! ```
//!
//! # Unsafe policy
//! Peer access is a device-side permission: turning it off while a kernel of the other
//! device reads through it faults that kernel, which the driver reports; it is no host
//! memory hazard, so enabling and disabling are safe. An asynchronous peer copy is
//! `unsafe`: freeing a buffer (`cuMemFree`) waits for the work of its own context, not for
//! a copy queued on another device's stream, so the caller keeps both buffers alive until
//! the copy has run.

use core::ffi::c_int;

use cudadrv_sys::{CUdevice_P2PAttribute, CUmemAccess_flags, CUmemAccessDesc, CUresult};

use crate::driver::api;
use crate::driver::context::Context;
use crate::driver::device::Device;
use crate::driver::stream::Stream;
use crate::error::{Error, Result, drv};
use crate::memory::{DeviceBuffer, same_len};

/// Access a device has to memory of a pool or of a graph allocation
/// (`CUmemAccess_flags`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemAccess {
    /// `CU_MEM_ACCESS_FLAGS_PROT_NONE`: no access (the default for devices other than
    /// the memory's own).
    None,
    /// `CU_MEM_ACCESS_FLAGS_PROT_READ`: read only.
    Read,
    /// `CU_MEM_ACCESS_FLAGS_PROT_READWRITE`: read and write.
    ReadWrite,
}

impl MemAccess {
    /// The raw `CUmemAccess_flags`.
    #[must_use]
    pub const fn as_raw(self) -> CUmemAccess_flags {
        match self {
            Self::None => CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_NONE,
            Self::Read => CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READ,
            Self::ReadWrite => CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
        }
    }

    /// The access a raw value names, or `None` for a value this crate does not know.
    #[must_use]
    pub fn from_raw(raw: CUmemAccess_flags) -> Option<Self> {
        match raw {
            CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_NONE => Some(Self::None),
            CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READ => Some(Self::Read),
            CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE => Some(Self::ReadWrite),
            _ => None,
        }
    }

    /// The descriptor granting this access to `device` (`CUmemAccessDesc`).
    #[must_use]
    pub fn desc(self, device: Device) -> CUmemAccessDesc {
        CUmemAccessDesc {
            location: crate::memory::managed::Location::Device(device).as_raw(),
            flags: self.as_raw(),
        }
    }
}

/// What `cuDeviceGetP2PAttribute` reports for a pair of devices (from one, `src`, to the
/// other, `dst`): see [`Device::p2p_attributes`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct P2pAttributes {
    /// `CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK`: the link's relative performance (lower
    /// is better; comparable between pairs of one system only).
    pub performance_rank: i32,
    /// `CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED`: peer access can be enabled.
    pub access_supported: bool,
    /// `CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED`: atomics over the link are
    /// native.
    pub native_atomic_supported: bool,
    /// `CU_DEVICE_P2P_ATTRIBUTE_CUDA_ARRAY_ACCESS_SUPPORTED`: CUDA arrays can be accessed
    /// over the link.
    pub cuda_array_access_supported: bool,
}

impl Device {
    /// `cuDeviceCanAccessPeer`: whether kernels on this device can read and write memory
    /// of `peer` once peer access is enabled ([`Context::enable_peer_access`]). A device
    /// is never its own peer: `d.can_access_peer(d)` is `false`.
    ///
    /// # Errors
    /// Driver errors (`CUDA_ERROR_INVALID_DEVICE` for an ordinal that is no device).
    #[doc(alias = "cuDeviceCanAccessPeer")]
    pub fn can_access_peer(self, peer: Device) -> Result<bool> {
        let cu = api()?;
        let mut can: c_int = 0;
        // SAFETY: valid out-pointer; plain device ordinals.
        unsafe {
            drv!(
                cu,
                cuDeviceCanAccessPeer(&mut can, self.as_raw(), peer.as_raw())
            )?
        };
        Ok(can != 0)
    }

    /// `cuDeviceGetP2PAttribute`: one attribute of the link from this device to `dst`.
    ///
    /// # Errors
    /// Driver errors: `CUDA_ERROR_INVALID_DEVICE` when `dst` is this device (a pair needs
    /// two devices) or no device, `CUDA_ERROR_INVALID_VALUE` for an attribute the driver
    /// does not know.
    #[doc(alias = "cuDeviceGetP2PAttribute")]
    pub fn p2p_attribute(self, dst: Device, attr: CUdevice_P2PAttribute) -> Result<i32> {
        let cu = api()?;
        let mut v: c_int = 0;
        // SAFETY: valid out-pointer; plain values.
        unsafe {
            drv!(
                cu,
                cuDeviceGetP2PAttribute(&mut v, attr, self.as_raw(), dst.as_raw())
            )?
        };
        Ok(v)
    }

    /// The four `cuDeviceGetP2PAttribute` attributes of the link from this device to
    /// `dst` (four calls).
    ///
    /// ```no_run
    /// # fn main() -> cudadrv::Result<()> {
    /// use cudadrv::Device;
    /// let (d0, d1) = (Device::get(0)?, Device::get(1)?);
    /// let link = d0.p2p_attributes(d1)?;
    /// println!("rank {}, access {}", link.performance_rank, link.access_supported);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`Device::p2p_attribute`].
    #[doc(alias = "cuDeviceGetP2PAttribute")]
    pub fn p2p_attributes(self, dst: Device) -> Result<P2pAttributes> {
        type A = CUdevice_P2PAttribute;
        Ok(P2pAttributes {
            performance_rank: self
                .p2p_attribute(dst, A::CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK)?,
            access_supported: self
                .p2p_attribute(dst, A::CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED)?
                != 0,
            native_atomic_supported: self
                .p2p_attribute(dst, A::CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED)?
                != 0,
            cuda_array_access_supported: self
                .p2p_attribute(dst, A::CU_DEVICE_P2P_ATTRIBUTE_CUDA_ARRAY_ACCESS_SUPPORTED)?
                != 0,
        })
    }
}

/// Maps the result of `cuCtxEnablePeerAccess` / `cuCtxDisablePeerAccess`: success is
/// `true` (changed), `unchanged` (already enabled / not enabled) is `false`, anything
/// else an error naming `call`.
fn changed(rc: CUresult, unchanged: CUresult, call: &'static str) -> Result<bool> {
    if rc == CUresult::CUDA_SUCCESS {
        Ok(true)
    } else if rc == unchanged {
        Ok(false)
    } else {
        Err(Error::Driver { call, code: rc })
    }
}

impl Context {
    /// `cuCtxEnablePeerAccess`: lets kernels and copies of this context dereference
    /// memory allocated in `peer` (a context of another device). One way only: `peer`
    /// reaching this context's memory needs `peer.enable_peer_access(self)`. The access
    /// lasts until [`disable_peer_access`](Self::disable_peer_access) or until either
    /// context is destroyed. This context is made current for the call.
    ///
    /// Idempotent: `Ok(true)` when access was turned on, `Ok(false)` when it already was
    /// (the driver's `CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED`, which is not an error here).
    ///
    /// # Errors
    /// Driver errors: `CUDA_ERROR_PEER_ACCESS_UNSUPPORTED` for two contexts of one
    /// device (driver 580 on two H200s), `CUDA_ERROR_INVALID_DEVICE` when
    /// [`Device::can_access_peer`] says no, `CUDA_ERROR_TOO_MANY_PEERS`,
    /// `CUDA_ERROR_INVALID_CONTEXT`.
    #[doc(alias = "cuCtxEnablePeerAccess")]
    #[doc(alias = "cudaDeviceEnablePeerAccess")]
    pub fn enable_peer_access(&self, peer: &Context) -> Result<bool> {
        let g = self.enter()?;
        let f = g.cu.cuCtxEnablePeerAccess()?;
        // SAFETY: `peer` is a live context (it is borrowed); flags must be 0; this
        // context is current.
        let rc = unsafe { f(peer.as_raw(), 0) };
        changed(
            rc,
            CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED,
            "cuCtxEnablePeerAccess",
        )
    }

    /// `cuCtxDisablePeerAccess`: takes back what
    /// [`enable_peer_access`](Self::enable_peer_access) gave. Kernels of this context
    /// that still read `peer`'s memory afterwards fault (a device error, reported by the
    /// next synchronizing call), so finish them first.
    ///
    /// Idempotent: `Ok(true)` when access was turned off, `Ok(false)` when it was not on
    /// (the driver's `CUDA_ERROR_PEER_ACCESS_NOT_ENABLED`, which is not an error here).
    ///
    /// # Errors
    /// Driver errors (`CUDA_ERROR_INVALID_CONTEXT`).
    #[doc(alias = "cuCtxDisablePeerAccess")]
    #[doc(alias = "cudaDeviceDisablePeerAccess")]
    pub fn disable_peer_access(&self, peer: &Context) -> Result<bool> {
        let g = self.enter()?;
        let f = g.cu.cuCtxDisablePeerAccess()?;
        // SAFETY: `peer` is a live context (borrowed); this context is current.
        let rc = unsafe { f(peer.as_raw()) };
        changed(
            rc,
            CUresult::CUDA_ERROR_PEER_ACCESS_NOT_ENABLED,
            "cuCtxDisablePeerAccess",
        )
    }
}

impl<T: Copy> DeviceBuffer<T> {
    /// `cuMemcpyPeer`: copies `src` (same length, of any context: another device's, or
    /// another context of this device) into this buffer; complete when this returns.
    /// Works with or without peer access (without it the driver stages the copy).
    ///
    /// The driver orders the copy after all work already queued in both contexts, as a
    /// synchronous copy does; this call then waits for it (`cuStreamSynchronize` of the
    /// legacy stream in both contexts).
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] when the lengths differ; driver errors.
    #[doc(alias = "cuMemcpyPeer")]
    #[doc(alias = "cudaMemcpyPeer")]
    pub fn copy_from_peer(&mut self, src: &DeviceBuffer<T>) -> Result<()> {
        same_len(self.len(), src.len())?;
        let bytes = self.size_bytes();
        if bytes == 0 {
            return Ok(());
        }
        {
            let g = self.context().enter()?;
            // SAFETY: both allocations hold `bytes` bytes (same length and type) in live
            // contexts (each buffer keeps its own); `&mut self` and `&src` cannot be one
            // buffer; this buffer's context is current.
            unsafe {
                drv!(
                    g.cu,
                    cuMemcpyPeer(
                        self.as_raw(),
                        self.context().as_raw(),
                        src.as_raw(),
                        src.context().as_raw(),
                        bytes
                    )
                )?;
                drv!(g.cu, cuStreamSynchronize(cudadrv_sys::CU_STREAM_LEGACY))?;
            }
        }
        if src.context() != self.context() {
            let g = src.context().enter()?;
            // SAFETY: the legacy stream handle is valid in every context; `src`'s context
            // is current.
            unsafe { drv!(g.cu, cuStreamSynchronize(cudadrv_sys::CU_STREAM_LEGACY))? };
        }
        Ok(())
    }

    /// `cuMemcpyPeerAsync`: queues a copy of `src` (same length, of any context) into
    /// this buffer on `stream` (of either buffer's context, or any other). Works with or
    /// without peer access.
    ///
    /// ```no_run
    /// # fn main() -> cudadrv::Result<()> {
    /// use cudadrv::{Context, Device, DeviceBuffer, Stream};
    /// let (c0, c1) = (Context::primary(Device::get(0)?)?, Context::primary(Device::get(1)?)?);
    /// let src = DeviceBuffer::<f32>::zeroed(&c0, 1 << 20)?;
    /// let mut dst = DeviceBuffer::<f32>::new(&c1, 1 << 20)?;
    /// let stream = Stream::non_blocking(&c0)?;
    /// // SAFETY: both buffers live until the stream is synchronized, below.
    /// unsafe { dst.copy_from_peer_async(&src, &stream)? };
    /// stream.synchronize()?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Safety
    /// Neither buffer may be dropped before `stream` has executed the copy (synchronize
    /// the stream, or an event recorded after the copy): dropping a buffer waits for work
    /// of its own context only, not for a copy queued on another context's stream.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] when the lengths differ; [`Error::StreamCapturing`]
    /// while `stream` is being captured (the graph would name both buffers by address,
    /// borrowing neither); driver errors.
    #[doc(alias = "cuMemcpyPeerAsync")]
    #[doc(alias = "cudaMemcpyPeerAsync")]
    pub unsafe fn copy_from_peer_async(
        &mut self,
        src: &DeviceBuffer<T>,
        stream: &Stream,
    ) -> Result<()> {
        same_len(self.len(), src.len())?;
        let bytes = self.size_bytes();
        if bytes == 0 {
            return Ok(());
        }
        let g = stream.context().enter()?;
        stream.ensure_not_capturing_current(g.cu, "cuMemcpyPeerAsync")?;
        // SAFETY: both allocations hold `bytes` bytes in live contexts; the caller keeps
        // them alive until the copy has run; live stream, not capturing (joining a
        // capture takes `&mut Stream`); the stream's context is current.
        unsafe {
            drv!(
                g.cu,
                cuMemcpyPeerAsync(
                    self.as_raw(),
                    self.context().as_raw(),
                    src.as_raw(),
                    src.context().as_raw(),
                    bytes,
                    stream.as_raw()
                )
            )
        }
    }
}

/// The most peer devices [`Graph::add_mem_alloc_node_with_peers`] takes (its access
/// descriptors live on the stack).
///
/// [`Graph::add_mem_alloc_node_with_peers`]: crate::Graph::add_mem_alloc_node_with_peers
pub const MAX_ALLOC_PEERS: usize = 32;

/// Read-write access descriptors for `peers` in `out`, leaving out `own` (the memory's
/// own device, which always has access) and repeats; returns how many were written.
///
/// # Errors
/// [`Error::InvalidArgument`] when more than `out.len()` remain.
#[cfg(feature = "graph")]
pub(crate) fn peer_descs(
    own: Device,
    peers: &[Device],
    out: &mut [CUmemAccessDesc],
) -> Result<usize> {
    let mut n = 0;
    for (i, &p) in peers.iter().enumerate() {
        if p == own || peers.get(..i).is_some_and(|seen| seen.contains(&p)) {
            continue;
        }
        let slot = out.get_mut(n).ok_or(Error::InvalidArgument(
            "too many peer devices for a graph allocation (MAX_ALLOC_PEERS)",
        ))?;
        *slot = MemAccess::ReadWrite.desc(p);
        n += 1;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_round_trips_and_unknown_values_are_none() {
        for a in [MemAccess::None, MemAccess::Read, MemAccess::ReadWrite] {
            assert_eq!(MemAccess::from_raw(a.as_raw()), Some(a));
        }
        assert_eq!(MemAccess::from_raw(CUmemAccess_flags(0x7fff)), None);
        let d = MemAccess::Read.desc(Device::from_raw(3));
        assert_eq!(crate::memory::location_id(&d.location), 3);
        assert_eq!(
            d.location.type_,
            cudadrv_sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE
        );
        assert_eq!(d.flags, CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READ);
    }

    #[test]
    fn enable_and_disable_are_idempotent() {
        let already = CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
        assert!(changed(CUresult::CUDA_SUCCESS, already, "x").unwrap());
        assert!(!changed(already, already, "x").unwrap());
        let e = changed(
            CUresult::CUDA_ERROR_INVALID_DEVICE,
            already,
            "cuCtxEnablePeerAccess",
        )
        .unwrap_err();
        assert!(e.is(CUresult::CUDA_ERROR_INVALID_DEVICE));
        assert_eq!(e.call(), Some("cuCtxEnablePeerAccess"));
    }

    #[test]
    #[cfg(feature = "graph")]
    fn peer_descs_skip_own_device_and_repeats() {
        let d = Device::from_raw;
        let mut out = [MemAccess::None.desc(d(0)); 4];
        let n = peer_descs(d(0), &[d(1), d(0), d(2), d(1)], &mut out).unwrap();
        assert_eq!(n, 2);
        assert_eq!(
            (
                crate::memory::location_id(&out[0].location),
                crate::memory::location_id(&out[1].location)
            ),
            (1, 2)
        );
        assert!(
            out[..n]
                .iter()
                .all(|x| x.flags == CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
        );
        assert_eq!(peer_descs(d(0), &[d(0)], &mut out).unwrap(), 0);
        let mut small = [MemAccess::None.desc(d(0)); 1];
        assert!(matches!(
            peer_descs(d(0), &[d(1), d(2)], &mut small),
            Err(Error::InvalidArgument(_))
        ));
    }
}
