//! SHA-256's witness without the gadget: the values bellperson's `sha256` gadget allocates,
//! in its order, computed on plain bits.
//!
//! The gadget builds and scales linear combinations for every bit it touches, and a
//! witness-only synthesis pays for all of that, though it keeps none of it: it was 99% of a
//! PoRep partition's synthesis. Here a bit is only its value and its kind (a constant, an
//! allocated variable, or a variable's negation); which operations allocate, and what, follows
//! bellpepper's `Boolean` and bellperson's `UInt32` case by case (constants fold, `Not`s flip),
//! so a [`WitnessCs`] ends with exactly the values the gadget would have left. The tests check
//! that against the gadget on inputs of every kind.

use bellpepper_core::SynthesisError;
use bellpepper_core::boolean::Boolean;
use bellpepper_core::num::AllocatedNum;
use blstrs::Scalar;
use ff::PrimeField;

use crate::WitnessCs;

/// A bit as bellpepper's `Boolean` holds it, with its value known. `Is` and `Not` carry the
/// value of their variable (a `Not`'s own value is the opposite).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bit {
    Constant(bool),
    Is(bool),
    Not(bool),
}

impl Bit {
    /// This bit's value (a `Not` is its variable's opposite).
    pub fn value(self) -> bool {
        match self {
            Bit::Constant(b) | Bit::Is(b) => b,
            Bit::Not(b) => !b,
        }
    }

    /// The gadget's `Boolean` as a bit; a variable without a value has no witness.
    pub fn of(b: &Boolean) -> Result<Self, SynthesisError> {
        Ok(match b {
            Boolean::Constant(c) => Bit::Constant(*c),
            Boolean::Is(v) => Bit::Is(v.get_value().ok_or(SynthesisError::AssignmentMissing)?),
            Boolean::Not(v) => Bit::Not(v.get_value().ok_or(SynthesisError::AssignmentMissing)?),
        })
    }

    fn not(self) -> Self {
        match self {
            Bit::Constant(b) => Bit::Constant(!b),
            Bit::Is(v) => Bit::Not(v),
            Bit::Not(v) => Bit::Is(v),
        }
    }
}

/// A new variable holding `v`, as `AllocatedBit::alloc` (or any one-bit result) allocates it.
#[inline]
fn alloc(cs: &mut WitnessCs<'_>, v: bool) -> Bit {
    cs.push_aux_bits(u64::from(v), 1);
    Bit::Is(v)
}

/// `Boolean::xor`: a constant folds; otherwise one variable, negated when the kinds differ.
fn xor(cs: &mut WitnessCs<'_>, a: Bit, b: Bit) -> Bit {
    match (a, b) {
        (Bit::Constant(false), x) | (x, Bit::Constant(false)) => x,
        (Bit::Constant(true), x) | (x, Bit::Constant(true)) => x.not(),
        (Bit::Is(x), Bit::Not(y)) | (Bit::Not(x), Bit::Is(y)) => alloc(cs, x ^ y).not(),
        (Bit::Is(x), Bit::Is(y)) | (Bit::Not(x), Bit::Not(y)) => alloc(cs, x ^ y),
    }
}

/// `Boolean::and`: a constant folds; otherwise one variable (`and`, `and_not` or `nor`).
fn and(cs: &mut WitnessCs<'_>, a: Bit, b: Bit) -> Bit {
    match (a, b) {
        (Bit::Constant(false), _) | (_, Bit::Constant(false)) => Bit::Constant(false),
        (Bit::Constant(true), x) | (x, Bit::Constant(true)) => x,
        _ => alloc(cs, a.value() & b.value()),
    }
}

/// `Boolean::sha256_ch`, its cases in its order.
fn ch(cs: &mut WitnessCs<'_>, a: Bit, b: Bit, c: Bit) -> Bit {
    let value = (a.value() & b.value()) ^ (!a.value() & c.value());
    match (a, b, c) {
        (Bit::Constant(_), Bit::Constant(_), Bit::Constant(_)) => Bit::Constant(value),
        (Bit::Constant(false), _, c) => c,
        (a, Bit::Constant(false), c) => and(cs, a.not(), c),
        (a, b, Bit::Constant(false)) => and(cs, a, b),
        (a, b, Bit::Constant(true)) => and(cs, a, b.not()).not(),
        (a, Bit::Constant(true), c) => and(cs, a.not(), c.not()).not(),
        // `Constant(true)` with two variables, or three variables.
        _ => alloc(cs, value),
    }
}

/// `Boolean::sha256_maj`, its cases in its order: three variables allocate the result, then
/// `b and c`.
fn maj(cs: &mut WitnessCs<'_>, a: Bit, b: Bit, c: Bit) -> Bit {
    let value = (a.value() & b.value()) ^ (a.value() & c.value()) ^ (b.value() & c.value());
    match (a, b, c) {
        (Bit::Constant(_), Bit::Constant(_), Bit::Constant(_)) => Bit::Constant(value),
        (Bit::Constant(false), b, c) => and(cs, b, c),
        (a, Bit::Constant(false), c) => and(cs, a, c),
        (a, b, Bit::Constant(false)) => and(cs, a, b),
        (a, b, Bit::Constant(true)) => and(cs, a.not(), b.not()).not(),
        (a, Bit::Constant(true), c) => and(cs, a.not(), c.not()).not(),
        (Bit::Constant(true), b, c) => and(cs, b.not(), c.not()).not(),
        _ => {
            let m = alloc(cs, value);
            and(cs, b, c);
            m
        }
    }
}

/// `x`'s bit i at bit 2i.
fn spread(x: u32) -> u64 {
    let mut x = u64::from(x);
    x = (x | (x << 16)) & 0x0000_ffff_0000_ffff;
    x = (x | (x << 8)) & 0x00ff_00ff_00ff_00ff;
    x = (x | (x << 4)) & 0x0f0f_0f0f_0f0f_0f0f;
    x = (x | (x << 2)) & 0x3333_3333_3333_3333;
    (x | (x << 1)) & 0x5555_5555_5555_5555
}

/// bellperson's `UInt32` as three masks, bit `i` being bit `i` of each: its value, whether it
/// is a constant, whether it is a variable's negation (never both). After the first rounds
/// nearly every word is all variables, and those take a word-wide path; a word with a constant
/// bit goes bit by bit, through the cases of the `Boolean` operations above.
#[derive(Clone, Copy, Debug)]
struct Word {
    value: u32,
    constant: u32,
    not: u32,
}

impl Word {
    fn constant(value: u32) -> Self {
        Self {
            value,
            constant: u32::MAX,
            not: 0,
        }
    }

    fn bit(&self, i: usize) -> Bit {
        let value = (self.value >> i) & 1 == 1;
        if (self.constant >> i) & 1 == 1 {
            Bit::Constant(value)
        } else if (self.not >> i) & 1 == 1 {
            Bit::Not(!value)
        } else {
            Bit::Is(value)
        }
    }

    /// A word of 32 bits, least significant first (taken in order: they may allocate).
    fn from_bits(bits: impl Iterator<Item = Bit>) -> Self {
        let mut w = Self {
            value: 0,
            constant: 0,
            not: 0,
        };
        for (i, b) in bits.enumerate() {
            w.value |= u32::from(b.value()) << i;
            match b {
                Bit::Constant(_) => w.constant |= 1 << i,
                Bit::Not(_) => w.not |= 1 << i,
                Bit::Is(_) => {}
            }
        }
        w
    }

    fn from_bits_be(bits: &[Bit]) -> Self {
        debug_assert_eq!(bits.len(), 32);
        Self::from_bits(bits.iter().rev().copied())
    }

    fn into_bits_be(self) -> impl Iterator<Item = Bit> {
        (0..32).rev().map(move |i| self.bit(i))
    }

    /// A word of variables only, the word-wide path's case.
    fn is_variables(&self) -> bool {
        self.constant == 0
    }

    fn rotr(&self, by: u32) -> Self {
        Self {
            value: self.value.rotate_right(by),
            constant: self.constant.rotate_right(by),
            not: self.not.rotate_right(by),
        }
    }

    /// Shifted right by `by` (below 32): constant zeros come in at the top.
    fn shr(&self, by: u32) -> Self {
        Self {
            value: self.value >> by,
            constant: (self.constant >> by) | !(u32::MAX >> by),
            not: self.not >> by,
        }
    }

    /// `xor` bit by bit: on variables, one variable each, negated where the kinds differ.
    fn xor(&self, cs: &mut WitnessCs<'_>, other: &Self) -> Self {
        if self.is_variables() && other.is_variables() {
            let (value, not) = (self.value ^ other.value, self.not ^ other.not);
            // The variable holds the xor of the operands' variables.
            cs.push_aux_bits(u64::from(value ^ not), 32);
            return Self {
                value,
                constant: 0,
                not,
            };
        }
        Self::from_bits((0..32).map(|i| xor(cs, self.bit(i), other.bit(i))))
    }

    /// `ch` bit by bit: on variables, one variable each.
    fn ch(cs: &mut WitnessCs<'_>, a: &Self, b: &Self, c: &Self) -> Self {
        let value = (a.value & b.value) ^ (!a.value & c.value);
        if a.is_variables() && b.is_variables() && c.is_variables() {
            cs.push_aux_bits(u64::from(value), 32);
            return Self {
                value,
                constant: 0,
                not: 0,
            };
        }
        Self::from_bits((0..32).map(|i| ch(cs, a.bit(i), b.bit(i), c.bit(i))))
    }

    /// `maj` bit by bit: on variables, two variables each, the result's and `b and c`.
    fn maj(cs: &mut WitnessCs<'_>, a: &Self, b: &Self, c: &Self) -> Self {
        let value = (a.value & b.value) ^ (a.value & c.value) ^ (b.value & c.value);
        if a.is_variables() && b.is_variables() && c.is_variables() {
            // Interleaved: bit i's result, then bit i's `b and c`.
            let (value_bits, b_and_c) = (spread(value), spread(b.value & c.value));
            cs.push_aux_bits(value_bits | (b_and_c << 1), 64);
            return Self {
                value,
                constant: 0,
                not: 0,
            };
        }
        Self::from_bits((0..32).map(|i| maj(cs, a.bit(i), b.bit(i), c.bit(i))))
    }

    /// `UInt32::addmany`: constants fold; otherwise every bit of the full sum (as many as
    /// `n · (2^32 − 1)` needs) is allocated, and the low 32 are the result.
    fn addmany(cs: &mut WitnessCs<'_>, operands: &[Word]) -> Self {
        debug_assert!((2..=10).contains(&operands.len()));
        let sum: u64 = operands.iter().map(|w| u64::from(w.value)).sum();
        if operands.iter().all(|w| w.constant == u32::MAX) {
            return Self::constant(sum as u32);
        }
        let max = operands.len() as u64 * u64::from(u32::MAX);
        let width = 64 - max.leading_zeros() as usize;
        // The carries above the low 32 are allocated too, and dropped.
        cs.push_aux_bits(sum, width);
        Self {
            value: sum as u32,
            constant: 0,
            not: 0,
        }
    }
}

#[allow(clippy::unreadable_literal)]
const ROUND_CONSTANTS: [u32; 64] = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
];

#[allow(clippy::unreadable_literal)]
const IV: [u32; 8] = [
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
];

/// The gadget's deferred sums: `a` and `e` are added up only when read (at most 7 words, and
/// one more at the end).
#[derive(Clone, Copy)]
enum Maybe {
    Deferred { words: [Word; 8], len: usize },
    Concrete(Word),
}

impl Maybe {
    fn deferred(first: &[Word], then: &[Word]) -> Self {
        let mut words = [Word::constant(0); 8];
        let len = first.len() + then.len();
        words[..first.len()].copy_from_slice(first);
        words[first.len()..len].copy_from_slice(then);
        Maybe::Deferred { words, len }
    }

    fn compute(self, cs: &mut WitnessCs<'_>, others: &[Word]) -> Word {
        match self {
            Maybe::Concrete(v) => v,
            Maybe::Deferred { mut words, len } => {
                words[len..len + others.len()].copy_from_slice(others);
                Word::addmany(cs, &words[..len + others.len()])
            }
        }
    }
}

/// bellperson's `sha256_compression_function`.
fn compression(cs: &mut WitnessCs<'_>, input: &[Bit], current: &[Word; 8]) -> [Word; 8] {
    debug_assert_eq!(input.len(), 512);
    let mut w = [Word::constant(0); 64];
    for (w, bits) in w.iter_mut().zip(input.chunks(32)) {
        *w = Word::from_bits_be(bits);
    }
    for i in 16..64 {
        let s0 = w[i - 15]
            .rotr(7)
            .xor(cs, &w[i - 15].rotr(18))
            .xor(cs, &w[i - 15].shr(3));
        let s1 = w[i - 2]
            .rotr(17)
            .xor(cs, &w[i - 2].rotr(19))
            .xor(cs, &w[i - 2].shr(10));
        w[i] = Word::addmany(cs, &[w[i - 16], s0, w[i - 7], s1]);
    }

    let mut a = Maybe::Concrete(current[0]);
    let [_, mut b, mut c, mut d, _, mut f, mut g, mut h] = *current;
    let mut e = Maybe::Concrete(current[4]);
    for i in 0..64 {
        let new_e = e.compute(cs, &[]);
        let s1 = new_e
            .rotr(6)
            .xor(cs, &new_e.rotr(11))
            .xor(cs, &new_e.rotr(25));
        let ch = Word::ch(cs, &new_e, &f, &g);
        let temp1 = [h, s1, ch, Word::constant(ROUND_CONSTANTS[i]), w[i]];

        let new_a = a.compute(cs, &[]);
        let s0 = new_a
            .rotr(2)
            .xor(cs, &new_a.rotr(13))
            .xor(cs, &new_a.rotr(22));
        let maj = Word::maj(cs, &new_a, &b, &c);

        h = g;
        g = f;
        f = new_e;
        e = Maybe::deferred(&temp1, &[d]);
        d = c;
        c = b;
        b = new_a;
        a = Maybe::deferred(&temp1, &[s0, maj]);
    }

    let h0 = a.compute(cs, &[current[0]]);
    let h1 = Word::addmany(cs, &[current[1], b]);
    let h2 = Word::addmany(cs, &[current[2], c]);
    let h3 = Word::addmany(cs, &[current[3], d]);
    let h4 = e.compute(cs, &[current[4]]);
    let h5 = Word::addmany(cs, &[current[5], f]);
    let h6 = Word::addmany(cs, &[current[6], g]);
    let h7 = Word::addmany(cs, &[current[7], h]);
    [h0, h1, h2, h3, h4, h5, h6, h7]
}

/// bellperson's `sha256` gadget on `input` (a whole number of bytes): the digest's 256 bits,
/// most significant first, each the variable the gadget would return.
pub fn sha256(cs: &mut WitnessCs<'_>, input: &[Bit]) -> Vec<Bit> {
    assert!(input.len().is_multiple_of(8), "SHA-256 of a partial byte");
    let mut padded = input.to_vec();
    let len = padded.len() as u64;
    padded.push(Bit::Constant(true));
    while !(padded.len() + 64).is_multiple_of(512) {
        padded.push(Bit::Constant(false));
    }
    padded.extend((0..64).rev().map(|i| Bit::Constant((len >> i) & 1 == 1)));

    let mut state = IV.map(Word::constant);
    for block in padded.chunks(512) {
        state = compression(cs, block, &state);
    }
    state.into_iter().flat_map(Word::into_bits_be).collect()
}

/// bellperson's `multipack::pack_bits`: the first `CAPACITY` bits, least significant first,
/// as one new variable.
pub fn pack_bits(
    cs: &mut WitnessCs<'_>,
    bits: &[Bit],
) -> Result<AllocatedNum<Scalar>, SynthesisError> {
    let mut repr = [0u8; 32];
    for (i, b) in bits.iter().take(Scalar::CAPACITY as usize).enumerate() {
        repr[i / 8] |= u8::from(b.value()) << (i % 8);
    }
    // Fewer than 255 bits: always below the modulus.
    let value =
        Option::<Scalar>::from(Scalar::from_repr(repr)).ok_or(SynthesisError::Unsatisfiable)?;
    AllocatedNum::alloc(cs, || Ok(value))
}

#[cfg(test)]
mod tests;
