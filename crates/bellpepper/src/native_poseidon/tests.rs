//! The native Poseidon witness against neptune's gadget (the one storage-proofs calls), for
//! every arity Filecoin's trees and columns use: both write into a `WitnessCs` that already
//! holds the preimage; the systems must end equal, value for value.

use neptune::poseidon::Arity;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use typenum::{U2, U4, U8, U11, U16};

use super::*;

fn check<A: Arity<Scalar>>(seed: u64) {
    let constants = PoseidonConstants::<Scalar, A>::new();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let values: Vec<Scalar> = (0..A::to_usize())
        .map(|_| Scalar::random(&mut rng))
        .collect();
    let inputs = |cs: &mut WitnessCs<'_>| -> Vec<AllocatedNum<Scalar>> {
        values
            .iter()
            .map(|v| AllocatedNum::alloc(&mut *cs, || Ok(*v)).unwrap())
            .collect()
    };

    let mut gadget_cs = WitnessCs::default();
    let preimage = inputs(&mut gadget_cs);
    let gadget = neptune::circuit::poseidon_hash(&mut gadget_cs, preimage, &constants).unwrap();

    let mut native_cs = WitnessCs::default();
    let preimage = inputs(&mut native_cs);
    let native = poseidon_hash(&mut native_cs, &preimage, &constants).unwrap();

    let what = format!("arity {}, seed {seed}", A::to_usize());
    assert_eq!(native.get_value(), gadget.get_value(), "{what}: digest");
    assert_eq!(
        native.get_value(),
        Some(neptune::Poseidon::new_with_preimage(&values, &constants).hash()),
        "{what}: neptune's own hash"
    );
    native_cs.assert_same_values(&gadget_cs, &what);
}

#[test]
fn native_poseidon_leaves_the_gadgets_witness() {
    for seed in 0..3 {
        check::<U2>(seed);
        check::<U4>(seed);
        check::<U8>(seed);
        check::<U11>(seed);
        check::<U16>(seed);
    }
}

#[test]
fn a_preimage_of_another_arity_is_an_error() {
    let constants = PoseidonConstants::<Scalar, U4>::new();
    let mut cs = WitnessCs::default();
    let x = AllocatedNum::alloc(&mut cs, || Ok(Scalar::ONE)).unwrap();
    assert!(matches!(
        poseidon_hash(&mut cs, &[x.clone(), x], &constants),
        Err(SynthesisError::MalformedProofs(_))
    ));
}
