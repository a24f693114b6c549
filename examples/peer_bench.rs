//! Peer copy bandwidth between two GPUs (Programming Guide 4.3.3), cudadrv against a
//! CUDA C++ reference run in the same process, round by round alternately.
//!
//! Directions (each timed with events on the stream that issues the copies, the source
//! device's):
//! - `0->1`: `DeviceBuffer::copy_from_peer_async` from device 0 to device 1;
//! - `1->0`: the other way;
//! - `both`: the two at once on the two devices' streams (both directions' bytes
//!   counted), from an event on device 0's stream that device 1's stream waits for, to
//!   an event on device 0's stream after device 1's stream is done.
//!
//! The C++ side (xtask/cpp/peer_ref.cu, built with
//! `nvcc -O3 -std=c++17 -arch=sm_90 -shared -Xcompiler -fPIC peer_ref.cu -o peer_ref.so`)
//! makes the same copies with `cudaMemcpyPeerAsync` in the same primary contexts. Peer
//! access is enabled both ways (by both sides; the second enable is a no-op).
//!
//! The reference figure is the NVLink bandwidth NVML reports: active links of device 0
//! (`nvmlDeviceGetNvLinkState`, links 0..17) times the per-link, per-direction rate of
//! their version (`nvmlDeviceGetNvLinkVersion`, an `nvmlNvlinkVersion_t`): NVLink 1.0
//! 20 GB/s; 2.0, 2.2, 3.0, 3.1 and 4.0 25 GB/s; 5.0 50 GB/s. `both` is compared with
//! twice that. Without NVML (or NVLink) it prints "unknown".
//!
//! Usage: `peer_bench [--cpp peer_ref.so] [--sizes 64,256,1024] (MiB) [--rounds N]
//! [--csv FILE]`. With fewer than two GPUs it says so and exits 0. Each row: median,
//! min and max GB/s (1e9 bytes/s) over the rounds.

mod common;

use std::ffi::{CStr, CString, c_char, c_int, c_uint, c_void};
use std::fmt::Write as _;

use common::{R, stats};
use cudadrv::{Context, Device, DeviceBuffer, Event, EventFlags, Stream};

const DIRS: [&str; 3] = ["0->1", "1->0", "both"];

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opt = |name: &str| common::arg_value(&args, name);
    let rounds: usize = opt("--rounds").and_then(|r| r.parse().ok()).unwrap_or(10);
    let sizes: Vec<usize> = opt("--sizes")
        .map(|s| s.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![64, 256, 1024]);
    let count = match Device::count() {
        Ok(0) => common::exit_no_gpu("peer_bench", "the driver reports no device"),
        Ok(n) => n,
        Err(e) => common::exit_no_gpu("peer_bench", e),
    };
    if count < 2 {
        println!("peer_bench: needs 2 GPUs (found {count}); nothing was measured.");
        return;
    }
    if let Err(e) = run(&sizes, rounds.max(1), opt("--cpp"), opt("--csv")) {
        eprintln!("peer_bench: error: {e}");
        std::process::exit(1);
    }
}

/// `peer_ref_setup(max_bytes)`: 0 or a cudaError_t.
type CppSetup = unsafe extern "C" fn(usize) -> c_int;
/// `peer_ref_gbps(dir, bytes, reps)`: GB/s, negative on error.
type CppGbps = unsafe extern "C" fn(c_int, usize, c_int) -> f64;
/// `peer_ref_teardown()`.
type CppTeardown = unsafe extern "C" fn();

/// The C++ reference library and its entry points.
struct CppRef {
    gbps: CppGbps,
    teardown: CppTeardown,
    /// Kept loaded while the pointers above are used.
    _library: cudadrv_sys::Library,
}

impl CppRef {
    fn open(path: &str, max_bytes: usize) -> R<Self> {
        let c_path = CString::new(path)?;
        // SAFETY: the benchmark's own reference library (xtask/cpp/peer_ref.cu), named on
        // the command line for this; its initialisers are the statically linked CUDA
        // runtime's and plain C++ static initialisation of its own globals. It is kept
        // beside the pointers read from it.
        let library = unsafe { cudadrv_sys::Library::open(&c_path) }
            .map_err(|e| format!("{path}: {}", e.0))?;
        let sym = |name: &CStr| {
            let p = library.symbol(name);
            if p.is_null() {
                Err(format!("{path} has no {}", name.to_string_lossy()))
            } else {
                Ok(p)
            }
        };
        // SAFETY: each symbol is the `extern "C"` function of that name in peer_ref.cu,
        // whose signature the type alias spells out.
        let (setup, gbps, teardown) = unsafe {
            (
                core::mem::transmute::<*mut c_void, CppSetup>(sym(c"peer_ref_setup")?),
                core::mem::transmute::<*mut c_void, CppGbps>(sym(c"peer_ref_gbps")?),
                core::mem::transmute::<*mut c_void, CppTeardown>(sym(c"peer_ref_teardown")?),
            )
        };
        // SAFETY: a plain size; the library allocates its own buffers.
        let rc = unsafe { setup(max_bytes) };
        if rc != 0 {
            return Err(format!("peer_ref_setup failed: cudaError {rc}").into());
        }
        Ok(Self {
            gbps,
            teardown,
            _library: library,
        })
    }

    fn measure(&self, dir: usize, bytes: usize, reps: usize) -> R<f64> {
        // SAFETY: plain values; the library was set up with at least `bytes`.
        let v = unsafe { (self.gbps)(dir as c_int, bytes, reps as c_int) };
        if v < 0.0 {
            return Err(format!("peer_ref_gbps({dir}, {bytes}) failed ({v})").into());
        }
        Ok(v)
    }
}

impl Drop for CppRef {
    fn drop(&mut self) {
        // SAFETY: frees what setup made; nothing of it is used afterwards.
        unsafe { (self.teardown)() };
    }
}

/// The Rust side's buffers, streams and events for one size.
struct RustSide {
    a0: DeviceBuffer<u8>,
    b0: DeviceBuffer<u8>,
    a1: DeviceBuffer<u8>,
    b1: DeviceBuffer<u8>,
    s0: Stream,
    s1: Stream,
    start0: Event,
    end0: Event,
    start1: Event,
    end1: Event,
}

impl RustSide {
    fn new(c0: &Context, c1: &Context, bytes: usize) -> R<Self> {
        let mut a0 = DeviceBuffer::new(c0, bytes)?;
        a0.memset_d8(1)?;
        let mut b1 = DeviceBuffer::new(c1, bytes)?;
        b1.memset_d8(2)?;
        Ok(Self {
            a0,
            b0: DeviceBuffer::new(c0, bytes)?,
            a1: DeviceBuffer::new(c1, bytes)?,
            b1,
            s0: Stream::non_blocking(c0)?,
            s1: Stream::non_blocking(c1)?,
            start0: Event::new(c0, EventFlags::empty())?,
            end0: Event::new(c0, EventFlags::empty())?,
            start1: Event::new(c1, EventFlags::empty())?,
            end1: Event::new(c1, EventFlags::empty())?,
        })
    }

    /// GB/s of `reps` copies in direction `dir`, as peer_ref_gbps measures them.
    fn measure(&mut self, dir: usize, reps: usize) -> R<f64> {
        let bytes = self.a0.size_bytes() as f64;
        let ms = match dir {
            0 => {
                self.start0.record(&self.s0)?;
                for _ in 0..reps {
                    // SAFETY: both buffers live in `self`, past the event synchronization.
                    unsafe { self.a1.copy_from_peer_async(&self.a0, &self.s0)? };
                }
                self.end0.record(&self.s0)?;
                self.end0.synchronize()?;
                Event::elapsed_ms(&self.start0, &self.end0)?
            }
            1 => {
                self.start1.record(&self.s1)?;
                for _ in 0..reps {
                    // SAFETY: as above.
                    unsafe { self.b0.copy_from_peer_async(&self.b1, &self.s1)? };
                }
                self.end1.record(&self.s1)?;
                self.end1.synchronize()?;
                Event::elapsed_ms(&self.start1, &self.end1)?
            }
            _ => {
                self.start0.record(&self.s0)?;
                self.s1.wait_event(&self.start0)?;
                for _ in 0..reps {
                    // SAFETY: as above; the two copies touch different buffers.
                    unsafe {
                        self.a1.copy_from_peer_async(&self.a0, &self.s0)?;
                        self.b0.copy_from_peer_async(&self.b1, &self.s1)?;
                    }
                }
                self.end1.record(&self.s1)?;
                self.s0.wait_event(&self.end1)?;
                self.end0.record(&self.s0)?;
                self.end0.synchronize()?;
                Event::elapsed_ms(&self.start0, &self.end0)?
            }
        };
        let moved = bytes * reps as f64 * if dir == 2 { 2.0 } else { 1.0 };
        Ok(moved / (f64::from(ms) * 1e-3) / 1e9)
    }
}

fn run(sizes_mib: &[usize], rounds: usize, cpp: Option<String>, csv: Option<String>) -> R {
    let (d0, d1) = (Device::get(0)?, Device::get(1)?);
    let (c0, c1) = (Context::primary(d0)?, Context::primary(d1)?);
    let peer01 = d0.can_access_peer(d1)?;
    let peer10 = d1.can_access_peer(d0)?;
    if peer01 {
        c0.enable_peer_access(&c1)?;
    }
    if peer10 {
        c1.enable_peer_access(&c0)?;
    }
    println!(
        "peer_bench: {} <-> {}, peer access 0->1 {peer01}, 1->0 {peer10}, link {:?}",
        d0.name()?,
        d1.name()?,
        d0.p2p_attributes(d1)?
    );
    let nvlink = nvlink_gbps(d0);
    match &nvlink {
        Ok((links, version, gbps)) => println!(
            "NVLink (NVML, device 0): {links} active links, {version}, {gbps:.0} GB/s per \
             direction"
        ),
        Err(why) => println!("NVLink figure: unknown ({why})"),
    }
    let max_bytes = sizes_mib.iter().max().copied().unwrap_or(0) << 20;
    let cpp = match cpp {
        Some(path) => Some(CppRef::open(&path, max_bytes)?),
        None => {
            println!("(no --cpp peer_ref.so: cudadrv only)");
            None
        }
    };
    let link = nvlink.as_ref().ok().map(|x| x.2);
    let mut table = String::new();
    let mut csv_out =
        String::from("size_mib,direction,side,median_gbps,min_gbps,max_gbps,nvlink_gbps\n");
    writeln!(
        table,
        "{:>8} {:>5} {:>16} {:>16} {:>7} {:>9} {:>8}",
        "MiB", "dir", "cudadrv GB/s", "C++ GB/s", "ratio", "NVLink", "% link"
    )?;
    for &mib in sizes_mib {
        let bytes = mib << 20;
        // About 2 GiB per measurement, at least 2 copies.
        let reps = ((2usize << 30) / bytes.max(1)).max(2);
        let mut rust = RustSide::new(&c0, &c1, bytes)?;
        let mut samples = [
            [Vec::new(), Vec::new()],
            [Vec::new(), Vec::new()],
            [Vec::new(), Vec::new()],
        ];
        // Warm-up, one each.
        for dir in 0..3 {
            rust.measure(dir, 1)?;
            if let Some(c) = &cpp {
                c.measure(dir, bytes, 1)?;
            }
        }
        for round in 0..rounds {
            for (dir, s) in samples.iter_mut().enumerate() {
                let rust_first = (round + dir) % 2 == 0;
                if rust_first || cpp.is_none() {
                    s[0].push(rust.measure(dir, reps)?);
                }
                if let Some(c) = &cpp {
                    s[1].push(c.measure(dir, bytes, reps)?);
                }
                if !rust_first && cpp.is_some() {
                    s[0].push(rust.measure(dir, reps)?);
                }
            }
        }
        for (dir, s) in samples.iter_mut().enumerate() {
            let r = stats(&mut s[0]);
            let c = stats(&mut s[1]);
            let peak = link.map(|g| if dir == 2 { 2.0 * g } else { g });
            let cell = |x: (f64, f64, f64), have: bool| {
                if have {
                    format!("{:.1} [{:.0}-{:.0}]", x.0, x.1, x.2)
                } else {
                    "-".into()
                }
            };
            writeln!(
                table,
                "{:>8} {:>5} {:>16} {:>16} {:>7} {:>9} {:>8}",
                mib,
                DIRS[dir],
                cell(r, true),
                cell(c, cpp.is_some()),
                if cpp.is_some() {
                    format!("{:.3}", r.0 / c.0)
                } else {
                    "-".into()
                },
                peak.map_or("unknown".into(), |p| format!("{p:.0}")),
                peak.map_or("-".into(), |p| format!("{:.0}%", 100.0 * r.0 / p)),
            )?;
            let nv = peak.map_or("unknown".into(), |p| format!("{p:.0}"));
            writeln!(
                csv_out,
                "{mib},{},cudadrv,{:.2},{:.2},{:.2},{nv}",
                DIRS[dir], r.0, r.1, r.2
            )?;
            if cpp.is_some() {
                writeln!(
                    csv_out,
                    "{mib},{},cpp,{:.2},{:.2},{:.2},{nv}",
                    DIRS[dir], c.0, c.1, c.2
                )?;
            }
        }
    }
    println!("{rounds} rounds, median [min-max]; `both` counts both directions' bytes");
    print!("{table}");
    if let Some(path) = csv {
        std::fs::write(&path, csv_out)?;
        println!("wrote {path}");
    }
    drop(cpp);
    Ok(())
}

/// `(active links, version name, GB/s per direction)` of `dev`'s NVLinks from NVML.
fn nvlink_gbps(dev: Device) -> R<(u32, &'static str, f64)> {
    type Init = unsafe extern "C" fn() -> c_int;
    type ByUuid = unsafe extern "C" fn(*const c_char, *mut *mut c_void) -> c_int;
    type LinkQuery = unsafe extern "C" fn(*mut c_void, c_uint, *mut c_uint) -> c_int;
    // SAFETY: the NVIDIA management library of the installed driver; its initialisers
    // set up its own state. It stays loaded for the process (leaked below).
    let lib = unsafe { cudadrv_sys::Library::open(c"libnvidia-ml.so.1") }
        .map_err(|e| format!("libnvidia-ml.so.1: {}", e.0))?;
    let sym = |name: &CStr| {
        let p = lib.symbol(name);
        if p.is_null() {
            Err(format!("NVML has no {}", name.to_string_lossy()))
        } else {
            Ok(p)
        }
    };
    // SAFETY: the signatures of nvml.h: nvmlInit_v2(void), nvmlDeviceGetHandleByUUID(const
    // char*, nvmlDevice_t*), nvmlDeviceGetNvLinkState(nvmlDevice_t, unsigned,
    // nvmlEnableState_t*) and nvmlDeviceGetNvLinkVersion(nvmlDevice_t, unsigned,
    // unsigned*) (both enums are 4-byte C enums).
    let (init, by_uuid, state, version) = unsafe {
        (
            core::mem::transmute::<*mut c_void, Init>(sym(c"nvmlInit_v2")?),
            core::mem::transmute::<*mut c_void, ByUuid>(sym(c"nvmlDeviceGetHandleByUUID")?),
            core::mem::transmute::<*mut c_void, LinkQuery>(sym(c"nvmlDeviceGetNvLinkState")?),
            core::mem::transmute::<*mut c_void, LinkQuery>(sym(c"nvmlDeviceGetNvLinkVersion")?),
        )
    };
    std::mem::forget(lib);
    // SAFETY: no arguments.
    let rc = unsafe { init() };
    if rc != 0 {
        return Err(format!("nvmlInit failed ({rc})").into());
    }
    // NVML names devices by UUID ("GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"), which does
    // not depend on CUDA's device order.
    let u = dev.uuid()?;
    let hex =
        |r: std::ops::Range<usize>| u[r].iter().map(|b| format!("{b:02x}")).collect::<String>();
    let uuid = CString::new(format!(
        "GPU-{}-{}-{}-{}-{}",
        hex(0..4),
        hex(4..6),
        hex(6..8),
        hex(8..10),
        hex(10..16)
    ))?;
    let mut handle: *mut c_void = std::ptr::null_mut();
    // SAFETY: NUL-terminated string, valid out-pointer.
    let rc = unsafe { by_uuid(uuid.as_ptr(), &mut handle) };
    if rc != 0 {
        return Err(format!("nvmlDeviceGetHandleByUUID({uuid:?}) failed ({rc})").into());
    }
    let (mut active, mut ver) = (0u32, 0u32);
    for link in 0..18 {
        let (mut on, mut v) = (0u32, 0u32);
        // SAFETY: a live handle and valid out-pointers; links past the device's count
        // return an error, which counts as inactive.
        let ok = unsafe { state(handle, link, &mut on) } == 0 && on == 1;
        if ok {
            active += 1;
            // SAFETY: as above.
            if unsafe { version(handle, link, &mut v) } == 0 {
                ver = v;
            }
        }
    }
    if active == 0 {
        return Err("no active NVLink".into());
    }
    // nvmlNvlinkVersion_t: 1 = 1.0, 2 = 2.0, 3 = 2.2, 4 = 3.0, 5 = 3.1, 6 = 4.0, 7 = 5.0.
    let (name, per_link) = match ver {
        1 => ("NVLink 1.0", 20.0),
        2 => ("NVLink 2.0", 25.0),
        3 => ("NVLink 2.2", 25.0),
        4 => ("NVLink 3.0", 25.0),
        5 => ("NVLink 3.1", 25.0),
        6 => ("NVLink 4.0", 25.0),
        7 => ("NVLink 5.0", 50.0),
        _ => return Err(format!("NVLink version {ver} not in the table").into()),
    };
    Ok((active, name, f64::from(active) * per_link))
}
