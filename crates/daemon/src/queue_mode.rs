//! Queue mode: with a `[queue]` section (or `cuzk daemon --queue URL`) the daemon also claims
//! jobs from PostgreSQL into its engine (`cuzk-queue`), while serving its gRPC API as always.
//! On shutdown it stops claiming first, then drains like any daemon, then writes the last
//! results and gives back the jobs the drain cancelled.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use cuzk_queue::{Queue, QueueConfig, WitnessResolver, WorkerHandle};

use crate::paths::resolve_inside;
use crate::server::{Daemon, DaemonError};

/// Why queue mode could not start or the daemon could not serve.
#[derive(Debug, thiserror::Error)]
pub enum QueueModeError {
    #[error(transparent)]
    Daemon(#[from] DaemonError),
    #[error("queue: {0}")]
    Queue(#[from] cuzk_queue::QueueError),
    #[error("[queue]: {0}")]
    Config(String),
}

/// Witness paths from the queue: inside `witness_dir` when one is set, else any absolute path
/// of a regular file (shared storage that every host mounts).
fn resolver(witness_dir: Option<PathBuf>) -> WitnessResolver {
    Arc::new(move |p: &str| match &witness_dir {
        Some(dir) => resolve_inside(dir, p).map_err(|e| e.to_string()),
        None => {
            let path = PathBuf::from(p);
            if !path.is_absolute() {
                return Err(format!("witness path {p:?} is not absolute"));
            }
            let full = path
                .canonicalize()
                .map_err(|e| format!("witness path {p:?}: {e}"))?;
            if !full.is_file() {
                return Err(format!("witness path {p:?} is not a regular file"));
            }
            Ok(full)
        }
    })
}

/// Connects to the queue (applying its migrations) and starts claiming into the daemon's
/// engine. The database need not be up yet: the worker retries until it is.
pub async fn start(daemon: &Daemon, config: &QueueConfig) -> Result<WorkerHandle, QueueModeError> {
    config.validate().map_err(QueueModeError::Config)?;
    let queue = Queue::open_host(&config.url, config.pool_size, config.connect_timeout())?;
    let mut backoff = Duration::from_millis(200);
    // Migrations must be in place before the first claim; wait for the database to come up.
    loop {
        match queue.migrate().await {
            Ok(()) => break,
            Err(e @ cuzk_queue::QueueError::Migrate(_)) => return Err(e.into()),
            Err(e) => {
                tracing::warn!(error = %e, "queue database not reachable; retrying");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
        }
    }
    let shared = daemon.shared();
    let resolve = resolver(shared.config.witness_dir.clone());
    Ok(cuzk_queue::worker::spawn(
        queue,
        shared.engine.clone(),
        config.clone(),
        resolve,
    ))
}

/// Serves like [`Daemon::run`]; with a `[queue]` section also claims from the queue, and on
/// `shutdown` stops claiming before the drain.
pub async fn run(
    daemon: Daemon,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), QueueModeError> {
    serve(daemon, Box::pin(shutdown)).await
}

/// [`run`]'s body, not generic, so compiled once in this crate (see `Daemon::run`).
async fn serve(
    daemon: Daemon,
    shutdown: std::pin::Pin<Box<dyn Future<Output = ()> + Send>>,
) -> Result<(), QueueModeError> {
    let Some(config) = daemon.shared().config.queue.clone() else {
        return Ok(daemon.run(shutdown).await?);
    };
    let worker = start(&daemon, &config).await?;
    tracing::info!(owner = worker.owner(), "claiming from the queue");
    let stopper = worker.stopper();
    let drain = daemon.shared().config.drain_timeout();
    let served = daemon
        .run(async move {
            shutdown.await;
            stopper.stop();
        })
        .await;
    // The drain has ended every job; what is left is writing results back.
    worker.finish(drain + config.lease()).await;
    Ok(served?)
}
