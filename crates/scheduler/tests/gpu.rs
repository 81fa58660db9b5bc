//! The engine on a GPU: the dual-worker 16 GiB scenario that once went out of memory, the
//! grid of workers x jobs in flight x VRAM caps, and the device memory the engine cannot
//! explain. Every proof is verified (the engine's self-check and again here); no job may fail.
//! Need an NVIDIA GPU and panic without one; CPU CI reports them as ignored.
//! `CUZK_ENGINE_TEST_LOG=K` runs them at 2^K (default 24 or 26; the issue asks 24 and 27).

use std::sync::Arc;
use std::time::{Duration, Instant};

use cuzk_gpu::Gpu;
use cuzk_groth16::setup::gpu::generate_parameters_gpu;
use cuzk_groth16::testing::demo;
use cuzk_groth16::{ProvingKey, R1cs, ToxicWaste, Witness};
use cuzk_scheduler::{
    Engine, EngineConfig, JobHandle, JobOutput, JobSpec, KeySource, SpanKind, WitnessSource,
    Workers,
};
use cuzk_vram::BudgetConfig;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

const GIB: u64 = 1 << 30;

struct Fixture {
    pk: Arc<ProvingKey>,
    r1cs: Arc<R1cs>,
    witness: Arc<Witness>,
}

fn log_or(default: u32) -> u32 {
    std::env::var("CUZK_ENGINE_TEST_LOG")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A realistic circuit (75% bit constraints) and its key, made on the GPU.
fn fixture(log: u32) -> Fixture {
    let gpu = Gpu::first().expect("gpu_* tests need an NVIDIA GPU");
    let mut rng = ChaCha20Rng::seed_from_u64(u64::from(log));
    let t = Instant::now();
    let (r1cs, witness) = demo::circuit_with(log, 4, 75, &mut rng).unwrap();
    let (pk, _) = generate_parameters_gpu(&gpu, &r1cs, &ToxicWaste::random(&mut rng)).unwrap();
    println!(
        "2^{log}: circuit and key in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    Fixture {
        pk: Arc::new(pk),
        r1cs: Arc::new(r1cs),
        witness: Arc::new(witness),
    }
}

fn engine(workers: usize, cap: Option<u64>) -> Engine {
    Engine::new(EngineConfig {
        backend: cuzk_groth16::BackendChoice::Gpu,
        gpus: Some(vec![0]),
        workers_per_device: Workers::Fixed(workers),
        vram: BudgetConfig {
            vram_limit: cap,
            ..BudgetConfig::default()
        },
        ..EngineConfig::default()
    })
    .expect("a GPU engine")
}

/// Runs `proofs` jobs of key "k" with `witness`, keeping `concurrency` in flight; every one
/// must succeed and verify.
fn run(
    engine: &Engine,
    witness: &Arc<Witness>,
    proofs: usize,
    concurrency: usize,
) -> (Vec<JobOutput>, f64) {
    let vk = engine.verifying_key("k").expect("key k is loaded");
    let pvk = cuzk_groth16::prepare_verifying_key(&vk);
    let start = Instant::now();
    let mut live: std::collections::VecDeque<JobHandle> = Default::default();
    let mut out = Vec::new();
    let finish = |h: JobHandle, out: &mut Vec<JobOutput>| {
        let o = h
            .wait(Some(Duration::from_secs(600)))
            .expect("job finished")
            .unwrap_or_else(|e| panic!("job {} failed: {e}", h.id()));
        cuzk_groth16::verify_proof(&pvk, &o.proof, &o.public_inputs).expect("proof verifies");
        out.push(o);
    };
    for _ in 0..proofs {
        if live.len() == concurrency {
            finish(live.pop_front().unwrap(), &mut out);
        }
        let spec = JobSpec::new("k", WitnessSource::Memory(witness.clone()));
        live.push_back(engine.submit(spec).expect("submit"));
    }
    while let Some(h) = live.pop_front() {
        finish(h, &mut out);
    }
    (out, start.elapsed().as_secs_f64())
}

fn load(engine: &Engine, f: &Fixture) {
    engine
        .load_key(
            "k",
            KeySource::Memory {
                pk: f.pk.clone(),
                r1cs: f.r1cs.clone(),
            },
            None,
        )
        .expect("key loads");
}

/// Whether some copy of one worker overlaps some device phase of another.
fn uploads_overlap_kernels(engine: &Engine) -> bool {
    let t = engine.timeline();
    t.iter().filter(|s| s.kind == SpanKind::Copy).any(|c| {
        t.iter().any(|d| {
            d.kind == SpanKind::Device && d.worker != c.worker && d.start < c.end && c.start < d.end
        })
    })
}

fn report(label: &str, engine: &Engine, out: &[JobOutput], wall: f64) {
    let st = engine.status();
    let d = &st.devices[0];
    let mut lat: Vec<f64> = out
        .iter()
        .map(|o| (o.timings.queue_wait + o.timings.run).as_secs_f64())
        .collect();
    lat.sort_by(f64::total_cmp);
    println!(
        "{label}: {} proofs in {wall:.2} s = {:.2} proofs/s, p50 {:.0} ms, GPU busy {:.0}%, peak {:.1} GiB of {:.1} GiB budget",
        out.len(),
        out.len() as f64 / wall,
        lat[lat.len() / 2] * 1e3,
        100.0 * d.busy_seconds / wall,
        d.budget_peak as f64 / GIB as f64,
        d.budget_total as f64 / GIB as f64,
    );
}

#[test]
#[ignore = "gpu"]
fn gpu_engine_two_workers_three_jobs_in_16_gib() {
    let log = log_or(26);
    let f = fixture(log);
    let engine = engine(2, Some(16 * GIB));
    load(&engine, &f);
    let (out, wall) = run(&engine, &f.witness, 5, 3);
    report(
        &format!("2^{log} 16 GiB 2 workers x 3"),
        &engine,
        &out,
        wall,
    );
    let st = engine.status();
    let d = &st.devices[0];
    assert!(d.budget_total <= 16 * GIB);
    assert!(d.budget_peak <= d.budget_total);
    assert_eq!(st.counters.failed, 0);
    assert_eq!(st.counters.completed, 5);
    assert!(
        uploads_overlap_kernels(&engine),
        "one worker's uploads overlap the other's kernels"
    );
    assert_eq!(d.staging_in_use, 0, "staged data all returned");
    let workers: std::collections::BTreeSet<_> = out.iter().map(|o| o.worker).collect();
    assert_eq!(workers.len(), 2, "both workers proved");
    // With its last key unloaded, the device holds nothing: no key, no cache, no pinned set.
    engine.unload_key("k").unwrap();
    let d = &engine.status().devices[0];
    assert_eq!(
        (d.budget_in_use, d.pinned_in_use),
        (0, 0),
        "device and pinned budgets empty after the last key's unload"
    );
}

/// Every cell of workers x jobs in flight x VRAM cap proves `concurrency + 2` proofs, all of
/// which verify, with no failed job, the peak within the cap and staging all returned.
fn grid(log: u32, caps: &[Option<u64>], workers: &[usize], concurrencies: &[usize]) {
    let f = fixture(log);
    let (mut cells, mut proofs) = (0, 0);
    for &cap in caps {
        for &w in workers {
            for &concurrency in concurrencies {
                let engine = engine(w, cap);
                load(&engine, &f);
                let (out, wall) = run(&engine, &f.witness, concurrency + 2, concurrency);
                let label = format!(
                    "2^{log} cap {} workers {w} x {concurrency}",
                    cap.map_or("none".into(), |c| format!("{} GiB", c / GIB))
                );
                report(&label, &engine, &out, wall);
                let st = engine.status();
                let d = &st.devices[0];
                assert_eq!(st.counters.failed, 0, "{label}");
                assert_eq!(d.staging_in_use, 0, "{label}");
                assert!(d.budget_peak <= d.budget_total, "{label}");
                if let Some(c) = cap {
                    assert!(d.budget_total <= c, "{label}");
                }
                println!(
                    "reliability: oom-cell log={log} cap={} workers={w} concurrency={concurrency} proofs={} proofs_s={:.2} peak_gib={:.1}",
                    cap.map_or("none".into(), |c| format!("{}GiB", c / GIB)),
                    out.len(),
                    out.len() as f64 / wall,
                    d.budget_peak as f64 / GIB as f64,
                );
                cells += 1;
                proofs += out.len();
            }
        }
    }
    println!("grid 2^{log}: {cells} cells, every proof verified");
    println!(
        "reliability: oom-grid log={log} cells={cells} proofs={proofs} verified={proofs} failed=0"
    );
}

#[test]
#[ignore = "gpu"]
fn gpu_engine_grid_of_workers_jobs_and_caps() {
    grid(
        log_or(24),
        &[Some(16 * GIB), Some(40 * GIB), None],
        &[1, 2, 3],
        &[1, 3, 6],
    );
}

/// The reliability suite's OOM grid (RELIABILITY.md): more workers and jobs than the engine's
/// acceptance grid, under four caps.
#[test]
#[ignore = "gpu"]
fn gpu_reliability_oom_grid() {
    let caps = [16, 24, 40, 80].map(|g| Some(g * GIB));
    grid(log_or(24), &caps, &[1, 2, 4], &[1, 3, 8]);
}

/// The OOM grid's 16 GiB row at the size of the scenario that once went out of memory, one
/// and two workers. Its four-worker cells are a test of their own, so that each fits one
/// device call (all nine took 565 s on the H200).
#[test]
#[ignore = "gpu"]
fn gpu_reliability_oom_grid_16_gib_2_26_workers_1_2() {
    grid(log_or(26), &[Some(16 * GIB)], &[1, 2], &[1, 3, 8]);
}

/// The same row's four-worker cells.
#[test]
#[ignore = "gpu"]
fn gpu_reliability_oom_grid_16_gib_2_26_workers_4() {
    grid(log_or(26), &[Some(16 * GIB)], &[4], &[1, 3, 8]);
}

/// Set only in the child process of [`gpu_memory_taken_by_another_process`] (this binary run
/// again as "another process"): the bytes it takes. A protocol between the test and its
/// child, not a setting.
const TAKER: &str = "CUZK_TEST_TAKE_VRAM";

/// Issue #24, item 4: while the engine proves, another process takes half of the free device
/// memory, then (a second one) all but 1 GiB of what is left, holds it and lets it go. The
/// engine's budget limit follows (lowered while held, back once released); jobs wait meanwhile
/// and none fails; afterwards throughput is back. `CUZK_ENGINE_TEST_LOG` sets the size
/// (default 2^24).
#[test]
#[ignore = "gpu"]
fn gpu_memory_taken_by_another_process() {
    if let Ok(bytes) = std::env::var(TAKER) {
        take_and_hold(bytes.parse().expect("a byte count"));
        return;
    }
    let log = log_or(24);
    let f = fixture(log);
    let engine = engine(2, None);
    load(&engine, &f);
    let device = |e: &Engine| e.status().devices[0].clone();
    let total = device(&engine).budget_total;
    let (out, wall) = run(&engine, &f.witness, 12, 6);
    let before = out.len() as f64 / wall;

    let half = device(&engine).mem_free.expect("a GPU") / 2;
    let first = Taker::start(half);
    let limit_half = wait_until(|| {
        let d = device(&engine);
        (d.budget_limit < total).then_some(d.budget_limit)
    });
    let (out, wall) = run(&engine, &f.witness, 12, 6);
    let during = out.len() as f64 / wall;

    // Submitted while almost nothing is free: they wait, then all complete.
    let rest = device(&engine).mem_free.expect("a GPU").saturating_sub(GIB);
    let second = Taker::start(rest);
    let limit_low = wait_until(|| {
        let d = device(&engine);
        (d.budget_limit < limit_half).then_some(d.budget_limit)
    });
    let waiting: Vec<JobHandle> = (0..6)
        .map(|_| {
            let spec = JobSpec::new("k", WitnessSource::Memory(f.witness.clone()));
            engine.submit(spec).expect("submit")
        })
        .collect();
    std::thread::sleep(Duration::from_secs(3));
    let done_while_held = waiting.iter().filter(|h| h.poll().is_some()).count();
    assert!(
        waiting.iter().all(|h| h.poll().is_none_or(|r| r.is_ok())),
        "no job fails while the memory is held"
    );
    let held = second.bytes + first.bytes;
    drop(second);
    drop(first);
    wait_until(|| (device(&engine).budget_limit == total).then_some(()));
    let pvk = cuzk_groth16::prepare_verifying_key(&f.pk.vk);
    for h in &waiting {
        let o = h
            .wait(Some(Duration::from_secs(600)))
            .expect("job finished")
            .unwrap_or_else(|e| panic!("job {} failed: {e}", h.id()));
        cuzk_groth16::verify_proof(&pvk, &o.proof, &o.public_inputs).expect("proof verifies");
    }
    let (out, wall) = run(&engine, &f.witness, 12, 6);
    let after = out.len() as f64 / wall;
    let st = engine.status();
    assert_eq!(st.counters.failed, 0, "no job failed");
    assert_eq!(st.counters.completed, 42);
    assert_eq!(st.devices[0].staging_in_use, 0, "staged data all returned");
    assert!(
        after >= 0.9 * before,
        "full speed returns: {after:.2} proofs/s after, {before:.2} before"
    );
    let g = |b: u64| b as f64 / GIB as f64;
    println!(
        "2^{log} memory taken: budget {:.1} GiB; half of free taken ({:.1} GiB): limit {:.1} GiB, {during:.2} proofs/s (before {before:.2}); all but 1 GiB taken ({:.1} GiB in all): limit {:.1} GiB, {done_while_held} of 6 finished while held, the rest waited; after: {after:.2} proofs/s",
        g(total),
        g(half),
        g(limit_half),
        g(held),
        g(limit_low),
    );
    println!(
        "reliability: gpu-memory-taken log={log} jobs=42 failed=0 taken_bytes={held} limit_bytes={total}->{limit_low}->{total} before={before:.2} during={during:.2} after={after:.2}"
    );
}

/// Polls `f` until it gives a value (the engine's memory watch runs every 100 ms).
fn wait_until<T>(f: impl Fn() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Another process (this test binary run again) holding device memory until dropped.
struct Taker {
    child: std::process::Child,
    bytes: u64,
}

impl Taker {
    fn start(bytes: u64) -> Self {
        use std::io::BufRead;
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "gpu_memory_taken_by_another_process",
                "--ignored",
                "--nocapture",
            ])
            .env(TAKER, bytes.to_string())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("start the memory taker");
        let out = child.stdout.take().unwrap();
        let held = std::io::BufReader::new(out)
            .lines()
            .map_while(Result::ok)
            .find_map(|l| l.strip_prefix("holding ").and_then(|b| b.parse().ok()))
            .expect("the taker reports what it holds");
        Self { child, bytes: held }
    }
}

impl Drop for Taker {
    fn drop(&mut self) {
        drop(self.child.stdin.take()); // its stdin closes: it exits, and the driver frees all
        let _ = self.child.wait();
    }
}

/// The child's part: takes up to `bytes` in 1 GiB pieces, outside any budget (as another
/// program would), reports them, and holds them until its stdin closes.
fn take_and_hold(bytes: u64) {
    use std::io::{Read, Write};
    let gpu = Gpu::first().expect("a GPU");
    let backend = gpu.vram().backend().clone();
    let mut held = 0u64;
    while held < bytes {
        let piece = (bytes - held).min(GIB);
        match backend.alloc_device(piece as usize) {
            Ok(_) => held += piece,
            Err(_) => break,
        }
    }
    println!("holding {held}");
    std::io::stdout().flush().unwrap();
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
}

/// A key made on the engine's GPU and held only there: the host never has its points (the
/// process's peak RSS stays below the key's size), every proof verifies and equals the proof
/// of the same key made on the host, and unloading it leaves the device budget empty.
/// `CUZK_ENGINE_TEST_LOG` sets the size (default 2^22).
#[test]
#[ignore = "gpu"]
fn gpu_engine_proves_with_a_key_held_on_the_device() {
    let log = log_or(22);
    let mut rng = ChaCha20Rng::seed_from_u64(27);
    let (r1cs, witness) = demo::circuit_with(log, 4, 75, &mut rng).unwrap();
    let (r1cs, witness) = (Arc::new(r1cs), Arc::new(witness));
    let tw = ToxicWaste::random(&mut rng);
    let engine = Engine::new(EngineConfig {
        backend: cuzk_groth16::BackendChoice::Gpu,
        gpus: Some(vec![0]),
        ..EngineConfig::default()
    })
    .expect("a GPU engine");
    let gpu = engine.gpu(0).expect("device 0 is a GPU");
    let t = Instant::now();
    let (backend, pk, _) = cuzk_groth16::GpuBackend::generate_key(&gpu, &r1cs, &tw).unwrap();
    println!(
        "2^{log}: key made and held in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let pk = Arc::new(pk);
    let backend = Arc::new(backend);
    assert!(backend.resident_bytes() > 0);
    let held = || KeySource::Held {
        pk: pk.clone(),
        r1cs: r1cs.clone(),
        backend: backend.clone(),
        device: 0,
    };
    // On another device, or a list naming another, it is refused.
    let err = engine.load_key("k", held(), Some(&[0, 0])).unwrap_err();
    assert!(
        err.to_string().contains("loads on that device only"),
        "{err}"
    );
    engine
        .load_key("k", held(), None)
        .expect("the held key loads");
    // The held key's proof equals the CPU prover's with the same key made on the host, for
    // the same r and s (the engine being idle, its backend proves directly).
    let (host_pk, _) = generate_parameters_gpu(&gpu, &r1cs, &tw).unwrap();
    assert_eq!(host_pk.vk, pk.vk);
    let (r, s) = (
        cuzk_groth16::Fr::random(&mut rng),
        cuzk_groth16::Fr::random(&mut rng),
    );
    let host = cuzk_groth16::create_proof_with_randomness(&host_pk, &r1cs, &witness, r, s).unwrap();
    let (held, _) =
        cuzk_groth16::create_proof_with_backend(&*backend, &*pk, &r1cs, &witness, r, s).unwrap();
    assert_eq!(
        held, host,
        "held key's proof = host key's CPU proof for the same r, s"
    );
    // The held backend proves its own key only; another backend cannot prove the held key.
    let err = cuzk_groth16::create_proof_with_backend(&*backend, &host_pk, &r1cs, &witness, r, s)
        .unwrap_err();
    assert!(err.to_string().contains("proves that key only"), "{err}");
    drop(host_pk);
    let other = cuzk_groth16::GpuBackend::new(gpu.clone());
    let err =
        cuzk_groth16::create_proof_with_backend(&other, &*pk, &r1cs, &witness, r, s).unwrap_err();
    assert!(err.to_string().contains("held by the GPU backend"), "{err}");
    drop((other, backend));

    let (out, wall) = run(&engine, &witness, 6, 3);
    report(
        &format!("2^{log} held key, auto workers x 3"),
        &engine,
        &out,
        wall,
    );
    assert_eq!(engine.status().counters.failed, 0);
    assert_eq!(engine.status().counters.completed, 6);

    engine.unload_key("k").unwrap();
    let d = &engine.status().devices[0];
    assert_eq!(
        (d.budget_in_use, d.pinned_in_use),
        (0, 0),
        "device and pinned budgets empty after the held key's unload"
    );
}

/// Device memory beyond the budget's own buffers, with no other process on the GPU: the
/// context's, modules', kernels' local memory. More than this on a 16 GiB card is a job that
/// waits, or an out-of-memory error, for nothing.
const UNEXPLAINED_MAX: u64 = 256 << 20;

#[test]
#[ignore = "gpu"]
fn gpu_engine_explains_its_device_memory_at_every_phase() {
    let log = log_or(24);
    let f = fixture(log);
    let engine = engine(2, None);
    let gpu = engine.gpu(0).expect("device 0 is a GPU");
    load(&engine, &f);
    // Free memory read every millisecond, beside the engine's own watch (every 100 ms): an
    // allocation outside the budget that comes and goes within a phase is seen too.
    // Pinned host memory too (the budget's own peak includes the fixture's key setup).
    let done = std::sync::atomic::AtomicBool::new(false);
    let pinned_at_start = gpu.vram().host_budget().in_use();
    let pinned_peak = std::sync::atomic::AtomicU64::new(0);
    let (out, wall) = std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                gpu.vram().refresh_limit().expect("cuMemGetInfo");
                pinned_peak.fetch_max(
                    gpu.vram().host_budget().in_use(),
                    std::sync::atomic::Ordering::Relaxed,
                );
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        let r = run(&engine, &f.witness, 6, 3);
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        r
    });
    report(&format!("2^{log} memory explained"), &engine, &out, wall);
    let (unexplained, lowered) = gpu.vram().unexplained();
    println!(
        "2^{log}: unexplained device memory peak {:.1} MiB, limit lowered {lowered} times; \
         driver (kernels, page tables) {:.1} MiB",
        unexplained as f64 / (1 << 20) as f64,
        gpu.vram().driver_bytes() as f64 / (1 << 20) as f64
    );
    assert!(
        unexplained <= UNEXPLAINED_MAX,
        "{unexplained} bytes of device memory unexplained"
    );
    assert_eq!(lowered, 0, "the limit was lowered with no other process");
    // Each worker holds a pinned set of a, b, c; the evaluations made ahead only borrow an
    // idle set that no starting job is about to take (run 134: they took one, and the worker
    // pinned a third). The figure at the start counts the staging slots too.
    let set = (3 * 32 * f.pk.domain_size()) as f64;
    let peak = pinned_peak.into_inner() as f64 / set;
    println!(
        "2^{log}: pinned host memory at the start {:.2}, peak during the run {peak:.2} sets of a, b, c",
        pinned_at_start as f64 / set,
    );
    assert!(peak < 2.5, "{peak:.2} sets of a, b, c pinned: a third set");
}
