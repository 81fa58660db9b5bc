//! Shared by the snarkjs tests of cuzk-formats and the CLI tests: installs snarkjs and circom2
//! from the npm registry into `target/tmp/cuzk-npm` (once, pinned versions) and builds small
//! circom circuits set up by snarkjs. Without node and npm the tests using it FAIL: they never
//! pass without running.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

const SNARKJS: &str = "snarkjs@0.7.6";
const CIRCOM2: &str = "circom2@0.2.23";

pub fn tools_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("cuzk-npm")
}

pub fn run(dir: &Path, program: &Path, args: &[&str]) -> String {
    let out = Command::new("node")
        .arg(program)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("node is required for this test and could not run: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "{} {args:?} failed:\n{text}",
        program.display()
    );
    text
}

/// Installs snarkjs and circom2 when missing; panics loudly without npm.
pub fn install_tools() -> (PathBuf, PathBuf) {
    let dir = tools_dir();
    let snarkjs = dir.join("node_modules/snarkjs/build/cli.cjs");
    let circom = dir.join("node_modules/circom2/cli.js");
    if !snarkjs.exists() || !circom.exists() {
        std::fs::create_dir_all(&dir).unwrap();
        let status = Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--prefix"])
            .arg(&dir)
            .args([SNARKJS, CIRCOM2])
            .status()
            .unwrap_or_else(|e| {
                panic!("npm is required to install {SNARKJS} and {CIRCOM2} for this test: {e}")
            });
        assert!(status.success(), "npm install {SNARKJS} {CIRCOM2} failed");
    }
    assert!(
        snarkjs.exists(),
        "{} missing after install",
        snarkjs.display()
    );
    assert!(
        circom.exists(),
        "{} missing after install",
        circom.display()
    );
    (snarkjs, circom)
}

/// A small circuit: 2 public inputs (the output c and the input b), ~200 constraints.
const CIRCUIT: &str = r#"pragma circom 2.0.0;
template Chain(n) {
    signal input a;
    signal input b;
    signal output c;
    signal t[n];
    t[0] <== a * b;
    for (var i = 1; i < n; i++) { t[i] <== t[i-1] * a + b; }
    c <== t[n-1];
}
component main {public [b]} = Chain(N);
"#;

pub struct Fixture {
    pub dir: PathBuf,
    pub snarkjs: PathBuf,
}

impl Fixture {
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    pub fn snarkjs(&self, args: &[&str]) -> String {
        run(&self.dir, &self.snarkjs, args)
    }
}

/// Compiles `n`-link chains with circom2 and sets them up with snarkjs (power-9 ceremony: zkey H needs 2x the domain,
/// made once and kept with the tools).
pub fn fixture() -> Fixture {
    let (snarkjs, circom) = install_tools();
    let dir = tools_dir().join(format!("run-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let f = Fixture { dir, snarkjs };
    let ptau = tools_dir().join("pot9_final.ptau");
    if !ptau.exists() {
        let p0 = f.path("pot9_0.ptau");
        let p1 = f.path("pot9_1.ptau");
        let tmp = f.path("pot9_final.ptau");
        f.snarkjs(&["powersoftau", "new", "bls12381", "9", p0.to_str().unwrap()]);
        f.snarkjs(&[
            "powersoftau",
            "contribute",
            p0.to_str().unwrap(),
            p1.to_str().unwrap(),
            "-e=cuzk test entropy",
        ]);
        f.snarkjs(&[
            "powersoftau",
            "prepare",
            "phase2",
            p1.to_str().unwrap(),
            tmp.to_str().unwrap(),
        ]);
        std::fs::rename(&tmp, &ptau).unwrap();
    }
    for (name, n, prime) in [
        ("chain", 150, "bls12381"),
        ("other", 120, "bls12381"),
        ("bn", 150, "bn128"),
    ] {
        std::fs::write(
            f.path(&format!("{name}.circom")),
            CIRCUIT.replace("Chain(N)", &format!("Chain({n})")),
        )
        .unwrap();
        run(
            &f.dir,
            &circom,
            &[
                &format!("{name}.circom"),
                "--r1cs",
                "--wasm",
                "--prime",
                prime,
                "-o",
                ".",
            ],
        );
    }
    let ptau = ptau.to_str().unwrap().to_string();
    for name in ["chain", "other"] {
        f.snarkjs(&[
            "groth16",
            "setup",
            &format!("{name}.r1cs"),
            &ptau,
            &format!("{name}.zkey"),
        ]);
        std::fs::write(
            f.path(&format!("{name}_in.json")),
            r#"{"a": "3", "b": "11"}"#,
        )
        .unwrap();
        f.snarkjs(&[
            "wtns",
            "calculate",
            &format!("{name}_js/{name}.wasm"),
            &format!("{name}_in.json"),
            &format!("{name}.wtns"),
        ]);
    }
    f.snarkjs(&["zkey", "export", "verificationkey", "chain.zkey", "vk.json"]);
    f
}

pub fn file(f: &Fixture, name: &str) -> (String, Vec<u8>) {
    let p = f.path(name);
    (p.display().to_string(), std::fs::read(&p).unwrap())
}
