//! The native SHA-256 witness against bellperson's gadget (the one storage-proofs calls), on
//! inputs of every kind of bit: constants, variables and negated variables, in runs and mixed,
//! from an empty message to several blocks. Both write into a `WitnessCs` that already holds the
//! input's variables; the systems must end equal, value for value, and the digests agree.

use bellpepper_core::boolean::{AllocatedBit, Boolean};
use bellperson::gadgets::{multipack, sha256::sha256 as gadget_sha256};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sha2::Digest as _;

use super::*;

#[derive(Clone, Copy, Debug)]
enum Kinds {
    AllConstant,
    AllVariables,
    Mixed,
    /// Runs of one kind, as a real preimage has (an id's bits, then constant padding).
    Runs,
}

/// `bytes` as bits (most significant first), each of a kind `kinds` picks, allocated into `cs`.
fn input(cs: &mut WitnessCs<'_>, bytes: &[u8], kinds: Kinds, rng: &mut ChaCha8Rng) -> Vec<Boolean> {
    let mut run_kind = 0u8;
    (0..bytes.len() * 8)
        .map(|i| {
            let v = (bytes[i / 8] >> (7 - i % 8)) & 1 == 1;
            let kind = match kinds {
                Kinds::AllConstant => 0,
                Kinds::AllVariables => 1 + rng.gen_range(0..2u8),
                Kinds::Mixed => rng.gen_range(0..3u8),
                Kinds::Runs => {
                    if i % 64 == 0 {
                        run_kind = rng.gen_range(0..3u8);
                    }
                    run_kind
                }
            };
            match kind {
                0 => Boolean::Constant(v),
                1 => Boolean::from(AllocatedBit::alloc(&mut *cs, Some(v)).unwrap()),
                _ => Boolean::from(AllocatedBit::alloc(&mut *cs, Some(!v)).unwrap()).not(),
            }
        })
        .collect()
}

fn check(len: usize, kinds: Kinds, seed: u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let bytes: Vec<u8> = (0..len).map(|_| rng.r#gen()).collect();
    let state = rng.r#gen::<u64>();

    let mut gadget_cs = WitnessCs::default();
    let bits = input(
        &mut gadget_cs,
        &bytes,
        kinds,
        &mut ChaCha8Rng::seed_from_u64(state),
    );
    let digest = gadget_sha256(&mut gadget_cs, &bits).unwrap();
    let packed = multipack::pack_bits(&mut gadget_cs, &digest).unwrap();

    let mut native_cs = WitnessCs::default();
    let bits = input(
        &mut native_cs,
        &bytes,
        kinds,
        &mut ChaCha8Rng::seed_from_u64(state),
    );
    let bits: Vec<Bit> = bits.iter().map(|b| Bit::of(b).unwrap()).collect();
    let native = sha256(&mut native_cs, &bits);
    let native_packed = pack_bits(&mut native_cs, &native).unwrap();

    let what = format!("{len} bytes, {kinds:?}, seed {seed}");
    assert_eq!(native.len(), 256);
    let expected = sha2::Sha256::digest(&bytes);
    for (i, (n, g)) in native.iter().zip(&digest).enumerate() {
        assert_eq!(Some(n.value()), g.get_value(), "{what}: digest bit {i}");
        assert_eq!(
            n.value(),
            (expected[i / 8] >> (7 - i % 8)) & 1 == 1,
            "{what}: SHA-256 bit {i}"
        );
    }
    assert_eq!(
        native_packed.get_value(),
        packed.get_value(),
        "{what}: packed"
    );
    native_cs.assert_same_values(&gadget_cs, &what);
}

#[test]
fn native_sha256_leaves_the_gadgets_witness() {
    let mut seed = 0;
    for len in [0, 1, 31, 32, 55, 56, 63, 64, 65, 119, 128, 200] {
        for kinds in [
            Kinds::AllConstant,
            Kinds::AllVariables,
            Kinds::Mixed,
            Kinds::Runs,
        ] {
            seed += 1;
            check(len, kinds, seed);
        }
    }
}

#[test]
fn native_sha256_leaves_the_gadgets_witness_on_a_label_sized_message() {
    // A PoRep label's preimage: 39 32-byte words, 20 blocks with the padding.
    check(39 * 32, Kinds::Runs, 1000);
    check(39 * 32, Kinds::AllVariables, 1001);
}
