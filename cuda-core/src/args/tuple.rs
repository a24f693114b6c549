//! [`KernelArgs`]: tuples of parameter values, as pointer arrays and as typed visits.

use core::ffi::c_void;
use core::marker::PhantomData;
use core::ptr;

use super::{DeviceRepr, ParamSpec};

/// The `kernelParams` array of a launch: one pointer per parameter, each pointing into
/// the argument tuple it was made from, which stays borrowed for `'a`.
#[derive(Clone, Copy, Debug)]
pub struct ArgPtrs<'a, P> {
    ptrs: P,
    _args: PhantomData<&'a ()>,
}

impl<'a, P: AsRef<[*mut c_void]> + AsMut<[*mut c_void]>> ArgPtrs<'a, P> {
    /// Wraps an array of parameter pointers.
    ///
    /// # Safety
    /// Each pointer must point to a parameter value, readable for the parameter's device
    /// size, for all of `'a`.
    #[must_use]
    pub const unsafe fn from_raw(ptrs: P) -> Self {
        Self {
            ptrs,
            _args: PhantomData,
        }
    }

    /// The pointers, one per parameter, in order.
    #[must_use]
    pub fn as_slice(&self) -> &[*mut c_void] {
        self.ptrs.as_ref()
    }

    /// The array as `cuLaunchKernel`'s `void **kernelParams`: null for no parameters.
    ///
    /// The driver only reads through the pointers; they stay valid while `self` lives.
    #[must_use]
    pub fn as_mut_ptr(&mut self) -> *mut *mut c_void {
        let ptrs = self.ptrs.as_mut();
        if ptrs.is_empty() {
            ptr::null_mut()
        } else {
            ptrs.as_mut_ptr()
        }
    }

    /// Number of parameters.
    #[must_use]
    pub fn len(&self) -> usize {
        self.ptrs.as_ref().len()
    }

    /// Whether there are no parameters.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.ptrs.as_ref().is_empty()
    }
}

/// Receives each parameter of a [`KernelArgs`] tuple with its type.
pub trait ArgVisitor {
    /// Error that stops the visit.
    type Error;

    /// Called once per parameter, in order.
    ///
    /// # Errors
    /// Whatever the visitor reports; the visit stops at the first error.
    fn visit<T: DeviceRepr>(&mut self, value: &T) -> Result<(), Self::Error>;
}

/// A kernel's argument list: a tuple of [`DeviceRepr`] values, `()` to `(T0, ..., T31)`
/// (arity 0 to 32). A kernel with more parameters takes them packed
/// ([`PackedArgs::extend`](super::PackedArgs::extend) with several tuples, or
/// [`PackedArgs::push`](super::PackedArgs::push)).
///
/// # Safety
/// An implementation promises that `COUNT == PARAMS.len()`, that
/// [`arg_ptrs`](Self::arg_ptrs) returns `COUNT` pointers of which the `i`-th points into
/// `self` at a value of the `i`-th parameter type (readable for `PARAMS[i].size` bytes
/// while `self` is borrowed), and that [`visit`](Self::visit) visits exactly those
/// `COUNT` values in order, with `PARAMS[i] == ParamSpec::of::<T>()` for the `i`-th.
pub unsafe trait KernelArgs {
    /// Number of parameters.
    const COUNT: usize;
    /// Device size and alignment of each parameter, in order.
    const PARAMS: &'static [ParamSpec];
    /// The fingerprint of the parameter list: the count and each type's
    /// [`DeviceRepr::SIGNATURE`], in order. A safe kernel's device build records it, and
    /// loading the kernel compares it with the host declaration's.
    const SIGNATURE: u64;
    /// The pointer array (`[*mut c_void; COUNT]`).
    type Ptrs: AsRef<[*mut c_void]> + AsMut<[*mut c_void]>;

    /// Pointers to each parameter value, for `kernelParams`; no allocation.
    fn arg_ptrs(&self) -> ArgPtrs<'_, Self::Ptrs>;

    /// Calls `visitor` with each parameter value, in order.
    ///
    /// # Errors
    /// The first error `visitor` returns.
    fn visit<V: ArgVisitor>(&self, visitor: &mut V) -> Result<(), V::Error>;
}

// SAFETY: no parameters: an empty pointer array and no visits.
unsafe impl KernelArgs for () {
    const COUNT: usize = 0;
    const PARAMS: &'static [ParamSpec] = &[];
    const SIGNATURE: u64 = crate::args::signature_mix(crate::args::SIGNATURE_SEED, 0);
    type Ptrs = [*mut c_void; 0];

    fn arg_ptrs(&self) -> ArgPtrs<'_, Self::Ptrs> {
        // SAFETY: there are no pointers to keep valid.
        unsafe { ArgPtrs::from_raw([]) }
    }

    fn visit<V: ArgVisitor>(&self, _visitor: &mut V) -> Result<(), V::Error> {
        Ok(())
    }
}

/// Implements [`KernelArgs`] for one tuple arity: `n; Type.index, ...`.
macro_rules! tuple_args {
    ($n:literal; $($T:ident . $i:tt),+) => {
        // SAFETY: `COUNT`, `PARAMS`, the pointers and the visits all follow the tuple's
        // fields in order; each pointer is derived from a reference to the field, borrowed
        // from `self` for the returned lifetime.
        unsafe impl<$($T: DeviceRepr),+> KernelArgs for ($($T,)+) {
            const COUNT: usize = $n;
            const PARAMS: &'static [ParamSpec] = &[$(ParamSpec::of::<$T>()),+];
            const SIGNATURE: u64 = {
                let mut h = crate::args::signature_mix(crate::args::SIGNATURE_SEED, $n);
                $(h = crate::args::signature_mix(h, <$T as DeviceRepr>::SIGNATURE);)+
                h
            };
            type Ptrs = [*mut c_void; $n];

            #[inline]
            fn arg_ptrs(&self) -> ArgPtrs<'_, Self::Ptrs> {
                // Casts rather than pointer methods: 528 fields over the 32 arities, each
                // a method lookup the compiler would otherwise resolve in every build.
                let ptrs = [$(&self.$i as *const $T as *mut c_void),+];
                // SAFETY: each pointer points at a field of `*self`, a value of the
                // matching parameter type, which the returned `ArgPtrs` keeps borrowed.
                unsafe { ArgPtrs::from_raw(ptrs) }
            }

            #[inline]
            #[allow(clippy::question_mark)]
            fn visit<V: ArgVisitor>(&self, visitor: &mut V) -> Result<(), V::Error> {
                // `if let` rather than `?`: the same early return without resolving the
                // `Try` traits once per field (a measurable part of this crate's build).
                $(if let Err(e) = visitor.visit(&self.$i) {
                    return Err(e);
                })+
                Ok(())
            }
        }
    };
}

tuple_args!(1; T0.0);
tuple_args!(2; T0.0, T1.1);
tuple_args!(3; T0.0, T1.1, T2.2);
tuple_args!(4; T0.0, T1.1, T2.2, T3.3);
tuple_args!(5; T0.0, T1.1, T2.2, T3.3, T4.4);
tuple_args!(6; T0.0, T1.1, T2.2, T3.3, T4.4, T5.5);
tuple_args!(7; T0.0, T1.1, T2.2, T3.3, T4.4, T5.5, T6.6);
tuple_args!(8; T0.0, T1.1, T2.2, T3.3, T4.4, T5.5, T6.6, T7.7);
tuple_args!(9; T0.0, T1.1, T2.2, T3.3, T4.4, T5.5, T6.6, T7.7, T8.8);
tuple_args!(10; T0.0, T1.1, T2.2, T3.3, T4.4, T5.5, T6.6, T7.7, T8.8, T9.9);
tuple_args!(11; T0.0, T1.1, T2.2, T3.3, T4.4, T5.5, T6.6, T7.7, T8.8, T9.9, T10.10);
tuple_args!(12; T0.0, T1.1, T2.2, T3.3, T4.4, T5.5, T6.6, T7.7, T8.8, T9.9, T10.10, T11.11);
tuple_args!(13; T0.0, T1.1, T2.2, T3.3, T4.4, T5.5, T6.6, T7.7, T8.8, T9.9, T10.10, T11.11, T12.12);
tuple_args!(
    14; T0.0, T1.1, T2.2, T3.3, T4.4, T5.5, T6.6, T7.7, T8.8, T9.9, T10.10, T11.11, T12.12,
    T13.13
);
tuple_args!(
    15; T0.0, T1.1, T2.2, T3.3, T4.4, T5.5, T6.6, T7.7, T8.8, T9.9, T10.10, T11.11, T12.12,
    T13.13, T14.14
);
tuple_args!(
    16; T0.0, T1.1, T2.2, T3.3, T4.4, T5.5, T6.6, T7.7, T8.8, T9.9, T10.10, T11.11, T12.12,
    T13.13, T14.14, T15.15
);
tuple_args!(
    17; T0.0, T1.1, T2.2, T3.3, T4.4, T5.5, T6.6, T7.7, T8.8, T9.9, T10.10, T11.11, T12.12,
    T13.13, T14.14, T15.15, T16.16
);
tuple_args!(
    18; T0.0, T1.1, T2.2, T3.3, T4.4, T5.5, T6.6, T7.7, T8.8, T9.9, T10.10, T11.11, T12.12,
    T13.13, T14.14, T15.15, T16.16, T17.17
);
tuple_args!(
    19; T0.0, T1.1, T2.2, T3.3, T4.4, T5.5, T6.6, T7.7, T8.8, T9.9, T10.10, T11.11, T12.12,
    T13.13, T14.14, T15.15, T16.16, T17.17, T18.18
);
tuple_args!(
    20; T0.0, T1.1, T2.2, T3.3, T4.4, T5.5, T6.6, T7.7, T8.8, T9.9, T10.10, T11.11, T12.12,
    T13.13, T14.14, T15.15, T16.16, T17.17, T18.18, T19.19
);
tuple_args!(
    21; T0.0, T1.1, T2.2, T3.3, T4.4, T5.5, T6.6, T7.7, T8.8, T9.9, T10.10, T11.11, T12.12,
    T13.13, T14.14, T15.15, T16.16, T17.17, T18.18, T19.19, T20.20
);
tuple_args!(
    22; T0.0, T1.1, T2.2, T3.3, T4.4, T5.5, T6.6, T7.7, T8.8, T9.9, T10.10, T11.11, T12.12,
    T13.13, T14.14, T15.15, T16.16, T17.17, T18.18, T19.19, T20.20, T21.21
);
tuple_args!(
    23; T0.0, T1.1, T2.2, T3.3, T4.4, T5.5, T6.6, T7.7, T8.8, T9.9, T10.10, T11.11, T12.12,
    T13.13, T14.14, T15.15, T16.16, T17.17, T18.18, T19.19, T20.20, T21.21, T22.22
);
tuple_args!(
    24; T0.0, T1.1, T2.2, T3.3, T4.4, T5.5, T6.6, T7.7, T8.8, T9.9, T10.10, T11.11, T12.12,
    T13.13, T14.14, T15.15, T16.16, T17.17, T18.18, T19.19, T20.20, T21.21, T22.22, T23.23
);
tuple_args!(
    25; T0.0, T1.1, T2.2, T3.3, T4.4, T5.5, T6.6, T7.7, T8.8, T9.9, T10.10, T11.11, T12.12,
    T13.13, T14.14, T15.15, T16.16, T17.17, T18.18, T19.19, T20.20, T21.21, T22.22, T23.23,
    T24.24
);
tuple_args!(
    26; T0.0, T1.1, T2.2, T3.3, T4.4, T5.5, T6.6, T7.7, T8.8, T9.9, T10.10, T11.11, T12.12,
    T13.13, T14.14, T15.15, T16.16, T17.17, T18.18, T19.19, T20.20, T21.21, T22.22, T23.23,
    T24.24, T25.25
);
tuple_args!(
    27; T0.0, T1.1, T2.2, T3.3, T4.4, T5.5, T6.6, T7.7, T8.8, T9.9, T10.10, T11.11, T12.12,
    T13.13, T14.14, T15.15, T16.16, T17.17, T18.18, T19.19, T20.20, T21.21, T22.22, T23.23,
    T24.24, T25.25, T26.26
);
tuple_args!(
    28; T0.0, T1.1, T2.2, T3.3, T4.4, T5.5, T6.6, T7.7, T8.8, T9.9, T10.10, T11.11, T12.12,
    T13.13, T14.14, T15.15, T16.16, T17.17, T18.18, T19.19, T20.20, T21.21, T22.22, T23.23,
    T24.24, T25.25, T26.26, T27.27
);
tuple_args!(
    29; T0.0, T1.1, T2.2, T3.3, T4.4, T5.5, T6.6, T7.7, T8.8, T9.9, T10.10, T11.11, T12.12,
    T13.13, T14.14, T15.15, T16.16, T17.17, T18.18, T19.19, T20.20, T21.21, T22.22, T23.23,
    T24.24, T25.25, T26.26, T27.27, T28.28
);
tuple_args!(
    30; T0.0, T1.1, T2.2, T3.3, T4.4, T5.5, T6.6, T7.7, T8.8, T9.9, T10.10, T11.11, T12.12,
    T13.13, T14.14, T15.15, T16.16, T17.17, T18.18, T19.19, T20.20, T21.21, T22.22, T23.23,
    T24.24, T25.25, T26.26, T27.27, T28.28, T29.29
);
tuple_args!(
    31; T0.0, T1.1, T2.2, T3.3, T4.4, T5.5, T6.6, T7.7, T8.8, T9.9, T10.10, T11.11, T12.12,
    T13.13, T14.14, T15.15, T16.16, T17.17, T18.18, T19.19, T20.20, T21.21, T22.22, T23.23,
    T24.24, T25.25, T26.26, T27.27, T28.28, T29.29, T30.30
);
tuple_args!(
    32; T0.0, T1.1, T2.2, T3.3, T4.4, T5.5, T6.6, T7.7, T8.8, T9.9, T10.10, T11.11, T12.12,
    T13.13, T14.14, T15.15, T16.16, T17.17, T18.18, T19.19, T20.20, T21.21, T22.22, T23.23,
    T24.24, T25.25, T26.26, T27.27, T28.28, T29.29, T30.30, T31.31
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::{Float2, Float4, LayoutRule, param_offset, params_size};

    /// Reads `N` bytes through a parameter pointer.
    fn read<const N: usize>(p: *mut c_void) -> [u8; N] {
        let mut out = [0u8; N];
        // SAFETY: the tests only read parameters of at least `N` padding-free bytes.
        unsafe { ptr::copy_nonoverlapping(p.cast::<u8>(), out.as_mut_ptr(), N) };
        out
    }

    #[test]
    fn pointers_point_at_each_value() {
        let args = (7i32, Float4::new(1.0, 2.0, 3.0, 4.0), 0x5au8, 2.5f64);
        let ptrs = args.arg_ptrs();
        assert_eq!(ptrs.len(), 4);
        let p = ptrs.as_slice();
        assert_eq!(read::<4>(p[0]), 7i32.to_le_bytes());
        let mut f4 = [0u8; 16];
        for (chunk, v) in f4.chunks_mut(4).zip([1.0f32, 2.0, 3.0, 4.0]) {
            chunk.copy_from_slice(&v.to_le_bytes());
        }
        assert_eq!(read::<16>(p[1]), f4);
        assert_eq!(read::<1>(p[2]), [0x5a]);
        assert_eq!(read::<8>(p[3]), 2.5f64.to_le_bytes());
        assert_eq!(p[1].cast_const(), ptr::from_ref(&args.1).cast::<c_void>());
    }

    #[test]
    fn zero_args() {
        let mut ptrs = ().arg_ptrs();
        assert!(ptrs.is_empty());
        assert!(ptrs.as_mut_ptr().is_null());
        assert_eq!(<() as KernelArgs>::COUNT, 0);
        assert!(<() as KernelArgs>::PARAMS.is_empty());
    }

    #[test]
    fn params_describe_the_tuple() {
        type Guide = (i32, Float4, i8, f32, *const u8, Float2);
        const SIZE: Option<usize> = params_size(LayoutRule::Alignment, Guide::PARAMS);
        const LAST: Option<usize> = param_offset(LayoutRule::Alignment, Guide::PARAMS, 5);
        assert_eq!(Guide::COUNT, 6);
        assert_eq!(Guide::PARAMS.len(), 6);
        assert_eq!(
            Guide::PARAMS[1],
            ParamSpec {
                size: 16,
                align: 16
            }
        );
        assert_eq!((SIZE, LAST), (Some(56), Some(48)));
    }

    #[test]
    fn sixteen_args() {
        let args = (
            0u8, 1u8, 2u8, 3u8, 4u8, 5u8, 6u8, 7u8, 8u8, 9u8, 10u8, 11u8, 12u8, 13u8, 14u8, 15u8,
        );
        let ptrs = args.arg_ptrs();
        assert_eq!(ptrs.len(), 16);
        for (i, p) in ptrs.as_slice().iter().enumerate() {
            assert_eq!(read::<1>(*p), [i as u8]);
        }
    }

    #[test]
    fn thirty_two_args() {
        let args = (
            0u8,
            1u16,
            2u32,
            3u64,
            4u8,
            5u16,
            6u32,
            7u64,
            8u8,
            9u16,
            10u32,
            11u64,
            12u8,
            13u16,
            14u32,
            15u64,
            16u8,
            17u16,
            18u32,
            19u64,
            20u8,
            21u16,
            22u32,
            23u64,
            24u8,
            25u16,
            26u32,
            27u64,
            28u8,
            29f32,
            30f64,
            Float4::new(31.0, 0.0, 0.0, 0.0),
        );
        type Args = (
            u8,
            u16,
            u32,
            u64,
            u8,
            u16,
            u32,
            u64,
            u8,
            u16,
            u32,
            u64,
            u8,
            u16,
            u32,
            u64,
            u8,
            u16,
            u32,
            u64,
            u8,
            u16,
            u32,
            u64,
            u8,
            u16,
            u32,
            u64,
            u8,
            f32,
            f64,
            Float4,
        );
        assert_eq!(<Args as KernelArgs>::COUNT, 32);
        assert_eq!(<Args as KernelArgs>::PARAMS.len(), 32);
        let ptrs = args.arg_ptrs();
        assert_eq!(ptrs.len(), 32);
        let p = ptrs.as_slice();
        assert_eq!(read::<1>(p[0]), [0]);
        assert_eq!(read::<8>(p[27]), 27u64.to_le_bytes());
        assert_eq!(read::<4>(p[29]), 29f32.to_le_bytes());
        assert_eq!(read::<8>(p[30]), 30f64.to_le_bytes());
        assert_eq!(read::<4>(p[31]), 31f32.to_le_bytes());
        assert_eq!(p[31].cast_const(), ptr::from_ref(&args.31).cast::<c_void>());
        // Each group of (u8, u16, u32, u64) takes 16 bytes; seven groups and a u8 end
        // at 113; f32 at 116, f64 at 120, float4 at 128.
        assert_eq!(
            param_offset(LayoutRule::Alignment, Args::PARAMS, 27),
            Some(104)
        );
        assert_eq!(
            param_offset(LayoutRule::Alignment, Args::PARAMS, 29),
            Some(116)
        );
        assert_eq!(
            param_offset(LayoutRule::Alignment, Args::PARAMS, 31),
            Some(128)
        );
        assert_eq!(params_size(LayoutRule::Alignment, Args::PARAMS), Some(144));
        let packed = crate::args::PackedArgs::from_args(&args).unwrap();
        assert_eq!(packed.len(), 144);
        assert_eq!(packed.params()[31].offset, 128);
        assert_eq!(packed.as_bytes()[104..112], 27u64.to_le_bytes());
        let mut c = CountAll(0);
        assert_eq!(args.visit(&mut c), Ok(()));
        assert_eq!(c.0, 32);
    }

    struct CountAll(usize);

    impl ArgVisitor for CountAll {
        type Error = ();
        fn visit<T: DeviceRepr>(&mut self, _value: &T) -> Result<(), ()> {
            self.0 += 1;
            Ok(())
        }
    }

    struct Count(usize);

    impl ArgVisitor for Count {
        type Error = usize;
        fn visit<T: DeviceRepr>(&mut self, _value: &T) -> Result<(), usize> {
            self.0 += 1;
            if self.0 == 2 { Err(self.0) } else { Ok(()) }
        }
    }

    #[test]
    fn visit_stops_at_first_error() {
        let mut c = Count(0);
        assert_eq!((1u8, 2u16, 3u32).visit(&mut c), Err(2));
        assert_eq!(c.0, 2);
    }
}
