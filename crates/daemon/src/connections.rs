//! Serving gRPC connections, each on a thread of its own.
//!
//! A connection that streams a witness at GB/s keeps the thread polling it busy for tens of
//! milliseconds at a time (HTTP/2 reads up to its flow-control window per poll). On a shared
//! runtime every other connection's I/O and timers, monitoring probes included, wait for it
//! (PERF-NOTES.md). So each accepted connection gets a current-thread runtime on a thread of
//! its own, and a busy connection delays only itself.
//!
//! On a TLS listener the thread does the handshake too, so a slow one holds up no other
//! client. A client that speaks plaintext to a TLS port gets one answer to every call, that the
//! port needs TLS, instead of a connection closed without a word.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::{Semaphore, watch};
use tonic::service::Routes;

use crate::unix_authority::AnyAuthority;

/// The HTTP/2 flow-control window a stream may have in flight: a few witness chunks.
const H2_STREAM_WINDOW: u32 = 16 << 20;
/// The largest HTTP/2 frame the daemon accepts. A streamed witness is hundreds of MiB: h2's
/// defaults (1 MiB windows, 16 KiB frames) cut it into 32768 frames per 512 MiB, each a wakeup
/// and a syscall on both ends.
const H2_MAX_FRAME: u32 = 1 << 20;
/// Connections served at once, a thread each: past this, new ones wait in the listen backlog
/// until one closes, so a client that opens connections in a loop cannot exhaust threads.
pub const MAX_CONNECTIONS: u32 = 256;

/// Longest a TLS handshake may take before its connection is dropped.
const TLS_HANDSHAKE: Duration = Duration::from_secs(10);
/// A TLS connection starts with a handshake record; HTTP/2's preface starts with `P`.
const TLS_HANDSHAKE_RECORD: u8 = 0x16;

/// A listening socket of the gRPC service.
pub(crate) enum Listener {
    Unix(UnixListener),
    Tcp {
        listener: TcpListener,
        tls: Option<Arc<rustls::ServerConfig>>,
    },
}

/// An accepted connection, detached from the runtime that accepted it.
enum Accepted {
    Unix(std::os::unix::net::UnixStream),
    Tcp {
        stream: std::net::TcpStream,
        tls: Option<Arc<rustls::ServerConfig>>,
    },
}

impl Listener {
    async fn accept(&self) -> io::Result<Accepted> {
        Ok(match self {
            Listener::Unix(l) => Accepted::Unix(l.accept().await?.0.into_std()?),
            Listener::Tcp { listener, tls } => {
                let (s, _) = listener.accept().await?;
                // Answers are small frames: never hold one back for Nagle's algorithm.
                s.set_nodelay(true)?;
                Accepted::Tcp {
                    stream: s.into_std()?,
                    tls: tls.clone(),
                }
            }
        })
    }
}

/// Accepts connections until `stop` is true, serving each on a thread of its own with
/// `routes`. On `stop`, the threads' connections finish their running calls and close (HTTP/2
/// GOAWAY); returns when all have closed, or after 10 s.
pub(crate) async fn serve(
    listener: Listener,
    routes: Routes,
    stop: watch::Receiver<bool>,
    blocking_threads: usize,
) {
    // A slot per open connection, held by its thread until the connection has closed.
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS as usize));
    accept(&listener, &routes, &stop, &slots, blocking_threads).await;
    if tokio::time::timeout(Duration::from_secs(10), slots.acquire_many(MAX_CONNECTIONS))
        .await
        .is_err()
    {
        tracing::warn!("gRPC connections still open after 10 s; exiting without them");
    }
}

async fn accept(
    listener: &Listener,
    routes: &Routes,
    stop: &watch::Receiver<bool>,
    slots: &Arc<Semaphore>,
    blocking_threads: usize,
) {
    let mut stopping = stop.clone();
    loop {
        let (slot, accepted) = tokio::select! {
            _ = stopping.wait_for(|s| *s) => return,
            a = async {
                let slot = slots.clone().acquire_owned().await;
                (slot, listener.accept().await)
            } => a,
        };
        let Ok(slot) = slot else { return }; // the semaphore is never closed
        match accepted {
            Ok(conn) => {
                let (routes, stop) = (routes.clone(), stop.clone());
                let spawned =
                    std::thread::Builder::new()
                        .name("cuzk-conn".into())
                        .spawn(move || {
                            let _slot = slot;
                            serve_on_this_thread(conn, routes, stop, blocking_threads)
                        });
                if let Err(e) = spawned {
                    tracing::warn!(error = %e, "no thread for a connection; closing it");
                }
            }
            Err(e) => {
                // Out of descriptors, or a client gone before the accept: keep listening.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

fn serve_on_this_thread(
    conn: Accepted,
    routes: Routes,
    stop: watch::Receiver<bool>,
    blocking_threads: usize,
) {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .max_blocking_threads(blocking_threads)
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::warn!(error = %e, "no runtime for a connection; closing it");
            return;
        }
    };
    let served = rt.block_on(async move {
        match conn {
            Accepted::Unix(s) => {
                let s = tokio::net::UnixStream::from_std(s)?;
                serve_io(AnyAuthority::new(s), routes, stop).await
            }
            Accepted::Tcp { stream, tls: None } => {
                serve_io(tokio::net::TcpStream::from_std(stream)?, routes, stop).await
            }
            Accepted::Tcp {
                stream,
                tls: Some(tls),
            } => serve_tls(tokio::net::TcpStream::from_std(stream)?, tls, routes, stop).await,
        }
    });
    if let Err(e) = served {
        tracing::debug!(error = %e, "connection ended with an error");
    }
}

/// What the first bytes of a connection on a TLS port turned out to be.
enum Opened {
    Tls(Box<tokio_rustls::server::TlsStream<tokio::net::TcpStream>>),
    Plaintext(tokio::net::TcpStream),
    Gone,
}

/// The TLS handshake, then the connection; a plaintext client gets [`needs_tls`]'s answer.
async fn serve_tls(
    stream: tokio::net::TcpStream,
    tls: Arc<rustls::ServerConfig>,
    routes: Routes,
    mut stop: watch::Receiver<bool>,
) -> io::Result<()> {
    let peer = stream.peer_addr()?;
    let open = async {
        let mut first = [0u8; 1];
        if stream.peek(&mut first).await? == 0 {
            return Ok(Opened::Gone);
        }
        if first[0] != TLS_HANDSHAKE_RECORD {
            return Ok(Opened::Plaintext(stream));
        }
        let s = tokio_rustls::TlsAcceptor::from(tls).accept(stream).await?;
        Ok::<_, io::Error>(Opened::Tls(Box::new(s)))
    };
    let opened = tokio::select! {
        r = tokio::time::timeout(TLS_HANDSHAKE, open) => r,
        _ = stop.wait_for(|s| *s) => return Ok(()),
    };
    match opened {
        Ok(Ok(Opened::Tls(s))) => serve_io(s, routes, stop).await,
        Ok(Ok(Opened::Plaintext(s))) => {
            tracing::warn!(%peer, "a client spoke plaintext to the TLS port; it is told to use TLS");
            serve_io(s, needs_tls(), stop).await
        }
        Ok(Ok(Opened::Gone)) => Ok(()),
        Ok(Err(e)) => {
            let why = crate::tls::explain_chain(&e, crate::tls::Peer::Client)
                .unwrap_or_else(|| e.to_string());
            tracing::warn!(%peer, "TLS handshake refused: {why}");
            Ok(())
        }
        Err(_) => {
            tracing::warn!(%peer, "no TLS handshake within {TLS_HANDSHAKE:?}; closed");
            Ok(())
        }
    }
}

/// The answer to every call of a plaintext client on a TLS port.
fn needs_tls() -> Routes {
    Routes::from(axum::Router::new().fallback(|| async {
        tonic::Status::unauthenticated(
            "this daemon port accepts only TLS: connect with TLS (cuzk: --tls-ca FILE)",
        )
        .into_http::<axum::body::Body>()
    }))
}

async fn serve_io<IO>(io: IO, routes: Routes, mut stop: watch::Receiver<bool>) -> io::Result<()>
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let mut builder = http2::Builder::new(TokioExecutor::new());
    builder
        .timer(TokioTimer::new())
        .initial_stream_window_size(H2_STREAM_WINDOW)
        .initial_connection_window_size(2 * H2_STREAM_WINDOW)
        .max_frame_size(H2_MAX_FRAME);
    let conn = builder.serve_connection(TokioIo::new(io), TowerToHyperService::new(routes));
    let mut conn = std::pin::pin!(conn);
    let ended = tokio::select! {
        r = conn.as_mut() => r,
        _ = stop.wait_for(|s| *s) => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    ended.map_err(io::Error::other)
}
