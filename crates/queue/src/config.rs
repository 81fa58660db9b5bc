//! The `[queue]` section of a daemon's configuration.

use std::time::Duration;

use serde::Deserialize;

/// How a host works from the queue. Every field but `url` has a default.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct QueueConfig {
    /// `postgres://user[:password]@host[:port]/database` or a libpq key=value string.
    pub url: String,
    /// This host's name in the hosts table and in `done_by`; absent: the machine's hostname.
    pub host: Option<String>,
    /// Seconds a claim is held without a heartbeat before the job returns to the queue.
    pub lease_s: f64,
    /// Seconds between heartbeats (lease renewals, cancel checks, expired-lease sweeps).
    pub heartbeat_s: f64,
    /// Milliseconds between claim attempts while the queue is empty or the engine is full: the
    /// fallback, as a host is woken at once by the queue's notifications (LISTEN cuzk_jobs) and
    /// by its engine finishing a job.
    pub poll_ms: u64,
    /// Jobs claimed beyond the engine's workers: they wait in the engine's queue, where its
    /// read-ahead reads their witnesses, so a worker that frees finds one read.
    pub prefetch: usize,
    /// Database connections this host keeps at most (one more listens for notifications).
    pub pool_size: usize,
    /// Seconds to wait for a connection to the database.
    pub connect_timeout_s: f64,
}

impl Default for QueueConfig {
    fn default() -> Self {
        Self {
            url: String::new(),
            host: None,
            lease_s: 30.0,
            heartbeat_s: 5.0,
            poll_ms: 200,
            prefetch: 2,
            pool_size: 4,
            connect_timeout_s: 5.0,
        }
    }
}

impl QueueConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.url.is_empty() {
            return Err("queue.url is empty".into());
        }
        if !(self.lease_s > 0.0 && self.lease_s.is_finite()) {
            return Err(format!("queue.lease_s = {} (need > 0)", self.lease_s));
        }
        if !(self.heartbeat_s > 0.0 && self.heartbeat_s < self.lease_s) {
            return Err(format!(
                "queue.heartbeat_s = {} (need > 0 and below lease_s = {})",
                self.heartbeat_s, self.lease_s
            ));
        }
        if self.poll_ms == 0 || self.pool_size < 2 {
            return Err("queue.poll_ms must be at least 1 and queue.pool_size at least 2".into());
        }
        if !(self.connect_timeout_s > 0.0 && self.connect_timeout_s.is_finite()) {
            return Err(format!(
                "queue.connect_timeout_s = {} (need > 0)",
                self.connect_timeout_s
            ));
        }
        Ok(())
    }

    pub fn lease(&self) -> Duration {
        Duration::from_secs_f64(self.lease_s)
    }

    pub fn heartbeat(&self) -> Duration {
        Duration::from_secs_f64(self.heartbeat_s)
    }

    pub fn poll(&self) -> Duration {
        Duration::from_millis(self.poll_ms)
    }

    pub fn connect_timeout(&self) -> Duration {
        Duration::from_secs_f64(self.connect_timeout_s)
    }

    /// The configured host name, else the machine's hostname.
    pub fn host_name(&self) -> String {
        self.host.clone().unwrap_or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|h| h.trim().to_owned())
                .ok()
                .filter(|h| !h.is_empty())
                .unwrap_or_else(|| "cuzk".into())
        })
    }
}
