//! The runtime embeds no kernels; it only records whether this build found nvcc (then every
//! kernel crate embeds its kernels) and for which archs: `kernels_built`, `kernel_archs`.

fn main() {
    cuzk_kernel_build::probe();
}
