//! The streamed upload's rate (issue 20: a 2^24 witness at >= 2 GB/s over the unix socket).
//!
//! A CPU daemon in this process on its own runtime, a client on another (as `cuzk daemon` and
//! `cuzk submit` are two processes): the witness file is streamed by `client::witness_stream`,
//! timed from the Submit call to its answer, by which the daemon has received, checksummed
//! and decoded all of it; each job is then cancelled. A copy with one byte changed must be
//! refused, so the timed path is the checked one.
//!
//! `CUZK_NO_CUDA=1 cargo test -p cuzk-daemon --test it -- --ignored --nocapture upload::`;
//! `CUZK_UPLOAD_LOG` (default 22; 24 is the 512 MiB) and `CUZK_UPLOAD_RUNS` (5).

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use cuzk_daemon::client::{self, Client};
use cuzk_daemon::{Daemon, DaemonConfig, pb};
use cuzk_formats::cuzk;
use cuzk_groth16::{Fr, KeyQueries, ProvingKey, R1cs, SparseMatrix, VerifyingKey, Witness};
use cuzk_scheduler::{Engine, KeySource};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use tonic::Code;

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A circuit of `m` variables, 2 public, with only its instance rows: the daemon reads a
/// witness of `m` entries for it, and its size check is the same as for a real circuit.
fn wide_circuit(m: usize) -> R1cs {
    let np = 2;
    let rows = np + 1;
    let a = SparseMatrix::from_csr(
        m,
        (0..=rows).collect(),
        (0..rows as u32).collect(),
        vec![Fr::ONE; rows],
    )
    .unwrap();
    let empty = || SparseMatrix::from_csr(m, vec![0; rows + 1], vec![], vec![]).unwrap();
    R1cs::new(np, m, a, empty(), empty()).unwrap()
}

/// A key of the circuit's shape whose points are all the identity (its jobs are cancelled
/// before they prove): no setup, but 2 GiB of points at 2^22 and 8 GiB at 2^24.
fn placeholder_key(r1cs: &R1cs, domain: usize) -> ProvingKey {
    let m = r1cs.num_variables();
    let vk = VerifyingKey {
        alpha_g1: Default::default(),
        beta_g2: Default::default(),
        gamma_g2: Default::default(),
        delta_g2: Default::default(),
        ic: vec![Default::default(); r1cs.num_public() + 1],
    };
    let queries = KeyQueries {
        a_query: vec![Default::default(); m],
        b_g1_query: vec![Default::default(); m],
        b_g2_query: vec![Default::default(); m],
        h_query: vec![Default::default(); domain - 1],
        l_query: vec![Default::default(); r1cs.num_private()],
    };
    ProvingKey::new(vk, Default::default(), Default::default(), queries)
}

fn write_witness(path: &Path, m: usize, np: usize) {
    let mut rng = ChaCha20Rng::seed_from_u64(20);
    let public: Vec<Fr> = (0..np).map(|_| Fr::random(&mut rng)).collect();
    let private: Vec<Fr> = (0..m - np - 1).map(|_| Fr::random(&mut rng)).collect();
    let f = std::fs::File::create(path).unwrap();
    cuzk::write_witness(
        std::io::BufWriter::with_capacity(8 << 20, f),
        &Witness::new(&public, &private),
    )
    .unwrap();
}

fn header() -> pb::SubmitHeader {
    pb::SubmitHeader {
        key_id: "k".into(),
        ..Default::default()
    }
}

/// Streams `path` as `cuzk submit` does; returns the job and the seconds until the answer.
async fn submit(c: &mut Client, path: &Path) -> (Result<pb::SubmitResponse, tonic::Status>, f64) {
    let s = client::witness_stream(header(), path.to_owned())
        .await
        .unwrap();
    let t = Instant::now();
    let r = c.submit(s).await.map(|r| r.into_inner());
    (r, t.elapsed().as_secs_f64())
}

/// Cancels a job and waits for its end, so the next upload does not share the CPU with it.
async fn cancel(c: &mut Client, s: &pb::SubmitResponse) {
    c.cancel(pb::CancelRequest {
        job_id: s.job_id.clone(),
        job_token: s.job_token.clone(),
    })
    .await
    .unwrap();
    let r = c
        .r#await(pb::AwaitRequest {
            job_id: s.job_id.clone(),
            job_token: s.job_token.clone(),
            timeout_ms: 600_000,
        })
        .await;
    // Cancelled, or (had it finished first) failed by the placeholder key's self-check.
    if let Err(e) = r {
        assert!(
            matches!(e.code(), Code::Cancelled | Code::DataLoss),
            "{e:?}"
        );
    }
}

/// CPU seconds (user + system, in USER_HZ = 100 ticks) and minor page faults from a
/// /proc/.../stat line.
fn stat_fields(stat: &str) -> (String, f64, u64) {
    let (head, tail) = stat.rsplit_once(')').unwrap();
    let comm = head.split_once('(').unwrap().1.to_owned();
    let f: Vec<u64> = tail
        .split_whitespace()
        .skip(1)
        .map(|t| t.parse().unwrap_or(0))
        .collect();
    (comm, (f[10] + f[11]) as f64 / 100.0, f[6])
}

/// CPU seconds of the whole process, of the client's and the daemon's runtime threads, and
/// the process's page faults: on a shared 2-core box the CPU an upload costs is steadier than
/// its wall time. The rest of the CPU is the parser's hashing and decoding (rayon threads and
/// the scoped threads that end with each piece).
fn usage() -> [f64; 4] {
    let (_, all, faults) = stat_fields(&std::fs::read_to_string("/proc/self/stat").unwrap());
    let (mut client, mut daemon) = (0.0, 0.0);
    for t in std::fs::read_dir("/proc/self/task").unwrap() {
        let Ok(stat) = std::fs::read_to_string(t.unwrap().path().join("stat")) else {
            continue; // the thread ended
        };
        let (comm, cpu, _) = stat_fields(&stat);
        match comm.as_str() {
            "upload-client" => client += cpu,
            "upload-daemon" => daemon += cpu,
            _ => {}
        }
    }
    [all, client, daemon, faults as f64]
}

fn runtime(name: &str) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .thread_name(name)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
#[ignore = "bench: run with --ignored --nocapture"]
fn streamed_upload_rate() {
    let log: u32 = env_or("CUZK_UPLOAD_LOG", 22);
    let runs: usize = env_or("CUZK_UPLOAD_RUNS", 5);
    let m = 1usize << log;
    let dir = std::env::temp_dir().join(format!("cuzk-upload-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let r1cs = wide_circuit(m);
    let pk = placeholder_key(&r1cs, 4);
    let wit = dir.join("w.wit");
    write_witness(&wit, m, r1cs.num_public());
    let size = std::fs::metadata(&wit).unwrap().len();
    assert_eq!(
        size,
        cuzk_daemon::service::witness_file_size(r1cs.num_public(), m)
    );
    // One byte of the payload changed: the checksum must refuse it.
    let bad = dir.join("bad.wit");
    let mut bytes = std::fs::read(&wit).unwrap();
    bytes[(size / 2) as usize] ^= 1;
    std::fs::write(&bad, &bytes).unwrap();
    drop(bytes);

    let config = DaemonConfig {
        listen: Some(format!("unix:{}", dir.join("d.sock").display())),
        param_dir: dir.clone(),
        backend: "cpu".into(),
        workers_per_device: Some(1),
        host_memory: Some(64 << 30),
        cpu_device_memory: 16 << 30,
        drain_timeout_s: 0.0,
        ..DaemonConfig::default()
    };
    let daemon_rt = runtime("upload-daemon");
    let (addr, stop, task) = daemon_rt.block_on(async {
        let engine = Engine::new(config.engine().unwrap()).unwrap();
        let d = Daemon::bind(config, engine).await.unwrap();
        d.shared()
            .engine()
            .load_key(
                "k",
                KeySource::Memory {
                    pk: Arc::new(pk),
                    r1cs: Arc::new(r1cs),
                },
                None,
            )
            .unwrap();
        let addr = d.address();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(d.run(async {
            let _ = rx.await;
        }));
        (addr, tx, task)
    });

    let client_rt = runtime("upload-client");
    let rates = client_rt.block_on(async {
        let mut c = client::connect(Some(&addr), None, None).await.unwrap();
        let (r, _) = submit(&mut c, &bad).await;
        let e = r.expect_err("a changed byte must be refused");
        assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
        assert!(e.message().contains("checksum"), "{e:?}");
        let mut rates = Vec::new();
        for i in 0..runs {
            let u0 = usage();
            let (r, secs) = submit(&mut c, &wit).await;
            let u1 = usage();
            let s = r.unwrap();
            let gb = size as f64 / 1e9;
            let [all, client, daemon, faults] = std::array::from_fn(|k| u1[k] - u0[k]);
            let per_gb = [all / gb, client / gb, daemon / gb, (all - client - daemon) / gb];
            println!(
                "upload {i}: {:.1} MiB in {secs:.3} s ({:.2} GB/s); CPU s per GB {:.2}: client {:.2}, daemon runtime {:.2}, parser threads {:.2}; {faults} page faults",
                size as f64 / (1u64 << 20) as f64,
                gb / secs,
                per_gb[0],
                per_gb[1],
                per_gb[2],
                per_gb[3],
            );
            rates.push((gb / secs, per_gb));
            cancel(&mut c, &s).await;
        }
        rates
    });
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        (v[v.len() / 2], v[v.len() - 1], v[0])
    };
    let (gbs, best, _) = median(rates.iter().map(|r| r.0).collect());
    let [cpu, client, daemon, parser] =
        std::array::from_fn(|k| median(rates.iter().map(|r| r.1[k]).collect()).0);
    println!(
        "streamed upload 2^{log} ({size} B), {runs} runs: median {gbs:.2} GB/s (best {best:.2}); median CPU s per GB {cpu:.2}: client {client:.2}, daemon runtime {daemon:.2}, parser threads {parser:.2}"
    );
    let _ = stop.send(());
    daemon_rt.block_on(task).unwrap().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
