//! The reliability suite's daemon parts (`cargo xtask reliability` runs them by name and reads
//! their `reliability:` lines): the security checks (the socket's mode and its safe creation,
//! TCP only with a token, bounded request sizes, random job ids that need their token) and a
//! failure at every device allocation of a whole daemon job, and at the pinned and host
//! registration calls.

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use cuzk_daemon::client::{self, Client};
use cuzk_daemon::{Daemon, DaemonConfig, DaemonError, pb};
use cuzk_formats::cuzk;
use cuzk_groth16::{ToxicWaste, generate_parameters_with_toxic_waste};
use cuzk_scheduler::Engine;
use cuzk_vram::{Budget, FakeBackend, FakeCounts, Faults, Vram};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use tonic::Code;

use crate::support::Running;

const MIB: u64 = 1 << 20;

struct Fixture {
    dir: PathBuf,
    vk: cuzk_groth16::VerifyingKey,
    witness: Vec<u8>,
}

/// A 2^8-row circuit's files in a fresh parameter directory, and its witness.
fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("cuzk-rel-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut rng = ChaCha20Rng::seed_from_u64(9);
        let (r1cs, w) = cuzk_groth16::testing::demo::circuit(8, 2, &mut rng).unwrap();
        let (pk, _) =
            generate_parameters_with_toxic_waste(&r1cs, &ToxicWaste::random(&mut rng)).unwrap();
        let file = |n: &str| std::fs::File::create(dir.join(n)).unwrap();
        cuzk::write_r1cs(file("k.r1cs"), &r1cs).unwrap();
        cuzk::write_proving_key(file("k.pk"), &pk).unwrap();
        let mut witness = Vec::new();
        cuzk::write_witness(&mut witness, &w).unwrap();
        Fixture {
            dir,
            vk: pk.vk.clone(),
            witness,
        }
    })
}

fn config(sock: &Path) -> DaemonConfig {
    DaemonConfig {
        listen: Some(format!("unix:{}", sock.display())),
        param_dir: fixture().dir.clone(),
        backend: "cpu".into(),
        workers_per_device: Some(1),
        host_memory: Some(2 << 30),
        cpu_device_memory: 512 * MIB,
        drain_timeout_s: 5.0,
        ..DaemonConfig::default()
    }
}

fn engine(c: &DaemonConfig) -> Engine {
    Engine::new(c.engine().unwrap()).unwrap()
}

async fn load(c: &mut Client) {
    c.load_key(pb::LoadKeyRequest {
        key_id: "k".into(),
        pk_path: "k.pk".into(),
        r1cs_path: "k.r1cs".into(),
        devices: vec![],
        trusted: false,
    })
    .await
    .unwrap();
}

fn header() -> pb::SubmitHeader {
    pb::SubmitHeader {
        key_id: "k".into(),
        ..Default::default()
    }
}

async fn submit(
    c: &mut Client,
    msgs: Vec<pb::SubmitRequest>,
) -> Result<pb::SubmitResponse, tonic::Status> {
    c.submit(tokio_stream::iter(msgs))
        .await
        .map(|r| r.into_inner())
}

async fn wait(c: &mut Client, id: &str, token: &str) -> Result<pb::ProofResponse, tonic::Status> {
    c.r#await(pb::AwaitRequest {
        job_id: id.into(),
        job_token: token.into(),
        timeout_ms: 120_000,
    })
    .await
    .map(|r| r.into_inner())
}

fn verify(r: &pb::ProofResponse) {
    assert_eq!(r.state, pb::JobState::Done as i32);
    let proof = cuzk::read_proof("proof", &r.proof[..]).unwrap();
    let public = cuzk::read_witness("public inputs", &r.public_inputs[..]).unwrap();
    let pvk = cuzk_groth16::prepare_verifying_key(&fixture().vk);
    cuzk_groth16::verify_proof(&pvk, &proof, public.public_inputs()).unwrap();
}

fn scratch(name: &str) -> PathBuf {
    let d = fixture().dir.join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn security_the_socket_is_0600_and_made_safely() {
    let mut checks = 0;
    // A world-writable sticky directory, as /tmp is.
    let dir = scratch("sock");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let sock = dir.join("d.sock");
    let d = Running::start(config(&sock), engine(&config(&sock))).await;
    let meta = std::fs::symlink_metadata(&sock).unwrap();
    assert!(meta.file_type().is_socket());
    assert_eq!(
        meta.permissions().mode() & 0o777,
        0o600,
        "the socket is private"
    );
    checks += 2;
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n != "d.sock")
        .collect();
    assert!(
        left.is_empty(),
        "the bind leaves nothing beside the socket: {left:?}"
    );
    checks += 1;
    // A second daemon on a live socket is refused, and does not take it over.
    let e = Daemon::bind(config(&sock), engine(&config(&sock)))
        .await
        .unwrap_err();
    assert!(matches!(e, DaemonError::InUse(_)), "{e}");
    let mut c = d.client().await;
    c.status(pb::StatusRequest {}).await.unwrap();
    checks += 1;
    d.stop().await;
    assert!(!sock.exists(), "the socket is removed at exit");
    checks += 1;

    // What is at the path and is not a socket is never removed: a file, a symlink (to a
    // file elsewhere, or to a socket).
    let victim = scratch("victim").join("keep");
    std::fs::write(&victim, b"data").unwrap();
    let file = dir.join("file.sock");
    std::fs::write(&file, b"x").unwrap();
    let link = dir.join("link.sock");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    for p in [&file, &link] {
        let e = Daemon::bind(config(p), engine(&config(p)))
            .await
            .unwrap_err();
        assert!(
            matches!(e, DaemonError::NotSocket(_)),
            "{}: {e}",
            p.display()
        );
        checks += 1;
    }
    assert_eq!(std::fs::read(&victim).unwrap(), b"data");
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    checks += 1;

    // A stale socket (its daemon is gone) is replaced at once.
    let stale = dir.join("stale.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    assert!(stale.exists());
    let d = Running::start(config(&stale), engine(&config(&stale))).await;
    d.client().await.status(pb::StatusRequest {}).await.unwrap();
    d.stop().await;
    checks += 1;
    println!("reliability: security socket checks={checks}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn security_tcp_needs_a_token() {
    let mut checks = 0;
    let dir = scratch("tcp");
    let mut cfg = config(&dir.join("unused.sock"));
    cfg.listen = Some("127.0.0.1:0".into());
    let e = Daemon::bind(cfg.clone(), engine(&cfg)).await.unwrap_err();
    assert!(matches!(e, DaemonError::TcpWithoutToken(_)), "{e}");
    assert!(e.to_string().contains("token_file"), "{e}");
    checks += 1;
    let short = dir.join("short");
    std::fs::write(&short, "abc\n").unwrap();
    cfg.token_file = Some(short);
    let e = Daemon::bind(cfg.clone(), engine(&cfg)).await.unwrap_err();
    assert!(e.to_string().contains("shorter than 16"), "{e}");
    checks += 1;
    let good = dir.join("token");
    std::fs::write(&good, "a-token-of-enough-length\n").unwrap();
    cfg.token_file = Some(good);
    let d = Running::start(cfg.clone(), engine(&cfg)).await;
    for token in [None, Some("a-token-of-enough-lengtH")] {
        let mut c = client::connect(Some(&d.addr), token, None).await.unwrap();
        let e = c.status(pb::StatusRequest {}).await.unwrap_err();
        assert_eq!(e.code(), Code::Unauthenticated, "{token:?}: {e:?}");
        checks += 1;
    }
    let mut c = client::connect(Some(&d.addr), Some("a-token-of-enough-length"), None)
        .await
        .unwrap();
    c.status(pb::StatusRequest {}).await.unwrap();
    checks += 1;
    d.stop().await;
    println!("reliability: security tcp checks={checks}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn security_request_sizes_are_bounded() {
    let f = fixture();
    let mut checks = 0;
    let sock = scratch("sizes").join("d.sock");
    let mut cfg = config(&sock);
    cfg.max_message_bytes = 4096;
    cfg.max_upload_bytes = f.witness.len() as u64 - 1;
    let d = Running::start(cfg.clone(), engine(&cfg)).await;
    let mut c = d.client().await;
    load(&mut c).await;
    let size = f.witness.len() as u64;
    let head = |size: u64| pb::SubmitRequest {
        msg: Some(pb::submit_request::Msg::Header(pb::SubmitHeader {
            witness: Some(pb::submit_header::Witness::WitnessSize(size)),
            ..header()
        })),
    };
    let chunk = |b: &[u8]| pb::SubmitRequest {
        msg: Some(pb::submit_request::Msg::Chunk(b.to_vec().into())),
    };
    // A declared size other than the key's witness size, larger or smaller.
    for s in [size + 1, size - 1, u64::MAX] {
        let e = submit(&mut c, vec![head(s)]).await.unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{s}: {e:?}");
        assert!(e.message().contains("wrong witness length"), "{e:?}");
        checks += 1;
    }
    // The right size, over the daemon's upload budget.
    let e = submit(&mut c, vec![head(size)]).await.unwrap_err();
    assert_eq!(e.code(), Code::ResourceExhausted, "{e:?}");
    checks += 1;
    d.stop().await;

    cfg.max_upload_bytes = 1 << 30;
    let d = Running::start(cfg.clone(), engine(&cfg)).await;
    let mut c = d.client().await;
    load(&mut c).await;
    // One message above max_message_bytes.
    assert!(f.witness.len() > 4096);
    let e = submit(&mut c, vec![head(size), chunk(&f.witness)])
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::ResourceExhausted, "{e:?}");
    assert!(e.message().contains("max_message_bytes"), "{e:?}");
    checks += 1;
    // More bytes than declared, in messages under the limit.
    let mut msgs = vec![head(size)];
    msgs.extend(f.witness.chunks(2048).map(chunk));
    msgs.push(chunk(b"x"));
    let e = submit(&mut c, msgs).await.unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    assert!(e.message().contains("more than witness_size"), "{e:?}");
    checks += 1;
    // Fewer bytes than declared.
    let e = submit(&mut c, vec![head(size), chunk(&f.witness[..2048])])
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    checks += 1;
    let st = c.status(pb::StatusRequest {}).await.unwrap().into_inner();
    assert_eq!(
        (st.upload_bytes, st.jobs),
        (0, 0),
        "nothing held after refusals"
    );
    checks += 1;
    // The same witness in messages under the limit is served.
    let mut msgs = vec![head(size)];
    msgs.extend(f.witness.chunks(2048).map(chunk));
    let s = submit(&mut c, msgs).await.unwrap();
    verify(&wait(&mut c, &s.job_id, &s.job_token).await.unwrap());
    checks += 1;
    d.stop().await;
    println!("reliability: security sizes checks={checks}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn security_job_ids_are_random_and_a_proof_needs_its_token() {
    let f = fixture();
    let mut checks = 0;
    let sock = scratch("ids").join("d.sock");
    let d = Running::start(config(&sock), engine(&config(&sock))).await;
    let mut c = d.client().await;
    load(&mut c).await;
    let mut jobs = Vec::new();
    for _ in 0..4 {
        jobs.push(
            submit(&mut c, client::bytes_stream(header(), &f.witness))
                .await
                .unwrap(),
        );
    }
    let mut seen = std::collections::HashSet::new();
    for j in &jobs {
        for v in [&j.job_id, &j.job_token] {
            assert_eq!(v.len(), 32, "128 random bits as hex: {v}");
            assert!(v.bytes().all(|b| b.is_ascii_hexdigit()), "{v}");
            assert!(seen.insert(v.clone()), "ids and tokens never repeat: {v}");
        }
    }
    checks += 1;
    // Another job's token, an empty one, and a made-up id all read as "no such job".
    let (a, b) = (&jobs[0], &jobs[1]);
    for (id, token) in [
        (&a.job_id, &b.job_token),
        (&a.job_id, &String::new()),
        (&"0".repeat(32), &a.job_token),
    ] {
        let e = wait(&mut c, id, token).await.unwrap_err();
        assert_eq!(e.code(), Code::NotFound, "{e:?}");
        let e = c
            .cancel(pb::CancelRequest {
                job_id: id.clone(),
                job_token: token.clone(),
            })
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::NotFound, "{e:?}");
        checks += 2;
    }
    for j in &jobs {
        verify(&wait(&mut c, &j.job_id, &j.job_token).await.unwrap());
    }
    checks += 1;
    d.stop().await;
    println!("reliability: security ids checks={checks}");
}

/// The daemon over an engine whose one device is a [`FakeBackend`] the test keeps.
async fn injectable() -> (Running, Arc<FakeBackend>) {
    let sock = scratch("inject").join("d.sock");
    let cfg = config(&sock);
    let fake = Arc::new(FakeBackend::new(256 * MIB));
    let vram = Vram::with_budgets(
        fake.clone(),
        Budget::new("device", 256 * MIB),
        Budget::new("host", 128 * MIB),
    );
    let engine = Engine::on_cpu(cfg.engine().unwrap(), vec![vram]).unwrap();
    (Running::start(cfg, engine).await, fake)
}

/// The fake device's live allocations.
fn held(c: FakeCounts) -> (usize, u64, usize, usize) {
    (
        c.device_allocs,
        c.device_bytes,
        c.pinned_allocs,
        c.registered,
    )
}

/// The memory figures that must come back after every job.
fn levels(st: &pb::StatusResponse) -> Vec<u64> {
    let mut v = vec![st.host_used, st.upload_bytes, u64::from(st.running)];
    for d in &st.devices {
        v.extend([d.budget_used, d.staging_used, d.pinned_used]);
    }
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_at_every_allocation_of_a_daemon_job_runs_it_again_and_a_lasting_one_fails_it_alone()
 {
    fixture();
    let (d, fake) = injectable().await;
    let mut c = d.client().await;
    load(&mut c).await;
    let status = |c: &mut Client| {
        let mut c = c.clone();
        async move { c.status(pb::StatusRequest {}).await.unwrap().into_inner() }
    };
    let idle = levels(&status(&mut c).await);
    let live = fake.counts();
    let prove = |c: &mut Client| {
        let mut c = c.clone();
        async move {
            let s = submit(&mut c, client::bytes_stream(header(), &fixture().witness))
                .await
                .unwrap();
            wait(&mut c, &s.job_id, &s.job_token).await
        }
    };
    let before = fake.counts().device_alloc_calls;
    let good = prove(&mut c).await.unwrap();
    verify(&good);
    let phases: Vec<String> = good
        .timings
        .as_ref()
        .unwrap()
        .phases
        .iter()
        .map(|p| p.phase.clone())
        .collect();
    let sites = fake.counts().device_alloc_calls - before;
    assert!(
        sites >= 4,
        "a job stages z and a, b, c: {sites} allocations"
    );
    let mut injections = 0;
    for k in 1..=sites {
        fake.set_faults(Faults {
            fail_device_alloc_at: Some(fake.counts().device_alloc_calls + k),
            ..Faults::default()
        });
        // Out of memory at the driver: the job runs again and proves.
        verify(&prove(&mut c).await.unwrap());
        fake.set_faults(Faults::default());
        let back = (levels(&status(&mut c).await), held(fake.counts()));
        assert_eq!(back, (idle.clone(), held(live)), "allocation {k}: memory");
        injections += 1;
    }
    // One that lasts fails that job alone, naming its phase.
    fake.set_faults(Faults {
        fail_device_alloc_from: Some(fake.counts().device_alloc_calls + 1),
        ..Faults::default()
    });
    let e = prove(&mut c).await.unwrap_err();
    fake.set_faults(Faults::default());
    assert_eq!(e.code(), Code::ResourceExhausted, "{e:?}");
    let (phase, why) = e.message().split_once(": ").unwrap_or(("", ""));
    assert!(
        phases.iter().any(|p| p == phase) && why.contains("OUT_OF_MEMORY"),
        "{:?} names no phase of {phases:?}",
        e.message()
    );
    let back = (levels(&status(&mut c).await), held(fake.counts()));
    assert_eq!(back, (idle.clone(), held(live)), "lasting failure: memory");
    verify(&prove(&mut c).await.unwrap());
    injections += 1;
    // Pinned allocation and host registration failing cost only the pinned staging: the job
    // runs from the heap.
    for faults in [
        Faults {
            fail_pinned_alloc: true,
            ..Faults::default()
        },
        Faults {
            fail_register: true,
            ..Faults::default()
        },
    ] {
        fake.set_faults(faults);
        verify(&prove(&mut c).await.unwrap());
        fake.set_faults(Faults::default());
        assert_eq!(levels(&status(&mut c).await), idle);
        injections += 1;
    }
    let st = status(&mut c).await;
    assert_eq!(st.failed, 1);
    d.stop().await;
    println!(
        "reliability: injection daemon sites={} injections={injections} proofs={}",
        sites + 3,
        st.completed
    );
}
