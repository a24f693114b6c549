//! Hardware tests of virtual memory management (`cudadrv::memory::vmm`, Programming
//! Guide 4.16): granularity, reserve / create / map / access / unmap / release in both
//! release orders, retaining the handle of mapped memory, and a `GrowableBuffer` grown
//! while a kernel runs on its mapped part (the pointer stays, both parts checked).

use cuda_workspace::{
    Kernels, Outcome, TestResult, check, check_eq, check_filled, hw_tests, ptx, require_gpu,
    run_suite, skip,
};
use cudadrv::launch::{LaunchConfig, launch};
use cudadrv::memory::vmm::{Granularity, PhysicalMemory, VirtualRange, granularity};
use cudadrv::{Context, Device, DeviceBuffer, GrowableBuffer, Module, Stream, StreamFlags};
use cudadrv_sys::CUdevice_attribute;

fn main() {
    run_suite(
        "hw_vmm",
        hw_tests![
            map_unmap_and_release_in_either_order,
            retained_handle_names_the_mapped_memory,
            sizes_are_checked_before_the_driver,
            growable_buffer_grows_under_a_running_kernel,
        ],
    );
}

fn ctx() -> Result<Context, Outcome> {
    require_gpu()?;
    let dev = Device::get(0)?;
    if dev.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)?
        == 0
    {
        return skip("the device does not support virtual memory management");
    }
    Ok(Context::primary(dev)?)
}

fn fill(k: &Kernels, stream: &Stream, ptr: cudadrv::DevicePtr<u32>, n: u32) -> TestResult {
    let cfg = LaunchConfig::new(n.div_ceil(256), 256).stream(stream);
    // SAFETY: fill(out, n) writes out[0..n]; the callers pass `n` mapped elements that
    // stay mapped until the stream is synchronized.
    unsafe { launch(&k.fill, &cfg, &(ptr, n))? };
    Ok(())
}

fn read(ctx: &Context, ptr: cudadrv_sys::CUdeviceptr, n: usize) -> Result<Vec<u32>, Outcome> {
    let _ = ctx;
    let cu = cudadrv_sys::driver()?;
    let mut v = vec![0u32; n];
    // SAFETY: the callers pass `n` mapped elements; the context is current (bound by
    // the caller); `v` holds `n` u32s.
    let r = unsafe { (cu.cuMemcpyDtoH()?)(v.as_mut_ptr().cast(), ptr, n * 4) };
    check_eq(r, cudadrv_sys::CUresult::CUDA_SUCCESS, "cuMemcpyDtoH")?;
    Ok(v)
}

fn map_unmap_and_release_in_either_order() -> TestResult {
    let ctx = ctx()?;
    ctx.bind()?;
    let k = Kernels::load(&ctx)?;
    let stream = Stream::new(&ctx, StreamFlags::NON_BLOCKING)?;
    let min = granularity(&ctx, Granularity::Minimum)?;
    let rec = granularity(&ctx, Granularity::Recommended)?;
    println!("    granularity: minimum {min} bytes, recommended {rec} bytes");
    check(min > 0 && rec % min == 0, || {
        format!("granularities {min} / {rec}")
    })?;
    let range = VirtualRange::reserve(&ctx, 4 * min)?;
    let n = (2 * min / 4) as u32;
    // Order 1: release the handle first, then use and unmap the mapping.
    let a = PhysicalMemory::new(&ctx, 2 * min)?;
    let map_a = range.map(0, &a)?;
    drop(a);
    fill(&k, &stream, map_a.as_arg(), n)?;
    stream.synchronize()?;
    check_filled(
        &read(&ctx, map_a.as_raw(), n as usize)?,
        "mapped after release",
    )?;
    // Order 2: unmap first, then release; the second half of the range.
    let b = PhysicalMemory::new(&ctx, 2 * min)?;
    {
        let map_b = range.map(2 * min, &b)?;
        check_eq(
            map_b.as_raw(),
            range.base() + 2 * min as u64,
            "mapping address",
        )?;
        fill(&k, &stream, map_b.as_arg(), n)?;
        stream.synchronize()?;
        check_filled(&read(&ctx, map_b.as_raw(), n as usize)?, "second mapping")?;
        // Mapping the same span twice is refused.
        check(range.map(2 * min, &b).is_err(), || {
            "double map accepted".into()
        })?;
    }
    drop(b);
    // The first mapping is unaffected by the second's unmap and release.
    check_filled(
        &read(&ctx, map_a.as_raw(), n as usize)?,
        "first mapping after the second went",
    )?;
    drop(map_a);
    drop(range);
    check_eq(cudadrv::drop_error_count(), 0, "drop errors")
}

fn retained_handle_names_the_mapped_memory() -> TestResult {
    let ctx = ctx()?;
    ctx.bind()?;
    let k = Kernels::load(&ctx)?;
    let stream = Stream::new(&ctx, StreamFlags::NON_BLOCKING)?;
    let min = granularity(&ctx, Granularity::Minimum)?;
    let range = VirtualRange::reserve(&ctx, 2 * min)?;
    let mem = PhysicalMemory::new(&ctx, min)?;
    let first = range.map(0, &mem)?;
    let n = (min / 4) as u32;
    fill(&k, &stream, first.as_arg(), n)?;
    stream.synchronize()?;
    // Retain the handle from an address inside the mapping, drop the original handle,
    // and map the same physical memory a second time through the retained one.
    let retained = PhysicalMemory::retain(&ctx, first.as_raw() + 4096)?;
    drop(mem);
    let second = range.map(min, &PhysicalMemory::retain(&ctx, first.as_raw())?);
    // A retained handle has no known size, so `map` refuses it; map by the driver.
    check(second.is_err(), || {
        "map of a size-less handle accepted".into()
    })?;
    let cu = cudadrv_sys::driver()?;
    let alias = range.base() + min as u64;
    // SAFETY: the second half of our reservation is free; the handle is live; the
    // alias is unmapped below before the range is dropped.
    let r = unsafe { (cu.cuMemMap()?)(alias, min, 0, retained.as_raw(), 0) };
    check_eq(
        r,
        cudadrv_sys::CUresult::CUDA_SUCCESS,
        "cuMemMap of the retained handle",
    )?;
    let desc = cudadrv_sys::CUmemAccessDesc {
        location: cudadrv::memory::managed::Location::Device(ctx.device()).as_raw(),
        flags: cudadrv_sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
    };
    // SAFETY: the alias is mapped; one descriptor.
    let r = unsafe { (cu.cuMemSetAccess()?)(alias, min, &desc, 1) };
    check_eq(r, cudadrv_sys::CUresult::CUDA_SUCCESS, "cuMemSetAccess")?;
    let through_alias = read(&ctx, alias, n as usize);
    // SAFETY: exactly the span mapped above.
    let r = unsafe { (cu.cuMemUnmap()?)(alias, min) };
    check_eq(r, cudadrv_sys::CUresult::CUDA_SUCCESS, "cuMemUnmap")?;
    check_filled(
        &through_alias?,
        "the same memory read through a second mapping",
    )?;
    drop(first);
    Ok(())
}

fn sizes_are_checked_before_the_driver() -> TestResult {
    let ctx = ctx()?;
    let min = granularity(&ctx, Granularity::Minimum)?;
    for (what, r) in [
        ("reserve 0", VirtualRange::reserve(&ctx, 0).err()),
        (
            "reserve granule + 1",
            VirtualRange::reserve(&ctx, min + 1).err(),
        ),
        (
            "create granule / 2",
            PhysicalMemory::new(&ctx, min / 2).err(),
        ),
    ] {
        match r {
            Some(cudadrv::Error::InvalidArgument(m)) => println!("    {what}: {m}"),
            other => return Err(Outcome::Fail(format!("{what}: {other:?}"))),
        }
    }
    let range = VirtualRange::reserve(&ctx, min)?;
    let mem = PhysicalMemory::new(&ctx, 2 * min)?;
    check(
        matches!(range.map(0, &mem), Err(cudadrv::Error::InvalidArgument(_))),
        || "oversized map accepted".into(),
    )?;
    let small = PhysicalMemory::new(&ctx, min)?;
    check(
        matches!(
            range.map(min / 2, &small),
            Err(cudadrv::Error::InvalidArgument(_))
        ),
        || "unaligned offset accepted".into(),
    )
}

fn growable_buffer_grows_under_a_running_kernel() -> TestResult {
    let ctx = ctx()?;
    let k = Kernels::load(&ctx)?;
    let module = Module::from_ptx(&ctx, ptx::KERNELS)?;
    let busy = module.function("pdl_primary")?;
    let (s1, s2) = (
        Stream::new(&ctx, StreamFlags::NON_BLOCKING)?,
        Stream::new(&ctx, StreamFlags::NON_BLOCKING)?,
    );
    // Room for 1 Gi u32 (4 GiB of addresses), 2 MiB chunks.
    let mut buf = GrowableBuffer::<u32>::new(&ctx, 1 << 30, 2 << 20)?;
    check_eq(buf.len(), 0, "nothing mapped yet")?;
    let chunk = buf.chunk_bytes() / 4;
    buf.grow_to(chunk)?;
    let base = buf.as_raw();
    // pdl_primary writes out[i] = 3i + 7 for i < n after busy-waiting 50 ms per block.
    let grid = 64u32;
    let stamps = DeviceBuffer::<u64>::zeroed(&ctx, 4 * grid as usize)?;
    let n = chunk as u32;
    let cfg = LaunchConfig::new(grid, 128).stream(&s1);
    // SAFETY: pdl_primary(out, n, stamps, work_ns): `out` has n mapped elements that
    // stay mapped (growing never unmaps); `stamps` holds 4 per block; synchronized below.
    unsafe {
        launch(
            &busy,
            &cfg,
            &(buf.as_arg(), n, stamps.as_arg(), 50_000_000u32),
        )?
    };
    let running_before = !s1.query()?;
    buf.grow_to(8 * chunk)?;
    let running_after = !s1.query()?;
    println!(
        "    grew from {} to {} elements ({} chunks of {} MiB) while the kernel ran: \
         before {running_before}, after {running_after}",
        chunk,
        buf.len(),
        buf.len() / chunk,
        buf.chunk_bytes() >> 20
    );
    check(running_before && running_after, || {
        "the kernel was not running across the grow".into()
    })?;
    check_eq(buf.as_raw(), base, "pointer after growing")?;
    // The new part, written on another stream while the first kernel still runs.
    let tail = buf.as_arg().offset(chunk).ok_or("offset")?;
    fill(&k, &s2, tail, (7 * chunk) as u32)?;
    s2.synchronize()?;
    s1.synchronize()?;
    let mut head = vec![0u32; chunk];
    buf.copy_to_host(0, &mut head)?;
    if let Some(i) = (0..chunk).find(|&i| head[i] != 3 * i as u32 + 7) {
        return Err(Outcome::Fail(format!("head[{i}] = {}", head[i])));
    }
    let mut rest = vec![0u32; 7 * chunk];
    buf.copy_to_host(chunk, &mut rest)?;
    check_filled(&rest, "grown part")?;
    check(buf.grow_to(buf.max_len() + 1).is_err(), || {
        "grow beyond the reservation accepted".into()
    })?;
    check(buf.copy_to_host(buf.len(), &mut [0u32]).is_err(), || {
        "copy past the mapped part accepted".into()
    })
}
