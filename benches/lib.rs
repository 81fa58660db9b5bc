//! Shared pieces of the bench executables in `benches/`: `cargo bench -p cuzk-benches` runs
//! the criterion benches of the CPU reference (`cpu`) and the GPU benches (`gpu_*`, listed in
//! `xtask/gpu-benches.txt`, shipped by `cargo xtask bundle` and run by `bundle/run.sh`). Every
//! GPU bench checks its results once against the CPU reference or the verifier before timing,
//! prints its rows, then a summary table of its headline rows.

#![forbid(unsafe_code)]

use cuzk_gpu::Gpu;

/// The first GPU; exits with a message (status 2) when there is none or no kernels were built.
pub fn gpu() -> Gpu {
    match Gpu::first() {
        Ok(g) => g,
        Err(e) => {
            eprintln!("this bench needs a CUDA GPU and built kernels: {e}");
            std::process::exit(2);
        }
    }
}

/// The row groups a bench runs: the words of its command line that are not flags (as in
/// `cargo bench --bench gpu_ntt -- "H pipeline 2^27"`), each selecting the groups whose name
/// contains it; with none, every group. A group's result is still checked before it is timed.
#[derive(Debug)]
pub struct Only(Vec<String>);

impl Only {
    /// The words of the command line, each of which must select one of `groups` (a typo must not
    /// run nothing and look like a pass): exits with status 2 naming the groups otherwise.
    pub fn from_args(groups: &[String]) -> Self {
        let words: Vec<String> = std::env::args()
            .skip(1)
            .filter(|a| !a.starts_with('-'))
            .collect();
        for w in &words {
            if !groups.iter().any(|g| g.contains(w.as_str())) {
                eprintln!("no row group matches {w:?}; the groups are {groups:?}");
                std::process::exit(2);
            }
        }
        Self(words)
    }

    pub fn runs(&self, group: &str) -> bool {
        self.0.is_empty() || self.0.iter().any(|w| group.contains(w.as_str()))
    }
}

/// Panics with `what` unless `ok`: a bench whose result is wrong must not report a time.
pub fn check(ok: bool, what: &str) {
    assert!(
        ok,
        "{what}: GPU result differs from the reference; no timings"
    );
    println!("checked: {what}");
}

/// The headline rows of a bench, printed last as one table: value, the peer's value (sppark on
/// the same H200, or the target) and how many times better than the peer this is.
#[derive(Debug, Default)]
pub struct Summary {
    rows: Vec<Row>,
}

#[derive(Debug)]
struct Row {
    what: String,
    value: f64,
    unit: &'static str,
    peer: Option<f64>,
    ratio: Option<f64>,
}

impl Summary {
    /// A time in milliseconds (lower is better) and the peer's.
    pub fn add(&mut self, what: impl Into<String>, ms: f64, peer_ms: Option<f64>) {
        let ratio = peer_ms.map(|p| p / ms);
        self.rows.push(Row {
            what: what.into(),
            value: ms,
            unit: "ms",
            peer: peer_ms,
            ratio,
        });
    }

    /// A rate in G/s (higher is better) and the peer's.
    pub fn add_rate(&mut self, what: impl Into<String>, g_per_s: f64, peer: f64) {
        let ratio = Some(g_per_s / peer);
        self.rows.push(Row {
            what: what.into(),
            value: g_per_s,
            unit: "G/s",
            peer: Some(peer),
            ratio,
        });
    }

    /// Prints the table under `title`.
    pub fn print(&self, title: &str) {
        println!("\n== {title} summary (ratio: times better than the peer) ==");
        println!(
            "{:<40} {:>11} {:>4} {:>11} {:>7}",
            "row", "value", "", "peer", "ratio"
        );
        for Row {
            what,
            value: v,
            unit,
            peer,
            ratio,
        } in &self.rows
        {
            let p = peer.map_or(format!("{:>11}", "-"), |p| format!("{p:>11.3}"));
            let r = ratio.map_or(format!("{:>7}", "-"), |r| format!("{r:>6.2}x"));
            println!("{what:<40} {v:>11.3} {unit:>4} {p} {r}");
        }
    }
}
