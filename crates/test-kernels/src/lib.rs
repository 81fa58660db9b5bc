//! Test-only kernels: `kernels/test/ff_test.cu` (element-wise Fr/Fp/Fp2 arithmetic and G1/G2
//! point operations from `kernels/ff/` and `kernels/ec/`, checked against cuzk-field, and the
//! field throughput kernels) and `kernels/test/smoke.cu` (the runtime's whole-path check). A
//! crate of its own so that only tests and benches embed them, never the `cuzk` binary.
#![deny(unsafe_code)]

#[allow(unsafe_code)]
pub mod ff;
#[allow(unsafe_code)]
pub mod smoke;

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/kernels.rs"));
}
pub use embedded::KERNELS;
