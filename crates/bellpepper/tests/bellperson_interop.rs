//! bellperson ↔ cuzk on bellpepper circuits: bellperson-made parameters prove with cuzk and
//! bellperson verifies; bellperson's proofs verify in cuzk; cuzk-made parameters work in
//! bellperson.

use bellpepper_core::boolean::{AllocatedBit, Boolean};
use bellpepper_core::num::AllocatedNum;
use bellpepper_core::{Circuit, ConstraintSystem, SynthesisError};
use bellperson::groth16::{self as bp, Parameters};
use blstrs::{Bls12, Scalar};
use cuzk_bellpepper::{CompiledCircuit, fr_from_scalar, synthesize};
use cuzk_formats::bellperson::{proof_from_bytes, proof_to_bytes};
use cuzk_formats::{BpParameters, BpVerifyingKey, PointChecks};
use cuzk_groth16::{create_proof, generate_parameters, prepare_verifying_key, verify_proof};
use ff::Field;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// x, y private; out = x³ + y (public), a second public input = y, plus bit decompositions of
/// x, and a variable that occurs only in C: every density case.
#[derive(Clone)]
struct Mixed {
    x: Option<u64>,
    y: Option<u64>,
    rounds: usize,
}

impl Circuit<Scalar> for Mixed {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let x = AllocatedNum::alloc(cs.namespace(|| "x"), || {
            self.x
                .map(Scalar::from)
                .ok_or(SynthesisError::AssignmentMissing)
        })?;
        let y_val = self.y.map(Scalar::from);
        let y_pub = cs.alloc_input(|| "y", || y_val.ok_or(SynthesisError::AssignmentMissing))?;
        let mut acc = x.clone();
        for i in 0..self.rounds {
            let sq = acc.square(cs.namespace(|| format!("sq {i}")))?;
            acc = sq.mul(cs.namespace(|| format!("mul {i}")), &x)?;
        }
        // out = acc + y, enforced as (acc + y) * 1 = out.
        let out_val = acc.get_value().zip(y_val).map(|(a, y)| a + y);
        let out = cs.alloc_input(
            || "out",
            || out_val.ok_or(SynthesisError::AssignmentMissing),
        )?;
        cs.enforce(
            || "out",
            |lc| lc + acc.get_variable() + y_pub,
            |lc| lc + CS::one(),
            |lc| lc + out,
        );
        // Bits of x: boolean constraints and a packing row.
        let bits = (0..16)
            .map(|j| {
                AllocatedBit::alloc(
                    cs.namespace(|| format!("bit {j}")),
                    self.x.map(|v| (v >> j) & 1 == 1),
                )
                .map(Boolean::from)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut coeff = Scalar::ONE;
        let mut packed = bellpepper_core::LinearCombination::zero();
        for b in &bits {
            packed = packed + &b.lc(CS::one(), coeff);
            coeff = coeff.double();
        }
        cs.enforce(
            || "pack",
            |_| packed,
            |lc| lc + CS::one(),
            |lc| lc + x.get_variable(),
        );
        // A variable only in C.
        let c_only = AllocatedNum::alloc(cs.namespace(|| "c only"), || {
            x.get_value().ok_or(SynthesisError::AssignmentMissing)
        })?;
        cs.enforce(
            || "c only",
            |lc| lc + x.get_variable(),
            |lc| lc + CS::one(),
            |lc| lc + c_only.get_variable(),
        );
        Ok(())
    }
}

fn instance(x: u64) -> Mixed {
    Mixed {
        x: Some(x),
        y: Some(x + 7),
        rounds: 40,
    }
}

fn public(c: &Mixed) -> Vec<Scalar> {
    let x = Scalar::from(c.x.unwrap());
    let mut acc = x;
    for _ in 0..c.rounds {
        acc = acc.square() * x;
    }
    let y = Scalar::from(c.y.unwrap());
    vec![y, acc + y]
}

fn bellperson_params(seed: u64) -> (Parameters<Bls12>, Vec<u8>) {
    let blank = Mixed {
        x: None,
        y: None,
        rounds: 40,
    };
    let params =
        bp::generate_random_parameters::<Bls12, _, _>(blank, &mut ChaCha8Rng::seed_from_u64(seed))
            .expect("bellperson setup");
    let mut bytes = Vec::new();
    params.write(&mut bytes).unwrap();
    (params, bytes)
}

#[test]
fn cuzk_proves_with_bellperson_parameters_and_bellperson_verifies() {
    let (params, bytes) = bellperson_params(1);
    let bpp = BpParameters::from_bytes("bellperson.params", &bytes, &PointChecks::Full).unwrap();
    // cuzk writes the same bytes back.
    let mut again = Vec::new();
    bpp.write(&mut again).unwrap();
    assert_eq!(again, bytes, "bellperson layout round trip");

    let c = instance(3);
    let (r1cs, w) = synthesize(c.clone()).unwrap();
    r1cs.is_satisfied(&w).unwrap();
    let pk = bpp
        .clone()
        .into_proving_key(&r1cs, "bellperson.params")
        .unwrap();
    let proof = create_proof(&pk, &r1cs, &w, &mut ChaCha8Rng::seed_from_u64(2)).unwrap();

    let bp_proof = bp::Proof::<Bls12>::read(&proof_to_bytes(&proof)[..]).unwrap();
    let pvk = bp::prepare_verifying_key(&params.vk);
    let inputs = public(&c);
    assert_eq!(
        w.public_inputs().to_vec(),
        inputs.iter().map(fr_from_scalar).collect::<Vec<_>>()
    );
    assert!(
        bp::verify_proof(&pvk, &bp_proof, &inputs).unwrap(),
        "bellperson accepts cuzk's proof"
    );
    let mut wrong = inputs.clone();
    wrong[1] += Scalar::ONE;
    assert!(!bp::verify_proof(&pvk, &bp_proof, &wrong).unwrap());

    // Witness-only synthesis of another instance proves with the kept system.
    let compiled = CompiledCircuit::new(r1cs);
    let c2 = instance(11);
    let w2 = compiled.witness(c2.clone()).unwrap();
    let proof2 =
        create_proof(&pk, compiled.r1cs(), &w2, &mut ChaCha8Rng::seed_from_u64(4)).unwrap();
    let bp_proof2 = bp::Proof::<Bls12>::read(&proof_to_bytes(&proof2)[..]).unwrap();
    assert!(bp::verify_proof(&pvk, &bp_proof2, &public(&c2)).unwrap());
}

#[test]
fn bellperson_proofs_verify_in_cuzk() {
    let (params, bytes) = bellperson_params(5);
    let c = instance(9);
    let bp_proof =
        bp::create_random_proof(c.clone(), &params, &mut ChaCha8Rng::seed_from_u64(6)).unwrap();
    let mut pb = Vec::new();
    bp_proof.write(&mut pb).unwrap();
    let proof = proof_from_bytes("bellperson.proof", &pb).unwrap();

    let mut vkb = Vec::new();
    params.vk.write(&mut vkb).unwrap();
    let vk = BpVerifyingKey::from_bytes("bellperson.vk", &vkb).unwrap();
    assert_eq!(vk.to_bytes(), vkb, "verifying key round trip");
    let bpp = BpParameters::from_bytes("bellperson.params", &bytes, &PointChecks::Full).unwrap();
    assert_eq!(bpp.vk, vk);
    let pvk = prepare_verifying_key(&vk.to_cuzk());
    let inputs: Vec<_> = public(&c).iter().map(fr_from_scalar).collect();
    verify_proof(&pvk, &proof, &inputs).unwrap();
    let mut wrong = inputs.clone();
    wrong[0] += cuzk_field::Fr::ONE;
    assert!(verify_proof(&pvk, &proof, &wrong).is_err());
}

#[test]
fn cuzk_parameters_prove_in_bellperson() {
    let c = instance(5);
    let (r1cs, _) = synthesize(c.clone()).unwrap();
    let pk = generate_parameters(&r1cs, &mut ChaCha8Rng::seed_from_u64(8)).unwrap();
    let mut bytes = Vec::new();
    BpParameters::from_proving_key(&pk)
        .unwrap()
        .write(&mut bytes)
        .unwrap();
    let params =
        Parameters::<Bls12>::read(&bytes[..], true).expect("bellperson reads cuzk's parameters");
    let proof =
        bp::create_random_proof(c.clone(), &params, &mut ChaCha8Rng::seed_from_u64(9)).unwrap();
    let pvk = bp::prepare_verifying_key(&params.vk);
    assert!(bp::verify_proof(&pvk, &proof, &public(&c)).unwrap());
}
