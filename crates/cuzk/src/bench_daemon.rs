//! `cuzk bench-daemon`: N proofs through a daemon, J at a time, each optionally verified on
//! the client; then latency, the answer times of Status and Metrics under load, the GPU busy
//! share, and the run's timeline as JSON or SVG.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use cuzk_daemon::client::Client;
use cuzk_daemon::pb;
use cuzk_formats::cuzk;
use cuzk_scheduler::stats::quantile;

use crate::daemon_client::{Conn, Work, connect, stream};

/// One Prove of the bench, checked on the client too when a verifying key is given.
async fn one_proof(
    mut c: Client,
    work: Work,
    pvk: Option<Arc<cuzk_groth16::PreparedVerifyingKey>>,
) -> Result<pb::ProofResponse> {
    let s = stream(&work, String::new()).await?;
    let r = c.prove(s).await?.into_inner();
    if let Some(pvk) = &pvk {
        let proof = cuzk::read_proof("proof", &r.proof[..])?;
        let public = cuzk::read_witness("public inputs", &r.public_inputs[..])?;
        cuzk_groth16::verify_proof(pvk, &proof, public.public_inputs())
            .context("the proof does not verify")?;
    }
    Ok(r)
}

/// The answer time a monitoring call must stay under with the GPU saturated.
const SLOW_ANSWER_S: f64 = 0.01;

/// From the daemon's Prometheus text: how many `method` calls it handled, and how many of them
/// took over `bound` seconds (`bound` must be one of the histogram's bucket bounds).
fn rpc_calls_over(text: &str, method: &str, bound: f64) -> Option<(u64, u64)> {
    let value = |series: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.trim().parse::<u64>().ok())
    };
    let count = value(&format!("cuzk_rpc_seconds_count{{method=\"{method}\"}} "))?;
    let within = value(&format!(
        "cuzk_rpc_seconds_bucket{{method=\"{method}\",le=\"{bound}\"}} "
    ))?;
    Some((count, count.saturating_sub(within)))
}

pub(crate) async fn bench(
    conn: Conn,
    work: Work,
    (concurrency, proofs): (u32, u32),
    vk: Option<PathBuf>,
    (json, svg): (Option<PathBuf>, Option<PathBuf>),
) -> Result<()> {
    let pvk = match &vk {
        Some(p) => {
            let vk = crate::read_file(p, cuzk::read_verifying_key)?;
            Some(Arc::new(cuzk_groth16::prepare_verifying_key(&vk)))
        }
        None => None,
    };
    let mut c = connect(&conn).await?;
    let before = c.status(pb::StatusRequest {}).await?.into_inner();
    let handled_before = c.metrics(pb::MetricsRequest {}).await?.into_inner().text;
    let t0_daemon = c
        .timeline(pb::TimelineRequest { last_s: 1.0 })
        .await?
        .into_inner()
        .now_s;
    let next = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let n = proofs as usize;
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..concurrency.min(proofs) {
        let (next, done, work, pvk) = (next.clone(), done.clone(), work.clone(), pvk.clone());
        // A connection per task: one HTTP/2 connection carries its streams over one socket,
        // one after another, so concurrent witness uploads would share one core's transport.
        let c = connect(&conn).await?;
        tasks.push(tokio::spawn(async move {
            let mut results = Vec::new();
            while next.fetch_add(1, Ordering::SeqCst) < n {
                let t = Instant::now();
                let r = one_proof(c.clone(), work.clone(), pvk.clone()).await;
                let secs = t.elapsed().as_secs_f64();
                let k = done.fetch_add(1, Ordering::SeqCst) + 1;
                match &r {
                    Ok(r) => {
                        let q = r.timings.as_ref().map_or(0.0, |t| t.queue_wait_s);
                        println!(
                            "[{k}/{n}] ok {secs:.2} s  queue {:.0} ms  gpu {} worker {}",
                            q * 1e3,
                            r.device,
                            r.worker
                        );
                    }
                    Err(e) => println!("[{k}/{n}] FAILED {secs:.2} s  {e:#}"),
                }
                results.push((secs, r.map_err(|e| format!("{e:#}"))));
            }
            results
        }));
    }
    // While the proofs run: how long Status and Metrics take to answer (they must stay quick
    // with the GPU saturated, for monitoring). On a connection of its own, as a monitor has:
    // on the proofs' connection a request would queue behind their witness chunks.
    let probing = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let probe = {
        let (conn, probing) = (conn.clone(), probing.clone());
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        std::thread::spawn(move || {
            rt.block_on(async move {
                let mut c = connect(&conn).await?;
                // (seconds into the run, answer time)
                let (mut status, mut metrics) = (Vec::new(), Vec::new());
                while probing.load(Ordering::SeqCst) {
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    let t = Instant::now();
                    if c.status(pb::StatusRequest {}).await.is_ok() {
                        status.push(((t - start).as_secs_f64(), t.elapsed().as_secs_f64()));
                    }
                    let t = Instant::now();
                    if c.metrics(pb::MetricsRequest {}).await.is_ok() {
                        metrics.push(((t - start).as_secs_f64(), t.elapsed().as_secs_f64()));
                    }
                }
                anyhow::Ok((status, metrics))
            })
        })
    };
    let mut results = Vec::new();
    for t in tasks {
        results.extend(t.await?);
    }
    let wall = start.elapsed().as_secs_f64();
    probing.store(false, Ordering::SeqCst);
    let (status_s, metrics_s) = probe
        .join()
        .map_err(|_| anyhow::anyhow!("the Status probe panicked"))??;
    let after = c.status(pb::StatusRequest {}).await?.into_inner();
    let handled_after = c.metrics(pb::MetricsRequest {}).await?.into_inner().text;
    let timeline = c
        .timeline(pb::TimelineRequest { last_s: wall + 5.0 })
        .await?
        .into_inner();
    let mut lat: Vec<f64> = results
        .iter()
        .filter(|r| r.1.is_ok())
        .map(|r| r.0)
        .collect();
    lat.sort_by(f64::total_cmp);
    let failures = results.len() - lat.len();
    crate::bench_daemon::print_run_line(wall, &lat, failures);
    for (what, calls) in [("Status", &status_s), ("Metrics", &metrics_s)] {
        let mut v: Vec<f64> = calls.iter().map(|c| c.1).collect();
        v.sort_by(f64::total_cmp);
        println!(
            "{what} during the run: {} calls, answer p50 {:.2} ms  p99 {:.2} ms  max {:.2} ms",
            v.len(),
            quantile(&v, 0.5).unwrap_or(0.0) * 1e3,
            quantile(&v, 0.99).unwrap_or(0.0) * 1e3,
            v.last().copied().unwrap_or(0.0) * 1e3
        );
        let slow: Vec<String> = calls
            .iter()
            .filter(|c| c.1 > SLOW_ANSWER_S)
            .map(|(at, took)| format!("{took_ms:.1} ms at {at:.2} s", took_ms = took * 1e3))
            .collect();
        if !slow.is_empty() {
            println!("  over {:.0} ms: {}", SLOW_ANSWER_S * 1e3, slow.join(", "));
        }
        // The daemon's own handling time (cuzk_rpc_seconds): a slow answer with a quick handler
        // waited for the transport or a thread, not for the daemon's work.
        let over = |text: &str| rpc_calls_over(text, what, SLOW_ANSWER_S);
        if let (Some(b), Some(a)) = (over(&handled_before), over(&handled_after)) {
            println!(
                "  handled by the daemon: {} calls, {} of them over {:.0} ms",
                a.0 - b.0,
                a.1 - b.1,
                SLOW_ANSWER_S * 1e3
            );
        }
    }
    for d in &after.devices {
        let b0 = before
            .devices
            .iter()
            .find(|x| x.index == d.index)
            .map_or(0.0, |x| x.busy_seconds);
        println!(
            "device {} {}: GPU busy {:.0}% of the wall time (lock held {:.2} s)",
            d.index,
            d.name,
            100.0 * (d.busy_seconds - b0) / wall,
            d.busy_seconds - b0
        );
    }
    let spans: Vec<pb::Span> = timeline
        .spans
        .iter()
        .filter(|s| s.end_s >= t0_daemon)
        .cloned()
        .collect();
    if let Some(p) = svg {
        std::fs::write(&p, crate::svg::timeline(&spans, &timeline.devices)?)
            .with_context(|| format!("cannot write {}", p.display()))?;
        println!("timeline: {}", p.display());
    }
    if let Some(p) = json {
        let v = serde_json::json!({
            "wall_s": wall,
            "proofs": n,
            "concurrency": concurrency,
            "failures": failures,
            "latency_s": lat,
            "results": results.iter().map(|(secs, r)| match r {
                Ok(r) => serde_json::json!({"ok": true, "secs": secs, "device": r.device, "worker": r.worker,
                    "queue_wait_s": r.timings.as_ref().map_or(0.0, |t| t.queue_wait_s)}),
                Err(e) => serde_json::json!({"ok": false, "secs": secs, "error": e}),
            }).collect::<Vec<_>>(),
            "timeline": cuzk_daemon::timeline_json(&pb::TimelineResponse {
                spans,
                now_s: timeline.now_s,
                devices: timeline.devices.clone(),
            }),
        });
        std::fs::write(&p, format!("{v:#}"))
            .with_context(|| format!("cannot write {}", p.display()))?;
    }
    if failures > 0 {
        bail!("{failures} of {n} proofs failed");
    }
    Ok(())
}

/// The one-line result of a run through a daemon or the queue: `lat` holds the latencies (s)
/// of the proofs that succeeded, sorted.
pub(crate) fn print_run_line(wall: f64, lat: &[f64], failures: usize) {
    println!(
        "wall {wall:.2} s  {:.1} proofs/min  latency p50 {:.2} s  p95 {:.2} s  max {:.2} s  failures {failures}",
        lat.len() as f64 * 60.0 / wall,
        quantile(lat, 0.5).unwrap_or(0.0),
        quantile(lat, 0.95).unwrap_or(0.0),
        lat.last().copied().unwrap_or(0.0),
    );
}
