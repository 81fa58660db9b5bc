//! How the binary's commands reach a daemon: the connection flags ([`Conn`]), a piece of work
//! ([`Work`]), its Submit stream, and waiting for a job. Shared by `daemon_cli.rs`,
//! `bench_daemon.rs` and `filecoin_cli.rs`.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use cuzk_daemon::client::{self, Client};
use cuzk_daemon::pb;

/// How a client reaches the daemon.
#[derive(Args, Debug, Clone)]
pub struct Conn {
    /// `unix:PATH`, a socket path, or `host:port`; default: the daemon's default socket
    /// (`cuzk filecoin`: without it the proof runs in this process).
    #[arg(long, env = "CUZK_DAEMON")]
    daemon: Option<String>,
    /// A file holding the daemon's bearer token.
    #[arg(long, env = "CUZK_TOKEN_FILE")]
    token_file: Option<PathBuf>,
    /// TLS to a TCP address: the CA (PEM) the daemon's certificate must chain to; with
    /// --tls-cert alone, the system's roots.
    #[arg(long, env = "CUZK_TLS_CA")]
    tls_ca: Option<PathBuf>,
    /// TLS: this client's certificate (PEM), for a daemon that asks for one (tls.client_ca).
    #[arg(long, env = "CUZK_TLS_CERT", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// TLS: the client certificate's private key (PEM).
    #[arg(long, env = "CUZK_TLS_KEY", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
}

impl Conn {
    /// True when --daemon (or CUZK_DAEMON) names a daemon: `cuzk filecoin` proves through it.
    pub(crate) fn named(&self) -> bool {
        self.daemon.is_some()
    }

    /// TLS when any of its flags is given.
    fn tls(&self) -> Option<client::ClientTls> {
        let t = client::ClientTls {
            ca: self.tls_ca.clone(),
            cert: self.tls_cert.clone(),
            key: self.tls_key.clone(),
        };
        (t != client::ClientTls::default()).then_some(t)
    }
}

/// What to prove: a key and a witness file.
#[derive(Args, Debug, Clone)]
pub struct Work {
    /// The key id (as loaded in the daemon).
    #[arg(long)]
    pub(crate) key: String,
    /// A cuzk witness file (`cuzk circuit --witness`).
    #[arg(long)]
    pub(crate) witness: PathBuf,
    /// Send the witness's path instead of its bytes (the daemon reads it; same host only).
    #[arg(long)]
    pub(crate) by_path: bool,
    /// high, normal or low.
    #[arg(long, default_value = "normal")]
    pub(crate) priority: cuzk_scheduler::Priority,
    /// Run only on this engine device.
    #[arg(long)]
    pub(crate) device: Option<u32>,
}

/// The runtime; `blocking` bounds its blocking threads (the daemon keeps one per job in flight).
pub(crate) fn runtime(blocking: usize) -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .max_blocking_threads(blocking)
        .build()
        .context("cannot start the async runtime")
}

pub(crate) async fn connect(conn: &Conn) -> Result<Client> {
    let token = match &conn.token_file {
        Some(p) => Some(
            std::fs::read_to_string(p)
                .with_context(|| format!("cannot read {}", p.display()))?
                .trim()
                .to_owned(),
        ),
        None => None,
    };
    let tls = conn.tls();
    Ok(client::connect(conn.daemon.as_deref(), token.as_deref(), tls.as_ref()).await?)
}

fn header(work: &Work, request_id: String) -> pb::SubmitHeader {
    let priority = match work.priority {
        cuzk_scheduler::Priority::High => pb::Priority::High,
        cuzk_scheduler::Priority::Normal => pb::Priority::Normal,
        cuzk_scheduler::Priority::Low => pb::Priority::Low,
    };
    pb::SubmitHeader {
        key_id: work.key.clone(),
        priority: priority as i32,
        device: work.device,
        request_id,
        witness: None,
    }
}

/// The Submit (or Prove) stream of a piece of work.
pub(crate) async fn stream(
    work: &Work,
    request_id: String,
) -> Result<tokio_stream::wrappers::ReceiverStream<pb::SubmitRequest>> {
    let mut h = header(work, request_id);
    if work.by_path {
        let p = std::path::absolute(&work.witness)
            .with_context(|| format!("{}", work.witness.display()))?;
        h.witness = Some(pb::submit_header::Witness::WitnessPath(
            p.to_string_lossy().into_owned(),
        ));
        return Ok(client::header_stream(h));
    }
    Ok(client::witness_stream(h, work.witness.clone()).await?)
}

/// Awaits a job until it is done, however long it takes (each Await waits up to the daemon's
/// max_await_s); a failed job is its error.
pub(crate) async fn await_finished(
    c: &mut Client,
    id: &str,
    token: &str,
) -> Result<pb::ProofResponse> {
    loop {
        let r = c
            .r#await(pb::AwaitRequest {
                job_id: id.into(),
                job_token: token.into(),
                timeout_ms: 0,
            })
            .await
            .with_context(|| format!("job {id}"))?
            .into_inner();
        if r.state == pb::JobState::Done as i32 {
            return Ok(r);
        }
    }
}
