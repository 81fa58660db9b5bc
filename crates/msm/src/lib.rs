//! Multi-scalar multiplication `Σ scalars[i] · points[i]` over BLS12-381 G1 and G2.
//!
//! ```
//! use cuzk_field::{Fr, G1Affine, G1Projective};
//!
//! let points = [G1Affine::generator(); 3];
//! let scalars = [Fr::from_u64(1), Fr::from_u64(2), Fr::from_u64(3)];
//! let sum = cuzk_msm::msm(&points, &scalars)?; // on the GPU when there is one
//! assert_eq!(sum, G1Projective::generator() * Fr::from_u64(6));
//! # Ok::<(), cuzk_msm::MsmError>(())
//! ```
//!
//! - [`msm`]: the one call, on the first GPU when one is there, else on the CPU.
//! - [`cpu::msm`]: parallel (rayon) and sparse-aware CPU MSM over blst's Pippenger; the
//!   reference every GPU path is checked against, and the fallback without a GPU.
//! - [`cpu::naive_msm`]: double-and-add, the oracle for tests.
//! - [`gpu::GpuMsm`]: GPU Pippenger over resident or streamed points, G1 and G2.
//! - [`subgroup`]: GPU checks that many points are in the prime-order subgroup (loading
//!   parameter files of unknown origin).
//! - [`testing::random_points`]: many distinct random points quickly, for tests and benches.
//!
//! Points are affine ([`MsmPoint`] is implemented for [`G1Affine`] and [`G2Affine`]), scalars are
//! [`Fr`] in Montgomery form, exactly as stored in proving keys and witnesses.

#![deny(unsafe_code)]

pub mod cpu;
mod error;
pub mod gpu;
// The launchers of this crate's kernels: the one module allowed `unsafe`.
#[allow(unsafe_code)]
pub mod kernels;
pub mod subgroup;
pub mod testing;

use core::fmt::Debug;
use core::iter::Sum;
use core::ops::{Add, AddAssign, Neg, Sub};

use cuzk_field::{Fr, G1Affine, G1Projective, G2Affine, G2Projective};
use rand_core::RngCore;

pub use error::MsmError;

/// Below this many points a GPU MSM costs more in uploads and launches than the CPU's.
const GPU_MIN_POINTS: usize = 1 << 12;

/// `Σ scalars[i] · points[i]` (equal lengths): on the first GPU when a device and the kernels
/// are there and the MSM is large enough to gain from it, otherwise on every CPU core; the same
/// point either way. For many MSMs over the same points, keep a [`gpu::GpuMsm`] instead: it
/// holds the points on the device between calls.
pub fn msm<P: MsmPoint>(points: &[P], scalars: &[Fr]) -> Result<P::Projective, MsmError> {
    match cuzk_gpu::Gpu::available() {
        Some(gpu) if points.len() >= GPU_MIN_POINTS && points.len() == scalars.len() => {
            gpu::GpuMsm::new(&gpu, points)?.msm(scalars)
        }
        _ => cpu::msm(points, scalars),
    }
}

/// Which group a point type lives in; selects the GPU kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Group {
    G1,
    G2,
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for cuzk_field::G1Affine {}
    impl Sealed for cuzk_field::G2Affine {}
}

/// An affine point type an MSM runs over. Sealed: the GPU code relies on the exact memory
/// layout of the two implementors (identity = all-zero coordinates).
pub trait MsmPoint:
    sealed::Sealed
    + Copy
    + Default
    + bytemuck::Pod
    + Send
    + Sync
    + Eq
    + Debug
    + Neg<Output = Self>
    + 'static
{
    /// The Jacobian form results are returned in.
    type Projective: Copy
        + Default
        + bytemuck::Pod
        + Send
        + Sync
        + Eq
        + Debug
        + Add<Output = Self::Projective>
        + AddAssign
        + AddAssign<Self>
        + Sub<Output = Self::Projective>
        + Neg<Output = Self::Projective>
        + Sum
        + From<Self>;

    const GROUP: Group;

    fn is_identity(&self) -> bool;
    fn double(p: &Self::Projective) -> Self::Projective;
    fn to_affine(p: &Self::Projective) -> Self;
    /// Many points to affine with one inversion.
    fn batch_to_affine(points: &[Self::Projective]) -> Vec<Self>;
    /// blst's single-threaded Pippenger; `None` on a length mismatch.
    fn pippenger(points: &[Self], scalars: &[Fr]) -> Option<Self::Projective>;
    /// `generator · s` for a uniformly random `s`.
    fn random(rng: &mut impl RngCore) -> Self::Projective;
}

macro_rules! msm_point {
    ($affine:ident, $proj:ident, $group:ident) => {
        impl MsmPoint for $affine {
            type Projective = $proj;
            const GROUP: Group = Group::$group;

            fn is_identity(&self) -> bool {
                $affine::is_identity(self)
            }
            fn double(p: &$proj) -> $proj {
                p.double()
            }
            fn to_affine(p: &$proj) -> Self {
                p.to_affine()
            }
            fn batch_to_affine(points: &[$proj]) -> Vec<Self> {
                $proj::batch_to_affine(points)
            }
            fn pippenger(points: &[Self], scalars: &[Fr]) -> Option<$proj> {
                $proj::pippenger(points, scalars)
            }
            fn random(rng: &mut impl RngCore) -> $proj {
                $proj::random(rng)
            }
        }
    };
}

msm_point!(G1Affine, G1Projective, G1);
msm_point!(G2Affine, G2Projective, G2);
