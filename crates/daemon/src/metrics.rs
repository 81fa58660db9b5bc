//! Prometheus text for the daemon: the engine's counters and memory, queue depth, GPU busy
//! seconds, phase-duration histograms observed as jobs finish, and each RPC's handling time.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::time::Duration;

use cuzk_scheduler::{EngineStatus, JobTimings};
use parking_lot::Mutex;

/// Bucket bounds in seconds: 1 ms to ~30 min, about x3 apart.
const BUCKETS: [f64; 14] = [
    0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0, 300.0, 1000.0, 1800.0,
];

/// A per-device series: name, Prometheus type, help, value.
type DeviceGauge = (
    &'static str,
    &'static str,
    &'static str,
    fn(&cuzk_scheduler::DeviceStatus) -> String,
);

#[derive(Debug, Default, Clone)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

impl Histogram {
    fn observe(&mut self, v: f64) {
        for (c, b) in self.counts.iter_mut().zip(BUCKETS) {
            if v <= b {
                *c += 1;
            }
        }
        self.count += 1;
        self.sum += v;
    }

    fn render(&self, out: &mut String, name: &str, labels: &str) {
        let sep = if labels.is_empty() { "" } else { "," };
        for (c, b) in self.counts.iter().zip(BUCKETS) {
            let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"{b}\"}} {c}");
        }
        let _ = writeln!(
            out,
            "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {}",
            self.count
        );
        let braces = if labels.is_empty() {
            String::new()
        } else {
            format!("{{{labels}}}")
        };
        let _ = writeln!(out, "{name}_sum{braces} {}", self.sum);
        let _ = writeln!(out, "{name}_count{braces} {}", self.count);
    }
}

#[derive(Debug, Default)]
struct State {
    phases: BTreeMap<&'static str, Histogram>,
    queue_wait: Histogram,
    run: Histogram,
    rejected: BTreeMap<&'static str, u64>,
    rpc: BTreeMap<&'static str, Histogram>,
}

/// What the daemon observes beside the engine's own counters.
#[derive(Debug, Default)]
pub struct Metrics {
    state: Mutex<State>,
}

impl Metrics {
    /// A finished proof's timings.
    pub fn observe(&self, t: &JobTimings) {
        let mut s = self.state.lock();
        s.queue_wait.observe(t.queue_wait.as_secs_f64());
        s.run.observe(t.run.as_secs_f64());
        for span in &t.spans {
            s.phases
                .entry(span.phase)
                .or_default()
                .observe((span.end - span.start).max(0.0));
        }
    }

    /// A Prover call's handling time, by method name.
    pub fn rpc(&self, method: &'static str, took: Duration) {
        self.state
            .lock()
            .rpc
            .entry(method)
            .or_default()
            .observe(took.as_secs_f64());
    }

    /// A request refused before it became a job, by gRPC code name.
    pub fn rejected(&self, code: &'static str) {
        *self.state.lock().rejected.entry(code).or_default() += 1;
    }

    pub fn render(&self, st: &EngineStatus, upload_bytes: u64, jobs: usize) -> String {
        let mut o = String::new();
        let c = &st.counters;
        let counter = |o: &mut String, name: &str, help: &str, v: u64| {
            let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}");
        };
        counter(
            &mut o,
            "cuzk_proofs_completed_total",
            "Proofs completed.",
            c.completed,
        );
        counter(
            &mut o,
            "cuzk_proofs_failed_total",
            "Jobs that failed.",
            c.failed,
        );
        counter(
            &mut o,
            "cuzk_proofs_cancelled_total",
            "Jobs cancelled.",
            c.cancelled,
        );
        counter(
            &mut o,
            "cuzk_self_check_failed_total",
            "Proofs that failed their pairing self-check.",
            c.self_check_failed,
        );
        let s = self.state.lock();
        let _ = writeln!(
            o,
            "# HELP cuzk_requests_rejected_total Requests refused before a job was made.\n# TYPE cuzk_requests_rejected_total counter"
        );
        for (code, n) in &s.rejected {
            let _ = writeln!(o, "cuzk_requests_rejected_total{{code=\"{code}\"}} {n}");
        }
        let _ = writeln!(
            o,
            "# HELP cuzk_queue_depth Queued jobs.\n# TYPE cuzk_queue_depth gauge"
        );
        for (p, n) in st.queued {
            let _ = writeln!(o, "cuzk_queue_depth{{priority=\"{}\"}} {n}", p.name());
        }
        let gauge = |o: &mut String, name: &str, help: &str, v: String| {
            let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {v}");
        };
        gauge(
            &mut o,
            "cuzk_jobs_running",
            "Jobs running now.",
            st.running.to_string(),
        );
        gauge(
            &mut o,
            "cuzk_jobs_tracked",
            "Jobs the daemon tracks.",
            jobs.to_string(),
        );
        gauge(
            &mut o,
            "cuzk_host_memory_used_bytes",
            "Host memory charged to keys and jobs.",
            st.host_in_use.to_string(),
        );
        gauge(
            &mut o,
            "cuzk_host_memory_capacity_bytes",
            "Host memory budget.",
            st.host_capacity.to_string(),
        );
        gauge(
            &mut o,
            "cuzk_upload_bytes",
            "Witness bytes being received.",
            upload_bytes.to_string(),
        );
        gauge(
            &mut o,
            "cuzk_uptime_seconds",
            "Seconds since start.",
            st.uptime.as_secs_f64().to_string(),
        );
        let per_device: [DeviceGauge; 6] = [
            (
                "cuzk_gpu_busy_seconds_total",
                "counter",
                "Seconds the device's GPU lock was held.",
                |d| d.busy_seconds.to_string(),
            ),
            (
                "cuzk_device_budget_used_bytes",
                "gauge",
                "Device memory budget in use.",
                |d| d.budget_in_use.to_string(),
            ),
            (
                "cuzk_device_budget_bytes",
                "gauge",
                "Device memory budget.",
                |d| d.budget_total.to_string(),
            ),
            (
                "cuzk_device_budget_limit_bytes",
                "gauge",
                "What the device budget admits now (below the budget while another process holds device memory).",
                |d| d.budget_limit.to_string(),
            ),
            (
                "cuzk_device_staging_used_bytes",
                "gauge",
                "Device staging room in use.",
                |d| d.staging_in_use.to_string(),
            ),
            (
                "cuzk_pinned_used_bytes",
                "gauge",
                "Pinned host memory in use.",
                |d| d.pinned_in_use.to_string(),
            ),
        ];
        for (name, kind, help, f) in per_device {
            let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} {kind}");
            for d in &st.devices {
                let _ = writeln!(o, "{name}{{device=\"{}\"}} {}", d.index, f(d));
            }
        }
        let _ = writeln!(
            o,
            "# HELP cuzk_phase_seconds Duration of each proving phase.\n# TYPE cuzk_phase_seconds histogram"
        );
        for (phase, h) in &s.phases {
            h.render(&mut o, "cuzk_phase_seconds", &format!("phase=\"{phase}\""));
        }
        let _ = writeln!(
            o,
            "# HELP cuzk_queue_wait_seconds Submit until a worker took the job.\n# TYPE cuzk_queue_wait_seconds histogram"
        );
        s.queue_wait.render(&mut o, "cuzk_queue_wait_seconds", "");
        let _ = writeln!(
            o,
            "# HELP cuzk_run_seconds Worker start to result.\n# TYPE cuzk_run_seconds histogram"
        );
        s.run.render(&mut o, "cuzk_run_seconds", "");
        let _ = writeln!(
            o,
            "# HELP cuzk_rpc_seconds Time the daemon took to handle each Prover call, request to answer.\n# TYPE cuzk_rpc_seconds histogram"
        );
        for (method, h) in &s.rpc {
            h.render(&mut o, "cuzk_rpc_seconds", &format!("method=\"{method}\""));
        }
        o
    }
}
