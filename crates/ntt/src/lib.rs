//! Radix-2 evaluation domains over the BLS12-381 scalar field and number-theoretic transforms
//! on them: forward, inverse, and on the coset g·H (g = 7), parallel on the CPU with rayon,
//! plus the Groth16 quotient H = (A·B − C)/Z that the GPU pipeline must reproduce bit for bit.
//!
//! The API is shaped so a GPU backend sits behind the same [`Domain`]: the [`Order`] enum names
//! the element orders the device transforms take and produce.
#![deny(unsafe_code)]

mod arith;
mod cpu;
mod domain;
mod error;
pub mod gpu;
// The launchers of this crate's kernels: the one module allowed `unsafe`.
#[allow(unsafe_code)]
pub mod kernels;
mod plan;
pub mod testing;

pub use cpu::bit_reverse_index;
pub use domain::{Domain, Order};
pub use error::NttError;
pub use plan::Transform;
