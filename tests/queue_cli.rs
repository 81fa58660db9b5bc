//! Queue mode end to end: `cuzk daemon` processes on the CPU backend claiming from a real
//! PostgreSQL server (started by each test), and the queue's clients (`submit`, `await`,
//! `cancel`, `status`, `bench` with `--queue`). Every job is done once and its proof verifies;
//! a daemon killed with SIGKILL loses no job; a database restart loses none; a duplicate
//! submit is one job; a cancel from another host stops a running job.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cuzk_formats::cuzk;
use cuzk_queue::tempdb::TempPostgres;
use cuzk_queue::{NewJob, Queue, State, WitnessRef};
use cuzk_scheduler::Priority;

#[path = "support/run.rs"]
mod run;
use run::ok;

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 temp path")
}

/// A server, a parameter directory with one key, and the daemons started on them.
struct Cluster {
    dir: PathBuf,
    pg: TempPostgres,
    rt: tokio::runtime::Runtime,
    queue: Queue,
    digest: String,
    pvk: cuzk_groth16::PreparedVerifyingKey,
    daemons: Vec<(String, Child)>,
}

impl Cluster {
    fn new(name: &str, log_constraints: u32) -> Self {
        let dir = std::env::temp_dir().join(format!("cuzk-queue-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let p = |n: &str| s(&dir.join(n)).to_owned();
        let log = log_constraints.to_string();
        ok(&[
            "circuit",
            "--log-constraints",
            &log,
            "--r1cs",
            &p("k.r1cs"),
            "--witness",
            &p("k.wit"),
        ]);
        ok(&[
            "setup",
            "--r1cs",
            &p("k.r1cs"),
            "--pk",
            &p("k.pk"),
            "--vk",
            &p("k.vk"),
        ]);
        let vk = cuzk::read_verifying_key("k.vk", std::fs::File::open(dir.join("k.vk")).unwrap())
            .unwrap();
        let pg = TempPostgres::start().expect("a PostgreSQL server for the test");
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let queue = rt
            .block_on(Queue::connect(&pg.url(), 4, Duration::from_secs(10)))
            .unwrap();
        Self {
            dir,
            pg,
            rt,
            queue,
            digest: cuzk_queue::key_digest(&vk).unwrap(),
            pvk: cuzk_groth16::prepare_verifying_key(&vk),
            daemons: Vec::new(),
        }
    }

    fn path(&self, n: &str) -> PathBuf {
        self.dir.join(n)
    }

    /// Starts `cuzk daemon` named `name` with a lease of `lease_s`.
    fn daemon(&mut self, name: &str, lease_s: f64) {
        let config = format!(
            r#"listen = "unix:{sock}"
param_dir = "{dir}"
backend = "cpu"
workers_per_device = 2
cpu_device_memory = 1073741824
host_memory = 2147483648
drain_timeout_s = 10.0

[[keys]]
id = "small"
pk = "k.pk"
r1cs = "k.r1cs"

[queue]
url = "{url}"
host = "{name}"
lease_s = {lease_s}
heartbeat_s = {hb}
poll_ms = 50
"#,
            sock = s(&self.path(&format!("{name}.sock"))),
            dir = s(&self.dir),
            url = self.pg.url(),
            hb = lease_s / 5.0,
        );
        let cfg = self.path(&format!("{name}.toml"));
        std::fs::write(&cfg, config).unwrap();
        let log = std::fs::File::create(self.path(&format!("{name}.log"))).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_cuzk"))
            .args(["daemon", "--backend", "cpu", "--config", s(&cfg)])
            .env("CUZK_LOG", "info")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start cuzk daemon");
        self.daemons.push((name.to_owned(), child));
    }

    fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.path(&format!("{name}.log"))).unwrap_or_default()
    }

    fn count(&self, sql: &str) -> i64 {
        self.rt.block_on(self.queue.count(sql)).unwrap()
    }

    /// Waits until `cond` holds, or fails with every daemon's log.
    fn until(&self, what: &str, secs: u64, mut cond: impl FnMut(&Self) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(secs);
        while !cond(self) {
            if Instant::now() > deadline {
                let logs: String = self
                    .daemons
                    .iter()
                    .map(|(n, _)| format!("--- {n}\n{}", self.log(n)))
                    .collect();
                panic!("timed out waiting for {what}\n{logs}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits until every daemon has written its host row.
    fn hosts_up(&self, n: i64) {
        self.until("the hosts' first heartbeats", 120, |c| {
            c.count("SELECT count(*) FROM cuzk_hosts WHERE capacity > 0") >= n
        });
    }

    /// Queues `n` jobs of the key, alternating inline and path witnesses and the priorities.
    fn submit(&self, n: usize) -> Vec<i64> {
        let witness = std::fs::read(self.path("k.wit")).unwrap();
        let checksum = cuzk_queue::witness_checksum(&self.path("k.wit")).unwrap();
        let jobs: Vec<NewJob> = (0..n)
            .map(|i| NewJob {
                request_id: Some(format!("job-{i}")),
                key_id: "small".into(),
                key_digest: self.digest.clone(),
                priority: Priority::ALL[i % 3],
                witness: if i % 2 == 0 {
                    WitnessRef::Inline(witness.clone())
                } else {
                    WitnessRef::Path {
                        path: s(&self.path("k.wit")).to_owned(),
                        checksum,
                    }
                },
                max_failures: 3,
            })
            .collect();
        let r = self.rt.block_on(self.queue.submit_many(&jobs)).unwrap();
        r.iter().map(|s| s.id).collect()
    }

    fn done(&self) -> i64 {
        self.count("SELECT count(*) FROM cuzk_jobs WHERE state = 'done'")
    }

    /// Every job is done, by one host, with a proof that verifies.
    fn check_all(&self, ids: &[i64]) {
        for id in ids {
            let j = self.rt.block_on(self.queue.job(*id)).unwrap();
            assert_eq!(j.state, State::Done, "job {id}: {:?}", j.last_error);
            let proof = cuzk::read_proof("proof", &j.proof.unwrap()[..]).unwrap();
            let public =
                cuzk::read_witness("public inputs", &j.public_inputs.unwrap()[..]).unwrap();
            cuzk_groth16::verify_proof(&self.pvk, &proof, public.public_inputs())
                .unwrap_or_else(|e| panic!("job {id}: the proof does not verify: {e}"));
            assert!(j.done_by.is_some());
        }
    }

    /// SIGTERM to every daemon still running; each must drain and exit 0.
    fn stop_all(&mut self) {
        for (name, mut child) in std::mem::take(&mut self.daemons) {
            if child.try_wait().unwrap().is_some() {
                continue;
            }
            let st = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status()
                .unwrap();
            assert!(st.success());
            let status = child.wait().unwrap();
            assert!(
                status.success(),
                "daemon {name} exited {status}: {}",
                self.log(name.as_str())
            );
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for (_, c) in &mut self.daemons {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn four_daemons_prove_two_hundred_jobs_each_exactly_once() {
    let mut c = Cluster::new("four", 6);
    for name in ["d0", "d1", "d2", "d3"] {
        c.daemon(name, 10.0);
    }
    c.hosts_up(4);
    let ids = c.submit(200);
    c.until("200 jobs done", 240, |c| c.done() == 200);
    c.check_all(&ids);
    assert_eq!(
        c.count("SELECT count(*) FROM cuzk_claims"),
        200,
        "every job claimed once"
    );
    let hosts = c.count("SELECT count(DISTINCT done_by) FROM cuzk_jobs");
    assert!(
        hosts >= 2,
        "the work spread over the hosts ({hosts} made proofs)"
    );
    let url = c.pg.url();
    let status = ok(&["status", "--queue", &url]);
    assert!(status.contains("done 200"), "{status}");
    for name in ["d0", "d1", "d2", "d3"] {
        assert!(status.contains(&format!("host {name} (")), "{status}");
    }
    // The bench client across all four hosts.
    let bench = ok(&[
        "bench",
        "--queue",
        &url,
        "--key",
        "small",
        "--vk",
        s(&c.path("k.vk")),
        "--witness",
        s(&c.path("k.wit")),
        "--proofs",
        "8",
        "--concurrency",
        "4",
    ]);
    assert!(bench.contains("failures 0"), "{bench}");
    c.stop_all();
    let status = ok(&["status", "--queue", &url, "--json"]);
    let v: serde_json::Value = serde_json::from_str(&status).unwrap();
    assert_eq!(v["jobs"]["done"], 208);
    assert!(
        v["hosts"]
            .as_array()
            .unwrap()
            .iter()
            .all(|h| h["capacity"] == 0),
        "stopped hosts report no capacity: {status}"
    );
}

#[test]
fn a_killed_daemons_jobs_finish_on_another_after_the_lease_expires() {
    let mut c = Cluster::new("kill", 6);
    c.daemon("a", 2.0);
    c.hosts_up(1);
    let ids = c.submit(60);
    c.until("daemon a to be proving", 120, |c| c.done() >= 3);
    // Killed while it holds claims: between two of them it may hold none for a moment.
    c.until("daemon a to hold a job", 120, |c| {
        c.count("SELECT count(*) FROM cuzk_jobs WHERE state = 'running'") >= 1
    });
    let (_, mut a) = c.daemons.remove(0);
    a.kill().unwrap(); // SIGKILL
    a.wait().unwrap();
    // A statement a sent just before it died still runs on the server; let it land.
    std::thread::sleep(Duration::from_millis(500));
    let held: Vec<i64> = c.rt.block_on(async {
        let st = c.queue.status().await.unwrap();
        assert_eq!(st.hosts[0].host, "a");
        let mut held = Vec::new();
        for id in &ids {
            let j = c.queue.job(*id).await.unwrap();
            if j.state == State::Running {
                held.push(*id);
            }
        }
        held
    });
    assert!(!held.is_empty(), "daemon a held jobs when it was killed");
    c.daemon("b", 2.0);
    c.until("60 jobs done", 240, |c| c.done() == 60);
    c.check_all(&ids);
    for id in held {
        let j = c.rt.block_on(c.queue.job(id)).unwrap();
        assert_eq!(j.done_by.as_deref(), Some("b"), "job {id}");
        assert!(j.attempt >= 2, "job {id} was claimed again");
        assert!(j.last_error.unwrap().contains("expired"), "job {id}");
    }
    c.stop_all();
}

#[test]
fn daemons_reconnect_after_postgres_restarts_and_every_job_finishes() {
    let mut c = Cluster::new("restart", 6);
    c.daemon("r0", 10.0);
    c.daemon("r1", 10.0);
    c.hosts_up(2);
    let ids = c.submit(80);
    c.until("10 jobs done", 120, |c| c.done() >= 10);
    c.pg.stop().unwrap();
    std::thread::sleep(Duration::from_secs(2));
    c.pg.start_again().unwrap();
    c.until("80 jobs done after the restart", 240, |c| c.done() == 80);
    c.check_all(&ids);
    assert!(
        c.log("r0").contains("retrying") || c.log("r1").contains("retrying"),
        "the daemons saw the database go away"
    );
    c.stop_all();
}

#[test]
fn a_duplicate_submit_is_one_job_and_a_cancel_from_another_host_stops_a_running_one() {
    // 2^16 constraints: a CPU proof of ~2 s on a quiet 2-core machine, several heartbeats
    // (0.6 s) long, so the cancel lands while it runs (2^14, ~0.6 s, raced it).
    let mut c = Cluster::new("cancel", 16);
    c.daemon("c0", 3.0);
    c.hosts_up(1);
    let url = c.pg.url();
    let submit = |rid: &str| {
        ok(&[
            "submit",
            "--queue",
            &url,
            "--key",
            "small",
            "--vk",
            s(&c.path("k.vk")),
            "--witness",
            s(&c.path("k.wit")),
            "--request-id",
            rid,
        ])
        .trim()
        .to_owned()
    };
    let first = submit("same");
    assert_eq!(submit("same"), first, "a resubmit answers the first job");
    assert_eq!(
        c.count("SELECT count(*) FROM cuzk_jobs WHERE request_id = 'same'"),
        1
    );
    let proof = c.path("p.proof");
    let public = c.path("p.public");
    ok(&[
        "await",
        "--queue",
        &url,
        "--job",
        &first,
        "--proof",
        s(&proof),
        "--public-out",
        s(&public),
    ]);
    ok(&[
        "verify",
        "--vk",
        s(&c.path("k.vk")),
        "--proof",
        s(&proof),
        "--public",
        s(&public),
    ]);
    // A second job, cancelled by this (other) host while daemon c0 proves it.
    let id = submit("to-cancel");
    let idn: i64 = id.parse().unwrap();
    c.until("the job to run", 60, |c| {
        c.count(&format!(
            "SELECT count(*) FROM cuzk_jobs WHERE id = {idn} AND state = 'running'"
        )) == 1
    });
    let out = ok(&["cancel", "--queue", &url, "--job", &id]);
    assert!(out.contains("cancel requested"), "{out}");
    c.until("the job to be cancelled", 60, |c| {
        c.count(&format!(
            "SELECT count(*) FROM cuzk_jobs WHERE id = {idn} AND state = 'cancelled'"
        )) == 1
    });
    let err = run::fails(&["await", "--queue", &url, "--job", &id, "--proof", s(&proof)]);
    assert!(err.contains("cancelled"), "{err}");
    c.stop_all();
}
