//! `cuzk filecoin`: seal a 2 KiB sector and make one from sparse trees, generate the
//! circuit's parameters, prove C2, and filecoin-proofs' `verify_seal` accepts; the timings are
//! printed per phase. The same through a `cuzk daemon` (`--daemon`): a SnapDeals update and a
//! WinningPoSt, each accepted by filecoin-proofs' verifier, and `bench-c2`. Uses the
//! generated-parameters directory the cuzk-filecoin tests share (made once, under a lock).

use std::path::PathBuf;
use std::process::{Command, Output};

#[path = "support/daemon.rs"]
mod daemon;
use daemon::Daemon;

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

    // A sealed C1 (proven through the daemon by bench-c2 below, and by the library's tests) and
    // one from sparse trees, never sealed, which this test proves.
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
    let out = ok(&[
        "seal",
        "--sparse",
        "--sector-id",
        "9",
        "--c1",
        &p("sparse.json"),
    ]);
    assert!(out.contains("sparse C1"), "{out}");
    // One circuit for both: the parameters of either C1 prove the other.
    ok(&["gen-params", "--c1", &p("c1.json"), "--param-dir", &params]);
    let out = ok(&[
        "porep-c2",
        "--c1",
        &p("sparse.json"),
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
            &p("sparse.json"),
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
    let good = verify("9", &params);
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
    let out = verify("9", &empty);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("FIL_PROOFS_PARAMETER_CACHE"), "{err}");

    // One source only: a work directory to seal in, or --sparse.
    for args in [
        &["seal", "--c1", &p("x.json")][..],
        &[
            "seal",
            "--sparse",
            "--work-dir",
            &p("w"),
            "--c1",
            &p("x.json"),
        ][..],
    ] {
        let err = fails(args);
        assert!(
            err.contains("--work-dir") && err.contains("--sparse"),
            "{err}"
        );
    }
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

/// A SnapDeals workload made by `cuzk filecoin snap-vanilla` (a sector in `work_dir`, its
/// vanilla proofs written to `vanilla`): the update's comm_r_old, comm_r_new and comm_d_new.
fn snap_vanilla(work_dir: &str, vanilla: &str) -> [String; 3] {
    let out = ok(&["snap-vanilla", "--work-dir", work_dir, "--vanilla", vanilla]);
    ["comm_r_old ", "comm_r_new ", "comm_d_new "].map(|name| {
        out.lines()
            .find_map(|l| l.strip_prefix(name))
            .unwrap_or_else(|| panic!("no {name} in:\n{out}"))
            .trim()
            .to_string()
    })
}

#[test]
fn snap_then_verify_empty_sector_update_proof() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("filecoin-cli-snap");
    std::fs::remove_dir_all(&dir).ok();
    std::fs::create_dir_all(&dir).unwrap();
    let p = |n: &str| dir.join(n).to_str().unwrap().to_owned();
    let params = params_dir().to_str().unwrap().to_owned();

    let [old, new, d] = snap_vanilla(&p("sector"), &p("vanilla.bin"));
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

/// A CPU daemon on a unix socket in `dir` proving Filecoin proofs from the shared parameters;
/// returns it and its address.
fn filecoin_daemon(dir: &std::path::Path) -> (Daemon, String) {
    let sock = dir.join("cuzk.sock");
    let config = dir.join("cuzk.toml");
    std::fs::write(
        &config,
        format!(
            "listen = \"unix:{}\"\nparam_dir = \"{}\"\nfilecoin_param_dir = \"{}\"\nbackend = \"cpu\"\nworkers_per_device = 1\nhost_memory = 8589934592\ncpu_device_memory = 4294967296\n",
            sock.display(),
            dir.display(),
            params_dir().display()
        ),
    )
    .unwrap();
    let (d, _) = Daemon::start(&config);
    (d, format!("unix:{}", sock.display()))
}

#[test]
fn snap_winning_post_and_bench_c2_through_the_daemon() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("filecoin-cli-daemon");
    std::fs::remove_dir_all(&dir).ok();
    std::fs::create_dir_all(&dir).unwrap();
    let p = |n: &str| dir.join(n).to_str().unwrap().to_owned();
    let params = params_dir().to_str().unwrap().to_owned();
    let owned = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let run = |a: &[String]| cuzk(&a.iter().map(String::as_str).collect::<Vec<_>>());
    let passes = |a: &[String]| ok(&a.iter().map(String::as_str).collect::<Vec<_>>());

    // The workloads and their parameters, as the in-process tests make them.
    let [old, new, d] = snap_vanilla(&p("snap-sector"), &p("snap.bin"));
    let snap_args = owned(&[
        "--comm-r-old",
        &old,
        "--comm-r-new",
        &new,
        "--comm-d-new",
        &d,
    ]);
    let with = |head: &[&str], tail: &[String], param_dir: bool| -> Vec<String> {
        let mut a = owned(head);
        a.extend(tail.iter().cloned());
        if param_dir {
            a.extend(owned(&["--param-dir", &params]));
        }
        a
    };
    passes(&with(
        &["gen-snap-params", "--vanilla", &p("snap.bin")],
        &snap_args,
        true,
    ));
    let randomness = "33".repeat(31) + "05";
    let winning = "StackedDrgWinning2KiBV1";
    ok(&[
        "post-vanilla",
        "--post-proof",
        winning,
        "--randomness",
        &randomness,
        "--work-dir",
        &p("winning-sector"),
        "--vanilla",
        &p("winning.bin"),
    ]);
    let post_args = owned(&[
        "--vanilla",
        &p("winning.bin"),
        "--randomness",
        &randomness,
        "--miner-id",
        "1000",
    ]);
    passes(&with(&["gen-post-params", "--winning"], &post_args, true));
    ok(&[
        "seal",
        "--sector-id",
        "9",
        "--work-dir",
        &p("porep-sector"),
        "--c1",
        &p("c1.json"),
    ]);
    ok(&["gen-params", "--c1", &p("c1.json"), "--param-dir", &params]);

    let (_daemon, addr) = filecoin_daemon(&dir);
    let via = |a: Vec<String>| -> Vec<String> {
        let mut a = a;
        a.extend(owned(&["--daemon", &addr]));
        a
    };

    // SnapDeals through the daemon: its per-phase timings, a proof verify accepts.
    let out = passes(&via(with(
        &[
            "snap",
            "--vanilla",
            &p("snap.bin"),
            "--proof",
            &p("snap-proof.bin"),
        ],
        &snap_args,
        false,
    )));
    // Its one partition's witness came from the load's compiling synthesis: no synthesize.
    for phase in [
        "queue wait",
        "load",
        "witness map",
        "MSM H",
        "lock hold",
        "daemon total",
        "total",
    ] {
        assert!(out.contains(phase), "no {phase} timing in:\n{out}");
    }
    passes(&with(
        &["verify", "snap", "--proof", &p("snap-proof.bin")],
        &snap_args,
        true,
    ));
    // The daemon reads its own parameters: --param-dir with --daemon is refused.
    let refused = run(&via(with(
        &["snap", "--vanilla", &p("snap.bin"), "--proof", &p("x")],
        &snap_args,
        true,
    )));
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("filecoin_param_dir"));

    // WinningPoSt through our own API.
    let out = passes(&via(with(
        &["winning-post", "--proof", &p("winning-proof.bin")],
        &post_args,
        false,
    )));
    assert!(out.contains("load") && out.contains("MSM H"), "{out}");
    assert_eq!(
        std::fs::metadata(p("winning-proof.bin")).unwrap().len(),
        192
    );
    let out = passes(&with(
        &["verify", "winning-post", "--proof", &p("winning-proof.bin")],
        &post_args,
        true,
    ));
    assert!(out.contains("verify_winning_post accepts"), "{out}");

    // bench-c2: one warm-up and one timed proof through the daemon, every proof checked by
    // verify_seal, the table and the timeline. Each CPU PoRep proof is most of a minute on CI's
    // two cores, filecoin-proofs' own C2 several (sparse.rs runs it through the same function),
    // so several in flight and the baseline run on the GPU machine only.
    let out = ok(&[
        "bench-c2",
        "--c1",
        &p("c1.json"),
        "--daemon",
        &addr,
        "--proofs",
        "1",
        "--in-flight",
        "1",
        "--timeline",
        &p("c2.svg"),
        "--miner-id",
        "1000",
        "--sector-id",
        "9",
        "--no-baseline",
        "--param-dir",
        &params,
    ]);
    eprintln!("{out}");
    for line in [
        "daemon warm-up",
        "daemon proof 0",
        "verify_seal accepts all 2 proofs",
        "| cuzk daemon, 1 proofs, 1 in flight: wall per proof |",
        "| GPU lock held per proof |",
    ] {
        assert!(out.contains(line), "no {line:?} in:\n{out}");
    }
    assert!(!out.contains("| ratio |"), "{out}");
    let svg = std::fs::read_to_string(p("c2.svg")).unwrap();
    assert!(
        svg.starts_with("<svg") && svg.contains("GPU lock"),
        "{svg:.200}"
    );
    std::fs::remove_dir_all(&dir).ok();
}
