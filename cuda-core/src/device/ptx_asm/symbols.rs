//! The exported macros whose inline PTX names a symbol: `.shared` arrays
//! ([`shared_array!`](crate::shared_array)), the dynamic shared memory
//! ([`dynamic_shared!`](crate::dynamic_shared)) and kernel parameters
//! ([`kernel_param_ptr!`](crate::kernel_param_ptr)). They live at the crate root
//! (`#[macro_export]`); this module is not re-exported, so they have no other path.

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
