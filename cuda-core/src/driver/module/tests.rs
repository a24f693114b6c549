use super::*;
use crate::testing::{CASES, Rng};

/// Length of [`elf`]'s image.
const ELF_LEN: usize = 328;

/// A minimal well-formed ELF64 cubin: the header, one program header (a `PT_LOAD` of
/// the string table) at 64, three section headers at 120 (null, `.shstrtab`, a
/// `.bss` whose offset and size lie past the image, as `SHT_NOBITS` may), and the
/// string table at 312.
fn elf() -> [u8; ELF_LEN] {
    let mut b = [0u8; ELF_LEN];
    b[..8].copy_from_slice(b"\x7fELF\x02\x01\x01\x33");
    let mut put = |at: usize, bytes: &[u8]| b[at..at + bytes.len()].copy_from_slice(bytes);
    put(0x10, &2u16.to_le_bytes()); // e_type: ET_EXEC
    put(0x12, &190u16.to_le_bytes()); // e_machine: EM_CUDA
    put(0x14, &1u32.to_le_bytes()); // e_version
    put(0x20, &64u64.to_le_bytes()); // e_phoff
    put(0x28, &120u64.to_le_bytes()); // e_shoff
    put(0x34, &64u16.to_le_bytes()); // e_ehsize
    put(0x36, &56u16.to_le_bytes()); // e_phentsize
    put(0x38, &1u16.to_le_bytes()); // e_phnum
    put(0x3a, &64u16.to_le_bytes()); // e_shentsize
    put(0x3c, &3u16.to_le_bytes()); // e_shnum
    put(0x3e, &1u16.to_le_bytes()); // e_shstrndx
    // Program header 0: PT_LOAD, p_offset 312, p_filesz 16.
    put(64, &1u32.to_le_bytes());
    put(64 + 0x08, &312u64.to_le_bytes());
    put(64 + 0x20, &16u64.to_le_bytes());
    // Section 1: .shstrtab (SHT_STRTAB) at 312, 16 bytes.
    put(184 + 4, &3u32.to_le_bytes());
    put(184 + 0x18, &312u64.to_le_bytes());
    put(184 + 0x20, &16u64.to_le_bytes());
    // Section 2: .bss (SHT_NOBITS), placed past the image.
    put(248 + 4, &8u32.to_le_bytes());
    put(248 + 0x18, &0x7fff_ffffu64.to_le_bytes());
    put(248 + 0x20, &u64::MAX.to_le_bytes());
    put(312, b"\0.shstrtab\0.bss\0");
    b
}

fn set_u16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_le_bytes());
}

fn set_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

fn refusal(image: &[u8]) -> &'static str {
    match check_image(image) {
        Err(Error::InvalidArgument(what)) => what,
        other => panic!("not refused as an invalid argument: {other:?}"),
    }
}

#[test]
fn well_formed_images_pass() {
    check_image(&elf()).unwrap();
    // The smallest ELF the checks accept: the header and one null section at 64.
    let mut tiny = [0u8; 128];
    tiny[..6].copy_from_slice(b"\x7fELF\x02\x01");
    set_u64(&mut tiny, 0x28, 64);
    set_u16(&mut tiny, 0x3a, 64);
    set_u16(&mut tiny, 0x3c, 1);
    check_image(&tiny).unwrap();
    // A fatbin: 16-byte header, 8 bytes of body.
    let mut fatbin = [0u8; 24];
    fatbin[..4].copy_from_slice(&FATBIN_MAGIC.to_le_bytes());
    set_u16(&mut fatbin, 6, 16);
    set_u64(&mut fatbin, 8, 8);
    check_image(&fatbin).unwrap();
    check_image(b".version 8.0\n.target sm_90\n\0").unwrap();
}

/// The reported header: no program-header size and PN_XNUM program headers, which
/// passed as a table of zero bytes.
#[test]
fn elf_pn_xnum_with_zero_phentsize_is_refused() {
    let mut b = elf();
    set_u16(&mut b, 0x36, 0);
    set_u16(&mut b, 0x38, 0xffff);
    assert_eq!(
        refusal(&b),
        "ELF image: e_phnum is PN_XNUM (0xffff), which a cubin does not use"
    );
    // PN_XNUM with the right entry size is refused too.
    set_u16(&mut b, 0x36, 56);
    assert!(refusal(&b).contains("PN_XNUM"));
}

/// The reported header: no section headers (an empty table passed).
#[test]
fn elf_without_sections_is_refused() {
    let mut b = elf();
    set_u16(&mut b, 0x3c, 0);
    assert_eq!(
        refusal(&b),
        "ELF image: e_shnum must be non-zero (a cubin has a section table)"
    );
    // A bare header (`e_shnum` 0, no tables at all) as well.
    let mut header = [0u8; 64];
    header[..6].copy_from_slice(b"\x7fELF\x02\x01");
    assert!(refusal(&header).contains("e_shnum"));
}

#[test]
fn elf_header_rules_are_named() {
    let mut b = elf();
    set_u16(&mut b, 0x36, 0);
    assert_eq!(
        refusal(&b),
        "ELF image: e_phentsize must be 56 (an ELF64 program header) when e_phnum > 0"
    );
    // No program headers: the entry size is not used.
    set_u16(&mut b, 0x38, 0);
    check_image(&b).unwrap();

    let mut b = elf();
    set_u16(&mut b, 0x3a, 0x28);
    assert_eq!(
        refusal(&b),
        "ELF image: e_shentsize must be 64 (an ELF64 section header)"
    );
    let mut b = elf();
    set_u16(&mut b, 0x3e, 3);
    assert_eq!(refusal(&b), "ELF image: e_shstrndx must be below e_shnum");

    let mut b = elf();
    set_u64(&mut b, 0x20, (ELF_LEN - 55) as u64);
    assert_eq!(
        refusal(&b),
        "ELF image: the program-header table (e_phoff + e_phnum * e_phentsize) must lie \
         inside the image"
    );
    set_u64(&mut b, 0x20, u64::MAX - 8);
    assert!(refusal(&b).contains("program-header table"));
    let mut b = elf();
    set_u64(&mut b, 0x28, (ELF_LEN - 3 * 64 + 1) as u64);
    assert_eq!(
        refusal(&b),
        "ELF image: the section-header table (e_shoff + e_shnum * e_shentsize) must lie \
         inside the image"
    );
    set_u64(&mut b, 0x28, u64::MAX);
    assert!(refusal(&b).contains("section-header table"));

    // A segment or a section past the end.
    let mut b = elf();
    set_u64(&mut b, 64 + 0x20, 17);
    assert_eq!(
        refusal(&b),
        "ELF image: a segment (p_offset + p_filesz) must lie inside the image"
    );
    let mut b = elf();
    set_u64(&mut b, 184 + 0x20, u64::MAX);
    assert_eq!(
        refusal(&b),
        "ELF image: a section (sh_offset + sh_size) must lie inside the image"
    );
    // Truncated anywhere: refused.
    let b = elf();
    for len in 0..ELF_LEN {
        check_image(&b[..len]).unwrap_err();
    }
}

#[test]
fn fatbin_and_ptx_rules() {
    let mut fatbin = [0u8; 24];
    fatbin[..4].copy_from_slice(&FATBIN_MAGIC.to_le_bytes());
    set_u16(&mut fatbin, 6, 16);
    set_u64(&mut fatbin, 8, 9);
    refusal(&fatbin);
    set_u64(&mut fatbin, 8, u64::MAX);
    refusal(&fatbin);
    set_u16(&mut fatbin, 6, 8);
    set_u64(&mut fatbin, 8, 0);
    refusal(&fatbin);
    assert!(refusal(&FATBIN_WRAPPER_MAGIC.to_le_bytes()).contains("wrapper"));
    assert!(refusal(b".version 8.0").contains("NUL"));
    refusal(b"");
}

/// The values these property tests draw (edge values and random ones).
trait ImageValues {
    fn wild_u64(&mut self, len: usize) -> u64;
    fn wild_u16(&mut self) -> u16;
}

impl ImageValues for Rng {
    /// An offset or size: edge values, small ones, random ones.
    fn wild_u64(&mut self, len: usize) -> u64 {
        let len = len as u64;
        match self.below(4) {
            0 => self.pick(&[
                0,
                1,
                8,
                16,
                56,
                64,
                len.wrapping_sub(1),
                len,
                len + 1,
                u64::MAX - 7,
                u64::MAX,
            ]),
            1 => self.below(len + 64),
            2 => self.below(1 << 16),
            _ => self.next(),
        }
    }

    fn wild_u16(&mut self) -> u16 {
        match self.below(3) {
            0 => self.pick(&[0, 1, 2, 3, 0x28, 56, 64, 0xff00, 0xfffe, 0xffff]),
            1 => self.below(8) as u16,
            _ => self.next() as u16,
        }
    }
}

fn le(b: &[u8], at: usize, n: usize) -> u128 {
    b[at..at + n]
        .iter()
        .rev()
        .fold(0, |v, &byte| (v << 8) | u128::from(byte))
}

/// What the driver relies on when it reads an image `check_image` accepted,
/// recomputed independently (in `u128`, where nothing overflows).
fn assert_accepted_image_is_sound(image: &[u8]) {
    let len = image.len() as u128;
    if image.starts_with(b"\x7fELF") {
        assert!(image.len() >= 64 && image[4] == 2 && image[5] == 1);
        let (phoff, shoff) = (le(image, 0x20, 8), le(image, 0x28, 8));
        let (phentsize, phnum) = (le(image, 0x36, 2), le(image, 0x38, 2));
        let (shentsize, shnum) = (le(image, 0x3a, 2), le(image, 0x3c, 2));
        let shstrndx = le(image, 0x3e, 2);
        assert!(phnum != 0xffff && (phnum == 0 || phentsize == 56));
        assert!(shnum > 0 && shentsize == 64 && shstrndx < shnum);
        assert!(phoff + phnum * phentsize <= len);
        assert!(shoff + shnum * 64 <= len);
        for i in 0..phnum {
            let at = (phoff + i * 56) as usize;
            assert!(le(image, at + 0x08, 8) + le(image, at + 0x20, 8) <= len);
        }
        for i in 0..shnum {
            let at = (shoff + i * 64) as usize;
            if le(image, at + 4, 4) != 8 {
                assert!(le(image, at + 0x18, 8) + le(image, at + 0x20, 8) <= len);
            }
        }
    } else if image.starts_with(&FATBIN_MAGIC.to_le_bytes()) {
        let (header, body) = (le(image, 6, 2), le(image, 8, 8));
        assert!(header >= 16 && header + body <= len);
    } else {
        assert!(!image.starts_with(&FATBIN_WRAPPER_MAGIC.to_le_bytes()));
        assert!(image.contains(&0));
    }
}

/// Runs `check_image` and checks what it accepted; returns whether it did.
fn check_and_verify(image: &[u8]) -> bool {
    match check_image(image) {
        Ok(()) => {
            assert_accepted_image_is_sound(image);
            true
        }
        Err(Error::InvalidArgument(_)) => false,
        Err(other) => panic!("unexpected error: {other:?}"),
    }
}

/// Property: `check_image` never panics on a mutated ELF image (header fields,
/// program and section headers set to edge values, bytes flipped, the image cut or
/// extended), and what it accepts keeps every table and content inside the image.
#[test]
fn check_image_elf_property() {
    const HEADER_FIELDS: [(usize, usize); 7] = [
        (0x20, 8),
        (0x28, 8),
        (0x36, 2),
        (0x38, 2),
        (0x3a, 2),
        (0x3c, 2),
        (0x3e, 2),
    ];
    let mut r = Rng(0xE1F_C0B1);
    let mut passed = 0;
    for _ in 0..CASES {
        let mut buf = [0u8; 512];
        buf[..ELF_LEN].copy_from_slice(&elf());
        let mut len = ELF_LEN;
        for _ in 0..1 + r.below(3) {
            match r.below(6) {
                0 | 1 => {
                    let (at, n) = r.pick(&HEADER_FIELDS);
                    if n == 2 {
                        set_u16(&mut buf, at, r.wild_u16());
                    } else {
                        set_u64(&mut buf, at, r.wild_u64(len));
                    }
                }
                2 => {
                    // A program-header or section-header field: type, offset, size.
                    let base = r.pick(&[64, 120, 184, 248]);
                    let (at, v) = if base == 64 {
                        (base + r.pick(&[0x08, 0x20]), r.wild_u64(len))
                    } else if r.one_in(3) {
                        (base + 4, r.pick(&[0, 1, 3, 8]))
                    } else {
                        (base + r.pick(&[0x18, 0x20]), r.wild_u64(len))
                    };
                    if at == base + 4 {
                        buf[at..at + 4].copy_from_slice(&(v as u32).to_le_bytes());
                    } else {
                        set_u64(&mut buf, at, v);
                    }
                }
                3 => {
                    let at = r.below(len.max(1) as u64) as usize;
                    buf[at] ^= 1 << r.below(8);
                }
                4 => len = r.below(ELF_LEN as u64 + 1) as usize,
                _ => len = ELF_LEN + r.below((buf.len() - ELF_LEN) as u64 + 1) as usize,
            }
        }
        passed += usize::from(check_and_verify(&buf[..len]));
    }
    assert!(passed * 20 >= CASES, "only {passed} of {CASES} passed");
}

/// Property: `check_image` never panics on a fatbin header with arbitrary sizes, and
/// what it accepts lies inside the image.
#[test]
fn check_image_fatbin_property() {
    let mut r = Rng(0xFA7B_1200);
    let mut passed = 0;
    for _ in 0..CASES {
        let mut buf = [0u8; 128];
        let len = r.below(buf.len() as u64 + 1) as usize;
        buf[..4].copy_from_slice(&FATBIN_MAGIC.to_le_bytes());
        set_u16(&mut buf, 6, if r.one_in(2) { 16 } else { r.wild_u16() });
        let body = if r.one_in(2) {
            (len as u64).wrapping_sub(16)
        } else {
            r.wild_u64(len)
        };
        set_u64(&mut buf, 8, body);
        passed += usize::from(check_and_verify(&buf[..len]));
    }
    assert!(passed * 20 >= CASES, "only {passed} of {CASES} passed");
}

/// Property: `check_image` never panics on arbitrary bytes (PTX text with or without
/// a NUL, random bytes that may start with any magic), and what it accepts is sound.
#[test]
fn check_image_ptx_and_random_property() {
    let mut r = Rng(0x0097_7E57);
    let mut passed = 0;
    for _ in 0..CASES {
        let mut buf = [0u8; 256];
        let len = r.below(buf.len() as u64 + 1) as usize;
        for b in &mut buf[..len] {
            *b = if r.one_in(2) {
                b' ' + r.below(95) as u8
            } else {
                r.next() as u8
            };
        }
        if len >= 4 && r.one_in(4) {
            let magic: [u8; 4] = r.pick(&[
                *b"\x7fELF",
                FATBIN_MAGIC.to_le_bytes(),
                FATBIN_WRAPPER_MAGIC.to_le_bytes(),
                *b".ver",
            ]);
            buf[..4].copy_from_slice(&magic);
        }
        if len > 0 && r.one_in(2) {
            let at = r.below(len as u64) as usize;
            buf[at] = 0;
        }
        passed += usize::from(check_and_verify(&buf[..len]));
    }
    assert!(passed * 20 >= CASES, "only {passed} of {CASES} passed");
}
