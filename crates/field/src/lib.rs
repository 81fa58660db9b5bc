//! BLS12-381 host types for cuzk: the scalar field [`Fr`], the base field [`Fp`], its quadratic
//! extension [`Fp2`], the groups G1 and G2 in affine and Jacobian form, and the pairing.
//!
//! Every type is `#[repr(transparent)]` over the matching `blst` type, so its memory layout is
//! exactly what the CUDA kernels read: field elements in Montgomery form as little-endian limbs
//! (Fr: 8 × u32, R = 2^256; Fp: 12 × u32, R = 2^384), affine points as `(x, y)` with the identity
//! encoded as `(0, 0)`, Jacobian points as `(X, Y, Z)`. All of them are [`bytemuck::Pod`], so a
//! slice can be copied to the device as bytes with no conversion. With the feature `blstrs`,
//! [`blstrs`](mod@blstrs) views blstrs' slices as these types and back, without copying.
//!
//! ```
//! use cuzk_field::{Fr, G1Affine, G1Projective};
//!
//! let p = G1Projective::generator() * Fr::from_u64(5);
//! let q = G1Affine::generator() * Fr::from_u64(2) + G1Affine::generator() * Fr::from_u64(3);
//! assert_eq!(p, q);
//! ```

#[cfg(feature = "blstrs")]
pub mod blstrs;
mod curve;
mod error;
mod fp2;
mod pairing;
mod prime;

pub use curve::{G1Affine, G1Projective, G2Affine, G2Projective};
pub use error::DecodeError;
pub use fp2::Fp2;
pub use pairing::{G2Prepared, Gt, MillerLoopResult, multi_miller_loop, pairing};
pub use prime::{Fp, Fr};

// The kernels index these types as arrays of 32-bit limbs: the sizes must never change.
const _: () = {
    use core::mem::{align_of, size_of};
    assert!(size_of::<Fr>() == 8 * 4 && align_of::<Fr>() == 8);
    assert!(size_of::<Fp>() == 12 * 4 && align_of::<Fp>() == 8);
    assert!(size_of::<Fp2>() == 2 * 12 * 4);
    assert!(size_of::<G1Affine>() == 2 * 12 * 4);
    assert!(size_of::<G1Projective>() == 3 * 12 * 4);
    assert!(size_of::<G2Affine>() == 2 * 2 * 12 * 4);
    assert!(size_of::<G2Projective>() == 3 * 2 * 12 * 4);
};
