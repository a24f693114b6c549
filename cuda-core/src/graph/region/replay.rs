//! Turning a recording into a graph and back: capture on the region's stream
//! ([`issue`] per operation), and in-place updates of a cached executable graph's nodes
//! when only values changed (`cuGraphExec*NodeSetParams`).

#[allow(clippy::wildcard_imports)]
use super::*;

/// Moves the recording from following entry `i` (its first `pos` operations matched,
/// their parameters set on it) to the scratch recording; returns the hash of those
/// operations' keys (not computed while following).
pub(super) fn diverge<'a>(entries: &[Entry<'a>], s: &mut Scratch<'a>, i: usize, pos: usize) -> u64 {
    if let Some(e) = entries.get(i) {
        s.rec.extend_prefix(&e.rec, pos);
    }
    s.rec.hosts.append(&mut s.spec_hosts);
    s.rec
        .ops
        .iter()
        .fold(HASH_SEED, |h, op| op.key.hash_into(h))
}

/// `cuGraphExecKernelNodeSetParams` with the argument words and parameter sizes of a
/// recorded kernel.
pub(super) fn set_kernel(
    exec: CUgraphExec,
    node: CUgraphNode,
    f: &Function,
    shape: &[u32; 7],
    words: &[u64],
    layout: &[ParamSpec],
    ptrs: &mut [*mut c_void; MAX_PARAMS],
) -> Result<()> {
    let n = arg_ptrs(words, layout, ptrs);
    let p = kernel_params(
        f,
        shape,
        if n == 0 {
            ptr::null_mut()
        } else {
            ptrs.as_mut_ptr()
        },
    );
    let cu = api()?;
    // SAFETY: live executable graph and a kernel node of the graph it was instantiated
    // from; `ptrs` point into `words`, alive for the call (the driver copies the values);
    // the launch contract for the values is the recorder's caller's.
    unsafe { drv!(cu, cuGraphExecKernelNodeSetParams(exec, node, &p)) }
}

/// The memset or copy setter when `new`'s parameters differ from `old`'s; whether it set.
pub(super) fn set_memory(
    exec: CUgraphExec,
    node: CUgraphNode,
    old: &Op<'_>,
    new: &Op<'_>,
    ctx: &Context,
) -> Result<bool> {
    if new.key.bytes == 0 || (old.dst == new.dst && old.src == new.src && old.value == new.value) {
        return Ok(false);
    }
    let cu = api()?;
    if matches!(new.key.kind, Kind::MemsetD8 | Kind::MemsetD32) {
        let p = memset_params(new);
        // SAFETY: a memset node of the source graph; the target is a buffer of this
        // context borrowed for `'a` with `bytes` bytes.
        unsafe {
            drv!(
                cu,
                cuGraphExecMemsetNodeSetParams(exec, node, &p, ctx.as_raw())
            )?
        };
    } else {
        let c = copy_params(new);
        // SAFETY: a memcpy node of the source graph; both sides hold `bytes` bytes,
        // borrowed for `'a` (the host side pinned and only read).
        unsafe {
            drv!(
                cu,
                cuGraphExecMemcpyNodeSetParams(exec, node, &c, ctx.as_raw())
            )?
        };
    }
    Ok(true)
}

/// The kernel parameter pointers into `words` (each parameter of `layout` starting a
/// whole word), written to `ptrs`; how many.
pub(super) fn arg_ptrs(
    words: &[u64],
    layout: &[ParamSpec],
    ptrs: &mut [*mut c_void; MAX_PARAMS],
) -> usize {
    let mut at = 0;
    for (p, spec) in ptrs.iter_mut().zip(layout) {
        *p = words.as_ptr().wrapping_add(at).cast_mut().cast::<c_void>();
        at += spec.size.div_ceil(8);
    }
    layout.len().min(MAX_PARAMS)
}

/// The node parameters of a recorded kernel.
pub(super) fn kernel_params(
    f: &Function,
    s: &[u32; 7],
    ptrs: *mut *mut c_void,
) -> CUDA_KERNEL_NODE_PARAMS {
    CUDA_KERNEL_NODE_PARAMS {
        func: f.as_raw(),
        gridDimX: s[0],
        gridDimY: s[1],
        gridDimZ: s[2],
        blockDimX: s[3],
        blockDimY: s[4],
        blockDimZ: s[5],
        sharedMemBytes: s[6],
        kernelParams: ptrs,
        extra: ptr::null_mut(),
        kern: ptr::null_mut(),
        ctx: f.context().as_raw(),
    }
}

pub(super) fn memset_params(op: &Op<'_>) -> CUDA_MEMSET_NODE_PARAMS {
    let (size, width) = if op.key.kind == Kind::MemsetD32 {
        (4, op.key.bytes / 4)
    } else {
        (1, op.key.bytes)
    };
    CUDA_MEMSET_NODE_PARAMS {
        dst: op.dst,
        pitch: 0,
        value: op.value,
        elementSize: size,
        width,
        height: 1,
    }
}

pub(super) fn copy_params(op: &Op<'_>) -> CUDA_MEMCPY3D {
    let mut c = CUDA_MEMCPY3D {
        dstMemoryType: CUmemorytype::CU_MEMORYTYPE_DEVICE,
        dstDevice: op.dst,
        WidthInBytes: op.key.bytes,
        Height: 1,
        Depth: 1,
        ..CUDA_MEMCPY3D::default()
    };
    if op.key.kind == Kind::CopyHtoD {
        c.srcMemoryType = CUmemorytype::CU_MEMORYTYPE_HOST;
        c.srcHost = op.src as usize as *const c_void;
    } else if op.key.kind == Kind::CopyDtoH {
        c.dstMemoryType = CUmemorytype::CU_MEMORYTYPE_HOST;
        c.dstDevice = 0;
        c.dstHost = op.dst as usize as *mut c_void;
        c.srcMemoryType = CUmemorytype::CU_MEMORYTYPE_DEVICE;
        c.srcDevice = op.src;
    } else {
        c.srcMemoryType = CUmemorytype::CU_MEMORYTYPE_DEVICE;
        c.srcDevice = op.src;
    }
    c
}

/// Issues the recording on a capture of `stream` and returns the graph and, per
/// operation, the node it added (null for none). On error the capture is discarded.
pub(super) fn capture_recording<'a>(
    rec: &mut Recording<'a>,
    stream: &mut Stream,
) -> Result<(Graph<'a>, Vec<CUgraphNode>)> {
    let mut nodes = Vec::with_capacity(rec.ops.len());
    let cap = Capture::begin(stream, CaptureMode::ThreadLocal)?;
    for i in 0..rec.ops.len() {
        let op = rec.ops[i];
        let issued = issue(rec, i, &op, cap.stream()).and_then(|()| {
            if op.key.makes_node() {
                last_node(cap.stream())
            } else {
                Ok(ptr::null_mut())
            }
        });
        match issued {
            Ok(node) => nodes.push(node),
            Err(e) => {
                // The capture may be invalidated; ending it reports that, not `e`.
                drop(cap.end());
                return Err(e);
            }
        }
    }
    let graph = cap.end()?;
    Ok((graph, nodes))
}

/// The node the last captured operation added: the capture's one dependency.
pub(super) fn last_node(stream: &Stream) -> Result<CUgraphNode> {
    let g = stream.context().enter()?;
    // SAFETY: live stream of the current context; the array is read at once.
    let info = unsafe { raw_capture_info(g.cu, stream.as_raw()) }?;
    if info.num_dependencies != 1 || info.deps.is_null() {
        return Err(Error::InvalidArgument(
            "Region: a recorded operation did not leave one capture dependency",
        ));
    }
    // SAFETY: the driver returned one node at `deps`.
    Ok(unsafe { *info.deps })
}

/// Issues operation `i` of `rec` on the capturing `stream`.
pub(super) fn issue(rec: &mut Recording<'_>, i: usize, op: &Op<'_>, stream: &Stream) -> Result<()> {
    match op.key.kind {
        Kind::Kernel => {
            let Some(f) = op.func else { return Ok(()) };
            let mut ptrs = [ptr::null_mut(); MAX_PARAMS];
            let words = rec.words.get(op.words()).unwrap_or(&[]);
            let n = arg_ptrs(words, op.layout, &mut ptrs);
            let attrs = rec.attrs.get(op.attrs()).unwrap_or(&[]);
            let s = op.key.shape;
            let cfg = CUlaunchConfig {
                gridDimX: s[0],
                gridDimY: s[1],
                gridDimZ: s[2],
                blockDimX: s[3],
                blockDimY: s[4],
                blockDimZ: s[5],
                sharedMemBytes: s[6],
                hStream: stream.as_raw(),
                attrs: if attrs.is_empty() {
                    ptr::null_mut()
                } else {
                    attrs.as_ptr().cast_mut()
                },
                numAttrs: attrs.len() as u32,
            };
            let g = f.enter()?;
            let params = if n == 0 {
                ptr::null_mut()
            } else {
                ptrs.as_mut_ptr()
            };
            // SAFETY: `cfg` points at attributes built by `LaunchConfig` (none writes
            // back: those are refused when recorded); `ptrs` holds `n` pointers into
            // `rec.words`, alive for the call; live stream of `f`'s context (checked when
            // recorded), which is current; `f` is borrowed for `'a`. The kernel-side
            // contract is the recorder's caller's.
            unsafe {
                launch_core(
                    g.cu,
                    f.as_raw(),
                    &cfg,
                    params,
                    ptr::null_mut(),
                    DriverLaunch::Ex,
                )
            }
        }
        Kind::MemsetD8 | Kind::MemsetD32 => {
            let g = stream.context().enter()?;
            // SAFETY: the target is a buffer of this context with `bytes` bytes,
            // borrowed for `'a`; live stream; the context is current.
            unsafe {
                if op.key.kind == Kind::MemsetD8 {
                    memset_d8(g.cu, op.dst, op.key.bytes, op.value as u8, Some(stream))
                } else {
                    memset_d32(g.cu, op.dst, op.key.bytes, op.value, Some(stream))
                }
            }
        }
        Kind::CopyDtoD | Kind::CopyHtoD | Kind::CopyDtoH => {
            if op.key.bytes == 0 {
                return Ok(());
            }
            let g = stream.context().enter()?;
            // SAFETY: both sides hold `bytes` bytes and are borrowed for `'a` (the host
            // side pinned, only read, and not writable while borrowed); live stream; the
            // context is current.
            unsafe {
                if op.key.kind == Kind::CopyDtoD {
                    drv!(
                        g.cu,
                        cuMemcpyDtoDAsync(op.dst, op.src, op.key.bytes, stream.as_raw())
                    )
                } else if op.key.kind == Kind::CopyDtoH {
                    // The host side is a region's bound buffer, borrowed mutably for
                    // `'a` (no Rust access but `Region::host` after a synchronization).
                    drv!(
                        g.cu,
                        cuMemcpyDtoHAsync(
                            op.dst as usize as *mut c_void,
                            op.src,
                            op.key.bytes,
                            stream.as_raw()
                        )
                    )
                } else {
                    drv!(
                        g.cu,
                        cuMemcpyHtoDAsync(
                            op.dst,
                            op.src as usize as *const c_void,
                            op.key.bytes,
                            stream.as_raw()
                        )
                    )
                }
            }
        }
        Kind::Nccl => {
            #[cfg(all(feature = "nccl", unix))]
            {
                let k = op.key;
                // SAFETY: recorded by `nccl::Comm` after its checks; the region borrows
                // the communicator and the buffers for `'a` (it never aborts through a
                // shared borrow).
                unsafe {
                    crate::nccl::launch_recorded(
                        k.func,
                        [k.shape[0], k.shape[1], k.shape[2], k.shape[3]],
                        k.bytes,
                        k.nccl,
                        stream,
                    )
                }
            }
            #[cfg(not(all(feature = "nccl", unix)))]
            Err(Error::InvalidArgument(
                "Region: an NCCL call without feature nccl",
            ))
        }
        Kind::HostFn => {
            let at = rec.hosts.iter().position(|(k, _)| *k as usize == i);
            let Some((_, f)) = at.map(|k| rec.hosts.swap_remove(k)) else {
                return Err(Error::InvalidArgument("Region: host closure missing"));
            };
            let info = stream.capture_info(&mut [], &mut [])?;
            if !info.is_active() || info.graph.is_null() {
                return Err(Error::InvalidArgument(
                    "host_fn: the stream's capture is not active (invalidated)",
                ));
            }
            GraphClosure::new(info.graph, f)?.attach(|c| {
                // SAFETY: the capture graph owns the closure for as long as any graph or
                // executable graph made from it can run it; `run` matches `data`'s
                // type; the closure is `Send + Sync` and reentrant (`Fn`).
                unsafe { stream.launch_host_fn_raw(c.run, c.data) }
            })
        }
    }
}
