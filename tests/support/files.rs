//! A demo circuit, its witness and keys as files, for the end-to-end tests of the daemon.

use std::path::Path;

use super::run::ok;

pub fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 temp path")
}

/// Writes `c.r1cs`, `c.wit`, `c.pk` and `c.vk` of a 2^`log` circuit into `dir`.
pub fn circuit_and_key(dir: &Path, log: u32) {
    let p = |n: &str| dir.join(n);
    let log = log.to_string();
    ok(&[
        "circuit",
        "--log-constraints",
        &log,
        "--r1cs",
        s(&p("c.r1cs")),
        "--witness",
        s(&p("c.wit")),
    ]);
    ok(&[
        "setup",
        "--r1cs",
        s(&p("c.r1cs")),
        "--pk",
        s(&p("c.pk")),
        "--vk",
        s(&p("c.vk")),
    ]);
}

/// Proves `c.wit` with key "k" through the daemon `conn` names (`--daemon ADDR` and any TLS
/// and token flags; `cuzk submit --wait`) and checks the proof with `cuzk verify` against `c.vk`.
#[allow(dead_code)] // not every test target proves through a daemon
pub fn prove_and_verify(dir: &Path, conn: &[&str]) {
    let p = |n: &str| dir.join(n);
    let (witness, proof, public) = (p("c.wit"), p("p.proof"), p("pub.wit"));
    let submit = [
        "submit",
        "--key",
        "k",
        "--witness",
        s(&witness),
        "--wait",
        "--proof",
        s(&proof),
        "--public-out",
        s(&public),
    ];
    let line = ok(&[&submit[..], conn].concat());
    assert!(line.starts_with("ok "), "{line}");
    ok(&[
        "verify",
        "--vk",
        s(&p("c.vk")),
        "--proof",
        s(&p("p.proof")),
        "--public",
        s(&p("pub.wit")),
    ]);
}
