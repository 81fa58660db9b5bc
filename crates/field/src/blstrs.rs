//! Zero-copy views between [blstrs](https://docs.rs/blstrs)' types and cuzk's (feature `blstrs`):
//! each pair is `#[repr(transparent)]` over the same blst type (blstrs 0.7 and this crate share
//! one blst), so a slice of one is a slice of the other and nothing is copied. The sizes and
//! alignments are asserted below; a blstrs that changed its layout fails to compile here.
//!
//! ```
//! use cuzk_field::blstrs::{self as bs, AsBlstrs, AsBlstrsMut, AsCuzk};
//! use cuzk_field::{Fr, G1Affine};
//!
//! let ours = vec![G1Affine::generator(); 4];
//! let theirs: &[bs::G1Affine] = ours.as_blstrs(); // the same memory, as blstrs points
//! assert_eq!(theirs.as_cuzk(), &ours[..]);
//! let scalars = vec![bs::Scalar::from(3u64); 4];
//! assert_eq!(scalars.as_cuzk()[0], Fr::from_u64(3));
//! let mut z = vec![Fr::ZERO; 2];
//! z.as_blstrs_mut()[1] = bs::Scalar::from(5u64); // written in place
//! assert_eq!(z[1], Fr::from_u64(5));
//! ```

pub use ::blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};

use core::mem::{align_of, size_of};

/// Views blstrs values (or slices of them) as cuzk's, without copying.
pub trait AsCuzk {
    type Target: ?Sized;
    fn as_cuzk(&self) -> &Self::Target;
}

/// Views cuzk values (or slices of them) as blstrs', without copying.
pub trait AsBlstrs {
    type Target: ?Sized;
    fn as_blstrs(&self) -> &Self::Target;
}

/// Views cuzk slices as blstrs' for writing, without copying (a witness that blstrs-typed
/// synthesis fills in place).
pub trait AsBlstrsMut {
    type Target: ?Sized;
    fn as_blstrs_mut(&mut self) -> &mut Self::Target;
}

macro_rules! same_layout {
    ($($ours:ty => $theirs:ty),* $(,)?) => {$(
        const _: () = assert!(
            size_of::<$ours>() == size_of::<$theirs>() && align_of::<$ours>() == align_of::<$theirs>()
        );

        impl AsCuzk for [$theirs] {
            type Target = [$ours];
            #[inline]
            fn as_cuzk(&self) -> &[$ours] {
                // SAFETY: both types are `#[repr(transparent)]` over the same blst struct (same
                // size and alignment, asserted above), so the pointer and length describe the
                // same memory as a slice of the other type; the borrow carries over.
                unsafe { core::slice::from_raw_parts(self.as_ptr().cast(), self.len()) }
            }
        }

        impl AsBlstrs for [$ours] {
            type Target = [$theirs];
            #[inline]
            fn as_blstrs(&self) -> &[$theirs] {
                // SAFETY: as in `as_cuzk`, the other way round.
                unsafe { core::slice::from_raw_parts(self.as_ptr().cast(), self.len()) }
            }
        }

        impl AsBlstrsMut for [$ours] {
            type Target = [$theirs];
            #[inline]
            fn as_blstrs_mut(&mut self) -> &mut [$theirs] {
                // SAFETY: as in `as_cuzk`; the unique borrow carries over, and every bit
                // pattern the other type may hold is one this type may hold (both are the same
                // blst struct).
                unsafe { core::slice::from_raw_parts_mut(self.as_mut_ptr().cast(), self.len()) }
            }
        }

        impl From<$theirs> for $ours {
            fn from(v: $theirs) -> $ours {
                // SAFETY: the same blst struct under both names (layout asserted above).
                unsafe { core::mem::transmute::<$theirs, $ours>(v) }
            }
        }

        impl From<$ours> for $theirs {
            fn from(v: $ours) -> $theirs {
                // SAFETY: as above.
                unsafe { core::mem::transmute::<$ours, $theirs>(v) }
            }
        }
    )*};
}

same_layout! {
    crate::Fr => Scalar,
    crate::G1Affine => G1Affine,
    crate::G1Projective => G1Projective,
    crate::G2Affine => G2Affine,
    crate::G2Projective => G2Projective,
}
