//! Inlined Montgomery arithmetic on the raw limbs of [`Fr`] for the butterfly loops: the same
//! representation as blst's (R = 2^256, fully reduced), so results are bit-identical, but
//! without an FFI call per operation (blst's `blst_fr_mul` costs ~3× more through the call).

use std::hint::select_unpredictable;

use cuzk_field::Fr;

/// Montgomery-form limbs, little-endian, always < r.
pub(crate) type L = [u64; 4];

const P: L = Fr::MODULUS;

/// −r^-1 mod 2^64.
const INV: u64 = {
    let mut inv = 1u64;
    let mut i = 0;
    while i < 63 {
        inv = inv.wrapping_mul(inv);
        inv = inv.wrapping_mul(P[0]);
        i += 1;
    }
    inv.wrapping_neg()
};

// The carry-free CIOS variant below needs the top limb of r below 2^63 − 1.
const _: () = assert!(P[3] < (u64::MAX >> 1) - 1);

#[inline(always)]
fn mac(acc: u64, a: u64, b: u64, carry: u64) -> (u64, u64) {
    let t = acc as u128 + (a as u128) * (b as u128) + carry as u128;
    (t as u64, (t >> 64) as u64)
}

#[inline(always)]
fn sub_borrow(a: u64, b: u64, borrow: bool) -> (u64, bool) {
    let (d, b1) = a.overflowing_sub(b);
    let (d, b2) = d.overflowing_sub(borrow as u64);
    (d, b1 | b2)
}

/// t − r if t ≥ r, for t < 2r.
#[inline(always)]
fn reduce_once(t: L) -> L {
    let mut d = [0u64; 4];
    let mut borrow = false;
    for i in 0..4 {
        (d[i], borrow) = sub_borrow(t[i], P[i], borrow);
    }
    // On random field elements the borrow is a coin flip: selects, not a mispredicted branch.
    select_unpredictable(borrow, t, d)
}

#[inline(always)]
pub(crate) fn mul(a: &L, b: &L) -> L {
    let mut t = [0u64; 4];
    for &bi in b {
        let (t0, mut hi_a) = mac(t[0], a[0], bi, 0);
        let m = t0.wrapping_mul(INV);
        let (_, mut hi_c) = mac(t0, m, P[0], 0);
        for j in 1..4 {
            let (tj, ca) = mac(t[j], a[j], bi, hi_a);
            hi_a = ca;
            let (tj1, cc) = mac(tj, m, P[j], hi_c);
            hi_c = cc;
            t[j - 1] = tj1;
        }
        t[3] = hi_c + hi_a;
    }
    reduce_once(t)
}

#[inline(always)]
pub(crate) fn add(a: &L, b: &L) -> L {
    // a + b < 2r < 2^256: no carry out of the top limb.
    let mut s = [0u64; 4];
    let mut carry = false;
    for i in 0..4 {
        let (x, c1) = a[i].overflowing_add(b[i]);
        let (x, c2) = x.overflowing_add(carry as u64);
        s[i] = x;
        carry = c1 | c2;
    }
    reduce_once(s)
}

#[inline(always)]
pub(crate) fn sub(a: &L, b: &L) -> L {
    let mut d = [0u64; 4];
    let mut borrow = false;
    for i in 0..4 {
        (d[i], borrow) = sub_borrow(a[i], b[i], borrow);
    }
    // Add r & mask rather than branch on the borrow (a coin flip on random elements).
    let mask = (borrow as u64).wrapping_neg();
    let mut carry = false;
    for i in 0..4 {
        let (x, c1) = d[i].overflowing_add(P[i] & mask);
        let (x, c2) = x.overflowing_add(carry as u64);
        d[i] = x;
        carry = c1 | c2;
    }
    d
}

#[inline(always)]
pub(crate) fn limbs(x: Fr) -> L {
    x.to_montgomery()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::SeedableRng;

    fn fr(seed: u64) -> Fr {
        Fr::random(&mut rand_chacha::ChaCha20Rng::seed_from_u64(seed))
    }

    fn back(x: L) -> Fr {
        Fr::from_montgomery(x).expect("reduced")
    }

    proptest! {
        #[test]
        fn matches_blst(s1: u64, s2: u64) {
            let (a, b) = (fr(s1), fr(s2));
            prop_assert_eq!(back(mul(&limbs(a), &limbs(b))), a * b);
            prop_assert_eq!(back(add(&limbs(a), &limbs(b))), a + b);
            prop_assert_eq!(back(sub(&limbs(a), &limbs(b))), a - b);
            prop_assert_eq!(back(sub(&limbs(b), &limbs(a))), b - a);
        }
    }

    #[test]
    fn edge_values() {
        let minus_one = -Fr::ONE;
        for a in [Fr::ZERO, Fr::ONE, minus_one, -Fr::from_u64(2), fr(1)] {
            for b in [Fr::ZERO, Fr::ONE, minus_one, Fr::from_u64(2), fr(2)] {
                assert_eq!(back(mul(&limbs(a), &limbs(b))), a * b);
                assert_eq!(back(add(&limbs(a), &limbs(b))), a + b);
                assert_eq!(back(sub(&limbs(a), &limbs(b))), a - b);
            }
        }
    }
}
