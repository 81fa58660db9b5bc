//! End-to-end tests of the `cuzk` command: the files a user writes and reads, and the errors a
//! user sees for bad ones. (A test target of `crates/cuzk`, which provides the binary.)

use std::fs;
use std::path::{Path, PathBuf};

#[path = "support/run.rs"]
mod run;
use run::{fails, ok};

struct Files {
    dir: PathBuf,
}

impl Files {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("cuzk-cli-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("temp dir");
        Self { dir }
    }

    fn path(&self, name: &str) -> String {
        self.dir
            .join(name)
            .to_str()
            .expect("utf-8 temp path")
            .to_owned()
    }

    /// `cuzk circuit` arguments writing a 2^log circuit made from `seed` to two files here.
    fn circuit_args(&self, log: u32, seed: u64, r1cs: &str, witness: &str) -> Vec<String> {
        let args = [
            "circuit",
            "--log-constraints",
            &log.to_string(),
            "--seed",
            &seed.to_string(),
        ];
        let files = ["--r1cs", &self.path(r1cs), "--witness", &self.path(witness)];
        args.iter().chain(&files).map(|a| a.to_string()).collect()
    }

    /// `cuzk prove` arguments for the circuit `c.r1cs` with the given key, witness and proof paths.
    fn prove_args(&self, pk: &str, witness: &str, proof: &str) -> Vec<String> {
        let r1cs = self.path("c.r1cs");
        [
            "prove",
            "--r1cs",
            &r1cs,
            "--pk",
            pk,
            "--witness",
            witness,
            "--proof",
            proof,
        ]
        .map(String::from)
        .to_vec()
    }

    /// circuit → setup → prove, for a 2^log circuit made from `seed`.
    fn prove(&self, log: u32, seed: u64) {
        ok(&strs(&self.circuit_args(log, seed, "c.r1cs", "w.wit")));
        ok(&[
            "setup",
            "--r1cs",
            &self.path("c.r1cs"),
            "--pk",
            &self.path("key.pk"),
            "--vk",
            &self.path("key.vk"),
        ]);
        let mut args = self.prove_args(
            &self.path("key.pk"),
            &self.path("w.wit"),
            &self.path("proof"),
        );
        args.extend(["--public-out".to_string(), self.path("public.wit")]);
        let out = ok(&strs(&args));
        assert!(out.contains("self-check passed"), "{out}");
    }

    fn verify_args(&self, public: &str) -> [String; 7] {
        [
            "verify",
            "--vk",
            &self.path("key.vk"),
            "--proof",
            &self.path("proof"),
            "--public",
            public,
        ]
        .map(String::from)
    }
}

impl Drop for Files {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}

fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

fn corrupt(path: &Path, at: usize) {
    let mut bytes = fs::read(path).expect("read");
    bytes[at] ^= 0x5a;
    fs::write(path, bytes).expect("write");
}

#[test]
fn demo_proves_and_verifies() {
    let out = ok(&["demo", "--log-constraints", "8"]);
    assert!(out.contains("proof verified"), "{out}");
    assert!(out.contains("MSM H (G1)"), "timing table missing: {out}");
    // The CPU stages by reference: no upload rows.
    let cpu = ok(&["--backend", "cpu", "demo", "--log-constraints", "8"]);
    assert!(!cpu.contains("upload"), "{cpu}");
}

#[test]
fn files_round_trip_and_proof_verifies() {
    let f = Files::new("roundtrip");
    f.prove(8, 1);
    let out = ok(&strs(&f.verify_args(&f.path("public.wit"))));
    assert!(out.contains("proof verifies"), "{out}");
}

#[test]
fn wrong_public_inputs_are_rejected() {
    let f = Files::new("wrong-public");
    f.prove(8, 1);
    // Another circuit's witness has other public inputs.
    ok(&strs(&f.circuit_args(8, 2, "other.r1cs", "other.wit")));
    let err = fails(&strs(&f.verify_args(&f.path("other.wit"))));
    assert!(err.contains("does not verify"), "{err}");
}

#[test]
fn corrupted_and_truncated_files_give_clear_errors() {
    let f = Files::new("corrupt");
    f.prove(8, 1);

    corrupt(Path::new(&f.path("proof")), 20);
    let err = fails(&strs(&f.verify_args(&f.path("public.wit"))));
    assert!(
        err.contains(&f.path("proof")),
        "error must name the file: {err}"
    );

    let pk = f.path("key.pk");
    let bytes = fs::read(&pk).expect("read");
    fs::write(&pk, &bytes[..bytes.len() / 2]).expect("truncate");
    let err = fails(&strs(&f.prove_args(&pk, &f.path("w.wit"), &f.path("p2"))));
    assert!(err.contains("truncated"), "{err}");

    let err = fails(&strs(&f.prove_args(
        &f.path("missing"),
        &f.path("w.wit"),
        &f.path("p2"),
    )));
    assert!(err.contains("cannot open"), "{err}");
}

#[test]
fn witness_for_another_circuit_is_rejected() {
    let f = Files::new("wrong-witness");
    f.prove(8, 1);
    ok(&strs(&f.circuit_args(9, 1, "big.r1cs", "big.wit")));
    let err = fails(&strs(&f.prove_args(
        &f.path("key.pk"),
        &f.path("big.wit"),
        &f.path("p2"),
    )));
    assert!(err.contains("witness"), "{err}");
}

/// Whether this machine has a usable GPU, as `cuzk devices` reports it.
fn gpu_present() -> bool {
    let report = ok(&["devices"]);
    !(report.contains("No CUDA driver")
        || report.contains("no GPU")
        || report.contains("query failed")
        || report.contains("kernels were not built"))
}

#[test]
fn devices_reports_plainly_and_exits_zero() {
    let report = ok(&["devices"]);
    assert!(!report.trim().is_empty());
    assert!(report.contains("kernels"), "{report}");
}

#[test]
fn forced_gpu_backend_without_a_gpu_fails_clearly() {
    let args = ["--backend", "gpu", "demo", "--log-constraints", "6"];
    if gpu_present() {
        let out = ok(&args);
        assert!(out.contains("backend: gpu"), "{out}");
        assert!(out.contains("proof verified"), "{out}");
    } else {
        let err = fails(&args);
        assert!(err.contains("GPU backend is not available"), "{err}");
        assert!(
            err.contains("driver") || err.contains("device") || err.contains("kernels"),
            "the reason is named: {err}"
        );
    }
    let err = fails(&["--backend", "tpu", "demo"]);
    assert!(err.contains("unknown backend"), "{err}");
}

#[test]
fn bench_on_the_cpu_prints_medians_and_verifies_every_proof() {
    let out = ok(&[
        "--backend",
        "cpu",
        "bench",
        "--log-constraints",
        "7",
        "--proofs",
        "2",
        "--boolean-percent",
        "0",
    ]);
    for want in [
        "device 0: cpu",
        "median of 2",
        "MSM H",
        "quotient",
        "p95",
        "proofs/s",
        "GPU-bound limit",
        "setup (cpu)",
        "peak host memory",
        // No --workers: the simulated device's memory admits two, each warmed up once.
        "workers per device: [2]",
        "all 4 proofs verified (0 failed",
    ] {
        assert!(out.contains(want), "missing {want:?} in:\n{out}");
    }
}

#[test]
fn bench_runs_workers_and_jobs_in_flight_on_logical_devices() {
    let out = ok(&[
        "--backend",
        "cpu",
        "bench",
        "--log-constraints",
        "7",
        "--proofs",
        "6",
        "--workers",
        "2",
        "--concurrency",
        "3",
        "--split",
        "2",
        "--by-path",
    ]);
    for want in [
        "device 1: cpu.1",
        "3 in flight",
        "witness by path: ",
        "all 10 proofs verified (0 failed",
    ] {
        assert!(out.contains(want), "missing {want:?} in:\n{out}");
    }
    let file = out
        .lines()
        .find_map(|l| l.strip_prefix("witness by path: "))
        .unwrap();
    assert!(
        !std::path::Path::new(file).exists(),
        "the bench removes its witness file"
    );
}

#[test]
fn bench_over_sizes_draws_the_scaling_plot_and_the_timeline() {
    let dir = std::env::temp_dir().join(format!("cuzk-cli-sizes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (plot, timeline, json) = (dir.join("s.svg"), dir.join("t.svg"), dir.join("b.json"));
    let out = ok(&[
        "--backend",
        "cpu",
        "bench",
        "--sizes",
        "6,7",
        "--proofs",
        "2",
        "--plot",
        plot.to_str().unwrap(),
        "--timeline",
        timeline.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    for want in ["2^6 ", "2^7 ", "ms per proof", "[2/2] ok", "plot: "] {
        assert!(out.contains(want), "missing {want:?} in:\n{out}");
    }
    let plot = std::fs::read_to_string(plot).unwrap();
    assert!(plot.starts_with("<svg") && plot.contains("2^6") && plot.contains("2^7"));
    let timeline = std::fs::read_to_string(timeline).unwrap();
    // Lanes of workers (which of the two auto workers ran the timed proofs is up to the race).
    assert!(timeline.contains("worker ") && timeline.contains("GPU lock"));
    let rows: serde_json::Value = serde_json::from_slice(&std::fs::read(json).unwrap()).unwrap();
    assert_eq!(rows.as_array().map(Vec::len), Some(2));
    assert!(rows[1]["proofs_per_s"].as_f64().unwrap() > 0.0);
    let err = fails(&["--backend", "cpu", "bench", "--proofs", "1"]);
    assert!(
        err.contains("--log-constraints"),
        "a size is required: {err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn demo_names_its_backend() {
    let out = ok(&["--backend", "cpu", "demo", "--log-constraints", "6"]);
    assert!(out.contains("backend: cpu"), "{out}");
}

#[path = "../crates/formats/tests/support/snarkjs_tools.rs"]
mod snarkjs_tools;

/// A cuzk key converted to bellperson's layout proves through `--pk` (format detected, and
/// forced, fully checked and trusted by digest) and verifies with bellperson's verifying key.
#[test]
fn bellperson_parameters_prove_and_verify_through_the_cli() {
    use cuzk_formats::{BpParameters, BpVerifyingKey, Digest, PointChecks, cuzk, to_hex};
    let f = Files::new("bellperson");
    f.prove(8, 3);
    let key = f.path("key.pk");
    let pk = cuzk::read_proving_key(&key, fs::File::open(&key).unwrap(), &PointChecks::Full)
        .expect("cuzk key");
    let params = f.path("bp.params");
    BpParameters::from_proving_key(&pk)
        .unwrap()
        .write_file(Path::new(&params))
        .unwrap();
    fs::write(
        f.path("bp.vk"),
        BpVerifyingKey::from_proving_key(&pk).to_bytes(),
    )
    .unwrap();
    let sha = to_hex(&Digest::Sha256([0; 32]).compute_like(&fs::read(&params).unwrap()));
    let verify = |proof: &str| {
        ok(&[
            "verify",
            "--vk",
            &f.path("bp.vk"),
            "--proof",
            proof,
            "--public",
            &f.path("public.wit"),
        ])
    };
    let mut args = f.prove_args(&params, &f.path("w.wit"), &f.path("p1.bp"));
    ok(&strs(&args));
    assert_eq!(
        fs::read(f.path("p1.bp")).unwrap().len(),
        192,
        "bellperson's proof encoding"
    );
    assert!(verify(&f.path("p1.bp")).contains("proof verifies"));
    args = f.prove_args(&params, &f.path("w.wit"), &f.path("p2.bp"));
    args.extend(["--pk-format", "bellperson", "--pk-digest"].map(String::from));
    args.push(format!("sha256:{sha}"));
    ok(&strs(&args));
    assert!(verify(&f.path("p2.bp")).contains("proof verifies"));
    // A wrong digest is refused, naming the file.
    let last = args.len() - 1;
    args[last] = format!("sha256:{}", "00".repeat(32));
    let err = fails(&strs(&args));
    assert!(err.contains("digest") && err.contains("bp.params"), "{err}");
    // Parameters of another circuit are refused.
    ok(&strs(&f.circuit_args(9, 4, "c.r1cs", "w9.wit")));
    let err = fails(&strs(&f.prove_args(
        &params,
        &f.path("w9.wit"),
        &f.path("p3.bp"),
    )));
    assert!(err.contains("does not match"), "{err}");
}

/// `cuzk prove --zkey --wtns` makes a proof snarkjs accepts; `cuzk verify` takes snarkjs's
/// `verification_key.json`, `proof.json` and `public.json`.
#[test]
fn snarkjs_files_prove_and_verify_through_the_cli() {
    let fx = snarkjs_tools::fixture();
    let p = |n: &str| fx.path(n).to_str().expect("utf-8 path").to_owned();
    ok(&[
        "prove",
        "--zkey",
        &p("chain.zkey"),
        "--wtns",
        &p("chain.wtns"),
        "--proof",
        &p("cuzk_proof.json"),
        "--public",
        &p("cuzk_public.json"),
    ]);
    let out = fx.snarkjs(&[
        "groth16",
        "verify",
        "vk.json",
        "cuzk_public.json",
        "cuzk_proof.json",
    ]);
    assert!(out.contains("OK!"), "snarkjs verify: {out}");
    fx.snarkjs(&[
        "groth16",
        "prove",
        "chain.zkey",
        "chain.wtns",
        "proof.json",
        "public.json",
    ]);
    let out = ok(&[
        "verify",
        "--vk",
        &p("vk.json"),
        "--proof",
        &p("proof.json"),
        "--public",
        &p("public.json"),
    ]);
    assert!(out.contains("proof verifies"), "{out}");
    let out = ok(&[
        "verify",
        "--vk",
        &p("vk.json"),
        "--proof",
        &p("cuzk_proof.json"),
        "--public",
        &p("cuzk_public.json"),
    ]);
    assert!(out.contains("proof verifies"), "{out}");
    // Other public inputs do not verify.
    fs::write(fx.path("wrong.json"), r#"["1", "11"]"#).unwrap();
    let err = fails(&[
        "verify",
        "--vk",
        &p("vk.json"),
        "--proof",
        &p("proof.json"),
        "--public",
        &p("wrong.json"),
    ]);
    assert!(err.contains("does not verify"), "{err}");
    // cuzk's own setup and prover take the circom r1cs and wtns.
    ok(&[
        "setup",
        "--r1cs",
        &p("chain.r1cs"),
        "--pk",
        &p("c.pk"),
        "--vk",
        &p("c.vk"),
    ]);
    ok(&[
        "prove",
        "--r1cs",
        &p("chain.r1cs"),
        "--pk",
        &p("c.pk"),
        "--wtns",
        &p("chain.wtns"),
        "--proof",
        &p("c.proof"),
        "--public",
        &p("c_public.json"),
    ]);
    let out = ok(&[
        "verify",
        "--vk",
        &p("c.vk"),
        "--proof",
        &p("c.proof"),
        "--public",
        &p("c_public.json"),
    ]);
    assert!(out.contains("proof verifies"), "{out}");
    let _ = fs::remove_dir_all(&fx.dir);
}
