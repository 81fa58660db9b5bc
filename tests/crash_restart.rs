//! `kill -9` of `cuzk daemon` (the real binary, CPU backend) while it proves, then a restart
//! on the same socket: the stale socket left behind must not block it, it serves at once, and
//! the next proof verifies. (A test target of `crates/cuzk`, which provides the binary;
//! `cargo xtask reliability` reads its `reliability:` line.)

use std::os::unix::fs::FileTypeExt;
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

#[test]
fn kill_9_during_a_proof_then_a_restart_serves_at_once() {
    let dir = std::env::temp_dir().join(format!("cuzk-crash-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let p = |n: &str| -> PathBuf { dir.join(n) };
    // Large enough that a proof is still running when the kill lands.
    files::circuit_and_key(&dir, 14);
    let sock = p("d.sock");
    std::fs::write(
        p("cuzk.toml"),
        format!(
            "listen = \"unix:{}\"\nparam_dir = \"{}\"\nbackend = \"cpu\"\nworkers_per_device = 1\nhost_memory = 4294967296\ncpu_device_memory = 1073741824\n[[keys]]\nid = \"k\"\npk = \"c.pk\"\nr1cs = \"c.r1cs\"\n",
            s(&sock),
            s(&dir)
        ),
    )
    .unwrap();
    let d = format!("unix:{}", s(&sock));
    let (mut first, first_took) = Daemon::start(&p("cuzk.toml"));
    let mut lost = Vec::new();
    for _ in 0..3 {
        let ids = ok(&[
            "submit",
            "--daemon",
            &d,
            "--key",
            "k",
            "--witness",
            s(&p("c.wit")),
        ]);
        lost.push(ids.trim().to_owned());
    }
    // Kill it while a job is inside a phase.
    let t = Instant::now();
    loop {
        let st: serde_json::Value =
            serde_json::from_str(&ok(&["status", "--daemon", &d, "--json"])).unwrap();
        let busy = st["running"].as_u64().unwrap_or(0) > 0
            && st["devices"][0]["workers"].as_array().is_some_and(|w| {
                w.iter()
                    .any(|w| w["phase"].as_str().is_some_and(|p| !p.is_empty()))
            });
        if busy {
            assert_eq!(
                st["completed"].as_u64(),
                Some(0),
                "killed before any proof finished: {st}"
            );
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(120),
            "no job started: {st}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let kill = Command::new("kill")
        .args(["-KILL", &first.child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let status = first.child.wait().unwrap();
    assert!(!status.success(), "SIGKILL ends it: {status:?}");
    let meta = std::fs::symlink_metadata(&sock).expect("a killed daemon leaves its socket");
    assert!(meta.file_type().is_socket());

    // The restart finds the stale socket, removes it, and serves.
    let (mut second, took) = Daemon::start(&p("cuzk.toml"));
    assert!(
        second.startup.contains("removing a stale socket"),
        "{}",
        second.startup
    );
    files::prove_and_verify(&dir, &["--daemon", &d]);
    // The killed daemon's jobs are gone with it (in-memory mode): their ids are unknown.
    let (id, token) = lost[0].split_once(' ').expect("id and token");
    let e = cuzk(&[
        "await",
        "--daemon",
        &d,
        "--job",
        id,
        "--token",
        token,
        "--proof",
        s(&p("x")),
    ]);
    assert!(!e.status.success());
    assert!(
        String::from_utf8_lossy(&e.stderr).contains("no job"),
        "{e:?}"
    );
    let kill = Command::new("kill")
        .args(["-TERM", &second.child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    assert!(second.child.wait().unwrap().success());
    assert!(!sock.exists(), "a clean exit removes the socket");
    // Both start-ups include preloading the 2^14 key; "at once" means the restart waits on
    // nothing the killed daemon left (no lock, no retry on the stale socket).
    assert!(
        took < first_took * 2 + Duration::from_secs(10),
        "restart took {took:?}, the first start {first_took:?}"
    );
    println!(
        "reliability: crash-restart kills=1 first_start_s={:.1} restart_s={:.1} stale_socket_removed=true proofs_after=1",
        first_took.as_secs_f64(),
        took.as_secs_f64()
    );
    let _ = std::fs::remove_dir_all(&dir);
}
