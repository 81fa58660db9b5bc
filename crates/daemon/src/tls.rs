//! TLS on the daemon's TCP listener and in its clients: rustls with the ring provider
//! (built with a C compiler alone, no system libraries), certificates and keys from PEM files.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{AlertDescription, CertificateError, RootCertStore};
use serde::Deserialize;

/// The `[tls]` section: the daemon's certificate, and the CA its clients' certificates must
/// chain to, if any.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// PEM: the daemon's certificate, then its chain.
    pub cert: PathBuf,
    /// PEM: the certificate's private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// PEM: CA certificates; when set, only clients presenting a certificate that chains to
    /// one of them get in.
    pub client_ca: Option<PathBuf>,
}

/// The crypto every TLS configuration of cuzk uses: ring, which builds with a C compiler
/// alone. rustls 0.23.48 deprecates it for lacking post-quantum key exchange (aws-lc-rs has
/// it, at the cost of building AWS-LC in every CI run).
#[allow(deprecated)]
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn pem_error(field: &str, path: &Path, e: impl std::fmt::Display) -> String {
    format!("{field} = {}: {e}", path.display())
}

/// The certificates of a PEM file (at least one).
pub fn read_certs(field: &str, path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| pem_error(field, path, e))?;
    if certs.is_empty() {
        return Err(pem_error(field, path, "no PEM certificate in it"));
    }
    Ok(certs)
}

/// The private key of a PEM file.
pub fn read_key(field: &str, path: &Path) -> Result<PrivateKeyDer<'static>, String> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| pem_error(field, path, e))
}

/// The CA certificates of a PEM file, as roots to verify a peer against.
pub fn read_roots(field: &str, path: &Path) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    for c in read_certs(field, path)? {
        roots
            .add(c)
            .map_err(|e| pem_error(field, path, format!("not a CA certificate: {e}")))?;
    }
    Ok(roots)
}

/// The system's trusted roots (when no CA file is given).
pub fn system_roots() -> Result<RootCertStore, String> {
    let found = rustls_native_certs::load_native_certs();
    let mut roots = RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        return Err(format!(
            "no system root certificates could be loaded ({} errors); give a CA file",
            found.errors.len()
        ));
    }
    Ok(roots)
}

impl TlsConfig {
    /// The rustls configuration of the listener (HTTP/2 only, as gRPC needs); the error names
    /// the setting at fault.
    pub fn server_config(&self) -> Result<Arc<rustls::ServerConfig>, String> {
        let certs = read_certs("tls.cert", &self.cert)?;
        let key = read_key("tls.key", &self.key)?;
        let builder = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?;
        let builder = match &self.client_ca {
            None => builder.with_no_client_auth(),
            Some(ca) => {
                let roots = read_roots("tls.client_ca", ca)?;
                let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                    Arc::new(roots),
                    provider(),
                )
                .build()
                .map_err(|e| pem_error("tls.client_ca", ca, e))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let mut config = builder.with_single_cert(certs, key).map_err(|e| {
            format!(
                "tls.cert = {} and tls.key = {}: {e}",
                self.cert.display(),
                self.key.display()
            )
        })?;
        config.alpn_protocols = vec![b"h2".to_vec()];
        Ok(Arc::new(config))
    }
}

/// Which end of a connection a message speaks of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    /// The daemon's certificate, as its client sees it.
    Daemon,
    /// A client's certificate, as the daemon sees it.
    Client,
}

/// One line for a failed TLS handshake, from the side that saw `e`.
pub fn explain(e: &rustls::Error, peer: Peer) -> String {
    let whose = match peer {
        Peer::Daemon => "the daemon's certificate",
        Peer::Client => "the client's certificate",
    };
    match e {
        rustls::Error::InvalidCertificate(c) => match c {
            CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
                format!("{whose} has expired")
            }
            CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
                format!("{whose} is not valid yet")
            }
            CertificateError::UnknownIssuer => match peer {
                Peer::Daemon => format!("{whose} is not signed by the CA given (--tls-ca)"),
                Peer::Client => format!("{whose} is not signed by tls.client_ca"),
            },
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
                format!("{whose} does not name the host dialled")
            }
            other => format!("{whose} is invalid: {other:?}"),
        },
        rustls::Error::NoCertificatesPresented => "the client sent no certificate".into(),
        rustls::Error::AlertReceived(a) => match (peer, a) {
            (Peer::Daemon, AlertDescription::CertificateRequired) => {
                "the daemon requires a client certificate (--tls-cert and --tls-key)".into()
            }
            (Peer::Daemon, AlertDescription::UnknownCA | AlertDescription::BadCertificate) => {
                "the daemon refused our client certificate: not signed by a CA it trusts".into()
            }
            (Peer::Daemon, AlertDescription::CertificateExpired) => {
                "the daemon refused our client certificate: it has expired".into()
            }
            (Peer::Client, AlertDescription::UnknownCA | AlertDescription::BadCertificate) => {
                "the client refused the daemon's certificate: not signed by a CA it trusts".into()
            }
            (Peer::Client, AlertDescription::CertificateExpired) => {
                "the client refused the daemon's certificate: it has expired".into()
            }
            (_, a) => format!("the peer ended the TLS handshake: {a:?}"),
        },
        rustls::Error::InvalidMessage(_) | rustls::Error::InappropriateMessage { .. } => {
            match peer {
                Peer::Daemon => "the daemon does not speak TLS on this port (drop --tls-ca and the other TLS flags, or configure [tls] on the daemon)".into(),
                Peer::Client => "the client does not speak TLS".into(),
            }
        }
        other => format!("TLS: {other}"),
    }
}

/// A daemon that closed the connection in the middle of the client's TLS handshake.
#[derive(Debug, thiserror::Error)]
#[error(
    "the daemon closed the connection during the TLS handshake: it does not speak TLS on this port, or refused this client"
)]
pub struct HandshakeClosed;

/// The explanation of a TLS failure somewhere in `e`'s chain of causes (io errors included).
pub fn explain_chain(e: &(dyn std::error::Error + 'static), peer: Peer) -> Option<String> {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if let Some(r) = err.downcast_ref::<rustls::Error>() {
            return Some(explain(r, peer));
        }
        if let Some(closed) = err.downcast_ref::<HandshakeClosed>() {
            return Some(closed.to_string());
        }
        if let Some(io) = err.downcast_ref::<std::io::Error>()
            && let Some(inner) = io.get_ref()
            && let Some(found) = explain_chain(inner, peer)
        {
            return Some(found);
        }
        cur = err.source();
    }
    None
}
