//! [`kernel_struct!`](crate::kernel_struct): structs passed by value to kernels, with a
//! compile-time proof that the host layout is the device layout.

/// Declares a `#[repr(C)]` struct that can be passed to a kernel by value, and implements
/// [`DeviceRepr`](crate::args::DeviceRepr) for it without `unsafe` on the user's side.
///
/// The macro adds `#[repr(C)]` and `#[derive(Clone, Copy)]` (do not derive those
/// yourself); other attributes, doc comments and visibilities are kept. Every field type
/// must implement `DeviceRepr`; generic structs and tuple structs are not supported, and
/// a struct needs at least one field.
///
/// At compile time, the macro lays the struct out as the device does (each field at the
/// next multiple of its `DEVICE_ALIGN`, the struct aligned to its most-aligned field or
/// to its declared alignment, whichever is larger, its size rounded up to that alignment)
/// and fails the build, naming the field, when the host `repr(C)` layout differs. Padding
/// bytes are never copied into a parameter buffer.
///
/// An over-aligned struct, C++ `struct alignas(16) S { ... };`, is declared with
/// `#[repr(align(16))]` (or `#[repr(C, align(16))]`): its `DEVICE_ALIGN` is the declared
/// alignment, and its size is rounded up to it, on both sides.
///
/// ```
/// use cudadrv::args::DeviceRepr;
///
/// cudadrv::kernel_struct! {
///     /// `struct alignas(16) Pair { float a; int b; };` on the device.
///     #[repr(C, align(16))]
///     pub struct Pair16 {
///         pub a: f32,
///         pub b: i32,
///     }
/// }
///
/// assert_eq!((Pair16::DEVICE_SIZE, Pair16::DEVICE_ALIGN), (16, 16));
/// ```
///
/// ```
/// use cudadrv::args::{DeviceRepr, Float4};
///
/// cudadrv::kernel_struct! {
///     /// `struct Pair { float a; float4 b; };` on the device.
///     #[derive(Debug)]
///     pub struct Pair {
///         pub a: f32,
///         pub b: Float4,
///     }
/// }
///
/// assert_eq!(core::mem::offset_of!(Pair, b), 16); // 12 bytes of padding after `a`
/// assert_eq!((Pair::DEVICE_SIZE, Pair::DEVICE_ALIGN), (32, 16));
/// ```
///
/// A field whose host alignment is not its device alignment is rejected:
///
/// ```compile_fail
/// use cudadrv::args::DeviceRepr;
///
/// /// Eight bytes that the device aligns to 8 but the host to 1.
/// #[derive(Clone, Copy)]
/// #[repr(C)]
/// struct Bytes8([u8; 8]);
/// // SAFETY: no padding; the device type is 8-aligned.
/// unsafe impl DeviceRepr for Bytes8 {
///     const DEVICE_SIZE: usize = 8;
///     const DEVICE_ALIGN: usize = 8;
/// }
///
/// cudadrv::kernel_struct! {
///     struct Bad { a: u8, b: Bytes8 } // host offset of `b` is 1, device offset 8
/// }
/// ```
///
/// So is a field type more aligned on the host than its `DEVICE_ALIGN` (it would make the
/// struct more aligned than the device's):
///
/// ```compile_fail
/// use cudadrv::args::DeviceRepr;
///
/// /// Sixteen bytes, 16-aligned on the host, that claim a device alignment of 4.
/// #[derive(Clone, Copy)]
/// #[repr(C, align(16))]
/// struct Loose([u32; 4]);
/// // SAFETY: no padding (the contract does not tie host and device alignment).
/// unsafe impl DeviceRepr for Loose {
///     const DEVICE_SIZE: usize = 16;
///     const DEVICE_ALIGN: usize = 4;
/// }
///
/// cudadrv::kernel_struct! {
///     struct Bad { a: Loose } // host alignment 16, device alignment 4
/// }
/// ```
#[macro_export]
macro_rules! kernel_struct {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $(
                $(#[$fmeta:meta])*
                $fvis:vis $field:ident : $fty:ty
            ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[repr(C)]
        #[derive(Clone, Copy)]
        $vis struct $name {
            $(
                $(#[$fmeta])*
                $fvis $field: $fty,
            )+
        }

        // SAFETY: the `const` item below fails compilation unless every field's host
        // offset equals its device offset, no field is more aligned on the host than on
        // the device, the struct is at least as aligned as its most-aligned field's
        // `DEVICE_ALIGN` (more only by a declared `repr(align)`, as `alignas` on the
        // device), and its size is the device size for that alignment; so the host bytes
        // are the device bytes. `align_of` is a power of two dividing `size_of`.
        // `write_device_bytes` writes each field through its own `DeviceRepr`
        // implementation at its offset, skipping padding.
        unsafe impl $crate::args::DeviceRepr for $name {
            const DEVICE_SIZE: usize = ::core::mem::size_of::<$name>();
            const DEVICE_ALIGN: usize = ::core::mem::align_of::<$name>();
            const PLAIN: bool = true $(&& <$fty as $crate::args::DeviceRepr>::PLAIN)+;
            const SIGNATURE: u64 = {
                let mut h = $crate::args::signature_mix(
                    $crate::args::SIGNATURE_SEED,
                    ::core::mem::size_of::<$name>() as u64,
                );
                $(
                    h = $crate::args::signature_mix(
                        h,
                        ::core::mem::offset_of!($name, $field) as u64,
                    );
                    h = $crate::args::signature_mix(
                        h,
                        <$fty as $crate::args::DeviceRepr>::SIGNATURE,
                    );
                )+
                h
            };

            unsafe fn write_device_bytes(&self, dst: *mut u8) {
                $(
                    // SAFETY: the field lies inside the struct, at its host offset, and
                    // the caller guarantees `dst` is valid for `size_of::<Self>()` bytes.
                    unsafe {
                        $crate::args::DeviceRepr::write_device_bytes(
                            &self.$field,
                            dst.add(::core::mem::offset_of!($name, $field)),
                        )
                    };
                )+
            }
        }

        const _: () = {
            let mut end: usize = 0;
            let mut align: usize = 1;
            $(
                let field_align = <$fty as $crate::args::DeviceRepr>::DEVICE_ALIGN;
                ::core::assert!(
                    ::core::mem::align_of::<$fty>() <= field_align,
                    ::core::concat!(
                        "kernel_struct!: the type of `", ::core::stringify!($name), "::",
                        ::core::stringify!($field), "` is more aligned on the host than its ",
                        "DEVICE_ALIGN"
                    ),
                );
                let offset = $crate::args::align_up(end, field_align);
                ::core::assert!(
                    ::core::mem::offset_of!($name, $field) == offset,
                    ::core::concat!(
                        "kernel_struct!: the host offset of `", ::core::stringify!($name),
                        "::", ::core::stringify!($field), "` differs from its device offset ",
                        "(a field type's host alignment differs from its DEVICE_ALIGN)"
                    ),
                );
                if field_align > align {
                    align = field_align;
                }
                end = offset.saturating_add(<$fty as $crate::args::DeviceRepr>::DEVICE_SIZE);
            )+
            // With no field more aligned on the host than on the device, a host alignment
            // above the largest field `DEVICE_ALIGN` can only come from a declared
            // `repr(align(N))`: the device struct is then `alignas(N)`.
            ::core::assert!(
                ::core::mem::align_of::<$name>() >= align,
                ::core::concat!(
                    "kernel_struct!: the host alignment of `", ::core::stringify!($name),
                    "` is below its device alignment (the largest field DEVICE_ALIGN)"
                ),
            );
            ::core::assert!(
                ::core::mem::size_of::<$name>()
                    == $crate::args::align_up(end, ::core::mem::align_of::<$name>()),
                ::core::concat!(
                    "kernel_struct!: the host size of `", ::core::stringify!($name),
                    "` differs from its device size (a field's DEVICE_SIZE differs from its ",
                    "host size)"
                ),
            );
        };
    };
}

#[cfg(test)]
mod tests {
    use crate::args::{DeviceRepr, Float2, Float4, KernelArgs, LayoutRule, PackedArgs, ParamSpec};
    use core::mem::{align_of, offset_of, size_of};

    crate::kernel_struct! {
        /// `{float; float4}`: 12 bytes of padding after `a`.
        #[derive(Debug, PartialEq)]
        pub struct Pair {
            /// First.
            pub a: f32,
            /// Second, 16-aligned.
            pub b: Float4,
        }
    }

    crate::kernel_struct! {
        struct Mixed { flag: bool, v: Float2, n: u64, tail: [u8; 3], }
    }

    crate::kernel_struct! {
        /// `struct alignas(16) { float; int; }`: 8 bytes of fields, 16 of struct.
        #[derive(Debug, PartialEq)]
        #[repr(C, align(16))]
        pub struct Small16 {
            /// First.
            pub a: f32,
            /// Second.
            pub b: i32,
        }
    }

    crate::kernel_struct! {
        /// `struct alignas(32) { float4; char; }`.
        #[repr(align(32))]
        struct Vec32 { v: Float4, tag: u8 }
    }

    crate::kernel_struct! {
        /// `struct alignas(64) { double; float2; }`: one cache line.
        #[repr(align(64))]
        struct Line { d: f64, f: Float2 }
    }

    crate::kernel_struct! {
        /// An over-aligned struct as a field: `{ char; Small16; }`.
        struct Outer { c: u8, inner: Small16 }
    }

    #[test]
    fn over_aligned_structs_follow_their_declared_alignment() {
        assert_eq!((size_of::<Small16>(), align_of::<Small16>()), (16, 16));
        assert_eq!((Small16::DEVICE_SIZE, Small16::DEVICE_ALIGN), (16, 16));
        assert_eq!(offset_of!(Small16, b), 4);

        assert_eq!((Vec32::DEVICE_SIZE, Vec32::DEVICE_ALIGN), (32, 32));
        assert_eq!(offset_of!(Vec32, tag), 16);
        assert_eq!((Line::DEVICE_SIZE, Line::DEVICE_ALIGN), (64, 64));
        assert_eq!(offset_of!(Line, f), 8);
        assert_eq!((Outer::DEVICE_SIZE, Outer::DEVICE_ALIGN), (32, 16));
        assert_eq!(offset_of!(Outer, inner), 16);

        // As parameters: each goes to the next multiple of its declared alignment.
        type List = (u8, Small16, u8, Vec32, u8, Line);
        let offsets: [Option<usize>; 6] = core::array::from_fn(|i| {
            crate::args::param_offset(LayoutRule::Alignment, List::PARAMS, i)
        });
        assert_eq!(
            offsets,
            [Some(0), Some(16), Some(32), Some(64), Some(96), Some(128)]
        );
        let v = Vec32 {
            v: Float4::new(1.0, 2.0, 3.0, 4.0),
            tag: 7,
        };
        let line = Line {
            d: 2.5,
            f: Float2::new(-1.0, 1.0),
        };
        let small = Small16 { a: 0.5, b: -3 };
        let args = (1u8, small, 2u8, v, 3u8, line);
        let packed = PackedArgs::from_args(&args).unwrap();
        assert_eq!(packed.len(), 192);
        let b = packed.as_bytes();
        assert_eq!(b[16..20], 0.5f32.to_le_bytes());
        assert_eq!(b[20..24], (-3i32).to_le_bytes());
        assert_eq!(
            b[24..32],
            [0; 8],
            "trailing padding of the over-aligned struct"
        );
        assert_eq!(b[76..80], 4.0f32.to_le_bytes());
        assert_eq!(b[80], 7);
        assert_eq!(b[81..96], [0; 15]);
        assert_eq!(b[128..136], 2.5f64.to_le_bytes());
        assert_eq!(b[136..140], (-1.0f32).to_le_bytes());
        let mut by_push = PackedArgs::new();
        by_push.push(&args.0).unwrap();
        by_push.push(&args.1).unwrap();
        by_push.push(&args.2).unwrap();
        by_push.push(&args.3).unwrap();
        by_push.push(&args.4).unwrap();
        by_push.push(&args.5).unwrap();
        assert_eq!(by_push.as_bytes(), packed.as_bytes());
        assert_eq!(args.1, small);
    }

    #[test]
    fn pair_has_device_padding() {
        assert_eq!(offset_of!(Pair, b), 16);
        assert_eq!((size_of::<Pair>(), align_of::<Pair>()), (32, 16));
        assert_eq!((Pair::DEVICE_SIZE, Pair::DEVICE_ALIGN), (32, 16));
        assert_eq!(
            crate::args::struct_layout(&[ParamSpec::of::<f32>(), ParamSpec::of::<Float4>()]),
            Some(ParamSpec::of::<Pair>())
        );
    }

    #[test]
    fn mixed_layout() {
        assert_eq!(offset_of!(Mixed, v), 8);
        assert_eq!(offset_of!(Mixed, n), 16);
        assert_eq!(offset_of!(Mixed, tail), 24);
        assert_eq!((Mixed::DEVICE_SIZE, Mixed::DEVICE_ALIGN), (32, 8));
    }

    #[test]
    fn padding_is_not_copied() {
        let pair = Pair {
            a: 1.5,
            b: Float4::new(1.0, 2.0, 3.0, 4.0),
        };
        let mut out = [0xaau8; 32];
        // SAFETY: `out` holds `Pair::DEVICE_SIZE` bytes.
        unsafe { pair.write_device_bytes(out.as_mut_ptr()) };
        assert_eq!(out[0..4], 1.5f32.to_le_bytes());
        assert_eq!(out[4..16], [0xaa; 12]);
        assert_eq!(out[16..20], 1.0f32.to_le_bytes());
        assert_eq!(out[28..32], 4.0f32.to_le_bytes());

        let m = Mixed {
            flag: true,
            v: Float2::new(0.0, 1.0),
            n: 3,
            tail: [4, 5, 6],
        };
        let mut out = [0xaau8; 32];
        // SAFETY: `out` holds `Mixed::DEVICE_SIZE` bytes.
        unsafe { m.write_device_bytes(out.as_mut_ptr()) };
        assert_eq!(out[0..8], [1, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa]);
        assert_eq!(out[16..24], 3u64.to_le_bytes());
        assert_eq!(out[24..32], [4, 5, 6, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa]);
        assert!(m.flag && m.v.y == 1.0);
    }

    #[test]
    fn struct_params_differ_between_rules() {
        let args = (
            1i32,
            Pair {
                a: 2.0,
                b: Float4::default(),
            },
        );
        let by_align = PackedArgs::from_args(&args).unwrap();
        let mut by_size = PackedArgs::<4096>::with_rule(LayoutRule::SizeMultiple);
        by_size.extend(&args).unwrap();
        assert_eq!(by_align.params()[1].offset, 16);
        assert_eq!(by_size.params()[1].offset, 32);
        assert_eq!((by_align.len(), by_size.len()), (48, 64));
        assert_eq!(by_align.as_bytes()[16..20], 2.0f32.to_le_bytes());
        assert_eq!(by_align.as_bytes()[20..32], [0; 12]);
        assert_eq!(args.1, args.1.clone());
    }
}
