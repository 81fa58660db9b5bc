//! A `cuzk daemon` child process of the end-to-end tests: started, waited for until it listens,
//! its stderr collected, killed when dropped.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub struct Daemon {
    pub child: Child,
    /// Its log up to "listening on".
    #[allow(dead_code)] // not every test target reads it
    pub startup: String,
    log: Option<JoinHandle<String>>,
}

impl Daemon {
    /// Starts `cuzk --log info daemon --config CONFIG` and waits until it listens; returns it
    /// and how long that took.
    #[allow(dead_code)] // not every test target starts one without
    pub fn start(config: &Path) -> (Self, Duration) {
        Self::start_with_env(config, &[])
    }

    /// [`Daemon::start`] with these environment variables set for the daemon.
    #[allow(dead_code)] // not every test target sets any
    pub fn start_with_env(config: &Path, env: &[(&str, &Path)]) -> (Self, Duration) {
        let t = Instant::now();
        let mut child = Command::new(env!("CARGO_BIN_EXE_cuzk"))
            .args(["--log", "info", "daemon", "--config"])
            .arg(config)
            .envs(env.iter().copied())
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("start the daemon");
        let (tx, rx) = mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        let log = std::thread::spawn(move || {
            let mut all = String::new();
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line.clone());
                all.push_str(&line);
                all.push('\n');
            }
            all
        });
        let mut startup = String::new();
        loop {
            let line = rx
                .recv_timeout(Duration::from_secs(120).saturating_sub(t.elapsed()))
                .unwrap_or_else(|_| panic!("the daemon never said it listens:\n{startup}"));
            startup.push_str(&line);
            startup.push('\n');
            if line.contains("listening on") {
                break;
            }
        }
        let d = Self {
            child,
            startup,
            log: Some(log),
        };
        (d, t.elapsed())
    }

    /// Its whole log, once it has exited.
    #[allow(dead_code)] // not every test target reads the log
    pub fn log(&mut self) -> String {
        self.log
            .take()
            .map(|h| h.join().unwrap_or_default())
            .unwrap_or_default()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
