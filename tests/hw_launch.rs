//! Hardware tests of `cudadrv::launch` (sm_90): both argument paths, the checked
//! launch, driver errors, and the cluster, cooperative, PDL, programmatic-event,
//! priority and device-updatable-node attributes.
//!
//! The kernels are the Rust ones of `ptx/generated/kernels.ptx` (`cargo xtask ptx`):
//! `param_echo` (ptx/src/echo.rs), `fill` (ptx/src/fill.rs), `cluster_mbarrier`
//! (ptx/src/cluster.rs), `grid_barrier` (ptx/src/grid_barrier.rs) and the PDL pair
//! `pdl_primary` / `pdl_secondary` (ptx/src/pdl.rs). Each test states the parameters it
//! passes; the values it checks are the ones those kernels document.

use cuda_workspace::{
    Outcome, TestResult, check, check_eq, check_filled, fill_value, ptx, require_sm,
};
use cudadrv::args::{Float2, Float4, LayoutMismatch, PackedArgs};
use cudadrv::graph::{CaptureMode, InstantiateFlags};
use cudadrv::launch::{LaunchConfig, launch, launch_checked, launch_packed, launch_plain};
use cudadrv::{Context, Device, DeviceBuffer, Error, Event, EventFlags, Module, Stream};
use cudadrv_sys::CUresult;

fn main() {
    cuda_workspace::run_suite(
        "hw_launch",
        cuda_workspace::hw_tests![
            pointer_array_args_reach_the_kernel,
            packed_args_reach_the_kernel,
            checked_launch_accepts_the_right_layout,
            checked_launch_rejects_a_wrong_signature,
            oversized_block_is_rejected,
            plain_launch,
            cluster_launch_reports_cluster_ids,
            cooperative_launch_grid_barrier,
            pdl_between_two_kernels,
            programmatic_event_attribute_accepted,
            priority_attribute_accepted,
            device_updatable_node_reported_at_capture,
        ],
    );
}

cudadrv::kernel_struct! {
    /// `struct Pair { float a; float4 b; }` (size 32, alignment 16), as in ptx/src/echo.rs.
    struct Pair {
        a: f32,
        b: Float4,
    }
}

/// The parameter list of `param_echo` (ptx/src/echo.rs): `(out, a: i32, b: float4,
/// c: u8, d: f32, e: *const u8, f: float2, g: Pair)`.
type Echo<P> = (P, i32, Float4, u8, f32, *const u8, Float2, Pair);
/// `param_echo`'s device parameter layout, (offset, size) per parameter.
const ECHO_OFFSETS: [(usize, usize); 8] = [
    (0, 8),
    (8, 4),
    (16, 16),
    (32, 1),
    (36, 4),
    (40, 8),
    (48, 8),
    (64, 32),
];
/// Size of `param_echo`'s parameter buffer.
const ECHO_PARAM_BYTES: usize = 96;
/// Bytes of `out` that `param_echo`'s echo spans.
const ECHO_OUT_BYTES: usize = 128;
const POISON: u8 = 0xEE;

const ECHO_A: i32 = -1_234_567_890;
const ECHO_B: [f32; 4] = [1.0, -2.5, 3.75, f32::MAX];
const ECHO_C: u8 = 0xA5;
const ECHO_D: f32 = -3.25e10;
const ECHO_E: u64 = 0x0123_4567_89AB_CDEF;
const ECHO_F: [f32; 2] = [1.5, -2.0];
const ECHO_G_A: f32 = -7.0;
const ECHO_G_B: [f32; 4] = [0.5, 6.25, -1.0e-3, 42.0];

fn echo_args<P: Copy>(out: P) -> Echo<P> {
    (
        out,
        ECHO_A,
        Float4::new(ECHO_B[0], ECHO_B[1], ECHO_B[2], ECHO_B[3]),
        ECHO_C,
        ECHO_D,
        ECHO_E as *const u8,
        Float2::new(ECHO_F[0], ECHO_F[1]),
        Pair {
            a: ECHO_G_A,
            b: Float4::new(ECHO_G_B[0], ECHO_G_B[1], ECHO_G_B[2], ECHO_G_B[3]),
        },
    )
}

/// What `param_echo` copies where: (value, its offset in the parameter buffer, its
/// offset in `out`, the bytes the host passes). `g`'s 12 bytes of padding (parameter
/// offsets 68..80) are not echoed.
fn echo_pieces() -> [(&'static str, usize, usize, Vec<u8>); 8] {
    let f32s = |v: &[f32]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
    [
        ("a", 8, 0, ECHO_A.to_le_bytes().to_vec()),
        ("b", 16, 16, f32s(&ECHO_B)),
        ("c", 32, 32, vec![ECHO_C]),
        ("d", 36, 48, ECHO_D.to_le_bytes().to_vec()),
        ("e", 40, 64, ECHO_E.to_le_bytes().to_vec()),
        ("f", 48, 80, f32s(&ECHO_F)),
        ("g.a", 64, 96, ECHO_G_A.to_le_bytes().to_vec()),
        ("g.b", 80, 112, f32s(&ECHO_G_B)),
    ]
}

/// Checks the host's packing of the echo parameters (layout and bytes) and every byte
/// `param_echo` wrote: each parameter's bytes at its echo offset, every other byte of
/// the echo still poisoned.
fn check_echo(got: &[u8], packed: &PackedArgs) -> TestResult {
    check_eq(
        packed.len(),
        ECHO_PARAM_BYTES,
        "packed size of the echo parameters",
    )?;
    let layout: Vec<(usize, usize)> = packed.params().iter().map(|p| (p.offset, p.size)).collect();
    check_eq(
        layout.as_slice(),
        &ECHO_OFFSETS[..],
        "host layout of the echo parameters",
    )?;
    check_eq(got.len(), ECHO_OUT_BYTES, "echo bytes read back")?;
    let host = packed.as_bytes();
    let mut covered = [false; ECHO_OUT_BYTES];
    for (name, param_off, out_off, want) in echo_pieces() {
        let n = want.len();
        check(host[param_off..param_off + n] == want[..], || {
            format!(
                "parameter {name} (offset {param_off}, {n} bytes): host packed {:02x?}, value is {want:02x?}",
                &host[param_off..param_off + n]
            )
        })?;
        check(got[out_off..out_off + n] == want[..], || {
            format!(
                "parameter {name} (offset {param_off}, {n} bytes, echoed at {out_off}): kernel saw \
                 {:02x?}, host passed {want:02x?}",
                &got[out_off..out_off + n]
            )
        })?;
        covered[out_off..out_off + n]
            .iter_mut()
            .for_each(|c| *c = true);
    }
    for (i, c) in covered.iter().enumerate() {
        check(*c || got[i] == POISON, || {
            format!(
                "echo byte {i} (no parameter) was overwritten: {:#04x}",
                got[i]
            )
        })?;
    }
    Ok(())
}

/// The 128-byte, 16-byte aligned `out` of `param_echo`, poisoned.
fn echo_out(ctx: &Context) -> Result<DeviceBuffer<u8>, Outcome> {
    let mut out = DeviceBuffer::<u8>::new(ctx, ECHO_OUT_BYTES)?;
    out.memset_d8(POISON)?;
    check(out.as_raw() % 16 == 0, || {
        "echo buffer not 16-byte aligned".into()
    })?;
    Ok(out)
}

/// `pdl_primary`'s value at `i` (ptx/src/pdl.rs): `3i + 7`.
fn primary_value(i: u32) -> u32 {
    i.wrapping_mul(3).wrapping_add(7)
}

/// `pdl_secondary`'s value at `i` after `pdl_primary`: `2 * (3i + 7) + 1`.
fn secondary_value(i: u32) -> u32 {
    primary_value(i).wrapping_mul(2).wrapping_add(1)
}

/// How long each `pdl_primary` block busy-waits (after its trigger, before its writes):
/// a dependent that read without `griddepcontrol.wait` would see stale data.
const PRIMARY_WORK_NS: u32 = 20_000;
/// `u64` timestamps the PDL pair writes per block (`[start, mid, end, smid]`).
const STAMPS_PER_BLOCK: usize = 4;
/// `u32` words `cluster_mbarrier` writes per block.
const CLUSTER_RECORD_WORDS: usize = 16;
/// What `cluster_mbarrier`'s output holds before the launch.
const WORD_POISON: u32 = 0xDEAD_BEEF;

fn u32_buffer(ctx: &Context, n: usize) -> Result<DeviceBuffer<u32>, Error> {
    DeviceBuffer::zeroed(ctx, n)
}

fn read_u32(buf: &DeviceBuffer<u32>) -> Result<Vec<u32>, Error> {
    let mut v = vec![0u32; buf.len()];
    buf.copy_to_host(&mut v)?;
    Ok(v)
}

/// How an echo test hands `param_echo` its parameters.
#[derive(Clone, Copy)]
enum EchoPath {
    /// `launch` with the `kernelParams` pointer array.
    Pointers,
    /// `launch_packed` with one buffer.
    Packed,
    /// `launch_checked`: the buffer, checked against `cuFuncGetParamInfo` first.
    Checked,
}

/// Launches `param_echo` through `path` and checks every echoed byte.
fn echo_through(path: EchoPath) -> TestResult {
    require_sm(9, 0)?;
    let ctx = Context::primary(Device::get(0)?)?;
    let module = Module::from_ptx(&ctx, ptx::KERNELS)?;
    let f = module.function("param_echo")?;
    let stream = Stream::non_blocking(&ctx)?;
    let out = echo_out(&ctx)?;
    let args = echo_args(out.as_arg());
    let packed = PackedArgs::from_args(&args)?;
    let cfg = LaunchConfig::new(1, 1).stream(&stream);
    // SAFETY (all three): the argument types, and so the packed layout, are
    // `param_echo`'s (`verify_args` / `verify_packed` check it against the driver); `out`
    // holds the 128 16-byte aligned bytes the kernel writes and outlives the synchronize
    // below; `e` is never dereferenced.
    match path {
        EchoPath::Pointers => {
            f.verify_args::<Echo<u64>>()?;
            unsafe { launch(&f, &cfg, &args)? };
        }
        EchoPath::Packed => unsafe { launch_packed(&f, &cfg, &packed)? },
        EchoPath::Checked => {
            f.verify_packed(&packed)?;
            unsafe { launch_checked(&f, &cfg, &packed)? };
        }
    }
    stream.synchronize()?;
    let mut got = vec![0u8; ECHO_OUT_BYTES];
    out.copy_to_host(&mut got)?;
    check_echo(&got, &packed)
}

fn pointer_array_args_reach_the_kernel() -> TestResult {
    echo_through(EchoPath::Pointers)
}

fn packed_args_reach_the_kernel() -> TestResult {
    echo_through(EchoPath::Packed)
}

fn checked_launch_accepts_the_right_layout() -> TestResult {
    echo_through(EchoPath::Checked)
}

fn checked_launch_rejects_a_wrong_signature() -> TestResult {
    require_sm(9, 0)?;
    let ctx = Context::primary(Device::get(0)?)?;
    let module = Module::from_ptx(&ctx, ptx::KERNELS)?;
    let f = module.function("fill")?;
    let stream = Stream::non_blocking(&ctx)?;
    let n = 32u32;
    let out = u32_buffer(&ctx, n as usize)?;
    let cfg = LaunchConfig::new(1, n).stream(&stream);

    // fill(out: *mut u32, n: u32) takes (u64, u32): (0, 8), (8, 4).
    f.verify_args::<(u64, u32)>()?;
    // Were the check to let this through, `fill` would read n = 0 (the low half of the
    // u64) and write nothing.
    let swapped = PackedArgs::from_args(&(1u32, 0u64))?;
    // SAFETY: the check must refuse before launching; see above for a wrong acceptance.
    let e = unsafe { launch_checked(&f, &cfg, &swapped) }
        .err()
        .ok_or("launch_checked accepted (u32, u64) for a (u64, u32) kernel")?;
    check(
        matches!(
            e,
            Error::Layout(LayoutMismatch::Size {
                index: 0,
                packed: 4,
                reported: 8
            })
        ),
        || format!("wrong error for (u32, u64): {e:?}"),
    )?;
    check(e.to_string().contains("parameter 0"), || {
        format!("message: {e}")
    })?;

    let e = f
        .verify_args::<(u32, u64)>()
        .err()
        .ok_or("verify_args accepted (u32, u64)")?;
    check(
        matches!(e, Error::Layout(LayoutMismatch::Size { index: 0, .. })),
        || format!("verify_args::<(u32, u64)>: {e:?}"),
    )?;
    let e = f
        .verify_args::<(u64,)>()
        .err()
        .ok_or("verify_args accepted (u64,)")?;
    check(
        matches!(
            e,
            Error::Layout(LayoutMismatch::Count {
                packed: 1,
                reported: 2
            })
        ),
        || format!("verify_args::<(u64,)>: {e:?}"),
    )?;
    let e = f
        .verify_args::<(u64, u32, u8)>()
        .err()
        .ok_or("verify_args accepted 3 params")?;
    check(
        matches!(
            e,
            Error::Layout(LayoutMismatch::Count {
                packed: 3,
                reported: 2
            })
        ),
        || format!("verify_args::<(u64, u32, u8)>: {e:?}"),
    )?;
    let e = f
        .verify_args::<(u32, u32)>()
        .err()
        .ok_or("verify_args accepted (u32, u32)")?;
    check(
        matches!(e, Error::Layout(LayoutMismatch::Size { index: 0, .. })),
        || format!("verify_args::<(u32, u32)>: {e:?}"),
    )?;

    // The right signature, the pointer passed as a plain u64.
    let right = PackedArgs::from_args(&(out.as_raw(), n))?;
    // SAFETY: `fill` writes out[0..n]; `out` holds n u32s.
    unsafe { launch_checked(&f, &cfg, &right)? };
    stream.synchronize()?;
    check_filled(&read_u32(&out)?, "fill launched with (u64, u32)")
}

fn oversized_block_is_rejected() -> TestResult {
    require_sm(9, 0)?;
    let ctx = Context::primary(Device::get(0)?)?;
    let module = Module::from_ptx(&ctx, ptx::KERNELS)?;
    let f = module.function("fill")?;
    let stream = Stream::non_blocking(&ctx)?;
    let out = u32_buffer(&ctx, 4096)?;
    let args = (out.as_arg(), 4096u32);

    let cfg = LaunchConfig::new(2, 2048).stream(&stream);
    // SAFETY: `fill` takes (u32*, u32) and writes `n` values into `out`; the driver must
    // refuse the launch anyway.
    let e = unsafe { launch(&f, &cfg, &args) }
        .err()
        .ok_or("a block of 2048 threads was accepted")?;
    check_eq(
        e.code(),
        Some(CUresult::CUDA_ERROR_INVALID_VALUE),
        "error code for 2048 threads",
    )?;
    check_eq(e.call(), Some("cuLaunchKernelEx"), "failing call")?;
    let text = e.to_string();
    check(
        text.contains("cuLaunchKernelEx") && text.contains("CUDA_ERROR_INVALID_VALUE"),
        || format!("message does not name the call and the code: {text}"),
    )?;

    // SAFETY: as above.
    let e = unsafe { launch_plain(&f, &cfg, &args) }
        .err()
        .ok_or("cuLaunchKernel accepted 2048 threads")?;
    check_eq(e.call(), Some("cuLaunchKernel"), "failing call (plain)")?;
    check_eq(
        e.code(),
        Some(CUresult::CUDA_ERROR_INVALID_VALUE),
        "plain error code",
    )?;

    // A zero grid: the driver reports it.
    let zero = LaunchConfig::new(0, 128).stream(&stream);
    // SAFETY: as above.
    let e = unsafe { launch(&f, &zero, &args) }
        .err()
        .ok_or("a zero grid was accepted")?;
    check_eq(
        e.call(),
        Some("cuLaunchKernelEx"),
        "failing call (zero grid)",
    )?;

    // The stream still works after the refused launches.
    let ok = LaunchConfig::new(16, 256).stream(&stream);
    // SAFETY: `fill` writes `out[0..4096]`.
    unsafe { launch(&f, &ok, &args)? };
    stream.synchronize()?;
    check_filled(&read_u32(&out)?, "fill after the refused launches")
}

fn plain_launch() -> TestResult {
    require_sm(9, 0)?;
    let ctx = Context::primary(Device::get(0)?)?;
    let module = Module::from_ptx(&ctx, ptx::KERNELS)?;
    let f = module.function("fill")?;
    let stream = Stream::non_blocking(&ctx)?;
    let n = 1000u32;
    let out = u32_buffer(&ctx, n as usize)?;
    let cfg = LaunchConfig::new(n.div_ceil(128), 128).stream(&stream);
    // SAFETY: `fill` writes out[0..n].
    unsafe { launch_plain(&f, &cfg, &(out.as_arg(), n))? };
    stream.synchronize()?;
    check_filled(&read_u32(&out)?, "plain launch")?;
    let with_attr = cfg.clone().priority(0)?;
    // SAFETY: refused before any driver call.
    let e = unsafe { launch_plain(&f, &with_attr, &(out.as_arg(), n)) }
        .err()
        .ok_or("launch_plain accepted a configuration with attributes")?;
    check(matches!(e, Error::InvalidArgument(_)), || format!("{e:?}"))?;

    // A configuration that names no stream is refused by both launch calls before the
    // driver sees it: launches never fall back to a default stream.
    let unnamed = LaunchConfig::new(n.div_ceil(128), 128);
    check(!unnamed.has_stream(), || {
        "LaunchConfig::new names a stream".into()
    })?;
    let untouched = u32_buffer(&ctx, n as usize)?;
    // SAFETY: `fill` writes untouched[0..n]; both launches must be refused anyway.
    let e = unsafe { launch(&f, &unnamed, &(untouched.as_arg(), n)) }
        .err()
        .ok_or("launch accepted a configuration without a stream")?;
    check(matches!(e, Error::InvalidArgument(_)), || {
        format!("launch without a stream: {e:?}")
    })?;
    // SAFETY: as above.
    let e = unsafe { launch_plain(&f, &unnamed, &(untouched.as_arg(), n)) }
        .err()
        .ok_or("launch_plain accepted a configuration without a stream")?;
    check(matches!(e, Error::InvalidArgument(_)), || {
        format!("launch_plain without a stream: {e:?}")
    })?;
    ctx.synchronize()?;
    check(read_u32(&untouched)?.iter().all(|&v| v == 0), || {
        "a launch refused for naming no stream wrote its output".into()
    })
}

fn cluster_launch_reports_cluster_ids() -> TestResult {
    require_sm(9, 0)?;
    let ctx = Context::primary(Device::get(0)?)?;
    let module = Module::from_ptx(&ctx, ptx::KERNELS)?;
    let f = module.function("cluster_mbarrier")?;
    let stream = Stream::non_blocking(&ctx)?;
    let blocks = 8u32;
    let size = 2u32;
    let out = DeviceBuffer::from_slice(
        &ctx,
        &vec![WORD_POISON; CLUSTER_RECORD_WORDS * blocks as usize],
    )?;
    let cfg = LaunchConfig::new(blocks, 32)
        .stream(&stream)
        .cluster_dim(size)?;
    // SAFETY: cluster_mbarrier(out: *mut u32) writes 16 words per block into `out`; 1-D
    // grid in clusters of (2, 1, 1).
    unsafe { launch(&f, &cfg, &(out.as_arg(),))? };
    stream.synchronize()?;
    let got = read_u32(&out)?;
    for b in 0..blocks {
        let rec = &got[CLUSTER_RECORD_WORDS * b as usize..][..CLUSTER_RECORD_WORDS];
        let (cluster, rank) = (b / size, b % size);
        // Words 2, 0, 1, 4 of the record.
        check_eq(
            [rec[2], rec[0], rec[1], rec[4]],
            [cluster, rank, size, blocks / size],
            &format!("block {b}: [clusterid.x, cluster_ctarank, cluster_nctarank, nclusterid.x]"),
        )?;
        check_eq(
            [rec[3], rec[5], rec[7]],
            [rank, size, 1],
            &format!("block {b}: [cluster_ctaid.x, cluster_nctaid.x, marker]"),
        )?;
        if rank == 0 {
            // What each rank of the cluster stored into rank 0's shared memory
            // (`blockIdx.x + 1`), which only works inside a real cluster.
            check_eq(
                &rec[8..8 + size as usize],
                &[cluster * size + 1, cluster * size + 2][..],
                &format!("block {b}: slots rank 0 received"),
            )?;
        }
    }
    Ok(())
}

fn cooperative_launch_grid_barrier() -> TestResult {
    require_sm(9, 0)?;
    let ctx = Context::primary(Device::get(0)?)?;
    if !ctx.device().supports_cooperative_launch()? {
        return cuda_workspace::skip("the device does not support cooperative launches");
    }
    let module = Module::from_ptx(&ctx, ptx::KERNELS)?;
    let f = module.function("grid_barrier")?;
    let stream = Stream::non_blocking(&ctx)?;
    let grid = ctx.device().multiprocessor_count()?;
    let counter = u32_buffer(&ctx, 1)?;
    let out = u32_buffer(&ctx, grid as usize)?;
    let cfg = LaunchConfig::new(grid, 64)
        .stream(&stream)
        .cooperative(true)?;
    // SAFETY: grid_barrier(counter: *mut u32, out: *mut u32) increments the zeroed
    // `counter[0]` and writes out[0..grid]; one block per SM is co-resident, which the
    // cooperative launch checks.
    unsafe { launch(&f, &cfg, &(counter.as_arg(), out.as_arg()))? };
    stream.synchronize()?;
    check_eq(read_u32(&counter)?, vec![grid], "blocks that arrived")?;
    let seen = read_u32(&out)?;
    check(seen.iter().all(|&v| v == grid), || {
        format!("every block should see all {grid} arrivals: {seen:?}")
    })
}

fn pdl_between_two_kernels() -> TestResult {
    require_sm(9, 0)?;
    let ctx = Context::primary(Device::get(0)?)?;
    let module = Module::from_ptx(&ctx, ptx::KERNELS)?;
    let primary = module.function("pdl_primary")?;
    let secondary = module.function("pdl_secondary")?;
    let stream = Stream::non_blocking(&ctx)?;
    let (grid, block) = (132u32, 256u32);
    let n = grid * block;
    let mut data = u32_buffer(&ctx, n as usize)?;
    let mut out = u32_buffer(&ctx, n as usize)?;
    let primary_stamps = DeviceBuffer::<u64>::zeroed(&ctx, STAMPS_PER_BLOCK * grid as usize)?;
    let secondary_stamps = DeviceBuffer::<u64>::zeroed(&ctx, STAMPS_PER_BLOCK * grid as usize)?;
    let first = LaunchConfig::new(grid, block).stream(&stream);
    let dependent = LaunchConfig::new(grid, block)
        .stream(&stream)
        .programmatic_stream_serialization()?;
    for round in 0..3 {
        // SAFETY: pdl_primary(out, n, stamps, work_ns) writes data[0..n] and 4 stamps
        // per block; pdl_secondary(in, out, n, stamps, prolog_iters) waits on it
        // (griddepcontrol.wait), reads data[0..n], writes out[0..n] and 4 stamps per
        // block. Every buffer outlives the synchronize below.
        unsafe {
            launch(
                &primary,
                &first,
                &(data.as_arg(), n, primary_stamps.as_arg(), PRIMARY_WORK_NS),
            )?;
            launch(
                &secondary,
                &dependent,
                &(
                    data.as_arg(),
                    out.as_arg(),
                    n,
                    secondary_stamps.as_arg(),
                    0u32,
                ),
            )?;
        }
        stream.synchronize()?;
        let got = read_u32(&out)?;
        if let Some((i, v)) = got
            .iter()
            .enumerate()
            .find(|&(i, &v)| v != secondary_value(i as u32))
        {
            return Err(Outcome::Fail(format!(
                "round {round}: out[{i}] = {v}, expected {} (secondary read before the primary wrote?)",
                secondary_value(i as u32)
            )));
        }
        // Each round starts from zeros, so an early read shows in every round.
        out.memset_d8(0)?;
        data.memset_d8(0)?;
    }
    Ok(())
}

fn programmatic_event_attribute_accepted() -> TestResult {
    require_sm(9, 0)?;
    let ctx = Context::primary(Device::get(0)?)?;
    let module = Module::from_ptx(&ctx, ptx::KERNELS)?;
    let primary = module.function("pdl_primary")?;
    let fill = module.function("fill")?;
    let a = Stream::non_blocking(&ctx)?;
    let mut b = Stream::non_blocking(&ctx)?;
    let (grid, block) = (132u32, 128u32);
    let n = grid * block;
    for trigger_at_block_start in [false, true] {
        let event = Event::new(&ctx, EventFlags::DISABLE_TIMING)?;
        let data = u32_buffer(&ctx, n as usize)?;
        let other = u32_buffer(&ctx, n as usize)?;
        let stamps = DeviceBuffer::<u64>::zeroed(&ctx, STAMPS_PER_BLOCK * grid as usize)?;
        let cfg = LaunchConfig::new(grid, block)
            .stream(&a)
            .programmatic_event(&event, trigger_at_block_start)?;
        // SAFETY: pdl_primary(out, n, stamps, work_ns) writes data[0..n] and 4 stamps per
        // block.
        unsafe {
            launch(
                &primary,
                &cfg,
                &(data.as_arg(), n, stamps.as_arg(), PRIMARY_WORK_NS),
            )?
        };
        b.wait_event(&event)?;
        let after = LaunchConfig::new(grid, block).stream(&b);
        // SAFETY: `fill` writes other[0..n]; it does not read `data`.
        unsafe { launch(&fill, &after, &(other.as_arg(), n))? };
        a.synchronize()?;
        b.synchronize()?;
        let d = read_u32(&data)?;
        let o = read_u32(&other)?;
        check(
            d.iter()
                .enumerate()
                .all(|(i, &v)| v == primary_value(i as u32)),
            || format!("trigger_at_block_start={trigger_at_block_start}: primary output wrong"),
        )?;
        check(
            o.iter()
                .enumerate()
                .all(|(i, &v)| v == fill_value(i as u32)),
            || format!("trigger_at_block_start={trigger_at_block_start}: dependent output wrong"),
        )?;
    }
    Ok(())
}

fn priority_attribute_accepted() -> TestResult {
    require_sm(9, 0)?;
    let ctx = Context::primary(Device::get(0)?)?;
    let module = Module::from_ptx(&ctx, ptx::KERNELS)?;
    let f = module.function("fill")?;
    let stream = Stream::non_blocking(&ctx)?;
    let range = ctx.stream_priority_range()?;
    let n = 4096u32;
    for priority in [range.greatest, range.least] {
        let out = u32_buffer(&ctx, n as usize)?;
        let cfg = LaunchConfig::new(n / 256, 256)
            .stream(&stream)
            .priority(priority)?;
        // SAFETY: `fill` writes out[0..n].
        unsafe { launch(&f, &cfg, &(out.as_arg(), n))? };
        stream.synchronize()?;
        check_filled(&read_u32(&out)?, &format!("priority {priority}"))?;
    }
    Ok(())
}

/// `CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE` in a captured launch: the driver
/// writes the device node into the launch's attribute array, and the configuration
/// reports it afterwards (the array lives on the launch's stack; the node is copied
/// back). The captured `fill` then runs from the graph.
fn device_updatable_node_reported_at_capture() -> TestResult {
    require_sm(9, 0)?;
    let ctx = Context::primary(Device::get(0)?)?;
    let module = Module::from_ptx(&ctx, ptx::KERNELS)?;
    let f = module.function("fill")?;
    let mut stream = Stream::non_blocking(&ctx)?;
    let n = 4096u32;
    let out = u32_buffer(&ctx, n as usize)?;
    // No stream: the capture's stream runs it.
    let cfg = LaunchConfig::new(n / 256, 256)
        .priority(0)?
        .device_updatable_kernel_node()?;
    check_eq(cfg.device_node(), None, "device node before the capture")?;
    let capture = stream.begin_capture(CaptureMode::Global)?;
    // SAFETY: `fill(out, n)` writes out[0..n]; `out` outlives the graph's launch below.
    unsafe { capture.launch(&f, &cfg, &(out.as_arg(), n))? };
    let graph = capture.end()?;
    let node = cfg.device_node();
    check(node.is_some(), || {
        "no device node after a captured device-updatable launch".to_string()
    })?;
    check_eq(cfg.clone().device_node(), node, "device node of a clone")?;
    check_eq(graph.node_count()?, 1, "captured nodes")?;
    let exec = graph.instantiate(InstantiateFlags::empty())?;
    exec.upload(&stream)?;
    exec.launch(&stream)?;
    stream.synchronize()?;
    check_filled(&read_u32(&out)?, "device-updatable node")
}
