//! Compiles `kernels/test/*.cu` (the test-only kernels) through the shared kernel build helper.

fn main() {
    cuzk_kernel_build::embed("test");
}
