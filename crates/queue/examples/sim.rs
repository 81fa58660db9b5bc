//! The scale simulation on its own: `cargo run --release -p cuzk-queue --example sim --
//! [--hosts 64] [--jobs 10000] [--slots 2] [--job-ms 20] [--pool 64] [--url postgres://…]
//! [--set name=value]...`. Without --url it starts a throwaway PostgreSQL server (with the
//! --set settings) and stops it at the end.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use cuzk_queue::Queue;
use cuzk_queue::sim::{SimConfig, simulate};
use cuzk_queue::tempdb::TempPostgres;

fn main() -> Result<()> {
    let mut config = SimConfig {
        hosts: 64,
        jobs: 10_000,
        slots: 2,
        job_time: Duration::from_millis(20),
        poll: Duration::from_millis(20),
    };
    let (mut pool, mut url, mut settings) = (None, None, Vec::new());
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut v = || args.next().with_context(|| format!("{a} needs a value"));
        match a.as_str() {
            "--hosts" => config.hosts = v()?.parse()?,
            "--jobs" => config.jobs = v()?.parse()?,
            "--slots" => config.slots = v()?.parse()?,
            "--job-ms" => config.job_time = Duration::from_millis(v()?.parse()?),
            "--pool" => pool = Some(v()?.parse()?),
            "--url" => url = Some(v()?),
            "--set" => settings.push(v()?),
            _ => bail!("unknown argument {a}"),
        }
    }
    let server = match &url {
        Some(_) => None,
        None => {
            let s: Vec<&str> = settings.iter().map(String::as_str).collect();
            Some(TempPostgres::start_with(&s)?)
        }
    };
    let url = url.unwrap_or_else(|| server.as_ref().map(|s| s.url()).unwrap_or_default());
    let rt = tokio::runtime::Runtime::new()?;
    let report = rt.block_on(async {
        let q = Queue::open_host(&url, pool.unwrap_or(config.hosts), Duration::from_secs(10))?;
        q.migrate().await?;
        simulate(&q, &config).await
    })?;
    println!(
        "{} hosts x {} slots, {} jobs of {} ms: {report}",
        config.hosts,
        config.slots,
        config.jobs,
        config.job_time.as_millis()
    );
    if report.double_claims_seen + report.double_claims_recorded as u64 > 0 {
        bail!("a job was claimed twice");
    }
    Ok(())
}
