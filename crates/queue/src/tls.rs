//! TLS to PostgreSQL, with libpq's `sslmode` and `sslrootcert` in the URL, through rustls
//! (ring provider). tokio-postgres itself knows only `sslmode=disable|prefer|require` and no
//! `sslrootcert`, so both are taken out of the URL here and become the connector's policy.

use std::path::PathBuf;
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_postgres::config::{Host, SslMode as PgSslMode};
use tokio_postgres_rustls::MakeRustlsConnect;

/// libpq's `sslmode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    /// Plaintext.
    Disable,
    /// TLS when the server offers it, else plaintext; the certificate is not checked (unless
    /// `sslrootcert` is given, as libpq does).
    Prefer,
    /// TLS; the certificate is not checked (unless `sslrootcert` is given, as libpq does).
    Require,
    /// TLS; the certificate must chain to `sslrootcert` (else the system's roots).
    VerifyCa,
    /// [`SslMode::VerifyCa`], and the certificate must name the host dialled.
    VerifyFull,
}

impl SslMode {
    fn parse(s: &str) -> Result<Self, String> {
        Ok(match s {
            "disable" => Self::Disable,
            "prefer" => Self::Prefer,
            "require" => Self::Require,
            "verify-ca" => Self::VerifyCa,
            "verify-full" => Self::VerifyFull,
            other => {
                return Err(format!(
                    "sslmode={other:?} (expected disable, prefer, require, verify-ca or verify-full)"
                ));
            }
        })
    }
}

/// How a queue connects: the URL as tokio-postgres reads it, and the TLS policy.
pub(crate) struct Connection {
    pub config: tokio_postgres::Config,
    pub connector: MakeRustlsConnect,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// A URL's own parameters taken out: the rest, `sslmode`, `sslrootcert`.
type Split = (String, Option<String>, Option<String>);

/// Takes `sslmode` and `sslrootcert` out of a `postgres://` URL's query or a key=value string.
fn split(url: &str) -> Result<Split, String> {
    let (mut mode, mut root) = (None, None);
    let mut take = |key: &str, value: String| match key {
        "sslmode" => {
            mode = Some(value);
            true
        }
        "sslrootcert" => {
            root = Some(value);
            true
        }
        _ => false,
    };
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let Some((base, query)) = url.split_once('?') else {
            return Ok((url.to_owned(), None, None));
        };
        let mut kept = Vec::new();
        for pair in query.split('&') {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            if !take(k, percent_decode(v)?) {
                kept.push(pair);
            }
        }
        let rest = if kept.is_empty() {
            base.to_owned()
        } else {
            format!("{base}?{}", kept.join("&"))
        };
        return Ok((rest, mode, root));
    }
    let mut kept = Vec::new();
    for word in url.split_whitespace() {
        let ours = match word.split_once('=') {
            Some((k, v)) if k == "sslmode" || k == "sslrootcert" => {
                if v.starts_with('\'') {
                    return Err(format!(
                        "{k}: a quoted value; write the URL form (postgres://...?{k}=...) instead"
                    ));
                }
                take(k, v.to_owned())
            }
            _ => false,
        };
        if !ours {
            kept.push(word);
        }
    }
    Ok((kept.join(" "), mode, root))
}

fn percent_decode(s: &str) -> Result<String, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("{s:?}: a bad percent escape"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("{s:?}: not UTF-8 once decoded"))
}

fn is_loopback(host: &Host) -> bool {
    match host {
        Host::Unix(_) => true,
        Host::Tcp(h) => {
            h == "localhost"
                || h.parse::<std::net::IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback())
        }
    }
}

/// The mode given, else `prefer` when every host is on this machine, else `verify-full`.
fn mode_for(config: &tokio_postgres::Config, given: Option<&str>) -> Result<SslMode, String> {
    let hosts = config.get_hosts();
    Ok(match given {
        Some(m) => SslMode::parse(m)?,
        None if !hosts.is_empty() && hosts.iter().all(is_loopback) => SslMode::Prefer,
        None => SslMode::VerifyFull,
    })
}

/// ring, as the daemon uses (see cuzk-daemon's `tls::provider` for why).
#[allow(deprecated)]
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Reads `url`: its `sslmode` (absent: `prefer` when every host is on this machine, else
/// `verify-full`) and `sslrootcert` (absent: the system's roots).
pub(crate) fn connection(url: &str) -> Result<Connection, String> {
    let (rest, mode, root) = split(url)?;
    let mut config: tokio_postgres::Config = rest.parse().map_err(|e| format!("{e}"))?;
    let mode = mode_for(&config, mode.as_deref())?;
    config.ssl_mode(match mode {
        SslMode::Disable => PgSslMode::Disable,
        SslMode::Prefer => PgSslMode::Prefer,
        _ => PgSslMode::Require,
    });
    let root = root.map(PathBuf::from);
    let roots = || -> Result<Arc<RootCertStore>, String> {
        let mut store = RootCertStore::empty();
        match &root {
            Some(p) => {
                let certs = CertificateDer::pem_file_iter(p)
                    .and_then(|it| it.collect::<Result<Vec<_>, _>>())
                    .map_err(|e| format!("sslrootcert={}: {e}", p.display()))?;
                let (added, _) = store.add_parsable_certificates(certs);
                if added == 0 {
                    return Err(format!("sslrootcert={}: no certificate in it", p.display()));
                }
            }
            None => {
                let found = rustls_native_certs::load_native_certs();
                store.add_parsable_certificates(found.certs);
                if store.is_empty() {
                    return Err(
                        "no system root certificates could be loaded: give sslrootcert".into(),
                    );
                }
            }
        }
        Ok(Arc::new(store))
    };
    let verifier: Arc<dyn ServerCertVerifier> = match (mode, &root) {
        (SslMode::Disable | SslMode::Prefer | SslMode::Require, None) => {
            Arc::new(Unchecked(provider()))
        }
        (SslMode::VerifyFull, _) => webpki(roots()?)?,
        (_, _) => Arc::new(AnyName(webpki(roots()?)?)),
    };
    let tls = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    Ok(Connection {
        config,
        connector: MakeRustlsConnect::new(tls),
    })
}

fn webpki(roots: Arc<RootCertStore>) -> Result<Arc<WebPkiServerVerifier>, String> {
    WebPkiServerVerifier::builder_with_provider(roots, provider())
        .build()
        .map_err(|e| format!("TLS roots: {e}"))
}

/// One line for a TLS failure somewhere in `e`'s causes, naming the setting to look at.
pub(crate) fn explain(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if let Some(r) = err.downcast_ref::<rustls::Error>() {
            let why = match r {
                rustls::Error::InvalidCertificate(
                    CertificateError::UnknownIssuer | CertificateError::BadSignature,
                ) => "the server's certificate is not signed by sslrootcert (or, without it, by a system root)".to_owned(),
                rustls::Error::InvalidCertificate(
                    CertificateError::Expired | CertificateError::ExpiredContext { .. },
                ) => "the server's certificate has expired".to_owned(),
                rustls::Error::InvalidCertificate(
                    CertificateError::NotValidForName
                    | CertificateError::NotValidForNameContext { .. },
                ) => "the server's certificate does not name the host dialled (sslmode=verify-full)".to_owned(),
                other => other.to_string(),
            };
            return Some(format!("TLS to the database: {why}"));
        }
        if let Some(io) = err.downcast_ref::<std::io::Error>()
            && let Some(found) = io.get_ref().and_then(|inner| explain(inner))
        {
            return Some(found);
        }
        cur = err.source();
    }
    None
}

/// `sslmode=verify-ca`: the chain is checked, the name is not.
#[derive(Debug)]
struct AnyName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// `sslmode=prefer|require` without `sslrootcert`: encrypted, the certificate not checked
/// (libpq's meaning of those modes); the handshake's signatures still are.
#[derive(Debug)]
struct Unchecked(Arc<CryptoProvider>);

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ssl_parameters_leave_the_url_for_tokio_postgres() {
        let (rest, mode, root) = split(
            "postgres://cuzk@db.internal:5432/cuzk?sslmode=verify-full&application_name=x&sslrootcert=%2Fetc%2Fca.pem",
        )
        .unwrap();
        assert_eq!(
            rest,
            "postgres://cuzk@db.internal:5432/cuzk?application_name=x"
        );
        assert_eq!(mode.as_deref(), Some("verify-full"));
        assert_eq!(root.as_deref(), Some("/etc/ca.pem"));
        let (rest, mode, root) =
            split("host=db user=cuzk sslmode=verify-ca sslrootcert=/etc/ca.pem dbname=cuzk")
                .unwrap();
        assert_eq!(rest, "host=db user=cuzk dbname=cuzk");
        assert_eq!(mode.as_deref(), Some("verify-ca"));
        assert_eq!(root.as_deref(), Some("/etc/ca.pem"));
    }

    #[test]
    fn a_remote_host_is_verified_by_default_and_loopback_is_not() {
        let mode = |url: &str| mode_for(&url.parse().unwrap(), None).unwrap();
        assert_eq!(
            mode("postgres://cuzk@db.internal/cuzk"),
            SslMode::VerifyFull
        );
        assert_eq!(
            mode("host=127.0.0.1,db.internal user=cuzk"),
            SslMode::VerifyFull
        );
        assert_eq!(mode("postgres://cuzk@127.0.0.1/cuzk"), SslMode::Prefer);
        assert_eq!(mode("host=/run/postgresql user=cuzk"), SslMode::Prefer);
        let given = |url: &str, m| mode_for(&url.parse().unwrap(), Some(m)).unwrap();
        assert_eq!(
            given("postgres://db.internal/cuzk", "disable"),
            SslMode::Disable
        );
        let e = connection("postgres://db/cuzk?sslmode=verify").unwrap_err();
        assert!(e.contains("sslmode=\"verify\""), "{e}");
        let e = connection("postgres://db/cuzk?sslmode=require&sslrootcert=/nonexistent.pem")
            .unwrap_err();
        assert!(e.contains("sslrootcert=/nonexistent.pem"), "{e}");
    }
}
