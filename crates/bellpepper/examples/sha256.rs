//! SHA-256 of 64-byte messages (bellpepper's gadget) proven by cuzk with parameters from
//! bellperson's `generate_random_parameters`, verified by bellperson's `verify_proof`.
//!
//! `cargo run --release -p cuzk-bellpepper --example sha256 -- [HASHES] [auto|cpu|gpu]`:
//! HASHES messages (default 1, 45,391 constraints for one: 24 make more than 2^20), on the GPU when
//! one is present (`auto`).

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

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let hashes: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(1);
    let choice: BackendChoice = args
        .next()
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(BackendChoice::Auto);
    let mut rng = ChaCha20Rng::seed_from_u64(1);

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

    // Load them as a trusted file would be: by digest, with no subgroup checks.
    let t = Instant::now();
    let digest = Digest::Sha256([0; 32]).compute_like(&bytes);
    let digest = Digest::Sha256(digest.try_into().expect("32 bytes"));
    let bpp = BpParameters::from_bytes(
        "bellperson params",
        &bytes,
        &PointChecks::TrustedDigest(digest),
    )?;
    drop(bytes);

    let circuit = Sha256Circuit::new(hashes, 1);
    let t_syn = Instant::now();
    let (compiled, witness) = CompiledCircuit::compile(circuit)?;
    let synth = t_syn.elapsed();
    let pk = bpp.into_proving_key(&compiled.r1cs, "bellperson params")?;
    println!(
        "{} constraints, {} variables; full synthesis {:.1} ms; key loaded in {:.1} s",
        compiled.r1cs.num_constraints(),
        compiled.r1cs.num_variables(),
        synth.as_secs_f64() * 1e3,
        t.elapsed().as_secs_f64()
    );

    let backend = select_backend(choice)?;
    println!("backend: {}", backend.describe());
    let pvk = bp::prepare_verifying_key(&params.vk);
    for (round, seed) in [(0, 1u8), (1, 2u8)] {
        // The second proof is of another instance, by witness-only synthesis.
        let circuit = Sha256Circuit::new(hashes, seed);
        let inputs_now = circuit.public_inputs();
        let t_w = Instant::now();
        let w = if round == 0 {
            witness.clone()
        } else {
            compiled.witness(circuit)?
        };
        let wtime = t_w.elapsed();
        let r = cuzk_field::Fr::random(&mut rng);
        let s = cuzk_field::Fr::random(&mut rng);
        let (proof, timings) = create_proof_with_backend(&*backend, &pk, &compiled.r1cs, &w, r, s)?;
        let bp_proof = bp::Proof::<Bls12>::read(&proof_to_bytes(&proof)[..])?;
        let ok = bp::verify_proof(&pvk, &bp_proof, &inputs_now)?;
        println!(
            "proof {round}: witness {:.1} ms, prove {:.1} ms, bellperson verify_proof: {}",
            wtime.as_secs_f64() * 1e3,
            timings.total.as_secs_f64() * 1e3,
            if ok { "ok" } else { "REJECTED" }
        );
        print!("{timings}");
        if !ok {
            return Err("bellperson rejected the proof".into());
        }
    }
    Ok(())
}
