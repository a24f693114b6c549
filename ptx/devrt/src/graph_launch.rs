//! Device graph launch (Programming Guide 4.2.6): kernels that launch device graphs
//! with `cudaGraphLaunch` and record `%globaltimer` stamps, so the tests can check the
//! ordering the guide states and the benchmark can time device launches.
//!
//! Records are [`RECORD_WORDS`] `u64`s: `[start, end, current_graph_exec, ran,
//! code_fire_and_forget, code_sibling, code_tail, 0]` (stamps in `%globaltimer` ns; `ran`
//! is 1 once the kernel has run; codes are `cudaError_t`, [`NOT_LAUNCHED`] when the
//! launch was not asked for).

use cudadrv::device::{
    DeviceGraphExec, GraphLaunchStream, block_idx, global_dim_x, global_idx_x, globaltimer,
    thread_idx,
};

/// `u64`s per record.
pub const RECORD_WORDS: usize = 8;
/// The code stored for a launch that was not asked for (its handle was 0).
pub const NOT_LAUNCHED: u64 = u64::MAX;

/// Whether this is thread 0 of block 0.
#[inline(always)]
fn first_thread() -> bool {
    thread_idx().x == 0 && block_idx().x == 0
}

/// Spins until `%globaltimer` has advanced `ns` from `from`; returns the time it read
/// last.
#[inline(always)]
fn busy_until(from: u64, ns: u64) -> u64 {
    let mut now = globaltimer();
    while now.wrapping_sub(from) < ns {
        now = globaltimer();
    }
    now
}

/// Launches `g` into `stream` unless it is 0; the `cudaError_t`, or [`NOT_LAUNCHED`].
///
/// # Safety
/// As `DeviceGraphExec::launch` when `g` is not 0.
#[inline(always)]
unsafe fn launch_if(g: u64, stream: GraphLaunchStream) -> u64 {
    if g == 0 {
        return NOT_LAUNCHED;
    }
    // SAFETY: forwarded to the caller.
    match unsafe { DeviceGraphExec(g).launch(stream) } {
        Ok(()) => 0,
        Err(e) => u64::from(e.0),
    }
}

/// Writes one record at `rec`.
///
/// # Safety
/// `rec` writable for [`RECORD_WORDS`] `u64`s.
#[inline(always)]
unsafe fn write_record(rec: *mut u64, words: [u64; RECORD_WORDS]) {
    for (i, w) in words.into_iter().enumerate() {
        // SAFETY: `i < RECORD_WORDS`; the caller provides that many words.
        unsafe { rec.add(i).write_volatile(w) };
    }
}

/// The kernel of the graphs the tests launch from the device: busy-waits `busy_ns` and
/// writes its record to `rec` (`current_graph_exec` is `cudaGetCurrentGraphExec()`,
/// 0 outside a device graph; no launch codes).
///
/// Launch: grid 1, block 1 (only thread 0 of block 0 acts).
///
/// # Safety
/// `rec` writable for [`RECORD_WORDS`] `u64`s.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn dg_record(rec: *mut u64, busy_ns: u64) {
    if !first_thread() {
        return;
    }
    let start = globaltimer();
    let end = busy_until(start, busy_ns);
    let current = DeviceGraphExec::current().map_or(0, |g| g.0);
    let n = NOT_LAUNCHED;
    // SAFETY: kernel contract.
    unsafe { write_record(rec, [start, end, current, 1, n, n, n, 0]) };
}

/// The launching kernel: stamps `start`, launches `fire_and_forget`, `sibling` and
/// `tail` (each one skipped when 0) into the streams of their names, busy-waits
/// `busy_ns`, then writes its record (with the three launch codes) to `rec`.
///
/// Launch: grid 1, block 1, as a node of a graph (device graphs can only be launched
/// from a kernel that runs in a graph). Module linked with `libcudadevrt.a`.
///
/// # Safety
/// `rec` writable for [`RECORD_WORDS`] `u64`s; each non-zero handle is an uploaded
/// device-launchable executable graph that outlives the launch and what it starts.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn dg_launch(
    rec: *mut u64,
    busy_ns: u64,
    fire_and_forget: u64,
    sibling: u64,
    tail: u64,
) {
    if !first_thread() {
        return;
    }
    let start = globaltimer();
    // SAFETY (all three): the handles' contract is the caller's.
    let ff = unsafe { launch_if(fire_and_forget, GraphLaunchStream::FireAndForget) };
    let sib = unsafe { launch_if(sibling, GraphLaunchStream::FireAndForgetAsSibling) };
    let tl = unsafe { launch_if(tail, GraphLaunchStream::TailLaunch) };
    let end = busy_until(start, busy_ns);
    let current = DeviceGraphExec::current().map_or(0, |g| g.0);
    // SAFETY: kernel contract.
    unsafe { write_record(rec, [start, end, current, 1, ff, sib, tl, 0]) };
}

/// The scheduler kernel of a self-relaunching device graph: run `k = *count` writes
/// record `k` of `recs` and increments `*count`; while `k + 1 < limit` it tail-launches
/// its own graph again (`cudaGetCurrentGraphExec`), so the graph runs `limit` times
/// (at least once) from one host launch. The record's `code_tail` is the relaunch's
/// code ([`NOT_LAUNCHED`] for the last run); its stamps are taken around the relaunch.
///
/// Launch: grid 1, block 1, as the kernel node of a graph instantiated for device
/// launch and uploaded. Module linked with `libcudadevrt.a`.
///
/// # Safety
/// `count` readable and writable, `recs` writable for `limit` records; the graph lives
/// until its relaunches have stopped.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn dg_tick(recs: *mut u64, count: *mut u32, limit: u32) {
    if !first_thread() {
        return;
    }
    let start = globaltimer();
    // SAFETY: only this thread of the one running instance touches `count`; the runs are
    // ordered (each is the tail launch of the previous one).
    let k = unsafe { count.read_volatile() };
    // SAFETY: as above.
    unsafe { count.write_volatile(k.wrapping_add(1)) };
    let code = if k.wrapping_add(1) < limit {
        // SAFETY: the graph is device-launchable and outlives its relaunches (caller).
        match unsafe { DeviceGraphExec::relaunch_current() } {
            Ok(()) => 0,
            Err(e) => u64::from(e.0),
        }
    } else {
        NOT_LAUNCHED
    };
    let current = DeviceGraphExec::current().map_or(0, |g| g.0);
    let end = globaltimer();
    if k < limit {
        let n = NOT_LAUNCHED;
        // SAFETY: `k < limit`: record `k` is inside `recs`.
        unsafe {
            write_record(
                recs.add(k as usize * RECORD_WORDS),
                [start, end, current, 1, n, n, code, 0],
            );
        }
    }
}

/// `data[i] += 1` for `i < n` (grid-stride): [`dg_chain_link`]'s work without the
/// relaunch, for chains of stream launches and captured graphs (a kernel that calls
/// `cudaGraphLaunch` cannot be launched into a stream: the driver refuses it).
///
/// Launch: any 1-D grid and block.
///
/// # Safety
/// `data` readable and writable for `n` `u32`s.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn dg_chain_plain(data: *mut u32, n: u32) {
    // SAFETY: forwarded to the caller.
    unsafe { add_one(data, n) };
}

/// `data[i] += 1` for `i < n`, grid-stride.
///
/// # Safety
/// `data` readable and writable for `n` `u32`s.
#[inline(always)]
unsafe fn add_one(data: *mut u32, n: u32) {
    let mut i = global_idx_x();
    while i < n {
        // SAFETY: `i < n`; one thread per index.
        unsafe {
            let p = data.add(i as usize);
            p.write(p.read().wrapping_add(1));
        }
        i += global_dim_x();
    }
}

/// One link of a self-relaunching chain: `data[i] += 1` for `i < n` (grid-stride), and
/// thread 0 of block 0 tail-launches the running graph again while `*remaining > 1`
/// (decrementing it), so a graph launched once from the host runs `*remaining` times
/// (at least once). With `*remaining <= 1` it runs once and leaves `*remaining` at 0.
/// A failed relaunch leaves its `cudaError_t` in `*remaining` with the high bit set.
///
/// Launch: any 1-D grid and block; the benchmark shape is grid 132, block 256. As the
/// kernel node of a device-launchable graph; the module linked with `libcudadevrt.a`.
///
/// # Safety
/// `data` readable and writable for `n` `u32`s; `remaining` readable and writable and
/// touched by no one else while the chain runs; the graph outlives its relaunches.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn dg_chain_link(data: *mut u32, n: u32, remaining: *mut u32) {
    // SAFETY: forwarded to the caller.
    unsafe { add_one(data, n) };
    if !first_thread() {
        return;
    }
    // SAFETY: only this thread touches `remaining` (kernel contract); runs are ordered.
    let r = unsafe { remaining.read_volatile() };
    let next = if r > 1 && r & 0x8000_0000 == 0 {
        // SAFETY: the graph is device-launchable and outlives its relaunches (caller).
        match unsafe { DeviceGraphExec::relaunch_current() } {
            Ok(()) => r - 1,
            Err(e) => 0x8000_0000 | e.0,
        }
    } else if r & 0x8000_0000 != 0 {
        r
    } else {
        0
    };
    // SAFETY: as above.
    unsafe { remaining.write_volatile(next) };
}
