//! ABI: the cuda-sys structs that cuda-core builds have the C compiler's layout.

/// Every size, alignment and field offset listed in tests/abi/layout.txt agrees between
/// the C probe (compiled against the CUDA headers) and cuda-sys.
#[test]
#[cfg_attr(
    not(abi_probe),
    ignore = "no CUDA headers when building: run `cargo xtask test`"
)]
fn c_probe_matches_rust_layout() {
    #[cfg(abi_probe)]
    {
        let c = cuda_workspace::abi::c_layout();
        let rust = cuda_workspace::abi::RUST_LAYOUT;
        assert_eq!(c.len(), rust.len(), "probe and Rust lists differ in length");
        let mismatches: Vec<String> = c
            .iter()
            .zip(rust)
            .filter(|((cn, cv), (rn, rv))| cn != rn || cv != rv)
            .map(|((cn, cv), (rn, rv))| format!("{cn} = {cv} (C) vs {rn} = {rv} (Rust)"))
            .collect();
        assert!(
            mismatches.is_empty(),
            "layout mismatches:\n{}",
            mismatches.join("\n")
        );
        assert!(c.len() > 150, "only {} checks ran", c.len());
        println!("{} layout checks agree", c.len());
    }
}
