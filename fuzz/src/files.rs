//! The file parsers of `cuzk_formats`: cuzk's own format and the foreign ones.

use std::path::PathBuf;
use std::sync::OnceLock;

use cuzk_formats::{
    BpParameters, BpVerifyingKey, CircomR1cs, Digest, PointChecks, Wtns, Zkey, bellperson, cuzk,
    snarkjs,
};
use cuzk_groth16::R1cs;

use crate::Outcome;

const FILE: &str = "fuzz-input";

pub(crate) fn cuzk_r1cs(data: &[u8]) -> Outcome {
    cuzk::read_r1cs(FILE, data).into()
}

pub(crate) fn cuzk_pk(data: &[u8]) -> Outcome {
    let full = cuzk::read_proving_key(FILE, data, &PointChecks::Full);
    let on_curve = cuzk::read_proving_key(FILE, data, &PointChecks::OnCurve);
    // The weaker checks accept whatever the full ones accept.
    assert!(
        full.is_err() || on_curve.is_ok(),
        "a key the full checks accept is refused by the on-curve checks: {:?}",
        on_curve.err()
    );
    full.into()
}

pub(crate) fn cuzk_witness(data: &[u8]) -> Outcome {
    cuzk::read_witness(FILE, data).into()
}

pub(crate) fn cuzk_proof_vk(data: &[u8]) -> Outcome {
    // One kind byte tells them apart; both readers see every input.
    let proof = cuzk::read_proof(FILE, data);
    let vk = cuzk::read_verifying_key(FILE, data);
    if proof.is_ok() || vk.is_ok() {
        Outcome::Accepted
    } else {
        Outcome::Rejected
    }
}

/// The 2^3-row circuit whose density the bellperson queries are scattered by.
fn small_r1cs() -> &'static R1cs {
    static R: OnceLock<R1cs> = OnceLock::new();
    R.get_or_init(|| crate::fixture::circuit(3, 5).0)
}

/// A file of this thread for the streamed reader (it reads paths, not bytes; the replay
/// test runs harnesses on several threads at once).
fn scratch_file() -> PathBuf {
    thread_local! {
        static P: PathBuf = {
            let dir = if std::path::Path::new("/dev/shm").is_dir() {
                PathBuf::from("/dev/shm")
            } else {
                std::env::temp_dir()
            };
            let thread = format!("{:?}", std::thread::current().id());
            let thread: String = thread.chars().filter(char::is_ascii_digit).collect();
            dir.join(format!("cuzk-fuzz-{}-{thread}.params", std::process::id()))
        };
    }
    P.with(Clone::clone)
}

pub(crate) fn bellperson_params(data: &[u8]) -> Outcome {
    let full = BpParameters::from_bytes(FILE, data, &PointChecks::Full);
    // The streamed reader (blocks of 1000 bytes, so records straddle them) must agree with
    // the in-memory one on every input.
    let path = scratch_file();
    std::fs::write(&path, data).expect("write the scratch file");
    let streamed = BpParameters::read_blocks(&path, &PointChecks::Full, Some(1000));
    let _ = std::fs::remove_file(&path);
    match (&full, &streamed) {
        (Ok(a), Ok(b)) => assert!(a == b, "streamed and in-memory parameters differ"),
        (Err(_), Err(_)) => {}
        (a, b) => panic!(
            "in memory: {}, streamed: {}",
            a.as_ref().map_or_else(ToString::to_string, |_| "ok".into()),
            b.as_ref().map_or_else(ToString::to_string, |_| "ok".into())
        ),
    }
    // Trusted by its digest: only canonical coordinates are checked.
    let sha = Digest::Sha256(
        Digest::Sha256([0; 32])
            .compute_like(data)
            .try_into()
            .expect("32 bytes"),
    );
    let trusted = BpParameters::from_bytes(FILE, data, &PointChecks::TrustedDigest(sha));
    assert!(
        full.is_err() || trusted.is_ok(),
        "parameters the full checks accept are refused when trusted: {:?}",
        trusted.err()
    );
    if let Ok(p) = trusted {
        let _ = p.into_proving_key(small_r1cs(), FILE);
    }
    full.into()
}

pub(crate) fn bellperson_vk_proof(data: &[u8]) -> Outcome {
    let vk = BpVerifyingKey::from_bytes(FILE, data);
    let proof = bellperson::proof_from_bytes(FILE, data);
    if vk.is_ok() || proof.is_ok() {
        Outcome::Accepted
    } else {
        Outcome::Rejected
    }
}

pub(crate) fn iden3_r1cs(data: &[u8]) -> Outcome {
    CircomR1cs::from_bytes(FILE, data)
        .and_then(|r| r.to_r1cs(FILE))
        .into()
}

pub(crate) fn iden3_wtns(data: &[u8]) -> Outcome {
    Wtns::from_bytes(FILE, data)
        .and_then(|w| w.to_witness(1, FILE))
        .into()
}

pub(crate) fn zkey(data: &[u8]) -> Outcome {
    let full = Zkey::from_bytes(FILE, data, &PointChecks::Full);
    if let Ok(z) = &full {
        z.check_shape(FILE)
            .expect("a parsed zkey has a consistent shape");
        let _ = z.verifying_key();
    }
    full.into()
}

pub(crate) fn snarkjs_json(data: &[u8]) -> Outcome {
    let text = String::from_utf8_lossy(data);
    let proof = snarkjs::proof_from_json(FILE, &text);
    let public = snarkjs::public_from_json(FILE, &text);
    let vk = snarkjs::vk_from_json(FILE, &text);
    if proof.is_ok() || public.is_ok() || vk.is_ok() {
        Outcome::Accepted
    } else {
        Outcome::Rejected
    }
}
