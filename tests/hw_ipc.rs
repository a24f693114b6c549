//! Hardware tests of interprocess communication (`cudadrv::memory::ipc`, Programming Guide
//! 4.3.3.4, 4.15, 4.16) with two real processes: each test re-executes this binary as a
//! child (`HW_IPC_CHILD=<case>`), which connects to the parent over a Unix socket.
//!
//! - legacy memory and event handles: the child writes with a kernel and records the
//!   IPC event, the parent's stream waits for it, then reads;
//! - VMM memory exported as a file descriptor over `SCM_RIGHTS`: the parent unmaps and
//!   releases first, the child keeps writing and reading its mapping;
//! - an IPC memory pool and an exported allocation, ordered by an IPC event; the child
//!   frees its import before the parent frees the allocation;
//! - a child killed (`SIGKILL`) while it has the parent's memory mapped: the parent's
//!   memory keeps the child's writes and stays usable.
//!
//! A child that runs longer than 30 s is killed and the test fails.

use std::io::Write as _;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use cuda_workspace::{
    Kernels, Outcome, TestResult, check, check_eq, check_filled, fill_value, hw_tests, require_gpu,
    run_suite, skip,
};
use cudadrv::launch::{LaunchConfig, launch};
use cudadrv::memory::AsyncDeviceBuffer;
use cudadrv::memory::ipc::{
    HANDLE_BYTES, IpcEventHandle, IpcMapping, IpcMemHandle, PoolPtrExport, recv_fds, send_fds,
};
use cudadrv::memory::vmm::{Granularity, PhysicalMemory, VirtualRange, granularity};
use cudadrv::{Context, Device, DeviceBuffer, DevicePtr, Event, MemPool, Stream, StreamFlags};

const N: u32 = 1 << 20;

fn main() {
    if let Ok(case) = std::env::var("HW_IPC_CHILD") {
        let code = match child(&case) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("hw_ipc child {case}: {e}");
                1
            }
        };
        std::process::exit(code);
    }
    run_suite(
        "hw_ipc",
        hw_tests![
            legacy_memory_and_event_handles,
            vmm_fd_exporter_releases_first,
            ipc_pool_and_pointer_with_ipc_event,
            child_killed_while_mapping_parent_memory,
        ],
    );
}

type R<T = ()> = Result<T, Box<dyn std::error::Error>>;

fn ctx() -> R<Context> {
    let ctx = Context::primary(Device::get(0)?)?;
    ctx.bind()?;
    Ok(ctx)
}

fn fill(k: &Kernels, stream: &Stream, out: DevicePtr<u32>, n: u32) -> R {
    // SAFETY: fill(out, n) writes out[0..n]; callers pass at least n mapped u32s that
    // stay mapped until the stream is synchronized.
    unsafe {
        launch(
            &k.fill,
            &LaunchConfig::new(n.div_ceil(256), 256).stream(stream),
            &(out, n),
        )?
    };
    Ok(())
}

fn send(sock: &UnixStream, bytes: &[u8], fds: &[&OwnedFd]) -> R {
    let borrowed: Vec<_> = fds.iter().map(|f| f.as_fd()).collect();
    send_fds(sock, bytes, &borrowed)?;
    Ok(())
}

fn recv(sock: &UnixStream) -> R<(Vec<u8>, Vec<OwnedFd>)> {
    let mut buf = [0u8; 512];
    let (n, fds) = recv_fds(sock, &mut buf)?;
    if n == 0 {
        return Err("the other process closed the socket".into());
    }
    Ok((buf[..n].to_vec(), fds))
}

fn expect(sock: &UnixStream, word: &str) -> R {
    let (got, _) = recv(sock)?;
    if got != word.as_bytes() {
        return Err(format!("expected {word:?}, got {:?}", String::from_utf8_lossy(&got)).into());
    }
    Ok(())
}

/// The parent's side of one two-process test: the listening socket and the child.
struct Peer {
    sock: UnixStream,
    child: Child,
    dir: std::path::PathBuf,
}

impl Peer {
    fn spawn(case: &str) -> R<Self> {
        let dir = std::env::temp_dir().join(format!("hw_ipc_{}_{case}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        let path = dir.join("sock");
        let listener = UnixListener::bind(&path)?;
        let child = Command::new(std::env::current_exe()?)
            .env("HW_IPC_CHILD", case)
            .env("HW_IPC_SOCK", &path)
            .spawn()?;
        listener.set_nonblocking(true)?;
        let start = Instant::now();
        let sock = loop {
            match listener.accept() {
                Ok((s, _)) => break s,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if start.elapsed() > Duration::from_secs(30) {
                        return Err("the child did not connect within 30 s".into());
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) => return Err(e.into()),
            }
        };
        sock.set_nonblocking(false)?;
        sock.set_read_timeout(Some(Duration::from_secs(30)))?;
        Ok(Self { sock, child, dir })
    }

    /// Waits for the child to exit (killing it after 30 s); fails unless it exited 0.
    fn finish(mut self) -> TestResult {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().map_err(|e| e.to_string())? {
                let _ = std::fs::remove_dir_all(&self.dir);
                return check(status.success(), || format!("child exited with {status}"));
            }
            if start.elapsed() > Duration::from_secs(30) {
                let _ = self.child.kill();
                let _ = self.child.wait();
                return Err(Outcome::Fail(
                    "child still running after 30 s: killed".into(),
                ));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

fn fail(e: Box<dyn std::error::Error>) -> Outcome {
    Outcome::Fail(e.to_string())
}

// ---------------------------------------------------------------------------------------
// Parent sides
// ---------------------------------------------------------------------------------------

fn legacy_memory_and_event_handles() -> TestResult {
    require_gpu()?;
    let ctx = ctx().map_err(fail)?;
    let buf = DeviceBuffer::<u32>::zeroed(&ctx, N as usize)?;
    let event = Event::new_interprocess(&ctx)?;
    let mem = buf.ipc_handle()?;
    // Opening a handle in the process that made it is refused by the driver.
    match IpcMapping::open(&ctx, &mem) {
        Ok(_) => return Err(Outcome::Fail("opened our own IPC handle".into())),
        Err(e) => println!("    opening our own handle: {e}"),
    }
    let peer = Peer::spawn("legacy").map_err(fail)?;
    let mut msg = mem.to_bytes().to_vec();
    msg.extend_from_slice(&event.ipc_handle()?.to_bytes());
    send(&peer.sock, &msg, &[]).map_err(fail)?;
    expect(&peer.sock, "recorded").map_err(fail)?;
    // The child recorded the IPC event after its kernel: order our stream after it.
    let mut stream = Stream::new(&ctx, StreamFlags::NON_BLOCKING)?;
    stream.wait_event(&event)?;
    stream.synchronize()?;
    let mut got = vec![0u32; N as usize];
    buf.copy_to_host(&mut got)?;
    // The child wrote the first four through `IpcMapping::view_mut`, the rest by kernel.
    for (i, v) in got.iter_mut().take(4).enumerate() {
        check_eq(
            *v,
            !fill_value(i as u32),
            "written through the child's view",
        )?;
        *v = fill_value(i as u32);
    }
    check_filled(&got, "written by the child, read after the IPC event")?;
    send(&peer.sock, b"close", &[]).map_err(fail)?;
    expect(&peer.sock, "closed").map_err(fail)?;
    peer.finish()?;
    drop(buf); // after the importer closed its mapping
    println!("    child wrote 4 MiB through cuIpcOpenMemHandle; IPC event ordered the read");
    Ok(())
}

fn vmm_fd_exporter_releases_first() -> TestResult {
    require_gpu()?;
    let ctx = ctx().map_err(fail)?;
    let gran = granularity(&ctx, Granularity::Minimum)?;
    let phys = match PhysicalMemory::new_exportable(&ctx, gran) {
        Ok(p) => p,
        Err(e) if e.is(cudadrv::cuda_sys::CUresult::CUDA_ERROR_NOT_SUPPORTED) => {
            return skip("POSIX file descriptor handles not supported");
        }
        Err(e) => return Err(e.into()),
    };
    let range = VirtualRange::reserve(&ctx, gran)?;
    let map = range.map(0, &phys)?;
    let fd = phys.export_fd()?;
    let peer = Peer::spawn("vmm").map_err(fail)?;
    send(&peer.sock, &(gran as u64).to_le_bytes(), &[&fd]).map_err(fail)?;
    drop(fd);
    expect(&peer.sock, "filled").map_err(fail)?;
    let n = gran / 4;
    let mut got = vec![0u32; n];
    let cu = cudadrv::cuda_sys::driver()?;
    // SAFETY: `map` maps `gran` bytes; `got` holds them; the context is current.
    let rc = unsafe { (cu.cuMemcpyDtoH()?)(got.as_mut_ptr().cast(), map.as_raw(), gran) };
    check_eq(
        rc,
        cudadrv::cuda_sys::CUresult::CUDA_SUCCESS,
        "cuMemcpyDtoH",
    )?;
    check_filled(&got, "the child's writes through its own mapping")?;
    // Release first: unmap, free the range, release the handle; the child keeps going.
    drop(map);
    drop(range);
    drop(phys);
    send(&peer.sock, b"released", &[]).map_err(fail)?;
    expect(&peer.sock, "ok").map_err(fail)?;
    peer.finish()?;
    println!(
        "    {gran}-byte allocation shared as an fd; the child wrote and read it after the \
         parent released everything"
    );
    Ok(())
}

fn ipc_pool_and_pointer_with_ipc_event() -> TestResult {
    require_gpu()?;
    let ctx = ctx().map_err(fail)?;
    let pool = match MemPool::new_exportable(&ctx) {
        Ok(p) => p,
        Err(e) if e.is(cudadrv::cuda_sys::CUresult::CUDA_ERROR_NOT_SUPPORTED) => {
            return skip("IPC memory pools not supported");
        }
        Err(e) => return Err(e.into()),
    };
    // The pool is exported before its allocations (the order the driver expects).
    let fd = pool.export_fd()?;
    let stream = Stream::new(&ctx, StreamFlags::NON_BLOCKING)?;
    let alloc = AsyncDeviceBuffer::<u32>::from_pool(&pool, &stream, N as usize)?;
    stream.synchronize()?;
    let event = Event::new_interprocess(&ctx)?;
    let data = pool.export_pointer(alloc.as_raw())?;
    let peer = Peer::spawn("pool").map_err(fail)?;
    let mut msg = data.to_bytes().to_vec();
    msg.extend_from_slice(&event.ipc_handle()?.to_bytes());
    send(&peer.sock, &msg, &[&fd]).map_err(fail)?;
    expect(&peer.sock, "recorded").map_err(fail)?;
    // A second stream waits for the child's IPC event, then the read follows it.
    let mut waiter = Stream::new(&ctx, StreamFlags::NON_BLOCKING)?;
    waiter.wait_event(&event)?;
    waiter.synchronize()?;
    let mut got = vec![0u32; N as usize];
    let cu = cudadrv::cuda_sys::driver()?;
    // SAFETY: the allocation holds N u32s; `got` too; the context is current.
    let rc =
        unsafe { (cu.cuMemcpyDtoH()?)(got.as_mut_ptr().cast(), alloc.as_raw(), N as usize * 4) };
    check_eq(
        rc,
        cudadrv::cuda_sys::CUresult::CUDA_SUCCESS,
        "cuMemcpyDtoH",
    )?;
    check_filled(&got, "pool allocation written by the child")?;
    send(&peer.sock, b"free", &[]).map_err(fail)?;
    expect(&peer.sock, "freed").map_err(fail)?;
    peer.finish()?;
    drop(alloc); // after the importer freed its view
    println!("    pool exported as an fd, allocation as 64 bytes; IPC event ordered the streams");
    Ok(())
}

fn child_killed_while_mapping_parent_memory() -> TestResult {
    require_gpu()?;
    let ctx = ctx().map_err(fail)?;
    let k = Kernels::load(&ctx)?;
    let buf = DeviceBuffer::<u32>::zeroed(&ctx, N as usize)?;
    let gran = granularity(&ctx, Granularity::Minimum)?;
    let phys = PhysicalMemory::new_exportable(&ctx, gran)?;
    let range = VirtualRange::reserve(&ctx, gran)?;
    let map = range.map(0, &phys)?;
    let fd = phys.export_fd()?;
    let mut peer = Peer::spawn("killed").map_err(fail)?;
    let mut msg = buf.ipc_handle()?.to_bytes().to_vec();
    msg.extend_from_slice(&(gran as u64).to_le_bytes());
    send(&peer.sock, &msg, &[&fd]).map_err(fail)?;
    expect(&peer.sock, "mapped").map_err(fail)?;
    peer.child.kill().map_err(|e| e.to_string())?; // SIGKILL, mappings still open
    let status = peer.child.wait().map_err(|e| e.to_string())?;
    println!("    child killed while mapping both: {status}");
    // The child's writes are there, and the memory is still ours to use.
    let mut got = vec![0u32; N as usize];
    buf.copy_to_host(&mut got)?;
    check_filled(&got, "legacy buffer after the child died")?;
    let stream = Stream::new(&ctx, StreamFlags::NON_BLOCKING)?;
    // SAFETY: write_value(out, v) writes out[0]; the buffer outlives the sync below.
    unsafe {
        launch(
            &k.write_value,
            &LaunchConfig::new(1, 1).stream(&stream),
            &(buf.as_arg(), 99u32),
        )?
    };
    fill(&k, &stream, map.as_arg(), (gran / 4) as u32).map_err(fail)?;
    stream.synchronize()?;
    buf.copy_to_host(&mut got)?;
    check_eq(got[0], 99, "legacy buffer written after the child died")?;
    let mut v = vec![0u32; gran / 4];
    let cu = cudadrv::cuda_sys::driver()?;
    // SAFETY: `map` maps `gran` bytes; `v` holds them.
    let rc = unsafe { (cu.cuMemcpyDtoH()?)(v.as_mut_ptr().cast(), map.as_raw(), gran) };
    check_eq(
        rc,
        cudadrv::cuda_sys::CUresult::CUDA_SUCCESS,
        "cuMemcpyDtoH",
    )?;
    check_filled(&v, "VMM memory refilled after the child died")?;
    let _ = std::fs::remove_dir_all(&peer.dir);
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Child sides
// ---------------------------------------------------------------------------------------

fn child(case: &str) -> R {
    let path = std::env::var("HW_IPC_SOCK")?;
    let sock = UnixStream::connect(path)?;
    sock.set_read_timeout(Some(Duration::from_secs(30)))?;
    let ctx = ctx()?;
    let k = Kernels::load(&ctx)?;
    let stream = Stream::new(&ctx, StreamFlags::NON_BLOCKING)?;
    let (msg, fds) = recv(&sock)?;
    let handle = |at: usize| -> R<[u8; HANDLE_BYTES]> {
        Ok(msg
            .get(at..at + HANDLE_BYTES)
            .ok_or("message too short")?
            .try_into()?)
    };
    match case {
        "legacy" => {
            let map = IpcMapping::open(&ctx, &IpcMemHandle::from_bytes(handle(0)?))?;
            if map.size_bytes() < N as usize * 4 {
                return Err(format!("mapping of {} bytes", map.size_bytes()).into());
            }
            let mut map = map;
            let event = Event::open_ipc(&ctx, &IpcEventHandle::from_bytes(handle(64)?))?;
            fill(&k, &stream, map.as_arg(), N)?;
            stream.synchronize()?;
            // The first values again, through a writable view of the mapping.
            let mine: Vec<u32> = (0..4).map(|i| !fill_value(i)).collect();
            map.view_mut::<u32>()?
                .into_slice(..4)?
                .copy_from_host(&mine)?;
            event.record(&stream)?;
            send(&sock, b"recorded", &[])?;
            expect(&sock, "close")?;
            stream.synchronize()?;
            drop(map);
            send(&sock, b"closed", &[])?;
        }
        "vmm" => {
            let bytes = u64::from_le_bytes(msg.get(..8).ok_or("short")?.try_into()?) as usize;
            let fd = fds.first().ok_or("no descriptor received")?;
            let phys = PhysicalMemory::import_fd(&ctx, fd.as_fd(), bytes)?;
            drop(fds);
            let range = VirtualRange::reserve(&ctx, bytes)?;
            let map = range.map(0, &phys)?;
            fill(&k, &stream, map.as_arg(), (bytes / 4) as u32)?;
            stream.synchronize()?;
            send(&sock, b"filled", &[])?;
            expect(&sock, "released")?;
            // SAFETY: write_value(out, v) writes out[0] of the mapping.
            unsafe {
                launch(
                    &k.write_value,
                    &LaunchConfig::new(1, 1).stream(&stream),
                    &(map.as_arg::<u32>(), 0xabcd_u32),
                )?
            };
            stream.synchronize()?;
            let mut v = vec![0u32; bytes / 4];
            let cu = cudadrv::cuda_sys::driver()?;
            // SAFETY: `map` maps `bytes` bytes; `v` holds them.
            let rc = unsafe { (cu.cuMemcpyDtoH()?)(v.as_mut_ptr().cast(), map.as_raw(), bytes) };
            rc.result()?;
            let ok = v[0] == 0xabcd
                && v.iter()
                    .enumerate()
                    .skip(1)
                    .all(|(i, &x)| x == (i as u32).wrapping_mul(3).wrapping_add(1));
            send(&sock, if ok { b"ok" } else { b"bad" }, &[])?;
        }
        "pool" => {
            let fd = fds.first().ok_or("no descriptor received")?;
            let pool = MemPool::import_fd(&ctx, fd.as_fd())?;
            let alloc = pool.import_pointer(&PoolPtrExport::from_bytes(handle(0)?))?;
            if alloc.size_bytes() < N as usize * 4 {
                return Err(format!("import of {} bytes", alloc.size_bytes()).into());
            }
            let event = Event::open_ipc(&ctx, &IpcEventHandle::from_bytes(handle(64)?))?;
            fill(&k, &stream, alloc.as_arg(), N)?;
            event.record(&stream)?;
            send(&sock, b"recorded", &[])?;
            expect(&sock, "free")?;
            stream.synchronize()?;
            drop(alloc);
            send(&sock, b"freed", &[])?;
        }
        "killed" => {
            let map = IpcMapping::open(&ctx, &IpcMemHandle::from_bytes(handle(0)?))?;
            let bytes = u64::from_le_bytes(msg.get(64..72).ok_or("short")?.try_into()?) as usize;
            let fd = fds.first().ok_or("no descriptor received")?;
            let phys = PhysicalMemory::import_fd(&ctx, fd.as_fd(), bytes)?;
            let range = VirtualRange::reserve(&ctx, bytes)?;
            let vmap = range.map(0, &phys)?;
            fill(&k, &stream, map.as_arg(), N)?;
            stream.synchronize()?;
            send(&sock, b"mapped", &[])?;
            // Wait to be killed, holding both mappings.
            std::thread::sleep(Duration::from_secs(60));
            drop(vmap);
            return Err("not killed within 60 s".into());
        }
        other => return Err(format!("unknown case {other}").into()),
    }
    std::io::stdout().flush()?;
    Ok(())
}
