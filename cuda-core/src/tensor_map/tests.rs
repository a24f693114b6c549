use super::*;
use crate::testing::{CASES, Rng};

fn rule_of(e: Error) -> (&'static str, Option<u8>) {
    match e {
        Error::TensorMap { rule, dim } => (rule, dim),
        other => panic!("not a tensor-map error: {other:?}"),
    }
}

#[test]
fn im2col_rules() {
    let d = Im2colDesc::new::<u32>(&[4, 8, 2], &[-1], &[-1], 4, 16).unwrap();
    assert_eq!(d.box_bytes(), 16 * 4 * 4);
    assert_eq!(d.channels_per_pixel(), 4);
    assert_eq!(d.corner_range(), (-32768, 32767));
    d.validate(0x1000).unwrap();
    assert_eq!(
        rule_of(Im2colDesc::new::<u32>(&[4, 8], &[], &[], 4, 16).unwrap_err()).0,
        "an im2col map needs rank 3..=5"
    );
    assert_eq!(
        rule_of(Im2colDesc::new::<u32>(&[4, 8, 8, 2], &[-1], &[-1], 4, 16).unwrap_err()).0,
        "the im2col corners need one entry per spatial dimension (rank - 2)"
    );
    let five = Im2colDesc::new::<u32>(&[4, 8, 8, 8, 2], &[0, 0, 16], &[0; 3], 4, 16).unwrap();
    assert_eq!(
        rule_of(five.validate(0).unwrap_err()),
        (
            "each im2col corner must fit the rank's range (rank 3: 16 bits, rank 4: 8 bits, \
         rank 5: 5 bits, signed)",
            Some(3)
        )
    );
    let too_many = Im2colDesc::new::<u32>(&[4, 8, 2], &[0], &[0], 4, 1025).unwrap();
    assert_eq!(
        rule_of(too_many.validate(0).unwrap_err()).0,
        "pixels_per_column must be 1..=1024"
    );
    // channels_per_pixel is the inner extent: 3 u32s are 12 bytes.
    let odd = Im2colDesc::new::<u32>(&[4, 8, 2], &[0], &[0], 3, 8).unwrap();
    assert_eq!(rule_of(odd.validate(0).unwrap_err()).1, Some(0));
    // Layout setters go through `map` and keep the box.
    let padded = d.map(|t| t.strides(&[32, 32 * 8])).unwrap();
    assert_eq!(padded.channels_per_pixel(), 4);
    assert_eq!(padded.layout().span_bytes(), 32 * 8 + 32 * 7 + 16);
}

#[test]
fn packed_strides_and_sizes() {
    let d = TiledDesc::new::<u32>(&[100, 30, 7], &[32, 8, 1]).unwrap();
    assert_eq!(d.strides[..2], [400, 12000]);
    assert_eq!(d.box_bytes(), 32 * 8 * 4);
    assert_eq!(d.span_bytes(), 100 * 30 * 7 * 4);
    d.validate(0x1000).unwrap();
    let s = d.element_strides(&[1, 2, 1]).unwrap();
    assert_eq!(s.box_bytes(), 32 * 4 * 4);
}

#[test]
fn padded_span() {
    let d = TiledDesc::new::<f32>(&[10, 4], &[4, 4])
        .unwrap()
        .strides(&[64])
        .unwrap();
    // last element at row 3, column 9: 3 * 64 + 9 * 4, plus one element
    assert_eq!(d.span_bytes(), 3 * 64 + 9 * 4 + 4);
    d.validate(0).unwrap();
}

#[test]
fn each_rule_is_named() {
    let ok = TiledDesc::new::<u32>(&[64, 64], &[32, 32]).unwrap();
    ok.validate(256).unwrap();
    assert!(
        rule_of(ok.validate(8).unwrap_err())
            .0
            .contains("16-byte aligned")
    );
    let e = TiledDesc::new::<u32>(&[64, 64], &[32, 300]).unwrap();
    assert_eq!(
        rule_of(e.validate(0).unwrap_err()),
        ("each box extent must be 1..=256", Some(1))
    );
    let e = TiledDesc::new::<u32>(&[64, 0], &[32, 32]).unwrap();
    assert_eq!(rule_of(e.validate(0).unwrap_err()).1, Some(1));
    let e = TiledDesc::new::<u32>(&[10, 4], &[4, 4]).unwrap();
    // packed stride 40 is not a multiple of 16
    assert_eq!(
        rule_of(e.validate(0).unwrap_err()),
        ("each stride must be a multiple of 16 bytes", Some(1))
    );
    let e = TiledDesc::new::<u32>(&[64, 64], &[3, 4]).unwrap();
    assert_eq!(rule_of(e.validate(0).unwrap_err()).1, Some(0));
    let e = ok.element_strides(&[1, 9]).unwrap();
    assert_eq!(
        rule_of(e.validate(0).unwrap_err()),
        ("each element stride must be 1..=8", Some(1))
    );
    let e = ok.swizzle(Swizzle::B64);
    assert!(
        rule_of(e.validate(0).unwrap_err())
            .0
            .contains("swizzle span")
    );
    ok.swizzle(Swizzle::B128).validate(0).unwrap();
    let e = ok.interleave(Interleave::B16);
    assert!(rule_of(e.validate(0).unwrap_err()).0.contains("rank 3"));
    let e = ok.oob_fill(OobFill::NanRequestZeroFma);
    assert!(
        rule_of(e.validate(0).unwrap_err())
            .0
            .contains("floating-point")
    );
    let e = TiledDesc::new::<u32>(&[64, 64], &[32, 32])
        .unwrap()
        .strides(&[128])
        .unwrap();
    assert!(rule_of(e.validate(0).unwrap_err()).0.contains("cover"));
    let i = TiledDesc::new::<u8>(&[64, 8, 8], &[32, 4, 4]).unwrap();
    let e = i.interleave(Interleave::B32);
    assert!(
        rule_of(e.validate(0).unwrap_err())
            .0
            .contains("32-byte swizzle")
    );
    i.interleave(Interleave::B32)
        .swizzle(Swizzle::B32)
        .validate(0)
        .unwrap();
    assert!(
        rule_of(
            i.interleave(Interleave::B32)
                .swizzle(Swizzle::B32)
                .validate(16)
                .unwrap_err()
        )
        .0
        .contains("32-byte aligned")
    );
}

#[test]
fn shape_errors_before_validation() {
    assert!(TiledDesc::new::<u32>(&[], &[]).is_err());
    assert!(TiledDesc::new::<u32>(&[1; 6], &[1; 6]).is_err());
    assert!(TiledDesc::new::<u32>(&[4, 4], &[4]).is_err());
    let d = TiledDesc::new::<u32>(&[4, 4], &[4, 4]).unwrap();
    assert!(d.strides(&[16, 16]).is_err());
    assert!(d.element_strides(&[1]).is_err());
}

/// A closure given to [`Im2colDesc::map`] that returns a descriptor of another rank
/// is refused (it used to underflow `rank - 2` in `validate` at rank 1, and pass
/// ranks 2 and 4 to the driver with the wrong number of corners).
#[test]
fn im2col_map_changing_rank_is_an_error() {
    let d = Im2colDesc::new::<u32>(&[4, 8, 2], &[-1], &[-1], 4, 16).unwrap();
    let boxes = [4u32, 1, 1, 1, 1];
    let shapes: [&[u64]; 4] = [&[16], &[16, 16], &[16, 8, 8, 2], &[16, 8, 8, 8, 2]];
    for dims in shapes {
        let r = d
            .map(|_| TiledDesc::new::<u32>(dims, &boxes[..dims.len()]))
            .and_then(|m| m.validate(0));
        assert_eq!(
            rule_of(r.unwrap_err()),
            ("the closure of Im2colDesc::map must keep the rank", None),
            "rank {}",
            dims.len()
        );
    }
    // The same descriptors reached without `map`: `validate` refuses them.
    for rank in [0, 1, 2, 6, 7, usize::MAX] {
        let mut bad = d;
        bad.base.rank = rank;
        assert_eq!(
            rule_of(bad.validate(0).unwrap_err()),
            ("an im2col map needs rank 3..=5", None),
            "rank {rank}"
        );
        // SAFETY: the descriptor is invalid, so validation refuses it before any
        // driver call and no map is made that could outlive memory.
        let e = unsafe { TensorMap::im2col_raw(&bad, 0) }.unwrap_err();
        assert_eq!(rule_of(e).0, "an im2col map needs rank 3..=5");
    }
}

/// A rank outside 1..=5 is an error, not an underflow (rank 0) or an index past the
/// arrays (rank 6 and up).
#[test]
fn tiled_rank_out_of_range_is_an_error() {
    let d = TiledDesc::new::<u32>(&[64, 64], &[32, 32]).unwrap();
    for rank in [0, MAX_RANK + 1, MAX_RANK + 2, usize::MAX] {
        let mut bad = d;
        bad.rank = rank;
        assert_eq!(
            rule_of(bad.validate(0).unwrap_err()),
            ("the rank must be 1..=5", None),
            "rank {rank}"
        );
        // SAFETY: as in `im2col_map_changing_rank_is_an_error`: refused before any
        // driver call.
        let e = unsafe { TensorMap::tiled_raw(&bad, 0) }.unwrap_err();
        assert_eq!(rule_of(e).0, "the rank must be 1..=5");
        // The size helpers stay in bounds too.
        let _ = (bad.span_bytes(), bad.box_bytes());
    }
}

/// The values these property tests draw (edge values and random ones).
trait DescValues {
    fn wild_u64(&mut self) -> u64;
    fn wild_u32(&mut self) -> u32;
}

impl DescValues for Rng {
    /// Edge values and random ones.
    fn wild_u64(&mut self) -> u64 {
        match self.below(3) {
            0 => self.pick(&[
                0,
                1,
                15,
                16,
                32,
                256,
                (1 << 32) - 1,
                1 << 32,
                (1 << 32) + 1,
                (1 << 40) - 16,
                1 << 40,
                u64::MAX - 15,
                u64::MAX,
            ]),
            1 => self.below(1 << 16),
            _ => self.next(),
        }
    }

    fn wild_u32(&mut self) -> u32 {
        match self.below(3) {
            0 => self.pick(&[0, 1, 8, 9, 255, 256, 257, 1024, 1025, u32::MAX]),
            1 => self.below(512) as u32,
            _ => self.next() as u32,
        }
    }
}

const DATA_TYPES: [TensorDataType; 13] = [
    TensorDataType::U8,
    TensorDataType::U16,
    TensorDataType::U32,
    TensorDataType::I32,
    TensorDataType::U64,
    TensorDataType::I64,
    TensorDataType::F16,
    TensorDataType::F32,
    TensorDataType::F64,
    TensorDataType::Bf16,
    TensorDataType::F32Ftz,
    TensorDataType::Tf32,
    TensorDataType::Tf32Ftz,
];

/// A descriptor with arbitrary fields, mostly plausible so that a good share passes,
/// each field now and then an edge or random value (ranks outside 1..=5 included).
fn arbitrary_tiled(r: &mut Rng, ranks: core::ops::RangeInclusive<usize>) -> TiledDesc {
    let data_type = r.pick(&DATA_TYPES);
    let size = data_type.size();
    let rank = if r.one_in(10) {
        r.pick(&[0, 1, 2, 6, 7, usize::MAX])
    } else {
        *ranks.start() + r.below((ranks.end() - ranks.start() + 1) as u64) as usize
    };
    let interleave = if r.one_in(4) {
        r.pick(&[Interleave::B16, Interleave::B32])
    } else {
        Interleave::None
    };
    let align = if interleave == Interleave::B32 {
        32
    } else {
        16
    };
    let mut d = TiledDesc {
        data_type,
        rank,
        dims: [1; MAX_RANK],
        strides: [0; MAX_RANK - 1],
        box_dims: [1; MAX_RANK],
        element_strides: [1; MAX_RANK],
        interleave,
        swizzle: if interleave == Interleave::B32 && !r.one_in(8) {
            Swizzle::B32
        } else {
            r.pick(&[
                Swizzle::None,
                Swizzle::None,
                Swizzle::B32,
                Swizzle::B64,
                Swizzle::B128,
            ])
        },
        l2_promotion: r.pick(&[
            L2Promotion::None,
            L2Promotion::B64,
            L2Promotion::B128,
            L2Promotion::B256,
        ]),
        oob_fill: if r.one_in(4) {
            OobFill::NanRequestZeroFma
        } else {
            OobFill::Zero
        },
    };
    for i in 0..MAX_RANK {
        d.dims[i] = if r.one_in(12) {
            r.wild_u64()
        } else {
            1 + r.below(64)
        };
        d.box_dims[i] = if r.one_in(12) {
            r.wild_u32()
        } else {
            r.pick(&[1, 2, 4, 8, 16, 32])
        };
        d.element_strides[i] = if r.one_in(12) {
            r.wild_u32()
        } else {
            1 + r.below(2) as u32
        };
    }
    // A box whose inner extent is 16 (or 32) bytes, or a multiple.
    if !r.one_in(8) {
        d.box_dims[0] = ((align / size) * r.pick(&[1, 2, 4])) as u32;
    }
    // Packed strides rounded up to the alignment, now and then a wild one.
    let mut extent = d.dims[0].saturating_mul(size);
    for i in 0..MAX_RANK - 1 {
        let s = extent.div_ceil(align).saturating_mul(align);
        d.strides[i] = if r.one_in(12) { r.wild_u64() } else { s };
        extent = d.strides[i].saturating_mul(d.dims[i + 1]);
    }
    d
}

fn arbitrary_address(r: &mut Rng) -> u64 {
    if r.one_in(8) {
        r.wild_u64()
    } else {
        r.below(1 << 20) * 256
    }
}

/// What [`TensorMap::tiled_raw`] and the size helpers rely on once
/// [`TiledDesc::validate`] passed.
fn assert_tiled_invariants(d: &TiledDesc, address: u64) {
    let rank = d.rank;
    assert!((1..=MAX_RANK).contains(&rank), "{d:?}");
    assert_eq!(address % 16, 0);
    for i in 0..rank {
        assert!((1..=1 << 32).contains(&d.dims[i]), "{d:?}");
        assert!((1..=MAX_BOX_DIM).contains(&d.box_dims[i]), "{d:?}");
        assert!(
            (1..=MAX_ELEMENT_STRIDE).contains(&d.element_strides[i]),
            "{d:?}"
        );
    }
    for &s in &d.strides[..rank - 1] {
        assert!(s % 16 == 0 && s < 1 << 40, "{d:?}");
        if d.interleave == Interleave::B32 {
            assert_eq!(s % 32, 0, "{d:?}");
        }
    }
    if d.interleave == Interleave::None {
        assert_eq!(u64::from(d.box_dims[0]) * d.data_type.size() % 16, 0);
    } else {
        assert!(rank >= 3, "{d:?}");
    }
    assert_eq!((d.dims().len(), d.box_dims().len()), (rank, rank));
    assert!(d.span_bytes() >= d.data_type.size());
    assert!(d.box_bytes() >= d.data_type.size());
}

/// Property: [`TiledDesc::validate`] never panics on arbitrary fields, and whatever
/// it accepts satisfies what the encode relies on.
#[test]
fn tiled_validate_property() {
    let mut r = Rng(0x7115_D35C);
    let mut passed = 0;
    for _ in 0..CASES {
        let d = arbitrary_tiled(&mut r, 1..=MAX_RANK);
        let address = arbitrary_address(&mut r);
        match d.validate(address) {
            Ok(()) => {
                assert_tiled_invariants(&d, address);
                passed += 1;
            }
            Err(e) => {
                rule_of(e);
            }
        }
    }
    assert!(passed * 20 >= CASES, "only {passed} of {CASES} passed");
}

/// Property: [`Im2colDesc::validate`] never panics on arbitrary fields, nor after
/// [`Im2colDesc::map`] with an arbitrary closure, and whatever it accepts satisfies
/// what [`TensorMap::im2col_raw`] relies on.
#[test]
fn im2col_validate_property() {
    let mut r = Rng(0x1A2C_0111);
    let mut passed = 0;
    for case in 0..CASES {
        let desc = if case % 2 == 0 {
            let mut base = arbitrary_tiled(&mut r, 3..=MAX_RANK);
            if !r.one_in(8) {
                base.box_dims[1..].fill(1);
            }
            let corner = |r: &mut Rng| {
                if r.one_in(8) {
                    r.pick(&[
                        i32::MIN,
                        -(1 << 15) - 1,
                        -(1 << 15),
                        -17,
                        -16,
                        15,
                        16,
                        1 << 15,
                        i32::MAX,
                    ])
                } else {
                    r.below(9) as i32 - 4
                }
            };
            let mut lower = [0; MAX_RANK - 2];
            let mut upper = [0; MAX_RANK - 2];
            for i in 0..MAX_RANK - 2 {
                lower[i] = corner(&mut r);
                upper[i] = corner(&mut r);
            }
            let pixels_per_column = if r.one_in(8) {
                r.wild_u32()
            } else {
                1 + r.below(1024) as u32
            };
            Ok(Im2colDesc {
                base,
                lower,
                upper,
                pixels_per_column,
            })
        } else {
            // Through the public API only: `map` with a closure that replaces or
            // adjusts the layout arbitrarily.
            let rank = 3 + r.below(3) as usize;
            let dims = [16, 8, 8, 8, 2];
            let corners = [-1, 0, 1];
            let d = Im2colDesc::new::<u32>(
                &dims[..rank],
                &corners[..rank - 2],
                &corners[..rank - 2],
                4,
                16,
            )
            .unwrap();
            let choice = r.below(4);
            let mut values = [0u64; MAX_RANK + 1];
            let mut steps = [0u32; MAX_RANK + 1];
            for i in 0..=MAX_RANK {
                values[i] = if r.one_in(4) {
                    r.wild_u64()
                } else {
                    1 + r.below(64)
                };
                steps[i] = if r.one_in(4) { r.wild_u32() } else { 1 };
            }
            let len = r.below(MAX_RANK as u64 + 2) as usize;
            let data_type = r.pick(&DATA_TYPES);
            d.map(|t| match choice {
                0 => TiledDesc::with_type(data_type, &values[..len], &steps[..len]),
                1 => t.strides(&values[..len]),
                2 => t.element_strides(&steps[..len]),
                _ => Ok(t.interleave(Interleave::B32).swizzle(Swizzle::B32)),
            })
        };
        let address = arbitrary_address(&mut r);
        match desc.and_then(|d| d.validate(address).map(|()| d)) {
            Ok(d) => {
                assert_tiled_invariants(&d.base, address);
                let rank = d.base.rank;
                assert!((3..=MAX_RANK).contains(&rank), "{d:?}");
                assert!((1..=MAX_IM2COL_PIXELS).contains(&d.pixels_per_column));
                assert!((1..=MAX_BOX_DIM).contains(&d.channels_per_pixel()));
                let (lo, hi) = d.corner_range();
                for c in d.lower[..rank - 2].iter().chain(&d.upper[..rank - 2]) {
                    assert!((lo..=hi).contains(c), "{d:?}");
                }
                let _ = d.box_bytes();
                passed += 1;
            }
            Err(e) => {
                rule_of(e);
            }
        }
    }
    assert!(passed * 20 >= CASES, "only {passed} of {CASES} passed");
}

#[test]
fn error_text_names_rule_and_dimension() {
    use std::format;
    let e = Error::TensorMap {
        rule: "each box extent must be 1..=256",
        dim: Some(1),
    };
    let s = format!("{e}");
    assert!(s.contains("box extent") && s.contains("dimension 1"), "{s}");
    assert!(e.is(cudadrv_sys::CUresult::CUDA_ERROR_INVALID_VALUE));
}
