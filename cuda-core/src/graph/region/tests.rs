use super::*;

fn memset(bytes: usize, dst: u64, value: u32) -> Op<'static> {
    Op {
        key: Key {
            bytes,
            ..Key::new(Kind::MemsetD32)
        },
        dst,
        value,
        ..Op::new(Kind::MemsetD32)
    }
}

#[test]
fn keys_hash_by_structure_not_parameters() {
    let (x, y, z) = (memset(64, 1, 2), memset(64, 99, 7), memset(128, 1, 2));
    assert_eq!(x.key, y.key);
    assert_eq!(x.key.hash_into(HASH_SEED), y.key.hash_into(HASH_SEED));
    assert_ne!(x.key.hash_into(HASH_SEED), z.key.hash_into(HASH_SEED));
}

#[test]
fn prefixes_copy_their_arrays() {
    let mut src = Recording::new();
    let kernel = Op {
        key: Key {
            nparams: 2,
            nwords: 3,
            ..Key::new(Kind::Kernel)
        },
        ..Op::new(Kind::Kernel)
    };
    src.push(kernel, &[1, 2, 3], None);
    src.push(memset(64, 5, 6), &[], None);
    src.push(kernel, &[4, 5, 6], None);
    let mut dst = Recording::new();
    dst.extend_prefix(&src, 2);
    assert_eq!((dst.ops.len(), dst.words.len()), (2, 3));
    let mut all = Recording::new();
    all.extend_prefix(&src, 3);
    assert_eq!(all.words, [1, 2, 3, 4, 5, 6]);
    assert_eq!(all.ops[2].words(), 3..6);
    src.hash = 1;
    all.hash = 1;
    assert!(src.same_structure(&all));
    assert!(!src.same_structure(&dst));
}

#[test]
fn memset_and_copy_params() {
    let p = memset_params(&memset(64, 0x1000, 5));
    assert_eq!((p.elementSize, p.width, p.height), (4, 16, 1));
    let c = copy_params(&Op {
        src: 0x2000,
        ..Op::new(Kind::CopyDtoD)
    });
    assert_eq!(c.srcDevice, 0x2000);
    assert_eq!(c.srcMemoryType, CUmemorytype::CU_MEMORYTYPE_DEVICE);
}
