//! G1 (over Fp) and G2 (over Fp2), in affine and Jacobian coordinates.

use core::fmt;
use core::iter::Sum;
use core::ops::{Add, AddAssign, Mul, Neg, Sub, SubAssign};

use blst::*;
use rand_core::RngCore;

use crate::error::check;
use crate::{DecodeError, Fp, Fp2, Fr};

macro_rules! curve_group {
    (
        $affine:ident($raw_affine:ident), $proj:ident($raw_proj:ident), coordinate = $coord:ident,
        compressed = $compressed:literal, uncompressed = $uncompressed:literal,
        add = $add:ident, add_affine = $add_affine:ident, double = $double:ident,
        mult = $mult:ident, cneg = $cneg:ident, to_affine = $to_affine:ident,
        from_affine = $from_affine:ident, is_equal = $is_equal:ident, is_inf = $is_inf:ident,
        generator = $generator:ident, affine_on_curve = $affine_on_curve:ident,
        affine_in_group = $affine_in_group:ident, batch_to_affine = $batch_to_affine:ident,
        compress = $compress:ident, serialize = $serialize:ident,
        pippenger = $pippenger:ident, pippenger_scratch = $pippenger_scratch:ident,
        uncompress = $uncompress:ident,
    ) => {
        /// A point in affine coordinates, as stored in proving keys; the identity is `(0, 0)`.
        #[derive(Clone, Copy, Default)]
        #[repr(transparent)]
        pub struct $affine($raw_affine);

        /// A point in Jacobian coordinates `(X, Y, Z)`, `x = X/Z^2`, `y = Y/Z^3`; Z = 0 is the identity.
        #[derive(Clone, Copy, Default)]
        #[repr(transparent)]
        pub struct $proj($raw_proj);

        // SAFETY: `#[repr(C)]` structs of u64 limb arrays: no padding, any bit pattern is
        // storable (decoding is where points are validated).
        unsafe impl bytemuck::Zeroable for $affine {}
        unsafe impl bytemuck::Pod for $affine {}
        unsafe impl bytemuck::Zeroable for $proj {}
        unsafe impl bytemuck::Pod for $proj {}

        impl $affine {
            pub const COMPRESSED_BYTES: usize = $compressed;
            pub const UNCOMPRESSED_BYTES: usize = $uncompressed;

            pub fn identity() -> Self {
                Self::default()
            }

            pub fn generator() -> Self {
                $proj::generator().to_affine()
            }

            pub fn is_identity(&self) -> bool {
                // SAFETY: valid pointer.
                unsafe { $is_inf(&self.to_projective().0) }
            }

            pub fn x(&self) -> $coord {
                $coord::from_raw(self.0.x)
            }

            pub fn y(&self) -> $coord {
                $coord::from_raw(self.0.y)
            }

            /// A point from its coordinates, checked to be on the curve and in the subgroup.
            pub fn from_xy(x: $coord, y: $coord) -> Result<Self, DecodeError> {
                let p = Self::from_xy_unchecked(x, y);
                if !p.is_on_curve() {
                    Err(DecodeError::NotOnCurve)
                } else if !p.is_torsion_free() {
                    Err(DecodeError::NotInSubgroup)
                } else {
                    Ok(p)
                }
            }

            /// A point from its coordinates with no check at all: for data that was validated
            /// before, and for tests that need invalid points.
            pub fn from_xy_unchecked(x: $coord, y: $coord) -> Self {
                Self($raw_affine {
                    x: *x.as_raw(),
                    y: *y.as_raw(),
                })
            }

            pub fn is_on_curve(&self) -> bool {
                // SAFETY: valid pointer.
                unsafe { $affine_on_curve(&self.0) }
            }

            /// In the prime-order subgroup (the identity is).
            pub fn is_torsion_free(&self) -> bool {
                // SAFETY: valid pointer.
                unsafe { $affine_in_group(&self.0) }
            }

            pub fn to_projective(&self) -> $proj {
                let mut out = $raw_proj::default();
                // SAFETY: valid pointers.
                unsafe { $from_affine(&mut out, &self.0) };
                $proj(out)
            }

            /// The zcash/IETF compressed encoding (flags in the top three bits).
            pub fn to_compressed(&self) -> [u8; $compressed] {
                let mut out = [0u8; $compressed];
                // SAFETY: `out` has the size blst writes.
                unsafe { $compress(out.as_mut_ptr(), &self.0) };
                out
            }

            pub fn to_uncompressed(&self) -> [u8; $uncompressed] {
                let mut out = [0u8; $uncompressed];
                // SAFETY: `out` has the size blst writes.
                unsafe { $serialize(out.as_mut_ptr(), &self.0) };
                out
            }

            /// Decodes and checks canonical coordinates, curve membership and subgroup membership.
            pub fn from_compressed(bytes: &[u8; $compressed]) -> Result<Self, DecodeError> {
                let mut out = $raw_affine::default();
                // SAFETY: `bytes` has the size blst reads.
                check(unsafe { $uncompress(&mut out, bytes.as_ptr()) })?;
                Self(out).checked_subgroup()
            }

            /// Decodes and checks canonical coordinates, curve membership and subgroup membership.
            pub fn from_uncompressed(bytes: &[u8; $uncompressed]) -> Result<Self, DecodeError> {
                Self::from_uncompressed_unchecked(bytes)?.checked_subgroup()
            }

            /// Like [`Self::from_uncompressed`] without the (costly) subgroup check, for keys
            /// whose subgroup membership is checked in bulk separately.
            pub fn from_uncompressed_unchecked(
                bytes: &[u8; $uncompressed],
            ) -> Result<Self, DecodeError> {
                // blst's deserializer always checks the subgroup, so parse here: flags are the top
                // three bits of the first byte (compressed, infinity, sign).
                let flags = bytes[0] >> 5;
                if flags & 0b101 != 0 {
                    return Err(DecodeError::BadEncoding);
                }
                if flags & 0b010 != 0 {
                    let rest_zero = bytes[0] & 0x1f == 0 && bytes[1..].iter().all(|&b| b == 0);
                    return if rest_zero {
                        Ok(Self::identity())
                    } else {
                        Err(DecodeError::BadEncoding)
                    };
                }
                let half = $uncompressed / 2;
                let coord = |b: &[u8]| {
                    $coord::from_bytes_be(b.try_into().expect("half of the encoding"))
                        .map_err(|_| DecodeError::BadEncoding)
                };
                let p = Self::from_xy_unchecked(coord(&bytes[..half])?, coord(&bytes[half..])?);
                if p.is_on_curve() {
                    Ok(p)
                } else {
                    Err(DecodeError::NotOnCurve)
                }
            }

            fn checked_subgroup(self) -> Result<Self, DecodeError> {
                if self.is_torsion_free() {
                    Ok(self)
                } else {
                    Err(DecodeError::NotInSubgroup)
                }
            }
        }

        impl PartialEq for $affine {
            fn eq(&self, other: &Self) -> bool {
                self.to_projective() == other.to_projective()
            }
        }
        impl Eq for $affine {}

        impl Neg for $affine {
            type Output = Self;
            fn neg(self) -> Self {
                if self.is_identity() {
                    return self;
                }
                Self::from_xy_unchecked(self.x(), -self.y())
            }
        }

        impl fmt::Debug for $affine {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                if self.is_identity() {
                    write!(f, concat!(stringify!($affine), "(identity)"))
                } else {
                    write!(
                        f,
                        concat!(stringify!($affine), "(x: {:?}, y: {:?})"),
                        self.x(),
                        self.y()
                    )
                }
            }
        }

        impl $proj {
            pub fn identity() -> Self {
                Self::default()
            }

            pub fn generator() -> Self {
                // SAFETY: blst returns a pointer to a static.
                Self(unsafe { *$generator() })
            }

            /// `generator · s` for a uniformly random scalar s.
            pub fn random(rng: &mut (impl RngCore + ?Sized)) -> Self {
                Self::generator() * Fr::random(rng)
            }

            pub fn is_identity(&self) -> bool {
                // SAFETY: valid pointer.
                unsafe { $is_inf(&self.0) }
            }

            pub fn double(&self) -> Self {
                let mut out = $raw_proj::default();
                // SAFETY: valid pointers.
                unsafe { $double(&mut out, &self.0) };
                Self(out)
            }

            pub fn to_affine(&self) -> $affine {
                let mut out = $raw_affine::default();
                // SAFETY: valid pointers.
                unsafe { $to_affine(&mut out, &self.0) };
                $affine(out)
            }

            /// `Σ scalars[i] · points[i]` by blst's single-threaded Pippenger; `None` when the
            /// lengths differ. Parallel and sparse-aware MSM is built on this in `cuzk-msm`.
            pub fn pippenger(points: &[$affine], scalars: &[Fr]) -> Option<Self> {
                if points.len() != scalars.len() {
                    return None;
                }
                if points.is_empty() {
                    return Some(Self::identity());
                }
                let bytes: Vec<blst_scalar> = scalars.iter().map(|s| s.to_blst_scalar()).collect();
                // blst convention: a pointer array whose second entry is null names one
                // contiguous array.
                let point_ptrs = [points.as_ptr() as *const $raw_affine, core::ptr::null()];
                let scalar_ptrs = [bytes.as_ptr() as *const u8, core::ptr::null()];
                // SAFETY: blst asks for this many bytes of scratch, rounded up to whole limbs.
                let scratch_bytes = unsafe { $pippenger_scratch(points.len()) };
                let mut scratch = vec![0u64; scratch_bytes.div_ceil(8)];
                let mut out = $raw_proj::default();
                // SAFETY: `points` and `bytes` are contiguous arrays of `points.len()` elements
                // (each scalar 32 bytes, of which 255 bits are read); `scratch` is large enough.
                unsafe {
                    $pippenger(
                        &mut out,
                        point_ptrs.as_ptr(),
                        points.len(),
                        scalar_ptrs.as_ptr(),
                        255,
                        scratch.as_mut_ptr(),
                    )
                };
                Some(Self(out))
            }

            /// Converts many points with one field inversion.
            pub fn batch_to_affine(points: &[Self]) -> Vec<$affine> {
                let mut out = vec![$affine::default(); points.len()];
                // Identity points break the shared inversion: convert them apart.
                let finite: Vec<usize> = (0..points.len())
                    .filter(|&i| !points[i].is_identity())
                    .collect();
                let ptrs: Vec<*const $raw_proj> =
                    finite.iter().map(|&i| &points[i].0 as *const _).collect();
                let mut converted = vec![$raw_affine::default(); finite.len()];
                if !finite.is_empty() {
                    // SAFETY: `ptrs` holds `finite.len()` valid point pointers and `converted`
                    // has room for as many outputs.
                    unsafe { $batch_to_affine(converted.as_mut_ptr(), ptrs.as_ptr(), ptrs.len()) };
                }
                for (i, p) in finite.into_iter().zip(converted) {
                    out[i] = $affine(p);
                }
                out
            }
        }

        impl PartialEq for $proj {
            fn eq(&self, other: &Self) -> bool {
                // SAFETY: valid pointers.
                unsafe { $is_equal(&self.0, &other.0) }
            }
        }
        impl Eq for $proj {}

        impl fmt::Debug for $proj {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!(stringify!($proj), "({:?})"), self.to_affine())
            }
        }

        impl Add for $proj {
            type Output = Self;
            fn add(self, rhs: Self) -> Self {
                let mut out = $raw_proj::default();
                // SAFETY: valid pointers.
                unsafe { $add(&mut out, &self.0, &rhs.0) };
                Self(out)
            }
        }

        impl Add<$affine> for $proj {
            type Output = Self;
            fn add(self, rhs: $affine) -> Self {
                let mut out = $raw_proj::default();
                // SAFETY: valid pointers.
                unsafe { $add_affine(&mut out, &self.0, &rhs.0) };
                Self(out)
            }
        }

        impl Neg for $proj {
            type Output = Self;
            fn neg(mut self) -> Self {
                // SAFETY: valid pointer.
                unsafe { $cneg(&mut self.0, true) };
                self
            }
        }

        impl Sub for $proj {
            type Output = Self;
            fn sub(self, rhs: Self) -> Self {
                self + (-rhs)
            }
        }

        impl AddAssign for $proj {
            fn add_assign(&mut self, rhs: Self) {
                *self = *self + rhs;
            }
        }

        impl AddAssign<$affine> for $proj {
            fn add_assign(&mut self, rhs: $affine) {
                *self = *self + rhs;
            }
        }

        impl SubAssign for $proj {
            fn sub_assign(&mut self, rhs: Self) {
                *self = *self - rhs;
            }
        }

        impl Mul<Fr> for $proj {
            type Output = Self;
            fn mul(self, rhs: Fr) -> Self {
                let scalar = rhs.to_blst_scalar();
                let mut out = $raw_proj::default();
                // SAFETY: `scalar.b` holds 32 bytes, of which blst reads 255 bits.
                unsafe { $mult(&mut out, &self.0, scalar.b.as_ptr(), 255) };
                Self(out)
            }
        }

        impl Mul<Fr> for $affine {
            type Output = $proj;
            fn mul(self, rhs: Fr) -> $proj {
                self.to_projective() * rhs
            }
        }

        impl Sum for $proj {
            fn sum<I: Iterator<Item = Self>>(iter: I) -> Self {
                iter.fold(Self::identity(), |a, b| a + b)
            }
        }

        impl From<$affine> for $proj {
            fn from(p: $affine) -> Self {
                p.to_projective()
            }
        }

        impl From<$proj> for $affine {
            fn from(p: $proj) -> Self {
                p.to_affine()
            }
        }
    };
}

curve_group! {
    G1Affine(blst_p1_affine), G1Projective(blst_p1), coordinate = Fp,
    compressed = 48, uncompressed = 96,
    add = blst_p1_add_or_double, add_affine = blst_p1_add_or_double_affine, double = blst_p1_double,
    mult = blst_p1_mult, cneg = blst_p1_cneg, to_affine = blst_p1_to_affine,
    from_affine = blst_p1_from_affine, is_equal = blst_p1_is_equal, is_inf = blst_p1_is_inf,
    generator = blst_p1_generator, affine_on_curve = blst_p1_affine_on_curve,
    affine_in_group = blst_p1_affine_in_g1, batch_to_affine = blst_p1s_to_affine,
    compress = blst_p1_affine_compress, serialize = blst_p1_affine_serialize,
    pippenger = blst_p1s_mult_pippenger, pippenger_scratch = blst_p1s_mult_pippenger_scratch_sizeof,
    uncompress = blst_p1_uncompress,
}

curve_group! {
    G2Affine(blst_p2_affine), G2Projective(blst_p2), coordinate = Fp2,
    compressed = 96, uncompressed = 192,
    add = blst_p2_add_or_double, add_affine = blst_p2_add_or_double_affine, double = blst_p2_double,
    mult = blst_p2_mult, cneg = blst_p2_cneg, to_affine = blst_p2_to_affine,
    from_affine = blst_p2_from_affine, is_equal = blst_p2_is_equal, is_inf = blst_p2_is_inf,
    generator = blst_p2_generator, affine_on_curve = blst_p2_affine_on_curve,
    affine_in_group = blst_p2_affine_in_g2, batch_to_affine = blst_p2s_to_affine,
    compress = blst_p2_affine_compress, serialize = blst_p2_affine_serialize,
    pippenger = blst_p2s_mult_pippenger, pippenger_scratch = blst_p2s_mult_pippenger_scratch_sizeof,
    uncompress = blst_p2_uncompress,
}

impl G2Affine {
    pub(crate) fn as_raw(&self) -> &blst_p2_affine {
        &self.0
    }
}

impl G1Affine {
    pub(crate) fn as_raw(&self) -> &blst_p1_affine {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    /// Double-and-add from the top bit: the oracle for blst's scalar multiplication.
    fn naive_mul(p: G1Projective, s: Fr) -> G1Projective {
        let mut acc = G1Projective::identity();
        for limb in s.to_canonical().iter().rev() {
            for bit in (0..64).rev() {
                acc = acc.double();
                if (limb >> bit) & 1 == 1 {
                    acc += p;
                }
            }
        }
        acc
    }

    #[test]
    fn identity_laws() {
        let g = G1Projective::generator();
        assert_eq!(g + G1Projective::identity(), g);
        assert_eq!(g - g, G1Projective::identity());
        assert!(G1Affine::identity().is_identity());
        assert!((G2Projective::generator() * Fr::ZERO).is_identity());
        assert_eq!(
            G2Projective::generator() * (-Fr::ONE),
            -G2Projective::generator()
        );
        assert_eq!(-G1Affine::identity(), G1Affine::identity());
        assert_eq!(
            G1Projective::generator() + G1Affine::generator(),
            G1Projective::generator().double()
        );
    }

    #[test]
    fn batch_to_affine_handles_identity() {
        let mut rng = ChaCha20Rng::seed_from_u64(3);
        let points = [
            G1Projective::random(&mut rng),
            G1Projective::identity(),
            G1Projective::random(&mut rng),
        ];
        let affine = G1Projective::batch_to_affine(&points);
        for (p, a) in points.iter().zip(&affine) {
            assert_eq!(p.to_affine(), *a);
        }
        assert!(affine[1].is_identity());
    }

    #[test]
    fn encodings_round_trip_and_reject_bad_points() {
        let mut rng = ChaCha20Rng::seed_from_u64(5);
        let p = G1Projective::random(&mut rng).to_affine();
        assert_eq!(G1Affine::from_compressed(&p.to_compressed()), Ok(p));
        assert_eq!(G1Affine::from_uncompressed(&p.to_uncompressed()), Ok(p));
        let id = G1Affine::identity();
        assert_eq!(G1Affine::from_compressed(&id.to_compressed()), Ok(id));
        let q = G2Projective::random(&mut rng).to_affine();
        assert_eq!(G2Affine::from_compressed(&q.to_compressed()), Ok(q));
        assert_eq!(G2Affine::from_uncompressed(&q.to_uncompressed()), Ok(q));

        // Off the curve: perturb y.
        let off = G1Affine::from_xy_unchecked(p.x(), p.y() + Fp::ONE);
        assert_eq!(
            G1Affine::from_uncompressed(&off.to_uncompressed()),
            Err(DecodeError::NotOnCurve)
        );
        assert_eq!(
            G1Affine::from_xy(p.x(), p.y() + Fp::ONE),
            Err(DecodeError::NotOnCurve)
        );

        // On the curve but outside the subgroup: x = 0 gives y^2 = 4 (a point of order 3 times
        // cofactor stuff, certainly not in G1 since G1 has no point with x = 0).
        let two = Fp::from_u64(2);
        let low = G1Affine::from_xy_unchecked(Fp::ZERO, two);
        assert!(low.is_on_curve());
        assert_eq!(
            G1Affine::from_uncompressed(&low.to_uncompressed()),
            Err(DecodeError::NotInSubgroup)
        );
        assert_eq!(
            G1Affine::from_compressed(&low.to_compressed()),
            Err(DecodeError::NotInSubgroup)
        );
        assert!(G1Affine::from_uncompressed_unchecked(&low.to_uncompressed()).is_ok());

        // A coordinate equal to the modulus is not canonical.
        let mut bytes = p.to_uncompressed();
        let mut modulus = [0u8; 48];
        for (chunk, limb) in modulus.chunks_mut(8).zip(Fp::MODULUS.iter().rev()) {
            chunk.copy_from_slice(&limb.to_be_bytes());
        }
        bytes[..48].copy_from_slice(&modulus);
        assert!(G1Affine::from_uncompressed(&bytes).is_err());

        // The compression flag on an uncompressed encoding is malformed.
        let mut flagged = p.to_uncompressed();
        flagged[0] |= 0x80;
        assert_eq!(
            G1Affine::from_uncompressed(&flagged),
            Err(DecodeError::BadEncoding)
        );
    }

    #[test]
    fn pippenger_matches_sum_of_products() {
        let mut rng = ChaCha20Rng::seed_from_u64(9);
        for n in [0usize, 1, 2, 3, 17, 64] {
            let mut points: Vec<G1Affine> = (0..n)
                .map(|_| G1Projective::random(&mut rng).to_affine())
                .collect();
            let scalars: Vec<Fr> = (0..n).map(|_| Fr::random(&mut rng)).collect();
            if n > 2 {
                points[1] = G1Affine::identity();
                points[2] = -points[0];
            }
            let expected: G1Projective = points.iter().zip(&scalars).map(|(p, s)| *p * *s).sum();
            assert_eq!(
                G1Projective::pippenger(&points, &scalars),
                Some(expected),
                "n = {n}"
            );
            let g2: Vec<G2Affine> = (0..n)
                .map(|_| G2Projective::random(&mut rng).to_affine())
                .collect();
            let expected: G2Projective = g2.iter().zip(&scalars).map(|(p, s)| *p * *s).sum();
            assert_eq!(
                G2Projective::pippenger(&g2, &scalars),
                Some(expected),
                "n = {n}"
            );
        }
        assert_eq!(G1Projective::pippenger(&[G1Affine::generator()], &[]), None);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]
        #[test]
        fn scalar_mul_matches_double_and_add(seed in any::<u64>()) {
            let mut rng = ChaCha20Rng::seed_from_u64(seed);
            let p = G1Projective::random(&mut rng);
            let s = Fr::random(&mut rng);
            prop_assert_eq!(p * s, naive_mul(p, s));
        }

        #[test]
        fn group_laws(seed in any::<u64>()) {
            let mut rng = ChaCha20Rng::seed_from_u64(seed);
            let (a, b) = (Fr::random(&mut rng), Fr::random(&mut rng));
            let g = G2Projective::generator();
            prop_assert_eq!(g * a + g * b, g * (a + b));
            prop_assert_eq!((g * a) * b, g * (a * b));
            let h = G1Projective::generator();
            prop_assert_eq!(h * a - h * b, h * (a - b));
            prop_assert_eq!((h * a).double(), h * a.double());
        }
    }
}
