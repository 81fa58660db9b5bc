//! A client of the daemon: connect over a unix socket or TCP (with the bearer token, and TLS
//! when asked), and stream a witness file in chunks.

use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;

use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use tokio::io::AsyncBufReadExt;
use tokio_stream::wrappers::ReceiverStream;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint, Uri};

use crate::auth::Bearer;
use crate::config::{Listen, default_socket};
use crate::pb;
use crate::tls;

pub type Client = pb::prover_client::ProverClient<InterceptedService<Channel, Bearer>>;

/// Longest a TLS client waits for the daemon's first answer after the handshake.
const FIRST_ANSWER: std::time::Duration = std::time::Duration::from_secs(10);

/// Bytes per witness chunk a client sends (under the daemon's default 8 MiB message limit).
pub const CHUNK: usize = 4 << 20;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        addr: String,
        #[source]
        source: tonic::transport::Error,
    },
    #[error("cannot connect to {addr}: {line}")]
    Tls { addr: String, line: String },
    #[error("{0}")]
    Address(#[from] crate::config::ConfigError),
    #[error("{0}")]
    Token(tonic::Status),
    #[error("{0}")]
    TlsFiles(String),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// TLS to the daemon (`--tls-ca`, `--tls-cert`, `--tls-key`): the CA to verify it against
/// (absent: the system's roots), and a client certificate with its key for a daemon that
/// asks for one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientTls {
    pub ca: Option<PathBuf>,
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
}

impl ClientTls {
    fn config(&self) -> Result<Arc<rustls::ClientConfig>, ClientError> {
        let roots = match &self.ca {
            Some(p) => tls::read_roots("--tls-ca", p),
            None => tls::system_roots(),
        }
        .map_err(ClientError::TlsFiles)?;
        let builder = rustls::ClientConfig::builder_with_provider(tls::provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| ClientError::TlsFiles(format!("TLS: {e}")))?
            .with_root_certificates(roots);
        let mut config = match (&self.cert, &self.key) {
            (None, None) => builder.with_no_client_auth(),
            (Some(c), Some(k)) => {
                let certs = tls::read_certs("--tls-cert", c).map_err(ClientError::TlsFiles)?;
                let key = tls::read_key("--tls-key", k).map_err(ClientError::TlsFiles)?;
                builder.with_client_auth_cert(certs, key).map_err(|e| {
                    ClientError::TlsFiles(format!(
                        "--tls-cert {} and --tls-key {}: {e}",
                        c.display(),
                        k.display()
                    ))
                })?
            }
            _ => {
                return Err(ClientError::TlsFiles(
                    "--tls-cert and --tls-key go together".into(),
                ));
            }
        };
        config.alpn_protocols = vec![b"h2".to_vec()];
        Ok(Arc::new(config))
    }
}

/// The host part of `host:port`, as the name the daemon's certificate must carry.
fn server_name(addr: &str) -> Result<ServerName<'static>, ClientError> {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(host.to_owned())
        .map_err(|e| ClientError::TlsFiles(format!("{addr}: not a host name for TLS: {e}")))
}

/// Connects to `addr` (`unix:PATH`, a socket path, or `host:port`; `None`: the default
/// socket), over TLS to a TCP address when `tls` is given.
pub async fn connect(
    addr: Option<&str>,
    token: Option<&str>,
    tls: Option<&ClientTls>,
) -> Result<Client, ClientError> {
    let listen = match addr {
        None => Listen::Unix(default_socket()),
        Some(a) => Listen::parse(a)?,
    };
    let shown = listen.to_string();
    let connect_err =
        |source: tonic::transport::Error| match tls::explain_chain(&source, tls::Peer::Daemon) {
            Some(line) => ClientError::Tls {
                addr: shown.clone(),
                line,
            },
            None => ClientError::Connect {
                addr: shown.clone(),
                source,
            },
        };
    // The URI is unused where a connector dials.
    let local = Endpoint::from_static("http://localhost");
    let channel = match (listen, tls) {
        (Listen::Unix(path), None) => local
            .connect_with_connector(tower::service_fn(move |_: Uri| {
                let path = path.clone();
                async move {
                    Ok::<_, std::io::Error>(TokioIo::new(
                        tokio::net::UnixStream::connect(path).await?,
                    ))
                }
            }))
            .await
            .map_err(connect_err)?,
        (Listen::Unix(_), Some(_)) => {
            return Err(ClientError::TlsFiles(format!(
                "{shown} is a unix socket: the TLS flags apply to a TCP address"
            )));
        }
        (Listen::Tcp(a), None) => Endpoint::from_shared(format!("http://{a}"))
            .map_err(connect_err)?
            .connect()
            .await
            .map_err(connect_err)?,
        (Listen::Tcp(a), Some(t)) => {
            let connector = tokio_rustls::TlsConnector::from(t.config()?);
            let name = server_name(&a)?;
            local
                .connect_with_connector(tower::service_fn(move |_: Uri| {
                    let (a, name, connector) = (a.clone(), name.clone(), connector.clone());
                    async move {
                        let tcp = tokio::net::TcpStream::connect(&a).await?;
                        tcp.set_nodelay(true)?;
                        let closed = |e: std::io::Error| {
                            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                                std::io::Error::new(e.kind(), tls::HandshakeClosed)
                            } else {
                                e
                            }
                        };
                        let tls = connector.connect(name, tcp).await.map_err(closed)?;
                        // Under TLS 1.3 a daemon refuses a client certificate only after the
                        // handshake, by an alert in place of its first HTTP/2 settings: wait
                        // for one or the other, so a refusal fails here with its reason and
                        // not later as a closed connection.
                        let mut tls = tokio::io::BufReader::new(tls);
                        let first = tokio::time::timeout(FIRST_ANSWER, tls.fill_buf()).await;
                        match first {
                            Ok(Ok([])) => {
                                return Err(closed(std::io::ErrorKind::UnexpectedEof.into()));
                            }
                            Ok(Err(e)) => return Err(closed(e)),
                            Ok(Ok(_)) | Err(_) => {}
                        }
                        Ok::<_, std::io::Error>(TokioIo::new(tls))
                    }
                }))
                .await
                .map_err(connect_err)?
        }
    };
    let bearer = Bearer::new(token).map_err(ClientError::Token)?;
    Ok(
        pb::prover_client::ProverClient::with_interceptor(channel, bearer)
            .max_decoding_message_size(256 << 20)
            .max_encoding_message_size(CHUNK + 1024),
    )
}

/// The Submit messages for a witness file streamed in chunks: the header, then the file's
/// bytes read as they are sent (so a 4 GiB witness never sits whole in the client).
pub async fn witness_stream(
    mut header: pb::SubmitHeader,
    path: PathBuf,
) -> Result<ReceiverStream<pb::SubmitRequest>, ClientError> {
    // Opened synchronously (a quick call): no borrow of the file lives across an await.
    let opened = std::fs::File::open(&path).and_then(|f| f.metadata().map(|m| (f, m.len())));
    let (mut file, size) = match opened {
        Ok(v) => v,
        Err(source) => return Err(ClientError::Io { path, source }),
    };
    header.witness = Some(pb::submit_header::Witness::WitnessSize(size));
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tx.try_send(pb::SubmitRequest {
        msg: Some(pb::submit_request::Msg::Header(header)),
    })
    .expect("a fresh channel has room for one");
    // Whole chunks read on a blocking thread straight into the buffers sent, never zeroed
    // first (tokio::fs reads at most 2 MiB a call, through a buffer of its own).
    tokio::task::spawn_blocking(move || {
        loop {
            let mut buf = Vec::with_capacity(CHUNK);
            match (&mut file).take(CHUNK as u64).read_to_end(&mut buf) {
                Ok(0) => break,
                // The stream ends short: the daemon refuses it as truncated.
                Err(e) => {
                    tracing::error!(path = %path.display(), error = %e, "cannot read the witness; the upload stops");
                    break;
                }
                Ok(_) => {}
            }
            let chunk = pb::SubmitRequest {
                msg: Some(pb::submit_request::Msg::Chunk(buf.into())),
            };
            if tx.blocking_send(chunk).is_err() {
                break;
            }
        }
    });
    Ok(ReceiverStream::new(rx))
}

/// The Submit stream of a header alone (a witness by path, or an idempotent resubmission).
pub fn header_stream(header: pb::SubmitHeader) -> ReceiverStream<pb::SubmitRequest> {
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    let first = pb::SubmitRequest {
        msg: Some(pb::submit_request::Msg::Header(header)),
    };
    tx.try_send(first)
        .expect("a fresh channel has room for one");
    ReceiverStream::new(rx)
}

/// The Submit messages for a witness already in memory.
pub fn bytes_stream(mut header: pb::SubmitHeader, bytes: &[u8]) -> Vec<pb::SubmitRequest> {
    header.witness = Some(pb::submit_header::Witness::WitnessSize(bytes.len() as u64));
    let mut v = vec![pb::SubmitRequest {
        msg: Some(pb::submit_request::Msg::Header(header)),
    }];
    v.extend(bytes.chunks(CHUNK).map(|c| pb::SubmitRequest {
        msg: Some(pb::submit_request::Msg::Chunk(
            prost::bytes::Bytes::copy_from_slice(c),
        )),
    }));
    v
}

/// The Submit messages of a Filecoin proof with its large input (`c1_output` for PoRep,
/// `vanilla_proofs` otherwise) moved out of the header into `chunk`-byte chunks after it, so
/// no message nears the daemon's size limit however large the input.
pub fn filecoin_stream(
    mut header: pb::SubmitHeader,
    mut f: pb::FilecoinProof,
    chunk: usize,
) -> Vec<pb::SubmitRequest> {
    let input = if f.kind == pb::FilecoinKind::PorepC2 as i32 {
        std::mem::take(&mut f.c1_output)
    } else {
        std::mem::take(&mut f.vanilla_proofs)
    };
    f.input_size = input.len() as u64;
    header.witness = Some(pb::submit_header::Witness::Filecoin(f));
    let mut v = vec![pb::SubmitRequest {
        msg: Some(pb::submit_request::Msg::Header(header)),
    }];
    v.extend(input.chunks(chunk.max(1)).map(|c| pb::SubmitRequest {
        msg: Some(pb::submit_request::Msg::Chunk(
            prost::bytes::Bytes::copy_from_slice(c),
        )),
    }));
    v
}
