//! The macros that turn the generated function lists into the driver and runtime APIs.
//!
//! `generated/driver_fns.rs` and `generated/runtime_fns.rs` are data: one line per C
//! function. From them these macros build, for both binding modes, the same API:
//! a table type (`DriverApi`, `RuntimeApi`) with one accessor per documented name that
//! returns the function pointer or a [`MissingSymbol`](crate::MissingSymbol) naming it.
//!
//! - `loaded` mode: the table holds `Option<fn>` fields filled by a resolver
//!   (`cuGetProcAddress_v2`, `dlsym`, or a test's mock), and the library they came
//!   from, which it never closes: the accessors return plain function pointers, which
//!   may be copied and kept after the table is gone, so they must stay valid for the
//!   rest of the process.
//! - `linked` mode: the table is empty and each accessor returns the linked symbol.

/// Builds `DriverApi` and `DRIVER_ENTRIES`.
macro_rules! driver_table {
    ($( $name:ident = $sym:ident @ $lookup:literal [$ver:literal, $ptds:literal]
        ( $($arg:ident : $ty:ty),* ) -> $ret:ty; )*) => {
        /// Every driver function these bindings know, in table order.
        pub static DRIVER_ENTRIES: &[$crate::Entry] = &[$(
            $crate::Entry {
                name: stringify!($name),
                symbol: concat!(stringify!($sym), "\0"),
                lookup: concat!($lookup, "\0"),
                version: $ver,
                per_thread_version: $ptds,
            },
        )*];

        /// The driver API (`libcuda`) as a table of function pointers.
        ///
        /// Each accessor has the C function's documented name (`cuMemAlloc`, which the
        /// headers map to `cuMemAlloc_v2`) and returns its pointer, or a
        /// [`MissingSymbol`]($crate::MissingSymbol) naming it when the driver lacks it.
        /// Calling the pointer is `unsafe` with the C function's own contract.
        ///
        /// The table never closes the library it was filled from (dropping the table
        /// does not drop its [`Library`]($crate::loader::Library)), so every function
        /// pointer an accessor returns stays valid for the rest of the process, also
        /// after the table is dropped. Each [`load_driver`](crate::load_driver) keeps one
        /// more reference to `libcuda` open.
        #[cfg(not(feature = "linked"))]
        #[allow(non_snake_case)]
        pub struct DriverApi {
            /// Never dropped: see the type's docs.
            library: ::core::mem::ManuallyDrop<$crate::loader::Library>,
            $( $name: Option<unsafe extern "C" fn($($ty),*) -> $ret>, )*
        }

        /// The driver API (`libcuda`), linked at build time.
        ///
        /// Each accessor has the C function's documented name and returns the linked
        /// symbol; it never fails in this mode.
        #[cfg(feature = "linked")]
        pub struct DriverApi {
            _linked: (),
        }

        #[cfg(not(feature = "linked"))]
        #[allow(non_snake_case)]
        impl DriverApi {
            /// Builds a table by asking `resolve` for each entry of
            /// [`DRIVER_ENTRIES`](crate::DRIVER_ENTRIES), in order. A null pointer leaves
            /// the entry missing. The table keeps `library` and never closes it.
            ///
            /// # Safety
            /// Every non-null pointer `resolve` returns must be a function with the C
            /// signature of the entry it was asked for, and must stay valid for the rest
            /// of the process: the accessors hand out plain function pointers, which may
            /// outlive the table. Pointers into `library` qualify, since the table never
            /// closes it; so do functions of the program itself (a mock).
            pub unsafe fn from_resolver(
                library: $crate::loader::Library,
                mut resolve: impl FnMut(&$crate::Entry) -> *mut ::core::ffi::c_void,
            ) -> Self {
                let mut entries = DRIVER_ENTRIES.iter();
                Self {
                    library: ::core::mem::ManuallyDrop::new(library),
                    $( $name: {
                        let ptr = entries.next().map_or(::core::ptr::null_mut(), &mut resolve);
                        // SAFETY: `Option<extern fn>` has the layout of a nullable pointer;
                        // the caller guarantees the signature.
                        unsafe {
                            ::core::mem::transmute::<
                                *mut ::core::ffi::c_void,
                                Option<unsafe extern "C" fn($($ty),*) -> $ret>,
                            >(ptr)
                        }
                    }, )*
                }
            }

            /// Whether each entry of [`DRIVER_ENTRIES`](crate::DRIVER_ENTRIES) resolved.
            pub fn resolved(&self) -> [bool; DRIVER_ENTRIES.len()] {
                [$( self.$name.is_some(), )*]
            }

            /// The library the table was filled from (open for the rest of the process).
            pub fn library(&self) -> &$crate::loader::Library {
                &self.library
            }

            $(
                #[doc = concat!("`", stringify!($name), "` (symbol `", stringify!($sym), "`).")]
                #[inline(always)]
                pub fn $name(&self) -> Result<unsafe extern "C" fn($($ty),*) -> $ret, $crate::MissingSymbol> {
                    match self.$name {
                        Some(f) => Ok(f),
                        None => Err($crate::MissingSymbol { name: stringify!($name) }),
                    }
                }
            )*
        }

        #[cfg(feature = "linked")]
        #[allow(non_snake_case)]
        mod linked_driver {
            #[allow(unused_imports)]
            use $crate::*;
            #[link(name = "cuda")]
            unsafe extern "C" {
                $( #[link_name = stringify!($sym)] pub fn $name($($arg: $ty),*) -> $ret; )*
            }
        }

        #[cfg(feature = "linked")]
        #[allow(non_snake_case)]
        impl DriverApi {
            /// The linked table.
            pub const fn linked() -> Self {
                Self { _linked: () }
            }

            /// Whether each entry resolved: always, once the program linked.
            pub fn resolved(&self) -> [bool; DRIVER_ENTRIES.len()] {
                [true; DRIVER_ENTRIES.len()]
            }

            $(
                #[doc = concat!("`", stringify!($name), "` (symbol `", stringify!($sym), "`).")]
                #[inline(always)]
                pub fn $name(&self) -> Result<unsafe extern "C" fn($($ty),*) -> $ret, $crate::MissingSymbol> {
                    Ok(linked_driver::$name)
                }
            )*
        }
    };
}

/// Builds `RuntimeApi` and `RUNTIME_ENTRIES`.
macro_rules! runtime_table {
    ($( $name:ident = $sym:ident @ $ptds:literal ( $($arg:ident : $ty:ty),* ) -> $ret:ty; )*) => {
        /// Every runtime function these bindings know, in table order.
        pub static RUNTIME_ENTRIES: &[$crate::Entry] = &[$(
            $crate::Entry {
                name: stringify!($name),
                symbol: concat!(stringify!($sym), "\0"),
                lookup: concat!($ptds, "\0"),
                version: 0,
                per_thread_version: 0,
            },
        )*];

        /// The runtime API (`libcudart`) as a table of function pointers.
        ///
        /// Each accessor returns the function pointer, or a
        /// [`MissingSymbol`]($crate::MissingSymbol) naming it when the library lacks it.
        /// Calling the pointer is `unsafe` with the C function's own contract.
        ///
        /// The table never closes the library it was filled from (dropping the table
        /// does not drop its [`Library`]($crate::loader::Library)), so every function
        /// pointer an accessor returns stays valid for the rest of the process, also
        /// after the table is dropped.
        #[cfg(not(feature = "linked"))]
        #[allow(non_snake_case)]
        pub struct RuntimeApi {
            /// Never dropped: see the type's docs.
            library: ::core::mem::ManuallyDrop<$crate::loader::Library>,
            $( $name: Option<unsafe extern "C" fn($($ty),*) -> $ret>, )*
        }

        /// The runtime API (`libcudart`), linked at build time.
        #[cfg(feature = "linked")]
        pub struct RuntimeApi {
            _linked: (),
        }

        #[cfg(not(feature = "linked"))]
        #[allow(non_snake_case)]
        impl RuntimeApi {
            /// Builds a table by asking `resolve` for each entry of
            /// [`RUNTIME_ENTRIES`](crate::RUNTIME_ENTRIES), in order. A null pointer
            /// leaves the entry missing. The table keeps `library` and never closes it.
            ///
            /// # Safety
            /// Every non-null pointer `resolve` returns must be a function with the C
            /// signature of the entry it was asked for, and must stay valid for the rest
            /// of the process (as for
            /// [`DriverApi::from_resolver`](crate::DriverApi::from_resolver)).
            pub unsafe fn from_resolver(
                library: $crate::loader::Library,
                mut resolve: impl FnMut(&$crate::Entry) -> *mut ::core::ffi::c_void,
            ) -> Self {
                let mut entries = RUNTIME_ENTRIES.iter();
                Self {
                    library: ::core::mem::ManuallyDrop::new(library),
                    $( $name: {
                        let ptr = entries.next().map_or(::core::ptr::null_mut(), &mut resolve);
                        // SAFETY: nullable function pointer layout; the caller guarantees
                        // the signature.
                        unsafe {
                            ::core::mem::transmute::<
                                *mut ::core::ffi::c_void,
                                Option<unsafe extern "C" fn($($ty),*) -> $ret>,
                            >(ptr)
                        }
                    }, )*
                }
            }

            /// Whether each entry of [`RUNTIME_ENTRIES`](crate::RUNTIME_ENTRIES) resolved.
            pub fn resolved(&self) -> [bool; RUNTIME_ENTRIES.len()] {
                [$( self.$name.is_some(), )*]
            }

            /// The library the table was filled from (open for the rest of the process).
            pub fn library(&self) -> &$crate::loader::Library {
                &self.library
            }

            $(
                #[doc = concat!("`", stringify!($name), "`.")]
                #[inline(always)]
                pub fn $name(&self) -> Result<unsafe extern "C" fn($($ty),*) -> $ret, $crate::MissingSymbol> {
                    match self.$name {
                        Some(f) => Ok(f),
                        None => Err($crate::MissingSymbol { name: stringify!($name) }),
                    }
                }
            )*
        }

        #[cfg(feature = "linked")]
        #[allow(non_snake_case)]
        mod linked_runtime {
            #[allow(unused_imports)]
            use $crate::*;
            #[link(name = "cudart")]
            unsafe extern "C" {
                $( #[link_name = stringify!($sym)] pub fn $name($($arg: $ty),*) -> $ret; )*
            }
        }

        #[cfg(feature = "linked")]
        #[allow(non_snake_case)]
        impl RuntimeApi {
            /// The linked table.
            pub const fn linked() -> Self {
                Self { _linked: () }
            }

            /// Whether each entry resolved: always, once the program linked.
            pub fn resolved(&self) -> [bool; RUNTIME_ENTRIES.len()] {
                [true; RUNTIME_ENTRIES.len()]
            }

            $(
                #[doc = concat!("`", stringify!($name), "`.")]
                #[inline(always)]
                pub fn $name(&self) -> Result<unsafe extern "C" fn($($ty),*) -> $ret, $crate::MissingSymbol> {
                    Ok(linked_runtime::$name)
                }
            )*
        }
    };
}

pub(crate) use driver_table;
pub(crate) use runtime_table;
