//! The SHA-256 flow shared by `examples/sha256.rs` and the GPU test: bellperson makes the
//! parameters, cuzk loads them by digest, proves (a first proof from full synthesis, a second
//! of another instance by witness-only synthesis) on the given backend, and bellperson's
//! `verify_proof` checks each proof. Before the second proof it times, on that instance, full
//! synthesis (alone, and then A·z, B·z, C·z: a proof's cost without a kept system),
//! witness-only synthesis then A·z, B·z, C·z, and the two overlapped
//! (`CompiledCircuit::witness_and_evaluations`), whose witness the proof uses.

use std::time::{Duration, Instant};

use bellperson::groth16 as bp;
use blstrs::Bls12;
use cuzk_bellpepper::sha256_circuit::Sha256Circuit;
use cuzk_bellpepper::{CompiledCircuit, synthesize};
use cuzk_formats::bellperson::proof_to_bytes;
use cuzk_formats::{BpParameters, Digest, PointChecks};
use cuzk_groth16::{BackendChoice, Witness, create_proof_with_backend, select_backend};
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
    let constraints = compiled.r1cs().num_constraints();
    let pk = bpp.into_proving_key(compiled.r1cs(), "bellperson params")?;
    println!(
        "{constraints} constraints, {} variables; full synthesis {:.1} ms; key loaded in {:.2} s",
        compiled.r1cs().num_variables(),
        synth.as_secs_f64() * 1e3,
        t_load.as_secs_f64()
    );

    let pvk = bp::prepare_verifying_key(&params.vk);
    for seed in [1u8, 2] {
        let circuit = Sha256Circuit::new(hashes, seed);
        let inputs = circuit.public_inputs();
        let (w, t_w) = if seed == 1 {
            (first_witness.clone(), Duration::ZERO)
        } else {
            witness_paths(&compiled, &circuit)?
        };
        let (r, s) = (
            cuzk_field::Fr::random(&mut rng),
            cuzk_field::Fr::random(&mut rng),
        );
        let (proof, timings) =
            create_proof_with_backend(&*backend, &pk, compiled.r1cs(), &w, r, s)?;
        let bp_proof = bp::Proof::<Bls12>::read(&proof_to_bytes(&proof)[..])?;
        let ok = bp::verify_proof(&pvk, &bp_proof, &inputs)?;
        println!(
            "proof of instance {seed}: witness {} {:.1} ms, prove {:.1} ms, bellperson verify_proof: {}",
            if seed == 1 {
                "(full synthesis above)"
            } else {
                "overlapped with A·z, B·z, C·z (the prover evaluates them again)"
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

/// Times the three ways to a witness and its A·z, B·z, C·z for `circuit` (best of 3,
/// interleaved), checks they agree, and returns the overlapped path's witness and time.
fn witness_paths(
    compiled: &CompiledCircuit,
    circuit: &Sha256Circuit,
) -> Result<(Witness, Duration), Box<dyn std::error::Error>> {
    let r1cs = compiled.r1cs();
    let n = r1cs.num_constraints();
    let zeros = || vec![cuzk_field::Fr::ZERO; n];
    let (mut a, mut b, mut c) = (zeros(), zeros(), zeros());
    let (mut a2, mut b2, mut c2) = (zeros(), zeros(), zeros());
    let (mut a3, mut b3, mut c3) = (zeros(), zeros(), zeros());
    let (mut full, mut full_products, mut synth, mut two_steps, mut overlapped) = (
        Duration::MAX,
        Duration::MAX,
        Duration::MAX,
        Duration::MAX,
        Duration::MAX,
    );
    let mut witness = None;
    for _ in 0..3 {
        let t = Instant::now();
        let (r1cs_full, w_full) = synthesize(circuit.clone())?;
        full = full.min(t.elapsed());
        r1cs_full.evaluate_into(w_full.assignment(), &mut a3, &mut b3, &mut c3)?;
        full_products = full_products.min(t.elapsed());

        let t = Instant::now();
        let w = compiled.witness(circuit.clone())?;
        synth = synth.min(t.elapsed());
        r1cs.evaluate_into(w.assignment(), &mut a, &mut b, &mut c)?;
        two_steps = two_steps.min(t.elapsed());

        let t = Instant::now();
        let w2 = compiled.witness_and_evaluations(circuit.clone(), &mut a2, &mut b2, &mut c2)?;
        overlapped = overlapped.min(t.elapsed());
        if w != w_full
            || w2 != w_full
            || a2 != a
            || b2 != b
            || c2 != c
            || (&a3, &b3, &c3) != (&a, &b, &c)
        {
            return Err("the witness paths disagree".into());
        }
        witness = Some(w2);
    }
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let x = |d: Duration| full.as_secs_f64() / d.as_secs_f64();
    println!(
        "witness of instance 2, best of 3 ({} rayon threads): full synthesis {:.1} ms; witness-only synthesis {:.1} ms ({:.2}x); then A·z, B·z, C·z {:.1} ms ({:.2}x); overlapped {:.1} ms ({:.2}x); full synthesis then A·z, B·z, C·z {:.1} ms ({:.2}x the overlapped path)",
        rayon::current_num_threads(),
        ms(full),
        ms(synth),
        x(synth),
        ms(two_steps),
        x(two_steps),
        ms(overlapped),
        x(overlapped),
        ms(full_products),
        full_products.as_secs_f64() / overlapped.as_secs_f64()
    );
    Ok((witness.expect("three runs"), overlapped))
}
