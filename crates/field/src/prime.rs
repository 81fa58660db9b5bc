//! The two prime fields: Fr (scalars, 255 bits) and Fp (coordinates, 381 bits).

use core::fmt;
use core::iter::{Product, Sum};
use core::ops::{Add, AddAssign, Mul, MulAssign, Neg, Sub, SubAssign};
use std::sync::LazyLock;

use blst::*;
use rand_core::RngCore;

use crate::DecodeError;

/// Operations both prime fields share; `$limbs` is the number of u64 limbs.
macro_rules! prime_field {
    (
        $(#[$doc:meta])*
        $name:ident($raw:ident, $limbs:literal, bytes = $bytes:literal),
        modulus = $modulus:expr,
        one = $one:expr,
        add = $add:ident, sub = $sub:ident, mul = $mul:ident, sqr = $sqr:ident,
        cneg = $cneg:ident, inverse = $inverse:ident,
        from_u64s = $from_u64s:ident, to_u64s = $to_u64s:ident,
    ) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, Default)]
        #[repr(transparent)]
        pub struct $name(pub(crate) $raw);

        // SAFETY: a `#[repr(C)]` array of u64 limbs: no padding, and every bit pattern is a
        // value (the arithmetic assumes reduced limbs, which constructors guarantee).
        unsafe impl bytemuck::Zeroable for $name {}
        unsafe impl bytemuck::Pod for $name {}

        impl $name {
            /// The modulus as little-endian u64 limbs.
            pub const MODULUS: [u64; $limbs] = $modulus;
            /// Size of the canonical byte encoding.
            pub const BYTES: usize = $bytes;
            pub const ZERO: Self = Self($raw { l: [0; $limbs] });
            /// One, in Montgomery form (R mod modulus).
            pub const ONE: Self = Self($raw { l: $one });

            pub fn from_u64(v: u64) -> Self {
                let mut limbs = [0u64; $limbs];
                limbs[0] = v;
                Self::from_canonical(limbs).expect("a u64 is below the modulus")
            }

            /// From the canonical value as little-endian u64 limbs; `None` unless below the modulus.
            pub fn from_canonical(limbs: [u64; $limbs]) -> Option<Self> {
                if !is_below(&limbs, &Self::MODULUS) {
                    return None;
                }
                let mut out = $raw::default();
                // SAFETY: both pointers are valid for the sizes blst expects.
                unsafe { $from_u64s(&mut out, limbs.as_ptr()) };
                Some(Self(out))
            }

            /// The canonical value as little-endian u64 limbs (out of Montgomery form).
            pub fn to_canonical(&self) -> [u64; $limbs] {
                let mut limbs = [0u64; $limbs];
                // SAFETY: both pointers are valid for the sizes blst expects.
                unsafe { $to_u64s(limbs.as_mut_ptr(), &self.0) };
                limbs
            }

            /// The raw Montgomery-form limbs, as stored in memory and on the GPU.
            pub fn to_montgomery(&self) -> [u64; $limbs] {
                self.0.l
            }

            /// From raw Montgomery-form limbs; `None` unless below the modulus.
            pub fn from_montgomery(limbs: [u64; $limbs]) -> Option<Self> {
                is_below(&limbs, &Self::MODULUS).then_some(Self($raw { l: limbs }))
            }

            pub fn to_bytes_le(&self) -> [u8; $bytes] {
                let mut out = [0u8; $bytes];
                for (chunk, limb) in out.chunks_mut(8).zip(self.to_canonical()) {
                    chunk.copy_from_slice(&limb.to_le_bytes()[..chunk.len()]);
                }
                out
            }

            pub fn from_bytes_le(bytes: &[u8; $bytes]) -> Result<Self, DecodeError> {
                let mut limbs = [0u64; $limbs];
                for (limb, chunk) in limbs.iter_mut().zip(bytes.chunks(8)) {
                    let mut word = [0u8; 8];
                    word[..chunk.len()].copy_from_slice(chunk);
                    *limb = u64::from_le_bytes(word);
                }
                Self::from_canonical(limbs).ok_or(DecodeError::NonCanonical)
            }

            pub fn to_bytes_be(&self) -> [u8; $bytes] {
                let mut out = self.to_bytes_le();
                out.reverse();
                out
            }

            pub fn from_bytes_be(bytes: &[u8; $bytes]) -> Result<Self, DecodeError> {
                let mut le = *bytes;
                le.reverse();
                Self::from_bytes_le(&le)
            }

            pub fn is_zero(&self) -> bool {
                *self == Self::ZERO
            }

            pub fn square(&self) -> Self {
                let mut out = $raw::default();
                // SAFETY: valid pointers to initialized field elements.
                unsafe { $sqr(&mut out, &self.0) };
                Self(out)
            }

            pub fn double(&self) -> Self {
                *self + *self
            }

            /// The multiplicative inverse; `None` for zero.
            pub fn inverse(&self) -> Option<Self> {
                if self.is_zero() {
                    return None;
                }
                let mut out = $raw::default();
                // SAFETY: valid pointers to initialized field elements.
                unsafe { $inverse(&mut out, &self.0) };
                Some(Self(out))
            }

            /// `self^exp` for an exponent given as little-endian u64 limbs.
            pub fn pow(&self, exp: &[u64]) -> Self {
                let mut acc = Self::ONE;
                for limb in exp.iter().rev() {
                    for bit in (0..64).rev() {
                        acc = acc.square();
                        if (limb >> bit) & 1 == 1 {
                            acc *= *self;
                        }
                    }
                }
                acc
            }

            /// Inverts every non-zero element in place with one field inversion (Montgomery's
            /// trick); zeros stay zero.
            pub fn batch_inverse(values: &mut [Self]) {
                let mut prefix = Vec::with_capacity(values.len());
                let mut acc = Self::ONE;
                for v in values.iter() {
                    prefix.push(acc);
                    if !v.is_zero() {
                        acc *= *v;
                    }
                }
                let mut inv = acc.inverse().expect("product of non-zero elements is non-zero");
                for (v, before) in values.iter_mut().zip(prefix).rev() {
                    if v.is_zero() {
                        continue;
                    }
                    let next_inv = inv * *v;
                    *v = inv * before;
                    inv = next_inv;
                }
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!(stringify!($name), "(0x"))?;
                for byte in self.to_bytes_be() {
                    write!(f, "{byte:02x}")?;
                }
                write!(f, ")")
            }
        }

        impl Add for $name {
            type Output = Self;
            fn add(self, rhs: Self) -> Self {
                let mut out = $raw::default();
                // SAFETY: valid pointers to initialized field elements.
                unsafe { $add(&mut out, &self.0, &rhs.0) };
                Self(out)
            }
        }

        impl Sub for $name {
            type Output = Self;
            fn sub(self, rhs: Self) -> Self {
                let mut out = $raw::default();
                // SAFETY: valid pointers to initialized field elements.
                unsafe { $sub(&mut out, &self.0, &rhs.0) };
                Self(out)
            }
        }

        impl Mul for $name {
            type Output = Self;
            fn mul(self, rhs: Self) -> Self {
                let mut out = $raw::default();
                // SAFETY: valid pointers to initialized field elements.
                unsafe { $mul(&mut out, &self.0, &rhs.0) };
                Self(out)
            }
        }

        impl Neg for $name {
            type Output = Self;
            fn neg(self) -> Self {
                let mut out = $raw::default();
                // SAFETY: valid pointers to initialized field elements.
                unsafe { $cneg(&mut out, &self.0, true) };
                Self(out)
            }
        }

        crate::prime::assign_ops!($name);
    };
}

/// `+=`, `-=`, `*=`, references, `Sum` and `Product`, from the by-value operators.
macro_rules! assign_ops {
    ($name:ident) => {
        impl AddAssign for $name {
            fn add_assign(&mut self, rhs: Self) {
                *self = *self + rhs;
            }
        }
        impl SubAssign for $name {
            fn sub_assign(&mut self, rhs: Self) {
                *self = *self - rhs;
            }
        }
        impl MulAssign for $name {
            fn mul_assign(&mut self, rhs: Self) {
                *self = *self * rhs;
            }
        }
        impl<'a> Add<&'a $name> for $name {
            type Output = Self;
            fn add(self, rhs: &'a Self) -> Self {
                self + *rhs
            }
        }
        impl<'a> Sub<&'a $name> for $name {
            type Output = Self;
            fn sub(self, rhs: &'a Self) -> Self {
                self - *rhs
            }
        }
        impl<'a> Mul<&'a $name> for $name {
            type Output = Self;
            fn mul(self, rhs: &'a Self) -> Self {
                self * *rhs
            }
        }
        impl Sum for $name {
            fn sum<I: Iterator<Item = Self>>(iter: I) -> Self {
                iter.fold(Self::ZERO, |a, b| a + b)
            }
        }
        impl<'a> Sum<&'a $name> for $name {
            fn sum<I: Iterator<Item = &'a Self>>(iter: I) -> Self {
                iter.fold(Self::ZERO, |a, b| a + *b)
            }
        }
        impl Product for $name {
            fn product<I: Iterator<Item = Self>>(iter: I) -> Self {
                iter.fold(Self::ONE, |a, b| a * b)
            }
        }
    };
}
pub(crate) use assign_ops;

/// `a < b` for little-endian limbs of equal length.
#[inline]
fn is_below(a: &[u64], b: &[u64]) -> bool {
    for (x, y) in a.iter().rev().zip(b.iter().rev()) {
        if x != y {
            return x < y;
        }
    }
    false
}

prime_field! {
    /// An element of the BLS12-381 scalar field, r = 0x73ed…0001 (255 bits).
    Fr(blst_fr, 4, bytes = 32),
    modulus = [0xffff_ffff_0000_0001, 0x53bd_a402_fffe_5bfe, 0x3339_d808_09a1_d805, 0x73ed_a753_299d_7d48],
    one = [0x0000_0001_ffff_fffe, 0x5884_b7fa_0003_4802, 0x998c_4fef_ecbc_4ff5, 0x1824_b159_acc5_056f],
    add = blst_fr_add, sub = blst_fr_sub, mul = blst_fr_mul, sqr = blst_fr_sqr,
    cneg = blst_fr_cneg, inverse = blst_fr_inverse,
    from_u64s = blst_fr_from_uint64, to_u64s = blst_uint64_from_fr,
}

prime_field! {
    /// An element of the BLS12-381 base field, p = 0x1a01…aaab (381 bits).
    Fp(blst_fp, 6, bytes = 48),
    modulus = [
        0xb9fe_ffff_ffff_aaab, 0x1eab_fffe_b153_ffff, 0x6730_d2a0_f6b0_f624,
        0x6477_4b84_f385_12bf, 0x4b1b_a7b6_434b_acd7, 0x1a01_11ea_397f_e69a,
    ],
    one = [
        0x7609_0000_0002_fffd, 0xebf4_000b_c40c_0002, 0x5f48_9857_53c7_58ba,
        0x77ce_5853_7052_5745, 0x5c07_1a97_a256_ec6d, 0x15f6_5ec3_fa80_e493,
    ],
    add = blst_fp_add, sub = blst_fp_sub, mul = blst_fp_mul, sqr = blst_fp_sqr,
    cneg = blst_fp_cneg, inverse = blst_fp_inverse,
    from_u64s = blst_fp_from_uint64, to_u64s = blst_uint64_from_fp,
}

impl Fr {
    /// 2^TWO_ADICITY divides r − 1: the largest power-of-two NTT domain.
    pub const TWO_ADICITY: u32 = 32;

    /// 7, the generator of the multiplicative group that bellperson and arkworks use (and so
    /// the coset shift of the Groth16 quotient).
    pub fn multiplicative_generator() -> Self {
        Self::from_u64(7)
    }

    /// A primitive 2^32-th root of unity: 7^((r − 1) / 2^32).
    pub fn root_of_unity() -> Self {
        static ROOT: LazyLock<Fr> = LazyLock::new(|| {
            let mut exp = Fr::MODULUS;
            exp[0] -= 1;
            // (r − 1) >> 32: r − 1 has 32 trailing zero bits.
            let shifted = [
                (exp[0] >> 32) | (exp[1] << 32),
                (exp[1] >> 32) | (exp[2] << 32),
                (exp[2] >> 32) | (exp[3] << 32),
                exp[3] >> 32,
            ];
            Fr::multiplicative_generator().pow(&shifted)
        });
        *ROOT
    }

    /// A primitive 2^log_n-th root of unity; `None` above 2^32.
    pub fn root_of_unity_of_order(log_n: u32) -> Option<Self> {
        if log_n > Self::TWO_ADICITY {
            return None;
        }
        let mut root = Self::root_of_unity();
        for _ in log_n..Self::TWO_ADICITY {
            root = root.square();
        }
        Some(root)
    }

    /// A uniformly random element (512 random bits reduced mod r: bias below 2^-250).
    pub fn random(rng: &mut (impl RngCore + ?Sized)) -> Self {
        let mut wide = [0u8; 64];
        rng.fill_bytes(&mut wide);
        let mut scalar = blst_scalar::default();
        let mut out = blst_fr::default();
        // SAFETY: `wide` is 64 readable bytes; the outputs are valid.
        unsafe {
            blst_scalar_from_le_bytes(&mut scalar, wide.as_ptr(), wide.len());
            blst_fr_from_scalar(&mut out, &scalar);
        }
        Self(out)
    }

    /// Σ aᵢ·bᵢ, with one Montgomery reduction per [`LAZY_PRODUCTS`] products instead of one
    /// per product: the products are summed as integers (a Poseidon matrix row of 9-12
    /// products: 1.2-1.3x faster than by `*` and `+`).
    pub fn sum_of_products<'a>(pairs: impl IntoIterator<Item = (&'a Fr, &'a Fr)>) -> Fr {
        let mut acc = [0u64; 9];
        let mut n = 0;
        for (a, b) in pairs {
            if n == LAZY_PRODUCTS {
                // Carry the partial sum on as partial·R, which the next reduction maps back.
                let p = montgomery_reduce(acc);
                acc = [0, 0, 0, 0, p[0], p[1], p[2], p[3], 0];
                n = 0;
            }
            mul_add_wide(&mut acc, &a.0.l, &b.0.l);
            n += 1;
        }
        Fr(blst_fr {
            l: montgomery_reduce(acc),
        })
    }

    /// The canonical little-endian bytes blst's scalar multiplication takes.
    pub(crate) fn to_blst_scalar(self) -> blst_scalar {
        let mut out = blst_scalar::default();
        // SAFETY: valid pointers.
        unsafe { blst_scalar_from_fr(&mut out, &self.0) };
        out
    }
}

/// Products [`Fr::sum_of_products`] sums before it reduces: the sum stays below
/// R·r + 16·r² < 2^515, and its reduction below 2r + 16·r·(r/R) < 9.25·r.
const LAZY_PRODUCTS: usize = 16;

/// acc += a·b over 4-limb integers (the product is below r² < 2^510).
#[inline(always)]
fn mul_add_wide(acc: &mut [u64; 9], a: &[u64; 4], b: &[u64; 4]) {
    for (i, &ai) in a.iter().enumerate() {
        mul_limb_add(acc, i, ai, b);
    }
}

/// acc += x·b·2^(64·at), for one limb x.
#[inline(always)]
fn mul_limb_add(acc: &mut [u64; 9], at: usize, x: u64, b: &[u64; 4]) {
    let mut carry = 0u128;
    for (j, &bj) in b.iter().enumerate() {
        let t = acc[at + j] as u128 + x as u128 * bj as u128 + carry;
        acc[at + j] = t as u64;
        carry = t >> 64;
    }
    carry_into(acc, at + 4, carry);
}

#[inline(always)]
fn carry_into(acc: &mut [u64; 9], mut k: usize, mut carry: u128) {
    while carry != 0 && k < acc.len() {
        let t = acc[k] as u128 + carry;
        acc[k] = t as u64;
        carry = t >> 64;
        k += 1;
    }
}

/// acc·R⁻¹ mod r for acc < 2^515 (Montgomery's reduction, then the multiple of r it leaves,
/// below 9.25·r, taken off by 8r, 4r, 2r and r in turn).
#[inline(always)]
fn montgomery_reduce(mut acc: [u64; 9]) -> [u64; 4] {
    const INV: u64 = 0xffff_fffe_ffff_ffff; // −r⁻¹ mod 2^64
    for i in 0..4 {
        let m = acc[i].wrapping_mul(INV);
        mul_limb_add(&mut acc, i, m, &Fr::MODULUS);
    }
    let mut x = [acc[4], acc[5], acc[6], acc[7], acc[8]];
    for shift in [3, 2, 1, 0] {
        let m = modulus_shifted(shift);
        if !is_below(&x, &m) {
            let mut borrow = false;
            for (xi, mi) in x.iter_mut().zip(m) {
                let (d, b1) = xi.overflowing_sub(mi);
                let (d, b2) = d.overflowing_sub(borrow as u64);
                *xi = d;
                borrow = b1 | b2;
            }
        }
    }
    [x[0], x[1], x[2], x[3]]
}

/// r·2^shift as 5 limbs (shift < 64).
#[inline(always)]
const fn modulus_shifted(shift: u32) -> [u64; 5] {
    let r = Fr::MODULUS;
    if shift == 0 {
        return [r[0], r[1], r[2], r[3], 0];
    }
    [
        r[0] << shift,
        (r[1] << shift) | (r[0] >> (64 - shift)),
        (r[2] << shift) | (r[1] >> (64 - shift)),
        (r[3] << shift) | (r[2] >> (64 - shift)),
        r[3] >> (64 - shift),
    ]
}

impl Fp {
    /// A uniformly random element, by rejection sampling of 381-bit values.
    pub fn random(rng: &mut (impl RngCore + ?Sized)) -> Self {
        loop {
            let mut limbs = [0u64; 6];
            for limb in &mut limbs {
                *limb = rng.next_u64();
            }
            limbs[5] &= (1 << (381 - 320)) - 1;
            if let Some(v) = Self::from_canonical(limbs) {
                return v;
            }
        }
    }

    pub(crate) fn as_raw(&self) -> &blst_fp {
        &self.0
    }

    pub(crate) fn from_raw(raw: blst_fp) -> Self {
        Self(raw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    fn fr(seed: u64) -> Fr {
        Fr::random(&mut ChaCha20Rng::seed_from_u64(seed))
    }

    /// r − 1 as raw Montgomery limbs: the largest an element's limbs can be.
    fn max_limbs() -> [u64; 4] {
        let mut l = Fr::MODULUS;
        l[0] -= 1;
        l
    }

    #[test]
    fn sum_of_products_at_its_bounds() {
        // Every product as large as it can be, at and around each reduction of the partial sum.
        let max = Fr::from_montgomery(max_limbs()).unwrap();
        for n in [0, 1, 15, 16, 17, 32, 33, 100] {
            let a = vec![max; n];
            let expected = (0..n).fold(Fr::ZERO, |acc, _| acc + max * max);
            assert_eq!(
                Fr::sum_of_products(a.iter().zip(&a)),
                expected,
                "{n} products"
            );
        }
    }

    #[test]
    fn montgomery_one_constants_match_blst() {
        assert_eq!(Fr::ONE, Fr::from_u64(1));
        assert_eq!(Fp::ONE, Fp::from_u64(1));
        assert_eq!(Fr::ONE.to_canonical(), [1, 0, 0, 0]);
    }

    #[test]
    fn root_of_unity_has_order_two_to_the_32() {
        let root = Fr::root_of_unity();
        let mut x = root;
        for _ in 0..31 {
            x = x.square();
        }
        assert_eq!(x, -Fr::ONE, "root^(2^31) must be -1");
        assert_eq!(x.square(), Fr::ONE);
        assert_eq!(Fr::root_of_unity_of_order(1), Some(-Fr::ONE));
        assert_eq!(Fr::root_of_unity_of_order(0), Some(Fr::ONE));
        assert_eq!(Fr::root_of_unity_of_order(33), None);
    }

    #[test]
    fn generator_is_a_non_residue() {
        // 7^((r-1)/2) = -1, so 7 generates the 2-Sylow part.
        let mut exp = Fr::MODULUS;
        exp[0] -= 1;
        let half = [
            (exp[0] >> 1) | (exp[1] << 63),
            (exp[1] >> 1) | (exp[2] << 63),
            (exp[2] >> 1) | (exp[3] << 63),
            exp[3] >> 1,
        ];
        assert_eq!(Fr::multiplicative_generator().pow(&half), -Fr::ONE);
    }

    #[test]
    fn non_canonical_bytes_are_rejected() {
        let mut bytes = [0u8; 32];
        for (chunk, limb) in bytes.chunks_mut(8).zip(Fr::MODULUS) {
            chunk.copy_from_slice(&limb.to_le_bytes());
        }
        assert_eq!(Fr::from_bytes_le(&bytes), Err(DecodeError::NonCanonical));
        let mut below = Fr::MODULUS;
        below[0] -= 1;
        assert_eq!(Fr::from_canonical(below), Some(-Fr::ONE));
        assert_eq!(Fp::from_canonical(Fp::MODULUS), None);
        assert_eq!(Fp::from_montgomery(Fp::MODULUS), None);
        assert_eq!(
            Fp::from_bytes_be(&[0xff; 48]),
            Err(DecodeError::NonCanonical)
        );
    }

    #[test]
    fn batch_inverse_skips_zeros() {
        let mut v = vec![fr(1), Fr::ZERO, fr(2), fr(3)];
        let expected: Vec<Fr> = v.iter().map(|x| x.inverse().unwrap_or(Fr::ZERO)).collect();
        Fr::batch_inverse(&mut v);
        assert_eq!(v, expected);
        assert_eq!(Fr::ZERO.inverse(), None);
    }

    #[test]
    fn debug_prints_canonical_hex() {
        assert_eq!(
            format!("{:?}", Fr::from_u64(255)),
            format!("Fr(0x{}ff)", "0".repeat(62))
        );
    }

    proptest! {
        #[test]
        fn fr_ring_laws(a in any::<u64>(), b in any::<u64>(), c in any::<u64>()) {
            let (a, b, c) = (fr(a), fr(b), fr(c));
            prop_assert_eq!((a + b) * c, a * c + b * c);
            prop_assert_eq!(a - b, a + (-b));
            prop_assert_eq!(a.square(), a * a);
            prop_assert_eq!(a.double(), a + a);
            if !a.is_zero() {
                prop_assert_eq!(a * a.inverse().unwrap(), Fr::ONE);
            }
        }

        #[test]
        fn sum_of_products_matches_products_and_sums(
            seeds in proptest::collection::vec((any::<u64>(), 0u8..4, 0u8..4), 0..50),
        ) {
            // Random elements, and the largest raw limbs (r − 1), one and zero among them.
            let pick = |seed, kind| match kind {
                0 => Fr::from_montgomery(max_limbs()).unwrap(),
                1 => Fr::ONE,
                2 => Fr::ZERO,
                _ => fr(seed),
            };
            let (a, b): (Vec<Fr>, Vec<Fr>) = seeds
                .iter()
                .map(|&(s, ka, kb)| (pick(s, ka), pick(s ^ 0x5555, kb)))
                .unzip();
            let expected = a.iter().zip(&b).fold(Fr::ZERO, |acc, (x, y)| acc + *x * *y);
            prop_assert_eq!(Fr::sum_of_products(a.iter().zip(&b)), expected);
        }

        #[test]
        fn fr_matches_u128_arithmetic(a in any::<u64>(), b in any::<u64>()) {
            let prod = u128::from(a) * u128::from(b);
            let expected = Fr::from_canonical([prod as u64, (prod >> 64) as u64, 0, 0]).unwrap();
            prop_assert_eq!(Fr::from_u64(a) * Fr::from_u64(b), expected);
            let sum = u128::from(a) + u128::from(b);
            let expected = Fr::from_canonical([sum as u64, (sum >> 64) as u64, 0, 0]).unwrap();
            prop_assert_eq!(Fr::from_u64(a) + Fr::from_u64(b), expected);
        }

        #[test]
        fn bytes_round_trip(seed in any::<u64>()) {
            let mut rng = ChaCha20Rng::seed_from_u64(seed);
            let a = Fr::random(&mut rng);
            prop_assert_eq!(Fr::from_bytes_le(&a.to_bytes_le()), Ok(a));
            prop_assert_eq!(Fr::from_bytes_be(&a.to_bytes_be()), Ok(a));
            prop_assert_eq!(Fr::from_montgomery(a.to_montgomery()), Some(a));
            let p = Fp::random(&mut rng);
            prop_assert_eq!(Fp::from_bytes_be(&p.to_bytes_be()), Ok(p));
            prop_assert_eq!(Fp::from_canonical(p.to_canonical()), Some(p));
        }

        #[test]
        fn fp_field_laws(seed in any::<u64>()) {
            let mut rng = ChaCha20Rng::seed_from_u64(seed);
            let (a, b) = (Fp::random(&mut rng), Fp::random(&mut rng));
            prop_assert_eq!(a * b, b * a);
            prop_assert_eq!((a + b).square(), a.square() + (a * b).double() + b.square());
            if !a.is_zero() {
                prop_assert_eq!(a * a.inverse().unwrap(), Fp::ONE);
            }
        }
    }
}
