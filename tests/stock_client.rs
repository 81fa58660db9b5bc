//! A client of another gRPC stack, unchanged: Python's grpcio (pinned, installed by this test
//! into a folder of its own under the target directory) against `cuzk daemon` on its default
//! unix socket. tests/stock_client.py does health, reflection v1 and v1alpha, Status and a
//! proof; `cuzk verify` then checks the proof. (A test target of `crates/cuzk`.)

use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "support/daemon.rs"]
mod daemon;
#[path = "support/files.rs"]
mod files;
#[path = "support/run.rs"]
mod run;
use daemon::Daemon;
use files::s;
use run::ok;

/// The Python packages, pinned (1.85 is the release the issue was found with).
const PACKAGES: [&str; 4] = [
    "grpcio==1.85.0",
    "grpcio-tools==1.85.0",
    "grpcio-health-checking==1.85.0",
    "grpcio-reflection==1.85.0",
];

/// A Python with the pinned packages: a virtual environment made once per target directory.
fn python() -> PathBuf {
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("stock-client-venv-1.85.0");
    let py = venv.join("bin/python");
    let ready = |py: &Path| {
        Command::new(py)
            .args([
                "-c",
                "import grpc, grpc_tools, grpc_health.v1, grpc_reflection",
            ])
            .status()
            .is_ok_and(|s| s.success())
    };
    if ready(&py) {
        return py;
    }
    let system = std::env::var("CUZK_PYTHON").unwrap_or_else(|_| "python3".into());
    let made = Command::new(&system)
        .args(["-m", "venv"])
        .arg(&venv)
        .output()
        .unwrap_or_else(|e| {
            panic!("the stock-client test needs Python 3 ({system}: {e}); .ci/run installs it")
        });
    assert!(
        made.status.success(),
        "{system} -m venv {}: {}",
        venv.display(),
        String::from_utf8_lossy(&made.stderr)
    );
    let pip = Command::new(&py)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
        ])
        .args(PACKAGES)
        .output()
        .expect("run pip");
    assert!(
        pip.status.success() && ready(&py),
        "installing {PACKAGES:?} from PyPI failed: {}",
        String::from_utf8_lossy(&pip.stderr)
    );
    py
}

#[test]
fn a_stock_grpcio_client_checks_health_reflects_and_proves_on_the_default_socket() {
    let python = python();
    let dir = std::env::temp_dir().join(format!("cuzk-stock-client-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let runtime = dir.join("run");
    std::fs::create_dir_all(&runtime).unwrap();
    files::circuit_and_key(&dir, 8);
    // No listen: the default socket, $XDG_RUNTIME_DIR/cuzk.sock.
    let config = dir.join("cuzk.toml");
    std::fs::write(
        &config,
        format!(
            "param_dir = {:?}\nbackend = \"cpu\"\ncpu_device_memory = 1073741824\n",
            s(&dir)
        ),
    )
    .unwrap();
    let (_daemon, _) = Daemon::start_with_env(&config, &[("XDG_RUNTIME_DIR", &runtime)]);
    let proto = Path::new(env!("CARGO_MANIFEST_DIR")).join("../daemon/proto");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/stock_client.py");
    let out = Command::new(&python)
        .arg(&script)
        .env("CUZK_SOCKET", runtime.join("cuzk.sock"))
        .env("CUZK_PROTO_DIR", &proto)
        .env("CUZK_WITNESS", dir.join("c.wit"))
        .env("CUZK_PK", "c.pk")
        .env("CUZK_R1CS", "c.r1cs")
        .env("CUZK_OUT", &dir)
        .output()
        .expect("run the Python client");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "the Python client failed:\n{said}");
    println!("{said}");
    for line in [
        "health: SERVING",
        "reflection v1:",
        "reflection v1alpha:",
        "proof:",
    ] {
        assert!(said.contains(line), "{line:?} missing:\n{said}");
    }
    ok(&[
        "verify",
        "--vk",
        s(&dir.join("c.vk")),
        "--proof",
        s(&dir.join("proof")),
        "--public",
        s(&dir.join("public")),
    ]);
    let _ = std::fs::remove_dir_all(&dir);
}
