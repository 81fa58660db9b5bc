//! Fp2 = Fp[u] / (u^2 + 1), the field G2 coordinates live in.

use core::fmt;
use core::iter::{Product, Sum};
use core::ops::{Add, AddAssign, Mul, MulAssign, Neg, Sub, SubAssign};

use blst::*;
use rand_core::RngCore;

use crate::Fp;

/// `c0 + c1·u` with u^2 = −1.
#[derive(Clone, Copy, PartialEq, Eq, Default)]
#[repr(transparent)]
pub struct Fp2(blst_fp2);

// SAFETY: two `Fp`s, each a padding-free array of u64 limbs.
unsafe impl bytemuck::Zeroable for Fp2 {}
unsafe impl bytemuck::Pod for Fp2 {}

macro_rules! binary_op {
    ($trait:ident, $method:ident, $blst:ident) => {
        impl $trait for Fp2 {
            type Output = Self;
            fn $method(self, rhs: Self) -> Self {
                let mut out = blst_fp2::default();
                // SAFETY: valid pointers to initialized elements.
                unsafe { $blst(&mut out, &self.0, &rhs.0) };
                Self(out)
            }
        }
    };
}
binary_op!(Add, add, blst_fp2_add);
binary_op!(Sub, sub, blst_fp2_sub);
binary_op!(Mul, mul, blst_fp2_mul);
crate::prime::assign_ops!(Fp2);

impl Neg for Fp2 {
    type Output = Self;
    fn neg(self) -> Self {
        let mut out = blst_fp2::default();
        // SAFETY: valid pointers.
        unsafe { blst_fp2_cneg(&mut out, &self.0, true) };
        Self(out)
    }
}

impl Fp2 {
    pub const ZERO: Self = Self(blst_fp2 {
        fp: [blst_fp { l: [0; 6] }; 2],
    });
    pub const ONE: Self = Self(blst_fp2 {
        fp: [Fp::ONE.0, blst_fp { l: [0; 6] }],
    });

    pub fn new(c0: Fp, c1: Fp) -> Self {
        Self(blst_fp2 {
            fp: [*c0.as_raw(), *c1.as_raw()],
        })
    }

    pub fn c0(&self) -> Fp {
        Fp::from_raw(self.0.fp[0])
    }

    pub fn c1(&self) -> Fp {
        Fp::from_raw(self.0.fp[1])
    }

    pub fn random(rng: &mut (impl RngCore + ?Sized)) -> Self {
        Self::new(Fp::random(rng), Fp::random(rng))
    }

    /// The zcash encoding: c1 then c0, each 48 big-endian bytes.
    pub fn to_bytes_be(&self) -> [u8; 96] {
        let mut out = [0u8; 96];
        out[..48].copy_from_slice(&self.c1().to_bytes_be());
        out[48..].copy_from_slice(&self.c0().to_bytes_be());
        out
    }

    pub fn from_bytes_be(bytes: &[u8; 96]) -> Result<Self, crate::DecodeError> {
        let half = |b: &[u8]| Fp::from_bytes_be(b.try_into().expect("48 bytes"));
        Ok(Self::new(half(&bytes[48..])?, half(&bytes[..48])?))
    }

    pub(crate) fn as_raw(&self) -> &blst_fp2 {
        &self.0
    }

    pub(crate) fn from_raw(raw: blst_fp2) -> Self {
        Self(raw)
    }

    pub fn is_zero(&self) -> bool {
        *self == Self::ZERO
    }

    pub fn square(&self) -> Self {
        let mut out = blst_fp2::default();
        // SAFETY: valid pointers.
        unsafe { blst_fp2_sqr(&mut out, &self.0) };
        Self(out)
    }

    /// The multiplicative inverse; `None` for zero.
    pub fn inverse(&self) -> Option<Self> {
        if self.is_zero() {
            return None;
        }
        let mut out = blst_fp2::default();
        // SAFETY: valid pointers.
        unsafe { blst_fp2_inverse(&mut out, &self.0) };
        Some(Self(out))
    }
}

impl fmt::Debug for Fp2 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fp2({:?} + {:?}·u)", self.c0(), self.c1())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    #[test]
    fn u_squared_is_minus_one() {
        let u = Fp2::new(Fp::ZERO, Fp::ONE);
        assert_eq!(u * u, -Fp2::ONE);
        assert_eq!(Fp2::ONE, Fp2::new(Fp::ONE, Fp::ZERO));
    }

    #[test]
    fn field_laws() {
        let mut rng = ChaCha20Rng::seed_from_u64(7);
        for _ in 0..64 {
            let (a, b, c) = (
                Fp2::random(&mut rng),
                Fp2::random(&mut rng),
                Fp2::random(&mut rng),
            );
            assert_eq!((a + b) * c, a * c + b * c);
            assert_eq!(a.square(), a * a);
            assert_eq!(a * a.inverse().unwrap(), Fp2::ONE);
            // Karatsuba-free check against the schoolbook formula.
            let expected = Fp2::new(
                a.c0() * b.c0() - a.c1() * b.c1(),
                a.c0() * b.c1() + a.c1() * b.c0(),
            );
            assert_eq!(a * b, expected);
        }
    }
}
