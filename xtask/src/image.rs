//! The embedded examples: `examples/bare-metal` (an `aarch64-unknown-none` image that
//! loads a module and makes two launches, driver through `from_resolver`) with its size
//! checked against a budget, and `examples/nostd-staticlib` (`no_std` + `alloc`, a
//! static library for a host program), built for the host and for a bare target. For
//! the GPU: the same bare-metal program built for Linux (its own resolver over `dlsym`,
//! its own C `main`), and `nostd-staticlib/host.c` linked against the library; both run
//! here (the no-GPU line) and in the bundle as `hw_nostd`.

use std::path::Path;

use crate::{R, cargo, run};

/// The most bytes the bare-metal image may load (text, read-only data, data; not the
/// zero-initialized `.bss`): 40 KiB.
pub const BARE_METAL_BUDGET: u64 = 40 * 1024;

/// Builds both examples; fails when the bare-metal image is over budget.
pub fn check(root: &Path) -> R {
    crate::setup::targets(&["aarch64-unknown-none"])?;
    let bare = root.join("examples/bare-metal");
    let target_dir = root.join("target/embedded");
    run(cargo(&bare)
        .args([
            "build",
            "--release",
            "--target",
            "aarch64-unknown-none",
            "--target-dir",
        ])
        .arg(&target_dir))?;
    let image = target_dir.join("aarch64-unknown-none/release/bare-metal-example");
    let sizes = loaded_sizes(&std::fs::read(&image)?)
        .ok_or_else(|| format!("{}: not a 64-bit little-endian ELF", image.display()))?;
    let total: u64 = sizes.iter().map(|(_, n)| n).sum();
    let parts: Vec<String> = sizes.iter().map(|(s, n)| format!("{s} {n}")).collect();
    println!(
        "  bare-metal image (aarch64-unknown-none, release, LTO): {total} bytes loaded ({}); budget {BARE_METAL_BUDGET}",
        parts.join(", ")
    );
    if total > BARE_METAL_BUDGET {
        return Err(format!(
            "the bare-metal image loads {total} bytes, over its budget of {BARE_METAL_BUDGET}"
        )
        .into());
    }
    let lib = root.join("examples/nostd-staticlib");
    for target in [None, Some("aarch64-unknown-none")] {
        let mut cmd = cargo(&lib);
        cmd.args(["build", "--release", "--target-dir"])
            .arg(&target_dir);
        if let Some(t) = target {
            cmd.args(["--target", t]);
        }
        run(&mut cmd)?;
    }
    println!("  no_std + alloc staticlib: built for the host and aarch64-unknown-none");
    for exe in linux_programs(root)? {
        let out = std::process::Command::new(&exe).output()?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let last = stdout.lines().last().unwrap_or_default();
        if !out.status.success()
            || !(last.contains(": no GPU, nothing was run: ")
                || last.ends_with(": all values checked"))
        {
            return Err(format!(
                "{}: expected the no-GPU line or the checked line ({}):\n{stdout}",
                exe.display(),
                out.status
            )
            .into());
        }
        println!("  {last}");
    }
    Ok(())
}

/// The two embedded programs for Linux: the bare-metal program built for the host
/// (`no_std`, its own resolver and `main`), and the C host of the `no_std` static library
/// (`cc`); returns their paths (`target/embedded/release/{bare-metal-example, nostd-host}`).
pub fn linux_programs(root: &Path) -> R<Vec<std::path::PathBuf>> {
    let target_dir = root.join("target/embedded");
    run(cargo(&root.join("examples/bare-metal"))
        .args(["build", "--release", "--target-dir"])
        .arg(&target_dir))?;
    let lib = root.join("examples/nostd-staticlib");
    run(cargo(&lib)
        .args(["build", "--release", "--target-dir"])
        .arg(&target_dir))?;
    let release = target_dir.join("release");
    let host = release.join("nostd-host");
    run(
        std::process::Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
            .arg(lib.join("host.c"))
            .arg(release.join("libnostd_staticlib_example.a"))
            .args(["-ldl", "-lpthread", "-o"])
            .arg(&host),
    )?;
    Ok(vec![release.join("bare-metal-example"), host])
}

/// (section, size) of every section an ELF64 little-endian image loads with content
/// (`SHF_ALLOC` and not `SHT_NOBITS`).
fn loaded_sizes(elf: &[u8]) -> Option<Vec<(String, u64)>> {
    let u16_at = |o: usize| Some(u16::from_le_bytes(elf.get(o..o + 2)?.try_into().ok()?));
    let u32_at = |o: usize| Some(u32::from_le_bytes(elf.get(o..o + 4)?.try_into().ok()?));
    let u64_at = |o: usize| Some(u64::from_le_bytes(elf.get(o..o + 8)?.try_into().ok()?));
    if elf.get(..6)? != b"\x7fELF\x02\x01" {
        return None;
    }
    let shoff = usize::try_from(u64_at(0x28)?).ok()?;
    let (entsize, count, names) = (
        usize::from(u16_at(0x3A)?),
        usize::from(u16_at(0x3C)?),
        usize::from(u16_at(0x3E)?),
    );
    let section = |i: usize| shoff + i * entsize;
    let strtab = usize::try_from(u64_at(section(names) + 0x18)?).ok()?;
    let mut out = Vec::new();
    for i in 0..count {
        let s = section(i);
        let (kind, flags, size) = (u32_at(s + 4)?, u64_at(s + 8)?, u64_at(s + 0x20)?);
        const SHF_ALLOC: u64 = 2;
        const SHT_NOBITS: u32 = 8;
        if flags & SHF_ALLOC == 0 || kind == SHT_NOBITS {
            continue;
        }
        let at = strtab + usize::try_from(u32_at(s)?).ok()?;
        let end = at + elf.get(at..)?.iter().position(|&b| b == 0)?;
        out.push((String::from_utf8_lossy(&elf[at..end]).into_owned(), size));
    }
    Some(out)
}
