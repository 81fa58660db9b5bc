//! `batch::create_random_proof_batch`: bellperson's parameters in, bellperson's proofs out,
//! and bellperson's verifier accepts each of them.

use bellpepper_core::num::AllocatedNum;
use bellpepper_core::{Circuit, ConstraintSystem, SynthesisError};
use bellperson::groth16 as bp;
use blstrs::{Bls12, Scalar};
use cuzk_bellpepper::batch::{BatchError, create_random_proof_batch};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// Knows x with x⁵ = y (y public).
struct Fifth(Option<u64>);

impl Circuit<Scalar> for Fifth {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let x = AllocatedNum::alloc(cs.namespace(|| "x"), || {
            self.0
                .map(Scalar::from)
                .ok_or(SynthesisError::AssignmentMissing)
        })?;
        let x2 = x.square(cs.namespace(|| "x2"))?;
        let x4 = x2.square(cs.namespace(|| "x4"))?;
        let x5 = x4.mul(cs.namespace(|| "x5"), &x)?;
        x5.inputize(cs.namespace(|| "y"))
    }
}

#[test]
fn bellperson_parameters_in_bellperson_proofs_out() {
    let rng = &mut ChaCha8Rng::seed_from_u64(1);
    let params = bp::generate_random_parameters::<Bls12, _, _>(Fifth(None), rng).unwrap();
    let xs = [2u64, 3, 5];
    let proofs =
        create_random_proof_batch(xs.iter().map(|&x| Fifth(Some(x))).collect(), &params, rng)
            .unwrap();
    assert_eq!(proofs.len(), xs.len());
    let pvk = bp::prepare_verifying_key(&params.vk);
    for (p, &x) in proofs.iter().zip(&xs) {
        let y = Scalar::from(x.pow(5));
        assert!(bp::verify_proof(&pvk, p, &[y]).unwrap());
        assert!(!bp::verify_proof(&pvk, p, &[y + Scalar::from(1u64)]).unwrap());
    }
    // Proofs of another statement are rejected; an empty batch is an error.
    let bad = create_random_proof_batch(vec![Fifth(Some(2))], &params, rng).unwrap();
    assert!(!bp::verify_proof(&pvk, &bad[0], &[Scalar::from(33u64)]).unwrap());
    assert!(matches!(
        create_random_proof_batch(Vec::<Fifth>::new(), &params, rng),
        Err(BatchError::Empty)
    ));
}
