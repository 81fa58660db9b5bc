//! Radix-2 evaluation domains over the BLS12-381 scalar field and number-theoretic transforms
//! on them: forward, inverse, and on the coset g·H (g = 7), parallel on the CPU with rayon,
//! plus the Groth16 quotient H = (A·B − C)/Z that the GPU pipeline must reproduce bit for bit.
//!
//! ```
//! use cuzk_field::Fr;
//! use cuzk_ntt::Transform;
//!
//! let coeffs: Vec<Fr> = (1..=8).map(Fr::from_u64).collect();
//! let mut values = coeffs.clone();
//! cuzk_ntt::transform(&mut values, Transform::Forward)?; // on the GPU when there is one
//! cuzk_ntt::transform(&mut values, Transform::Inverse)?;
//! assert_eq!(values, coeffs);
//! # Ok::<(), cuzk_ntt::NttError>(())
//! ```
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

use cuzk_field::Fr;

/// Below this size a GPU transform costs more in copies and launches than the CPU's.
const GPU_MIN_LOG_SIZE: u32 = 14;

/// Transform `t` of `values` in place, natural order in and out, over the domain of their
/// length (a power of two): on the first GPU when a device and the kernels are there and the
/// domain is large enough to gain from it, otherwise on every CPU core; the same result either
/// way. For many transforms, keep the [`Domain`] and device buffers instead
/// ([`Domain::gpu_transform`]).
pub fn transform(values: &mut [Fr], t: Transform) -> Result<(), NttError> {
    let domain = Domain::for_size(values.len())?;
    if domain.size() != values.len() {
        return Err(NttError::LengthMismatch {
            expected: domain.size(),
            got: values.len(),
        });
    }
    match cuzk_gpu::Gpu::available() {
        Some(gpu) if domain.log_size() >= GPU_MIN_LOG_SIZE => {
            domain.gpu_transform_host(&gpu, values, t, Order::Natural, Order::Natural)
        }
        _ => domain.transform_in_place(values, t),
    }
}
