//! File format: round trips, and a typed error for every kind of damage.

use cuzk_field::{DecodeError, Fp, Fr, G1Affine, G2Affine};
use cuzk_groth16::io::{self, FileKind, FormatError, PointChecks};
use cuzk_groth16::testing::demo;
use cuzk_groth16::{ProvingKey, R1cs, Witness, create_proof, generate_parameters};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

struct Fixture {
    r1cs: R1cs,
    witness: Witness,
    pk: ProvingKey,
}

fn fixture() -> Fixture {
    let mut rng = ChaCha20Rng::seed_from_u64(7);
    let (r1cs, witness) = demo::circuit(6, 2, &mut rng).unwrap();
    let pk = generate_parameters(&r1cs, &mut rng).unwrap();
    Fixture { r1cs, witness, pk }
}

fn pk_bytes(pk: &ProvingKey) -> Vec<u8> {
    let mut out = Vec::new();
    io::write_proving_key(&mut out, pk).unwrap();
    out
}

#[test]
fn everything_round_trips() {
    let f = fixture();
    let bytes = pk_bytes(&f.pk);
    assert_eq!(&bytes[..4], b"CUZK");
    assert_eq!(bytes[4], FileKind::ProvingKey as u8);
    assert_eq!(io::read_proving_key(&bytes[..]).unwrap(), f.pk);

    let mut buf = Vec::new();
    io::write_verifying_key(&mut buf, &f.pk.vk).unwrap();
    assert_eq!(io::read_verifying_key(&buf[..]).unwrap(), f.pk.vk);

    let mut rng = ChaCha20Rng::seed_from_u64(8);
    let proof = create_proof(&f.pk, &f.r1cs, &f.witness, &mut rng).unwrap();
    let mut buf = Vec::new();
    io::write_proof(&mut buf, &proof).unwrap();
    assert_eq!(
        buf.len(),
        4 + 1 + 4 + 192 + 32,
        "proof points are compressed"
    );
    assert_eq!(io::read_proof(&buf[..]).unwrap(), proof);

    let mut buf = Vec::new();
    io::write_r1cs(&mut buf, &f.r1cs).unwrap();
    assert_eq!(io::read_r1cs(&buf[..]).unwrap(), f.r1cs);

    let mut buf = Vec::new();
    io::write_witness(&mut buf, &f.witness).unwrap();
    assert_eq!(io::read_witness(&buf[..]).unwrap(), f.witness);
}

#[test]
fn truncation_at_any_point_is_reported() {
    let f = fixture();
    let bytes = pk_bytes(&f.pk);
    // Header, sizes, inside a point, inside a query, just before and inside the checksum.
    for cut in [
        0,
        3,
        7,
        20,
        40,
        500,
        bytes.len() / 2,
        bytes.len() - 33,
        bytes.len() - 1,
    ] {
        assert!(
            matches!(
                io::read_proving_key(&bytes[..cut]),
                Err(FormatError::Truncated)
            ),
            "cut at {cut}"
        );
    }
    let mut buf = Vec::new();
    io::write_witness(&mut buf, &f.witness).unwrap();
    assert!(matches!(
        io::read_witness(&buf[..buf.len() - 5]),
        Err(FormatError::Truncated)
    ));
}

#[test]
fn bad_magic_kind_and_version_are_reported() {
    let f = fixture();
    let bytes = pk_bytes(&f.pk);
    let mut bad = bytes.clone();
    bad[0] = b'X';
    assert!(
        matches!(io::read_proving_key(&bad[..]), Err(FormatError::BadMagic(m)) if &m == b"XUZK")
    );
    assert!(matches!(
        io::read_verifying_key(&bytes[..]),
        Err(FormatError::WrongKind {
            expected: FileKind::VerifyingKey,
            found: 1
        })
    ));
    // Version 1 (a SHA-256 checksum) and a future version are both refused by name.
    for v in [1, io::FORMAT_VERSION + 1] {
        let mut bad = bytes.clone();
        bad[5..9].copy_from_slice(&v.to_le_bytes());
        let got = io::read_proving_key(&bad[..]);
        assert!(
            matches!(got, Err(FormatError::UnsupportedVersion { found, supported })
                if found == v && supported == io::FORMAT_VERSION),
            "{got:?}"
        );
    }
}

#[test]
fn corruption_fails_the_checksum() {
    let f = fixture();
    let bytes = pk_bytes(&f.pk);
    let mut bad = bytes.clone();
    *bad.last_mut().unwrap() ^= 1;
    assert!(matches!(
        io::read_proving_key(&bad[..]),
        Err(FormatError::ChecksumMismatch)
    ));

    // A flipped low bit of a witness value still decodes: only the checksum catches it.
    let mut buf = Vec::new();
    io::write_witness(&mut buf, &f.witness).unwrap();
    let value_start = 9 + 16 + 32 * 3;
    buf[value_start] ^= 1;
    assert!(matches!(
        io::read_witness(&buf[..]),
        Err(FormatError::ChecksumMismatch)
    ));

    // A flipped bit in a proof.
    let mut rng = ChaCha20Rng::seed_from_u64(9);
    let proof = create_proof(&f.pk, &f.r1cs, &f.witness, &mut rng).unwrap();
    let mut buf = Vec::new();
    io::write_proof(&mut buf, &proof).unwrap();
    buf[9 + 100] ^= 4;
    assert!(matches!(
        io::read_proof(&buf[..]),
        Err(FormatError::ChecksumMismatch)
    ));

    // A size field that promises more data than there is: truncated, no huge allocation.
    let mut bad = bytes.clone();
    bad[9..17].copy_from_slice(&(1u64 << 31).to_le_bytes());
    assert!(matches!(
        io::read_proving_key(&bad[..]),
        Err(FormatError::Truncated)
    ));
    bad[9..17].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(matches!(
        io::read_proving_key(&bad[..]),
        Err(FormatError::Inconsistent(_))
    ));
}

#[test]
fn off_curve_and_out_of_subgroup_points_are_rejected() {
    let f = fixture();
    let p = f.pk.a_query[3];
    assert!(!p.is_identity());

    let mut pk = f.pk.clone();
    pk.a_query[3] = G1Affine::from_xy_unchecked(p.x(), p.y() + Fp::ONE);
    let err = io::read_proving_key(&pk_bytes(&pk)[..]).unwrap_err();
    assert!(
        matches!(
            err,
            FormatError::InvalidPoint {
                section: "a_query",
                index: 3,
                error: DecodeError::NotOnCurve
            }
        ),
        "{err:?}"
    );

    // (0, 2) is on y^2 = x^3 + 4 but not in the prime-order subgroup.
    let mut pk = f.pk.clone();
    let last = pk.h_query.len() - 1;
    pk.h_query[last] = G1Affine::from_xy_unchecked(Fp::ZERO, Fp::from_u64(2));
    let bytes = pk_bytes(&pk);
    let err = io::read_proving_key(&bytes[..]).unwrap_err();
    assert!(
        matches!(
            err,
            FormatError::InvalidPoint { section: "h_query", index, error: DecodeError::NotInSubgroup }
                if index == last
        ),
        "{err:?}"
    );
    // Skipping subgroup checks loads it (for trusted keys), but still rejects off-curve points.
    assert_eq!(
        io::read_proving_key_with(&bytes[..], PointChecks::OnCurve).unwrap(),
        pk
    );
    let mut off = pk.clone();
    off.a_query[3] = G1Affine::from_xy_unchecked(p.x(), p.y() + Fp::ONE);
    assert!(matches!(
        io::read_proving_key_with(&pk_bytes(&off)[..], PointChecks::OnCurve),
        Err(FormatError::InvalidPoint {
            section: "a_query",
            index: 3,
            error: DecodeError::NotOnCurve
        })
    ));

    // G2: an off-curve b_g2 point and an off-curve δ in the verifying key.
    let q = f.pk.b_g2_query[3];
    let mut pk = f.pk.clone();
    pk.b_g2_query[3] = G2Affine::from_xy_unchecked(q.x(), q.y() + cuzk_field::Fp2::ONE);
    assert!(matches!(
        io::read_proving_key(&pk_bytes(&pk)[..]),
        Err(FormatError::InvalidPoint {
            section: "b_g2_query",
            index: 3,
            error: DecodeError::NotOnCurve
        })
    ));
    let mut vk = f.pk.vk.clone();
    vk.delta_g2 = pk.b_g2_query[3];
    let mut buf = Vec::new();
    io::write_verifying_key(&mut buf, &vk).unwrap();
    assert!(matches!(
        io::read_verifying_key(&buf[..]),
        Err(FormatError::InvalidPoint {
            section: "delta_g2",
            ..
        })
    ));
}

/// A file of `kind` with this body and a valid checksum, as a forger would make it.
fn seal(kind: FileKind, body: &[u8]) -> Vec<u8> {
    let mut out = b"CUZK".to_vec();
    out.push(kind as u8);
    out.extend_from_slice(&io::FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(body);
    let digest = blake3::hash(&out);
    out.extend_from_slice(digest.as_bytes());
    out
}

#[test]
fn well_sealed_but_malformed_contents_are_inconsistent() {
    // A witness whose entry 0 is not the constant one.
    let mut body = Vec::new();
    body.extend_from_slice(&0u64.to_le_bytes()); // num_public
    body.extend_from_slice(&2u64.to_le_bytes()); // length
    body.extend_from_slice(&Fr::from_u64(2).to_bytes_le());
    body.extend_from_slice(&Fr::from_u64(5).to_bytes_le());
    assert!(matches!(
        io::read_witness(&seal(FileKind::Witness, &body)[..]),
        Err(FormatError::Inconsistent(_))
    ));
    // A non-canonical witness value.
    let mut body = Vec::new();
    body.extend_from_slice(&0u64.to_le_bytes());
    body.extend_from_slice(&1u64.to_le_bytes());
    body.extend_from_slice(&[0xff; 32]);
    assert!(matches!(
        io::read_witness(&seal(FileKind::Witness, &body)[..]),
        Err(FormatError::InvalidScalar { index: 0, .. })
    ));

    // An R1CS of one row `x_1 · x_1 = 0` with no instance rows: refused, the public input
    // would not be bound.
    let mut body = Vec::new();
    for v in [0u64, 2, 1, 1, 1, 0] {
        body.extend_from_slice(&v.to_le_bytes()); // num_public, vars, rows, nnz A, B, C
    }
    for nnz in [1u64, 1, 0] {
        body.extend_from_slice(&0u64.to_le_bytes());
        body.extend_from_slice(&nnz.to_le_bytes());
        if nnz == 1 {
            body.extend_from_slice(&1u32.to_le_bytes());
            body.extend_from_slice(&Fr::ONE.to_bytes_le());
        }
    }
    let err = io::read_r1cs(&seal(FileKind::R1cs, &body)[..]).unwrap_err();
    assert!(
        matches!(err, FormatError::Inconsistent(ref m) if m.contains("instance row")),
        "{err:?}"
    );

    // A proving key whose sizes contradict each other (more public inputs than variables).
    let mut body = Vec::new();
    for v in [2u64, 5, 8] {
        body.extend_from_slice(&v.to_le_bytes());
    }
    assert!(matches!(
        io::read_proving_key(&seal(FileKind::ProvingKey, &body)[..]),
        Err(FormatError::Inconsistent(_))
    ));
}
