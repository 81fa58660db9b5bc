//! The daemon's TOML configuration (`cuzk.example.toml` documents every field).

use std::path::{Path, PathBuf};
use std::time::Duration;

use cuzk_groth16::BackendChoice;
use cuzk_scheduler::EngineConfig;
use serde::Deserialize;

/// Why a configuration could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Parse {
        path: PathBuf,
        #[source]
        source: Box<toml::de::Error>,
    },
    #[error("{0}")]
    Invalid(String),
}

/// Where the daemon listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    /// A unix socket (mode 0600).
    Unix(PathBuf),
    /// A TCP address (`host:port`).
    Tcp(String),
}

impl Listen {
    /// `unix:PATH`, a path (containing `/`), or `host:port`.
    pub fn parse(s: &str) -> Result<Self, ConfigError> {
        if let Some(p) = s.strip_prefix("unix:") {
            return Ok(Listen::Unix(PathBuf::from(p)));
        }
        if s.contains('/') {
            return Ok(Listen::Unix(PathBuf::from(s)));
        }
        if s.rsplit_once(':')
            .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok())
        {
            return Ok(Listen::Tcp(s.to_owned()));
        }
        Err(ConfigError::Invalid(format!(
            "listen address {s:?}: expected unix:PATH, a socket path, or host:port"
        )))
    }
}

impl std::fmt::Display for Listen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Listen::Unix(p) => write!(f, "unix:{}", p.display()),
            Listen::Tcp(a) => write!(f, "{a}"),
        }
    }
}

/// The default socket: `$XDG_RUNTIME_DIR/cuzk.sock`, else `/tmp/cuzk-<uid>.sock`.
pub fn default_socket() -> PathBuf {
    if let Some(d) = std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        return Path::new(&d).join("cuzk.sock");
    }
    use std::os::unix::fs::MetadataExt;
    let uid = std::fs::metadata("/proc/self")
        .map(|m| m.uid())
        .unwrap_or(0);
    std::env::temp_dir().join(format!("cuzk-{uid}.sock"))
}

/// A key to load at start.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct KeyConfig {
    pub id: String,
    /// Proving key file (`cuzk setup --pk`), relative to `param_dir`.
    pub pk: PathBuf,
    /// Circuit file (`cuzk circuit --r1cs`), relative to `param_dir`.
    pub r1cs: PathBuf,
    /// Engine device indices; absent: every device.
    #[serde(default)]
    pub devices: Option<Vec<usize>>,
    /// Check the key's points only for being on the curve, not for the prime-order subgroup:
    /// ~10x faster to load, for key files you made (`cuzk setup`) whose integrity their
    /// checksum covers. A bad key can only make this daemon's proofs fail, never make a
    /// verifier accept a false one.
    #[serde(default)]
    pub trusted: bool,
}

/// The whole configuration. Every field has a default, so an empty file is valid.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct DaemonConfig {
    /// `unix:PATH`, a socket path, or `host:port`; absent: [`default_socket`].
    pub listen: Option<String>,
    /// A file holding the bearer token clients must send (`authorization: Bearer TOKEN`).
    pub token_file: Option<PathBuf>,
    /// TLS on the TCP listener; absent: plaintext, which is refused on a non-loopback address
    /// unless `insecure_plaintext` is set.
    pub tls: Option<crate::tls::TlsConfig>,
    /// Serve plaintext TCP on a non-loopback address (the token crosses the network in the
    /// clear): for a network that is private by other means.
    pub insecure_plaintext: bool,
    /// Key files are read only inside this directory.
    pub param_dir: PathBuf,
    /// Filecoin's parameter files (`.params`, `.vk` under filecoin-proofs' names); absent:
    /// `FIL_PROOFS_PARAMETER_CACHE`, else filecoin-proofs' default
    /// `/var/tmp/filecoin-proof-parameters`.
    pub filecoin_param_dir: Option<PathBuf>,
    /// Make each Filecoin circuit's key at its first proof, from random toxic waste, when its
    /// `.params` file is absent from `filecoin_param_dir`: on the first GPU and held there (no
    /// host copy, so a 32 GiB circuit's key needs no 47 GB file), else on the CPU. Only the
    /// `.vk` is written, under filecoin-proofs' name, for its verifier; a restart makes new
    /// keys. The directory becomes one of generated parameters (a directory of published ones
    /// is refused at start). For benchmarks, tests and private networks only.
    pub filecoin_generate_keys: bool,
    /// Largest message of curio's service, in bytes: a PoRep's C1 output travels in one (about
    /// 50 MB at 32 GiB).
    pub max_filecoin_message_bytes: usize,
    /// When set, witness paths in Submit must lie inside it; absent: on the unix socket any
    /// path the daemon can read (same-host clients of the 0600 socket are trusted with the
    /// daemon's files), over TCP none.
    pub witness_dir: Option<PathBuf>,
    /// `host:port` of the HTTP server for `GET /metrics`, `/status` and `/timeline`; absent: none.
    pub http_listen: Option<String>,
    /// Seconds running jobs may take to finish on SIGTERM/SIGINT before they are cancelled.
    pub drain_timeout_s: f64,
    /// Longest Await, in seconds (a client asking for longer, or 0, gets this).
    pub max_await_s: f64,
    /// Largest gRPC message (so the largest witness chunk), in bytes.
    pub max_message_bytes: usize,
    /// Witness and Filecoin input bytes all Submit streams together may buffer at once.
    pub max_upload_bytes: u64,
    /// Jobs tracked at once (queued, running, and finished results kept for Await).
    pub max_jobs: usize,
    /// Seconds a finished job's result is kept for Await.
    pub result_ttl_s: f64,
    /// Engine: auto (GPUs when present), cpu or gpu.
    pub backend: String,
    /// Engine: GPU ordinals; absent: all.
    pub gpus: Option<Vec<usize>>,
    /// Engine: workers per device; absent: what each device's memory admits for the loaded
    /// keys, at most 2.
    pub workers_per_device: Option<usize>,
    /// Engine: witnesses read or computed ahead of the workers at once; 0: each worker makes its
    /// own.
    pub read_ahead: usize,
    /// Engine: keep each key's circuit on the device when its memory has room, so that the
    /// device makes a, b, c from the witness; false: the host's witness map always.
    pub witness_map_on_device: bool,
    /// Engine: logical devices per physical device.
    pub split: usize,
    /// Engine: host memory budget in bytes, beside the pinned budget; absent: RAM less a margin
    /// less the GPUs' pinned budget (`CUZK_PINNED_LIMIT`).
    pub host_memory: Option<u64>,
    /// Engine: simulated device memory of the CPU backend, in bytes.
    pub cpu_device_memory: u64,
    /// Engine: verify every proof before returning it.
    pub self_check: bool,
    /// Keys loaded at start.
    pub keys: Vec<KeyConfig>,
    /// Queue mode: also claim jobs from this PostgreSQL queue (`cuzk-queue`); absent: none.
    pub queue: Option<cuzk_queue::QueueConfig>,
}

impl Default for DaemonConfig {
    fn default() -> Self {
        let engine = EngineConfig::default();
        Self {
            listen: None,
            token_file: None,
            tls: None,
            insecure_plaintext: false,
            param_dir: PathBuf::from("."),
            filecoin_param_dir: None,
            filecoin_generate_keys: false,
            max_filecoin_message_bytes: 256 << 20,
            witness_dir: None,
            http_listen: None,
            drain_timeout_s: 60.0,
            max_await_s: 3600.0,
            max_message_bytes: 8 << 20,
            max_upload_bytes: 16 << 30,
            max_jobs: 4096,
            result_ttl_s: 3600.0,
            backend: "auto".into(),
            gpus: None,
            workers_per_device: None,
            read_ahead: engine.read_ahead,
            witness_map_on_device: engine.witness_map_on_device,
            split: 1,
            host_memory: None,
            cpu_device_memory: engine.cpu_device_memory,
            self_check: true,
            keys: Vec::new(),
            queue: None,
        }
    }
}

/// Settings given on the command line (`cuzk daemon`'s flags); each one given replaces its
/// field of the file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DaemonOverrides {
    pub listen: Option<String>,
    pub param_dir: Option<PathBuf>,
    pub http_listen: Option<String>,
    pub workers_per_device: Option<usize>,
    pub drain_timeout_s: Option<f64>,
    pub token_file: Option<PathBuf>,
    /// Sets `queue.url`, keeping the file's other `[queue]` settings (or their defaults).
    pub queue_url: Option<String>,
    pub backend: Option<BackendChoice>,
    /// Sets `filecoin_generate_keys` (a flag: false leaves the file's setting).
    pub filecoin_generate_keys: bool,
}

impl DaemonConfig {
    pub fn from_toml(text: &str, path: &Path) -> Result<Self, ConfigError> {
        let c: Self = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.to_owned(),
            source: Box::new(e),
        })?;
        c.validate()?;
        Ok(c)
    }

    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
            path: path.to_owned(),
            source: e,
        })?;
        Self::from_toml(&text, path)
    }

    /// Applies command-line overrides; the caller validates the result.
    pub fn apply(&mut self, o: DaemonOverrides) {
        if o.listen.is_some() {
            self.listen = o.listen;
        }
        if let Some(p) = o.param_dir {
            self.param_dir = p;
        }
        if o.http_listen.is_some() {
            self.http_listen = o.http_listen;
        }
        if o.workers_per_device.is_some() {
            self.workers_per_device = o.workers_per_device;
        }
        if let Some(s) = o.drain_timeout_s {
            self.drain_timeout_s = s;
        }
        if o.token_file.is_some() {
            self.token_file = o.token_file;
        }
        if let Some(url) = o.queue_url {
            self.queue = Some(cuzk_queue::QueueConfig {
                url,
                ..self.queue.take().unwrap_or_default()
            });
        }
        if o.filecoin_generate_keys {
            self.filecoin_generate_keys = true;
        }
        if let Some(b) = o.backend {
            self.backend = match b {
                BackendChoice::Auto => "auto",
                BackendChoice::Cpu => "cpu",
                BackendChoice::Gpu => "gpu",
            }
            .into();
        }
    }

    /// Where Filecoin's parameter files are read.
    pub fn filecoin_params(&self) -> cuzk_filecoin::ParamStore {
        match &self.filecoin_param_dir {
            Some(dir) => cuzk_filecoin::ParamStore::new(dir),
            None => cuzk_filecoin::ParamStore::from_env(),
        }
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |m: String| Err(ConfigError::Invalid(m));
        let listen = self.listen_addr()?;
        if self.tls.is_some() && matches!(listen, Listen::Unix(_)) {
            return bad(
                "[tls] is set but listen is a unix socket: TLS applies to a TCP listen address"
                    .into(),
            );
        }
        self.backend_choice()?;
        if !(self.drain_timeout_s >= 0.0 && self.drain_timeout_s.is_finite()) {
            return bad(format!(
                "drain_timeout_s = {} (need >= 0)",
                self.drain_timeout_s
            ));
        }
        if !(self.max_await_s > 0.0 && self.max_await_s.is_finite()) {
            return bad(format!("max_await_s = {} (need > 0)", self.max_await_s));
        }
        if !(self.result_ttl_s >= 0.0 && self.result_ttl_s.is_finite()) {
            return bad(format!("result_ttl_s = {} (need >= 0)", self.result_ttl_s));
        }
        if self.max_message_bytes < 4096 {
            return bad(format!(
                "max_message_bytes = {} (need >= 4096)",
                self.max_message_bytes
            ));
        }
        if self.max_jobs == 0 || self.workers_per_device == Some(0) || self.split == 0 {
            return bad("max_jobs, workers_per_device and split must be at least 1".into());
        }
        if let Some(q) = &self.queue {
            q.validate().map_err(ConfigError::Invalid)?;
        }
        let mut ids = std::collections::HashSet::new();
        for k in &self.keys {
            if !ids.insert(&k.id) {
                return bad(format!("key {:?} is named twice", k.id));
            }
        }
        Ok(())
    }

    pub fn listen_addr(&self) -> Result<Listen, ConfigError> {
        match &self.listen {
            None => Ok(Listen::Unix(default_socket())),
            Some(s) => Listen::parse(s),
        }
    }

    pub fn backend_choice(&self) -> Result<BackendChoice, ConfigError> {
        match self.backend.as_str() {
            "auto" => Ok(BackendChoice::Auto),
            "cpu" => Ok(BackendChoice::Cpu),
            "gpu" => Ok(BackendChoice::Gpu),
            b => Err(ConfigError::Invalid(format!(
                "backend = {b:?} (expected auto, cpu or gpu)"
            ))),
        }
    }

    /// The engine's settings: these fields over the environment's device budgets.
    pub fn engine(&self) -> Result<EngineConfig, ConfigError> {
        let base = EngineConfig::from_env().map_err(|e| ConfigError::Invalid(e.to_string()))?;
        Ok(EngineConfig {
            backend: self.backend_choice()?,
            gpus: self.gpus.clone(),
            split: self.split,
            workers_per_device: match self.workers_per_device {
                Some(n) => cuzk_scheduler::Workers::Fixed(n),
                None => cuzk_scheduler::Workers::Auto,
            },
            read_ahead: self.read_ahead,
            witness_map_on_device: self.witness_map_on_device,
            host_memory: self.host_memory,
            cpu_device_memory: self.cpu_device_memory,
            self_check: self.self_check,
            ..base
        })
    }

    /// Blocking threads a runtime of the daemon may start: one per job in flight (its waiter),
    /// and beside them key loads, witness parses and status calls.
    pub fn blocking_threads(&self) -> usize {
        self.max_jobs + 64
    }

    pub fn drain_timeout(&self) -> Duration {
        Duration::from_secs_f64(self.drain_timeout_s)
    }

    /// The bearer token, read from `token_file` (surrounding whitespace dropped).
    pub fn token(&self) -> Result<Option<String>, ConfigError> {
        let Some(p) = &self.token_file else {
            return Ok(None);
        };
        let t = std::fs::read_to_string(p).map_err(|e| ConfigError::Read {
            path: p.clone(),
            source: e,
        })?;
        let t = t.trim().to_owned();
        if t.len() < 16 {
            return Err(ConfigError::Invalid(format!(
                "the token in {} is shorter than 16 characters",
                p.display()
            )));
        }
        Ok(Some(t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
listen = "unix:/run/cuzk.sock"
http_listen = "127.0.0.1:9100"
workers_per_device = 2
drain_timeout_s = 30.0
backend = "cpu"
[queue]
url = "postgres://old/db"
lease_s = 70.0
"#;

    #[test]
    fn overrides_replace_only_the_fields_given() {
        let file = DaemonConfig::from_toml(FILE, Path::new("cuzk.toml")).unwrap();
        let mut c = file.clone();
        c.apply(DaemonOverrides::default());
        assert_eq!(c, file, "no flags change nothing");

        c.apply(DaemonOverrides {
            listen: Some("127.0.0.1:9000".into()),
            param_dir: Some("/params".into()),
            workers_per_device: Some(3),
            drain_timeout_s: Some(5.0),
            token_file: Some("/etc/cuzk/token".into()),
            queue_url: Some("postgres://new/db".into()),
            backend: Some(BackendChoice::Gpu),
            filecoin_generate_keys: true,
            ..DaemonOverrides::default()
        });
        c.validate().unwrap();
        assert!(c.filecoin_generate_keys && !file.filecoin_generate_keys);
        assert_eq!(c.listen.as_deref(), Some("127.0.0.1:9000"));
        assert_eq!(c.param_dir, PathBuf::from("/params"));
        assert_eq!(c.http_listen, file.http_listen, "not given, kept");
        assert_eq!(c.workers_per_device, Some(3));
        assert_eq!(c.drain_timeout_s, 5.0);
        assert_eq!(c.token_file, Some(PathBuf::from("/etc/cuzk/token")));
        assert_eq!(c.backend, "gpu");
        let q = c.queue.as_ref().unwrap();
        assert_eq!(q.url, "postgres://new/db");
        assert_eq!(
            q.lease_s,
            file.queue.as_ref().unwrap().lease_s,
            "the file's other queue settings stay"
        );
    }

    #[test]
    fn queue_override_without_a_queue_section_takes_the_defaults() {
        let mut c = DaemonConfig::default();
        c.apply(DaemonOverrides {
            queue_url: Some("postgres://q/db".into()),
            ..DaemonOverrides::default()
        });
        let q = c.queue.unwrap();
        assert_eq!(q.url, "postgres://q/db");
        assert_eq!(q.lease_s, cuzk_queue::QueueConfig::default().lease_s);
    }

    #[test]
    fn overrides_are_validated_by_the_caller() {
        let mut c = DaemonConfig::default();
        c.apply(DaemonOverrides {
            workers_per_device: Some(0),
            ..DaemonOverrides::default()
        });
        assert!(c.validate().is_err());
    }
}
