//! [`unroll`]: a loop of a constant number of iterations written out in full, the
//! `#pragma unroll` of a kernel written in Rust.

/// Calls `f(0)`, `f(1)`, ..., `f(N - 1)` in order, as `N` separate calls (`N` at most
/// 32): once inlined, each call sees its index as a constant, so arrays indexed by it
/// stay in registers instead of going to local memory, as they do when LLVM leaves a
/// loop rolled (it does so for bodies it finds too large, such as a few 16-byte loads
/// with their bounds checks).
///
/// ```
/// let mut acc = [0u32; 4];
/// cudadrv::kernel::unroll::<4>(|i| acc[i] = 10 * i as u32);
/// assert_eq!(acc, [0, 10, 20, 30]);
/// ```
#[inline(always)]
pub fn unroll<const N: usize>(mut f: impl FnMut(usize)) {
    const { assert!(N <= 32, "unroll: at most 32 iterations") };
    macro_rules! calls {
        ($($i:literal)*) => {$(
            if $i < N {
                f($i);
            }
        )*};
    }
    calls!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31);
}

#[cfg(test)]
mod tests {
    use super::unroll;

    #[test]
    fn calls_every_index_once_in_order() {
        let (mut seen, mut n) = ([usize::MAX; 32], 0);
        unroll::<0>(|_| n += 1);
        assert_eq!(n, 0);
        unroll::<7>(|i| {
            seen[n] = i;
            n += 1;
        });
        assert_eq!(seen[..n], [0, 1, 2, 3, 4, 5, 6]);
        n = 0;
        unroll::<32>(|i| {
            seen[n] = i;
            n += 1;
        });
        assert_eq!(n, 32);
        assert!(seen.iter().enumerate().all(|(k, &i)| k == i));
    }
}
