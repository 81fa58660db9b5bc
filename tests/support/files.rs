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
