//! What the unit tests share: a small deterministic generator for property tests; and
//! the crate-wide check that every error type stays small.

/// Cases per property test (Miri is slow).
pub(crate) const CASES: usize = if cfg!(miri) { 200 } else { 10_000 };

/// splitmix64: a small deterministic PRNG, so a failing case replays.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// True one time in `n`.
    pub(crate) fn one_in(&mut self, n: u64) -> bool {
        self.below(n) == 0
    }

    pub(crate) fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize]
    }
}

#[cfg(not(target_arch = "nvptx64"))]
mod error_size {
    #[test]
    fn error_stays_small() {
        // The inline name fills the room the largest variant already takes.
        assert!(
            size_of::<crate::Error>() <= 64,
            "{}",
            size_of::<crate::Error>()
        );
        // Every error type the crate returns by value (through `Result`s that a caller
        // moves up its stack) stays within the same 64 bytes.
        let sizes = [
            ("DropError", size_of::<crate::error::DropError>()),
            ("PackError", size_of::<crate::args::PackError>()),
            ("LayoutMismatch", size_of::<crate::args::LayoutMismatch>()),
            #[cfg(feature = "graph")]
            (
                "ExecUpdateError",
                size_of::<crate::graph::ExecUpdateError>(),
            ),
            (
                "TooManyAttributes",
                size_of::<crate::launch::TooManyAttributes>(),
            ),
            ("BuildError", size_of::<crate::kernel::build::BuildError>()),
        ];
        for (name, size) in sizes {
            assert!(size <= 64, "{name} is {size} bytes");
        }
    }
}
