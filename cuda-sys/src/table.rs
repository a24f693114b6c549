//! The macros that turn the generated function lists into the driver and runtime APIs.
//!
//! `generated/driver_fns.rs` and `generated/runtime_fns.rs` are data: one line per C
//! function. From them these macros build one table type each (`DriverApi`,
//! `RuntimeApi`), the same in every build, with one accessor per documented name that
//! returns the function pointer or a [`MissingSymbol`](crate::MissingSymbol) naming it.
//!
//! A table is filled one of two ways, chosen at run time (the features only decide which
//! constructors exist, never what a table looks like):
//! - by a resolver (`from_resolver`, in every build; `load`, feature `loaded`): the
//!   `Option<fn>` fields hold what `cuGetProcAddress_v2`, `dlsym` or a test's mock
//!   returned, and the table holds the library they came from, which it never closes:
//!   the accessors return plain function pointers, which may be copied and kept after
//!   the table is gone, so they must stay valid for the rest of the process.
//! - linked (`linked()`, feature `linked`): the fields stay empty, the table is marked
//!   linked, and each accessor returns the `extern "C"` declaration's address. Only
//!   the accessors a program calls name their symbol, so a linked program needs from
//!   `libcuda` only the functions it uses (an older driver still starts it).

/// A table entry's function with its signature erased; the accessor of the entry turns
/// it back into the entry's own signature.
pub type Erased = unsafe extern "C" fn();

/// An address as an erased entry (`None` for null).
pub(crate) fn erase(address: *mut core::ffi::c_void) -> Option<Erased> {
    // SAFETY: `Option<fn>` has the layout of a nullable pointer, and any non-null value
    // is a valid function pointer (calling it is what needs the right signature, which
    // each table's fill contract promises).
    unsafe { core::mem::transmute::<*mut core::ffi::c_void, Option<Erased>>(address) }
}

/// A table's entries ([`Entry`](crate::Entry)) stored field by field: what
/// `from_resolver_in_place` walks (see `DRIVER_FIELDS`).
/// Each field a `static` of its own, referenced from a `const` of this type: a resolver
/// that reads only some fields leaves the other statics unreferenced in an LTO image.
pub(crate) struct Fields<const N: usize> {
    pub(crate) names: &'static [&'static str; N],
    pub(crate) symbols: &'static [&'static str; N],
    pub(crate) lookups: &'static [&'static str; N],
    pub(crate) versions: &'static [u32; N],
    pub(crate) per_thread_versions: &'static [u32; N],
}

impl<const N: usize> Fields<N> {
    /// Sets each of `fns` to what `resolve` returns for the entry of its index.
    #[inline(always)]
    pub(crate) fn fill(
        &self,
        fns: &mut [Option<Erased>],
        resolve: &mut impl FnMut(&crate::Entry) -> *mut core::ffi::c_void,
    ) {
        let fields = self
            .names
            .iter()
            .zip(self.symbols)
            .zip(self.lookups)
            .zip(self.versions.iter().zip(self.per_thread_versions));
        for (f, (((&name, &symbol), &lookup), (&version, &per_thread_version))) in
            fns.iter_mut().zip(fields)
        {
            *f = erase(resolve(&crate::Entry {
                name,
                symbol,
                lookup,
                version,
                per_thread_version,
            }));
        }
    }
}

/// Builds `DriverApi` and `DRIVER_ENTRIES` from `generated/driver_fns.rs`.
macro_rules! driver_table {
    ($( $name:ident = $sym:ident @ $lookup:literal [$ver:literal, $ptds:literal]
        ( $($arg:ident : $ty:ty),* ) -> $ret:ty; )*) => {
        $crate::table::api_table! {
            []
            /// The driver API (`libcuda`) as a table of function pointers.
            ///
            /// Each accessor has the C function's documented name (`cuMemAlloc`, which the
            /// headers map to `cuMemAlloc_v2`) and returns its pointer, or a
            /// [`MissingSymbol`]($crate::MissingSymbol) naming it when the driver lacks it.
            /// Calling the pointer is `unsafe` with the C function's own contract.
            ///
            /// One type in every build; how it is filled is chosen at run time:
            /// - [`DriverApi::from_resolver`] (every build, every target): from a function
            ///   that resolves each entry (a bare-metal driver interface, a mock). This is
            ///   how a target without `dlopen` (`x86_64-unknown-none`,
            ///   `aarch64-unknown-none`) reaches its driver: pass
            ///   [`Library::none()`]($crate::loader::Library::none), resolve the entries
            ///   from the platform's own driver interface, and hand the table to
            ///   [`install_driver`](crate::install_driver);
            /// - `DriverApi::load` (feature `loaded`, Unix and Windows): `libcuda`
            ///   (`nvcuda.dll`) through `dlopen` (`LoadLibraryExW`) and
            ///   `cuGetProcAddress_v2`;
            /// - `DriverApi::linked` (feature `linked`): the `extern "C"` declarations,
            ///   linked against `-lcuda` at build time.
            ///
            /// The table never closes the library it was filled from (dropping the table
            /// does not drop its [`Library`]($crate::loader::Library)), so every function
            /// pointer an accessor returns stays valid for the rest of the process, also
            /// after the table is dropped. Each `DriverApi::load` keeps one more reference
            /// to `libcuda` open.
            DriverApi, DRIVER_ENTRIES, DRIVER_FIELDS, DriverIndex, linked_driver, "cuda",
            [feature = "linked"], "Every driver function these bindings know, in table order.";
            $( $name = $sym @ $lookup [$ver, $ptds] ( $($arg : $ty),* ) -> $ret; )*
        }
    };
}

/// Builds `RuntimeApi` and `RUNTIME_ENTRIES` (feature `runtime`) from
/// `generated/runtime_fns.rs`: a runtime entry's lookup name is its per-thread
/// default-stream symbol, its versions are 0.
#[cfg(feature = "runtime")]
macro_rules! runtime_table {
    ($( $name:ident = $sym:ident @ $ptds:literal ( $($arg:ident : $ty:ty),* ) -> $ret:ty; )*) => {
        $crate::table::api_table! {
            [#[cfg_attr(docsrs, doc(cfg(feature = "runtime")))]]
            /// The runtime API (`libcudart`) as a table of function pointers.
            ///
            /// Each accessor returns the function pointer, or a
            /// [`MissingSymbol`]($crate::MissingSymbol) naming it when the library lacks it.
            /// Calling the pointer is `unsafe` with the C function's own contract.
            ///
            /// Filled like [`DriverApi`](crate::DriverApi): [`RuntimeApi::from_resolver`]
            /// in every build, `RuntimeApi::load` (feature `loaded`, Unix and Windows) and
            /// `RuntimeApi::linked` (feature `linked`, which then links `-lcudart`; the
            /// declarations exist only with `runtime`, so `linked` alone never links it).
            ///
            /// The table never closes the library it was filled from (dropping the table
            /// does not drop its [`Library`]($crate::loader::Library)), so every function
            /// pointer an accessor returns stays valid for the rest of the process, also
            /// after the table is dropped.
            RuntimeApi, RUNTIME_ENTRIES, RUNTIME_FIELDS, RuntimeIndex, linked_runtime, "cudart",
            [feature = "linked"], "Every runtime function these bindings know, in table order.";
            $( $name = $sym @ $ptds [0, 0] ( $($arg : $ty),* ) -> $ret; )*
        }
    };
}

/// Builds `NcclApi` and `NCCL_ENTRIES` (feature `nccl`) from `generated/nccl_fns.rs`:
/// found with `dlsym` by their exported names, with no linked form (NCCL is never a
/// link-time dependency).
#[cfg(feature = "nccl")]
macro_rules! nccl_table {
    ($( $name:ident = $sym:ident ( $($arg:ident : $ty:ty),* ) -> $ret:ty; )*) => {
        $crate::table::api_table! {
            [#[cfg_attr(docsrs, doc(cfg(feature = "nccl")))]]
            /// NCCL (`libnccl.so.2`) as a table of function pointers.
            ///
            /// Each accessor returns the function pointer, or a
            /// [`MissingSymbol`]($crate::MissingSymbol) naming it when the library lacks it
            /// (an older NCCL). Calling the pointer is `unsafe` with the C function's own
            /// contract.
            ///
            /// Filled by [`NcclApi::from_resolver`] (every build) or `NcclApi::load`
            /// (feature `loaded`, Linux and other Unix targets): `libnccl.so.2` through
            /// `dlopen` and `dlsym`. There is no linked form: a program that uses NCCL
            /// starts where NCCL is absent and gets an error naming the paths tried.
            ///
            /// The table never closes the library it was filled from, so every function
            /// pointer an accessor returns stays valid for the rest of the process.
            NcclApi, NCCL_ENTRIES, NCCL_FIELDS, NcclIndex, linked_nccl, "nccl",
            [any()], "Every NCCL function these bindings know, in table order.";
            $( $name = $sym @ "" [0, 0] ( $($arg : $ty),* ) -> $ret; )*
        }
    };
}

/// Builds `NvrtcApi` and `NVRTC_ENTRIES` (feature `nvrtc`) from `generated/nvrtc_fns.rs`:
/// found with `dlsym` (`GetProcAddress`) by their exported names, with no linked form.
#[cfg(feature = "nvrtc")]
macro_rules! nvrtc_table {
    ($( $name:ident = $sym:ident ( $($arg:ident : $ty:ty),* ) -> $ret:ty; )*) => {
        $crate::table::api_table! {
            [#[cfg_attr(docsrs, doc(cfg(feature = "nvrtc")))]]
            /// NVRTC, the run-time CUDA C++ compiler (`libnvrtc.so.13`, `.so.12`;
            /// `nvrtc64_130_0.dll`, `nvrtc64_120_0.dll`), as a table of function pointers.
            ///
            /// Each accessor returns the function pointer, or a
            /// [`MissingSymbol`]($crate::MissingSymbol) naming it when the library lacks it
            /// (an older NVRTC: `nvrtcGetTileIR` is 13.1's, the bundled-header calls 13.5's).
            /// Calling the pointer is `unsafe` with the C function's own contract.
            ///
            /// Filled by [`NvrtcApi::from_resolver`] (every build) or `NvrtcApi::load`
            /// (feature `loaded`, Unix and Windows). There is no linked form: a program that
            /// compiles at run time starts where NVRTC is absent and gets an error naming the
            /// paths tried.
            ///
            /// The table never closes the library it was filled from, so every function
            /// pointer an accessor returns stays valid for the rest of the process.
            NvrtcApi, NVRTC_ENTRIES, NVRTC_FIELDS, NvrtcIndex, linked_nvrtc, "nvrtc",
            [any()], "Every NVRTC function these bindings know, in table order.";
            $( $name = $sym @ "" [0, 0] ( $($arg : $ty),* ) -> $ret; )*
        }
    };
}

/// The one table macro: a function-pointer table type (`$api`), its entries
/// (`$entries`, and `$fields`, the same field by field), and the `extern "C"`
/// declarations of the linked table (`$linked`, linking `$lib`).
macro_rules! api_table {
    ([$(#[$gate:meta])*] $(#[$doc:meta])*
     $api:ident, $entries:ident, $fields:ident, $index:ident, $linked:ident, $lib:literal,
     [$lcfg:meta], $entries_doc:literal;
     $( $name:ident = $sym:ident @ $lookup:literal [$ver:literal, $ptds:literal]
        ( $($arg:ident : $ty:ty),* ) -> $ret:ty; )*) => {
        #[doc = $entries_doc]
        $(#[$gate])*
        pub static $entries: &[$crate::Entry] = &[$(
            $crate::Entry {
                name: stringify!($name),
                symbol: concat!(stringify!($sym), "\0"),
                lookup: concat!($lookup, "\0"),
                version: $ver,
                per_thread_version: $ptds,
            },
        )*];

        #[doc = concat!("[`", stringify!($entries), "`]' fields, one array each, for")]
        #[doc = concat!("[`", stringify!($api), "::from_resolver_in_place`]: a resolver")]
        /// that reads only some fields (a bare-metal one reading the names) keeps only
        /// those arrays in an LTO image, where the array of whole entries would keep
        /// every string of every entry.
        const $fields: $crate::table::Fields<{ $entries.len() }> = {
            static NAMES: [&str; $entries.len()] = [$(stringify!($name)),*];
            static SYMBOLS: [&str; $entries.len()] = [$(concat!(stringify!($sym), "\0")),*];
            static LOOKUPS: [&str; $entries.len()] = [$(concat!($lookup, "\0")),*];
            static VERSIONS: [u32; $entries.len()] = [$($ver),*];
            static PER_THREAD: [u32; $entries.len()] = [$($ptds),*];
            $crate::table::Fields {
                names: &NAMES,
                symbols: &SYMBOLS,
                lookups: &LOOKUPS,
                versions: &VERSIONS,
                per_thread_versions: &PER_THREAD,
            }
        };

        $(#[$doc])*
        $(#[$gate])*
        #[allow(non_snake_case)]
        pub struct $api {
            /// Never dropped: see the type's docs.
            library: ::core::mem::ManuallyDrop<$crate::loader::Library>,
            /// Made by `linked()`: the accessors return the linked symbols.
            linked: bool,
            /// Each entry's function, type-erased ([`Erased`]($crate::table::Erased)), in
            /// the order of the entries: one array, so that a table is filled in place,
            /// entry by entry, wherever it lives.
            fns: [Option<$crate::table::Erased>; $entries.len()],
        }

        /// Each entry's index in the table.
        #[allow(non_camel_case_types, dead_code)]
        #[repr(usize)]
        enum $index { $( $name, )* }

        #[allow(non_snake_case)]
        impl $api {
            #[doc = concat!("Builds a table by asking `resolve` for each entry of [`",
                stringify!($entries), "`](", stringify!($entries), "), in order.")]
            /// A null pointer leaves the entry missing. The table keeps `library` and
            /// never closes it.
            ///
            /// # Safety
            /// Every non-null pointer `resolve` returns must be a function with the C
            /// signature of the entry it was asked for, and must stay valid for the rest
            /// of the process: the accessors hand out plain function pointers, which may
            /// outlive the table. Pointers into `library` qualify, since the table never
            /// closes it; so do functions of the program itself (a mock).
            pub unsafe fn from_resolver(
                library: $crate::loader::Library,
                resolve: impl FnMut(&$crate::Entry) -> *mut ::core::ffi::c_void,
            ) -> Self {
                let mut slot = ::core::mem::MaybeUninit::<Self>::uninit();
                // SAFETY: the caller's promise, for the entries `resolve` is asked for in
                // order.
                unsafe { Self::from_resolver_in_place(&mut slot, library, resolve) };
                // SAFETY: `from_resolver_in_place` initialized every field.
                unsafe { slot.assume_init() }
            }

            /// [`from_resolver`](Self::from_resolver), writing the table into `slot`
            /// instead of returning it (the table is several KiB: a static or a heap
            /// block holds it without it passing through the stack). Returns the table.
            ///
            /// # Safety
            /// As for [`from_resolver`](Self::from_resolver).
            pub unsafe fn from_resolver_in_place(
                slot: &mut ::core::mem::MaybeUninit<Self>,
                library: $crate::loader::Library,
                mut resolve: impl FnMut(&$crate::Entry) -> *mut ::core::ffi::c_void,
            ) -> &mut Self {
                // SAFETY: the caller's promise covers each address `resolve` returns for
                // the entry of the same index.
                unsafe {
                    Self::fill_in_place(slot, library, false, |_, fns| {
                        $fields.fill(fns, &mut resolve);
                    })
                }
            }

            /// Writes a table into `slot`: `library`, `linked`, every entry missing, then
            /// `fill` sets the entries (given the library, already in the table).
            ///
            /// # Safety
            /// Every entry `fill` sets must be a function with the C signature of the
            /// entry of the same index, valid for the rest of the process.
            pub(crate) unsafe fn fill_in_place(
                slot: &mut ::core::mem::MaybeUninit<Self>,
                library: $crate::loader::Library,
                linked: bool,
                fill: impl FnOnce(&$crate::loader::Library, &mut [Option<$crate::table::Erased>]),
            ) -> &mut Self {
                let table = slot.as_mut_ptr();
                // SAFETY: every field of `*table` is written through raw pointers into the
                // slot before the slot is read as a table; `fill` sees only the entries.
                unsafe {
                    (&raw mut (*table).library).write(::core::mem::ManuallyDrop::new(library));
                    (&raw mut (*table).linked).write(linked);
                    let fns = (&raw mut (*table).fns).cast::<Option<$crate::table::Erased>>();
                    for i in 0..$entries.len() {
                        fns.add(i).write(None);
                    }
                    let fns = &mut *(&raw mut (*table).fns);
                    fill(&(*table).library, fns);
                    slot.assume_init_mut()
                }
            }

            #[doc = concat!("The linked table: each accessor returns the `extern \"C\"` ",
                "declaration of its symbol, resolved when the program was linked (`-l",
                $lib, "`) and loaded. It never reports a missing symbol.")]
            #[cfg($lcfg)]
            #[cfg_attr(docsrs, doc(cfg($lcfg)))]
            pub const fn linked() -> Self {
                Self {
                    library: ::core::mem::ManuallyDrop::new($crate::loader::Library::none()),
                    linked: true,
                    fns: [None; $entries.len()],
                }
            }

            /// Whether this is the linked table (`linked()`) rather than one filled by a
            /// resolver.
            pub const fn is_linked(&self) -> bool {
                self.linked
            }

            #[doc = concat!("Whether each entry of [`", stringify!($entries), "`](",
                stringify!($entries), ") resolved (all of them in the linked table).")]
            pub fn resolved(&self) -> [bool; $entries.len()] {
                if self.linked {
                    return [true; $entries.len()];
                }
                ::core::array::from_fn(|i| self.fns.get(i).is_some_and(Option::is_some))
            }

            /// The library the table was filled from (open for the rest of the process);
            /// [`Library::none()`]($crate::loader::Library::none) for the linked table.
            pub fn library(&self) -> &$crate::loader::Library {
                &self.library
            }

            $(
                #[doc = concat!("`", stringify!($name), "` (symbol `", stringify!($sym), "`).")]
                #[inline(always)]
                pub fn $name(&self) -> Result<unsafe extern "C" fn($($ty),*) -> $ret, $crate::MissingSymbol> {
                    #[cfg($lcfg)]
                    if self.linked {
                        return Ok($linked::$name);
                    }
                    match self.fns[$index::$name as usize] {
                        // SAFETY: the entry of this index holds a function of this
                        // signature (the contract of whatever filled the table), erased.
                        Some(f) => Ok(unsafe {
                            ::core::mem::transmute::<
                                $crate::table::Erased,
                                unsafe extern "C" fn($($ty),*) -> $ret,
                            >(f)
                        }),
                        None => Err($crate::MissingSymbol { name: stringify!($name), abi: $ver }),
                    }
                }
            )*
        }

        #[cfg($lcfg)]
        #[allow(non_snake_case)]
        mod $linked {
            #[allow(unused_imports)]
            use $crate::*;
            #[link(name = $lib)]
            unsafe extern "C" {
                $( #[link_name = stringify!($sym)] pub fn $name($($arg: $ty),*) -> $ret; )*
            }
        }
    };
}

pub(crate) use api_table;
pub(crate) use driver_table;
#[cfg(feature = "nccl")]
pub(crate) use nccl_table;
#[cfg(feature = "nvrtc")]
pub(crate) use nvrtc_table;
#[cfg(feature = "runtime")]
pub(crate) use runtime_table;
