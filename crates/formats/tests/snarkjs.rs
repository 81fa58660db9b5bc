//! circom + snarkjs (BLS12-381) against cuzk, with the real tools: a circuit compiled by
//! circom2 with `--prime bls12381` and set up by snarkjs is proven by cuzk and verified by
//! snarkjs, and snarkjs's proof verifies in cuzk; every iden3 file round-trips; corrupt files
//! get their errors.
//!
//! The tools come from the npm registry (`support/snarkjs_tools.rs`). Without node and npm
//! this test FAILS: it never passes without running.

use std::process::Command;

mod support;
use support::snarkjs_tools::{Fixture, file, fixture};

use cuzk_field::Fr;
use cuzk_formats::{CircomR1cs, FormatError, PointChecks, Wtns, Zkey, snarkjs};
use cuzk_groth16::{create_proof, generate_parameters, prepare_verifying_key, verify_proof};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

#[test]
fn circom_snarkjs_files_prove_and_verify_both_ways() {
    let f = fixture();
    let full = PointChecks::Full;
    let zkey = Zkey::read(&f.path("chain.zkey"), &full).unwrap();
    let r1cs = CircomR1cs::read(&f.path("chain.r1cs")).unwrap();
    let wtns = Wtns::read(&f.path("chain.wtns")).unwrap();
    zkey.check_circuit("chain.zkey", &r1cs, "chain.r1cs")
        .unwrap();
    assert_eq!(r1cs.num_public(), 2);

    // Round trips: what cuzk writes parses to the same thing (and wtns byte for byte).
    assert_eq!(
        Zkey::from_bytes("rt.zkey", &zkey.to_bytes(), &full).unwrap(),
        zkey
    );
    assert_eq!(
        CircomR1cs::from_bytes("rt.r1cs", &r1cs.to_bytes()).unwrap(),
        r1cs
    );
    assert_eq!(wtns.to_bytes(), file(&f, "chain.wtns").1);
    assert_eq!(Wtns::from_bytes("rt.wtns", &wtns.to_bytes()).unwrap(), wtns);

    // The circom system in cuzk's form is satisfied by the witness, and cuzk's own setup and
    // prover take it.
    let cz = r1cs.to_r1cs("chain.r1cs").unwrap();
    let w = wtns.to_witness(r1cs.num_public(), "chain.wtns").unwrap();
    cz.is_satisfied(&w).unwrap();
    let pk = generate_parameters(&cz, &mut ChaCha8Rng::seed_from_u64(1)).unwrap();
    let p = create_proof(&pk, &cz, &w, &mut ChaCha8Rng::seed_from_u64(2)).unwrap();
    verify_proof(&prepare_verifying_key(&pk.vk), &p, w.public_inputs()).unwrap();
    let back = CircomR1cs::from_r1cs(&cz);
    assert_eq!(back.to_r1cs("back").unwrap(), cz);

    // cuzk proves the zkey; snarkjs verifies; a wrong public input is rejected by snarkjs.
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let proof = zkey
        .prove(
            &wtns.values,
            Fr::random(&mut rng),
            Fr::random(&mut rng),
            "chain.wtns",
        )
        .unwrap();
    let public = &wtns.values[1..=zkey.n_public];
    snarkjs::write_proof(&f.path("cuzk_proof.json"), &proof).unwrap();
    snarkjs::write_public(&f.path("cuzk_public.json"), public).unwrap();
    let out = f.snarkjs(&[
        "groth16",
        "verify",
        "vk.json",
        "cuzk_public.json",
        "cuzk_proof.json",
    ]);
    assert!(out.contains("OK!"), "snarkjs verify: {out}");
    let mut wrong = public.to_vec();
    wrong[0] += Fr::ONE;
    snarkjs::write_public(&f.path("wrong_public.json"), &wrong).unwrap();
    let rejected = Command::new("node")
        .arg(&f.snarkjs)
        .args([
            "groth16",
            "verify",
            "vk.json",
            "wrong_public.json",
            "cuzk_proof.json",
        ])
        .current_dir(&f.dir)
        .output()
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&rejected.stdout).contains("OK!"),
        "snarkjs must reject a wrong public input"
    );

    // snarkjs proves; cuzk verifies with verification_key.json and with the zkey's key.
    f.snarkjs(&[
        "groth16",
        "prove",
        "chain.zkey",
        "chain.wtns",
        "proof.json",
        "public.json",
    ]);
    let sj_proof = snarkjs::read_proof(&f.path("proof.json")).unwrap();
    let sj_public = snarkjs::read_public(&f.path("public.json")).unwrap();
    assert_eq!(sj_public, public);
    let vk = snarkjs::read_vk(&f.path("vk.json")).unwrap();
    assert_eq!(vk, zkey.verifying_key());
    let pvk = prepare_verifying_key(&vk);
    verify_proof(&pvk, &sj_proof, &sj_public).unwrap();
    assert!(verify_proof(&pvk, &sj_proof, &wrong).is_err());
    verify_proof(&pvk, &proof, public).unwrap();
    // JSON round trips.
    let vk_text = snarkjs::vk_to_json(&vk).to_string();
    assert_eq!(snarkjs::vk_from_json("vk", &vk_text).unwrap(), vk);
    let pt = snarkjs::proof_to_json(&sj_proof).to_string();
    assert_eq!(snarkjs::proof_from_json("p", &pt).unwrap(), sj_proof);

    corrupt_files_get_their_errors(&f, &zkey);
    let _ = std::fs::remove_dir_all(&f.dir);
}

fn corrupt_files_get_their_errors(f: &Fixture, zkey: &Zkey) {
    let full = PointChecks::Full;
    // Wrong curve: circom's BN254 output.
    let (name, bn) = file(f, "bn.r1cs");
    let e = CircomR1cs::from_bytes(&name, &bn).unwrap_err();
    assert!(
        matches!(&e, FormatError::WrongCurve { field, .. } if field == "header.prime"),
        "{e}"
    );
    assert!(e.to_string().contains("bn.r1cs"), "{e}");
    // Wrong magic: a wtns given as a zkey.
    let (name, wt) = file(f, "chain.wtns");
    let e = Zkey::from_bytes(&name, &wt, &full).unwrap_err();
    assert!(matches!(e, FormatError::WrongMagic { .. }), "{e}");
    // Truncated zkey.
    let (name, zk) = file(f, "chain.zkey");
    let e = Zkey::from_bytes(&name, &zk[..zk.len() - 100], &full).unwrap_err();
    assert!(matches!(e, FormatError::Truncated { .. }), "{e}");
    // A corrupt point: flip a coordinate byte of the first A point.
    let mut bytes = zkey.to_bytes();
    let a0 = find_section(&bytes, 5);
    bytes[a0 + 5] ^= 0x40;
    let e = Zkey::from_bytes("bad.zkey", &bytes, &full).unwrap_err();
    assert!(
        matches!(&e, FormatError::BadPoint { field, index: 0, .. } if field == "A"),
        "{e}"
    );
    // Wrong section size: drop H's last point.
    let mut z2 = zkey.clone();
    z2.h.pop();
    let e = Zkey::from_bytes("short.zkey", &z2.to_bytes(), &full).unwrap_err();
    assert!(
        matches!(e, FormatError::SectionSize { section: 9, .. }),
        "{e}"
    );
    // A missing section in a wtns.
    let w = Wtns::from_bytes("w", &wt).unwrap();
    let mut only_header = w.to_bytes();
    let body = find_section(&only_header, 2) - 12;
    only_header.truncate(body);
    only_header[8..12].copy_from_slice(&1u32.to_le_bytes());
    let e = Wtns::from_bytes("nohead.wtns", &only_header).unwrap_err();
    assert!(
        matches!(e, FormatError::MissingSection { section: 2, .. }),
        "{e}"
    );
    // Mismatched circuit and key: another circuit's witness and r1cs.
    let other_w = Wtns::read(&f.path("other.wtns")).unwrap();
    let e = zkey
        .prove(&other_w.values, Fr::ONE, Fr::ONE, "other.wtns")
        .unwrap_err();
    assert!(matches!(e, FormatError::Mismatch { .. }), "{e}");
    let other_r1cs = CircomR1cs::read(&f.path("other.r1cs")).unwrap();
    let e = zkey
        .check_circuit("chain.zkey", &other_r1cs, "other.r1cs")
        .unwrap_err();
    assert!(
        e.to_string().contains("other.r1cs") && e.to_string().contains("nVars"),
        "{e}"
    );
    // A key assembled by hand with inconsistent fields is refused before proving.
    let mut bad = zkey.clone();
    bad.coefs[0].signal = u32::MAX;
    let e = bad
        .prove(&w.values, Fr::ONE, Fr::ONE, "chain.wtns")
        .unwrap_err();
    assert!(e.to_string().contains("coefficients[0]"), "{e}");
    let mut bad = zkey.clone();
    bad.c.pop();
    let e = bad
        .prove(&w.values, Fr::ONE, Fr::ONE, "chain.wtns")
        .unwrap_err();
    assert!(
        matches!(&e, FormatError::Mismatch { field, .. } if field == "C"),
        "{e}"
    );
    // JSON: a proof on another curve, a non-field public input.
    let e = snarkjs::proof_from_json("p.json", r#"{"pi_a":[],"curve":"bn128"}"#).unwrap_err();
    assert!(matches!(e, FormatError::WrongCurve { .. }), "{e}");
    let big = "52435875175126190479447740508185965837690552500527637822603658699938581184513";
    let e = snarkjs::public_from_json("pub.json", &format!("[\"{big}\"]")).unwrap_err();
    assert!(e.to_string().contains("public signals[0]"), "{e}");
}

/// Offset of the body of the first section of type `id` in an iden3 container.
fn find_section(b: &[u8], id: u32) -> usize {
    let mut pos = 12;
    loop {
        let t = u32::from_le_bytes(b[pos..pos + 4].try_into().unwrap());
        let size = u64::from_le_bytes(b[pos + 4..pos + 12].try_into().unwrap()) as usize;
        if t == id {
            return pos + 12;
        }
        pos += 12 + size;
    }
}
