//! What the daemon's tests share: a daemon serving in this process, and a circuit's files.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use cuzk_daemon::client::{self, Client};
use cuzk_daemon::{Daemon, DaemonConfig, DaemonError, Shared};
use cuzk_formats::cuzk;
use cuzk_groth16::{Fr, ProvingKey, R1cs, Witness};
use cuzk_scheduler::Engine;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// A daemon serving in this process until `stop`, or drop.
pub struct Running {
    pub addr: String,
    pub shared: Arc<Shared>,
    /// The HTTP port's address, when the config opens one.
    pub http: Option<SocketAddr>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), DaemonError>>>,
}

impl Running {
    /// Binds `config` on `engine`, loads the keys the config names, and serves.
    pub async fn start(config: DaemonConfig, engine: Engine) -> Self {
        let daemon = Daemon::bind(config, engine).await.unwrap();
        daemon.preload().await.unwrap();
        let addr = daemon.address();
        let http = daemon.http_address();
        let shared = daemon.shared().clone();
        let (tx, rx) = oneshot::channel();
        let task = tokio::spawn(daemon.run(async {
            let _ = rx.await;
        }));
        Self {
            addr,
            shared,
            http,
            stop: Some(tx),
            task: Some(task),
        }
    }

    pub async fn client(&self) -> Client {
        client::connect(Some(&self.addr), None, None).await.unwrap()
    }

    /// Signals shutdown and waits for the daemon to finish its drain.
    pub async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        self.task.take().unwrap().await.unwrap().unwrap();
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }
}

/// Writes `name.r1cs` and `name.pk` into `dir`; returns the witness's bytes, and those of a
/// witness of the same length that does not satisfy the circuit.
pub fn write_circuit(
    dir: &Path,
    name: &str,
    r1cs: &R1cs,
    pk: &ProvingKey,
    w: &Witness,
) -> (Vec<u8>, Vec<u8>) {
    let file = |ext: &str| std::fs::File::create(dir.join(format!("{name}.{ext}"))).unwrap();
    cuzk::write_r1cs(file("r1cs"), r1cs).unwrap();
    cuzk::write_proving_key(file("pk"), pk).unwrap();
    let mut witness = Vec::new();
    cuzk::write_witness(&mut witness, w).unwrap();
    let mut z = w.assignment().to_vec();
    let last = z.len() - 1;
    z[last] += Fr::ONE;
    let mut unsatisfied = Vec::new();
    cuzk::write_witness(
        &mut unsatisfied,
        &Witness::from_assignment(w.num_public(), z).unwrap(),
    )
    .unwrap();
    (witness, unsatisfied)
}
