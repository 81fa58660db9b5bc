//! The SHA-256 flow shared by `examples/sha256.rs` and the GPU test: bellperson makes the
//! parameters, cuzk loads them by digest, proves (a first proof from full synthesis, a second
//! of another instance by witness-only synthesis) on the given backend, and bellperson's
//! `verify_proof` checks each proof.

use std::time::Instant;

use bellperson::groth16 as bp;
use blstrs::Bls12;
use cuzk_bellpepper::CompiledCircuit;
use cuzk_bellpepper::sha256_circuit::Sha256Circuit;
use cuzk_formats::bellperson::proof_to_bytes;
use cuzk_formats::{BpParameters, Digest, PointChecks};
use cuzk_groth16::{BackendChoice, create_proof_with_backend, select_backend};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

/// Runs the flow for `hashes` messages; returns the number of constraints.
pub fn run(hashes: usize, choice: BackendChoice) -> Result<usize, Box<dyn std::error::Error>> {
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    let backend = select_backend(choice)?;
    println!("backend: {}", backend.describe());

    let t = Instant::now();
    let params =
        bp::generate_random_parameters::<Bls12, _, _>(Sha256Circuit::blank(hashes), &mut rng)?;
    let mut bytes = Vec::new();
    params.write(&mut bytes)?;
    println!(
        "bellperson parameters: {:.1} s, {:.1} MB",
        t.elapsed().as_secs_f64(),
        bytes.len() as f64 / 1e6
    );

    // Loaded as a trusted file would be: by digest, coordinates checked, no subgroup checks.
    let t = Instant::now();
    let sha = Digest::Sha256([0; 32]).compute_like(&bytes);
    let digest = Digest::Sha256(sha.try_into().map_err(|_| "SHA-256 has 32 bytes")?);
    let bpp = BpParameters::from_bytes(
        "bellperson params",
        &bytes,
        &PointChecks::TrustedDigest(digest),
    )?;
    drop(bytes);
    let t_load = t.elapsed();

    let t = Instant::now();
    let (compiled, first_witness) = CompiledCircuit::compile(Sha256Circuit::new(hashes, 1))?;
    let synth = t.elapsed();
    let constraints = compiled.r1cs.num_constraints();
    let pk = bpp.into_proving_key(&compiled.r1cs, "bellperson params")?;
    println!(
        "{constraints} constraints, {} variables; full synthesis {:.1} ms; key loaded in {:.2} s",
        compiled.r1cs.num_variables(),
        synth.as_secs_f64() * 1e3,
        t_load.as_secs_f64()
    );

    let pvk = bp::prepare_verifying_key(&params.vk);
    for seed in [1u8, 2] {
        let circuit = Sha256Circuit::new(hashes, seed);
        let inputs = circuit.public_inputs();
        let t = Instant::now();
        let w = if seed == 1 {
            first_witness.clone()
        } else {
            compiled.witness(circuit)?
        };
        let t_w = t.elapsed();
        let (r, s) = (
            cuzk_field::Fr::random(&mut rng),
            cuzk_field::Fr::random(&mut rng),
        );
        let (proof, timings) = create_proof_with_backend(&*backend, &pk, &compiled.r1cs, &w, r, s)?;
        let bp_proof = bp::Proof::<Bls12>::read(&proof_to_bytes(&proof)[..])?;
        let ok = bp::verify_proof(&pvk, &bp_proof, &inputs)?;
        println!(
            "proof of instance {seed}: witness {} {:.1} ms, prove {:.1} ms, bellperson verify_proof: {}",
            if seed == 1 {
                "(full synthesis above)"
            } else {
                "only"
            },
            t_w.as_secs_f64() * 1e3,
            timings.total.as_secs_f64() * 1e3,
            if ok { "ok" } else { "REJECTED" }
        );
        print!("{timings}");
        if !ok {
            return Err("bellperson rejected cuzk's proof".into());
        }
    }
    Ok(constraints)
}
