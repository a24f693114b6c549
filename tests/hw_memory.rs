//! Hardware tests of the memory chapter (Programming Guide 2.4, 4.1, 3.1.5, 4.13):
//! managed memory with prefetches, advice and stream attachment, page-locked
//! registration of memory the program owns, batched copies, L2 controls, and the
//! device's memory model.
//!
//! Never more managed memory than `cuMemGetInfo` reports free (no oversubscription of a
//! shared GPU): every managed test asks [`managed_room`] first.
//!
//! Kernels come from `ptx/generated/kernels.ptx` (`fill`: `out[i] = 3 i + 1`;
//! `chain_step`: `out[i] = in[i] + 1`; `vec_add`: `c = a + b`).

use cuda_workspace::{
    Kernels, TestResult, check, check_eq, check_filled, fill_value, hw_tests, ptx, require_gpu,
    run_suite, skip,
};
use cudadrv::launch::{LaunchConfig, launch};
use cudadrv::memory::batch::{CopyAttributes, CopyBatch, SrcAccessOrder, copy_with_attributes};
use cudadrv::memory::l2::AccessPolicyWindow;
use cudadrv::memory::managed::{
    Advice, Attach, Location, ManagedBuffer, MemoryKind, MemoryModel, memory_kind,
};
use cudadrv::memory::registered::{HostRegisterFlags, HostRegistration};
use cudadrv::{Context, Device, DeviceBuffer, DevicePtr, Error, Module, PinnedHostBuffer, Stream};

fn main() {
    run_suite(
        "hw_memory",
        hw_tests![
            memory_model_of_the_device,
            managed_prefetch_kernel_prefetch_back,
            managed_read_mostly_and_locations,
            host_attached_managed_on_its_stream,
            system_allocated_memory_where_supported,
            registered_vec_read_and_written_by_a_kernel,
            registered_ranges_and_pages,
            registered_async_copies_are_safe,
            batch_of_1000_mixed_copies,
            batch_checks_each_copy,
            batch_with_pinned_memory,
            copy_with_attributes_moves_the_values,
            captured_prefetch_and_batch,
            l2_window_on_a_stream,
            pointer_kinds,
        ],
    );
}

fn ctx() -> Result<Context, Error> {
    Context::primary(Device::get(0)?)
}

/// Skips unless `bytes` of managed memory fit in half of what the GPU has free (never
/// oversubscribe the shared device) and the device has concurrent managed access.
fn managed_room(ctx: &Context, bytes: usize) -> TestResult {
    let model = MemoryModel::of(ctx.device())?;
    if !model.managed_memory || !model.concurrent_managed_access {
        return skip(format!(
            "managed memory {} / concurrent managed access {}",
            model.managed_memory, model.concurrent_managed_access
        ));
    }
    let (free, _) = ctx.mem_info()?;
    if bytes > free / 2 {
        return skip(format!(
            "{bytes} bytes of managed memory > half of {free} free"
        ));
    }
    Ok(())
}

fn grid(n: usize) -> u32 {
    u32::try_from(n.div_ceil(256))
        .unwrap_or(u32::MAX)
        .clamp(1, 4096)
}

/// `chain_step(input, out, n, 0)`: `out[i] = input[i] + 1`.
fn increment(
    k: &Kernels,
    input: DevicePtr<u32>,
    out: DevicePtr<u32>,
    n: usize,
    s: &Stream,
) -> TestResult {
    let chain = Module::from_ptx(k.fill.context(), ptx::KERNELS)?.function("chain_step")?;
    let cfg = LaunchConfig::new(grid(n), 256).stream(s);
    // SAFETY: chain_step takes (u32*, u32*, u32, u32); both hold `n` values and outlive
    // the launch (the callers synchronize before dropping them); they do not overlap.
    unsafe { launch(&chain, &cfg, &(input, out, n as u32, 0u32))? };
    Ok(())
}

/// `fill(out, n)`.
fn fill(k: &Kernels, out: DevicePtr<u32>, n: usize, s: &Stream) -> TestResult {
    let cfg = LaunchConfig::new(grid(n), 256).stream(s);
    // SAFETY: fill takes (u32*, u32); `out` holds `n` values and outlives the launch.
    unsafe { launch(&k.fill, &cfg, &(out, n as u32))? };
    Ok(())
}

/// The H100's answers, which decide which tests below run: concurrent managed access 1,
/// pageable memory access 0, host native atomics 0 (the brief's facts for this round).
fn memory_model_of_the_device() -> TestResult {
    require_gpu()?;
    let m = MemoryModel::of(Device::get(0)?)?;
    println!("    {m:?}");
    check(m.managed_memory, || "managed memory".into())?;
    check(m.host_register, || "host register".into())
}

/// The CPU writes a managed buffer, it is prefetched to the GPU, a kernel increments
/// every element into a second managed buffer, which is prefetched back; the CPU checks
/// all of them. The range attributes follow the prefetches.
fn managed_prefetch_kernel_prefetch_back() -> TestResult {
    require_gpu()?;
    const N: usize = 16 << 20;
    let ctx = ctx()?;
    managed_room(&ctx, 2 * N * 4)?;
    let k = Kernels::load(&ctx)?;
    let dev = ctx.device();
    let stream = Stream::non_blocking(&ctx)?;
    let mut input = ManagedBuffer::<u32>::new(&ctx, N, Attach::Global)?;
    let mut output = ManagedBuffer::<u32>::new(&ctx, N, Attach::Global)?;
    for (i, v) in input.host_mut()?.iter_mut().enumerate() {
        *v = i as u32;
    }
    input.prefetch(Location::Device(dev), &stream)?;
    output.prefetch(Location::Device(dev), &stream)?;
    increment(&k, input.as_arg(), output.as_arg(), N, &stream)?;
    output.prefetch(Location::Host, &stream)?;
    stream.synchronize()?;
    check_eq(
        input.last_prefetch_location()?,
        Some(Location::Device(dev)),
        "input last prefetch",
    )?;
    check_eq(
        output.last_prefetch_location()?,
        Some(Location::Host),
        "output last prefetch",
    )?;
    let got = output.host()?;
    match got.iter().enumerate().find(|&(i, &v)| v != i as u32 + 1) {
        None => Ok(()),
        Some((i, v)) => check(false, || format!("element {i} is {v}, expected {}", i + 1)),
    }
}

/// Read-mostly advice with both sides reading: the attribute says read-mostly and both
/// the kernel and the host read the right values; preferred location and accessed-by
/// advice read back; unset clears them.
fn managed_read_mostly_and_locations() -> TestResult {
    require_gpu()?;
    const N: usize = 1 << 20;
    let ctx = ctx()?;
    managed_room(&ctx, N * 4)?;
    let k = Kernels::load(&ctx)?;
    let dev = ctx.device();
    let stream = Stream::non_blocking(&ctx)?;
    let mut data = ManagedBuffer::<u32>::new(&ctx, N, Attach::Global)?;
    for (i, v) in data.host_mut()?.iter_mut().enumerate() {
        *v = (i as u32) * 2;
    }
    data.advise(Advice::ReadMostly)?;
    check(data.is_read_mostly()?, || {
        "read-mostly after the advice".into()
    })?;
    data.prefetch(Location::Device(dev), &stream)?;
    let out = DeviceBuffer::<u32>::zeroed(&ctx, N)?;
    increment(&k, data.as_arg(), out.as_arg(), N, &stream)?;
    stream.synchronize()?;
    let host_sum: u64 = data.host()?.iter().map(|&v| u64::from(v)).sum();
    let expected: u64 = (0..N as u64).map(|i| 2 * i).sum();
    check_eq(host_sum, expected, "host read of read-mostly data")?;
    let mut back = vec![0u32; N];
    out.copy_to_host(&mut back)?;
    check(
        back.iter().enumerate().all(|(i, &v)| v == 2 * i as u32 + 1),
        || "kernel read of read-mostly data".into(),
    )?;
    data.advise(Advice::UnsetReadMostly)?;
    check(!data.is_read_mostly()?, || "unset read-mostly".into())?;
    data.advise(Advice::PreferredLocation(Location::Device(dev)))?;
    check_eq(
        data.preferred_location()?,
        Some(Location::Device(dev)),
        "preferred location",
    )?;
    data.advise(Advice::UnsetPreferredLocation)?;
    check_eq(data.preferred_location()?, None, "preferred location unset")?;
    data.advise(Advice::AccessedBy(Location::Device(dev)))?;
    let mut devs = [Device::from_raw(-9); 4];
    let n = data.accessed_by(&mut devs)?;
    check_eq((n, devs[0]), (1, dev), "accessed by")?;
    data.advise(Advice::UnsetAccessedBy(Location::Device(dev)))?;
    check_eq(data.accessed_by(&mut devs)?, 0, "accessed by, unset")?;
    // The 13.0 location forms: the host's NUMA node 0 and the calling thread's node.
    for to in [Location::HostNuma(0), Location::HostNumaCurrent] {
        data.prefetch(to, &stream)?;
        stream.synchronize()?;
        let last = data.last_prefetch_location()?;
        println!("    prefetch to {to:?}: last prefetch location {last:?}");
        check(
            matches!(
                last,
                Some(Location::Host | Location::HostNuma(_) | Location::HostNumaCurrent)
            ),
            || format!("prefetch to {to:?} left {last:?}"),
        )?;
    }
    check_eq(
        data.host()?[N - 1],
        2 * (N as u32 - 1),
        "contents after the moves",
    )
}

/// Host-attached managed memory attached to one stream (`attach_single`) runs a kernel
/// there while a kernel on another stream keeps the GPU busy; the host reads the output
/// after synchronizing that stream only, while the other stream still runs.
fn host_attached_managed_on_its_stream() -> TestResult {
    require_gpu()?;
    const N: usize = 1 << 20;
    let ctx = ctx()?;
    managed_room(&ctx, 2 * N * 4)?;
    let k = Kernels::load(&ctx)?;
    let mine = Stream::non_blocking(&ctx)?;
    let other = Stream::non_blocking(&ctx)?;
    let mut input = ManagedBuffer::<u32>::new(&ctx, N, Attach::Host)?;
    let mut output = ManagedBuffer::<u32>::new(&ctx, N, Attach::Host)?;
    input.host_mut()?.fill(41);
    let input = input.attach_single(&mine)?;
    let mut output = output.attach_single(&mine)?;
    let busy = DeviceBuffer::<u32>::zeroed(&ctx, 64 << 20)?;
    for _ in 0..8 {
        fill(&k, busy.as_arg(), busy.len(), &other)?;
    }
    increment(&k, input.view().as_arg(), output.view().as_arg(), N, &mine)?;
    // Only `mine` is waited for: `other` may still be filling `busy`.
    let right = output.host()?.iter().all(|&v| v == 42);
    drop((input, output));
    other.synchronize()?;
    check(right, || "attached kernel's output".into())
}

/// System-allocated memory: where the device reports pageable memory access a kernel
/// writes a `Vec`; where it does not (the H100 VMs here), the test reports the values
/// it read and skips.
fn system_allocated_memory_where_supported() -> TestResult {
    require_gpu()?;
    let ctx = ctx()?;
    let m = MemoryModel::of(ctx.device())?;
    if !m.system_memory_usable() {
        return skip(format!(
            "pageableMemoryAccess {}, usesHostPageTables {}, concurrentManagedAccess {}, \
             hostNativeAtomics {}: kernels cannot touch malloc memory here",
            m.pageable_memory_access as u8,
            m.pageable_uses_host_page_tables as u8,
            m.concurrent_managed_access as u8,
            m.host_native_atomics as u8
        ));
    }
    let k = Kernels::load(&ctx)?;
    let stream = Stream::non_blocking(&ctx)?;
    let mut v = vec![0u32; 1 << 16];
    fill(
        &k,
        DevicePtr::from_raw(v.as_mut_ptr() as u64),
        v.len(),
        &stream,
    )?;
    stream.synchronize()?;
    check_filled(&v, "kernel write into a Vec")
}

/// A registered `Vec`, mapped: a kernel writes it through its device pointer (zero
/// copy) and reads it back into device memory; after the registration ends the `Vec`
/// holds the kernel's values.
fn registered_vec_read_and_written_by_a_kernel() -> TestResult {
    require_gpu()?;
    const N: usize = 1 << 20;
    let ctx = ctx()?;
    let k = Kernels::load(&ctx)?;
    let stream = Stream::non_blocking(&ctx)?;
    let mut data = vec![0u32; N];
    let copy = DeviceBuffer::<u32>::zeroed(&ctx, N)?;
    let mut inner: TestResult = Ok(());
    HostRegistration::scope(&ctx, &mut data, HostRegisterFlags::DEVICE_MAP, |reg| {
        inner = (|| {
            check_eq(
                memory_kind(reg.as_ptr() as u64)?,
                MemoryKind::Host,
                "registered kind",
            )?;
            let mapped = reg.device_ptr()?;
            fill(&k, mapped, N, &stream)?;
            increment(&k, mapped, copy.as_arg(), N, &stream)
        })();
        Ok(())
    })?; // unregistered after a context synchronization
    inner?;
    check_filled(&data, "Vec written by the kernel through the mapping")?;
    let mut back = vec![0u32; N];
    copy.copy_to_host(&mut back)?;
    check(
        back.iter()
            .enumerate()
            .all(|(i, &v)| v == fill_value(i as u32) + 1),
        || "kernel read of the mapping".into(),
    )
}

/// Odd and page-sharing ranges: 1000 bytes at an odd address register (the driver pins
/// the pages around them); another range in the same page registers too, and keeps
/// working after the first is unregistered; a range overlapping a registered one is
/// refused; a read-only registration refuses copies into it.
fn registered_ranges_and_pages() -> TestResult {
    require_gpu()?;
    let ctx = ctx()?;
    let stream = Stream::non_blocking(&ctx)?;
    let mut bytes = vec![0u8; 3 * 4096];
    let base = bytes.as_ptr() as usize;
    let skip_to = (4096 - base % 4096) % 4096 + 1; // one past a page boundary: odd
    let (_, rest) = bytes.split_at_mut(skip_to);
    let (odd, tail) = rest.split_at_mut(1000);
    // SAFETY (both): each registration is dropped below, in the order this test checks,
    // before its slice is used again.
    let reg = unsafe { HostRegistration::new(&ctx, odd, HostRegisterFlags::empty())? };
    let neighbour =
        unsafe { HostRegistration::new(&ctx, &mut tail[..100], HostRegisterFlags::empty()) };
    println!(
        "    1000 bytes at {:#x}: registered; 100 bytes right after them (same page): {:?}",
        reg.as_ptr() as usize,
        neighbour.as_ref().map(|_| ()).map_err(|e| e.code())
    );
    let neighbour = neighbour?;
    drop(reg);
    let dev = DeviceBuffer::from_slice(&ctx, &[7u8; 100])?;
    neighbour.copy_from_device_async(&dev, &stream)?;
    drop(neighbour);
    check(tail[..100].iter().all(|&b| b == 7), || {
        "the second range after the first was unregistered".into()
    })?;
    // Overlap: the same bytes registered twice through the raw table (safe code cannot
    // alias the slice a registration borrows).
    let mut data = vec![0u32; 4096];
    // SAFETY: dropped below before `data` is used again; no device work uses it.
    let reg = unsafe { HostRegistration::new(&ctx, &mut data, HostRegisterFlags::empty())? };
    let cu = cudadrv_sys::driver().map_err(|e| e.to_string())?;
    ctx.bind()?;
    // SAFETY: the range is live (borrowed by `reg`); the call only pins or refuses.
    let rc = unsafe {
        cu.cuMemHostRegister().map_err(|e| e.to_string())?(reg.as_ptr() as *mut _, 64, 0)
    };
    println!("    registering bytes already registered: {rc}");
    check_eq(
        rc,
        cudadrv_sys::CUresult::CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
        "overlapping registration",
    )?;
    drop(reg);
    let empty =
        HostRegistration::<u8>::scope(&ctx, &mut [], HostRegisterFlags::empty(), |_| Ok(()));
    check(matches!(empty, Err(Error::InvalidArgument(_))), || {
        format!("empty: {empty:?}")
    })?;
    let model = MemoryModel::of(ctx.device())?;
    if model.host_register_read_only {
        let mut table = vec![5u32; 4096];
        // SAFETY: dropped below, before `table` is used again.
        let ro = unsafe { HostRegistration::new(&ctx, &mut table, HostRegisterFlags::READ_ONLY)? };
        let src = DeviceBuffer::<u32>::zeroed(&ctx, 4096)?;
        let r = ro.copy_from_device_async(&src, &stream);
        check(matches!(r, Err(Error::InvalidArgument(_))), || {
            format!("copy into read-only: {r:?}")
        })?;
        let mut dst = DeviceBuffer::<u32>::zeroed(&ctx, 4096)?;
        ro.copy_to_device_async(&mut dst, &stream)?;
        drop(ro);
        let mut back = vec![0u32; 4096];
        dst.copy_to_host(&mut back)?;
        check(back.iter().all(|&v| v == 5), || {
            "read-only source copied".into()
        })?;
    }
    Ok(())
}

/// The registration's asynchronous copies, safe: the `Vec` is out of Rust's reach until
/// the registration's drop has waited for them. Streams of other contexts are refused.
fn registered_async_copies_are_safe() -> TestResult {
    require_gpu()?;
    const N: usize = 4 << 20;
    let ctx = ctx()?;
    let k = Kernels::load(&ctx)?;
    let stream = Stream::non_blocking(&ctx)?;
    let mut host: Vec<u32> = (0..N as u32).collect();
    let mut a = DeviceBuffer::<u32>::zeroed(&ctx, N)?;
    let b = DeviceBuffer::<u32>::zeroed(&ctx, N)?;
    let mut inner: TestResult = Ok(());
    HostRegistration::scope(&ctx, &mut host, HostRegisterFlags::empty(), |reg| {
        inner = (|| {
            reg.copy_to_device_async(&mut a, &stream)?;
            increment(&k, a.as_arg(), b.as_arg(), N, &stream)?;
            reg.copy_from_device_async(&b, &stream)?;
            let other = Context::create(ctx.device(), cudadrv::ContextFlags::empty())?;
            let foreign = Stream::non_blocking(&other)?;
            let r = reg.copy_from_device_async(&b, &foreign);
            check(matches!(r, Err(Error::ContextMismatch { .. })), || {
                format!("other context: {r:?}")
            })
        })();
        Ok(())
    })?;
    inner?;
    check(
        host.iter().enumerate().all(|(i, &v)| v == i as u32 + 1),
        || "the round trip through the registration".into(),
    )
}

/// 1000 copies of mixed sizes (4 B to 64 KiB) in one `cuMemcpyBatchAsync`: 250 host to
/// device (parts of one registered range), 250 device to device, 250 device to managed
/// and 250 managed to host (parts of a second registered range); every byte checked.
fn batch_of_1000_mixed_copies() -> TestResult {
    require_gpu()?;
    let ctx = ctx()?;
    let stream = Stream::non_blocking(&ctx)?;
    let sizes: Vec<usize> = (0..250).map(|i| 1 + (i * 37) % 16384).collect();
    let total: usize = sizes.iter().sum();
    managed_room(&ctx, 2 * total * 4)?;
    let value = |set: u32, i: usize| (i as u32).wrapping_mul(2_654_435_761) ^ set;
    let mut src_host: Vec<u32> = (0..total).map(|i| value(1, i)).collect();
    let mut out_host = vec![0u32; total];
    let mut dev_src = Vec::new();
    let mut dev_b = Vec::new();
    let mut dev_a = Vec::new();
    let mut managed_dst = Vec::new();
    let mut managed_src = Vec::new();
    let mut at = 0;
    for &n in &sizes {
        let part = |set| (at..at + n).map(|i| value(set, i)).collect::<Vec<u32>>();
        dev_src.push(DeviceBuffer::from_slice(&ctx, &part(2))?);
        dev_b.push(DeviceBuffer::<u32>::zeroed(&ctx, n)?);
        dev_a.push(DeviceBuffer::<u32>::zeroed(&ctx, n)?);
        managed_dst.push(ManagedBuffer::<u32>::new(&ctx, n, Attach::Global)?);
        let mut m = ManagedBuffer::<u32>::new(&ctx, n, Attach::Global)?;
        m.host_mut()?.copy_from_slice(&part(4));
        managed_src.push(m);
        at += n;
    }
    let mut copies = 0;
    let flags = HostRegisterFlags::empty();
    HostRegistration::scope(&ctx, &mut src_host, flags, |src_reg| {
        HostRegistration::scope(&ctx, &mut out_host, flags, |out_reg| {
            let mut src_parts = Vec::new();
            let mut out_parts = Vec::new();
            let mut at = 0;
            for &n in &sizes {
                src_parts.push(src_reg.part(at..at + n)?);
                out_parts.push(out_reg.part(at..at + n)?);
                at += n;
            }
            let mut batch = CopyBatch::new();
            for ((a, b), (part, src)) in dev_a
                .iter_mut()
                .zip(dev_b.iter_mut())
                .zip(src_parts.iter().zip(&dev_src))
            {
                batch.copy(a, part)?;
                batch.copy(b, src)?;
            }
            batch.attributes(CopyAttributes {
                src_access_order: SrcAccessOrder::Stream,
                dst_hint: Some(Location::Device(ctx.device())),
                ..CopyAttributes::default()
            });
            for ((m, src), (part, msrc)) in managed_dst
                .iter_mut()
                .zip(&dev_src)
                .zip(out_parts.iter_mut().zip(&managed_src))
            {
                batch.copy(m, src)?;
                batch.copy(part, msrc)?;
            }
            copies = batch.len();
            batch.submit(&stream)
        })
    })?; // the scopes wait for the copies before unregistering
    check_eq(copies, 1000, "copies in the batch")?;
    let mut at = 0;
    for i in 0..sizes.len() {
        let n = sizes[i];
        let want = |set| (at..at + n).map(|j| value(set, j)).collect::<Vec<u32>>();
        let mut got = vec![0u32; n];
        dev_a[i].copy_to_host(&mut got)?;
        check(got == want(1), || format!("host to device copy {i}"))?;
        dev_b[i].copy_to_host(&mut got)?;
        check(got == want(2), || format!("device to device copy {i}"))?;
        check(managed_dst[i].host()? == &want(2)[..], || {
            format!("device to managed copy {i}")
        })?;
        check(out_host[at..at + n] == want(4)[..], || {
            format!("managed to host copy {i}")
        })?;
        at += n;
    }
    println!(
        "    1000 copies ({} bytes) in one batch, every byte exact",
        total * 4 * 4
    );
    Ok(())
}

/// Pinned buffers join a batch through the `unsafe` `copy_raw` (Rust can reach their
/// contents at any time): host to device and back, checked.
/// One copy with attributes (`cuMemcpyWithAttributesAsync` on 13.2+, a batch of one
/// before): device to managed to registered host memory, each value checked; a length
/// mismatch is refused before the driver.
fn copy_with_attributes_moves_the_values() -> TestResult {
    require_gpu()?;
    const N: usize = 1 << 20;
    let ctx = ctx()?;
    managed_room(&ctx, N * 4)?;
    let stream = Stream::non_blocking(&ctx)?;
    let values: Vec<u32> = (0..N as u32)
        .map(|i| i.wrapping_mul(2_654_435_761))
        .collect();
    let src = DeviceBuffer::from_slice(&ctx, &values)?;
    let mut mid = ManagedBuffer::<u32>::new(&ctx, N, Attach::Global)?;
    let mut out = vec![0u32; N];
    let attrs = CopyAttributes {
        src_access_order: SrcAccessOrder::Stream,
        dst_hint: Some(Location::Device(ctx.device())),
        prefer_overlap_with_compute: true,
        ..CopyAttributes::default()
    };
    copy_with_attributes(&stream, &mut mid, &src, &attrs)?;
    let mut refused = None;
    HostRegistration::scope(&ctx, &mut out, HostRegisterFlags::empty(), |reg| {
        let host = CopyAttributes {
            dst_hint: Some(Location::Host),
            ..attrs
        };
        let mut whole = reg.part(0..N)?;
        copy_with_attributes(&stream, &mut whole, &mid, &host)?;
        stream.synchronize()?;
        let mut short = DeviceBuffer::<u32>::zeroed(&ctx, N - 1)?;
        refused = Some(copy_with_attributes(&stream, &mut short, &src, &attrs));
        Ok(())
    })?;
    match refused {
        Some(Err(Error::BatchCopy { index: 0, .. })) => {}
        other => return Err(format!("a length mismatch gave {other:?}").into()),
    }
    let path = if cudadrv::driver::driver_version()? >= 13020 {
        "cuMemcpyWithAttributesAsync"
    } else {
        "a batch of one (cuMemcpyBatchAsync)"
    };
    println!("    {N} values device -> managed -> registered host through {path}");
    check_eq(out, values, "values after two copies")
}

fn batch_with_pinned_memory() -> TestResult {
    require_gpu()?;
    const N: usize = 1 << 16;
    let ctx = ctx()?;
    let stream = Stream::non_blocking(&ctx)?;
    let src = PinnedHostBuffer::from_slice(&ctx, &(0..N as u32).collect::<Vec<_>>())?;
    let mut dst = PinnedHostBuffer::<u32>::zeroed(&ctx, N)?;
    let dev = DeviceBuffer::<u32>::zeroed(&ctx, N)?;
    let mut batch = CopyBatch::new();
    // SAFETY: `src`, `dev` and `dst` hold N values each and stay alive and untouched by
    // the host until the stream is synchronized below.
    unsafe {
        batch.copy_raw(&ctx, dev.as_raw(), src.as_ptr() as u64, N * 4)?;
    }
    batch.submit(&stream)?;
    let mut back = CopyBatch::new();
    // SAFETY: as above; `dst` is read only after the synchronization.
    unsafe {
        back.copy_raw(&ctx, dst.as_mut_ptr() as u64, dev.as_raw(), N * 4)?;
    }
    back.submit(&stream)?;
    stream.synchronize()?;
    check(dst.iter().enumerate().all(|(i, &v)| v == i as u32), || {
        "pinned round trip through a batch".into()
    })
}

/// Each copy is checked as it is added: the error names its index.
fn batch_checks_each_copy() -> TestResult {
    require_gpu()?;
    let ctx = ctx()?;
    let mut a = DeviceBuffer::<u32>::new(&ctx, 16)?;
    let mut a2 = DeviceBuffer::<u32>::new(&ctx, 16)?;
    let mut a3 = DeviceBuffer::<u32>::new(&ctx, 16)?;
    let b = DeviceBuffer::<u32>::new(&ctx, 16)?;
    let c = DeviceBuffer::<u32>::new(&ctx, 8)?;
    let other = Context::create(ctx.device(), cudadrv::ContextFlags::empty())?;
    let d = DeviceBuffer::<u32>::new(&other, 16)?;
    let mut batch = CopyBatch::new();
    batch.copy(&mut a, &b)?;
    let r = batch.copy(&mut a2, &c).map(|_| ());
    check(matches!(r, Err(Error::BatchCopy { index: 1, .. })), || {
        format!("length: {r:?}")
    })?;
    let r = batch.copy(&mut a3, &d).map(|_| ());
    check(matches!(r, Err(Error::BatchCopy { index: 1, .. })), || {
        format!("context: {r:?}")
    })?;
    let stream_other = Stream::non_blocking(&other)?;
    let r = batch.submit(&stream_other);
    check(matches!(r, Err(Error::ContextMismatch { .. })), || {
        format!("stream: {r:?}")
    })
}

/// A prefetch and a copy batch recorded in stream captures: on a driver that captures
/// them, the graph does the work at every launch (and borrows what it names); driver 580
/// refuses both (`CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED`), which the test accepts as the
/// only refusal.
fn captured_prefetch_and_batch() -> TestResult {
    require_gpu()?;
    const N: usize = 1 << 20;
    let ctx = ctx()?;
    managed_room(&ctx, N * 4)?;
    let dev = ctx.device();
    let mut stream = Stream::non_blocking(&ctx)?;
    let src = DeviceBuffer::from_slice(&ctx, &vec![8u32; N])?;
    let mut dst = DeviceBuffer::<u32>::zeroed(&ctx, N)?;
    let mut managed = ManagedBuffer::<u32>::new(&ctx, N, Attach::Global)?;
    managed.host_mut()?.fill(3);
    let unsupported = |what: &str, e: Error| {
        println!("    captured {what}: {e}");
        check(
            e.is(cudadrv_sys::CUresult::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED),
            || format!("captured {what} failed otherwise: {e}"),
        )
    };
    let ran = {
        let mut batch = CopyBatch::new();
        batch.copy(&mut dst, &src)?;
        let cap = stream.begin_capture(cudadrv::graph::CaptureMode::Global)?;
        let recorded = cap.copy_batch(&batch);
        match recorded.and_then(|()| cap.end()) {
            Ok(graph) => {
                let exec = graph.instantiate(cudadrv::graph::InstantiateFlags::empty())?;
                exec.launch(&stream)?;
                stream.synchronize()?;
                true
            }
            Err(e) => {
                unsupported("batch", e)?;
                false
            }
        }
    }; // the graph, which writes `dst`, is gone: the host may read it
    if ran {
        let mut back = vec![0u32; N];
        dst.copy_to_host(&mut back)?;
        check(back.iter().all(|&v| v == 8), || {
            "batched copy by the graph".into()
        })?;
        println!("    captured batch: ran from the graph");
    }
    {
        let cap = stream.begin_capture(cudadrv::graph::CaptureMode::Global)?;
        let recorded = cap.prefetch(&managed, Location::Device(dev));
        match recorded.and_then(|()| cap.end()) {
            Ok(graph) => {
                let exec = graph.instantiate(cudadrv::graph::InstantiateFlags::empty())?;
                exec.launch(&stream)?;
                stream.synchronize()?;
                check_eq(
                    managed.last_prefetch_location()?,
                    Some(Location::Device(dev)),
                    "prefetched by the graph",
                )?;
                println!("    captured prefetch: ran from the graph");
            }
            Err(e) => unsupported("prefetch", e)?,
        }
    }
    check(managed.host()?.iter().all(|&v| v == 3), || {
        "managed contents".into()
    })
}

/// The persisting-L2 set-aside and an access-policy window set on a stream read back;
/// a kernel runs under it; the persisting lines are reset.
fn l2_window_on_a_stream() -> TestResult {
    require_gpu()?;
    let ctx = ctx()?;
    let k = Kernels::load(&ctx)?;
    let dev = ctx.device();
    let max_persist = dev.attribute(
        cudadrv_sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE,
    )?;
    let max_window = dev.attribute(
        cudadrv_sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE,
    )?;
    let set_aside = (max_persist as usize).min(16 << 20);
    ctx.set_persisting_l2_size(set_aside)?;
    let got = ctx.persisting_l2_size()?;
    println!(
        "    persisting L2: max {max_persist} B, set {set_aside} B, read back {got} B; max window {max_window} B"
    );
    check(got > 0 && got <= max_persist as usize, || {
        format!("set-aside read back {got}")
    })?;
    let buf = DeviceBuffer::<u32>::zeroed(&ctx, 1 << 20)?;
    let stream = Stream::non_blocking(&ctx)?;
    let window = AccessPolicyWindow::persisting(
        buf.as_raw(),
        (buf.size_bytes()).min(max_window as usize),
        0.6,
    );
    stream.set_access_policy_window(&window)?;
    let back = stream.access_policy_window()?;
    check_eq(back, window, "window read back")?;
    fill(&k, buf.as_arg(), buf.len(), &stream)?;
    stream.synchronize()?;
    let mut host = vec![0u32; buf.len()];
    buf.copy_to_host(&mut host)?;
    check_filled(&host, "kernel under the window")?;
    stream.set_sync_policy(cudadrv_sys::CUsynchronizationPolicy::CU_SYNC_POLICY_BLOCKING_SYNC)?;
    check_eq(
        stream.sync_policy()?,
        cudadrv_sys::CUsynchronizationPolicy::CU_SYNC_POLICY_BLOCKING_SYNC,
        "sync policy",
    )?;
    stream.set_mem_sync_domain(
        cudadrv_sys::CUlaunchMemSyncDomain::CU_LAUNCH_MEM_SYNC_DOMAIN_REMOTE,
    )?;
    check_eq(
        stream.mem_sync_domain()?,
        cudadrv_sys::CUlaunchMemSyncDomain::CU_LAUNCH_MEM_SYNC_DOMAIN_REMOTE,
        "memory sync domain",
    )?;
    ctx.reset_persisting_l2()?;
    ctx.set_persisting_l2_size(0)?;
    Ok(())
}

/// `cuPointerGetAttribute` tells device, managed, pinned and unknown memory apart.
fn pointer_kinds() -> TestResult {
    require_gpu()?;
    let ctx = ctx()?;
    let dev = DeviceBuffer::<u32>::new(&ctx, 16)?;
    let pinned = PinnedHostBuffer::<u32>::zeroed(&ctx, 16)?;
    let managed = ManagedBuffer::<u32>::new(&ctx, 16, Attach::Global)?;
    let plain = [0u32; 16];
    check_eq(memory_kind(dev.as_raw())?, MemoryKind::Device, "device")?;
    check_eq(
        memory_kind(managed.as_raw())?,
        MemoryKind::Managed,
        "managed",
    )?;
    check_eq(
        memory_kind(pinned.as_ptr() as u64)?,
        MemoryKind::Host,
        "pinned",
    )?;
    check_eq(
        memory_kind(plain.as_ptr() as u64)?,
        MemoryKind::Unknown,
        "a stack array",
    )?;
    let _ = ptx::KERNELS;
    Ok(())
}
