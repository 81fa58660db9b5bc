//! `cuzk daemon` as a user runs it: a config file, keys preloaded, the client commands
//! (submit, await, status, keys, bench-daemon), and SIGTERM draining queued jobs and exiting 0
//! with the socket removed. (A test target of `crates/cuzk`, which provides the binary.)

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

#[path = "support/daemon.rs"]
mod daemon;
#[path = "support/files.rs"]
mod files;
#[path = "support/run.rs"]
mod run;
use daemon::Daemon;
use files::s;
use run::{cuzk, ok};

/// The log without its terminal colour codes.
fn strip_ansi(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The daemon's rayon threads run `COMPUTE_NICE_INCREMENT` nicer than its other threads, so
/// that its service threads answer promptly while every core computes.
fn compute_threads_are_nicer(pid: u32) {
    let nice = |stat: &str| -> i32 {
        // Fields after the parenthesised name: state is field 3, nice field 19.
        let rest = &stat[stat.rfind(')').unwrap() + 2..];
        rest.split(' ').nth(16).unwrap().parse().unwrap()
    };
    let (mut compute, mut service) = (Vec::new(), Vec::new());
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let dir = t.unwrap().path();
        let (Ok(comm), Ok(stat)) = (
            std::fs::read_to_string(dir.join("comm")),
            std::fs::read_to_string(dir.join("stat")),
        ) else {
            continue; // a thread that ended meanwhile
        };
        if comm.starts_with("cuzk-compute-") {
            compute.push(nice(&stat));
        } else if comm.starts_with("tokio")
            || comm.starts_with("cuzk-conn")
            || comm.trim() == "cuzk"
        {
            service.push(nice(&stat));
        }
    }
    assert!(
        !compute.is_empty() && !service.is_empty(),
        "{compute:?} {service:?}"
    );
    let base = service[0];
    assert!(service.iter().all(|&n| n == base), "{service:?}");
    let want = (base + cuzk_daemon::priority::COMPUTE_NICE_INCREMENT).min(19);
    assert!(
        compute.iter().all(|&n| n == want),
        "compute {compute:?}, service {service:?}"
    );
}

#[test]
fn daemon_serves_the_client_commands_and_drains_on_sigterm() {
    let dir = std::env::temp_dir().join(format!("cuzk-daemon-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let p = |n: &str| -> PathBuf { dir.join(n) };
    files::circuit_and_key(&dir, 8);
    let sock = p("d.sock");
    std::fs::write(
        p("cuzk.toml"),
        format!(
            "listen = \"unix:{}\"\nparam_dir = \"{}\"\nbackend = \"cpu\"\nhost_memory = 4294967296\ncpu_device_memory = 1073741824\ndrain_timeout_s = 60\n[[keys]]\nid = \"k\"\npk = \"c.pk\"\nr1cs = \"c.r1cs\"\n",
            s(&sock),
            s(&dir)
        ),
    )
    .unwrap();
    let (mut daemon, _) = Daemon::start(&p("cuzk.toml"));
    let d = format!("unix:{}", s(&sock));
    let keys = ok(&["keys", "--daemon", &d]);
    assert!(keys.starts_with("k  constraints 256"), "{keys}");
    compute_threads_are_nicer(daemon.child.id());

    let bench = ok(&[
        "bench-daemon",
        "--daemon",
        &d,
        "--key",
        "k",
        "--witness",
        s(&p("c.wit")),
        "--concurrency",
        "2",
        "--proofs",
        "4",
        "--vk",
        s(&p("c.vk")),
        "--json",
        s(&p("bench.json")),
        "--timeline",
        s(&p("run.svg")),
    ]);
    let svg = std::fs::read_to_string(p("run.svg")).unwrap();
    assert!(
        svg.starts_with("<svg") && svg.contains("GPU lock") && svg.contains("MSM"),
        "{svg}"
    );
    assert!(bench.contains("[4/4] ok "), "{bench}");
    assert!(
        bench.contains("proofs/min") && bench.contains("failures 0"),
        "{bench}"
    );
    assert!(bench.contains("GPU busy"), "{bench}");
    // The daemon's own handling time of the probe's calls, read from its metrics.
    assert!(
        bench.contains("Status during the run: ") && bench.contains("handled by the daemon: "),
        "{bench}"
    );
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(p("bench.json")).unwrap()).unwrap();
    assert_eq!(j["latency_s"].as_array().unwrap().len(), 4);
    assert!(!j["timeline"]["spans"].as_array().unwrap().is_empty());

    files::prove_and_verify(&dir, &["--daemon", &d]);

    let ids = ok(&[
        "submit",
        "--daemon",
        &d,
        "--key",
        "k",
        "--witness",
        s(&p("c.wit")),
        "--by-path",
    ]);
    let (id, token) = ids.trim().split_once(' ').expect("id and token");
    ok(&[
        "await",
        "--daemon",
        &d,
        "--job",
        id,
        "--token",
        token,
        "--proof",
        s(&p("q.proof")),
    ]);
    let e = cuzk(&[
        "await",
        "--daemon",
        &d,
        "--job",
        id,
        "--token",
        "nope",
        "--proof",
        s(&p("x")),
    ]);
    assert!(!e.status.success());
    assert!(
        String::from_utf8_lossy(&e.stderr).contains("no job"),
        "{e:?}"
    );
    let st = ok(&["status", "--daemon", &d]);
    assert!(st.contains("completed 6"), "{st}");
    let stj = ok(&["status", "--daemon", &d, "--json"]);
    assert!(stj.contains("\"completed\": 6"), "{stj}");

    // Three more queued, then SIGTERM: the drain finishes them and the daemon exits 0.
    for _ in 0..3 {
        ok(&[
            "submit",
            "--daemon",
            &d,
            "--key",
            "k",
            "--witness",
            s(&p("c.wit")),
        ]);
    }
    let kill = Command::new("kill")
        .args(["-TERM", &daemon.child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let t = Instant::now();
    let status = loop {
        if let Some(st) = daemon.child.try_wait().unwrap() {
            break st;
        }
        assert!(
            t.elapsed() < Duration::from_secs(120),
            "the daemon exits after its drain"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let log = strip_ansi(&daemon.log());
    assert!(status.success(), "exit status {status:?}\n{log}");
    assert!(log.contains("SIGTERM, draining"), "{log}");
    assert!(
        log.contains("completed=9"),
        "every queued job finished in the drain:\n{log}"
    );
    assert!(!sock.exists(), "the socket is removed");
    let _ = std::fs::remove_dir_all(&dir);
}
