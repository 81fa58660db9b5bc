//! The optimal ate pairing e: G1 × G2 → Gt, through blst.

use core::fmt;

use blst::*;

use crate::{G1Affine, G2Affine};

/// An element of the target group (the order-r subgroup of Fp12*).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Gt(blst_fp12);

/// The output of a Miller loop, before the final exponentiation.
#[derive(Clone, Copy)]
pub struct MillerLoopResult(blst_fp12);

/// A G2 point with its Miller-loop line functions precomputed, for points paired many times
/// (the verifying key's γ and δ).
#[derive(Clone)]
pub struct G2Prepared {
    /// `None` for the identity, whose pairing with anything is one.
    lines: Option<Box<[blst_fp6; 68]>>,
}

impl fmt::Debug for Gt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Gt({})", if self.is_one() { "one" } else { "…" })
    }
}

impl fmt::Debug for MillerLoopResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("MillerLoopResult(…)")
    }
}

impl fmt::Debug for G2Prepared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.lines.is_some() {
            "G2Prepared(…)"
        } else {
            "G2Prepared(identity)"
        })
    }
}

impl Gt {
    pub fn one() -> Self {
        // SAFETY: blst returns a pointer to a static.
        Self(unsafe { *blst_fp12_one() })
    }

    pub fn is_one(&self) -> bool {
        // SAFETY: valid pointer.
        unsafe { blst_fp12_is_one(&self.0) }
    }
}

impl core::ops::Mul for Gt {
    type Output = Self;
    fn mul(self, rhs: Self) -> Self {
        let mut out = blst_fp12::default();
        // SAFETY: valid pointers.
        unsafe { blst_fp12_mul(&mut out, &self.0, &rhs.0) };
        Self(out)
    }
}

impl MillerLoopResult {
    pub fn final_exponentiation(&self) -> Gt {
        let mut out = blst_fp12::default();
        // SAFETY: valid pointers.
        unsafe { blst_final_exp(&mut out, &self.0) };
        Gt(out)
    }
}

impl From<G2Affine> for G2Prepared {
    fn from(q: G2Affine) -> Self {
        if q.is_identity() {
            return Self { lines: None };
        }
        let mut lines = Box::new([blst_fp6::default(); 68]);
        // SAFETY: blst writes exactly 68 line coefficients.
        unsafe { blst_precompute_lines(lines.as_mut_ptr(), q.as_raw()) };
        Self { lines: Some(lines) }
    }
}

/// The product of the Miller loops of all pairs; pairs with an identity point contribute one.
pub fn multi_miller_loop(terms: &[(&G1Affine, &G2Prepared)]) -> MillerLoopResult {
    // SAFETY: blst returns a pointer to a static.
    let mut acc = unsafe { *blst_fp12_one() };
    for (p, q) in terms {
        let Some(lines) = &q.lines else { continue };
        if p.is_identity() {
            continue;
        }
        let mut term = blst_fp12::default();
        let mut next = blst_fp12::default();
        // SAFETY: `lines` holds the 68 precomputed lines blst reads; other pointers are valid.
        unsafe {
            blst_miller_loop_lines(&mut term, lines.as_ptr(), p.as_raw());
            blst_fp12_mul(&mut next, &acc, &term);
        }
        acc = next;
    }
    MillerLoopResult(acc)
}

pub fn pairing(p: &G1Affine, q: &G2Affine) -> Gt {
    multi_miller_loop(&[(p, &G2Prepared::from(*q))]).final_exponentiation()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Fr, G1Projective, G2Projective};
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    #[test]
    fn bilinear_and_non_degenerate() {
        let mut rng = ChaCha20Rng::seed_from_u64(11);
        let (a, b) = (Fr::random(&mut rng), Fr::random(&mut rng));
        let g1 = G1Projective::generator();
        let g2 = G2Projective::generator();
        let lhs = pairing(&(g1 * a).to_affine(), &(g2 * b).to_affine());
        let rhs = pairing(&(g1 * (a * b)).to_affine(), &g2.to_affine());
        assert_eq!(lhs, rhs);
        assert!(!pairing(&g1.to_affine(), &g2.to_affine()).is_one());
        assert!(pairing(&G1Affine::identity(), &g2.to_affine()).is_one());
        assert!(pairing(&g1.to_affine(), &G2Affine::identity()).is_one());
        // e(aG, H) · e(−aG, H) = 1 through one multi-Miller loop.
        let h = G2Prepared::from(g2.to_affine());
        let p = (g1 * a).to_affine();
        let q = -p;
        assert!(
            multi_miller_loop(&[(&p, &h), (&q, &h)])
                .final_exponentiation()
                .is_one()
        );
        assert_eq!(Gt::one() * lhs, lhs);
    }
}
