//! `flags!`: the flag-set types of the driver's `*_flags` enums ([`EventFlags`],
//! [`StreamFlags`], [`ContextFlags`], ...), a `#[repr(transparent)]` integer with one
//! constant per flag, the set operations and a `Debug` that names the flags.
//!
//! Written here instead of depending on `bitflags`: eight small types did not need a
//! crate on every user's build path, nor the parser, iterator and trait machinery it
//! generates for each type (about 5% of this crate's code before optimization).
//!
//! [`EventFlags`]: crate::EventFlags
//! [`StreamFlags`]: crate::StreamFlags
//! [`ContextFlags`]: crate::ContextFlags

use core::fmt;

/// Defines a flag-set type: `pub struct Name: u32 { /// doc; const FLAG = value; ... }`,
/// outer attributes (docs, derives other than `Debug`) kept. The type gets the flags as
/// associated constants and `empty`, `all`, `bits`, `from_bits` (refusing bits that name
/// no flag), `from_bits_truncate`, `from_bits_retain` (keeping them), `is_empty`,
/// `is_all`, `contains`, `intersects`, `insert`, `remove`, `toggle`, `set`, `union`,
/// `intersection`, `difference`, `symmetric_difference`, `complement`, the operators
/// `| & ^ - !` (and their assignments), and `Debug` as `Name(A | B | 0x100)`.
macro_rules! flags {
    (
        $(#[$outer:meta])*
        $vis:vis struct $Name:ident: $T:ty {
            $(
                $(#[$inner:meta])*
                const $Flag:ident = $value:expr;
            )*
        }
    ) => {
        $(#[$outer])*
        #[repr(transparent)]
        $vis struct $Name($T);

        #[allow(dead_code)]
        impl $Name {
            $(
                $(#[$inner])*
                pub const $Flag: Self = Self($value);
            )*

            /// The flags' names and values, in declaration order.
            const NAMES: &'static [(&'static str, u64)] = &[$((stringify!($Flag), $value as u64)),*];

            /// No flag set.
            #[inline]
            #[must_use]
            pub const fn empty() -> Self {
                Self(0)
            }

            /// Every flag this type names.
            #[inline]
            #[must_use]
            pub const fn all() -> Self {
                Self(0 $(| $value)*)
            }

            /// The raw value.
            #[inline]
            #[must_use]
            pub const fn bits(&self) -> $T {
                self.0
            }

            /// `bits` as a set, or `None` if a bit of it names no flag of this type.
            #[inline]
            #[must_use]
            pub const fn from_bits(bits: $T) -> Option<Self> {
                if bits & !Self::all().0 == 0 {
                    Some(Self(bits))
                } else {
                    None
                }
            }

            /// `bits` without the bits that name no flag of this type.
            #[inline]
            #[must_use]
            pub const fn from_bits_truncate(bits: $T) -> Self {
                Self(bits & Self::all().0)
            }

            /// `bits` as they are, the ones this type does not name included (flags of a
            /// newer driver).
            #[inline]
            #[must_use]
            pub const fn from_bits_retain(bits: $T) -> Self {
                Self(bits)
            }

            /// Whether no bit is set.
            #[inline]
            #[must_use]
            pub const fn is_empty(&self) -> bool {
                self.0 == 0
            }

            /// Whether every flag this type names is set.
            #[inline]
            #[must_use]
            pub const fn is_all(&self) -> bool {
                self.0 & Self::all().0 == Self::all().0
            }

            /// Whether every bit of `other` is set here.
            #[inline]
            #[must_use]
            pub const fn contains(&self, other: Self) -> bool {
                self.0 & other.0 == other.0
            }

            /// Whether a bit of `other` is set here.
            #[inline]
            #[must_use]
            pub const fn intersects(&self, other: Self) -> bool {
                self.0 & other.0 != 0
            }

            /// Sets the bits of `other`.
            #[inline]
            pub fn insert(&mut self, other: Self) {
                self.0 |= other.0;
            }

            /// Clears the bits of `other`.
            #[inline]
            pub fn remove(&mut self, other: Self) {
                self.0 &= !other.0;
            }

            /// Flips the bits of `other`.
            #[inline]
            pub fn toggle(&mut self, other: Self) {
                self.0 ^= other.0;
            }

            /// Sets (`value`) or clears the bits of `other`.
            #[inline]
            pub fn set(&mut self, other: Self, value: bool) {
                if value {
                    self.insert(other);
                } else {
                    self.remove(other);
                }
            }

            /// The bits set in either.
            #[inline]
            #[must_use]
            pub const fn union(self, other: Self) -> Self {
                Self(self.0 | other.0)
            }

            /// The bits set in both.
            #[inline]
            #[must_use]
            pub const fn intersection(self, other: Self) -> Self {
                Self(self.0 & other.0)
            }

            /// The bits set here and not in `other`.
            #[inline]
            #[must_use]
            pub const fn difference(self, other: Self) -> Self {
                Self(self.0 & !other.0)
            }

            /// The bits set in exactly one of the two.
            #[inline]
            #[must_use]
            pub const fn symmetric_difference(self, other: Self) -> Self {
                Self(self.0 ^ other.0)
            }

            /// The flags this type names that are not set here.
            #[inline]
            #[must_use]
            pub const fn complement(self) -> Self {
                Self::from_bits_truncate(!self.0)
            }
        }

        impl core::ops::BitOr for $Name {
            type Output = Self;
            #[inline]
            fn bitor(self, other: Self) -> Self {
                self.union(other)
            }
        }

        impl core::ops::BitOrAssign for $Name {
            #[inline]
            fn bitor_assign(&mut self, other: Self) {
                self.insert(other);
            }
        }

        impl core::ops::BitAnd for $Name {
            type Output = Self;
            #[inline]
            fn bitand(self, other: Self) -> Self {
                self.intersection(other)
            }
        }

        impl core::ops::BitAndAssign for $Name {
            #[inline]
            fn bitand_assign(&mut self, other: Self) {
                self.0 &= other.0;
            }
        }

        impl core::ops::BitXor for $Name {
            type Output = Self;
            #[inline]
            fn bitxor(self, other: Self) -> Self {
                self.symmetric_difference(other)
            }
        }

        impl core::ops::BitXorAssign for $Name {
            #[inline]
            fn bitxor_assign(&mut self, other: Self) {
                self.toggle(other);
            }
        }

        impl core::ops::Sub for $Name {
            type Output = Self;
            #[inline]
            fn sub(self, other: Self) -> Self {
                self.difference(other)
            }
        }

        impl core::ops::SubAssign for $Name {
            #[inline]
            fn sub_assign(&mut self, other: Self) {
                self.remove(other);
            }
        }

        impl core::ops::Not for $Name {
            type Output = Self;
            #[inline]
            fn not(self) -> Self {
                self.complement()
            }
        }

        impl core::fmt::Debug for $Name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                $crate::flags::write_flags(f, stringify!($Name), Self::NAMES, self.0 as u64)
            }
        }
    };
}

pub(crate) use flags;

/// `Name(A | B | 0x100)`: the named flags set in `bits`, in declaration order, then the
/// bits no name covers in hex; `Name(0x0)` for none. One function for every flag type.
pub(crate) fn write_flags(
    f: &mut fmt::Formatter<'_>,
    type_name: &str,
    names: &[(&str, u64)],
    bits: u64,
) -> fmt::Result {
    f.write_str(type_name)?;
    f.write_str("(")?;
    let mut rest = bits;
    let mut first = true;
    for &(name, value) in names {
        if value != 0 && rest & value == value {
            if !first {
                f.write_str(" | ")?;
            }
            f.write_str(name)?;
            rest &= !value;
            first = false;
        }
    }
    if rest != 0 || first {
        if !first {
            f.write_str(" | ")?;
        }
        write!(f, "{rest:#x}")?;
    }
    f.write_str(")")
}

#[cfg(all(test, feature = "std"))]
mod tests {
    use std::format;

    flags! {
        #[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
        struct Demo: u32 {
            const A = 1;
            const B = 1 << 3;
            const AB = 1 | 1 << 3;
        }
    }

    #[test]
    fn set_operations_match_the_bits() {
        assert_eq!(Demo::all().bits(), 0b1001);
        assert_eq!(Demo::empty().bits(), 0);
        assert_eq!(Demo::from_bits(0b1001), Some(Demo::A | Demo::B));
        assert_eq!(Demo::from_bits(0b0010), None);
        assert_eq!(Demo::from_bits_truncate(0b1011).bits(), 0b1001);
        assert_eq!(Demo::from_bits_retain(0b1011).bits(), 0b1011);
        assert!(Demo::AB.contains(Demo::A) && !Demo::A.contains(Demo::AB));
        assert!(Demo::AB.intersects(Demo::B) && !Demo::A.intersects(Demo::B));
        assert!(Demo::AB.is_all() && !Demo::A.is_all() && Demo::empty().is_empty());
        let mut d = Demo::A;
        d.insert(Demo::B);
        assert_eq!(d, Demo::AB);
        d.remove(Demo::A);
        assert_eq!(d, Demo::B);
        d.toggle(Demo::AB);
        assert_eq!(d, Demo::A);
        d.set(Demo::B, true);
        assert_eq!(d, Demo::AB);
        d.set(Demo::AB, false);
        assert!(d.is_empty());
        assert_eq!(Demo::AB - Demo::A, Demo::B);
        assert_eq!(Demo::AB ^ Demo::A, Demo::B);
        assert_eq!(Demo::AB & Demo::B, Demo::B);
        assert_eq!(!Demo::A, Demo::B);
        assert_eq!(!Demo::from_bits_retain(0b0110), Demo::AB);
        let mut e = Demo::A;
        e |= Demo::B;
        e &= Demo::B;
        e ^= Demo::A;
        e -= Demo::B;
        assert_eq!(e, Demo::A);
    }

    #[test]
    fn debug_names_the_flags_and_the_rest() {
        assert_eq!(format!("{:?}", Demo::A), "Demo(A)");
        assert_eq!(format!("{:?}", Demo::B), "Demo(B)");
        // The multi-bit name comes after its parts: they have taken its bits.
        assert_eq!(format!("{:?}", Demo::AB), "Demo(A | B)");
        assert_eq!(
            format!("{:?}", Demo::from_bits_retain(0b1_0001)),
            "Demo(A | 0x10)"
        );
        assert_eq!(format!("{:?}", Demo::empty()), "Demo(0x0)");
        assert_eq!(format!("{:?}", Demo::from_bits_retain(0x40)), "Demo(0x40)");
    }
}
