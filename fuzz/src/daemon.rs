//! The daemon's inputs: its TOML configuration, and the gRPC requests its handlers check.
//!
//! `requests` drives the real `cuzk.v1.Prover` handlers of a daemon on the CPU backend with a
//! small key loaded. The first input byte picks the method; the rest is what arrives on the
//! wire: a protobuf message for the unary calls, and for Submit and Prove the request body in
//! gRPC framing (5-byte headers and messages), decoded by tonic's streaming decoder with the
//! daemon's message size limit, as the server does.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use cuzk_daemon::pb::prover_server::Prover;
use cuzk_daemon::service::ProverService;
use cuzk_daemon::{DaemonConfig, Listen, Shared, pb};
use cuzk_formats::cuzk;
use cuzk_scheduler::Engine;
use prost::Message;
use tonic::codec::Codec;
use tonic::{Request, Streaming};

use crate::Outcome;

pub(crate) fn config(data: &[u8]) -> Outcome {
    let Ok(text) = std::str::from_utf8(data) else {
        return Outcome::Rejected;
    };
    let _ = Listen::parse(text);
    match DaemonConfig::from_toml(text, Path::new("fuzz.toml")) {
        Ok(c) => {
            // Everything a valid config promises to give (not token(): it reads a file the
            // input names).
            c.listen_addr()
                .expect("a validated config has a listen address");
            c.backend_choice()
                .expect("a validated config has a backend");
            let _ = c.engine();
            let _ = c.drain_timeout();
            Outcome::Accepted
        }
        Err(_) => Outcome::Rejected,
    }
}

/// The largest message a Submit stream may carry in the harness's daemon.
const MAX_MESSAGE: usize = 64 << 10;

struct Harness {
    /// One input at a time: each call starts from, and restores, the one key "k".
    one: std::sync::Mutex<()>,
    rt: tokio::runtime::Runtime,
    svc: ProverService,
    shared: Arc<Shared>,
}

/// The files a harness daemon serves: `k.pk`, `k.r1cs`, and `w/k.wit` (its witness dir).
pub fn write_key_files(dir: &Path) -> std::io::Result<Vec<u8>> {
    let (r1cs, w, pk) = crate::fixture::circuit(4, 3);
    std::fs::create_dir_all(dir.join("w"))?;
    cuzk::write_r1cs(std::fs::File::create(dir.join("k.r1cs"))?, &r1cs)?;
    cuzk::write_proving_key(std::fs::File::create(dir.join("k.pk"))?, &pk)?;
    let mut wit = Vec::new();
    cuzk::write_witness(&mut wit, &w)?;
    std::fs::write(dir.join("w/k.wit"), &wit)?;
    Ok(wit)
}

/// The harness daemon's configuration over the files in `dir`.
pub fn harness_config(dir: &Path) -> DaemonConfig {
    DaemonConfig {
        listen: Some(format!("unix:{}", dir.join("unbound.sock").display())),
        param_dir: dir.to_owned(),
        witness_dir: Some(dir.join("w")),
        backend: "cpu".into(),
        workers_per_device: Some(1),
        host_memory: Some(1 << 30),
        cpu_device_memory: 256 << 20,
        max_message_bytes: MAX_MESSAGE,
        max_upload_bytes: 1 << 20,
        max_jobs: 64,
        max_await_s: 5.0,
        result_ttl_s: 0.0,
        ..DaemonConfig::default()
    }
}

fn harness() -> &'static Harness {
    static H: OnceLock<Harness> = OnceLock::new();
    H.get_or_init(|| {
        let dir: PathBuf =
            std::env::temp_dir().join(format!("cuzk-fuzz-daemon-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        write_key_files(&dir).expect("write the harness's key files");
        let config = harness_config(&dir);
        let engine = Engine::new(config.engine().expect("engine config")).expect("CPU engine");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("tokio runtime");
        let shared =
            Arc::new(Shared::new(config, engine, rt.handle().clone()).expect("daemon state"));
        shared
            .load_key_files("k", "k.pk", "k.r1cs", None, false)
            .expect("load the harness key");
        Harness {
            one: std::sync::Mutex::new(()),
            rt,
            svc: ProverService::new(shared.clone()),
            shared,
        }
    })
}

/// Tonic's server-side stream of `SubmitRequest`s over a request body.
fn submit_stream(body: &[u8]) -> Request<Streaming<pb::SubmitRequest>> {
    let mut codec = tonic_prost::ProstCodec::<pb::SubmitRequest, pb::SubmitRequest>::default();
    let body = http_body_util::Full::new(Bytes::copy_from_slice(body));
    Request::new(Streaming::new_request(
        codec.decoder(),
        body,
        None,
        Some(MAX_MESSAGE),
    ))
}

/// The gRPC framing of `msgs` (for seeds): per message a 0 flag, a big-endian length, the bytes.
pub fn frame(msgs: &[pb::SubmitRequest]) -> Vec<u8> {
    let mut out = Vec::new();
    for m in msgs {
        let b = m.encode_to_vec();
        out.push(0);
        out.extend_from_slice(&(b.len() as u32).to_be_bytes());
        out.extend_from_slice(&b);
    }
    out
}

/// Method numbers: the first byte of an input, modulo their count.
pub mod method {
    pub const LOAD_KEY: u8 = 0;
    pub const UNLOAD_KEY: u8 = 1;
    pub const SUBMIT: u8 = 2;
    pub const AWAIT: u8 = 3;
    pub const CANCEL: u8 = 4;
    pub const PROVE: u8 = 5;
    pub const TIMELINE: u8 = 6;
    pub const COUNT: u8 = 7;
}

fn decoded<M: Message + Default>(b: &[u8]) -> Option<Request<M>> {
    M::decode(b).ok().map(Request::new)
}

pub(crate) fn requests(data: &[u8]) -> Outcome {
    let Some((&m, body)) = data.split_first() else {
        return Outcome::Rejected;
    };
    let h = harness();
    // A panic of an earlier input (in the replay test) must not hide the next one's.
    let _one = h
        .one
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let svc = &h.svc;
    let ok = h.rt.block_on(async {
        match m % method::COUNT {
            method::LOAD_KEY => match decoded::<pb::LoadKeyRequest>(body) {
                Some(r) => svc.load_key(r).await.is_ok(),
                None => false,
            },
            method::UNLOAD_KEY => match decoded::<pb::UnloadKeyRequest>(body) {
                Some(r) => svc.unload_key(r).await.is_ok(),
                None => false,
            },
            method::SUBMIT => match svc.submit(submit_stream(body)).await {
                Ok(r) => {
                    // Keep the daemon small: the queued job is cancelled at once.
                    let r = r.into_inner();
                    let c = pb::CancelRequest {
                        job_id: r.job_id,
                        job_token: r.job_token,
                    };
                    svc.cancel(Request::new(c))
                        .await
                        .expect("a job's own token cancels it");
                    true
                }
                Err(_) => false,
            },
            method::AWAIT => match decoded::<pb::AwaitRequest>(body) {
                Some(r) => svc.r#await(r).await.is_ok(),
                None => false,
            },
            method::CANCEL => match decoded::<pb::CancelRequest>(body) {
                Some(r) => svc.cancel(r).await.is_ok(),
                None => false,
            },
            method::PROVE => svc.prove(submit_stream(body)).await.is_ok(),
            _ => match decoded::<pb::TimelineRequest>(body) {
                Some(r) => svc.timeline(r).await.is_ok(),
                None => false,
            },
        }
    });
    restore(&h.shared);
    if ok {
        Outcome::Accepted
    } else {
        Outcome::Rejected
    }
}

/// Back to one key, "k": keys the input loaded are unloaded, "k" reloaded if it unloaded it.
fn restore(shared: &Shared) {
    let keys = shared.engine().keys();
    for (id, _, _) in &keys {
        if id != "k" {
            shared.engine().unload_key(id).expect("unload a fuzzed key");
        }
    }
    if !keys.iter().any(|k| k.0 == "k") {
        shared
            .load_key_files("k", "k.pk", "k.r1cs", None, false)
            .expect("reload the harness key");
    }
}
