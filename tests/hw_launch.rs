//! Hardware tests of `cuda_core::launch` (sm_90): both argument paths, the checked
//! launch, driver errors, and the cluster, cooperative, PDL, programmatic-event and
//! priority attributes.
//!
//! The kernels are hand-written PTX below (checked with `ptxas -arch=sm_90`), so this
//! suite does not depend on the Rust kernels in ptx/.

use cuda_core::args::{Float2, Float4, LayoutMismatch, PackedArgs};
use cuda_core::launch::{LaunchConfig, launch, launch_checked, launch_packed, launch_plain};
use cuda_core::{Context, Device, DeviceBuffer, Error, Event, EventFlags, Module, Stream};
use cuda_sys::CUresult;
use cuda_workspace::{TestResult, check, check_eq, require_sm};

const PTX: &str = r#".version 8.0
.target sm_90
.address_size 64

// (out, u8, u16, u32, f64, float2, i8, float4, u64): stores each parameter at its own
// parameter-buffer offset in `out` (0, 8, 10, 12, 16, 24, 32, 48, 64; 72 bytes).
.visible .entry param_echo(
    .param .u64 p_out,
    .param .u8 p_a,
    .param .u16 p_b,
    .param .u32 p_c,
    .param .f64 p_d,
    .param .align 8 .b8 p_e[8],
    .param .s8 p_f,
    .param .align 16 .b8 p_g[16],
    .param .u64 p_h
)
{
    .reg .b64 %rd<4>;
    .reg .b32 %r<8>;
    .reg .b16 %h<4>;
    .reg .f64 %fd<2>;
    ld.param.u64 %rd1, [p_out];
    cvta.to.global.u64 %rd1, %rd1;
    st.global.u64 [%rd1], %rd1;
    ld.param.u8 %h1, [p_a];
    st.global.u8 [%rd1+8], %h1;
    ld.param.u16 %h2, [p_b];
    st.global.u16 [%rd1+10], %h2;
    ld.param.u32 %r1, [p_c];
    st.global.u32 [%rd1+12], %r1;
    ld.param.f64 %fd1, [p_d];
    st.global.f64 [%rd1+16], %fd1;
    ld.param.v2.u32 {%r2, %r3}, [p_e];
    st.global.v2.u32 [%rd1+24], {%r2, %r3};
    ld.param.s8 %h3, [p_f];
    st.global.u8 [%rd1+32], %h3;
    ld.param.v4.u32 {%r4, %r5, %r6, %r7}, [p_g];
    st.global.v4.u32 [%rd1+48], {%r4, %r5, %r6, %r7};
    ld.param.u64 %rd2, [p_h];
    st.global.u64 [%rd1+64], %rd2;
    ret;
}

// (u64, u32): does nothing; its layout is (0, 8), (8, 4).
.visible .entry sig_u64_u32(
    .param .u64 p_a,
    .param .u32 p_b
)
{
    ret;
}

// (out: *u32, n: u32): out[i] = i * 3 + 1 for i < n.
.visible .entry fill(
    .param .u64 p_out,
    .param .u32 p_n
)
{
    .reg .pred %p;
    .reg .b32 %r<6>;
    .reg .b64 %rd<4>;
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %ntid.x;
    mov.u32 %r3, %tid.x;
    mad.lo.u32 %r1, %r1, %r2, %r3;
    ld.param.u32 %r4, [p_n];
    setp.ge.u32 %p, %r1, %r4;
    @%p bra DONE;
    ld.param.u64 %rd1, [p_out];
    cvta.to.global.u64 %rd1, %rd1;
    mul.wide.u32 %rd2, %r1, 4;
    add.u64 %rd1, %rd1, %rd2;
    mad.lo.u32 %r5, %r1, 3, 1;
    st.global.u32 [%rd1], %r5;
DONE:
    ret;
}

// (out: *u32): out[4 * ctaid.x + k] = clusterid.x, cluster_ctarank, cluster_nctarank,
// nclusterid.x (written by thread 0 of each block).
.visible .entry cluster_ids(
    .param .u64 p_out
)
{
    .reg .pred %p;
    .reg .b32 %r<8>;
    .reg .b64 %rd<4>;
    mov.u32 %r1, %tid.x;
    setp.ne.u32 %p, %r1, 0;
    @%p bra DONE;
    ld.param.u64 %rd1, [p_out];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r2, %ctaid.x;
    mul.wide.u32 %rd2, %r2, 16;
    add.u64 %rd1, %rd1, %rd2;
    mov.u32 %r3, %clusterid.x;
    mov.u32 %r4, %cluster_ctarank;
    mov.u32 %r5, %cluster_nctarank;
    mov.u32 %r6, %nclusterid.x;
    st.global.v4.u32 [%rd1], {%r3, %r4, %r5, %r6};
DONE:
    ret;
}

// (counter: *u32, out: *u32): a hand-made grid barrier. Thread 0 of each block
// increments `counter` and spins until every block has arrived (all blocks must be
// resident: a cooperative launch guarantees it), then writes what it saw to
// out[ctaid.x].
.visible .entry grid_barrier(
    .param .u64 p_counter,
    .param .u64 p_out
)
{
    .reg .pred %p;
    .reg .b32 %r<8>;
    .reg .b64 %rd<6>;
    mov.u32 %r1, %tid.x;
    setp.ne.u32 %p, %r1, 0;
    @%p bra WAIT;
    ld.param.u64 %rd1, [p_counter];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r2, %nctaid.x;
    atom.release.gpu.global.add.u32 %r3, [%rd1], 1;
SPIN:
    ld.acquire.gpu.global.u32 %r4, [%rd1];
    setp.lt.u32 %p, %r4, %r2;
    @%p bra SPIN;
    ld.param.u64 %rd2, [p_out];
    cvta.to.global.u64 %rd2, %rd2;
    mov.u32 %r5, %ctaid.x;
    mul.wide.u32 %rd3, %r5, 4;
    add.u64 %rd2, %rd2, %rd3;
    st.global.u32 [%rd2], %r4;
WAIT:
    bar.sync 0;
    ret;
}

// PDL primary (data: *u32, n: u32): lets dependents launch at once, then spins a while
// and writes data[i] = 2 * i + 1.
.visible .entry pdl_primary(
    .param .u64 p_data,
    .param .u32 p_n
)
{
    .reg .pred %p;
    .reg .b32 %r<8>;
    .reg .b64 %rd<6>;
    griddepcontrol.launch_dependents;
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %ntid.x;
    mov.u32 %r3, %tid.x;
    mad.lo.u32 %r1, %r1, %r2, %r3;
    ld.param.u32 %r4, [p_n];
    setp.ge.u32 %p, %r1, %r4;
    @%p bra DONE;
    // Delay about 20 us so an early dependent would read stale data without the wait.
    mov.u64 %rd4, %globaltimer;
DELAY:
    mov.u64 %rd5, %globaltimer;
    sub.u64 %rd5, %rd5, %rd4;
    setp.lt.u64 %p, %rd5, 20000;
    @%p bra DELAY;
    ld.param.u64 %rd1, [p_data];
    cvta.to.global.u64 %rd1, %rd1;
    mul.wide.u32 %rd2, %r1, 4;
    add.u64 %rd1, %rd1, %rd2;
    mad.lo.u32 %r5, %r1, 2, 1;
    st.global.u32 [%rd1], %r5;
DONE:
    ret;
}

// PDL secondary (data: *u32, out: *u32, n: u32): griddepcontrol.wait, then
// out[i] = data[i] + 1.
.visible .entry pdl_secondary(
    .param .u64 p_data,
    .param .u64 p_out,
    .param .u32 p_n
)
{
    .reg .pred %p;
    .reg .b32 %r<8>;
    .reg .b64 %rd<6>;
    griddepcontrol.wait;
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %ntid.x;
    mov.u32 %r3, %tid.x;
    mad.lo.u32 %r1, %r1, %r2, %r3;
    ld.param.u32 %r4, [p_n];
    setp.ge.u32 %p, %r1, %r4;
    @%p bra DONE;
    ld.param.u64 %rd1, [p_data];
    cvta.to.global.u64 %rd1, %rd1;
    mul.wide.u32 %rd2, %r1, 4;
    add.u64 %rd1, %rd1, %rd2;
    ld.global.u32 %r5, [%rd1];
    add.u32 %r5, %r5, 1;
    ld.param.u64 %rd3, [p_out];
    cvta.to.global.u64 %rd3, %rd3;
    add.u64 %rd3, %rd3, %rd2;
    st.global.u32 [%rd3], %r5;
DONE:
    ret;
}
"#;

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
        ],
    );
}

/// The mixed parameter list of `param_echo`, and its device offsets.
type Echo<P> = (P, u8, u16, u32, f64, Float2, i8, Float4, u64);
const ECHO_OFFSETS: [(usize, usize); 9] = [
    (0, 8),
    (8, 1),
    (10, 2),
    (12, 4),
    (16, 8),
    (24, 8),
    (32, 1),
    (48, 16),
    (64, 8),
];
const ECHO_BYTES: usize = 72;
const POISON: u8 = 0xEE;

fn echo_args<P: Copy>(out: P) -> Echo<P> {
    (
        out,
        0xA5,
        0xBEEF,
        0xDEAD_BEEF,
        -3.25e10,
        Float2::new(1.5, -2.0),
        -7,
        Float4::new(1.0, -2.5, 3.75, f32::MAX),
        0x0123_4567_89AB_CDEF,
    )
}

/// Checks every byte `param_echo` wrote: each parameter at its offset with the bytes
/// the host packed, every padding byte still poisoned.
fn check_echo(got: &[u8], expected: &PackedArgs) -> TestResult {
    check_eq(
        expected.len(),
        ECHO_BYTES,
        "packed size of the echo parameters",
    )?;
    let layout: Vec<(usize, usize)> = expected
        .params()
        .iter()
        .map(|p| (p.offset, p.size))
        .collect();
    check_eq(
        layout.as_slice(),
        &ECHO_OFFSETS[..],
        "host layout of the echo parameters",
    )?;
    let want = expected.as_bytes();
    let mut covered = [false; ECHO_BYTES];
    for (i, &(off, size)) in ECHO_OFFSETS.iter().enumerate() {
        check(got[off..off + size] == want[off..off + size], || {
            format!(
                "parameter {i} (offset {off}, {size} bytes): kernel saw {:02x?}, host passed {:02x?}",
                &got[off..off + size],
                &want[off..off + size]
            )
        })?;
        covered[off..off + size].iter_mut().for_each(|c| *c = true);
    }
    for (i, c) in covered.iter().enumerate() {
        check(*c || got[i] == POISON, || {
            format!("padding byte {i} was overwritten: {:#04x}", got[i])
        })?;
    }
    Ok(())
}

fn u32_buffer<'c>(ctx: &'c Context, n: usize) -> Result<DeviceBuffer<'c, u32>, Error> {
    DeviceBuffer::zeroed(ctx, n)
}

fn read_u32(buf: &DeviceBuffer<'_, u32>) -> Result<Vec<u32>, Error> {
    let mut v = vec![0u32; buf.len()];
    buf.copy_to_host(&mut v)?;
    Ok(v)
}

fn pointer_array_args_reach_the_kernel() -> TestResult {
    require_sm(9, 0)?;
    let ctx = Context::primary(Device::get(0)?)?;
    let module = Module::from_ptx(&ctx, PTX)?;
    let f = module.function("param_echo")?;
    let stream = Stream::non_blocking(&ctx)?;
    let mut out = DeviceBuffer::<u8>::new(&ctx, ECHO_BYTES)?;
    out.memset_d8(POISON)?;
    let args = echo_args(out.as_arg());
    f.verify_args::<Echo<u64>>()?;
    let cfg = LaunchConfig::new(1, 1).stream(&stream);
    // SAFETY: the argument types match `param_echo`; `out` holds the 72 bytes it writes
    // and outlives the synchronize below.
    unsafe { launch(&f, &cfg, &args)? };
    stream.synchronize()?;
    let mut got = vec![0u8; ECHO_BYTES];
    out.copy_to_host(&mut got)?;
    check_echo(&got, &PackedArgs::from_args(&args)?)
}

fn packed_args_reach_the_kernel() -> TestResult {
    require_sm(9, 0)?;
    let ctx = Context::primary(Device::get(0)?)?;
    let module = Module::from_ptx(&ctx, PTX)?;
    let f = module.function("param_echo")?;
    let stream = Stream::non_blocking(&ctx)?;
    let mut out = DeviceBuffer::<u8>::new(&ctx, ECHO_BYTES)?;
    out.memset_d8(POISON)?;
    let packed = PackedArgs::from_args(&echo_args(out.as_arg()))?;
    let cfg = LaunchConfig::new(1, 1).stream(&stream);
    // SAFETY: the packed layout is `param_echo`'s (checked by the checked test too);
    // `out` holds the 72 bytes it writes.
    unsafe { launch_packed(&f, &cfg, &packed)? };
    stream.synchronize()?;
    let mut got = vec![0u8; ECHO_BYTES];
    out.copy_to_host(&mut got)?;
    check_echo(&got, &packed)
}

fn checked_launch_accepts_the_right_layout() -> TestResult {
    require_sm(9, 0)?;
    let ctx = Context::primary(Device::get(0)?)?;
    let module = Module::from_ptx(&ctx, PTX)?;
    let f = module.function("param_echo")?;
    let stream = Stream::non_blocking(&ctx)?;
    let mut out = DeviceBuffer::<u8>::new(&ctx, ECHO_BYTES)?;
    out.memset_d8(POISON)?;
    let packed = PackedArgs::from_args(&echo_args(out.as_arg()))?;
    f.verify_packed(&packed)?;
    let cfg = LaunchConfig::new(1, 1).stream(&stream);
    // SAFETY: `out` holds the 72 bytes the kernel writes; the layout is checked.
    unsafe { launch_checked(&f, &cfg, &packed)? };
    stream.synchronize()?;
    let mut got = vec![0u8; ECHO_BYTES];
    out.copy_to_host(&mut got)?;
    check_echo(&got, &packed)
}

fn checked_launch_rejects_a_wrong_signature() -> TestResult {
    require_sm(9, 0)?;
    let ctx = Context::primary(Device::get(0)?)?;
    let module = Module::from_ptx(&ctx, PTX)?;
    let f = module.function("sig_u64_u32")?;
    let stream = Stream::non_blocking(&ctx)?;
    let cfg = LaunchConfig::new(1, 1).stream(&stream);

    // The kernel takes (u64, u32): (0, 8), (8, 4).
    f.verify_args::<(u64, u32)>()?;
    let swapped = PackedArgs::from_args(&(1u32, 2u64))?;
    // SAFETY: the kernel touches no memory; the check must refuse before launching.
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

    let right = PackedArgs::from_args(&(1u64, 2u32))?;
    // SAFETY: the kernel touches no memory.
    unsafe { launch_checked(&f, &cfg, &right)? };
    stream.synchronize()?;
    Ok(())
}

fn oversized_block_is_rejected() -> TestResult {
    require_sm(9, 0)?;
    let ctx = Context::primary(Device::get(0)?)?;
    let module = Module::from_ptx(&ctx, PTX)?;
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
    // SAFETY: 16 * 256 = 4096 threads write `out[0..4096]`.
    unsafe { launch(&f, &ok, &args)? };
    stream.synchronize()?;
    let got = read_u32(&out)?;
    check(
        got.iter().enumerate().all(|(i, &v)| v == i as u32 * 3 + 1),
        || "fill after the refused launches computed wrong values".into(),
    )
}

fn plain_launch() -> TestResult {
    require_sm(9, 0)?;
    let ctx = Context::primary(Device::get(0)?)?;
    let module = Module::from_ptx(&ctx, PTX)?;
    let f = module.function("fill")?;
    let stream = Stream::non_blocking(&ctx)?;
    let n = 1000u32;
    let out = u32_buffer(&ctx, n as usize)?;
    let cfg = LaunchConfig::new(n.div_ceil(128), 128).stream(&stream);
    // SAFETY: `fill` writes out[0..n].
    unsafe { launch_plain(&f, &cfg, &(out.as_arg(), n))? };
    stream.synchronize()?;
    let got = read_u32(&out)?;
    check(
        got.iter().enumerate().all(|(i, &v)| v == i as u32 * 3 + 1),
        || format!("plain launch: first values {:?}", &got[..4]),
    )?;
    let with_attr = cfg.clone().priority(0)?;
    // SAFETY: refused before any driver call.
    let e = unsafe { launch_plain(&f, &with_attr, &(out.as_arg(), n)) }
        .err()
        .ok_or("launch_plain accepted a configuration with attributes")?;
    check(matches!(e, Error::InvalidArgument(_)), || format!("{e:?}"))
}

fn cluster_launch_reports_cluster_ids() -> TestResult {
    require_sm(9, 0)?;
    let ctx = Context::primary(Device::get(0)?)?;
    let module = Module::from_ptx(&ctx, PTX)?;
    let f = module.function("cluster_ids")?;
    let stream = Stream::non_blocking(&ctx)?;
    let blocks = 8u32;
    let out = u32_buffer(&ctx, 4 * blocks as usize)?;
    let cfg = LaunchConfig::new(blocks, 32)
        .stream(&stream)
        .cluster_dim(2)?;
    // SAFETY: `cluster_ids` writes 4 values per block into `out`.
    unsafe { launch(&f, &cfg, &(out.as_arg(),))? };
    stream.synchronize()?;
    let got = read_u32(&out)?;
    for b in 0..blocks {
        let i = 4 * b as usize;
        check_eq(
            &got[i..i + 4],
            &[b / 2, b % 2, 2, blocks / 2][..],
            &format!("block {b}: [clusterid.x, cluster_ctarank, cluster_nctarank, nclusterid.x]"),
        )?;
    }
    Ok(())
}

fn cooperative_launch_grid_barrier() -> TestResult {
    require_sm(9, 0)?;
    let ctx = Context::primary(Device::get(0)?)?;
    if !ctx.device().supports_cooperative_launch()? {
        return cuda_workspace::skip("the device does not support cooperative launches");
    }
    let module = Module::from_ptx(&ctx, PTX)?;
    let f = module.function("grid_barrier")?;
    let stream = Stream::non_blocking(&ctx)?;
    let grid = ctx.device().multiprocessor_count()?;
    let counter = u32_buffer(&ctx, 1)?;
    let out = u32_buffer(&ctx, grid as usize)?;
    let cfg = LaunchConfig::new(grid, 64)
        .stream(&stream)
        .cooperative(true)?;
    // SAFETY: `grid_barrier` increments `counter[0]` and writes out[0..grid]; one block
    // per SM is co-resident, which the cooperative launch checks.
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
    let module = Module::from_ptx(&ctx, PTX)?;
    let primary = module.function("pdl_primary")?;
    let secondary = module.function("pdl_secondary")?;
    let stream = Stream::non_blocking(&ctx)?;
    let n = 132 * 256u32;
    let data = u32_buffer(&ctx, n as usize)?;
    let mut out = u32_buffer(&ctx, n as usize)?;
    let first = LaunchConfig::new(132, 256).stream(&stream);
    let dependent = LaunchConfig::new(132, 256)
        .stream(&stream)
        .programmatic_stream_serialization()?;
    for round in 0..3 {
        // SAFETY: `pdl_primary` writes data[0..n]; `pdl_secondary` waits on it
        // (griddepcontrol.wait), reads data[0..n] and writes out[0..n].
        unsafe {
            launch(&primary, &first, &(data.as_arg(), n))?;
            launch(&secondary, &dependent, &(data.as_arg(), out.as_arg(), n))?;
        }
        stream.synchronize()?;
        let got = read_u32(&out)?;
        if let Some((i, v)) = got
            .iter()
            .enumerate()
            .find(|&(i, &v)| v != 2 * i as u32 + 2)
        {
            return Err(cuda_workspace::Outcome::Fail(format!(
                "round {round}: out[{i}] = {v}, expected {} (secondary read before the primary wrote?)",
                2 * i + 2
            )));
        }
        out.memset_d8(0)?;
    }
    Ok(())
}

fn programmatic_event_attribute_accepted() -> TestResult {
    require_sm(9, 0)?;
    let ctx = Context::primary(Device::get(0)?)?;
    let module = Module::from_ptx(&ctx, PTX)?;
    let primary = module.function("pdl_primary")?;
    let fill = module.function("fill")?;
    let a = Stream::non_blocking(&ctx)?;
    let b = Stream::non_blocking(&ctx)?;
    let n = 132 * 128u32;
    for trigger_at_block_start in [false, true] {
        let event = Event::new(&ctx, EventFlags::DISABLE_TIMING)?;
        let data = u32_buffer(&ctx, n as usize)?;
        let other = u32_buffer(&ctx, n as usize)?;
        let cfg = LaunchConfig::new(132, 128)
            .stream(&a)
            .programmatic_event(&event, trigger_at_block_start)?;
        // SAFETY: `pdl_primary` writes data[0..n].
        unsafe { launch(&primary, &cfg, &(data.as_arg(), n))? };
        b.wait_event(&event)?;
        let after = LaunchConfig::new(132, 128).stream(&b);
        // SAFETY: `fill` writes other[0..n]; it does not read `data`.
        unsafe { launch(&fill, &after, &(other.as_arg(), n))? };
        a.synchronize()?;
        b.synchronize()?;
        let d = read_u32(&data)?;
        let o = read_u32(&other)?;
        check(
            d.iter().enumerate().all(|(i, &v)| v == 2 * i as u32 + 1),
            || format!("trigger_at_block_start={trigger_at_block_start}: primary output wrong"),
        )?;
        check(
            o.iter().enumerate().all(|(i, &v)| v == 3 * i as u32 + 1),
            || format!("trigger_at_block_start={trigger_at_block_start}: dependent output wrong"),
        )?;
    }
    Ok(())
}

fn priority_attribute_accepted() -> TestResult {
    require_sm(9, 0)?;
    let ctx = Context::primary(Device::get(0)?)?;
    let module = Module::from_ptx(&ctx, PTX)?;
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
        let got = read_u32(&out)?;
        check(
            got.iter().enumerate().all(|(i, &v)| v == i as u32 * 3 + 1),
            || format!("priority {priority}: wrong values"),
        )?;
    }
    Ok(())
}
