//! The CUDA vector types (`vector_types.h`) with their device alignment.
//!
//! Each type is `#[repr(C, align(N))]` with the alignment the CUDA headers give it
//! (`__builtin_align__`), so its host layout equals its device layout; a compile-time
//! check below each definition keeps it that way. Two-component types are aligned to
//! their full size (`float2`: 8), four-component types to their full size up to 16
//! (`float4`: 16, `short4`: 8), and three-component types to their element
//! (`float3`: size 12, alignment 4).

use super::DeviceRepr;

/// Declares one vector type, its `new` constructor, its [`DeviceRepr`] implementation and
/// the compile-time check of its host size and alignment.
macro_rules! vector_type {
    (
        $name:ident = $cname:literal, $elem:ty, size $size:literal, align $align:literal,
        derive($($derive:ident),*), ($($field:ident),+)
    ) => {
        #[doc = concat!(
            "CUDA `", $cname, "`: `", stringify!($elem), "` components `",
            stringify!($($field),+), "`; device size ", $size, ", device alignment ",
            $align, "."
        )]
        #[repr(C, align($align))]
        #[derive(Clone, Copy, Debug, Default, PartialEq $(, $derive)*)]
        pub struct $name {
            $(
                #[doc = concat!("Component `", stringify!($field), "`.")]
                pub $field: $elem,
            )+
        }

        impl $name {
            #[doc = concat!("Builds a `", $cname, "` from its components.")]
            #[must_use]
            pub const fn new($($field: $elem),+) -> Self {
                Self { $($field),+ }
            }
        }

        // SAFETY: the components are scalars with the device encoding, laid out without
        // padding (checked below: size == components * element size), and the host
        // size and alignment equal the device ones (checked below).
        unsafe impl DeviceRepr for $name {
            const DEVICE_SIZE: usize = $size;
            const DEVICE_ALIGN: usize = $align;
            const PLAIN: bool = true;
        }

        const _: () = {
            assert!(
                core::mem::size_of::<$name>() == $size,
                concat!("host size of `", stringify!($name), "` differs from the device size"),
            );
            assert!(
                core::mem::align_of::<$name>() == $align,
                concat!(
                    "host alignment of `", stringify!($name), "` differs from the device ",
                    "alignment"
                ),
            );
            assert!(
                [$(stringify!($field)),+].len() * core::mem::size_of::<$elem>() == $size,
                concat!("`", stringify!($name), "` has padding"),
            );
        };
    };
}

vector_type!(Char2 = "char2", i8, size 2, align 2, derive(Eq, Hash), (x, y));
vector_type!(Char4 = "char4", i8, size 4, align 4, derive(Eq, Hash), (x, y, z, w));
vector_type!(UChar2 = "uchar2", u8, size 2, align 2, derive(Eq, Hash), (x, y));
vector_type!(UChar4 = "uchar4", u8, size 4, align 4, derive(Eq, Hash), (x, y, z, w));
vector_type!(Short2 = "short2", i16, size 4, align 4, derive(Eq, Hash), (x, y));
vector_type!(Short4 = "short4", i16, size 8, align 8, derive(Eq, Hash), (x, y, z, w));
vector_type!(UShort2 = "ushort2", u16, size 4, align 4, derive(Eq, Hash), (x, y));
vector_type!(UShort4 = "ushort4", u16, size 8, align 8, derive(Eq, Hash), (x, y, z, w));
vector_type!(Int2 = "int2", i32, size 8, align 8, derive(Eq, Hash), (x, y));
vector_type!(Int3 = "int3", i32, size 12, align 4, derive(Eq, Hash), (x, y, z));
vector_type!(Int4 = "int4", i32, size 16, align 16, derive(Eq, Hash), (x, y, z, w));
vector_type!(UInt2 = "uint2", u32, size 8, align 8, derive(Eq, Hash), (x, y));
vector_type!(UInt3 = "uint3", u32, size 12, align 4, derive(Eq, Hash), (x, y, z));
vector_type!(UInt4 = "uint4", u32, size 16, align 16, derive(Eq, Hash), (x, y, z, w));
vector_type!(LongLong2 = "longlong2", i64, size 16, align 16, derive(Eq, Hash), (x, y));
vector_type!(ULongLong2 = "ulonglong2", u64, size 16, align 16, derive(Eq, Hash), (x, y));
vector_type!(Float2 = "float2", f32, size 8, align 8, derive(), (x, y));
vector_type!(Float3 = "float3", f32, size 12, align 4, derive(), (x, y, z));
vector_type!(Float4 = "float4", f32, size 16, align 16, derive(), (x, y, z, w));
vector_type!(Double2 = "double2", f64, size 16, align 16, derive(), (x, y));

#[cfg(test)]
mod tests {
    use super::*;

    fn layout<T: DeviceRepr>() -> (usize, usize) {
        (T::DEVICE_SIZE, T::DEVICE_ALIGN)
    }

    #[test]
    fn sizes_and_aligns_match_vector_types_h() {
        assert_eq!(layout::<Char2>(), (2, 2));
        assert_eq!(layout::<Char4>(), (4, 4));
        assert_eq!(layout::<UChar2>(), (2, 2));
        assert_eq!(layout::<UChar4>(), (4, 4));
        assert_eq!(layout::<Short2>(), (4, 4));
        assert_eq!(layout::<Short4>(), (8, 8));
        assert_eq!(layout::<UShort2>(), (4, 4));
        assert_eq!(layout::<UShort4>(), (8, 8));
        assert_eq!(layout::<Int2>(), (8, 8));
        assert_eq!(layout::<Int3>(), (12, 4));
        assert_eq!(layout::<Int4>(), (16, 16));
        assert_eq!(layout::<UInt2>(), (8, 8));
        assert_eq!(layout::<UInt3>(), (12, 4));
        assert_eq!(layout::<UInt4>(), (16, 16));
        assert_eq!(layout::<LongLong2>(), (16, 16));
        assert_eq!(layout::<ULongLong2>(), (16, 16));
        assert_eq!(layout::<Float2>(), (8, 8));
        assert_eq!(layout::<Float3>(), (12, 4));
        assert_eq!(layout::<Float4>(), (16, 16));
        assert_eq!(layout::<Double2>(), (16, 16));
    }

    #[test]
    fn host_layout_equals_device_layout() {
        assert_eq!(core::mem::align_of::<Float4>(), 16);
        assert_eq!(core::mem::size_of::<Float3>(), 12);
        assert_eq!(core::mem::align_of::<Double2>(), 16);
        assert_eq!(core::mem::size_of::<[Float2; 3]>(), 24);
    }

    #[test]
    fn new_sets_components() {
        let v = Float4::new(1.0, 2.0, 3.0, 4.0);
        assert_eq!((v.x, v.y, v.z, v.w), (1.0, 2.0, 3.0, 4.0));
        assert_eq!(Int3::new(1, 2, 3), Int3 { x: 1, y: 2, z: 3 });
        assert_eq!(UChar2::default(), UChar2::new(0, 0));
    }

    #[test]
    fn device_bytes_are_components_in_order() {
        let mut out = [0u8; 8];
        // SAFETY: `out` holds `Short4::DEVICE_SIZE` (8) bytes.
        unsafe { Short4::new(1, -1, 2, 3).write_device_bytes(out.as_mut_ptr()) };
        assert_eq!(out, [1, 0, 0xff, 0xff, 2, 0, 3, 0]);
    }
}
