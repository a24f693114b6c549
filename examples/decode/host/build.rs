//! Compiles ../kernels to PTX (nightly, nvptx64-nvidia-cuda) into `$OUT_DIR/kernels.ptx`,
//! which src/main.rs embeds. The host crate itself builds with any toolchain.

fn main() {
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    // PTX ISA 8.1 for the attention's `st.async` (CUDA 12.1 drivers and later).
    let build = cudadrv::kernel::build::PtxBuild::new("../kernels").target("sm_90", "ptx81");
    if let Err(e) = build.build(&out.join("kernels.ptx")) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
