//! The compile cache of [`Program::compile`](super::Program::compile): a map in the
//! process, and files in a directory when one is set.
//!
//! A key is every input that decides the output, each length-prefixed, so two different
//! compilations never share a key. A file holds its key in full, and the file's name is
//! only a 128-bit digest of it: a file is used when its stored key equals the one asked
//! for and its checksum holds; any other file is ignored (and rewritten after the
//! compilation). Files are written under a temporary name and renamed, so a reader never
//! sees half a file.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use alloc::string::String;
use alloc::vec::Vec;

use super::{Compiled, Output, Program, Target};

/// The process's entries, by key.
static MEMORY: LazyLock<Mutex<HashMap<Vec<u8>, Arc<Compiled>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// The directory: `None` before the first use (then read from `CUDADRV_NVRTC_CACHE`),
/// `Some(None)` for none.
static DIR: Mutex<Option<Option<PathBuf>>> = Mutex::new(None);

static MEMORY_HITS: AtomicU64 = AtomicU64::new(0);
static DISK_HITS: AtomicU64 = AtomicU64::new(0);
static COMPILES: AtomicU64 = AtomicU64::new(0);

/// The first bytes of a cache file (the layout's version).
const MAGIC: &[u8; 16] = b"cudadrv-nvrtc-1\n";

/// What the cache did since the process started (or since [`clear_cache`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Compilations answered from the process's map.
    pub memory_hits: u64,
    /// Compilations answered from a file of the cache directory.
    pub disk_hits: u64,
    /// Compilations NVRTC ran (through the cache: [`Program::uncached`](super::Program::uncached)
    /// ones are not counted).
    pub compiles: u64,
}

/// The counters of the cache.
#[must_use]
pub fn cache_stats() -> CacheStats {
    CacheStats {
        memory_hits: MEMORY_HITS.load(Ordering::Relaxed),
        disk_hits: DISK_HITS.load(Ordering::Relaxed),
        compiles: COMPILES.load(Ordering::Relaxed),
    }
}

/// Empties the process's map and zeroes the counters (the files stay).
pub fn clear_cache() {
    MEMORY
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clear();
    for c in [&MEMORY_HITS, &DISK_HITS, &COMPILES] {
        c.store(0, Ordering::Relaxed);
    }
}

/// Sets the directory of cache files (created when first written), or `None` for the
/// process's map alone. Without a call, the directory is `$CUDADRV_NVRTC_CACHE` when
/// that is set and not empty.
pub fn set_cache_dir(dir: Option<PathBuf>) {
    *DIR.lock().unwrap_or_else(PoisonError::into_inner) = Some(dir);
}

/// The directory of cache files, if any.
#[must_use]
pub fn cache_dir() -> Option<PathBuf> {
    DIR.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get_or_insert_with(|| {
            std::env::var_os("CUDADRV_NVRTC_CACHE")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        })
        .clone()
}

/// Appends `bytes` with its length.
fn field(key: &mut Vec<u8>, bytes: &[u8]) {
    key.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
    key.extend_from_slice(bytes);
}

/// The key of compiling `program` for `target` with NVRTC `nvrtc`.
pub(super) fn key(program: &Program<'_>, target: Target, nvrtc: (u32, u32)) -> Vec<u8> {
    let mut k = Vec::with_capacity(program.source.len() + 256);
    k.extend_from_slice(&nvrtc.0.to_le_bytes());
    k.extend_from_slice(&nvrtc.1.to_le_bytes());
    k.extend_from_slice(&target.arch.to_le_bytes());
    k.push(u8::from(target.specific));
    k.push(match target.output {
        Output::Cubin => 0,
        Output::Ptx => 1,
    });
    field(&mut k, program.name.as_bytes());
    field(&mut k, program.source.as_bytes());
    k.extend_from_slice(&(program.headers.len() as u64).to_le_bytes());
    for (name, text) in &program.headers {
        field(&mut k, name.as_bytes());
        field(&mut k, text.as_bytes());
    }
    k.extend_from_slice(&(program.name_expressions.len() as u64).to_le_bytes());
    for e in &program.name_expressions {
        field(&mut k, e.as_bytes());
    }
    k.extend_from_slice(&(program.options.len() as u64).to_le_bytes());
    for o in &program.options {
        field(&mut k, o.as_bytes());
    }
    k
}

/// 64-bit FNV-1a of `bytes` from `basis`.
fn fnv(bytes: &[u8], basis: u64) -> u64 {
    bytes.iter().fold(basis, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The file name of `key`: two 64-bit digests from different bases, in hex.
fn file_name(key: &[u8]) -> String {
    alloc::format!(
        "{:016x}{:016x}.nvrtc",
        fnv(key, 0xcbf2_9ce4_8422_2325),
        fnv(key, 0x6c62_272e_07bb_0142)
    )
}

/// The cached result of `key`, from the map or a file (then kept in the map).
pub(super) fn lookup(key: &[u8], target: Target) -> Option<Arc<Compiled>> {
    if let Some(hit) = MEMORY
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(key)
    {
        MEMORY_HITS.fetch_add(1, Ordering::Relaxed);
        return Some(Arc::clone(hit));
    }
    let dir = cache_dir()?;
    let bytes = std::fs::read(dir.join(file_name(key))).ok()?;
    let compiled = Arc::new(decode(&bytes, key, target)?);
    DISK_HITS.fetch_add(1, Ordering::Relaxed);
    MEMORY
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(key.to_vec(), Arc::clone(&compiled));
    Some(compiled)
}

/// Keeps `compiled` under `key`: in the map, and in a file when a directory is set (a
/// file that cannot be written is left out: the cache is an optimisation).
pub(super) fn store(key: Vec<u8>, compiled: &Arc<Compiled>) {
    COMPILES.fetch_add(1, Ordering::Relaxed);
    if let Some(dir) = cache_dir() {
        let _ = write_file(&dir, &key, compiled);
    }
    MEMORY
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(key, Arc::clone(compiled));
}

/// Writes the file of `key` under a temporary name, then renames it into place.
fn write_file(dir: &Path, key: &[u8], compiled: &Compiled) -> std::io::Result<()> {
    static SEQUENCE: AtomicU64 = AtomicU64::new(0);
    std::fs::create_dir_all(dir)?;
    let name = file_name(key);
    let tmp = dir.join(alloc::format!(
        "{name}.{}.{}.tmp",
        std::process::id(),
        SEQUENCE.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::write(&tmp, encode(key, compiled))?;
    std::fs::rename(&tmp, dir.join(name)).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// The file's bytes: magic, key, NVRTC version, code, log, lowered names, then the
/// FNV-1a digest of everything before it.
fn encode(key: &[u8], c: &Compiled) -> Vec<u8> {
    let mut out = Vec::with_capacity(MAGIC.len() + key.len() + c.code.len() + c.log.len() + 64);
    out.extend_from_slice(MAGIC);
    field(&mut out, key);
    out.extend_from_slice(&c.nvrtc.0.to_le_bytes());
    out.extend_from_slice(&c.nvrtc.1.to_le_bytes());
    field(&mut out, &c.code);
    field(&mut out, c.log.as_bytes());
    out.extend_from_slice(&(c.lowered.len() as u64).to_le_bytes());
    for (e, l) in &c.lowered {
        field(&mut out, e.as_bytes());
        field(&mut out, l.as_bytes());
    }
    let sum = fnv(&out, 0xcbf2_9ce4_8422_2325);
    out.extend_from_slice(&sum.to_le_bytes());
    out
}

/// Reads a file's bytes back: `None` unless the magic, the checksum and the key match
/// and every field is in bounds.
fn decode(bytes: &[u8], key: &[u8], target: Target) -> Option<Compiled> {
    let (body, sum) = bytes.split_at_checked(bytes.len().checked_sub(8)?)?;
    if fnv(body, 0xcbf2_9ce4_8422_2325).to_le_bytes() != *sum {
        return None;
    }
    let mut r = Reader(body.strip_prefix(MAGIC.as_slice())?);
    if r.field()? != key {
        return None;
    }
    let nvrtc = (r.u32()?, r.u32()?);
    let code = r.field()?.to_vec();
    let log = String::from_utf8(r.field()?.to_vec()).ok()?;
    let n = usize::try_from(r.u64()?).ok()?;
    let mut lowered = Vec::new();
    for _ in 0..n {
        let e = String::from_utf8(r.field()?.to_vec()).ok()?;
        let l = String::from_utf8(r.field()?.to_vec()).ok()?;
        lowered.push((e, l));
    }
    r.0.is_empty().then_some(Compiled {
        target,
        nvrtc,
        code,
        log,
        lowered,
    })
}

/// A cursor over a file's bytes.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = self.0.split_at_checked(n)?;
        self.0 = rest;
        Some(head)
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    fn field(&mut self) -> Option<&'a [u8]> {
        let n = usize::try_from(self.u64()?).ok()?;
        self.take(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Compiled {
        Compiled {
            target: Target::cubin(90),
            nvrtc: (13, 0),
            code: alloc::vec![0x7f, b'E', b'L', b'F', 0, 1, 2],
            log: String::from("warning: unused variable"),
            lowered: alloc::vec![(String::from("k<float>"), String::from("_Z1kIfEvv"))],
        }
    }

    /// A file reads back as written, and only for its own key.
    #[test]
    fn a_file_round_trips_for_its_key_only() {
        let c = sample();
        let bytes = encode(b"key", &c);
        assert_eq!(decode(&bytes, b"key", c.target), Some(c.clone()));
        assert_eq!(decode(&bytes, b"other key", c.target), None);
    }

    /// Every damaged file is ignored, never read past its end: each truncation and each
    /// flipped byte.
    #[test]
    fn a_damaged_file_is_ignored() {
        let c = sample();
        let bytes = encode(b"key", &c);
        for len in 0..bytes.len() {
            assert_eq!(
                decode(&bytes[..len], b"key", c.target),
                None,
                "cut at {len}"
            );
        }
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x40;
            assert_eq!(decode(&bad, b"key", c.target), None, "byte {i} flipped");
        }
    }

    /// Keys are unambiguous: moving a byte between fields changes the key.
    #[test]
    fn keys_keep_fields_apart() {
        let t = Target::cubin(90);
        let a = key(&Program::new("a.cu", "xy"), t, (13, 0));
        let b = key(&Program::new("a.cux", "y"), t, (13, 0));
        let c = key(&Program::new("a.cu", "xy").option("-G"), t, (13, 0));
        let d = key(&Program::new("a.cu", "xy"), Target::ptx(90), (13, 0));
        let e = key(&Program::new("a.cu", "xy"), t, (13, 1));
        let f = key(&Program::new("a.cu", "xy").header("h", ""), t, (13, 0));
        let g = key(&Program::new("a.cu", "xy").name_expression("h"), t, (13, 0));
        let h = key(&Program::new("a.cu", "xy"), t.arch_specific(), (13, 0));
        let all = [&a, &b, &c, &d, &e, &f, &g, &h];
        for (i, x) in all.iter().enumerate() {
            for y in &all[i + 1..] {
                assert_ne!(x, y);
            }
        }
        assert_eq!(a, key(&Program::new("a.cu", "xy"), t, (13, 0)));
    }
}
