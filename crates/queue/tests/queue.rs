//! The queue against a real PostgreSQL server (one throwaway server per test): migrations,
//! idempotent submit, priorities, leases and their expiry, capped retries, guarded results,
//! cancellation, key digests, a worker feeding a CPU engine, and the 64-host simulation.

use std::sync::Arc;
use std::time::Duration;

use cuzk_formats::cuzk;
use cuzk_groth16::{ToxicWaste, generate_parameters_with_toxic_waste};
use cuzk_queue::sim::{SimConfig, simulate};
use cuzk_queue::tempdb::TempPostgres;
use cuzk_queue::{
    CancelOutcome, NewJob, Outcome, Queue, QueueConfig, State, WitnessRef, key_digest, worker,
};
use cuzk_scheduler::{Engine, EngineConfig, KeySource, Priority};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

const TIMEOUT: Duration = Duration::from_secs(10);

async fn server() -> (TempPostgres, Queue) {
    let pg = tokio::task::spawn_blocking(TempPostgres::start)
        .await
        .unwrap()
        .expect("a PostgreSQL server for the test");
    let q = Queue::connect(&pg.url(), 8, TIMEOUT).await.unwrap();
    (pg, q)
}

fn job(key: &str, p: Priority) -> NewJob {
    NewJob {
        request_id: None,
        key_id: key.into(),
        key_digest: "d".into(),
        priority: p,
        witness: WitnessRef::Inline(vec![1, 2, 3]),
        max_failures: 3,
    }
}

fn keys(k: &str) -> Vec<(String, String)> {
    vec![(k.to_owned(), "d".to_owned())]
}

fn done(proof: u8) -> Outcome {
    Outcome {
        proof: vec![proof],
        public_inputs: vec![],
        timings: serde_json::json!({"run_s": 0.0}),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrations_apply_once_from_hosts_starting_together() {
    let (pg, q) = server().await;
    let url = pg.url();
    let others: Vec<_> = (0..4)
        .map(|_| {
            let url = url.clone();
            tokio::spawn(async move { Queue::connect(&url, 2, TIMEOUT).await.map(|_| ()) })
        })
        .collect();
    for o in others {
        o.await.unwrap().unwrap();
    }
    assert_eq!(
        q.count("SELECT count(*) FROM refinery_schema_history")
            .await
            .unwrap(),
        2
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_duplicate_submit_yields_one_job() {
    let (_pg, q) = server().await;
    let mut j = job("k", Priority::Normal);
    j.request_id = Some("req-1".into());
    let a = q.submit(&j).await.unwrap();
    let b = q.submit(&j).await.unwrap();
    assert!(a.created && !b.created);
    assert_eq!(a.id, b.id);
    let many = q
        .submit_many(&[j.clone(), job("k", Priority::Low)])
        .await
        .unwrap();
    assert_eq!(many[0].id, a.id);
    assert!(!many[0].created && many[1].created);
    assert_eq!(
        q.count("SELECT count(*) FROM cuzk_jobs WHERE request_id = 'req-1'")
            .await
            .unwrap(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_go_by_priority_then_fifo_and_only_for_held_keys() {
    let (_pg, q) = server().await;
    let order = [
        Priority::Low,
        Priority::Normal,
        Priority::High,
        Priority::Normal,
        Priority::High,
    ];
    let mut ids = Vec::new();
    for p in order {
        ids.push(q.submit(&job("k", p)).await.unwrap().id);
    }
    let other = q.submit(&job("other", Priority::High)).await.unwrap().id;
    let mut wrong_digest = job("k", Priority::High);
    wrong_digest.key_digest = "e".into();
    let wrong = q.submit(&wrong_digest).await.unwrap().id;
    let got: Vec<i64> = q
        .claim("h", &keys("k"), 10, TIMEOUT)
        .await
        .unwrap()
        .iter()
        .map(|c| c.id)
        .collect();
    assert_eq!(got, vec![ids[2], ids[4], ids[1], ids[3], ids[0]]);
    for id in [other, wrong] {
        assert_eq!(q.job(id).await.unwrap().state, State::Queued);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_is_written_once_and_only_by_the_lease_holder() {
    let (_pg, q) = server().await;
    let id = q.submit(&job("k", Priority::Normal)).await.unwrap().id;
    let c = q.claim("a", &keys("k"), 1, TIMEOUT).await.unwrap();
    assert_eq!((c[0].id, c[0].attempt), (id, 1));
    assert!(
        q.claim("b", &keys("k"), 1, TIMEOUT)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(!q.complete(id, ("b", 1), "b", &done(2)).await.unwrap());
    assert!(!q.complete(id, ("a", 2), "a", &done(2)).await.unwrap());
    assert!(q.complete(id, ("a", 1), "host-a", &done(1)).await.unwrap());
    assert!(!q.complete(id, ("a", 1), "host-a", &done(3)).await.unwrap());
    assert!(!q.fail(id, ("a", 1), "late").await.unwrap());
    let j = q.job(id).await.unwrap();
    assert_eq!(j.state, State::Done);
    assert_eq!(j.proof, Some(vec![1]));
    assert_eq!(j.done_by.as_deref(), Some("host-a"));
    assert!(j.latency_s.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_lease_returns_the_job_and_retries_are_capped() {
    let (_pg, q) = server().await;
    let mut j = job("k", Priority::Normal);
    j.max_failures = 2;
    let id = q.submit(&j).await.unwrap().id;
    let short = Duration::from_millis(300);
    q.claim("a", &keys("k"), 1, short).await.unwrap();
    // A heartbeat within the lease keeps it.
    let held = q
        .heartbeat("host-a", "a", &[(id, 1)], short, (1, &[]))
        .await
        .unwrap();
    assert_eq!(held.len(), 1);
    assert_eq!(q.requeue_expired().await.unwrap(), 0);
    tokio::time::sleep(short * 2).await;
    assert_eq!(q.requeue_expired().await.unwrap(), 1);
    let row = q.job(id).await.unwrap();
    assert_eq!((row.state, row.failures), (State::Queued, 1));
    assert!(
        row.last_error.unwrap().contains("expired"),
        "last error kept"
    );
    // The old holder's heartbeat no longer renews it, and its result is refused.
    assert!(
        q.heartbeat("host-a", "a", &[(id, 1)], short, (1, &[]))
            .await
            .unwrap()
            .is_empty()
    );
    assert!(!q.complete(id, ("a", 1), "a", &done(1)).await.unwrap());
    let c = q.claim("b", &keys("k"), 1, TIMEOUT).await.unwrap();
    assert_eq!(c[0].attempt, 2);
    assert!(q.fail(id, ("b", 2), "b: boom").await.unwrap());
    let row = q.job(id).await.unwrap();
    assert_eq!((row.state, row.failures), (State::Failed, 2));
    assert_eq!(row.last_error.as_deref(), Some("b: boom"));
    assert_eq!(
        q.count("SELECT count(*) FROM cuzk_claims").await.unwrap(),
        2
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_stops_queued_jobs_at_once_and_flags_running_ones() {
    let (_pg, q) = server().await;
    let queued = q.submit(&job("k", Priority::Low)).await.unwrap().id;
    let running = q.submit(&job("k", Priority::High)).await.unwrap().id;
    let c = q.claim("a", &keys("k"), 1, TIMEOUT).await.unwrap();
    assert_eq!(c[0].id, running);
    assert_eq!(q.cancel(queued).await.unwrap(), CancelOutcome::Cancelled);
    assert_eq!(q.job(queued).await.unwrap().state, State::Cancelled);
    assert_eq!(q.cancel(running).await.unwrap(), CancelOutcome::Requested);
    let lease = q
        .heartbeat("host-a", "a", &[(running, 1)], TIMEOUT, (1, &[]))
        .await
        .unwrap();
    assert!(lease[0].cancel_requested);
    assert!(q.fail(running, ("a", 1), "cancelled").await.unwrap());
    let row = q.job(running).await.unwrap();
    assert_eq!((row.state, row.failures), (State::Cancelled, 0));
    assert_eq!(q.cancel(running).await.unwrap(), CancelOutcome::Finished);
    assert!(q.cancel(9999).await.is_err());
    let st = q.status().await.unwrap();
    assert_eq!(st.count(State::Cancelled), 2);
    assert_eq!(st.hosts[0].host, "host-a");
}

/// A CPU engine with one small key; its digest.
fn engine_with_key() -> (Arc<Engine>, String, cuzk_groth16::VerifyingKey, Vec<u8>) {
    let mut rng = ChaCha20Rng::seed_from_u64(7);
    let (r1cs, w) = cuzk_groth16::testing::demo::circuit(6, 2, &mut rng).unwrap();
    let (pk, _) =
        generate_parameters_with_toxic_waste(&r1cs, &ToxicWaste::random(&mut rng)).unwrap();
    let vk = pk.vk.clone();
    let config = EngineConfig {
        backend: cuzk_groth16::BackendChoice::Cpu,
        workers_per_device: cuzk_scheduler::Workers::Fixed(2),
        cpu_device_memory: 1 << 30,
        host_memory: Some(4 << 30),
        ..EngineConfig::default()
    };
    let engine = Engine::new(config).unwrap();
    engine
        .load_key(
            "small",
            KeySource::Memory {
                pk: Arc::new(pk),
                r1cs: Arc::new(r1cs),
            },
            None,
        )
        .unwrap();
    let mut witness = Vec::new();
    cuzk::write_witness(&mut witness, &w).unwrap();
    let digest = key_digest(&vk).unwrap();
    (Arc::new(engine), digest, vk, witness)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_proves_queued_jobs_and_refuses_a_witness_whose_checksum_differs() {
    let (pg, q) = server().await;
    let (engine, digest, vk, witness) = engine_with_key();
    let dir = std::env::temp_dir().join(format!("cuzk-queue-worker-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("w.wit");
    std::fs::write(&path, &witness).unwrap();
    let checksum = cuzk_queue::witness_checksum(&path).unwrap();
    let mut ids = Vec::new();
    for i in 0..12 {
        let w = if i % 2 == 0 {
            WitnessRef::Inline(witness.clone())
        } else {
            WitnessRef::Path {
                path: path.display().to_string(),
                checksum,
            }
        };
        let j = NewJob {
            request_id: None,
            key_id: "small".into(),
            key_digest: digest.clone(),
            priority: Priority::Normal,
            witness: w,
            max_failures: 2,
        };
        ids.push(q.submit(&j).await.unwrap().id);
    }
    let bad = NewJob {
        request_id: None,
        key_id: "small".into(),
        key_digest: digest.clone(),
        priority: Priority::Normal,
        witness: WitnessRef::Path {
            path: path.display().to_string(),
            checksum: [0; 32],
        },
        max_failures: 2,
    };
    let bad = q.submit(&bad).await.unwrap().id;
    let config = QueueConfig {
        url: pg.url(),
        host: Some("test-host".into()),
        lease_s: 5.0,
        heartbeat_s: 0.5,
        poll_ms: 50,
        ..QueueConfig::default()
    };
    let resolve: cuzk_queue::WitnessResolver = Arc::new(|p: &str| Ok(p.into()));
    let w = worker::spawn(q.clone(), engine.clone(), config, resolve);
    let pvk = cuzk_groth16::prepare_verifying_key(&vk);
    for id in &ids {
        let j = q
            .wait(
                *id,
                Some(Duration::from_secs(120)),
                Duration::from_millis(50),
            )
            .await
            .unwrap()
            .expect("the job finishes");
        assert_eq!(j.state, State::Done, "job {id}: {:?}", j.last_error);
        let proof = cuzk::read_proof("proof", &j.proof.unwrap()[..]).unwrap();
        let public = cuzk::read_witness("public inputs", &j.public_inputs.unwrap()[..]).unwrap();
        cuzk_groth16::verify_proof(&pvk, &proof, public.public_inputs()).unwrap();
        assert_eq!(j.done_by.as_deref(), Some("test-host"));
    }
    let j = q
        .wait(
            bad,
            Some(Duration::from_secs(60)),
            Duration::from_millis(50),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!((j.state, j.failures), (State::Failed, 2));
    assert!(j.last_error.unwrap().contains("checksum"));
    let st = q.status().await.unwrap();
    assert_eq!(st.hosts.len(), 1);
    assert_eq!(st.hosts[0].capacity, 2);
    assert!(st.hosts[0].keys[0].starts_with("small:"));
    w.finish(TIMEOUT).await;
    assert_eq!(q.status().await.unwrap().hosts[0].capacity, 0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The job names the file by its trailer; the engine's read checks the contents against it,
/// so a file changed in place (trailer kept) fails the job rather than proving another witness.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_witness_changed_under_its_checksum_fails_in_the_engines_read() {
    let (pg, q) = server().await;
    let (engine, digest, _vk, mut witness) = engine_with_key();
    let dir = std::env::temp_dir().join(format!("cuzk-queue-changed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("w.wit");
    // A byte of the first witness element, past the 9-byte header and the two lengths.
    witness[9 + 16 + 3] ^= 1;
    std::fs::write(&path, &witness).unwrap();
    let mut j = job("small", Priority::Normal);
    j.key_digest = digest;
    j.max_failures = 1;
    j.witness = WitnessRef::Path {
        path: path.display().to_string(),
        checksum: cuzk_queue::witness_checksum(&path).unwrap(),
    };
    let id = q.submit(&j).await.unwrap().id;
    let config = QueueConfig {
        url: pg.url(),
        host: Some("h".into()),
        poll_ms: 50,
        ..QueueConfig::default()
    };
    let resolve: cuzk_queue::WitnessResolver = Arc::new(|p: &str| Ok(p.into()));
    let w = worker::spawn(q.clone(), engine, config, resolve);
    let j = q
        .wait(id, Some(Duration::from_secs(60)), Duration::from_millis(20))
        .await
        .unwrap()
        .expect("the job finishes");
    assert_eq!(j.state, State::Failed);
    assert!(j.last_error.unwrap().contains("checksum mismatch"));
    w.finish(TIMEOUT).await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// A host wakes on the queue's notification: with a poll far longer than the test, a job
/// submitted while the host idles is claimed and proved at once.
/// A host named `name` on `url`, idle (its first claim finds nothing, then it waits on its poll
/// of 10 minutes or a notification), proves a job submitted through `q`.
async fn an_idle_host_proves_a_submit(q: &Queue, url: &str, name: &str) {
    let (engine, digest, _vk, witness) = engine_with_key();
    let config = QueueConfig {
        url: url.to_owned(),
        host: Some(name.into()),
        poll_ms: 600_000,
        ..QueueConfig::default()
    };
    let host = Queue::open_host(url, 4, TIMEOUT).unwrap();
    let resolve: cuzk_queue::WitnessResolver = Arc::new(|p: &str| Ok(p.into()));
    let w = worker::spawn(host, engine, config, resolve);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut j = job("small", Priority::Normal);
    j.key_digest = digest;
    j.witness = WitnessRef::Inline(witness);
    let id = q.submit(&j).await.unwrap().id;
    let j = q
        .wait(id, Some(Duration::from_secs(60)), Duration::from_millis(20))
        .await
        .unwrap()
        .expect("the idle host was woken and proved the job");
    assert_eq!(j.state, State::Done, "{:?}", j.last_error);
    assert_eq!(j.done_by.as_deref(), Some(name));
    w.finish(TIMEOUT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_host_is_woken_by_a_submit() {
    let (pg, q) = server().await;
    an_idle_host_proves_a_submit(&q, &pg.url(), "idle-host").await;
}

#[path = "../../../tests/support/certs.rs"]
mod certs;

/// The test's own server with `ssl = on` and a certificate of the test's CA: a host dialling
/// with `sslmode=verify-full` (woken by LISTEN over TLS too) claims and proves; one given
/// another CA as its root is refused with a line that says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verify_full_host_proves_over_tls_and_a_wrong_root_is_refused() {
    let ca = certs::Ca::new("cuzk test CA");
    let server_cert = ca.leaf("postgres", false);
    let pg = tokio::task::spawn_blocking(move || {
        TempPostgres::start_with_tls(&server_cert.cert, &server_cert.key)
    })
    .await
    .unwrap()
    .expect("a PostgreSQL server with TLS for the test");
    let dir = std::env::temp_dir().join(format!("cuzk-queue-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (ca_file, wrong_file) = (dir.join("ca.pem"), dir.join("wrong.pem"));
    std::fs::write(&ca_file, ca.pem()).unwrap();
    std::fs::write(&wrong_file, certs::Ca::new("another CA").pem()).unwrap();
    let url = |mode: &str, root: &std::path::Path| {
        format!("{}?sslmode={mode}&sslrootcert={}", pg.url(), root.display())
    };

    let wrong = Queue::connect(&url("verify-full", &wrong_file), 2, TIMEOUT)
        .await
        .expect_err("a server certificate of another CA");
    assert!(
        wrong.to_string().contains("not signed by sslrootcert"),
        "{wrong}"
    );

    let verified = url("verify-full", &ca_file);
    let q = Queue::connect(&verified, 4, TIMEOUT).await.unwrap();
    let on_tls = "SELECT count(*) FROM pg_stat_ssl WHERE pid = pg_backend_pid() AND ssl";
    assert_eq!(q.count(on_tls).await.unwrap(), 1);
    let plain = Queue::open(&format!("{}?sslmode=disable", pg.url()), 2, TIMEOUT).unwrap();
    assert_eq!(plain.count(on_tls).await.unwrap(), 0);

    an_idle_host_proves_a_submit(&q, &verified, "tls-host").await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// A row queued by an older client names its witness file by a whole-file SHA-256: the claim
/// hands it over as refused, with the reason, and the other jobs of the claim are unaffected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_with_an_old_sha256_digest_is_refused_clearly() {
    let (_pg, q) = server().await;
    let inserted = q
        .count(
            "WITH i AS (INSERT INTO cuzk_jobs (key_id, key_digest, priority, witness_path,
                                                witness_sha256)
                        VALUES ('k', 'd', 2, '/old.wit', decode(repeat('00', 32), 'hex'))
                        RETURNING id) SELECT count(*) FROM i",
        )
        .await
        .unwrap();
    assert_eq!(inserted, 1);
    q.submit(&job("k", Priority::Normal)).await.unwrap();
    let c = q.claim("a", &keys("k"), 2, TIMEOUT).await.unwrap();
    assert_eq!(c.len(), 2);
    assert!(c[0].witness.as_ref().unwrap_err().contains("SHA-256"));
    assert_eq!(c[1].witness, Ok(WitnessRef::Inline(vec![1, 2, 3])));
}

/// The scale check: 64 simulated hosts, 10,000 jobs, no job claimed twice. Prints the
/// throughput and latency figures (BENCHMARKS.md records them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_hosts_claim_ten_thousand_jobs_none_twice() {
    let pg = tokio::task::spawn_blocking(TempPostgres::start)
        .await
        .unwrap()
        .expect("a PostgreSQL server for the test");
    let config = SimConfig {
        hosts: 64,
        jobs: 10_000,
        slots: 2,
        job_time: Duration::from_millis(20),
        poll: Duration::from_millis(20),
    };
    let q = Queue::open_host(&pg.url(), config.hosts, TIMEOUT).unwrap();
    q.migrate().await.unwrap();
    let r = simulate(&q, &config).await.unwrap();
    println!("queue simulation, 64 hosts x 2 slots, 10000 jobs of 20 ms: {r}");
    assert_eq!(r.double_claims_seen, 0);
    assert_eq!(r.double_claims_recorded, 0);
    assert_eq!(r.claims, 10_000);
    assert_eq!(r.done, 10_000);
}
