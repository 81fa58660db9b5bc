//! Multi-scalar multiplication `Σ scalars[i] · points[i]` over BLS12-381 G1 and G2.
//!
//! - [`cpu::msm`]: parallel (rayon) and sparse-aware CPU MSM over blst's Pippenger; the
//!   reference every GPU path is checked against, and the fallback without a GPU.
//! - [`cpu::naive_msm`]: double-and-add, the oracle for tests.
//! - [`gpu::GpuMsm`]: GPU Pippenger over resident or streamed points, G1 and G2.
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
pub mod testing;

use core::fmt::Debug;
use core::iter::Sum;
use core::ops::{Add, AddAssign, Neg, Sub};

use cuzk_field::{Fr, G1Affine, G1Projective, G2Affine, G2Projective};
use rand_core::RngCore;

pub use error::MsmError;

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
