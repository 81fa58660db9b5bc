//! cuzk's own file format: round trips, the bytes it has always written, each point-check mode,
//! and a typed error naming the file and the field for every kind of damage.

use cuzk_field::{DecodeError, Fp, Fr, G1Affine, G2Affine};
use cuzk_formats::cuzk::{self, FileKind};
use cuzk_formats::{Digest, FormatError, PointChecks};
use cuzk_groth16::testing::demo;
use cuzk_groth16::{ProvingKey, R1cs, Witness, create_proof, generate_parameters};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

const FULL: &PointChecks = &PointChecks::Full;

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
    cuzk::write_proving_key(&mut out, pk).unwrap();
    out
}

fn read_pk(bytes: &[u8]) -> Result<ProvingKey, FormatError> {
    cuzk::read_proving_key("k.pk", bytes, FULL)
}

#[test]
fn everything_round_trips() {
    let f = fixture();
    let bytes = pk_bytes(&f.pk);
    assert_eq!(&bytes[..4], b"CUZK");
    assert_eq!(bytes[4], FileKind::ProvingKey as u8);
    assert_eq!(read_pk(&bytes).unwrap(), f.pk);

    let mut buf = Vec::new();
    cuzk::write_verifying_key(&mut buf, &f.pk.vk).unwrap();
    assert_eq!(cuzk::read_verifying_key("k.vk", &buf[..]).unwrap(), f.pk.vk);

    let mut rng = ChaCha20Rng::seed_from_u64(8);
    let proof = create_proof(&f.pk, &f.r1cs, &f.witness, &mut rng).unwrap();
    let mut buf = Vec::new();
    cuzk::write_proof(&mut buf, &proof).unwrap();
    assert_eq!(
        buf.len(),
        4 + 1 + 4 + 192 + 32,
        "proof points are compressed"
    );
    assert_eq!(cuzk::read_proof("p", &buf[..]).unwrap(), proof);

    let mut buf = Vec::new();
    cuzk::write_r1cs(&mut buf, &f.r1cs).unwrap();
    assert_eq!(cuzk::read_r1cs("c.r1cs", &buf[..]).unwrap(), f.r1cs);

    let mut buf = Vec::new();
    cuzk::write_witness(&mut buf, &f.witness).unwrap();
    assert_eq!(cuzk::read_witness("w.wit", &buf[..]).unwrap(), f.witness);
}

/// Format version 2's bytes, pinned: the BLAKE3 of each file of the fixture. A change here
/// breaks every file already written.
#[test]
fn the_bytes_written_are_those_of_format_version_2() {
    let f = fixture();
    let mut rng = ChaCha20Rng::seed_from_u64(8);
    let proof = create_proof(&f.pk, &f.r1cs, &f.witness, &mut rng).unwrap();
    let hash = |write: &dyn Fn(&mut Vec<u8>) -> std::io::Result<()>| {
        let mut buf = Vec::new();
        write(&mut buf).unwrap();
        cuzk_formats::to_hex(blake3::hash(&buf).as_bytes())
    };
    let got = [
        hash(&|b| cuzk::write_proving_key(b, &f.pk)),
        hash(&|b| cuzk::write_verifying_key(b, &f.pk.vk)),
        hash(&|b| cuzk::write_proof(b, &proof)),
        hash(&|b| cuzk::write_r1cs(b, &f.r1cs)),
        hash(&|b| cuzk::write_witness(b, &f.witness)),
    ];
    assert_eq!(cuzk::FORMAT_VERSION, 2);
    assert_eq!(got, GOLDEN);
}

/// Proving key, verifying key, proof, R1CS, witness.
const GOLDEN: [&str; 5] = [
    "7f40f550928961e595e57160fe5d9d20121e568bc6ea82fd9e005099dd63fa91",
    "88fb562e1f32edbc97d67883b72b4f3fa35bf7726b517094ba10c0443b718f0a",
    "09d198df2f2bb6252169a31f39368f46cc8d9d1db1a070eafea260be2bf761c5",
    "a4f82d01e3e35a6a82b76ff52116740a26f36a3ab913871d2ab6448864ffeb62",
    "acbae8f97d144ae11b4f0f8d0d1f779ca17420acca39a894bd6b7aaff4fdf0b2",
];

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
        let err = read_pk(&bytes[..cut]).unwrap_err();
        let FormatError::Truncated {
            ref file,
            ref field,
            offset,
            needed,
            available,
        } = err
        else {
            panic!("cut at {cut}: {err:?}");
        };
        assert_eq!(file, "k.pk");
        assert!(
            offset <= cut && offset + available == cut && needed > available,
            "{err}"
        );
        let want = match cut {
            0 | 3 => Some("magic"),
            7 => Some("version"),
            20 => Some("num_public"),
            // 33 bytes of header and sizes, α (96), β (192), then γ.
            500 => Some("gamma_g2"),
            c if c == bytes.len() - 33 => Some("l_query"),
            c if c == bytes.len() - 1 => Some("checksum"),
            _ => None,
        };
        if let Some(want) = want {
            assert_eq!(field, want, "cut at {cut}: {err}");
        }
    }
    let mut buf = Vec::new();
    cuzk::write_witness(&mut buf, &f.witness).unwrap();
    assert!(matches!(
        cuzk::read_witness("w.wit", &buf[..buf.len() - 5]),
        Err(FormatError::Truncated { .. })
    ));
}

#[test]
fn bad_magic_kind_and_version_are_reported() {
    let f = fixture();
    let bytes = pk_bytes(&f.pk);
    let mut bad = bytes.clone();
    bad[0] = b'X';
    let err = read_pk(&bad).unwrap_err();
    assert!(
        matches!(&err, FormatError::WrongMagic { found, expected: "cuzk", .. } if found == "XUZK"),
        "{err:?}"
    );
    let err = cuzk::read_verifying_key("k.pk", &bytes[..]).unwrap_err();
    assert!(
        matches!(
            err,
            FormatError::WrongKind {
                expected: FileKind::VerifyingKey,
                found: 1,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "k.pk: holds a cuzk proving key, expected a cuzk verifying key"
    );
    // Version 1 (a SHA-256 checksum) and a future version are both refused by name.
    for v in [1, cuzk::FORMAT_VERSION + 1] {
        let mut bad = bytes.clone();
        bad[5..9].copy_from_slice(&v.to_le_bytes());
        let got = read_pk(&bad);
        assert!(
            matches!(got, Err(FormatError::UnsupportedVersion { found, max, kind: "cuzk", .. })
                if found == v && max == cuzk::FORMAT_VERSION),
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
        read_pk(&bad),
        Err(FormatError::ChecksumMismatch { file }) if file == "k.pk"
    ));

    // A flipped low bit of a witness value still decodes: only the checksum catches it.
    let mut buf = Vec::new();
    cuzk::write_witness(&mut buf, &f.witness).unwrap();
    let value_start = 9 + 16 + 32 * 3;
    buf[value_start] ^= 1;
    assert!(matches!(
        cuzk::read_witness("w.wit", &buf[..]),
        Err(FormatError::ChecksumMismatch { .. })
    ));

    // A flipped bit in a proof.
    let mut rng = ChaCha20Rng::seed_from_u64(9);
    let proof = create_proof(&f.pk, &f.r1cs, &f.witness, &mut rng).unwrap();
    let mut buf = Vec::new();
    cuzk::write_proof(&mut buf, &proof).unwrap();
    buf[9 + 100] ^= 4;
    assert!(matches!(
        cuzk::read_proof("p", &buf[..]),
        Err(FormatError::ChecksumMismatch { .. })
    ));

    // A size field that promises more data than there is: truncated, no huge allocation.
    let mut bad = bytes.clone();
    bad[9..17].copy_from_slice(&(1u64 << 31).to_le_bytes());
    let err = read_pk(&bad).unwrap_err();
    assert!(
        matches!(&err, FormatError::Truncated { field, .. } if field == "a_query"),
        "{err:?}"
    );
    bad[9..17].copy_from_slice(&u64::MAX.to_le_bytes());
    let err = read_pk(&bad).unwrap_err();
    assert!(
        matches!(&err, FormatError::Invalid { field, .. } if field == "num_variables"),
        "{err:?}"
    );
}

#[test]
fn off_curve_and_out_of_subgroup_points_are_rejected() {
    let f = fixture();
    let p = f.pk.a_query()[3];
    assert!(!p.is_identity());

    let mut pk = f.pk.clone();
    pk.queries_mut().a_query[3] = G1Affine::from_xy_unchecked(p.x(), p.y() + Fp::ONE);
    let err = read_pk(&pk_bytes(&pk)).unwrap_err();
    assert!(
        matches!(
            &err,
            FormatError::BadPoint {
                field,
                index: 3,
                source: DecodeError::NotOnCurve,
                ..
            } if field == "a_query"
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "k.pk: a_query[3]: point is not on the curve"
    );

    // (0, 2) is on y^2 = x^3 + 4 but not in the prime-order subgroup.
    let mut pk = f.pk.clone();
    let last = pk.h_query().len() - 1;
    pk.queries_mut().h_query[last] = G1Affine::from_xy_unchecked(Fp::ZERO, Fp::from_u64(2));
    let bytes = pk_bytes(&pk);
    let err = read_pk(&bytes).unwrap_err();
    assert!(
        matches!(
            &err,
            FormatError::BadPoint { field, index, source: DecodeError::NotInSubgroup, .. }
                if field == "h_query" && *index == last
        ),
        "{err:?}"
    );
    // Skipping subgroup checks loads it (for trusted keys), but still rejects off-curve points.
    let on_curve = &PointChecks::OnCurve;
    assert_eq!(
        cuzk::read_proving_key("k.pk", &bytes[..], on_curve).unwrap(),
        pk
    );
    let mut off = pk.clone();
    off.queries_mut().a_query[3] = G1Affine::from_xy_unchecked(p.x(), p.y() + Fp::ONE);
    let err = cuzk::read_proving_key("k.pk", &pk_bytes(&off)[..], on_curve).unwrap_err();
    assert!(
        matches!(
            &err,
            FormatError::BadPoint {
                field,
                index: 3,
                source: DecodeError::NotOnCurve,
                ..
            } if field == "a_query"
        ),
        "{err:?}"
    );

    // G2: an off-curve b_g2 point and an off-curve δ in the verifying key.
    let q = f.pk.b_g2_query()[3];
    let mut pk = f.pk.clone();
    pk.queries_mut().b_g2_query[3] =
        G2Affine::from_xy_unchecked(q.x(), q.y() + cuzk_field::Fp2::ONE);
    let err = read_pk(&pk_bytes(&pk)).unwrap_err();
    assert!(
        matches!(
            &err,
            FormatError::BadPoint {
                field,
                index: 3,
                source: DecodeError::NotOnCurve,
                ..
            } if field == "b_g2_query"
        ),
        "{err:?}"
    );
    let mut vk = f.pk.vk.clone();
    vk.delta_g2 = pk.b_g2_query()[3];
    let mut buf = Vec::new();
    cuzk::write_verifying_key(&mut buf, &vk).unwrap();
    let err = cuzk::read_verifying_key("k.vk", &buf[..]).unwrap_err();
    assert!(
        matches!(&err, FormatError::BadPoint { field, .. } if field == "delta_g2"),
        "{err:?}"
    );
    // The verifying-key part of a proving key is fully checked whatever the caller asks.
    let mut pk = f.pk.clone();
    pk.vk.ic[1] = G1Affine::from_xy_unchecked(Fp::ZERO, Fp::from_u64(2));
    let err = cuzk::read_proving_key("k.pk", &pk_bytes(&pk)[..], on_curve).unwrap_err();
    assert!(
        matches!(&err, FormatError::BadPoint { field, index: 1, source: DecodeError::NotInSubgroup, .. } if field == "ic"),
        "{err:?}"
    );
}

/// A key whose whole file hashes to a trusted digest: the digest, not the curve or subgroup
/// checks, vouches for its points (coordinates are still checked canonical).
#[test]
fn a_trusted_digest_replaces_the_point_checks() {
    let f = fixture();
    let p = f.pk.a_query()[3];
    let mut pk = f.pk.clone();
    pk.queries_mut().a_query[3] = G1Affine::from_xy_unchecked(p.x(), p.y() + Fp::ONE);
    let bytes = pk_bytes(&pk);
    for digest in [
        Digest::Blake3(*blake3::hash(&bytes).as_bytes()),
        Digest::Sha256(
            Digest::Sha256([0; 32])
                .compute_like(&bytes)
                .try_into()
                .unwrap(),
        ),
    ] {
        let trusted = PointChecks::TrustedDigest(digest);
        assert_eq!(
            cuzk::read_proving_key("k.pk", &bytes[..], &trusted).unwrap(),
            pk
        );
    }
    // Another file: the digest mismatch, named (the file's own checksum is fine).
    let other = pk_bytes(&f.pk);
    let trusted = PointChecks::TrustedDigest(Digest::Blake3(*blake3::hash(&bytes).as_bytes()));
    let err = cuzk::read_proving_key("k.pk", &other[..], &trusted).unwrap_err();
    assert!(
        matches!(
            &err,
            FormatError::DigestMismatch {
                algorithm: "BLAKE3",
                ..
            }
        ),
        "{err:?}"
    );
    // A non-canonical coordinate is still refused.
    let mut bad = pk_bytes(&f.pk);
    let a3 = 9 + 24 + 96 + 3 * 192 + f.pk.vk.ic.len() * 96 + 2 * 96 + 3 * 96;
    bad[a3] = 0x1f;
    bad[a3 + 1..a3 + 48].fill(0xff);
    let trusted = PointChecks::TrustedDigest(Digest::Blake3(*blake3::hash(&bad).as_bytes()));
    let err = cuzk::read_proving_key("k.pk", &bad[..], &trusted).unwrap_err();
    assert!(
        matches!(&err, FormatError::BadPoint { field, index: 3, source: DecodeError::BadEncoding, .. } if field == "a_query"),
        "{err:?}"
    );
}

/// Arrays longer than one read chunk (8 MiB): a bad point in a later chunk is named by its
/// index in the whole array, and the key reads back whole (on-curve checks: the subgroup
/// checks of 2^17 points would take seconds).
#[test]
fn points_past_the_first_read_chunk_are_indexed_in_the_whole_array() {
    let f = fixture();
    let mut pk = f.pk.clone();
    let g = f.pk.a_query()[3];
    // 2^17 − 1 h entries (12 MiB): two chunks. Their values do not matter to the reader.
    pk.queries_mut().h_query = vec![g; (1 << 17) - 1];
    let on_curve = &PointChecks::OnCurve;
    let bytes = pk_bytes(&pk);
    assert_eq!(
        cuzk::read_proving_key("k.pk", &bytes[..], on_curve).unwrap(),
        pk
    );
    let at = 100_000;
    pk.queries_mut().h_query[at] = G1Affine::from_xy_unchecked(g.x(), g.y() + Fp::ONE);
    let err = cuzk::read_proving_key("k.pk", &pk_bytes(&pk)[..], on_curve).unwrap_err();
    assert!(
        matches!(&err, FormatError::BadPoint { field, index, source: DecodeError::NotOnCurve, .. } if field == "h_query" && *index == at),
        "{err:?}"
    );
}

/// A file of `kind` with this body and a valid checksum, as a forger would make it.
fn seal(kind: FileKind, body: &[u8]) -> Vec<u8> {
    let mut out = b"CUZK".to_vec();
    out.push(kind as u8);
    out.extend_from_slice(&cuzk::FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(body);
    let digest = blake3::hash(&out);
    out.extend_from_slice(digest.as_bytes());
    out
}

#[test]
fn well_sealed_but_malformed_contents_are_refused() {
    // A witness whose entry 0 is not the constant one.
    let mut body = Vec::new();
    body.extend_from_slice(&0u64.to_le_bytes()); // num_public
    body.extend_from_slice(&2u64.to_le_bytes()); // length
    body.extend_from_slice(&Fr::from_u64(2).to_bytes_le());
    body.extend_from_slice(&Fr::from_u64(5).to_bytes_le());
    let err = cuzk::read_witness("w.wit", &seal(FileKind::Witness, &body)[..]).unwrap_err();
    assert!(
        matches!(&err, FormatError::Invalid { field, .. } if field == "witness"),
        "{err:?}"
    );
    // A non-canonical witness value.
    let mut body = Vec::new();
    body.extend_from_slice(&0u64.to_le_bytes());
    body.extend_from_slice(&1u64.to_le_bytes());
    body.extend_from_slice(&[0xff; 32]);
    let err = cuzk::read_witness("w.wit", &seal(FileKind::Witness, &body)[..]).unwrap_err();
    assert!(
        matches!(&err, FormatError::BadScalar { field, index: 0, .. } if field == "witness"),
        "{err:?}"
    );

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
    let err = cuzk::read_r1cs("c.r1cs", &seal(FileKind::R1cs, &body)[..]).unwrap_err();
    assert!(
        matches!(&err, FormatError::Circuit { source, .. } if source.to_string().contains("instance row")),
        "{err:?}"
    );

    // A proving key whose sizes contradict each other (more public inputs than variables).
    let mut body = Vec::new();
    for v in [2u64, 5, 8] {
        body.extend_from_slice(&v.to_le_bytes());
    }
    let err = read_pk(&seal(FileKind::ProvingKey, &body)).unwrap_err();
    assert!(
        matches!(&err, FormatError::Invalid { field, .. } if field == "num_public"),
        "{err:?}"
    );
}

#[test]
fn inconsistent_keys_are_not_written() {
    let f = fixture();
    let mut vk = f.pk.vk.clone();
    vk.ic.clear();
    let err = cuzk::write_verifying_key(Vec::new(), &vk).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput, "{err}");
    let mut pk = f.pk.clone();
    pk.queries_mut().l_query.pop();
    let err = cuzk::write_proving_key(Vec::new(), &pk).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput, "{err}");
}

/// Write and read times of a proving-key file (a benchmark, not a check):
/// `cargo test --release -p cuzk-formats --test cuzk -- --ignored --nocapture key_file_timings`,
/// sizes from `CUZK_TIMING_LOGS` (comma-separated log2 constraint counts, default "14,16").
#[test]
#[ignore = "benchmark: run explicitly with --ignored --nocapture"]
fn key_file_timings() {
    use std::time::Instant;
    let logs = std::env::var("CUZK_TIMING_LOGS").unwrap_or_else(|_| "14,16".into());
    for k in logs.split(',').filter_map(|s| s.trim().parse::<u32>().ok()) {
        let mut rng = ChaCha20Rng::seed_from_u64(k.into());
        let (r1cs, _) = demo::circuit(k, 4, &mut rng).unwrap();
        let pk = generate_parameters(&r1cs, &mut rng).unwrap();
        let mut bytes = Vec::new();
        let t = Instant::now();
        cuzk::write_proving_key(&mut bytes, &pk).unwrap();
        let t_write = t.elapsed();
        let read = |checks: &PointChecks| {
            let t = Instant::now();
            let loaded = cuzk::read_proving_key("k.pk", &bytes[..], checks).unwrap();
            let t = t.elapsed();
            assert!(loaded == pk);
            t.as_secs_f64() * 1e3
        };
        let (full, on_curve) = (read(FULL), read(&PointChecks::OnCurve));
        println!(
            "2^{k} key file: {:.1} MiB, write {:.1} ms, read {full:.1} ms (full checks) / {on_curve:.1} ms (on-curve only)",
            bytes.len() as f64 / (1 << 20) as f64,
            t_write.as_secs_f64() * 1e3,
        );
    }
}
