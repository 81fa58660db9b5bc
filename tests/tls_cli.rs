//! The `cuzk` client commands over TLS to a daemon that asks for client certificates:
//! `--tls-ca`, `--tls-cert`, `--tls-key` and the same in the environment (`CUZK_TLS_CA`, ...),
//! a proof submitted and verified, and the one line a user sees for a wrong CA or a missing
//! client certificate. (A test target of `crates/cuzk`.)

use std::path::Path;
use std::process::{Command, Output};

#[path = "support/certs.rs"]
mod certs;
#[path = "support/daemon.rs"]
mod daemon;
#[path = "support/files.rs"]
mod files;
#[path = "support/run.rs"]
mod run;
use daemon::Daemon;
use files::s;
use run::ok;

fn cuzk_env(args: &[&str], env: &[(&str, &Path)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cuzk"))
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("run cuzk")
}

/// The last line of a failed command's stderr.
fn error_line(out: &Output) -> String {
    assert!(!out.status.success(), "should have failed");
    let err = String::from_utf8_lossy(&out.stderr);
    err.lines().last().unwrap_or_default().to_owned()
}

#[test]
fn client_commands_over_tls_with_a_client_certificate() {
    let dir = std::env::temp_dir().join(format!("cuzk-tls-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    files::circuit_and_key(&dir, 6);
    let ca = certs::Ca::new("cuzk test CA");
    let clients = certs::Ca::new("cuzk clients CA");
    let (server_crt, server_key) = ca.leaf("daemon", false).write(&dir, "server");
    let (client_crt, client_key) = clients.leaf("client", false).write(&dir, "client");
    let p = |n: &str| dir.join(n);
    std::fs::write(p("ca.pem"), ca.pem()).unwrap();
    std::fs::write(p("clients.pem"), clients.pem()).unwrap();
    std::fs::write(p("token"), "cli-tls-token-0123456789\n").unwrap();
    let config = p("cuzk.toml");
    std::fs::write(
        &config,
        format!(
            "listen = \"127.0.0.1:0\"\ntoken_file = {:?}\nparam_dir = {:?}\nbackend = \"cpu\"\n\
             cpu_device_memory = 1073741824\n\n[tls]\ncert = {:?}\nkey = {:?}\nclient_ca = {:?}\n\n\
             [[keys]]\nid = \"k\"\npk = \"c.pk\"\nr1cs = \"c.r1cs\"\ntrusted = true\n",
            s(&p("token")),
            s(&dir),
            s(&server_crt),
            s(&server_key),
            s(&p("clients.pem")),
        ),
    )
    .unwrap();
    let (d, _) = Daemon::start(&config);
    let addr = d
        .startup
        .lines()
        .find_map(|l| l.split("listening on ").nth(1))
        .expect("the address in the log")
        .trim()
        .to_owned();

    let (token, ca_pem, other_pem) = (p("token"), p("ca.pem"), p("other.pem"));
    let flags = [
        "--daemon",
        &addr,
        "--token-file",
        s(&token),
        "--tls-ca",
        s(&ca_pem),
        "--tls-cert",
        s(&client_crt),
        "--tls-key",
        s(&client_key),
    ];
    let status = ok(&[&["status"][..], &flags].concat());
    assert!(status.contains('k'), "{status}");
    files::prove_and_verify(&dir, &flags);

    // The same through the environment.
    let env = [
        ("CUZK_TOKEN_FILE", p("token")),
        ("CUZK_TLS_CA", p("ca.pem")),
        ("CUZK_TLS_CERT", client_crt.clone()),
        ("CUZK_TLS_KEY", client_key.clone()),
    ];
    let env: Vec<(&str, &Path)> = env.iter().map(|(k, v)| (*k, v.as_path())).collect();
    let out = cuzk_env(&["status", "--daemon", &addr], &env);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // A CA that did not sign the daemon's certificate; no client certificate.
    std::fs::write(&other_pem, certs::Ca::new("another CA").pem()).unwrap();
    let mut wrong = flags;
    wrong[5] = s(&other_pem);
    let line = error_line(&cuzk_env(&[&["status"][..], &wrong].concat(), &[]));
    assert!(line.contains("not signed by the CA given"), "{line}");
    let line = error_line(&cuzk_env(&[&["status"][..], &flags[..6]].concat(), &[]));
    assert!(line.contains("requires a client certificate"), "{line}");
    drop(d);
    let _ = std::fs::remove_dir_all(&dir);
}
