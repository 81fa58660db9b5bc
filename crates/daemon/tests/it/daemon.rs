//! The daemon on the CPU backend, started by each test on a temporary socket: keys, submit,
//! await, cancel, status, metrics, idempotency, bad requests among good ones, many clients,
//! a client gone mid-stream, paths kept inside the parameter directory, TCP and its token,
//! health, the HTTP port, and the drain on shutdown.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use cuzk_daemon::client::{self, Client};
use cuzk_daemon::pb;
use cuzk_daemon::{Daemon, DaemonConfig};
use cuzk_formats::cuzk;
use cuzk_groth16::{ToxicWaste, generate_parameters_with_toxic_waste};
use cuzk_scheduler::Engine;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use tonic::Code;

use crate::support::{Running, write_circuit};

/// A circuit's files in a parameter directory, and its witness.
struct Fixture {
    vk: cuzk_groth16::VerifyingKey,
    witness: Vec<u8>,
    /// A witness of the right length that does not satisfy the circuit.
    unsatisfied: Vec<u8>,
}

fn make(dir: &Path, name: &str, log: u32, seed: u64) -> Fixture {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let (r1cs, w) = cuzk_groth16::testing::demo::circuit(log, 2, &mut rng).unwrap();
    let (pk, _) =
        generate_parameters_with_toxic_waste(&r1cs, &ToxicWaste::random(&mut rng)).unwrap();
    let (witness, unsatisfied) = write_circuit(dir, name, &r1cs, &pk, &w);
    std::fs::write(dir.join(format!("{name}.wit")), &witness).unwrap();
    Fixture {
        vk: pk.vk,
        witness,
        unsatisfied,
    }
}

fn params() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("cuzk-daemon-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    })
}

fn small() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| make(params(), "small", 8, 1))
}

fn big() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| make(params(), "big", 13, 2))
}

fn config(name: &str) -> DaemonConfig {
    let sock = params().join(format!("{name}.sock"));
    DaemonConfig {
        listen: Some(format!("unix:{}", sock.display())),
        param_dir: params().to_owned(),
        backend: "cpu".into(),
        host_memory: Some(4 << 30),
        cpu_device_memory: 1 << 30,
        drain_timeout_s: 30.0,
        ..DaemonConfig::default()
    }
}

async fn start(config: DaemonConfig) -> Running {
    let engine = Engine::new(config.engine().unwrap()).unwrap();
    Running::start(config, engine).await
}

fn load_req(id: &str, pk: &str, r1cs: &str) -> pb::LoadKeyRequest {
    pb::LoadKeyRequest {
        key_id: id.into(),
        pk_path: pk.into(),
        r1cs_path: r1cs.into(),
        devices: vec![],
        trusted: false,
    }
}

async fn load(c: &mut Client, id: &str, name: &str) -> pb::KeyInfo {
    c.load_key(load_req(id, &format!("{name}.pk"), &format!("{name}.r1cs")))
        .await
        .unwrap()
        .into_inner()
        .key
        .unwrap()
}

/// A daemon of the default config with the small key loaded as "k", and a client.
async fn serving_small(name: &str) -> (Running, Client) {
    let d = start(config(name)).await;
    let mut c = d.client().await;
    load(&mut c, "k", "small").await;
    (d, c)
}

fn header(key: &str) -> pb::SubmitHeader {
    pb::SubmitHeader {
        key_id: key.into(),
        ..Default::default()
    }
}

async fn submit(
    c: &mut Client,
    h: pb::SubmitHeader,
    witness: &[u8],
) -> Result<pb::SubmitResponse, tonic::Status> {
    let msgs = client::bytes_stream(h, witness);
    c.submit(tokio_stream::iter(msgs))
        .await
        .map(|r| r.into_inner())
}

async fn wait(c: &mut Client, s: &pb::SubmitResponse) -> Result<pb::ProofResponse, tonic::Status> {
    c.r#await(pb::AwaitRequest {
        job_id: s.job_id.clone(),
        job_token: s.job_token.clone(),
        timeout_ms: 120_000,
    })
    .await
    .map(|r| r.into_inner())
}

/// Checks a Done answer's proof with the pairing and its report of where it ran.
fn verify(f: &Fixture, r: &pb::ProofResponse) {
    assert_eq!(r.state, pb::JobState::Done as i32);
    let proof = cuzk::read_proof("proof", &r.proof[..]).unwrap();
    let public = cuzk::read_witness("public inputs", &r.public_inputs[..]).unwrap();
    let pvk = cuzk_groth16::prepare_verifying_key(&f.vk);
    cuzk_groth16::verify_proof(&pvk, &proof, public.public_inputs()).unwrap();
    let t = r.timings.as_ref().expect("timings");
    assert!(
        t.run_s > 0.0 && !t.phases.is_empty(),
        "per-phase timings: {t:?}"
    );
    assert!(t.phases.iter().any(|p| p.phase.starts_with("MSM")), "{t:?}");
}

async fn status(c: &mut Client) -> pb::StatusResponse {
    c.status(pb::StatusRequest {}).await.unwrap().into_inner()
}

/// Waits (bounded) until `f` holds for the daemon's status.
async fn until(
    c: &mut Client,
    what: &str,
    f: impl Fn(&pb::StatusResponse) -> bool,
) -> pb::StatusResponse {
    let t = Instant::now();
    loop {
        let s = status(c).await;
        if f(&s) {
            return s;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "timed out waiting for {what}: {s:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn load_submit_await_status_metrics() {
    let f = small();
    let d = start(config("basic")).await;
    let sock = d.addr.strip_prefix("unix:").unwrap().to_owned();
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&sock).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the socket is private");
    let mut c = d.client().await;
    let info = load(&mut c, "k", "small").await;
    assert_eq!(info.witness_size, f.witness.len() as u64);
    assert_eq!(info.constraints, 1 << 8);
    let again = c
        .load_key(load_req("k", "small.pk", "small.r1cs"))
        .await
        .unwrap_err();
    assert_eq!(again.code(), Code::AlreadyExists, "{again:?}");

    let s = submit(&mut c, header("k"), &f.witness).await.unwrap();
    assert_eq!(s.job_id.len(), 32);
    assert_ne!(s.job_id, s.job_token);
    let r = wait(&mut c, &s).await.unwrap();
    verify(f, &r);
    assert_eq!(r.job_id, s.job_id);

    // Another client's guess: the id without its token reads as unknown.
    let e = c
        .r#await(pb::AwaitRequest {
            job_id: s.job_id.clone(),
            job_token: "0".repeat(32),
            timeout_ms: 10,
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound);

    // A path on the daemon's host, and Prove in one call.
    let mut h = header("k");
    h.witness = Some(pb::submit_header::Witness::WitnessPath(
        params().join("small.wit").display().to_string(),
    ));
    let msgs = vec![pb::SubmitRequest {
        msg: Some(pb::submit_request::Msg::Header(h)),
    }];
    let r = c
        .prove(tokio_stream::iter(msgs))
        .await
        .unwrap()
        .into_inner();
    verify(f, &r);

    let st = status(&mut c).await;
    assert_eq!(st.completed, 2);
    assert_eq!(st.devices.len(), 1);
    assert_eq!(st.devices[0].keys, vec!["k".to_string()]);
    assert!(st.devices[0].budget_total > 0 && st.devices[0].workers.len() == 2);
    assert_eq!(st.queue.len(), 3);
    let keys = c
        .list_keys(pb::ListKeysRequest {})
        .await
        .unwrap()
        .into_inner()
        .keys;
    assert_eq!(keys.len(), 1);

    let m = c
        .metrics(pb::MetricsRequest {})
        .await
        .unwrap()
        .into_inner()
        .text;
    assert!(m.contains("cuzk_proofs_completed_total 2"), "{m}");
    assert!(
        m.contains("cuzk_phase_seconds_count{phase=\"MSM H (G1)\"} 2")
            || m.contains("cuzk_phase_seconds_count{phase="),
        "{m}"
    );
    assert!(m.contains("cuzk_queue_depth{priority=\"high\"} 0"), "{m}");
    // Each Prover call is timed by method; this Metrics call is not counted before its answer.
    assert!(
        m.contains("cuzk_rpc_seconds_count{method=\"ListKeys\"} 1")
            && m.contains("cuzk_rpc_seconds_bucket{method=\"ListKeys\",le=\"+Inf\"} 1"),
        "{m}"
    );
    assert!(
        m.contains("cuzk_gpu_busy_seconds_total{device=\"0\"}"),
        "{m}"
    );

    let tl = c
        .timeline(pb::TimelineRequest { last_s: 0.0 })
        .await
        .unwrap()
        .into_inner();
    assert!(
        tl.spans.iter().any(|sp| sp.job_id == s.job_id),
        "timeline names the job"
    );

    c.unload_key(pb::UnloadKeyRequest { key_id: "k".into() })
        .await
        .unwrap();
    let e = submit(&mut c, header("k"), &f.witness).await.unwrap_err();
    assert_eq!(e.code(), Code::NotFound, "{e:?}");
    assert!(e.message().contains("unknown key"), "{e:?}");
    d.stop().await;
    assert!(!Path::new(&sock).exists(), "the socket is removed at exit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_paths_stay_inside_the_parameter_directory() {
    small();
    let d = start(config("paths")).await;
    let mut c = d.client().await;
    let outside = std::env::temp_dir().join(format!("cuzk-outside-{}", std::process::id()));
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::copy(params().join("small.pk"), outside.join("small.pk")).unwrap();
    let link = params().join("escape.pk");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(outside.join("small.pk"), &link).unwrap();
    for (pk, why) in [
        ("../small.pk", "contains `..`"),
        (outside.join("small.pk").to_str().unwrap(), "outside"),
        ("escape.pk", "outside"),
        ("missing.pk", "does not exist"),
        ("", "empty"),
    ] {
        let e = c
            .load_key(load_req("k", pk, "small.r1cs"))
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{pk}: {e:?}");
        assert!(e.message().contains(why), "{pk}: {e:?}");
    }
    let e = c
        .load_key(load_req("bad/id", "small.pk", "small.r1cs"))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    // A circuit file given as the proving key is refused by its reader, not a panic.
    let e = c
        .load_key(load_req("k", "small.r1cs", "small.r1cs"))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    let _ = std::fs::remove_file(&link);
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resubmission_with_a_request_id_is_idempotent() {
    let f = small();
    let (d, mut c) = serving_small("idem").await;
    let mut h = header("k");
    h.request_id = "sector-42".into();
    let a = submit(&mut c, h.clone(), &f.witness).await.unwrap();
    let b = submit(&mut c, h.clone(), &f.witness).await.unwrap();
    assert!(!a.duplicate && b.duplicate);
    assert_eq!((&a.job_id, &a.job_token), (&b.job_id, &b.job_token));
    verify(f, &wait(&mut c, &b).await.unwrap());
    // Still the same job after it finished, with no witness sent at all.
    let h2 = pb::SubmitHeader { witness: None, ..h };
    let msgs = vec![pb::SubmitRequest {
        msg: Some(pb::submit_request::Msg::Header(h2)),
    }];
    let c2 = c
        .submit(tokio_stream::iter(msgs))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(c2.job_id, a.job_id);
    let st = status(&mut c).await;
    assert_eq!((st.completed, st.jobs), (1, 1));
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_stops_queued_and_running_jobs() {
    let f = big();
    let mut cfg = config("cancel");
    cfg.workers_per_device = Some(1);
    let d = start(cfg).await;
    let mut c = d.client().await;
    load(&mut c, "big", "big").await;
    let running = submit(&mut c, header("big"), &f.witness).await.unwrap();
    let queued = submit(&mut c, header("big"), &f.witness).await.unwrap();
    let cancel = |s: &pb::SubmitResponse| pb::CancelRequest {
        job_id: s.job_id.clone(),
        job_token: s.job_token.clone(),
    };
    assert!(
        c.cancel(cancel(&queued))
            .await
            .unwrap()
            .into_inner()
            .cancelled
    );
    assert_eq!(
        wait(&mut c, &queued).await.unwrap_err().code(),
        Code::Cancelled
    );
    until(&mut c, "the first job in its MSMs", |s| {
        s.devices[0].workers[0].job_id == running.job_id
            && s.devices[0].workers[0].phase.starts_with("MSM")
    })
    .await;
    // Await with a short timeout answers the state, not an error.
    let r = c
        .r#await(pb::AwaitRequest {
            job_id: running.job_id.clone(),
            job_token: running.job_token.clone(),
            timeout_ms: 1,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.state, pb::JobState::Running as i32);
    assert!(r.proof.is_empty() && !r.phase.is_empty());
    assert!(
        c.cancel(cancel(&running))
            .await
            .unwrap()
            .into_inner()
            .cancelled
    );
    let e = wait(&mut c, &running).await.unwrap_err();
    assert_eq!(e.code(), Code::Cancelled, "{e:?}");
    assert!(
        !c.cancel(cancel(&running))
            .await
            .unwrap()
            .into_inner()
            .cancelled
    );
    let st = until(&mut c, "idle", |s| s.running == 0).await;
    assert_eq!(st.cancelled, 2);
    assert_eq!(
        st.devices[0].staging_used, 0,
        "a cancelled job returns its staging room"
    );
    let m = c
        .metrics(pb::MetricsRequest {})
        .await
        .unwrap()
        .into_inner()
        .text;
    assert!(m.contains("cuzk_proofs_cancelled_total 2"), "{m}");
    let ok = submit(&mut c, header("big"), &f.witness).await.unwrap();
    verify(f, &wait(&mut c, &ok).await.unwrap());
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_requests_among_twenty_good_ones_fail_alone() {
    let f = small();
    let mut cfg = config("bad");
    cfg.max_message_bytes = 64 << 10;
    let d = start(cfg).await;
    let mut c = d.client().await;
    load(&mut c, "k", "small").await;
    let mut good = Vec::new();
    for i in 0..20 {
        let mut gc = c.clone();
        good.push(tokio::spawn(async move {
            let mut h = header("k");
            h.priority =
                [pb::Priority::Low, pb::Priority::Normal, pb::Priority::High][i % 3] as i32;
            let s = submit(&mut gc, h, &small().witness).await.unwrap();
            wait(&mut gc, &s).await
        }));
        if i == 10 {
            // Unknown key.
            let e = submit(&mut c, header("nope"), &f.witness)
                .await
                .unwrap_err();
            assert_eq!(e.code(), Code::NotFound, "{e:?}");
            // Wrong witness length.
            let e = submit(&mut c, header("k"), &f.witness[..f.witness.len() - 32])
                .await
                .unwrap_err();
            assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
            assert!(e.message().contains("wrong witness length"), "{e:?}");
            // A stream shorter than its header says.
            let mut msgs = client::bytes_stream(header("k"), &f.witness);
            let pb::SubmitRequest {
                msg: Some(pb::submit_request::Msg::Chunk(last)),
            } = msgs.last_mut().unwrap()
            else {
                panic!()
            };
            last.truncate(last.len() / 2);
            let e = c.submit(tokio_stream::iter(msgs)).await.unwrap_err();
            assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
            assert!(e.message().contains("truncated"), "{e:?}");
            // A corrupted byte: the witness file's digest does not match.
            let mut corrupt = f.witness.clone();
            corrupt[40] ^= 1;
            let e = submit(&mut c, header("k"), &corrupt).await.unwrap_err();
            assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
            // One message above max_message_bytes.
            let mut h = header("k");
            h.witness = Some(pb::submit_header::Witness::WitnessSize(
                f.witness.len() as u64
            ));
            let msgs = vec![
                pb::SubmitRequest {
                    msg: Some(pb::submit_request::Msg::Header(h)),
                },
                pb::SubmitRequest {
                    msg: Some(pb::submit_request::Msg::Chunk(vec![0; 100 << 10].into())),
                },
            ];
            let e = c.submit(tokio_stream::iter(msgs)).await.unwrap_err();
            assert_eq!(e.code(), Code::ResourceExhausted, "{e:?}");
            // No header first.
            let msgs = vec![pb::SubmitRequest {
                msg: Some(pb::submit_request::Msg::Chunk(vec![1].into())),
            }];
            let e = c.submit(tokio_stream::iter(msgs)).await.unwrap_err();
            assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
            // A witness that does not satisfy the circuit fails its job at Await.
            let s = submit(&mut c, header("k"), &f.unsatisfied).await.unwrap();
            let e = wait(&mut c, &s).await.unwrap_err();
            assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
        }
    }
    for g in good {
        verify(f, &g.await.unwrap().unwrap());
    }
    let st = status(&mut c).await;
    assert_eq!((st.completed, st.failed), (20, 1));
    assert_eq!(st.upload_bytes, 0);
    let m = c
        .metrics(pb::MetricsRequest {})
        .await
        .unwrap()
        .into_inner()
        .text;
    assert!(
        m.contains("cuzk_requests_rejected_total{code=\"INVALID_ARGUMENT\"} 4"),
        "{m}"
    );
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_concurrent_clients() {
    let f = small();
    let (d, mut c) = serving_small("fifty").await;
    let addr = d.addr.clone();
    let tasks: Vec<_> = (0..50)
        .map(|_| {
            let addr = addr.clone();
            tokio::spawn(async move {
                let mut c = client::connect(Some(&addr), None, None).await.unwrap();
                let msgs = client::bytes_stream(header("k"), &small().witness);
                c.prove(tokio_stream::iter(msgs))
                    .await
                    .map(|r| r.into_inner())
            })
        })
        .collect();
    // Status and Metrics answer quickly while every worker is busy.
    until(&mut c, "both workers busy", |s| s.running == 2).await;
    let mut slowest = Duration::ZERO;
    for _ in 0..20 {
        let t = Instant::now();
        status(&mut c).await;
        c.metrics(pb::MetricsRequest {}).await.unwrap();
        slowest = slowest.max(t.elapsed());
    }
    eprintln!("slowest Status + Metrics pair under load: {slowest:?}");
    assert!(slowest < Duration::from_millis(500), "{slowest:?}");
    let mut workers = std::collections::HashSet::new();
    for t in tasks {
        let r = t.await.unwrap().unwrap();
        verify(f, &r);
        workers.insert(r.worker);
    }
    assert_eq!(workers.len(), 2, "both workers served");
    assert_eq!(status(&mut c).await.completed, 50);
    d.stop().await;
}

/// Each connection is served by a thread of its own: past `MAX_CONNECTIONS` open at once, a new
/// connection waits until one closes, and is then served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_cap_wait_for_one_to_close() {
    let d = start(config("cap")).await;
    let path = d.addr.strip_prefix("unix:").unwrap().to_owned();
    // Connections that never speak HTTP/2 hold their threads.
    let mut idle = tokio::task::spawn_blocking(move || {
        (0..cuzk_daemon::MAX_CONNECTIONS)
            .map(|_| std::os::unix::net::UnixStream::connect(&path).unwrap())
            .collect::<Vec<_>>()
    })
    .await
    .unwrap();
    let addr = d.addr.clone();
    let late = tokio::spawn(async move {
        let mut c = client::connect(Some(&addr), None, None).await.unwrap();
        c.status(pb::StatusRequest {}).await.map(|r| r.into_inner())
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!late.is_finished(), "a connection past the cap was served");
    idle.pop();
    let s = tokio::time::timeout(Duration::from_secs(10), late)
        .await
        .expect("served once a connection closed")
        .unwrap()
        .unwrap();
    assert_eq!(s.completed, 0);
    drop(idle);
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_gone_mid_stream_frees_its_partial_witness() {
    let f = small();
    let (d, mut c) = serving_small("gone").await;
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let mut h = header("k");
    h.witness = Some(pb::submit_header::Witness::WitnessSize(
        f.witness.len() as u64
    ));
    tx.send(pb::SubmitRequest {
        msg: Some(pb::submit_request::Msg::Header(h)),
    })
    .await
    .unwrap();
    tx.send(pb::SubmitRequest {
        msg: Some(pb::submit_request::Msg::Chunk(
            f.witness[..1000].to_vec().into(),
        )),
    })
    .await
    .unwrap();
    let mut gone = client::connect(Some(&d.addr), None, None).await.unwrap();
    let call = tokio::spawn(async move {
        gone.submit(tokio_stream::wrappers::ReceiverStream::new(rx))
            .await
    });
    until(&mut c, "the upload held", |s| {
        s.upload_bytes == f.witness.len() as u64
    })
    .await;
    call.abort(); // the client dies: its connection and stream go
    let _ = call.await;
    drop(tx);
    let st = until(&mut c, "the upload freed", |s| s.upload_bytes == 0).await;
    assert_eq!(st.jobs, 0, "no job was made from a partial witness");
    let s = submit(&mut c, header("k"), &f.witness).await.unwrap();
    verify(f, &wait(&mut c, &s).await.unwrap());
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_with_and_without_a_token_and_the_http_port() {
    let f = small();
    let token_file = params().join("token");
    std::fs::write(&token_file, "s3cret-token-0123456789\n").unwrap();
    let mut cfg = config("tcp");
    cfg.listen = Some("127.0.0.1:0".into());
    cfg.token_file = Some(token_file);
    cfg.http_listen = Some("127.0.0.1:0".into());
    let d = start(cfg).await;
    assert!(d.addr.starts_with("127.0.0.1:"));
    for token in [None, Some("wrong-token-0123456789")] {
        let mut c = client::connect(Some(&d.addr), token, None).await.unwrap();
        let e = c.status(pb::StatusRequest {}).await.unwrap_err();
        assert_eq!(e.code(), Code::Unauthenticated, "{e:?}");
    }
    let mut c = client::connect(Some(&d.addr), Some("s3cret-token-0123456789"), None)
        .await
        .unwrap();
    load(&mut c, "k", "small").await;
    let s = submit(&mut c, header("k"), &f.witness).await.unwrap();
    verify(f, &wait(&mut c, &s).await.unwrap());
    // A witness path over TCP, with no witness_dir configured, is refused.
    let mut h = header("k");
    h.witness = Some(pb::submit_header::Witness::WitnessPath(
        params().join("small.wit").display().to_string(),
    ));
    let e = c.submit(client::header_stream(h)).await.unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");

    // The health service needs no token (orchestrators' probes).
    let ch = tonic::transport::Endpoint::from_shared(format!("http://{}", d.addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut health = tonic_health::pb::health_client::HealthClient::new(ch);
    let h = health
        .check(tonic_health::pb::HealthCheckRequest {
            service: "cuzk.v1.Prover".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        h.status,
        tonic_health::pb::health_check_response::ServingStatus::Serving as i32
    );

    let http = d.http.unwrap();
    let get = move |path: &str| {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(http).unwrap();
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    };
    let m = tokio::task::spawn_blocking(move || {
        (get("/metrics"), get("/status"), get("/timeline?last_s=60"))
    })
    .await
    .unwrap();
    assert!(
        m.0.starts_with("HTTP/1.1 200") && m.0.contains("cuzk_proofs_completed_total 1"),
        "{}",
        m.0
    );
    let body = m.1.split("\r\n\r\n").nth(1).unwrap();
    let v: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(v["completed"], 1);
    assert_eq!(v["devices"][0]["keys"][0], "k");
    assert!(m.2.contains("\"spans\""), "{}", m.2);
    d.stop().await;

    // TCP with no token configured is refused at bind (reliability.rs checks the error).
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_drains_running_jobs_and_a_restart_is_clean() {
    let f = small();
    let mut cfg = config("drain");
    cfg.keys = vec![cuzk_daemon::KeyConfig {
        id: "k".into(),
        pk: "small.pk".into(),
        r1cs: "small.r1cs".into(),
        devices: None,
        trusted: true,
    }];
    let d = start(cfg.clone()).await;
    let mut c = d.client().await;
    let jobs: Vec<_> = submit_n(&mut c, f, 6).await;
    let shared = d.shared.clone();
    d.stop().await;
    for (mut c, s) in jobs {
        // Finished in the drain: the Await still answers on the open connection, or the
        // connection is gone; either way the engine ran every queued job to the end.
        let _ = wait(&mut c, &s).await;
    }
    let st = shared.engine().status();
    assert_eq!(st.counters.completed, 6, "the drain finished every job");
    assert_eq!(
        st.devices[0].budget_in_use, 0,
        "keys unloaded, device memory returned"
    );
    assert_eq!(st.host_in_use, 0, "host memory returned");
    // A stale socket file left behind (as by kill -9) does not block a restart.
    let sock = params().join("drain.sock");
    let _l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    drop(_l);
    assert!(sock.exists());
    let d = start(cfg).await;
    let mut c = d.client().await;
    let s = submit(&mut c, header("k"), &f.witness).await.unwrap();
    verify(f, &wait(&mut c, &s).await.unwrap());
    // A second daemon on a live socket is refused.
    let engine = Engine::new(config("drain").engine().unwrap()).unwrap();
    let e = Daemon::bind(config("drain"), engine).await.unwrap_err();
    assert!(e.to_string().contains("another daemon"), "{e}");
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_past_the_drain_timeout_cancels_the_rest() {
    let f = big();
    let mut cfg = config("cut");
    cfg.workers_per_device = Some(1);
    cfg.drain_timeout_s = 0.0;
    let d = start(cfg).await;
    let mut c = d.client().await;
    load(&mut c, "big", "big").await;
    let running = submit(&mut c, header("big"), &f.witness).await.unwrap();
    submit(&mut c, header("big"), &f.witness).await.unwrap();
    until(&mut c, "the first job in its MSMs", |s| {
        s.devices[0].workers[0].job_id == running.job_id
            && s.devices[0].workers[0].phase.starts_with("MSM")
    })
    .await;
    let shared = d.shared.clone();
    let t = Instant::now();
    d.stop().await;
    assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
    let st = shared.engine().status();
    assert_eq!(st.counters.completed, 0);
    assert_eq!(
        st.counters.failed + st.counters.cancelled,
        2,
        "{:?}",
        st.counters
    );
    assert_eq!((st.running, st.host_in_use), (0, 0));
    assert_eq!(st.devices[0].budget_in_use, 0);
}

/// Submits `n` jobs and returns each with a client.
async fn submit_n(c: &mut Client, f: &Fixture, n: usize) -> Vec<(Client, pb::SubmitResponse)> {
    let mut v = Vec::new();
    for _ in 0..n {
        let s = submit(c, header("k"), &f.witness).await.unwrap();
        v.push((c.clone(), s));
    }
    v
}

#[test]
fn the_example_config_parses() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../cuzk.example.toml");
    let c = DaemonConfig::load(&p).unwrap();
    assert_eq!(c.keys.len(), 1);
    let e = DaemonConfig::from_toml("workers = 2", Path::new("x.toml")).unwrap_err();
    assert!(e.to_string().contains("unknown field"), "{e}");
    let e = DaemonConfig::from_toml("listen = \"nowhere\"", Path::new("x.toml")).unwrap_err();
    assert!(e.to_string().contains("listen address"), "{e}");
}
