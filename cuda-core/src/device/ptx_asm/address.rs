//! Address windows: conversions between generic pointers and the `.shared::cta` /
//! `.shared::cluster` windows (`cvta`, `mapa`), and the exported macros that declare
//! `.shared` symbols and name kernel parameters.

/// Writes the address conversions, each `[gate] fn name(args) -> u32 { templates }` or
/// `-> *mut u8`: `#[must_use]`, `pure` and `nomem` (no memory is accessed); the templates
/// name the result `{out}`.
macro_rules! address {
    () => {};
    ($(#[$meta:meta])* $([$gate:ident])? fn $name:ident $args:tt -> u32 $tpl:tt $($rest:tt)*) => {
        address!(@fn [$($gate)?] [u32] reg32 $(#[$meta])* fn $name $args $tpl);
        address!($($rest)*);
    };
    (
        $(#[$meta:meta])* $([$gate:ident])? fn $name:ident $args:tt -> *mut u8 $tpl:tt
        $($rest:tt)*
    ) => {
        address!(@fn [$($gate)?] [*mut u8] reg64 $(#[$meta])* fn $name $args $tpl);
        address!($($rest)*);
    };
    (
        @fn $gate:tt [$ret:ty] $class:ident $(#[$meta:meta])*
        fn $name:ident $args:tt { $($tpl:literal),+ }
    ) => {
        ptx_fn! {
            $gate
            $(#[$meta])*
            #[must_use]
            fn $name $args -> $ret {
                let out: $ret;
                // SAFETY: address arithmetic only (`mapa`: translation); no memory access.
                unsafe {
                    asm_args!(
                        [$($tpl,)+ out = out($class) out,]
                        $args
                        [options(pure, nomem, nostack, preserves_flags)]
                    );
                }
                out
            }
        }
    };
}

address! {
    /// `cvta.to.shared.u64` + `cvt.u32.u64`: the `.shared::cta` window address of a generic
    /// pointer into this CTA's shared memory (`__cvta_generic_to_shared`).
    ///
    /// # Safety
    /// `ptr` must point into the executing CTA's shared memory; otherwise the result is
    /// meaningless (it is only an integer, so no access happens here).
    fn cvta_to_shared(ptr: *const u8) -> u32 {
        "{{", ".reg .b64 t;", "cvta.to.shared.u64 t, {ptr};", "cvt.u32.u64 {out}, t;", "}}"
    }

    /// `cvt.u64.u32` + `cvta.shared.u64`: the generic pointer of a `.shared::cta` window
    /// address (`__cvta_shared_to_generic`).
    ///
    /// # Safety
    /// `addr` must be an address in the executing CTA's shared window for the result to be
    /// dereferenceable (this function itself accesses nothing).
    fn cvta_shared_to_generic(addr: u32) -> *mut u8 {
        "{{", ".reg .b64 t;", "cvt.u64.u32 t, {addr};", "cvta.shared.u64 {out}, t;", "}}"
    }

    /// `mapa.shared::cluster.u32 d, addr, rank;` (PTX 7.8, sm_90): the
    /// `.shared::cluster` address of the variable at `addr` in the CTA of cluster rank
    /// `rank`.
    ///
    /// # Safety
    /// `addr` must be a `.shared::cta` address and `rank` less than `%cluster_nctarank`.
    [sm90_ptx78] fn mapa_shared_cluster(addr: u32, rank: u32) -> u32 {
        "mapa.shared::cluster.u32 {out}, {addr}, {rank};"
    }

    /// `mapa.u64 d, ptr, rank;` (PTX 7.8, sm_90): the generic pointer to the variable at
    /// generic shared pointer `ptr` in the CTA of cluster rank `rank` (distributed shared
    /// memory, as `cluster.map_shared_rank`).
    ///
    /// # Safety
    /// `ptr` must point into the executing CTA's shared memory and `rank` be less than
    /// `%cluster_nctarank`.
    [sm90_ptx78] fn mapa_generic(ptr: *mut u8, rank: u32) -> *mut u8 {
        "mapa.u64 {out}, {ptr}, {rank};"
    }
}

/// Declares a module-scope `.shared` array (`.shared .align A .b8 name[N];`) through
/// `global_asm!`, and a function returning it as a
/// [`SharedArray`](crate::device::SharedArray).
///
/// ```ignore
/// cudadrv::shared_array! {
///     /// Four mbarriers.
///     fn bars() -> [u64; 4];
/// }
/// let base: u32 = bars().base_addr();
/// ```
///
/// The PTX symbol is the function's name, so it must be unique within the crate. Every
/// CTA of a kernel that calls the function gets its own copy (CUDA's `__shared__`).
/// The element type's alignment is the array's alignment. The calling crate needs
/// `#![feature(asm_experimental_arch)]` (the expansion contains `asm!`).
#[macro_export]
macro_rules! shared_array {
    ($(#[$meta:meta])* $vis:vis fn $name:ident() -> [$ty:ty; $len:expr];) => {
        ::core::arch::global_asm!(
            ::core::concat!(
                ".shared .align {align} .b8 ", ::core::stringify!($name), "[{size}];"
            ),
            align = const ::core::mem::align_of::<$ty>(),
            size = const ::core::mem::size_of::<[$ty; $len]>(),
        );

        $(#[$meta])*
        #[inline(always)]
        $vis fn $name() -> $crate::device::SharedArray<$ty, { $len }> {
            let addr: u32;
            // SAFETY: `mov.u32` of a `.shared` symbol yields its shared-window address;
            // no memory is accessed.
            unsafe {
                ::core::arch::asm!(
                    ::core::concat!("mov.u32 {a}, ", ::core::stringify!($name), ";"),
                    a = out(reg32) addr,
                    options(pure, nomem, nostack, preserves_flags),
                );
            }
            // SAFETY: `addr` is the base of the `.shared` array declared above: room for
            // `$len` elements of `$ty`, aligned to `$ty`, private to each CTA.
            unsafe { $crate::device::SharedArray::from_raw(addr) }
        }
    };
}

/// Declares the kernel's dynamic shared memory (`.extern .shared .align 16 .b8 name[];`)
/// and a function returning its base as a
/// [`DynamicShared`](crate::device::DynamicShared); its size is the launch's dynamic
/// shared memory bytes (`%dynamic_smem_size`).
///
/// ```ignore
/// cudadrv::dynamic_shared! {
///     /// The launch's dynamic shared memory.
///     fn dyn_smem();
/// }
/// ```
///
/// The calling crate needs `#![feature(asm_experimental_arch)]`.
#[macro_export]
macro_rules! dynamic_shared {
    ($(#[$meta:meta])* $vis:vis fn $name:ident();) => {
        ::core::arch::global_asm!(::core::concat!(
            ".extern .shared .align 16 .b8 ", ::core::stringify!($name), "[];"
        ));

        $(#[$meta])*
        #[inline(always)]
        $vis fn $name() -> $crate::device::DynamicShared {
            let addr: u32;
            // SAFETY: `mov.u32` of a `.shared` symbol yields its shared-window address;
            // no memory is accessed.
            unsafe {
                ::core::arch::asm!(
                    ::core::concat!("mov.u32 {a}, ", ::core::stringify!($name), ";"),
                    a = out(reg32) addr,
                    options(pure, nomem, nostack, preserves_flags),
                );
            }
            // SAFETY: `addr` is the 16-aligned base of this launch's dynamic shared memory.
            unsafe { $crate::device::DynamicShared::from_raw(addr) }
        }
    };
}

/// `mov.b64 t, <kernel>_param_<index>;` + `cvta.param.u64 p, t;` (PTX 7.7, sm_70): the
/// generic address of by-value parameter `index` of the kernel `kernel`, in the kernel
/// parameter space itself (as CUDA's `__grid_constant__` gives it), as a `*const u8`.
///
/// ```ignore
/// #[unsafe(no_mangle)]
/// pub unsafe extern "ptx-kernel" fn k(map: TensorMapParam, out: *mut u32) {
///     let p: *const u8 = cudadrv::kernel_param_ptr!(k, 0);
/// }
/// ```
///
/// Taking `&param` in Rust instead gives the address of a copy in local memory (LLVM
/// copies a by-value kernel parameter whose address escapes), which tensor copies cannot
/// use. The name is the symbol LLVM's NVPTX back end gives the parameter
/// (`<kernel>_param_<index>`, `index` counting the kernel's PTX parameters from 0); the
/// macro works only inside that kernel, and `ptxas` rejects any other use (an unknown
/// symbol), so a mistake fails the build. Only address arithmetic: nothing is accessed.
/// Reads through the pointer see the parameter's value (parameters are read-only).
/// The calling crate needs `#![feature(asm_experimental_arch)]`.
#[macro_export]
macro_rules! kernel_param_ptr {
    ($kernel:ident, $index:literal) => {{
        let p: *const u8;
        // SAFETY: moves a parameter-space address into a register and converts it to a
        // generic one; no memory is accessed.
        unsafe {
            ::core::arch::asm!(
                "{{",
                ".reg .b64 t;",
                ::core::concat!(
                    "mov.b64 t, ", ::core::stringify!($kernel), "_param_",
                    ::core::stringify!($index), ";"
                ),
                "cvta.param.u64 {p}, t;",
                "}}",
                p = out(reg64) p,
                options(pure, nomem, nostack, preserves_flags),
            );
        }
        p
    }};
}
