//! Compiles `kernels/groth16/*.cu` (key generation's fixed-base kernels and the R1CS
//! evaluation, only those) through the shared kernel build helper.

fn main() {
    cuzk_kernel_build::embed("groth16");
}
