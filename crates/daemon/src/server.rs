//! Binding the sockets, serving gRPC (and the optional HTTP port), and the drain on shutdown.

use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use cuzk_scheduler::Engine;
use tokio::net::{TcpListener, UnixListener};
use tonic::service::Routes;
use tonic::service::interceptor::InterceptedService;

use crate::config::{ConfigError, DaemonConfig, Listen};
use crate::connections;
use crate::pb;
use crate::service::{ProverService, Shared};

/// Why the daemon could not start or serve.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("engine: {0}")]
    Engine(#[from] cuzk_scheduler::EngineError),
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("another daemon listens on {0}")]
    InUse(PathBuf),
    #[error("{0} exists and is not a socket; not removing it")]
    NotSocket(PathBuf),
    #[error("listen = {0:?} is TCP and no token_file is set: TCP needs a bearer token")]
    TcpWithoutToken(String),
    #[error(
        "listen = {0:?} is not a loopback address and [tls] is not set: the bearer token and every witness would cross the network in the clear. Set [tls] cert and key, or insecure_plaintext = true on a network private by other means"
    )]
    PlaintextTcp(String),
    #[error("key {id:?}: {message}")]
    Preload { id: String, message: String },
}

fn io_err(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> DaemonError {
    let what = what.into();
    move |source| DaemonError::Io { what, source }
}

enum Listener {
    Unix {
        listener: UnixListener,
        path: PathBuf,
        ino: u64,
    },
    Tcp {
        listener: TcpListener,
        tls: Option<Arc<rustls::ServerConfig>>,
    },
}

/// A bound daemon: its sockets are open; [`Daemon::run`] serves until shutdown.
pub struct Daemon {
    shared: Arc<Shared>,
    listener: Listener,
    http: Option<TcpListener>,
    token: Option<String>,
}

impl std::fmt::Debug for Daemon {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Daemon")
            .field("address", &self.address())
            .finish_non_exhaustive()
    }
}

/// Removes a socket file left by a daemon that is gone; refuses a live one or a non-socket.
fn clear_stale(path: &Path) -> Result<(), DaemonError> {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return Ok(());
    };
    if !meta.file_type().is_socket() {
        return Err(DaemonError::NotSocket(path.to_owned()));
    }
    match std::os::unix::net::UnixStream::connect(path) {
        Ok(_) => Err(DaemonError::InUse(path.to_owned())),
        Err(_) => {
            tracing::info!(path = %path.display(), "removing a stale socket");
            std::fs::remove_file(path).map_err(io_err(format!("remove {}", path.display())))
        }
    }
}

/// Binds a unix socket of mode 0600 with no window where others could connect: bound in a
/// fresh 0700 directory beside `path`, made 0600, then renamed into place.
fn bind_unix(path: &Path) -> Result<(UnixListener, u64), DaemonError> {
    clear_stale(path)?;
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let tmp = parent.join(format!(".cuzk-{:016x}", rand::random::<u64>()));
    std::fs::create_dir(&tmp).map_err(io_err(format!("create {}", tmp.display())))?;
    let bound = (|| {
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o700))
            .map_err(io_err("chmod the socket's directory"))?;
        let inner = tmp.join("s");
        let l = UnixListener::bind(&inner).map_err(io_err(format!("bind {}", path.display())))?;
        std::fs::set_permissions(&inner, std::fs::Permissions::from_mode(0o600))
            .map_err(io_err("chmod the socket"))?;
        std::fs::rename(&inner, path)
            .map_err(io_err(format!("move the socket to {}", path.display())))?;
        let ino = std::fs::symlink_metadata(path)
            .map_err(io_err("stat the socket"))?
            .ino();
        Ok((l, ino))
    })();
    let _ = std::fs::remove_dir_all(&tmp);
    bound
}

impl Daemon {
    /// Opens the sockets the configuration names, over a started engine.
    pub async fn bind(config: DaemonConfig, engine: Engine) -> Result<Self, DaemonError> {
        config.validate()?;
        let token = config.token()?;
        let listener = match config.listen_addr()? {
            Listen::Unix(path) => {
                let (listener, ino) = bind_unix(&path)?;
                Listener::Unix {
                    listener,
                    path,
                    ino,
                }
            }
            Listen::Tcp(addr) => {
                // Any client that reaches a TCP port could load keys and prove: never open.
                if token.is_none() {
                    return Err(DaemonError::TcpWithoutToken(addr));
                }
                let tls = match &config.tls {
                    Some(t) => Some(t.server_config().map_err(ConfigError::Invalid)?),
                    None => None,
                };
                let listener = TcpListener::bind(&addr)
                    .await
                    .map_err(io_err(format!("bind {addr}")))?;
                let local = listener
                    .local_addr()
                    .map_err(io_err(format!("the address bound for {addr}")))?;
                if tls.is_none() {
                    if local.ip().is_loopback() {
                        tracing::info!(%local, "plaintext TCP on loopback: only this host can connect");
                    } else if config.insecure_plaintext {
                        tracing::warn!(%local, "plaintext TCP on a non-loopback address (insecure_plaintext = true): the bearer token and every witness cross the network in the clear");
                    } else {
                        return Err(DaemonError::PlaintextTcp(addr));
                    }
                }
                Listener::Tcp { listener, tls }
            }
        };
        let http = match &config.http_listen {
            Some(a) => Some(
                TcpListener::bind(a)
                    .await
                    .map_err(io_err(format!("bind {a}")))?,
            ),
            None => None,
        };
        let shared = Shared::new(config, engine, tokio::runtime::Handle::current())
            .map_err(io_err("config"))?;
        Ok(Self {
            shared: Arc::new(shared),
            listener,
            http,
            token,
        })
    }

    /// `unix:PATH` or the bound `host:port` (the real port when the config said 0).
    pub fn address(&self) -> String {
        match &self.listener {
            Listener::Unix { path, .. } => format!("unix:{}", path.display()),
            Listener::Tcp { listener, .. } => listener
                .local_addr()
                .map(|a| a.to_string())
                .unwrap_or_default(),
        }
    }

    pub fn http_address(&self) -> Option<std::net::SocketAddr> {
        self.http.as_ref().and_then(|l| l.local_addr().ok())
    }

    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Loads the configuration's keys, logging each.
    pub async fn preload(&self) -> Result<(), DaemonError> {
        let keys = self.shared.config.keys.clone();
        let n = keys.len();
        for (i, k) in keys.into_iter().enumerate() {
            let sh = self.shared.clone();
            tracing::info!(key = %k.id, pk = %k.pk.display(), r1cs = %k.r1cs.display(), "preloading key {}/{n}", i + 1);
            let t = Instant::now();
            let id = k.id.clone();
            tokio::task::spawn_blocking(move || {
                sh.load_key_files(
                    &k.id,
                    &k.pk.to_string_lossy(),
                    &k.r1cs.to_string_lossy(),
                    k.devices.as_deref(),
                    k.trusted,
                )
            })
            .await
            .map_err(|e| DaemonError::Preload {
                id: id.clone(),
                message: e.to_string(),
            })?
            .map_err(|s| DaemonError::Preload {
                id: id.clone(),
                message: s.message().to_owned(),
            })?;
            tracing::info!(key = %id, secs = t.elapsed().as_secs_f64(), "key {}/{n} loaded", i + 1);
        }
        Ok(())
    }

    /// Serves until `shutdown` resolves, then stops taking jobs, lets running ones finish for
    /// up to the drain timeout, cancels the rest, unloads the keys, and removes the socket.
    pub async fn run(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), DaemonError> {
        self.serve(Box::pin(shutdown)).await
    }

    /// [`Self::run`]'s body, not generic: the server (tonic, hyper, axum) is compiled once, in
    /// this crate, instead of in every crate that runs a daemon.
    async fn serve(
        self,
        shutdown: std::pin::Pin<Box<dyn Future<Output = ()> + Send>>,
    ) -> Result<(), DaemonError> {
        let Daemon {
            shared,
            listener,
            http,
            token,
        } = self;
        let (health_reporter, health) = tonic_health::server::health_reporter();
        health_reporter
            .set_serving::<pb::prover_server::ProverServer<ProverService>>()
            .await;
        // Reflection v1, and v1alpha for the tools that know only it (older grpcurl, evans,
        // Postman).
        let reflection = || {
            tonic_reflection::server::Builder::configure()
                .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
                .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        };
        let reflection_err = |e: tonic_reflection::server::Error| DaemonError::Io {
            what: "reflection".into(),
            source: std::io::Error::other(e.to_string()),
        };
        let reflection_v1 = reflection().build_v1().map_err(reflection_err)?;
        let reflection_v1alpha = reflection().build_v1alpha().map_err(reflection_err)?;
        let max = shared.config.max_message_bytes;
        let prover = pb::prover_server::ProverServer::new(ProverService {
            shared: shared.clone(),
        })
        .max_decoding_message_size(max)
        .max_encoding_message_size(max.max(64 << 20));
        let check = crate::auth::Check::new(token);
        let prover = crate::rpc_timing::RpcTiming::new(
            InterceptedService::new(prover, check.clone()),
            shared.clone(),
        );
        // curio's C1 output travels in one message (about 50 MB at 32 GiB).
        let curio = crate::curio_pb::proving_engine_server::ProvingEngineServer::new(
            crate::curio::ProvingEngineService::new(shared.clone()),
        )
        .max_decoding_message_size(shared.config.max_filecoin_message_bytes)
        .max_encoding_message_size(max.max(64 << 20));
        let curio = InterceptedService::new(curio, check);
        let routes = Routes::new(health)
            .add_service(reflection_v1)
            .add_service(reflection_v1alpha)
            .add_service(prover)
            .add_service(curio)
            .prepare();
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let (unix_path, listener) = match listener {
            Listener::Unix {
                listener,
                path,
                ino,
            } => (Some((path, ino)), connections::Listener::Unix(listener)),
            Listener::Tcp { listener, tls } => (None, connections::Listener::Tcp { listener, tls }),
        };
        let serving = tokio::spawn(connections::serve(
            listener,
            routes,
            stop_rx,
            shared.config.blocking_threads(),
        ));
        let (http_stop_tx, http_stop_rx) = tokio::sync::oneshot::channel::<()>();
        let http_task = http.map(|l| {
            let app = crate::http::router(shared.clone());
            tokio::spawn(async move {
                let _ = axum::serve(l, app)
                    .with_graceful_shutdown(async {
                        let _ = http_stop_rx.await;
                    })
                    .await;
            })
        });
        tracing::info!("serving");
        shutdown.await;
        health_reporter
            .set_not_serving::<pb::prover_server::ProverServer<ProverService>>()
            .await;
        stop_jobs(&shared, shared.config.drain_timeout()).await;
        let _ = stop_tx.send(true);
        let _ = serving.await;
        let _ = http_stop_tx.send(());
        if let Some(h) = http_task {
            let _ = tokio::time::timeout(Duration::from_secs(5), h).await;
        }
        remove_socket(unix_path);
        let st = shared.engine.status();
        for d in &st.devices {
            tracing::info!(device = %d.name, budget_in_use = d.budget_in_use, pinned_in_use = d.pinned_in_use, budget_peak = d.budget_peak, driver_bytes = d.driver_bytes, unexplained_peak = d.unexplained_peak, limit_lowered = d.limit_lowered, "device memory after shutdown");
        }
        tracing::info!(
            completed = st.counters.completed,
            failed = st.counters.failed,
            cancelled = st.counters.cancelled,
            "stopped"
        );
        Ok(())
    }
}

/// Stops new jobs, drains, cancels the rest, and unloads every key (returning its memory).
async fn stop_jobs(shared: &Arc<Shared>, drain: Duration) {
    shared.closing.store(true, Ordering::SeqCst);
    let n = shared.unfinished();
    tracing::info!(
        unfinished = n,
        drain_s = drain.as_secs_f64(),
        "stopping: draining jobs"
    );
    let sh = shared.clone();
    let _ = tokio::task::spawn_blocking(move || {
        sh.engine.stop_jobs(drain);
        for (id, _, _) in sh.engine.keys() {
            if let Err(e) = sh.engine.unload_key(&id) {
                tracing::warn!(key = %id, error = %e, "unload at shutdown");
            }
        }
    })
    .await;
    // Let the per-job waiters hand their results to pending Awaits.
    for _ in 0..200 {
        if shared.unfinished() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Removes the socket file if it is still the one this daemon bound.
fn remove_socket(unix: Option<(PathBuf, u64)>) {
    if let Some((path, ino)) = unix
        && std::fs::symlink_metadata(&path).is_ok_and(|m| m.ino() == ino)
    {
        let _ = std::fs::remove_file(&path);
    }
}
