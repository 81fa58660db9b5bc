//! `cargo xtask fuzz`: builds the libFuzzer driver of `fuzz/` with coverage instrumentation
//! (rustc's sancov passes, no sanitizer, so the pinned stable toolchain does it) and runs
//! targets for a given time each. Every run is appended to `target/fuzz/runs.jsonl`, so long
//! runs are on record for `cargo xtask reliability`.

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};

use crate::{cargo, root, run};

/// What cargo-fuzz passes for `--sanitizer none`, plus debug assertions and overflow checks
/// (an overflow in a length computation is a bug the fuzzer should report).
const RUSTFLAGS: &str = "-Cpasses=sancov-module \
     -Cllvm-args=-sanitizer-coverage-level=4 \
     -Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
     -Cllvm-args=-sanitizer-coverage-pc-table \
     -Cllvm-args=-sanitizer-coverage-trace-compares \
     --cfg fuzzing -Cdebug-assertions -Coverflow-checks";

/// Seconds per target of `--smoke` (15 targets: about 6 minutes).
pub const SMOKE_SECS: u64 = 25;
/// Seconds per target in `cargo xtask test` outside CI (3 minutes beside the instrumented build).
pub const CI_SMOKE_SECS: u64 = 12;

/// One target's run.
#[derive(Debug, Clone)]
pub struct Run {
    pub target: String,
    pub secs: f64,
    /// User + system time of the fuzzer process (all its threads).
    pub cpu_secs: f64,
    pub execs: u64,
    /// Coverage features at the end (libFuzzer's `ft:`).
    pub features: u64,
    pub corpus: u64,
    /// The input that crashed, hung or ran out of memory.
    pub crash: Option<PathBuf>,
    pub log: PathBuf,
}

fn fuzz_dir() -> PathBuf {
    root().join("target/fuzz")
}

fn host_triple() -> Result<String> {
    let out = Command::new("rustc")
        .arg("-vV")
        .current_dir(root())
        .output()?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_owned))
        .context("rustc -vV names no host")
}

/// Builds the instrumented driver; returns its path. `--target` keeps the flags off build
/// scripts and proc macros, which must not be instrumented.
pub fn build() -> Result<PathBuf> {
    let triple = host_triple()?;
    run(cargo()
        .args([
            "build",
            "--release",
            "-p",
            "cuzk-fuzz",
            "--features",
            "libfuzzer",
        ])
        .args(["--bin", "cuzk-fuzz", "--target", &triple, "--target-dir"])
        .arg(fuzz_dir())
        .env("RUSTFLAGS", RUSTFLAGS)
        // The parsers need no kernels.
        .env("CUZK_NO_CUDA", "1"))?;
    let exe = fuzz_dir().join(&triple).join("release/cuzk-fuzz");
    ensure!(exe.is_file(), "{} was not built", exe.display());
    Ok(exe)
}

/// The targets: the folders of the committed corpus (the replay test checks that each target
/// has one, and the driver refuses a name it does not know).
pub fn targets() -> Result<Vec<String>> {
    let mut v = Vec::new();
    for e in fs::read_dir(root().join("fuzz/corpus")).context("fuzz/corpus")? {
        let e = e?;
        if e.file_type()?.is_dir() {
            v.push(e.file_name().to_string_lossy().into_owned());
        }
    }
    v.sort();
    ensure!(!v.is_empty(), "fuzz/corpus has no target folders");
    Ok(v)
}

/// CPU seconds of a live process, from /proc (clock ticks of 1/100 s on Linux).
fn cpu_secs(pid: u32) -> Option<f64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) start at state (field 3).
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 / 100.0)
}

/// The number after `key` in `line` (`key` included, e.g. "ft: ").
fn number_after(line: &str, key: &str) -> Option<u64> {
    let at = line.find(key)? + key.len();
    let digits: String = line[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// Runs one target for `secs`, niced, on a working copy of its corpus (new inputs go to
/// `target/fuzz/corpus/<name>`; the committed corpus is only read).
pub fn run_target(exe: &Path, name: &str, secs: u64) -> Result<Run> {
    let work = fuzz_dir().join("corpus").join(name);
    let artifacts = fuzz_dir().join("artifacts").join(name);
    let logs = fuzz_dir().join("logs");
    for d in [&work, &artifacts, &logs] {
        fs::create_dir_all(d)?;
    }
    let log = logs.join(format!("{name}.log"));
    let mut cmd = Command::new("nice");
    cmd.args(["-n", "10"])
        .arg(exe)
        .arg(&work)
        .arg(root().join("fuzz/corpus").join(name))
        .arg(format!("-max_total_time={secs}"))
        // A parser must never hang: 10 s for one input of at most 256 KiB is a hang. The
        // smallest real C1 output (a 2 KiB sector's, curio's wrapper) is 134 KB.
        .args(["-timeout=10", "-rss_limit_mb=2048", "-max_len=262144"])
        .args(["-print_final_stats=1", "-print_pcs=0"])
        .arg(format!("-artifact_prefix={}/", artifacts.display()))
        .env("CUZK_FUZZ_TARGET", name)
        .env("RUST_BACKTRACE", "1")
        .stdout(Stdio::null())
        .stderr(fs::File::create(&log)?);
    eprintln!("$ {cmd:?}");
    let t = Instant::now();
    let mut child = cmd
        .spawn()
        .with_context(|| format!("run {}", exe.display()))?;
    let mut cpu = 0.0;
    let status = loop {
        // `nice` execs the fuzzer, so the pid is the fuzzer's.
        if let Some(c) = cpu_secs(child.id()) {
            cpu = c;
        }
        if let Some(st) = child.try_wait()? {
            break st;
        }
        if t.elapsed() > Duration::from_secs(secs + 120) {
            let _ = child.kill();
            bail!("{name}: the fuzzer ran {}s past its time", 120);
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    let secs_run = t.elapsed().as_secs_f64();
    let mut r = Run {
        target: name.into(),
        secs: secs_run,
        cpu_secs: cpu,
        execs: 0,
        features: 0,
        corpus: 0,
        crash: None,
        log: log.clone(),
    };
    for line in BufReader::new(fs::File::open(&log)?).lines() {
        let line = line?;
        if let Some(n) = number_after(&line, "stat::number_of_executed_units: ") {
            r.execs = n;
        }
        if line.starts_with('#') {
            r.features = number_after(&line, "ft: ").unwrap_or(r.features);
            r.corpus = number_after(&line, "corp: ").unwrap_or(r.corpus);
        }
        if let Some(p) = line.split("Test unit written to ").nth(1) {
            r.crash = Some(PathBuf::from(p.trim()));
        }
    }
    if !status.success() && r.crash.is_none() {
        bail!(
            "{name}: the fuzzer failed ({status}) without writing an input; see {}",
            log.display()
        );
    }
    ensure!(
        r.crash.is_some() || r.execs > 0,
        "{name}: no executions recorded; see {}",
        log.display()
    );
    record(&r)?;
    Ok(r)
}

/// Appends a run to `target/fuzz/runs.jsonl`.
fn record(r: &Run) -> Result<()> {
    use std::io::Write;
    let line = serde_json::json!({
        "target": r.target, "secs": r.secs, "cpu_secs": r.cpu_secs, "execs": r.execs,
        "features": r.features, "corpus": r.corpus,
        "crash": r.crash.as_ref().map(|p| p.display().to_string()),
        "unix_time": std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
    });
    let mut f = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(fuzz_dir().join("runs.jsonl"))?;
    writeln!(f, "{line}")?;
    Ok(())
}

/// Every run recorded on this machine: (runs, executions, CPU seconds, crashes).
pub fn recorded() -> (u64, u64, f64, u64) {
    let Ok(text) = fs::read_to_string(fuzz_dir().join("runs.jsonl")) else {
        return (0, 0, 0.0, 0);
    };
    let mut t = (0, 0, 0.0, 0);
    for v in text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
    {
        t.0 += 1;
        t.1 += v["execs"].as_u64().unwrap_or(0);
        t.2 += v["cpu_secs"].as_f64().unwrap_or(0.0);
        t.3 += u64::from(!v["crash"].is_null());
    }
    t
}

/// Builds, runs `names` for `secs` each, prints a table; the runs (crashed or not).
pub fn run_all(names: &[String], secs: u64) -> Result<Vec<Run>> {
    let exe = build()?;
    let mut runs = Vec::new();
    for n in names {
        let r = run_target(&exe, n, secs)?;
        eprintln!(
            "{:<22} {:>6.0}s {:>7.0} CPU-s {:>10} execs {:>7} features  {}",
            r.target,
            r.secs,
            r.cpu_secs,
            r.execs,
            r.features,
            match &r.crash {
                Some(p) => format!("CRASH {}", p.display()),
                None => "ok".into(),
            }
        );
        runs.push(r);
    }
    Ok(runs)
}

/// Fails naming every crash and what to do with it.
pub fn check(runs: &[Run]) -> Result<()> {
    let crashed: Vec<String> = runs
        .iter()
        .filter_map(|r| {
            r.crash.as_ref().map(|p| {
                format!(
                    "{}: {} (log {}); copy it to fuzz/regressions/{}/, fix the parser",
                    r.target,
                    p.display(),
                    r.log.display(),
                    r.target
                )
            })
        })
        .collect();
    ensure!(
        crashed.is_empty(),
        "fuzzing found:\n  {}",
        crashed.join("\n  ")
    );
    Ok(())
}

/// `cargo xtask fuzz [--smoke] [--time SECS] [--target NAME]... [--list]`.
pub fn main(args: &[String]) -> Result<()> {
    let mut secs = None;
    let mut names = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--smoke" => secs = Some(secs.unwrap_or(SMOKE_SECS)),
            "--time" => secs = Some(it.next().context("--time SECS")?.parse()?),
            "--target" => names.push(it.next().context("--target NAME")?.clone()),
            "--list" => {
                for t in targets()? {
                    println!("{t}");
                }
                return Ok(());
            }
            other => bail!("fuzz: unknown argument {other:?}"),
        }
    }
    let all = targets()?;
    if let Some(bad) = names.iter().find(|n| !all.contains(n)) {
        bail!("no fuzz target {bad:?}; targets: {}", all.join(", "));
    }
    if names.is_empty() {
        names = all;
    }
    let runs = run_all(&names, secs.unwrap_or(SMOKE_SECS))?;
    check(&runs)
}
