//! Compiles ../kernels to PTX (nightly, nvptx64-nvidia-cuda) into `$OUT_DIR/kernels.ptx`,
//! which src/main.rs embeds. The host crate itself builds with any toolchain.

fn main() {
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    let build = cudadrv::kernel::build::PtxBuild::new("../kernels");
    if let Err(e) = build.build(&out.join("kernels.ptx")) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
