//! `cuzk filecoin`: seal a 2 KiB sector, generate its circuit's parameters, prove C2, and
//! filecoin-proofs' `verify_seal` accepts; the timings are printed per phase. Uses the
//! generated-parameters directory the cuzk-filecoin tests share (made once, under a lock).

use std::path::PathBuf;
use std::process::{Command, Output};

fn params_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("filecoin-generated-params")
}

fn cuzk(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cuzk"))
        .args(["--backend", "cpu", "filecoin"])
        .args(args)
        // filecoin-proofs' verifier reads its verifying keys from here.
        .env("FIL_PROOFS_PARAMETER_CACHE", params_dir())
        .output()
        .expect("run cuzk")
}

fn ok(args: &[&str]) -> String {
    let out = cuzk(args);
    assert!(
        out.status.success(),
        "cuzk filecoin {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn fails(args: &[&str]) -> String {
    let out = cuzk(args);
    assert!(
        !out.status.success(),
        "cuzk filecoin {args:?} should have failed"
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn porep_c2_then_verify_seal() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("filecoin-cli");
    std::fs::remove_dir_all(&dir).ok();
    std::fs::create_dir_all(&dir).unwrap();
    let p = |n: &str| dir.join(n).to_str().unwrap().to_owned();
    let params = params_dir().to_str().unwrap().to_owned();

    let out = ok(&[
        "seal",
        "--sector-id",
        "7",
        "--work-dir",
        &p("sector"),
        "--c1",
        &p("c1.json"),
    ]);
    assert!(out.contains("seal"), "{out}");
    ok(&["gen-params", "--c1", &p("c1.json"), "--param-dir", &params]);
    let out = ok(&[
        "porep-c2",
        "--c1",
        &p("c1.json"),
        "--proof",
        &p("proof.bin"),
        "--param-dir",
        &params,
    ]);
    for phase in [
        "parse",
        "circuits",
        "load params",
        "synthesis",
        "prove part. 0",
        "total",
    ] {
        assert!(out.contains(phase), "no {phase} timing in:\n{out}");
    }
    assert_eq!(std::fs::metadata(p("proof.bin")).unwrap().len(), 192);
    let verify = |sector: &str, param_dir: &str| {
        cuzk(&[
            "verify",
            "porep",
            "--c1",
            &p("c1.json"),
            "--proof",
            &p("proof.bin"),
            "--miner-id",
            "1000",
            "--sector-id",
            sector,
            "--param-dir",
            param_dir,
        ])
    };
    let good = verify("7", &params);
    assert!(
        good.status.success(),
        "{}",
        String::from_utf8_lossy(&good.stderr)
    );
    assert!(String::from_utf8_lossy(&good.stdout).contains("verify_seal accepts"));
    let bad = verify("8", &params);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("rejects"));

    // Errors a user sees.
    let err = fails(&[
        "porep-c2",
        "--c1",
        &p("missing.json"),
        "--proof",
        &p("x"),
        "--param-dir",
        &params,
    ]);
    assert!(err.contains("missing.json"), "{err}");
    let empty = p("empty-params");
    std::fs::create_dir_all(&empty).unwrap();
    let err = fails(&[
        "porep-c2",
        "--c1",
        &p("c1.json"),
        "--proof",
        &p("x"),
        "--param-dir",
        &empty,
    ]);
    assert!(
        err.contains("missing parameter file") && err.contains(".params"),
        "{err}"
    );
    let out = verify("7", &empty);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("FIL_PROOFS_PARAMETER_CACHE"), "{err}");
}

#[test]
fn window_post_then_verify_window_post() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("filecoin-cli-post");
    std::fs::remove_dir_all(&dir).ok();
    std::fs::create_dir_all(&dir).unwrap();
    let p = |n: &str| dir.join(n).to_str().unwrap().to_owned();
    let params = params_dir().to_str().unwrap().to_owned();
    let randomness = "11".repeat(31) + "05";
    let other = "22".repeat(31) + "05";

    let out = ok(&[
        "post-vanilla",
        "--sectors",
        "2",
        "--randomness",
        &randomness,
        "--work-dir",
        &p("sectors"),
        "--vanilla",
        &p("vanilla.bin"),
    ]);
    assert!(out.contains("vanilla"), "{out}");
    assert!(!dir.join("sectors").exists());
    let post = |extra: &[&str], r: &str| -> Vec<String> {
        let mut a: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        a.extend(
            [
                "--vanilla",
                &p("vanilla.bin"),
                "--randomness",
                r,
                "--miner-id",
                "1000",
                "--param-dir",
                &params,
            ]
            .map(String::from),
        );
        a
    };
    let args = post(&["gen-post-params"], &randomness);
    ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let args = post(
        &[
            "window-post",
            "--partition",
            "0",
            "--proof",
            &p("proof.bin"),
        ],
        &randomness,
    );
    let out = ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
    for phase in ["parse", "circuits", "synthesis", "prove part. 0", "total"] {
        assert!(out.contains(phase), "no {phase} timing in:\n{out}");
    }
    assert_eq!(std::fs::metadata(p("proof.bin")).unwrap().len(), 192);
    let verify = |r: &str| {
        let args = post(&["verify", "window-post", "--proof", &p("proof.bin")], r);
        cuzk(&args.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let good = verify(&randomness);
    assert!(
        good.status.success(),
        "{}",
        String::from_utf8_lossy(&good.stderr)
    );
    assert!(String::from_utf8_lossy(&good.stdout).contains("verify_window_post accepts"));
    let bad = verify(&other);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("rejects"));

    // Vanilla proofs of another randomness, and a truncated file: errors naming the file.
    let args = post(&["window-post", "--proof", &p("x")], &other);
    let err = fails(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(
        err.contains("vanilla.bin: field vanilla_proofs") && err.contains("randomness"),
        "{err}"
    );
    let bytes = std::fs::read(p("vanilla.bin")).unwrap();
    std::fs::write(p("vanilla.bin"), &bytes[..bytes.len() / 2]).unwrap();
    let args = post(&["window-post", "--proof", &p("x")], &randomness);
    let err = fails(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(err.contains("vanilla.bin: field vanilla_proofs"), "{err}");
}

#[test]
fn snap_then_verify_empty_sector_update_proof() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("filecoin-cli-snap");
    std::fs::remove_dir_all(&dir).ok();
    std::fs::create_dir_all(&dir).unwrap();
    let p = |n: &str| dir.join(n).to_str().unwrap().to_owned();
    let params = params_dir().to_str().unwrap().to_owned();

    let out = ok(&[
        "snap-vanilla",
        "--work-dir",
        &p("sector"),
        "--vanilla",
        &p("vanilla.bin"),
    ]);
    let comm = |name: &str| -> String {
        out.lines()
            .find_map(|l| l.strip_prefix(name))
            .unwrap_or_else(|| panic!("no {name} in:\n{out}"))
            .trim()
            .to_string()
    };
    let (old, new, d) = (
        comm("comm_r_old "),
        comm("comm_r_new "),
        comm("comm_d_new "),
    );
    let with = |cmd: &[&str], d: &str| -> Vec<String> {
        let mut a: Vec<String> = cmd.iter().map(|s| s.to_string()).collect();
        a.extend(
            [
                "--comm-r-old",
                &old,
                "--comm-r-new",
                &new,
                "--comm-d-new",
                d,
                "--param-dir",
                &params,
            ]
            .map(String::from),
        );
        a
    };
    let run = |a: Vec<String>| cuzk(&a.iter().map(String::as_str).collect::<Vec<_>>());
    let gen_params = run(with(
        &["gen-snap-params", "--vanilla", &p("vanilla.bin")],
        &d,
    ));
    assert!(gen_params.status.success());
    let out = run(with(
        &[
            "snap",
            "--vanilla",
            &p("vanilla.bin"),
            "--proof",
            &p("proof.bin"),
        ],
        &d,
    ));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    for phase in ["parse", "circuits", "synthesis", "prove part. 0", "total"] {
        assert!(stdout.contains(phase), "no {phase} timing in:\n{stdout}");
    }
    assert_eq!(std::fs::metadata(p("proof.bin")).unwrap().len(), 192);
    let good = run(with(&["verify", "snap", "--proof", &p("proof.bin")], &d));
    assert!(
        good.status.success(),
        "{}",
        String::from_utf8_lossy(&good.stderr)
    );
    // Another comm_d_new: the proof is rejected, and the vanilla proofs are not its.
    let bad = run(with(&["verify", "snap", "--proof", &p("proof.bin")], &old));
    assert!(!bad.status.success());
    let out = run(with(
        &["snap", "--vanilla", &p("vanilla.bin"), "--proof", &p("x")],
        &old,
    ));
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("vanilla.bin: field vanilla_proofs"), "{err}");
}
