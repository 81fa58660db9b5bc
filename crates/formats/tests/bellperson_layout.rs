//! bellperson's parameter, verifying-key and proof layouts with keys cuzk makes: round trips
//! in every check mode, the density mapping, and each corruption's error.

use std::path::PathBuf;

use cuzk_field::{Fr, G1Affine};
use cuzk_formats::bellperson::{proof_from_bytes, proof_to_bytes};
use cuzk_formats::{BpParameters, BpVerifyingKey, Digest, FormatError, PointChecks, to_hex};
use cuzk_groth16::testing::demo;
use cuzk_groth16::{
    ProvingKey, R1cs, R1csBuilder, Witness, create_proof, generate_parameters,
    prepare_verifying_key, verify_proof,
};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cuzk-formats-bp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// A circuit with a private variable that is absent from A and one absent from B, so the
/// filtered queries really are shorter than cuzk's.
fn sparse_circuit() -> (R1cs, Witness) {
    let mut b = R1csBuilder::new();
    let x = b.alloc_private(Fr::from_u64(3));
    let y = b.alloc_private(Fr::from_u64(5));
    let out = b.alloc_public(Fr::from_u64(15 * 5));
    let xy = b.alloc_private(Fr::from_u64(15));
    // x * y = xy: x only in A, y only in B.
    b.enforce(&[(x, Fr::ONE)], &[(y, Fr::ONE)], &[(xy, Fr::ONE)]);
    // xy * y = out: xy in A, y in B again.
    b.enforce(&[(xy, Fr::ONE)], &[(y, Fr::ONE)], &[(out, Fr::ONE)]);
    b.build().unwrap()
}

fn keys(r1cs: &R1cs, seed: u64) -> ProvingKey {
    generate_parameters(r1cs, &mut ChaCha8Rng::seed_from_u64(seed)).unwrap()
}

#[test]
fn parameters_round_trip_in_every_check_mode_and_map_back_to_cuzk() {
    let (r1cs, w) = demo::circuit(8, 2, &mut ChaCha8Rng::seed_from_u64(1)).unwrap();
    let pk = keys(&r1cs, 2);
    let bp = BpParameters::from_proving_key(&pk).unwrap();
    assert!(bp.a.len() <= pk.a_query().len());
    let path = tmp("params");
    bp.write_file(&path).unwrap();
    let bytes = std::fs::read(&path).unwrap();

    let full = BpParameters::read(&path, &PointChecks::Full).unwrap();
    assert_eq!(full, bp);
    let sha = sha2_hex(&bytes);
    let trusted = PointChecks::TrustedDigest(Digest::parse(&format!("sha256:{sha}")).unwrap());
    assert_eq!(BpParameters::read(&path, &trusted).unwrap(), bp);
    let blake = Digest::Blake2b(vec![]);
    let b2 = to_hex(&blake.compute_like(&bytes)[..16]);
    let trusted_b2 = PointChecks::TrustedDigest(Digest::parse(&format!("blake2b:{b2}")).unwrap());
    assert_eq!(BpParameters::read(&path, &trusted_b2).unwrap(), bp);
    let b3 = to_hex(&Digest::Blake3([0; 32]).compute_like(&bytes));
    let trusted_b3 = PointChecks::TrustedDigest(Digest::parse(&format!("blake3:{b3}")).unwrap());
    assert_eq!(BpParameters::read(&path, &trusted_b3).unwrap(), bp);
    let wrong_b3 = PointChecks::TrustedDigest(Digest::Blake3([1; 32]));
    assert!(matches!(
        BpParameters::read(&path, &wrong_b3),
        Err(FormatError::DigestMismatch {
            algorithm: "BLAKE3",
            ..
        })
    ));
    assert!(Digest::parse(&format!("blake3:{}", &b3[..62])).is_err());
    assert_eq!(
        BpParameters::from_bytes("mem", &bytes, &PointChecks::Full).unwrap(),
        bp
    );

    // Back to cuzk's one-entry-per-variable key: identical to the original.
    let back = full.into_proving_key(&r1cs, "params").unwrap();
    assert_eq!(back, pk);
    let proof = create_proof(&back, &r1cs, &w, &mut ChaCha8Rng::seed_from_u64(3)).unwrap();
    let pvk = prepare_verifying_key(&bp.vk.to_cuzk());
    verify_proof(&pvk, &proof, w.public_inputs()).unwrap();

    // The proof's 192 bytes and the verifying key round trip.
    let pb = proof_to_bytes(&proof);
    assert_eq!(proof_from_bytes("proof", &pb).unwrap(), proof);
    let vkb = bp.vk.to_bytes();
    assert_eq!(BpVerifyingKey::from_bytes("vk", &vkb).unwrap(), bp.vk);
}

#[test]
fn filtered_queries_scatter_by_density() {
    let (r1cs, w) = sparse_circuit();
    let pk = keys(&r1cs, 5);
    let bp = BpParameters::from_proving_key(&pk).unwrap();
    // Variables: one, out, x, y, xy. A holds one, out (instance rows), x, xy; B holds y.
    assert_eq!(bp.a.len(), 4);
    assert_eq!(bp.b_g1.len(), 1);
    assert_eq!(bp.b_g2.len(), 1);
    let back = bp.clone().into_proving_key(&r1cs, "sparse").unwrap();
    assert_eq!(back, pk);
    assert!(back.a_query()[3].is_identity() && back.b_g1_query()[2].is_identity());
    let proof = create_proof(&back, &r1cs, &w, &mut ChaCha8Rng::seed_from_u64(6)).unwrap();
    verify_proof(&prepare_verifying_key(&back.vk), &proof, w.public_inputs()).unwrap();

    // The key of another circuit: named mismatch.
    let (other, _) = demo::circuit(6, 1, &mut ChaCha8Rng::seed_from_u64(7)).unwrap();
    let err = bp.into_proving_key(&other, "sparse.params").unwrap_err();
    assert!(matches!(err, FormatError::Mismatch { .. }), "{err}");
    assert!(err.to_string().contains("sparse.params"), "{err}");
}

fn sha2_hex(b: &[u8]) -> String {
    to_hex(&Digest::Sha256([0; 32]).compute_like(b))
}

#[test]
fn corrupt_parameters_get_named_errors() {
    let (r1cs, _) = demo::circuit(6, 1, &mut ChaCha8Rng::seed_from_u64(11)).unwrap();
    let bp = BpParameters::from_proving_key(&keys(&r1cs, 12)).unwrap();
    let mut bytes = Vec::new();
    bp.write(&mut bytes).unwrap();
    let path = tmp("corrupt");
    let read = |b: &[u8], checks: &PointChecks| {
        std::fs::write(&path, b).unwrap();
        BpParameters::read(&path, checks).unwrap_err()
    };
    let full = PointChecks::Full;

    // Truncated inside b_g2.
    let e = read(&bytes[..bytes.len() - 10], &full);
    assert!(
        matches!(&e, FormatError::Truncated { field, .. } if field == "b_g2"),
        "{e}"
    );
    assert!(e.to_string().contains("corrupt"), "names the file: {e}");
    // Truncated inside the verifying key.
    let e = read(&bytes[..100], &full);
    assert!(
        matches!(&e, FormatError::Truncated { field, .. } if field == "vk.beta_g1"),
        "{e}"
    );
    // Trailing garbage.
    let mut long = bytes.clone();
    long.extend_from_slice(&[0; 7]);
    assert!(matches!(
        read(&long, &full),
        FormatError::TrailingBytes { .. }
    ));
    // A corrupt length in h: refused before allocating, as a truncation of h.
    let vk_len = bp.vk.to_bytes().len();
    let mut huge = bytes.clone();
    huge[vk_len..vk_len + 4].copy_from_slice(&u32::MAX.to_be_bytes());
    let e = read(&huge, &full);
    assert!(
        matches!(&e, FormatError::Truncated { field, .. } if field == "h"),
        "{e}"
    );
    // A point off the curve in l[1]: l starts after h's length and points.
    let l_start = vk_len + 4 + bp.h.len() * 96 + 4;
    let mut bad = bytes.clone();
    bad[l_start + 96 + 60] ^= 1;
    let e = read(&bad, &full);
    assert!(
        matches!(&e, FormatError::BadPoint { field, index: 1, .. } if field == "l"),
        "{e}"
    );
    std::fs::write(&path, &bad).unwrap();
    let e = BpParameters::read_blocks(&path, &full, Some(333)).unwrap_err();
    assert!(
        matches!(&e, FormatError::BadPoint { field, index: 1, .. } if field == "l"),
        "small blocks: {e}"
    );
    // The identity in a (bellperson never writes it).
    let a_start = l_start + bp.l.len() * 96 + 4;
    let mut ident = bytes.clone();
    ident[a_start..a_start + 96].copy_from_slice(&G1Affine::identity().to_uncompressed());
    let e = read(&ident, &full);
    assert!(
        matches!(&e, FormatError::IdentityPoint { field, index: 0, .. } if field == "a"),
        "{e}"
    );
    // A point on the curve but outside the subgroup: caught by full checks only, and a wrong
    // digest is caught in trusted mode.
    let mut torsion = bytes.clone();
    torsion[a_start..a_start + 96].copy_from_slice(&non_subgroup_point().to_uncompressed());
    let e = read(&torsion, &full);
    assert!(
        matches!(&e, FormatError::BadPoint { field, source: cuzk_field::DecodeError::NotInSubgroup, .. } if field == "a"),
        "{e}"
    );
    // On-curve checks load it (no subgroup check) and still refuse a point off the curve.
    let on_curve = PointChecks::OnCurve;
    std::fs::write(&path, &torsion).unwrap();
    let loaded = BpParameters::read(&path, &on_curve).unwrap();
    assert!(!loaded.a[0].is_torsion_free());
    let e = read(&bad, &on_curve);
    assert!(
        matches!(&e, FormatError::BadPoint { field, index: 1, .. } if field == "l"),
        "{e}"
    );
    let digest = PointChecks::TrustedDigest(Digest::Sha256([7; 32]));
    let e = read(&bytes, &digest);
    assert!(matches!(e, FormatError::DigestMismatch { .. }), "{e}");
    let right = PointChecks::TrustedDigest(
        Digest::parse(&format!("sha256:{}", sha2_hex(&torsion))).unwrap(),
    );
    std::fs::write(&path, &torsion).unwrap();
    let trusted = BpParameters::read(&path, &right).unwrap();
    assert!(
        !trusted.a[0].is_torsion_free(),
        "trusted mode skips subgroup checks by design"
    );

    // Proof bytes: wrong length and a bad point.
    let e = proof_from_bytes("p", &[0; 191]).unwrap_err();
    assert!(matches!(e, FormatError::Invalid { .. }), "{e}");
    let e = proof_from_bytes("p", &[0xff; 192]).unwrap_err();
    assert!(
        matches!(&e, FormatError::BadPoint { field, .. } if field == "proof.a"),
        "{e}"
    );
}

/// A point of E(Fp) outside G1: the first x with a square y³ + 4 whose point has a cofactor
/// component.
fn non_subgroup_point() -> G1Affine {
    use cuzk_field::Fp;
    let mut x = Fp::from_u64(1);
    loop {
        let rhs = x.square() * x + Fp::from_u64(4);
        if let Some(y) = sqrt(rhs) {
            let p = G1Affine::from_xy_unchecked(x, y);
            if p.is_on_curve() && !p.is_torsion_free() {
                return p;
            }
        }
        x += Fp::ONE;
    }
}

/// √a in Fp (p ≡ 3 mod 4: a^((p+1)/4)).
fn sqrt(a: cuzk_field::Fp) -> Option<cuzk_field::Fp> {
    let mut e = cuzk_field::Fp::MODULUS;
    // (p + 1) / 4 = (p >> 2) + 1, since p ≡ 3 (mod 4).
    for i in 0..6 {
        e[i] = (e[i] >> 2) | if i < 5 { e[i + 1] << 62 } else { 0 };
    }
    e[0] += 1;
    let r = a.pow(&e);
    (r.square() == a).then_some(r)
}
