//! Compiles `kernels/ntt/*.cu` (only this crate's kernels) through the shared kernel build helper.

fn main() {
    cuzk_kernel_build::embed("ntt");
}
