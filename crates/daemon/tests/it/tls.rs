//! TLS on the daemon's TCP port, on loopback, with certificates the test makes (rcgen): with
//! and without client certificates, the token over TLS, and one clear line for an expired
//! certificate, a wrong CA, a client without a certificate, plaintext to the TLS port and TLS
//! to a plaintext port; a non-loopback plaintext listener is refused at start.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use cuzk_daemon::client::{self, Client, ClientError, ClientTls};
use cuzk_daemon::{Daemon, DaemonConfig, DaemonError, TlsConfig, pb};
use cuzk_formats::cuzk;
use cuzk_groth16::{ToxicWaste, generate_parameters_with_toxic_waste};
use cuzk_scheduler::Engine;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use tonic::Code;

#[path = "../../../../tests/support/certs.rs"]
mod certs;

const TOKEN: &str = "tls-test-token-0123456789";

/// The test's files: certificates, the token, a small key and its witness.
struct Files {
    dir: PathBuf,
    ca: PathBuf,
    wrong_ca: PathBuf,
    server: (PathBuf, PathBuf),
    expired: (PathBuf, PathBuf),
    client_ca: PathBuf,
    client: (PathBuf, PathBuf),
    stranger: (PathBuf, PathBuf),
    token: PathBuf,
    witness: Vec<u8>,
    vk: cuzk_groth16::VerifyingKey,
}

fn files() -> &'static Files {
    static F: OnceLock<Files> = OnceLock::new();
    F.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("cuzk-tls-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let write = |name: &str, text: String| {
            let p = dir.join(name);
            std::fs::write(&p, text).unwrap();
            p
        };
        let ca = certs::Ca::new("cuzk test CA");
        let client_ca = certs::Ca::new("cuzk clients CA");
        let wrong = certs::Ca::new("nobody's CA");
        let mut rng = ChaCha20Rng::seed_from_u64(3);
        let (r1cs, w) = cuzk_groth16::testing::demo::circuit(6, 2, &mut rng).unwrap();
        let (pk, _) =
            generate_parameters_with_toxic_waste(&r1cs, &ToxicWaste::random(&mut rng)).unwrap();
        let file = |name: &str| std::fs::File::create(dir.join(name)).unwrap();
        cuzk::write_r1cs(file("k.r1cs"), &r1cs).unwrap();
        cuzk::write_proving_key(file("k.pk"), &pk).unwrap();
        let mut witness = Vec::new();
        cuzk::write_witness(&mut witness, &w).unwrap();
        Files {
            ca: write("ca.pem", ca.pem()),
            wrong_ca: write("wrong-ca.pem", wrong.pem()),
            server: ca.leaf("daemon", false).write(&dir, "server"),
            expired: ca.leaf("daemon", true).write(&dir, "expired"),
            client_ca: write("client-ca.pem", client_ca.pem()),
            client: client_ca.leaf("client", false).write(&dir, "client"),
            stranger: wrong.leaf("stranger", false).write(&dir, "stranger"),
            token: write("token", format!("{TOKEN}\n")),
            witness,
            vk: pk.vk.clone(),
            dir,
        }
    })
}

fn config(tls: Option<TlsConfig>) -> DaemonConfig {
    let f = files();
    DaemonConfig {
        listen: Some("127.0.0.1:0".into()),
        token_file: Some(f.token.clone()),
        tls,
        param_dir: f.dir.clone(),
        backend: "cpu".into(),
        host_memory: Some(4 << 30),
        cpu_device_memory: 1 << 30,
        ..DaemonConfig::default()
    }
}

fn server_tls(cert: &(PathBuf, PathBuf), client_ca: Option<&Path>) -> TlsConfig {
    TlsConfig {
        cert: cert.0.clone(),
        key: cert.1.clone(),
        client_ca: client_ca.map(Path::to_owned),
    }
}

fn client_tls(ca: &Path, identity: Option<&(PathBuf, PathBuf)>) -> ClientTls {
    ClientTls {
        ca: Some(ca.to_owned()),
        cert: identity.map(|i| i.0.clone()),
        key: identity.map(|i| i.1.clone()),
    }
}

/// A daemon serving in this process until the returned sender is dropped.
async fn start(config: DaemonConfig) -> (String, tokio::sync::oneshot::Sender<()>) {
    let engine = Engine::new(config.engine().unwrap()).unwrap();
    let daemon = Daemon::bind(config, engine).await.unwrap();
    let addr = daemon.address();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(daemon.run(async {
        let _ = rx.await;
    }));
    (addr, tx)
}

async fn connect(addr: &str, tls: Option<&ClientTls>) -> Result<Client, ClientError> {
    client::connect(Some(addr), Some(TOKEN), tls).await
}

/// The one line a failed call or connection shows (what `cuzk` prints).
async fn status_line(addr: &str, tls: Option<&ClientTls>) -> String {
    match connect(addr, tls).await {
        Err(e) => e.to_string(),
        Ok(mut c) => match c.status(pb::StatusRequest {}).await {
            Ok(_) => panic!("{addr}: the call went through"),
            Err(s) => std::error::Error::source(&s)
                .and_then(|e| cuzk_daemon::tls::explain_chain(e, cuzk_daemon::tls::Peer::Daemon))
                .unwrap_or_else(|| s.message().to_owned()),
        },
    }
}

async fn prove(c: &mut Client) {
    let f = files();
    let r = c
        .load_key(pb::LoadKeyRequest {
            key_id: "k".into(),
            pk_path: "k.pk".into(),
            r1cs_path: "k.r1cs".into(),
            devices: vec![],
            trusted: true,
        })
        .await
        .unwrap();
    assert!(r.into_inner().key.is_some());
    let header = pb::SubmitHeader {
        key_id: "k".into(),
        ..Default::default()
    };
    let msgs = client::bytes_stream(header, &f.witness);
    let r = c
        .prove(tokio_stream::iter(msgs))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.state, pb::JobState::Done as i32);
    let proof = cuzk::read_proof("proof", &r.proof[..]).unwrap();
    let public = cuzk::read_witness("public inputs", &r.public_inputs[..]).unwrap();
    let pvk = cuzk_groth16::prepare_verifying_key(&f.vk);
    cuzk_groth16::verify_proof(&pvk, &proof, public.public_inputs()).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_without_client_certificates_and_the_clear_lines() {
    let f = files();
    let (addr, _stop) = start(config(Some(server_tls(&f.server, None)))).await;
    let good = client_tls(&f.ca, None);

    let mut c = connect(&addr, Some(&good)).await.unwrap();
    let s = c.status(pb::StatusRequest {}).await.unwrap().into_inner();
    assert!(!s.devices.is_empty());
    // The token check stands over TLS.
    let mut no_token = client::connect(Some(&addr), None, Some(&good))
        .await
        .unwrap();
    let e = no_token.status(pb::StatusRequest {}).await.unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated, "{e:?}");

    let line = status_line(&addr, Some(&client_tls(&f.wrong_ca, None))).await;
    assert!(line.contains("not signed by the CA given"), "{line}");

    // Plaintext to the TLS port: every call is answered that the port needs TLS.
    let mut plain = connect(&addr, None).await.unwrap();
    let e = plain.status(pb::StatusRequest {}).await.unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated, "{e:?}");
    assert!(e.message().contains("accepts only TLS"), "{e:?}");

    let (expired_addr, _stop_expired) = start(config(Some(server_tls(&f.expired, None)))).await;
    let line = status_line(&expired_addr, Some(&good)).await;
    assert!(line.contains("has expired"), "{line}");

    // TLS to a plaintext (loopback) port.
    let (plain_addr, _stop_plain) = start(config(None)).await;
    let line = status_line(&plain_addr, Some(&good)).await;
    assert!(line.contains("does not speak TLS"), "{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_certificates_chain_to_client_ca_or_are_refused() {
    let f = files();
    let tls = server_tls(&f.server, Some(&f.client_ca));
    let (addr, _stop) = start(config(Some(tls))).await;

    let mut c = connect(&addr, Some(&client_tls(&f.ca, Some(&f.client))))
        .await
        .unwrap();
    prove(&mut c).await;

    let line = status_line(&addr, Some(&client_tls(&f.ca, None))).await;
    assert!(line.contains("requires a client certificate"), "{line}");
    let line = status_line(&addr, Some(&client_tls(&f.ca, Some(&f.stranger)))).await;
    assert!(line.contains("refused our client certificate"), "{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_loopback_plaintext_listener_is_refused_at_start() {
    let mut cfg = config(None);
    cfg.listen = Some("0.0.0.0:0".into());
    let engine = Engine::new(cfg.engine().unwrap()).unwrap();
    let e = Daemon::bind(cfg.clone(), engine).await.unwrap_err();
    assert!(matches!(e, DaemonError::PlaintextTcp(_)), "{e}");
    assert!(e.to_string().contains("insecure_plaintext = true"), "{e}");

    cfg.insecure_plaintext = true;
    let engine = Engine::new(cfg.engine().unwrap()).unwrap();
    let d = Daemon::bind(cfg, engine).await.unwrap();
    assert!(d.address().starts_with("0.0.0.0:"), "{}", d.address());

    // [tls] on a unix socket is a mistake the config names.
    let mut unix = config(Some(server_tls(&files().server, None)));
    unix.listen = Some("unix:/tmp/x.sock".into());
    let e = unix.validate().unwrap_err();
    assert!(e.to_string().contains("unix socket"), "{e}");
}
