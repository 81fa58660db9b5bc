//! Compiles `kernels/setup/*.cu` (the fixed-base setup kernels, only those) through the shared
//! kernel build helper.

fn main() {
    cuzk_kernel_build::embed("setup");
}
