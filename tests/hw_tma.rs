//! Hardware tests of asynchronous data copies (Programming Guide 4.9.6, 4.11): `cp.async`
//! (4/8/16 bytes, zero fill, commit/wait groups and the mbarrier-arrive form), bulk
//! copies tracked by mbarrier transaction counts in a multi-stage producer/consumer
//! ring, the bulk store path, bulk L2 prefetches, tensor copies through
//! `cuTensorMapEncodeTiled` maps
//! (out-of-bounds fill at every edge, a 2D transpose, a cluster multicast), im2col loads
//! through a `cuTensorMapEncodeIm2col` map (a 1-D convolution's columns), the two ways
//! a Rust kernel can be handed the map, and a wrong `expect_tx` count caught by a
//! bounded wait. Host-side tensor-map validation is compared with the driver's own
//! verdicts.

use cuda_workspace::{
    Outcome, TestResult, check, check_eq, hw_tests, ptx, require_sm, run_suite, skip,
};
use cudadrv::cuda_sys::{self, CUresult, CUtensorMap};
use cudadrv::launch::{LaunchConfig, launch};
use cudadrv::tensor_map::{Im2colDesc, Interleave, OobFill, Swizzle, TensorMap, TiledDesc};
use cudadrv::{Context, Device, DeviceBuffer, Error, Function, Module, Stream, StreamFlags};

fn main() {
    if let Ok(kernel) = std::env::var("HW_TMA_BY_VALUE") {
        // Child of `tensor_map_by_value_paths`: one launch in a process of its own.
        match by_value(&kernel) {
            Ok(()) => std::process::exit(0),
            Err(Outcome::Fail(why)) => {
                println!("{why}");
                std::process::exit(2)
            }
            Err(other) => {
                println!("{other:?}");
                std::process::exit(1)
            }
        }
    }
    run_suite(
        "hw_tma",
        hw_tests![
            cp_async_16_bytes_with_zero_fill,
            cp_async_4_8_16_bytes_with_mbarrier_arrive,
            cp_async_arrive_raises_the_pending_count,
            bulk_pipeline_streams_every_byte,
            bulk_store_writes_back_from_shared,
            bulk_prefetch_to_l2_leaves_the_data,
            tensor_map_rules_agree_with_the_driver,
            tensor_tile_out_of_bounds_fill,
            tensor_map_by_value_paths,
            tensor_2d_transpose,
            tensor_im2col_1d_convolution,
            tensor_multicast_to_a_cluster,
            wrong_expect_tx_is_caught_by_a_bounded_wait,
        ],
    );
}

struct Gpu {
    ctx: Context,
    stream: Stream,
    module: Module,
}

fn gpu() -> Result<Gpu, Outcome> {
    require_sm(9, 0)?;
    let ctx = Context::primary(Device::get(0)?)?;
    ctx.bind()?;
    let stream = Stream::new(&ctx, StreamFlags::NON_BLOCKING)?;
    let module = Module::from_ptx(&ctx, ptx::KERNELS)?;
    Ok(Gpu {
        ctx,
        stream,
        module,
    })
}

impl Gpu {
    fn f(&self, name: &str) -> Result<Function, Outcome> {
        Ok(self.module.function(name)?)
    }
}

fn host<T: cudadrv::memory::Pod + Default>(buf: &DeviceBuffer<T>) -> Result<Vec<T>, Outcome> {
    let mut v = vec![T::default(); buf.len()];
    buf.copy_to_host(&mut v)?;
    Ok(v)
}

/// The first index where `got` differs from `want(i)`, as a failure.
fn check_all(got: &[u32], want: impl Fn(usize) -> u32, what: &str) -> TestResult {
    if let Some((i, &g)) = got.iter().enumerate().find(|&(i, &g)| g != want(i)) {
        return Err(Outcome::Fail(format!(
            "{what}: element {i} is {g:#x}, expected {:#x}",
            want(i)
        )));
    }
    Ok(())
}

fn pattern(i: usize) -> u32 {
    (i as u32).wrapping_mul(2_654_435_761).wrapping_add(7)
}

fn cp_async_16_bytes_with_zero_fill() -> TestResult {
    let g = gpu()?;
    let f = g.f("acp_cp_async")?;
    // Not a multiple of the 512 elements a block moves: the last block zero-fills.
    let n = 5 * 512 + 300;
    let src: Vec<u32> = (0..n).map(pattern).collect();
    let src_d = DeviceBuffer::from_slice(&g.ctx, &src)?;
    let mut dst_h = vec![0xdead_beef_u32; n + 512];
    let dst = DeviceBuffer::from_slice(&g.ctx, &dst_h)?;
    let grid = (n as u32).div_ceil(512);
    // SAFETY: acp_cp_async(src, dst, n): src readable for n, dst writable for n u32s;
    // block of 128 threads.
    unsafe {
        launch(
            &f,
            &LaunchConfig::new(grid, 128).stream(&g.stream),
            &(src_d.as_arg(), dst.as_arg(), n as u32),
        )?;
    }
    g.stream.synchronize()?;
    dst.copy_to_host(&mut dst_h)?;
    check_all(&dst_h[..n], |i| pattern(i).wrapping_add(1), "dst = src + 1")?;
    check_all(&dst_h[n..], |_| 0xdead_beef, "past n (must stay untouched)")?;
    println!("    {n} elements through cp.async.cg 16-byte copies, tail zero-filled");
    Ok(())
}

/// Launches the one-block copy kernel `name(src, dst)` (block 32) on `n` pattern words
/// and checks `dst == src`.
fn one_block_copy(name: &str, n: usize, what: &str) -> TestResult {
    let g = gpu()?;
    let f = g.f(name)?;
    let src: Vec<u32> = (0..n).map(pattern).collect();
    let src_d = DeviceBuffer::from_slice(&g.ctx, &src)?;
    let dst = DeviceBuffer::<u32>::zeroed(&g.ctx, n)?;
    // SAFETY: the kernel (acp_cp_async_sizes: 224 words, acp_cp_async_arrive_inc: 128)
    // copies `n` u32s from `src` to `dst`, both holding `n`; one block of 32 threads.
    unsafe {
        launch(
            &f,
            &LaunchConfig::new(1, 32).stream(&g.stream),
            &(src_d.as_arg(), dst.as_arg()),
        )?;
    }
    g.stream.synchronize()?;
    check_all(&host(&dst)?, pattern, what)
}

fn cp_async_4_8_16_bytes_with_mbarrier_arrive() -> TestResult {
    one_block_copy("acp_cp_async_sizes", 224, "4/8/16-byte cp.async.ca copy")
}

fn cp_async_arrive_raises_the_pending_count() -> TestResult {
    if std::env::var("HW_SANITIZER_TOOL").is_ok_and(|t| t == "synccheck") {
        // synccheck counts `cp.async.mbarrier.arrive` (without `.noinc`) as an ordinary
        // arrival, so in its model the 32 of them complete the phase and each thread's
        // own `mbarrier.arrive` lands in the next phase unwaited ("Missing wait"). The
        // hardware raises the pending count instead (PTX ISA, cp.async.mbarrier.arrive),
        // which this test checks without the tool.
        return skip(
            "under synccheck: the tool models cp.async.mbarrier.arrive without .noinc as an \
             ordinary arrival (reports a false \"Missing wait\")",
        );
    }
    one_block_copy(
        "acp_cp_async_arrive_inc",
        128,
        "cp.async.mbarrier.arrive + mbarrier.arrive copy",
    )
}

/// Source of `n` pattern elements and a zeroed destination.
fn stream_bufs(g: &Gpu, n: usize) -> Result<(DeviceBuffer<u32>, DeviceBuffer<u32>), Outcome> {
    let src: Vec<u32> = (0..n).map(pattern).collect();
    Ok((
        DeviceBuffer::from_slice(&g.ctx, &src)?,
        DeviceBuffer::zeroed(&g.ctx, n)?,
    ))
}

/// `acp_bulk_pipeline` flags (see ptx/src/async_copy.rs).
const PIPE_BULK_STORE: u32 = 1;
const PIPE_LOAD_EVICT_FIRST: u32 = 2;
const PIPE_STORE_EVICT_FIRST: u32 = 4;
const PIPE_CONTIGUOUS: u32 = 8;

fn bulk_pipeline_streams_every_byte() -> TestResult {
    let g = gpu()?;
    let f = g.f("acp_bulk_pipeline")?;
    f.set_max_dynamic_shared_size_bytes(200 << 10)?;
    let n = 16 << 20; // 64 MiB
    let (src, mut dst) = stream_bufs(&g, n)?;
    let sms = g.ctx.device().multiprocessor_count()?;
    let hints = PIPE_LOAD_EVICT_FIRST | PIPE_STORE_EVICT_FIRST;
    let cases = [
        (2u32, 4096u32, 1u32, 1u32, 0u32),
        (2, 4096, 1, 1, PIPE_BULK_STORE),
        (3, 8192, 2, sms, PIPE_BULK_STORE),
        (4, 16384, 4, sms, 0),
        (4, 16384, 4, sms, PIPE_BULK_STORE | hints),
        (8, 16384, 4, 2 * sms, hints),
        (8, 16384, 4, 2 * sms, hints | PIPE_CONTIGUOUS),
        (3, 8192, 2, 7, PIPE_BULK_STORE | PIPE_CONTIGUOUS),
        (6, 32768, 7, sms, 0),
    ];
    for (stages, tile, consumers, grid, flags) in cases {
        let smem = stages * tile + 16 * stages + 128;
        let n_tiles = (n * 4) as u64 / u64::from(tile);
        // SAFETY: acp_bulk_pipeline(src, dst, n_tiles, tile_bytes, stages, flags): both
        // buffers hold n_tiles * tile bytes; block of 1 + consumers warps; dynamic shared
        // memory stages * tile + 16 * stages + 128.
        unsafe {
            launch(
                &f,
                &LaunchConfig::new(grid, 32 * (1 + consumers))
                    .shared_mem(smem)
                    .stream(&g.stream),
                &(src.as_arg(), dst.as_arg(), n_tiles, tile, stages, flags),
            )?;
        }
        g.stream.synchronize()?;
        check_all(
            &host(&dst)?,
            |i| pattern(i).wrapping_mul(3).wrapping_add(1),
            &format!(
                "{stages} stages x {tile} B, {consumers} consumer warps, grid {grid}, flags {flags}"
            ),
        )?;
        dst.memset_d8(0)?;
    }
    // A bulk-store launch whose tile does not split into 16-byte slices per consumer warp
    // (4096 / 3) is refused by the kernel: nothing is written.
    let n_tiles = (n * 4) as u64 / 4096;
    // SAFETY: as above, with 3 consumer warps and 2 stages of 4096 bytes.
    unsafe {
        launch(
            &f,
            &LaunchConfig::new(sms, 32 * 4)
                .shared_mem(2 * 4096 + 32 + 128)
                .stream(&g.stream),
            &(
                src.as_arg(),
                dst.as_arg(),
                n_tiles,
                4096u32,
                2u32,
                PIPE_BULK_STORE,
            ),
        )?;
    }
    g.stream.synchronize()?;
    check_all(&host(&dst)?, |_| 0, "refused bulk-store launch")?;
    println!(
        "    64 MiB streamed exactly in {} ring shapes (2..8 stages, 4..32 KiB tiles, stores \
         from registers and bulk stores, with and without evict-first hints, strided and \
         contiguous tile runs); a bulk-store tile that does not split per warp is refused",
        cases.len()
    );
    Ok(())
}

fn bulk_store_writes_back_from_shared() -> TestResult {
    let g = gpu()?;
    let f = g.f("acp_bulk_store")?;
    let n = 1 << 20;
    let (src, dst) = stream_bufs(&g, n)?;
    let tile = 8192u32;
    let n_tiles = (n * 4) as u64 / u64::from(tile);
    f.set_max_dynamic_shared_size_bytes(tile + 256)?;
    // SAFETY: acp_bulk_store(src, dst, n_tiles, tile_bytes): both buffers hold
    // n_tiles * tile bytes; block 128; dynamic shared memory tile + 256.
    unsafe {
        launch(
            &f,
            &LaunchConfig::new(64, 128)
                .shared_mem(tile + 256)
                .stream(&g.stream),
            &(src.as_arg(), dst.as_arg(), n_tiles, tile),
        )?;
    }
    g.stream.synchronize()?;
    check_all(
        &host(&dst)?,
        |i| pattern(i).wrapping_mul(3).wrapping_add(1),
        "bulk store",
    )
}

/// `bulk_prefetch_l2` (`cp.async.bulk.prefetch.L2`): a request a block over 16 MiB
/// plus 5 words (the last block's part not a whole number of 16-byte pieces), and one
/// of the largest size, run without a fault, and the words read after them are the
/// buffer's. The decode example's output projection relies on this helper.
fn bulk_prefetch_to_l2_leaves_the_data() -> TestResult {
    let g = gpu()?;
    let f = g.f("acp_prefetch_l2")?;
    let n = (1usize << 22) + 5;
    let (src, dst) = stream_bufs(&g, n)?;
    // `PREFETCH_BLOCK_WORDS` of ptx/src/async_copy.rs: the words a block covers.
    let grid = (n as u32).div_ceil(8192);
    // SAFETY: acp_prefetch_l2(src, dst, n): `src` readable and `dst` writable for `n`
    // u32s, `src` from cuMemAlloc (256-byte aligned); any 1-D block.
    unsafe {
        launch(
            &f,
            &LaunchConfig::new(grid, 256).stream(&g.stream),
            &(src.as_arg(), dst.as_arg(), n as u32),
        )?;
    }
    g.stream.synchronize()?;
    check_all(
        &host(&dst)?,
        |i| pattern(i).wrapping_add(1),
        "after the L2 requests",
    )?;
    println!(
        "    {grid} requests of 32 KiB and one of 1 MiB - 16 B over {n} words; every word read back"
    );
    Ok(())
}

/// `cuTensorMapEncodeTiled` called directly, without the crate's checks.
fn raw_encode(d: &TiledDescRaw, addr: u64) -> Result<CUresult, Outcome> {
    let cu = cuda_sys::driver()?;
    let mut map = CUtensorMap { opaque: [0; 16] };
    // SAFETY: arrays of `rank` entries (strides rank - 1); valid out-pointer.
    Ok(unsafe {
        (cu.cuTensorMapEncodeTiled()?)(
            &mut map,
            d.ty,
            d.dims.len() as u32,
            addr as *mut _,
            d.dims.as_ptr(),
            d.strides.as_ptr(),
            d.boxes.as_ptr(),
            d.estr.as_ptr(),
            d.il,
            d.sw,
            cuda_sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_NONE,
            d.oob,
        )
    })
}

struct TiledDescRaw {
    ty: cuda_sys::CUtensorMapDataType,
    dims: Vec<u64>,
    strides: Vec<u64>,
    boxes: Vec<u32>,
    estr: Vec<u32>,
    il: cuda_sys::CUtensorMapInterleave,
    sw: cuda_sys::CUtensorMapSwizzle,
    oob: cuda_sys::CUtensorMapFloatOOBfill,
}

fn tensor_map_rules_agree_with_the_driver() -> TestResult {
    use cuda_sys::{
        CUtensorMapDataType as T, CUtensorMapFloatOOBfill as F, CUtensorMapInterleave as I,
        CUtensorMapSwizzle as S,
    };
    let g = gpu()?;
    let buf = DeviceBuffer::<u32>::zeroed(&g.ctx, 1 << 20)?;
    let base = buf.as_raw();
    // (case, raw parameters, our description, address offset)
    let ok = || TiledDescRaw {
        ty: T::CU_TENSOR_MAP_DATA_TYPE_UINT32,
        dims: vec![256, 256],
        strides: vec![1024],
        boxes: vec![32, 32],
        estr: vec![1, 1],
        il: I::CU_TENSOR_MAP_INTERLEAVE_NONE,
        sw: S::CU_TENSOR_MAP_SWIZZLE_NONE,
        oob: F::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
    };
    let ours = |r: &TiledDescRaw| -> Result<TiledDesc, Error> {
        let mut d = TiledDesc::new::<u32>(&r.dims, &r.boxes)?
            .strides(&r.strides)?
            .element_strides(&r.estr)?;
        d = d.interleave(match r.il {
            I::CU_TENSOR_MAP_INTERLEAVE_16B => Interleave::B16,
            I::CU_TENSOR_MAP_INTERLEAVE_32B => Interleave::B32,
            _ => Interleave::None,
        });
        d = d.swizzle(match r.sw {
            S::CU_TENSOR_MAP_SWIZZLE_32B => Swizzle::B32,
            S::CU_TENSOR_MAP_SWIZZLE_64B => Swizzle::B64,
            S::CU_TENSOR_MAP_SWIZZLE_128B => Swizzle::B128,
            _ => Swizzle::None,
        });
        if r.oob == F::CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA {
            d = d.oob_fill(OobFill::NanRequestZeroFma);
        }
        Ok(d)
    };
    let mut cases: Vec<(&str, TiledDescRaw, u64)> = Vec::new();
    cases.push(("valid 2D", ok(), 0));
    cases.push((
        "valid swizzle 128B with 128-byte rows",
        {
            let mut r = ok();
            r.sw = S::CU_TENSOR_MAP_SWIZZLE_128B;
            r
        },
        0,
    ));
    cases.push(("address 8 bytes off", ok(), 8));
    cases.push((
        "box extent 300",
        {
            let mut r = ok();
            r.boxes = vec![32, 300];
            r
        },
        0,
    ));
    cases.push((
        "stride not a multiple of 16",
        {
            let mut r = ok();
            r.strides = vec![1032];
            r.dims = vec![256, 255];
            r
        },
        0,
    ));
    cases.push((
        "inner box of 12 bytes",
        {
            let mut r = ok();
            r.boxes = vec![3, 32];
            r
        },
        0,
    ));
    cases.push((
        "element stride 9",
        {
            let mut r = ok();
            r.estr = vec![1, 9];
            r
        },
        0,
    ));
    cases.push((
        "swizzle 64B under a 128-byte inner box",
        {
            let mut r = ok();
            r.sw = S::CU_TENSOR_MAP_SWIZZLE_64B;
            r
        },
        0,
    ));
    cases.push((
        "interleave with rank 2",
        {
            let mut r = ok();
            r.il = I::CU_TENSOR_MAP_INTERLEAVE_16B;
            r
        },
        0,
    ));
    cases.push((
        "NaN fill of an integer type",
        {
            let mut r = ok();
            r.oob = F::CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA;
            r
        },
        0,
    ));
    cases.push((
        "zero dimension",
        {
            let mut r = ok();
            r.dims = vec![256, 0];
            r
        },
        0,
    ));
    let mut disagree = Vec::new();
    for (name, raw, off) in &cases {
        let driver = raw_encode(raw, base + off)?;
        let driver_ok = driver == CUresult::CUDA_SUCCESS;
        let mine = ours(raw).and_then(|d| d.validate(base + off));
        println!(
            "    {name:<40} driver: {driver:?}; ours: {}",
            match &mine {
                Ok(()) => "ok".to_string(),
                Err(e) => e.to_string(),
            }
        );
        if driver_ok != mine.is_ok() {
            disagree.push(*name);
        }
    }
    check(disagree.is_empty(), || {
        format!("validation disagrees with the driver on {disagree:?}")
    })?;
    // Through the crate: the checks run first and name the rule.
    let bad = TiledDesc::new::<u32>(&[256, 256], &[32, 300])?;
    match TensorMap::tiled(&bad, &buf) {
        Err(Error::TensorMap { dim: Some(1), .. }) => {}
        other => return Err(Outcome::Fail(format!("box 300 gave {other:?}"))),
    }
    let big = TiledDesc::new::<u32>(&[1024, 1025], &[32, 32])?;
    check(TensorMap::tiled(&big, &buf).is_err(), || {
        "a tensor larger than its buffer was encoded".into()
    })?;
    Ok(())
}

const W: usize = 100;
const H: usize = 70;

/// A `H x W` row-major image with `img[y][x] = y * 1000 + x + 1` (never 0), its rows
/// padded to 112 elements (448 bytes, a multiple of 16).
const PITCH: usize = 112;

fn image(g: &Gpu) -> Result<DeviceBuffer<u32>, Outcome> {
    let mut v = vec![0u32; H * PITCH];
    for y in 0..H {
        for x in 0..W {
            v[y * PITCH + x] = (y * 1000 + x + 1) as u32;
        }
    }
    Ok(DeviceBuffer::from_slice(&g.ctx, &v)?)
}

fn image_desc() -> Result<TiledDesc, Outcome> {
    Ok(TiledDesc::new::<u32>(&[W as u64, H as u64], &[32, 32])?.strides(&[(PITCH * 4) as u64])?)
}

/// What a 32 x 32 box at (x0, y0) must hold: the image inside, zero outside.
fn expected_tile(x0: i32, y0: i32) -> Vec<u32> {
    let mut t = vec![0u32; 1024];
    for r in 0..32 {
        for c in 0..32 {
            let (x, y) = (x0 + c, y0 + r);
            if (0..W as i32).contains(&x) && (0..H as i32).contains(&y) {
                t[(r * 32 + c) as usize] = (y * 1000 + x + 1) as u32;
            }
        }
    }
    t
}

const CORNERS: [(i32, i32); 7] = [
    (0, 0),
    (40, 20),
    (80, 50),   // right and bottom edges cut the box
    (-16, -8),  // negative coordinates: top-left partly outside
    (96, 66),   // only a 4 x 4 corner inside
    (200, 0),   // entirely outside
    (-32, -32), // entirely outside, negative
];

fn tensor_tile_out_of_bounds_fill() -> TestResult {
    let g = gpu()?;
    let f = g.f("acp_tma_2d_load_tile")?;
    let img = image(&g)?;
    let map = TensorMap::tiled(&image_desc()?, &img)?;
    let global = map.upload(&g.ctx)?;
    let mut out = DeviceBuffer::<u32>::zeroed(&g.ctx, 1024)?;
    for (x, y) in CORNERS {
        out.memset_d32(0xdead_beef)?;
        // SAFETY: acp_tma_2d_load_tile(tmap, x, y, out): tmap the global address of an
        // encoded map whose memory (`img`) outlives the launch; out holds 1024 u32s;
        // block 128.
        unsafe {
            launch(
                &f,
                &LaunchConfig::new(1, 128).stream(&g.stream),
                &(global.as_ptr(), x, y, out.as_arg()),
            )?;
        }
        g.stream.synchronize()?;
        let want = expected_tile(x, y);
        check_all(&host(&out)?, |i| want[i], &format!("box at ({x}, {y})"))?;
    }
    println!("    7 boxes (inside, cut by each edge, negative, outside) exact, zero fill outside");
    Ok(())
}

/// A map passed by value, its address taken in the kernel: through `&tmap` (rustc
/// copies the parameter to local memory) and through the parameter symbol
/// (`kernel_param_ptr!`, as nvcc does for `__grid_constant__`). Each launch runs in a
/// child process, since a fault poisons the context. A path must either read the box
/// exactly or fail with a CUDA error: never wrong data, never a hang.
fn tensor_map_by_value_paths() -> TestResult {
    require_sm(9, 0)?;
    let mut worked = Vec::new();
    for kernel in [
        "acp_tma_2d_load_tile_param_sym",
        "acp_tma_2d_load_tile_param",
    ] {
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let mut child = std::process::Command::new(exe)
            .env("HW_TMA_BY_VALUE", kernel)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .map_err(|e| e.to_string())?;
        let start = std::time::Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().map_err(|e| e.to_string())? {
                break s;
            }
            if start.elapsed() > std::time::Duration::from_secs(60) {
                let _ = child.kill();
                return Err(Outcome::Fail(format!("{kernel}: hung (killed after 60 s)")));
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        let mut out = String::new();
        if let Some(mut o) = child.stdout.take() {
            use std::io::Read as _;
            let _ = o.read_to_string(&mut out);
        }
        let last = out.lines().last().unwrap_or_default();
        match status.code() {
            Some(0) => {
                println!("    {kernel}: box read exactly");
                worked.push(kernel);
            }
            Some(2) if last.contains("CUDA_ERROR") => {
                println!("    {kernel}: refused by the GPU: {last}");
            }
            _ => {
                return Err(Outcome::Fail(format!(
                    "{kernel}: {status}, wrong data or no CUDA error: {out}"
                )));
            }
        }
    }
    println!("    by-value paths that work from Rust: {worked:?} (the uploaded copy always works)");
    Ok(())
}

fn by_value(kernel: &str) -> TestResult {
    let g = gpu()?;
    let f = g.f(kernel)?;
    let (offset, size) = f.param_info(0)?;
    println!("    parameter 0 of {kernel}: offset {offset}, {size} bytes");
    check_eq(size, 128, "size of the by-value tensor map parameter")?;
    let img = image(&g)?;
    let map = TensorMap::tiled(&image_desc()?, &img)?;
    let mut out = DeviceBuffer::<u32>::zeroed(&g.ctx, 1024)?;
    for (x, y) in [(0, 0), (80, 50), (-16, -8)] {
        out.memset_d32(0xdead_beef)?;
        // SAFETY: acp_tma_2d_load_tile_param(tmap, x, y, out): the map by value (its
        // memory outlives the launch); out holds 1024 u32s; block 128.
        unsafe {
            launch(
                &f,
                &LaunchConfig::new(1, 128).stream(&g.stream),
                &(map, x, y, out.as_arg()),
            )?;
        }
        g.stream.synchronize()?;
        let want = expected_tile(x, y);
        check_all(
            &host(&out)?,
            |i| want[i],
            &format!("box at ({x}, {y}) through the parameter's address"),
        )?;
    }
    println!("    {kernel}: a map passed by value works");
    Ok(())
}

fn tensor_2d_transpose() -> TestResult {
    let g = gpu()?;
    let f = g.f("acp_tma_2d_transpose")?;
    let img = image(&g)?;
    // Output: W rows of H elements, rows padded to 80 elements (320 bytes).
    const OPITCH: usize = 80;
    let out = DeviceBuffer::<u32>::zeroed(&g.ctx, W * OPITCH)?;
    let in_map = TensorMap::tiled(&image_desc()?, &img)?;
    let out_desc =
        TiledDesc::new::<u32>(&[H as u64, W as u64], &[32, 32])?.strides(&[(OPITCH * 4) as u64])?;
    let out_map = TensorMap::tiled(&out_desc, &out)?;
    let (gin, gout) = (in_map.upload(&g.ctx)?, out_map.upload(&g.ctx)?);
    let grid = ((W as u32).div_ceil(32), (H as u32).div_ceil(32));
    // SAFETY: acp_tma_2d_transpose(tmap_in, tmap_out): global addresses of two encoded
    // maps whose memory outlives the launch; grid (ceil(W/32), ceil(H/32)), block 256.
    unsafe {
        launch(
            &f,
            &LaunchConfig::new(grid, 256).stream(&g.stream),
            &(gin.as_ptr(), gout.as_ptr()),
        )?;
    }
    g.stream.synchronize()?;
    let got = host(&out)?;
    for x in 0..W {
        for y in 0..OPITCH {
            let want = if y < H { (y * 1000 + x + 1) as u32 } else { 0 };
            let v = got[x * OPITCH + y];
            check(v == want, || {
                format!("out[{x}][{y}] = {v}, expected {want} (the store must clip at H)")
            })?;
        }
    }
    println!("    {H} x {W} transposed through 32 x 32 tensor tiles; stores clipped at the edges");
    Ok(())
}

/// im2col through TMA: a 1-D convolution's input (NWC: 3 images of 8 pixels of 4 `u32`
/// channels) read with padding 1 and 3 kernel taps, checked against a host im2col.
fn tensor_im2col_1d_convolution() -> TestResult {
    const C: usize = 4;
    const W: i32 = 8;
    const N: i32 = 3;
    const PIXELS: usize = 16;
    const TAPS: u32 = 3;
    // Padding 1, kernel 3: the box holds the first tap of every output pixel.
    const LOWER: i32 = -1;
    const UPPER: i32 = 1 - (TAPS as i32 - 1);
    let g = gpu()?;
    let f = g.f("acp_tma_im2col_1d")?;
    let input: Vec<u32> = (0..C * (W * N) as usize).map(pattern).collect();
    let buf = DeviceBuffer::from_slice(&g.ctx, &input)?;
    let desc = Im2colDesc::new::<u32>(
        &[C as u64, W as u64, N as u64],
        &[LOWER],
        &[UPPER],
        C as u32,
        PIXELS as u32,
    )?;
    check_eq(
        desc.box_bytes(),
        (PIXELS * C * 4) as u64,
        "im2col load bytes",
    )?;
    let map = TensorMap::im2col(&desc, &buf)?;
    let gmap = map.upload(&g.ctx)?;
    let box_w = W - 1 + UPPER - LOWER + 1;
    // (start pixel w, start image n): the first output pixel; one in the middle of the
    // box, so that the column wraps into the next image twice.
    for (start_w, start_n) in [(LOWER, 0), (3, 0)] {
        let out = DeviceBuffer::<u32>::zeroed(&g.ctx, TAPS as usize * PIXELS * C)?;
        // SAFETY: acp_tma_im2col_1d(tmap, start_w, start_n, taps, out): an encoded im2col
        // map of `buf` (alive for the launch) in global memory; `out` holds taps * 64.
        unsafe {
            launch(
                &f,
                &LaunchConfig::new(1, 64).stream(&g.stream),
                &(gmap.as_ptr(), start_w, start_n, TAPS, out.as_arg()),
            )?;
        }
        g.stream.synchronize()?;
        let got = host(&out)?;
        for k in 0..TAPS as i32 {
            for p in 0..PIXELS as i32 {
                let idx = start_w - LOWER + p;
                let n = start_n + idx / box_w;
                let w = LOWER + idx % box_w + k;
                for c in 0..C {
                    let want = if (0..W).contains(&w) && n < N {
                        input[((n * W + w) as usize) * C + c]
                    } else {
                        0
                    };
                    let v = got[(k as usize * PIXELS + p as usize) * C + c];
                    check(v == want, || {
                        format!(
                            "start ({start_w}, {start_n}), tap {k}, pixel {p} (image {n}, w {w}), \
                             channel {c}: {v:#x}, expected {want:#x}"
                        )
                    })?;
                }
            }
        }
    }
    println!(
        "    im2col of 3 x 8 pixels x 4 channels, padding 1, 3 taps: 2 columns of 16 pixels \
         exact (zero padding at both ends, wrapping into the next image)"
    );
    Ok(())
}

fn tensor_multicast_to_a_cluster() -> TestResult {
    let g = gpu()?;
    let f = g.f("acp_tma_multicast")?;
    let img = image(&g)?;
    let map = TensorMap::tiled(
        &TiledDesc::new::<u32>(&[W as u64, H as u64], &[32, 16])?.strides(&[(PITCH * 4) as u64])?,
        &img,
    )?;
    let global = map.upload(&g.ctx)?;
    let out = DeviceBuffer::<u32>::zeroed(&g.ctx, 2048)?;
    // SAFETY: acp_tma_multicast(tmap, out): a map of 32 x 16 boxes over `img`; out holds
    // 2 x 1024 u32s; cluster of 2 CTAs of 128 threads.
    unsafe {
        launch(
            &f,
            &LaunchConfig::new(2, 128)
                .cluster_dim((2, 1, 1))?
                .stream(&g.stream),
            &(global.as_ptr(), out.as_arg()),
        )?;
    }
    g.stream.synchronize()?;
    let got = host(&out)?;
    let want = expected_tile(0, 0);
    for rank in 0..2 {
        check_all(
            &got[rank * 1024..(rank + 1) * 1024],
            |i| want[i],
            &format!("CTA {rank} of the cluster (each loaded half, both got all)"),
        )?;
    }
    println!("    each CTA loaded 16 rows multicast to both; both hold the full 32 x 32 tile");
    Ok(())
}

fn wrong_expect_tx_is_caught_by_a_bounded_wait() -> TestResult {
    let g = gpu()?;
    let f = g.f("acp_expect_tx_wrong")?;
    let (src, dst) = stream_bufs(&g, 1024)?;
    let status = DeviceBuffer::<u32>::from_slice(&g.ctx, &[7])?;
    let timeout_ns: u64 = 20_000_000;
    // SAFETY: acp_expect_tx_wrong(src, dst, timeout_ns, status): src/dst of 1024 u32s,
    // status one u32; block 32.
    unsafe {
        launch(
            &f,
            &LaunchConfig::new(1, 32).stream(&g.stream),
            &(src.as_arg(), dst.as_arg(), timeout_ns, status.as_arg()),
        )?;
    }
    g.stream.synchronize()?;
    check_eq(
        host(&status)?[0],
        1,
        "status (1: the phase never completed, timed out)",
    )?;
    // The context is still usable afterwards.
    let again = DeviceBuffer::<u32>::from_slice(&g.ctx, &[1, 2, 3])?;
    check_eq(host(&again)?, vec![1, 2, 3], "a copy after the timeout")?;
    println!("    expect_tx of twice the copied bytes: the wait timed out after 20 ms");
    Ok(())
}
