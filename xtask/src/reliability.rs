//! `cargo xtask reliability [--gpu] [--fuzz-secs N]`: the reliability suite of issue #24.
//! Runs the CPU parts (the fuzz smoke and the named security, crash-restart, host-memory and
//! failure-injection tests), then writes RELIABILITY.md from what the runs printed: test
//! counts from libtest's summary, figures from the tests' `reliability:` lines, executions
//! from libFuzzer's final stats. The GPU areas run on a lent GPU (`xtask/device/service.sh BUNDLE
//! grid grid26 faults soak memory crash`); `--gpu DIR` reads their rows, and the GPU each ran
//! on, from that run's logs.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};

use crate::fuzz;
use crate::{cargo, root};

/// One group of tests: what it proves, and the cargo test invocation.
struct Group {
    area: &'static str,
    package: &'static str,
    test: &'static str,
    /// Name filters (substrings, libtest's default); empty: the whole target.
    filters: &'static [&'static str],
}

const GROUPS: &[Group] = &[
    Group {
        area: "7. Security",
        package: "cuzk-daemon",
        test: "it",
        filters: &["reliability::security_"],
    },
    Group {
        area: "7. Security",
        package: "cuzk-daemon",
        test: "it",
        filters: &["daemon::key_paths_stay_inside_the_parameter_directory"],
    },
    Group {
        area: "8. Crash and restart (CPU)",
        package: "cuzk",
        test: "crash_restart",
        filters: &[],
    },
    Group {
        area: "5. Host memory",
        package: "cuzk-scheduler",
        test: "engine",
        filters: &["a_small_host_budget_makes_jobs_wait_not_fail"],
    },
    Group {
        area: "2. A failure at every site (CPU)",
        package: "cuzk-scheduler",
        test: "engine",
        filters: &[
            "a_failure_at_every_device_allocation_runs_the_job_again_and_a_lasting_one_fails_it_alone",
        ],
    },
    Group {
        area: "4. Memory taken by another process (CPU)",
        package: "cuzk-scheduler",
        test: "engine",
        filters: &["memory_taken_by_another_process_makes_jobs_wait_then_all_complete"],
    },
    Group {
        area: "2. A failure at every site (CPU)",
        package: "cuzk-daemon",
        test: "it",
        filters: &["reliability::a_failure_at_every_allocation_of_a_daemon_job_runs_it_again"],
    },
    Group {
        area: "6. Fuzzing: corpus and regressions",
        package: "cuzk-fuzz",
        test: "replay",
        filters: &[],
    },
];

/// What one group's run printed.
struct Outcome {
    command: String,
    passed: u64,
    failed: u64,
    ok: bool,
    /// The `reliability:` lines, without the prefix.
    figures: Vec<String>,
    secs: f64,
}

fn run_group(g: &Group) -> Result<Outcome> {
    let mut cmd = cargo();
    cmd.args(["test", "-p", g.package, "--test", g.test, "--"])
        .args(g.filters)
        .args(["--nocapture", "--test-threads=1"]);
    let command = format!(
        "cargo test -p {} --test {} -- {}",
        g.package,
        g.test,
        g.filters.join(" ")
    );
    eprintln!("$ {command}");
    let t = Instant::now();
    let out = cmd.output().with_context(|| format!("running {command}"))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let mut o = parse(&text, command.trim_end().to_owned());
    o.ok = out.status.success();
    o.secs = t.elapsed().as_secs_f64();
    if !o.ok {
        eprintln!("{text}");
    }
    // A filter that matched nothing must not read as a pass.
    if o.ok && o.passed == 0 {
        bail!("{command}: no test ran");
    }
    Ok(o)
}

/// Test counts from libtest's summaries and the `reliability:` lines of a run's output.
fn parse(text: &str, command: String) -> Outcome {
    let mut o = Outcome {
        command,
        passed: 0,
        failed: 0,
        ok: false,
        figures: Vec::new(),
        secs: 0.0,
    };
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("test result: ") {
            let n = |key: &str| {
                rest.split("; ")
                    .find_map(|p| {
                        p.trim_start_matches("ok. ")
                            .trim_start_matches("FAILED. ")
                            .strip_suffix(key)
                    })
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .unwrap_or(0)
            };
            o.passed += n(" passed");
            o.failed += n(" failed");
        }
        if let Some(f) = line.split("reliability: ").nth(1) {
            o.figures.push(f.trim().to_owned());
        }
    }
    o
}

/// UTC date and time from the system clock (days to civil date, Howard Hinnant's algorithm).
fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60
    )
}

fn git_head() -> String {
    Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(root())
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

/// A GPU area: what `xtask/device/service.sh BUNDLE <part>` runs on a GPU, and the log (in
/// the device run's output folder) that `--gpu DIR` reads its row from.
struct GpuGroup {
    area: &'static str,
    part: &'static str,
    log: &'static str,
    tried: &'static str,
}

const GPU_GROUPS: &[GpuGroup] = &[
    GpuGroup {
        area: "1. OOM grid (GPU)",
        part: "grid",
        log: "oom-grid-24",
        tried: "workers {1,2,4} x concurrency {1,3,8} x VRAM cap {16,24,40,80 GiB} at 2^24",
    },
    GpuGroup {
        area: "1. OOM grid (GPU)",
        part: "grid26",
        log: "oom-grid-26-16gib-w12",
        tried: "workers {1,2} x concurrency {1,3,8} in 16 GiB at 2^26",
    },
    GpuGroup {
        area: "1. OOM grid (GPU)",
        part: "grid26",
        log: "oom-grid-26-16gib-w4",
        tried: "workers {4} x concurrency {1,3,8} in 16 GiB at 2^26",
    },
    GpuGroup {
        area: "2. A failure at every site (GPU)",
        part: "faults",
        log: "sites-proof",
        tried: "the k-th device/pinned/stream/event/launch/copy call of a GPU proof, every k",
    },
    GpuGroup {
        area: "2. A failure at every site (GPU)",
        part: "faults",
        log: "sites-job",
        tried: "the k-th driver call of an engine job, every k",
    },
    GpuGroup {
        area: "3. Soak (GPU)",
        part: "soak",
        log: "soak-20",
        tried: "1000 requests at 2^20, three priorities, 10% cancelled, 5% bad",
    },
    GpuGroup {
        area: "4. Memory taken by another process (GPU)",
        part: "memory",
        log: "memory-taken",
        tried: "half the free VRAM, then all but 1 GiB, taken and released mid-run (2^24)",
    },
    GpuGroup {
        area: "8. Crash and restart (GPU)",
        part: "crash",
        log: "crash-gpu",
        tried: "kill -9 of a GPU daemon during a 2^22 proof, then a restart",
    },
];

/// A GPU group's run, from its log.
struct GpuRun {
    started: String,
    /// `service.sh` writes the GPU's name; logs written before it did came from the H200.
    gpu: String,
    outcome: Outcome,
    /// A failed test's panic message.
    why: Option<String>,
}

/// A GPU group's run from its log: the `started:`, `gpu:` and `exit:` lines `service.sh`
/// writes, the libtest summaries and the `reliability:` lines.
fn gpu_outcome(dir: &Path, g: &GpuGroup) -> Result<GpuRun> {
    let path = dir.join(format!("{}.log", g.log));
    let text = fs::read_to_string(&path).with_context(|| {
        format!(
            "{}: no log of `service.sh BUNDLE {}` (run it on a GPU and fetch its $OUT)",
            path.display(),
            g.part
        )
    })?;
    let mut o = parse(&text, format!("service.sh BUNDLE {}", g.part));
    let line = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .map(str::trim)
    };
    let started = line("started: ").context("log has no started: line")?;
    let exit = text
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("exit: "))
        .with_context(|| format!("{}: the step did not finish", path.display()))?;
    o.ok = exit.trim() == "0" && o.failed == 0 && !o.figures.is_empty();
    o.secs = line("seconds: ")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    let why = text
        .lines()
        .skip_while(|l| !l.contains("panicked at"))
        .nth(1)
        .map(|l| l.trim().to_owned());
    Ok(GpuRun {
        started: started.to_owned(),
        gpu: match line("gpu: ") {
            Some("") => "machine without nvidia-smi",
            Some(name) => name,
            None => "NVIDIA H200",
        }
        .to_owned(),
        outcome: o,
        why,
    })
}

fn cell(s: &str) -> String {
    s.replace('|', "\\|")
}

pub fn main(args: &[String]) -> Result<()> {
    let mut gpu: Option<PathBuf> = None;
    let mut fuzz_secs = fuzz::SMOKE_SECS;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--gpu" => {
                gpu = Some(
                    it.next()
                        .context("--gpu DIR (a device run's service.sh logs)")?
                        .into(),
                )
            }
            "--fuzz-secs" => fuzz_secs = it.next().context("--fuzz-secs N")?.parse()?,
            other => bail!("reliability: unknown argument {other:?}"),
        }
    }
    let date = utc_now();
    // The GPU logs are read first: a missing one fails before the CPU parts' minutes.
    let gpu_rows = match &gpu {
        Some(dir) => GPU_GROUPS
            .iter()
            .map(|g| gpu_outcome(dir, g).map(|r| (g, r)))
            .collect::<Result<Vec<_>>>()?,
        None => Vec::new(),
    };
    let targets = fuzz::targets()?;
    let runs = fuzz::run_all(&targets, fuzz_secs)?;
    let mut outcomes = Vec::new();
    for g in GROUPS {
        outcomes.push((g, run_group(g)?));
    }

    let mut md = String::new();
    writeln!(md, "# Reliability\n")?;
    writeln!(
        md,
        "Written by `cargo xtask reliability{}` on {date} at commit {} from the run's own output \
         (libtest summaries, the tests' `reliability:` lines, libFuzzer's final stats); re-run it \
         rather than editing. The areas are those of issue #24.\n",
        gpu.as_ref()
            .map_or(String::new(), |d| format!(" --gpu {}", d.display())),
        git_head()
    )?;
    writeln!(md, "| Area | Command | Date | Tried | Result |")?;
    writeln!(md, "| --- | --- | --- | --- | --- |")?;
    let execs: u64 = runs.iter().map(|r| r.execs).sum();
    let cpu: f64 = runs.iter().map(|r| r.cpu_secs).sum();
    let crashes = runs.iter().filter(|r| r.crash.is_some()).count();
    writeln!(
        md,
        "| 6. Fuzzing (smoke) | `cargo xtask fuzz --time {fuzz_secs}` | {date} | {} targets x {fuzz_secs} s: {execs} executions, {cpu:.0} CPU-s | {} |",
        runs.len(),
        if crashes == 0 {
            "held: no panic, hang, or unbounded allocation".to_owned()
        } else {
            format!("**FAILED**: {crashes} crashing inputs")
        }
    )?;
    for (g, o) in &outcomes {
        let tried = if o.figures.is_empty() {
            format!("{} tests", o.passed + o.failed)
        } else {
            format!("{} tests; {}", o.passed + o.failed, o.figures.join("; "))
        };
        let result = if o.ok {
            format!("held: {} passed ({:.0} s)", o.passed, o.secs)
        } else {
            format!("**FAILED**: {} failed, {} passed", o.failed, o.passed)
        };
        writeln!(
            md,
            "| {} | `{}` | {date} | {} | {} |",
            g.area,
            cell(&o.command),
            cell(&tried),
            result
        )?;
    }
    if gpu_rows.is_empty() {
        for g in GPU_GROUPS {
            writeln!(
                md,
                "| {} | `service.sh BUNDLE {}` | — | {} | not run here: GPU only (`cargo xtask reliability --gpu DIR` with a GPU run's logs) |",
                g.area, g.part, g.tried
            )?;
        }
    }
    for (g, run) in &gpu_rows {
        let o = &run.outcome;
        // Grid cells go to their own table below.
        let figures: Vec<&str> = o
            .figures
            .iter()
            .map(String::as_str)
            .filter(|f| !f.starts_with("oom-cell "))
            .collect();
        let tried = std::iter::once(g.tried)
            .chain(figures)
            .collect::<Vec<_>>()
            .join("; ");
        let result = if o.ok {
            format!("held on the {} ({:.0} s)", run.gpu, o.secs)
        } else {
            format!(
                "**FAILED** on the {}: {} failed, {} passed{}",
                run.gpu,
                o.failed,
                o.passed,
                run.why
                    .as_deref()
                    .map_or(String::new(), |w| format!(": {w}"))
            )
        };
        writeln!(
            md,
            "| {} | `{}` | {} | {} | {result} |",
            g.area,
            cell(&o.command),
            run.started,
            cell(&tried)
        )?;
    }
    let cells: Vec<(&str, &str)> = gpu_rows
        .iter()
        .flat_map(|(_, run)| {
            run.outcome
                .figures
                .iter()
                .filter_map(|f| f.strip_prefix("oom-cell "))
                .map(|c| (run.gpu.as_str(), c))
        })
        .collect();
    if !cells.is_empty() {
        writeln!(md, "\n## OOM grid cells\n")?;
        writeln!(
            md,
            "Each cell a fresh engine proving `concurrency + 2` proofs, every one verified (fill and drain included, so below steady-state throughput).\n"
        )?;
        writeln!(
            md,
            "| GPU | Size | VRAM cap | Workers | In flight | Proofs | Proofs/s | Peak budget (GiB) |"
        )?;
        writeln!(md, "| --- | --- | --- | --- | --- | --- | --- | --- |")?;
        for (gpu, c) in cells {
            let v = |k: &str| {
                c.split_whitespace()
                    .find_map(|kv| kv.strip_prefix(k)?.strip_prefix('='))
                    .unwrap_or("?")
            };
            writeln!(
                md,
                "| {gpu} | 2^{} | {} | {} | {} | {} | {} | {} |",
                v("log"),
                v("cap"),
                v("workers"),
                v("concurrency"),
                v("proofs"),
                v("proofs_s"),
                v("peak_gib")
            )?;
        }
    }

    writeln!(md, "\n## Fuzz targets (this run)\n")?;
    writeln!(
        md,
        "Coverage-guided libFuzzer on the pinned stable toolchain (sancov instrumentation, \
         overflow checks, a 64 MiB cap on any one allocation, 10 s per input, 2 GiB RSS).\n"
    )?;
    writeln!(
        md,
        "| Target | Seconds | CPU-s | Executions | Exec/s | Features | Corpus | Result |"
    )?;
    writeln!(md, "| --- | --- | --- | --- | --- | --- | --- | --- |")?;
    for r in &runs {
        writeln!(
            md,
            "| {} | {:.0} | {:.0} | {} | {:.0} | {} | {} | {} |",
            r.target,
            r.secs,
            r.cpu_secs,
            r.execs,
            r.execs as f64 / r.secs.max(1e-9),
            r.features,
            r.corpus,
            match &r.crash {
                Some(p) => format!("**crash** `{}`", p.display()),
                None => "ok".into(),
            }
        )?;
    }
    let (n, e, c, k) = fuzz::recorded();
    writeln!(
        md,
        "\nAll fuzz runs recorded on the machine that wrote this (`target/fuzz/runs.jsonl`, \
         long runs included): {n} runs, {e} executions, {:.2} CPU-hours, {k} crashing inputs \
         (each fixed, and kept in `fuzz/regressions/`).",
        c / 3600.0
    )?;
    fs::write(root().join("RELIABILITY.md"), &md)?;
    eprintln!("wrote RELIABILITY.md");
    fuzz::check(&runs)?;
    if let Some((g, _)) = outcomes.iter().find(|(_, o)| !o.ok) {
        bail!("{} failed ({} --test {})", g.area, g.package, g.test);
    }
    if let Some((g, run)) = gpu_rows.iter().find(|(_, run)| !run.outcome.ok) {
        bail!("{} failed on the {} (log {}.log)", g.area, run.gpu, g.log);
    }
    Ok(())
}
