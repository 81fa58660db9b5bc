//! The engine on the CPU backend with simulated device memories: every job completes and
//! verifies under any workers x concurrency x budget, budgets end where they started, priority
//! order, preemption at phase boundaries, cancellation, injected allocation failures and bad
//! witnesses fail their job alone.

use std::sync::Arc;
use std::time::Duration;

use cuzk_formats::{PointChecks, cuzk};
use cuzk_groth16::{
    Fr, ProvingKey, R1cs, Witness, WitnessBuffer, generate_parameters_with_toxic_waste,
};
use cuzk_scheduler::{
    Engine, EngineConfig, EngineError, JobError, JobHandle, JobSpec, JobStatus, KeySource,
    Priority, SpanKind, WitnessSource, Workers,
};
use cuzk_vram::{Budget, FakeBackend, Faults, Vram};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const WAIT: Option<Duration> = Some(Duration::from_secs(300));

struct Circuit {
    pk: Arc<ProvingKey>,
    r1cs: Arc<R1cs>,
    witness: Arc<Witness>,
}

fn circuit(log: u32, seed: u64) -> Circuit {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let (r1cs, witness) = cuzk_groth16::testing::demo::circuit(log, 2, &mut rng).unwrap();
    let (pk, _) =
        generate_parameters_with_toxic_waste(&r1cs, &cuzk_groth16::ToxicWaste::random(&mut rng))
            .unwrap();
    Circuit {
        pk: Arc::new(pk),
        r1cs: Arc::new(r1cs),
        witness: Arc::new(witness),
    }
}

fn key(c: &Circuit) -> KeySource {
    KeySource::Memory {
        pk: c.pk.clone(),
        r1cs: c.r1cs.clone(),
    }
}

/// Staged bytes of one proof: (witness, evaluations).
fn staged_bytes(c: &Circuit) -> (u64, u64) {
    let n = c.pk.domain_size() as u64;
    (c.r1cs.num_variables() as u64 * 32, 3 * n * 32)
}

fn memories(count: usize, device: u64) -> (Vec<Vram>, Vec<Arc<FakeBackend>>) {
    let pinned = Budget::new("host", 256 * MIB);
    (0..count)
        .map(|_| {
            let fake = Arc::new(FakeBackend::new(device));
            let vram =
                Vram::with_budgets(fake.clone(), Budget::new("device", device), pinned.clone());
            (vram, fake)
        })
        .unzip()
}

fn config(workers: usize) -> EngineConfig {
    EngineConfig {
        workers_per_device: Workers::Fixed(workers),
        host_memory: Some(4 << 30),
        ..EngineConfig::default()
    }
}

fn memory(c: &Circuit) -> WitnessSource {
    WitnessSource::Memory(c.witness.clone())
}

fn verify(c: &Circuit, h: &JobHandle) -> cuzk_scheduler::JobOutput {
    let out = h.wait(WAIT).expect("job finished").expect("job succeeded");
    let pvk = cuzk_groth16::prepare_verifying_key(&c.pk.vk);
    cuzk_groth16::verify_proof(&pvk, &out.proof, &out.public_inputs).expect("proof verifies");
    out
}

/// A job on key "k" whose witness has value `i` changed fails naming the row the CPU names.
fn fails_naming_the_broken_row(engine: &Engine, c: &Circuit, i: usize) {
    let mut bad = (*c.witness).clone();
    bad.set(i, bad.assignment()[i] + Fr::ONE).unwrap();
    let Err(want) = c.r1cs.is_satisfied(&bad) else {
        panic!("changing value {i} breaks a row");
    };
    let err = engine
        .submit(JobSpec::new("k", WitnessSource::Memory(Arc::new(bad))))
        .unwrap()
        .wait(WAIT)
        .unwrap()
        .unwrap_err();
    assert!(
        matches!(&err, JobError::Witness(m) if m.contains(&want.to_string())),
        "{err}, the CPU: {want}"
    );
}

/// Every device budget, staging gate and the host gate are back at their idle level: a device
/// holds only its keys' resident bytes (the circuits it evaluates).
fn assert_idle(engine: &Engine, host_idle: u64) {
    let st = engine.status();
    for d in &st.devices {
        let resident: u64 = d.keys.iter().map(|(_, bytes)| bytes).sum();
        assert_eq!(d.budget_in_use, resident, "device {} budget", d.name);
        assert_eq!(d.staging_in_use, 0, "device {} staging", d.name);
        assert_eq!(d.pinned_in_use, 0, "device {} pinned", d.name);
        assert!(d.workers.iter().all(|w| w.job.is_none()));
    }
    assert_eq!(st.host_in_use, host_idle, "host memory");
    assert_eq!(st.running, 0);
}

#[test]
fn grid_every_job_completes_and_every_budget_returns() {
    let c = circuit(8, 1);
    let (zb, eb) = staged_bytes(&c);
    // small: one proof's largest staged buffer; medium: a witness and evaluations at once.
    let budgets = [
        ("small", eb.max(zb)),
        ("medium", eb + zb),
        ("large", 64 * MIB),
    ];
    for workers in [1, 2, 4] {
        for concurrency in [1, 3, 8] {
            for (name, budget) in budgets {
                let (mems, _) = memories(2, budget);
                let engine = Engine::on_cpu(config(workers), mems).unwrap();
                engine.load_key("k", key(&c), None).unwrap();
                let host_idle = engine.status().host_in_use;
                let proofs = concurrency + 2;
                let mut live: Vec<JobHandle> = Vec::new();
                let mut done = 0;
                for _ in 0..proofs {
                    if live.len() == concurrency {
                        verify(&c, &live.remove(0));
                        done += 1;
                    }
                    live.push(engine.submit(JobSpec::new("k", memory(&c))).unwrap());
                }
                for h in live.drain(..) {
                    verify(&c, &h);
                    done += 1;
                }
                assert_eq!(done, proofs);
                let st = engine.status();
                assert_eq!(st.counters.completed, proofs as u64);
                assert_eq!(st.counters.failed, 0, "{workers} x {concurrency} x {name}");
                for d in &st.devices {
                    assert!(d.budget_peak <= d.budget_total, "peak within the budget");
                }
                assert_idle(&engine, host_idle);
            }
        }
    }
}

#[test]
fn auto_workers_are_what_the_staging_room_admits_for_the_loaded_keys() {
    let c = circuit(8, 2);
    let (zb, eb) = staged_bytes(&c);
    // One proof's largest staged buffer admits one worker; room for a witness beside another
    // proof's a, b, c admits two.
    for (budget, admitted) in [(eb.max(zb), 1), (64 * MIB, 2)] {
        let (mems, _) = memories(1, budget);
        let engine = Engine::on_cpu(
            EngineConfig {
                workers_per_device: Workers::Auto,
                ..config(1)
            },
            mems,
        )
        .unwrap();
        engine.load_key("k", key(&c), None).unwrap();
        let host_idle = engine.status().host_in_use;
        assert_eq!(
            engine.status().devices[0].workers.len(),
            admitted,
            "budget {budget}"
        );
        let jobs: Vec<JobHandle> = (0..6)
            .map(|_| engine.submit(JobSpec::new("k", memory(&c))).unwrap())
            .collect();
        for h in &jobs {
            verify(&c, h);
        }
        let workers: std::collections::BTreeSet<usize> = engine
            .timeline()
            .iter()
            .map(|s| s.worker)
            .filter(|&w| w < cuzk_scheduler::READ_AHEAD_LANE)
            .collect();
        assert_eq!(
            workers,
            (0..admitted).collect(),
            "budget {budget}: the workers that ran jobs"
        );
        assert_idle(&engine, host_idle);
        // Unloading the key and loading it again recomputes the same rule.
        engine.unload_key("k").unwrap();
        engine.load_key("k", key(&c), None).unwrap();
        assert_eq!(engine.status().devices[0].workers.len(), admitted);
    }
}

#[test]
fn a_budget_below_one_proof_is_refused_at_load() {
    let c = circuit(8, 2);
    let (zb, eb) = staged_bytes(&c);
    let (mems, _) = memories(1, eb.max(zb) - 1);
    let engine = Engine::on_cpu(config(1), mems).unwrap();
    let err = engine.load_key("k", key(&c), None).unwrap_err();
    assert!(matches!(err, EngineError::NoRoom { .. }), "{err}");
    assert!(err.to_string().contains("cannot hold one proof"), "{err}");
    assert!(matches!(
        engine.submit(JobSpec::new("k", memory(&c))),
        Err(JobError::UnknownKey(_))
    ));
}

#[test]
fn priorities_are_served_in_order_fifo_within_a_level() {
    let big = circuit(12, 3);
    let c = circuit(8, 4);
    let (mems, _) = memories(1, 64 * MIB);
    let engine = Engine::on_cpu(config(1), mems).unwrap();
    engine.load_key("big", key(&big), None).unwrap();
    engine.load_key("k", key(&c), None).unwrap();
    let blocker = engine.submit(JobSpec::new("big", memory(&big))).unwrap();
    while blocker.status() == JobStatus::Queued {
        std::thread::sleep(Duration::from_millis(1));
    }
    let order = [
        Priority::Low,
        Priority::Normal,
        Priority::High,
        Priority::Normal,
        Priority::High,
        Priority::Low,
    ];
    let handles: Vec<_> = order
        .iter()
        .map(|&p| {
            engine
                .submit(JobSpec::new("k", memory(&c)).priority(p))
                .unwrap()
        })
        .collect();
    verify(&big, &blocker);
    let mut finished: Vec<(f64, usize)> = handles
        .iter()
        .enumerate()
        .map(|(i, h)| (verify(&c, h).timings.spans.last().unwrap().end, i))
        .collect();
    finished.sort_by(|a, b| a.0.total_cmp(&b.0));
    let got: Vec<usize> = finished.into_iter().map(|(_, i)| i).collect();
    assert_eq!(
        got,
        vec![2, 4, 1, 3, 0, 5],
        "high, then normal, then low, FIFO within"
    );
}

#[test]
fn a_running_low_priority_job_yields_the_gpu_lock_at_a_phase_boundary() {
    let big = circuit(14, 5);
    let (mems, _) = memories(1, 256 * MIB);
    let engine = Engine::on_cpu(config(2), mems).unwrap();
    engine.load_key("big", key(&big), None).unwrap();
    let low = engine
        .submit(JobSpec::new("big", memory(&big)).priority(Priority::Low))
        .unwrap();
    // In its first or second witness MSM: at least two phase boundaries are still ahead.
    while !matches!(
        low.status(),
        JobStatus::Running {
            phase: "MSM A" | "MSM B (G1)",
            ..
        }
    ) {
        assert!(
            low.poll().is_none(),
            "{:?}",
            low.poll().map(|r| r.map(|o| o.timings))
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let high = engine
        .submit(JobSpec::new("big", memory(&big)).priority(Priority::High))
        .unwrap();
    let (low, high) = (verify(&big, &low), verify(&big, &high));
    let start = |o: &cuzk_scheduler::JobOutput, phase: &str| {
        o.timings
            .spans
            .iter()
            .find(|s| s.phase == phase)
            .unwrap()
            .start
    };
    assert!(
        start(&high, "MSM A") < start(&low, "MSM L"),
        "the high-priority job's MSMs start before the low one's last witness MSM"
    );
    // Device phases never overlap: one GPU lock.
    let mut dev: Vec<_> = engine
        .timeline()
        .into_iter()
        .filter(|s| s.kind == SpanKind::Device)
        .collect();
    dev.sort_by(|a, b| a.start.total_cmp(&b.start));
    for w in dev.windows(2) {
        assert!(
            w[1].start >= w[0].end - 1e-9,
            "{:?} overlaps {:?}",
            w[0],
            w[1]
        );
    }
}

#[test]
fn cancel_takes_a_queued_job_out_at_once_and_stops_a_running_one() {
    let big = circuit(14, 6);
    let (mems, _) = memories(1, 256 * MIB);
    let engine = Engine::on_cpu(config(1), mems).unwrap();
    engine.load_key("big", key(&big), None).unwrap();
    let host_idle = engine.status().host_in_use;
    let running = engine.submit(JobSpec::new("big", memory(&big))).unwrap();
    let queued = engine.submit(JobSpec::new("big", memory(&big))).unwrap();
    assert!(queued.cancel());
    assert_eq!(
        queued.status(),
        JobStatus::Cancelled,
        "a queued job ends at once"
    );
    assert!(matches!(
        queued.wait(Some(Duration::ZERO)),
        Some(Err(JobError::Cancelled))
    ));
    while !matches!(
        running.status(),
        JobStatus::Running {
            phase: "MSM A" | "MSM B (G1)" | "MSM B (G2)" | "MSM L",
            ..
        }
    ) {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(running.cancel());
    assert!(matches!(running.wait(WAIT), Some(Err(JobError::Cancelled))));
    assert_eq!(running.status(), JobStatus::Cancelled);
    assert!(!running.cancel(), "a finished job cannot be cancelled");
    while engine.status().running > 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_idle(&engine, host_idle);
    assert_eq!(engine.status().counters.cancelled, 2);
    verify(
        &big,
        &engine.submit(JobSpec::new("big", memory(&big))).unwrap(),
    );
}

/// A service keeps finished handles for their results; they must not keep witnesses alive.
#[test]
fn a_finished_or_cancelled_job_keeps_no_witness_alive() {
    let c = circuit(8, 9);
    let (mems, _) = memories(1, 256 * MIB);
    let engine = Engine::on_cpu(config(1), mems).unwrap();
    engine.load_key("k", key(&c), None).unwrap();
    let own = || {
        let w = &c.witness;
        Arc::new(Witness::from_assignment(w.num_public(), w.assignment().to_vec()).unwrap())
    };
    let (a, b) = (own(), own());
    let (weak_a, weak_b) = (Arc::downgrade(&a), Arc::downgrade(&b));
    let done = engine
        .submit(JobSpec::new("k", WitnessSource::Memory(a)))
        .unwrap();
    let cancelled = engine
        .submit(JobSpec::new("k", WitnessSource::Memory(b)))
        .unwrap();
    assert!(cancelled.cancel());
    verify(&c, &done);
    assert!(weak_a.upgrade().is_none(), "a done job dropped its witness");
    assert!(
        weak_b.upgrade().is_none(),
        "a cancelled job dropped its witness"
    );
}

/// An out-of-memory error from the driver (memory the budget counted on is gone) sends the job
/// back to the queue; one that lasts fails that job alone, naming its phase.
#[test]
fn a_failure_at_every_device_allocation_runs_the_job_again_and_a_lasting_one_fails_it_alone() {
    let c = circuit(8, 7);
    let (mems, fakes) = memories(1, 64 * MIB);
    let engine = Engine::on_cpu(config(1), mems).unwrap();
    engine.load_key("k", key(&c), None).unwrap();
    let host_idle = engine.status().host_in_use;
    let fake = &fakes[0];
    let before = fake.counts().device_alloc_calls;
    verify(&c, &engine.submit(JobSpec::new("k", memory(&c))).unwrap());
    let per_job = fake.counts().device_alloc_calls - before;
    assert!(
        per_job >= 4,
        "a job stages z and a, b, c: {per_job} allocations"
    );
    for k in 1..=per_job {
        let at = fake.counts().device_alloc_calls + k;
        fake.set_faults(Faults {
            fail_device_alloc_at: Some(at),
            ..Faults::default()
        });
        let calls = fake.counts().device_alloc_calls;
        verify(&c, &engine.submit(JobSpec::new("k", memory(&c))).unwrap());
        assert!(
            fake.counts().device_alloc_calls - calls > per_job,
            "allocation {k}: the job ran again"
        );
        fake.set_faults(Faults::default());
        assert_idle(&engine, host_idle);
        assert_eq!(fake.counts().device_allocs, 0, "every device buffer freed");
    }
    let calls = fake.counts().device_alloc_calls;
    fake.set_faults(Faults {
        fail_device_alloc_from: Some(calls + 1),
        ..Faults::default()
    });
    let bad = engine.submit(JobSpec::new("k", memory(&c))).unwrap();
    let err = bad.wait(WAIT).unwrap().unwrap_err();
    assert!(
        matches!(&err, JobError::OutOfDeviceMemory { phase, message } if phase.starts_with("upload") && message.contains("OUT_OF_MEMORY")),
        "{err}"
    );
    let runs = fake.counts().device_alloc_calls - calls;
    assert_eq!(
        runs, 5,
        "one run and four more, each failing at its first allocation"
    );
    fake.set_faults(Faults::default());
    assert_idle(&engine, host_idle);
    assert_eq!(fake.counts().device_allocs, 0, "every device buffer freed");
    verify(&c, &engine.submit(JobSpec::new("k", memory(&c))).unwrap());
    // Pinned memory failing only costs the pinned buffers: the job runs from the heap.
    fake.set_faults(Faults {
        fail_pinned_alloc: true,
        ..Faults::default()
    });
    verify(&c, &engine.submit(JobSpec::new("k", memory(&c))).unwrap());
    // Read by `cargo xtask reliability`.
    println!(
        "reliability: injection engine sites={} injections={}",
        per_job + 2,
        per_job + 2
    );
}

/// Another process takes device memory while jobs run: the budget's limit falls, jobs wait
/// (none fails), and when the memory comes back the limit is back and every job completes.
#[test]
fn memory_taken_by_another_process_makes_jobs_wait_then_all_complete() {
    let c = circuit(8, 12);
    let (zb, eb) = staged_bytes(&c);
    let device = 64 * MIB;
    let fake = Arc::new(FakeBackend::new(device));
    let vram = Vram::new(
        fake.clone(),
        &cuzk_vram::BudgetConfig {
            margin_floor: MIB,
            margin_fraction: 0.0,
            ..Default::default()
        },
        cuzk_vram::Budget::new("host", 256 * MIB),
    )
    .unwrap();
    let total = vram.budget().total();
    let engine = Engine::on_cpu(config(2), vec![vram]).unwrap();
    engine.load_key("k", key(&c), None).unwrap();
    let host_idle = engine.status().host_in_use;
    verify(&c, &engine.submit(JobSpec::new("k", memory(&c))).unwrap());

    // Leave less than one job's staging: jobs must wait for it.
    let leave = (zb.max(eb)) / 2;
    let taken = fake.set_held_by_another_process(device - leave);
    let lowered = wait_for(|| {
        let d = &engine.status().devices[0];
        (d.budget_limit < total).then_some(d.budget_limit)
    });
    assert!(lowered < zb.max(eb), "limit {lowered} leaves no job room");
    let handles: Vec<_> = (0..6)
        .map(|_| engine.submit(JobSpec::new("k", memory(&c))).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        handles.iter().all(|h| h.poll().is_none()),
        "no job finishes, and none fails, while the memory is held"
    );
    assert_eq!(fake.set_held_by_another_process(0), 0);
    wait_for(|| (engine.status().devices[0].budget_limit == total).then_some(()));
    for h in &handles {
        verify(&c, h);
    }
    let st = engine.status();
    assert_eq!((st.counters.failed, st.counters.completed), (0, 7));
    assert_idle(&engine, host_idle);
    // Read by `cargo xtask reliability`.
    println!(
        "reliability: memory-taken jobs={} completed={} failed=0 taken_bytes={taken} limit_bytes={total}->{lowered}->{total}",
        handles.len(),
        handles.len()
    );
}

/// Polls `f` until it gives a value (the engine's memory watch runs every 100 ms).
fn wait_for<T>(f: impl Fn() -> Option<T>) -> T {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(std::time::Instant::now() < deadline, "timed out");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_bad_witness_fails_alone_and_bad_requests_fail_at_submit() {
    let c = circuit(8, 8);
    let (mems, _) = memories(2, 64 * MIB);
    let engine = Engine::on_cpu(config(2), mems).unwrap();
    engine.load_key("k", key(&c), Some(&[0])).unwrap();
    let mut bad = (*c.witness).clone();
    let last = bad.len() - 1;
    bad.set(last, bad.assignment()[last] + Fr::ONE).unwrap();
    let mut handles: Vec<_> = (0..3)
        .map(|_| engine.submit(JobSpec::new("k", memory(&c))).unwrap())
        .collect();
    let bad = engine
        .submit(JobSpec::new("k", WitnessSource::Memory(Arc::new(bad))))
        .unwrap();
    handles.extend((0..3).map(|_| engine.submit(JobSpec::new("k", memory(&c))).unwrap()));
    let err = bad.wait(WAIT).unwrap().unwrap_err();
    assert!(
        matches!(&err, JobError::Witness(m) if m.contains("constraint")),
        "{err}"
    );
    for h in &handles {
        assert_eq!(
            verify(&c, h).device,
            0,
            "the key is loaded on device 0 only"
        );
    }
    assert!(matches!(
        engine.submit(JobSpec::new("nope", memory(&c))),
        Err(JobError::UnknownKey(k)) if k == "nope"
    ));
    assert!(matches!(
        engine.submit(JobSpec::new("k", memory(&c)).on_device(1)),
        Err(JobError::NoDevice(_))
    ));
    let short = Witness::new(c.witness.public_inputs(), &[Fr::ONE]);
    assert!(matches!(
        engine.submit(JobSpec::new("k", WitnessSource::Memory(Arc::new(short)))),
        Err(JobError::Witness(_))
    ));
    assert!(matches!(
        engine.load_key("k", key(&c), None),
        Err(EngineError::KeyExists(_))
    ));
    let other = circuit(9, 9);
    let err = engine
        .load_key(
            "mixed",
            KeySource::Memory {
                pk: other.pk.clone(),
                r1cs: c.r1cs.clone(),
            },
            None,
        )
        .unwrap_err();
    assert!(matches!(err, EngineError::Mismatch { .. }), "{err}");
}

#[test]
fn pinned_jobs_run_on_their_device_and_keys_load_from_files() {
    let c = circuit(8, 10);
    let dir = std::env::temp_dir().join(format!("cuzk-engine-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (pk, r1cs, wit) = (dir.join("k.pk"), dir.join("c.r1cs"), dir.join("w.wit"));
    let write = |p: &std::path::Path, f: &dyn Fn(&mut std::fs::File) -> std::io::Result<()>| {
        f(&mut std::fs::File::create(p).unwrap()).unwrap()
    };
    write(&pk, &|f| cuzk::write_proving_key(f, &c.pk));
    write(&r1cs, &|f| cuzk::write_r1cs(f, &c.r1cs));
    write(&wit, &|f| cuzk::write_witness(f, &c.witness));
    let engine = Engine::on_cpu(
        EngineConfig {
            split: 2,
            ..config(1)
        },
        memories(3, 64 * MIB).0,
    )
    .unwrap();
    engine
        .load_key(
            "k",
            KeySource::Files {
                pk: pk.clone(),
                r1cs: r1cs.clone(),
                checks: PointChecks::Full,
            },
            None,
        )
        .unwrap();
    for d in [2, 0, 1] {
        let h = engine
            .submit(JobSpec::new("k", WitnessSource::File(wit.clone())).on_device(d))
            .unwrap();
        assert_eq!(verify(&c, &h).device, d);
    }
    let missing = engine
        .submit(JobSpec::new(
            "k",
            WitnessSource::File(dir.join("missing.wit")),
        ))
        .unwrap();
    assert!(
        matches!(missing.wait(WAIT), Some(Err(JobError::Witness(m))) if m.contains("missing.wit"))
    );
    std::fs::write(dir.join("bad.pk"), b"not a key").unwrap();
    let err = engine
        .load_key(
            "bad",
            KeySource::Files {
                pk: dir.join("bad.pk"),
                r1cs,
                checks: PointChecks::Full,
            },
            None,
        )
        .unwrap_err();
    assert!(err.to_string().contains("bad.pk"), "{err}");
    engine.unload_key("k").unwrap();
    assert!(matches!(
        engine.unload_key("k"),
        Err(EngineError::UnknownKey(_))
    ));
    assert_idle(&engine, 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Six jobs of `c` whose witness is a file, on `workers` workers under the host budget
/// `host(key bytes)`, each verified: how many witnesses the workers read themselves.
fn prove_from_files(c: &Circuit, workers: usize, host: impl Fn(u64) -> u64) -> usize {
    let dir =
        std::env::temp_dir().join(format!("cuzk-read-ahead-{}-{workers}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let wit = dir.join("w.wit");
    cuzk::write_witness(&mut std::fs::File::create(&wit).unwrap(), &c.witness).unwrap();
    let probe = Engine::on_cpu(config(1), memories(1, 64 * MIB).0).unwrap();
    probe.load_key("k", key(c), None).unwrap();
    let key_bytes = probe.status().host_in_use;
    drop(probe);
    let engine = Engine::on_cpu(
        EngineConfig {
            host_memory: Some(host(key_bytes)),
            ..config(workers)
        },
        memories(1, 64 * MIB).0,
    )
    .unwrap();
    engine.load_key("k", key(c), None).unwrap();
    let handles: Vec<_> = (0..6)
        .map(|_| {
            engine
                .submit(JobSpec::new("k", WitnessSource::File(wit.clone())))
                .unwrap()
        })
        .collect();
    let by_worker = handles
        .iter()
        .filter(|h| {
            let out = verify(c, h);
            out.timings.spans.iter().any(|s| s.phase == "read witness")
        })
        .count();
    assert_idle(&engine, key_bytes);
    std::fs::remove_dir_all(&dir).unwrap();
    by_worker
}

#[test]
fn witness_files_are_read_ahead_only_while_host_memory_leaves_room_for_a_job() {
    let c = circuit(12, 13);
    let (zb, eb) = staged_bytes(&c);
    // Ample host memory: while the worker proves, the queued jobs' files are read ahead.
    let by_worker = prove_from_files(&c, 1, |_| 4 << 30);
    assert!(
        by_worker <= 2,
        "{by_worker} of 6 witnesses read by the worker"
    );
    // Room for one job only: a read-ahead would leave none, so the workers read every file
    // themselves, and nothing waits forever.
    let by_worker = prove_from_files(&c, 2, |key| key + zb + eb + KIB);
    assert_eq!(by_worker, 6);
    // Room for a job and one read-ahead beside it: all complete, whoever reads.
    prove_from_files(&c, 2, |key| key + 2 * zb + eb + KIB);
}

#[test]
fn a_small_host_budget_makes_jobs_wait_not_fail() {
    let c = circuit(8, 11);
    let (zb, eb) = staged_bytes(&c);
    let (mems, _) = memories(1, 64 * MIB);
    // Room for the key and one job's host buffers, with eight jobs queued.
    let probe = Engine::on_cpu(config(1), memories(1, 64 * MIB).0).unwrap();
    probe.load_key("k", key(&c), None).unwrap();
    let key_bytes = probe.status().host_in_use;
    drop(probe);
    // A byte less than the key and one job: the key is refused, not loaded to starve its jobs.
    let tight = Engine::on_cpu(
        EngineConfig {
            host_memory: Some(key_bytes + zb + eb - 1),
            ..config(1)
        },
        memories(1, 64 * MIB).0,
    )
    .unwrap();
    let refused = tight.load_key("k", key(&c), None).unwrap_err();
    assert!(
        matches!(refused, EngineError::Host(_)) && refused.to_string().contains("one proof"),
        "{refused}"
    );
    assert_eq!(tight.status().host_in_use, 0);
    drop(tight);
    let engine = Engine::on_cpu(
        EngineConfig {
            host_memory: Some(key_bytes + zb + eb + KIB),
            ..config(4)
        },
        mems,
    )
    .unwrap();
    engine.load_key("k", key(&c), None).unwrap();
    let handles: Vec<_> = (0..8)
        .map(|_| engine.submit(JobSpec::new("k", memory(&c))).unwrap())
        .collect();
    for h in &handles {
        verify(&c, h);
    }
    let waited = handles
        .iter()
        .filter(|h| h.poll().unwrap().unwrap().timings.memory_wait > Duration::ZERO)
        .count();
    assert!(waited > 0);
    assert_idle(&engine, key_bytes);
    // Read by `cargo xtask reliability`.
    let n = handles.len();
    println!(
        "reliability: host-memory jobs={n} completed={n} waited={waited} job_budget_bytes={} queued_need_bytes={}",
        zb + eb + KIB,
        n as u64 * (zb + eb)
    );
}

#[test]
fn shutdown_drains_then_cancels_and_refuses_new_work() {
    let big = circuit(14, 12);
    let (mems, _) = memories(1, 256 * MIB);
    let engine = Engine::on_cpu(config(1), mems).unwrap();
    engine.load_key("big", key(&big), None).unwrap();
    let handles: Vec<_> = (0..3)
        .map(|_| engine.submit(JobSpec::new("big", memory(&big))).unwrap())
        .collect();
    while handles[0].status() == JobStatus::Queued {
        std::thread::sleep(Duration::from_millis(1));
    }
    engine.shutdown(Duration::ZERO);
    for h in &handles {
        let r = h.wait(Some(Duration::ZERO)).expect("finished by shutdown");
        assert!(
            matches!(r, Err(JobError::Cancelled | JobError::Shutdown)),
            "{r:?}"
        );
    }
}

#[test]
fn a_computed_witness_is_made_by_the_worker_in_priority_order_and_its_error_fails_that_job_alone() {
    use std::sync::Mutex;
    let big = circuit(12, 7);
    let c = circuit(8, 8);
    let (mems, _) = memories(1, 64 * MIB);
    // No read-ahead: the worker computes every witness itself.
    let no_ahead = EngineConfig {
        read_ahead: 0,
        ..config(1)
    };
    let engine = Engine::on_cpu(no_ahead, mems).unwrap();
    engine.load_key("big", key(&big), None).unwrap();
    engine.load_key("k", key(&c), None).unwrap();
    let blocker = engine.submit(JobSpec::new("big", memory(&big))).unwrap();
    while blocker.status() == JobStatus::Queued {
        std::thread::sleep(Duration::from_millis(1));
    }
    // Each function records when it ran: the order says whether the worker computed them.
    let calls = Arc::new(Mutex::new(Vec::new()));
    let compute = |name: &'static str, ok: bool| {
        let (calls, w) = (calls.clone(), c.witness.clone());
        WitnessSource::Compute(Arc::new(move |_| {
            calls.lock().unwrap().push(name);
            // A panic's message goes to stderr; the job's error says it panicked.
            match (ok, name) {
                (true, _) => Ok((*w).clone()),
                (false, "panics") => panic!("{name}: out of bounds"),
                (false, _) => Err(format!("{name}: no witness")),
            }
        }))
    };
    let low = engine
        .submit(JobSpec::new("k", compute("low", true)).priority(Priority::Low))
        .unwrap();
    let bad = engine
        .submit(JobSpec::new("k", compute("bad", false)))
        .unwrap();
    let panics = engine
        .submit(JobSpec::new("k", compute("panics", false)))
        .unwrap();
    let cancelled = engine
        .submit(JobSpec::new("k", compute("cancelled", true)))
        .unwrap();
    let high = engine
        .submit(JobSpec::new("k", compute("high", true)).priority(Priority::High))
        .unwrap();
    assert!(
        calls.lock().unwrap().is_empty(),
        "nothing computed at submit"
    );
    assert!(cancelled.cancel());
    verify(&big, &blocker);
    let out = verify(&c, &high);
    assert!(
        out.timings
            .spans
            .iter()
            .any(|s| s.phase == "synthesize" && s.kind == SpanKind::Cpu),
        "synthesis is a CPU phase of the job: {:?}",
        out.timings.spans
    );
    match bad.wait(WAIT).expect("finished") {
        Err(JobError::Witness(m)) => assert!(m.contains("bad: no witness"), "{m}"),
        other => panic!("expected the function's error: {other:?}"),
    }
    match panics.wait(WAIT).expect("finished") {
        Err(JobError::Witness(m)) => {
            assert!(m.contains("panicked: panics: out of bounds"), "{m}")
        }
        other => panic!("expected the panic as the job's error: {other:?}"),
    }
    // The one worker survived the panic: the low job after it ran.
    verify(&c, &low);
    assert_eq!(
        cancelled.wait(WAIT).unwrap().unwrap_err(),
        JobError::Cancelled
    );
    assert_eq!(*calls.lock().unwrap(), ["high", "bad", "panics", "low"]);
}

/// With host room for one witness made ahead beside the running job (not two), a read-ahead
/// refused room waits for it: later jobs are still made ahead, not left to their worker.
#[test]
fn a_read_ahead_without_room_waits_for_it() {
    let c = circuit(10, 12);
    let (zb, eb) = staged_bytes(&c);
    let key_bytes = {
        let (mems, _) = memories(1, 64 * MIB);
        let probe = Engine::on_cpu(config(1), mems).unwrap();
        probe.load_key("k", key(&c), None).unwrap();
        probe.status().host_in_use
    };
    let (mems, _) = memories(1, 64 * MIB);
    let tight = EngineConfig {
        read_ahead: 2,
        // The key, a running job's witness, and a read-ahead with a whole job's room beside it.
        host_memory: Some(key_bytes + 3 * zb + eb + zb / 2),
        ..config(1)
    };
    let engine = Engine::on_cpu(tight, mems).unwrap();
    engine.load_key("k", key(&c), None).unwrap();
    let compute = || {
        let w = c.witness.clone();
        WitnessSource::Compute(Arc::new(move |_| {
            std::thread::sleep(Duration::from_millis(100));
            Ok((*w).clone())
        }))
    };
    let jobs: Vec<_> = (0..6)
        .map(|_| engine.submit(JobSpec::new("k", compute())).unwrap())
        .collect();
    for h in &jobs {
        verify(&c, h);
    }
    let ahead = engine
        .timeline()
        .iter()
        .filter(|s| s.phase == "synthesize ahead")
        .count();
    assert!(ahead >= 4, "{ahead} of 6 witnesses made ahead");
    assert_idle(&engine, key_bytes);
}

/// One worker and one read-ahead thread on the CPU, with `c`'s key loaded as "k".
fn one_read_ahead(c: &Circuit) -> Engine {
    let (mems, _) = memories(1, 64 * MIB);
    let ahead = EngineConfig {
        read_ahead: 1,
        ..config(1)
    };
    let engine = Engine::on_cpu(ahead, mems).unwrap();
    engine.load_key("k", key(c), None).unwrap();
    engine
}

#[test]
fn computed_witnesses_are_made_ahead_while_the_worker_proves_and_each_function_runs_once() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let c = circuit(10, 9);
    let engine = one_read_ahead(&c);
    let calls = Arc::new(AtomicUsize::new(0));
    let compute = |ok: bool| {
        let (calls, w) = (calls.clone(), c.witness.clone());
        WitnessSource::Compute(Arc::new(move |_| {
            calls.fetch_add(1, Ordering::SeqCst);
            // A synthesis that takes a while: long enough to overlap another job's proof.
            std::thread::sleep(Duration::from_millis(150));
            if ok {
                Ok((*w).clone())
            } else {
                Err("no witness".into())
            }
        }))
    };
    let jobs: Vec<_> = (0..4)
        .map(|_| engine.submit(JobSpec::new("k", compute(true))).unwrap())
        .collect();
    let bad = engine.submit(JobSpec::new("k", compute(false))).unwrap();
    for h in &jobs {
        verify(&c, h);
    }
    match bad.wait(WAIT).expect("finished") {
        Err(JobError::Witness(m)) => assert!(m.contains("no witness"), "{m}"),
        other => panic!("expected the function's error: {other:?}"),
    }
    // Made ahead or by the worker, every function ran once: a failure made ahead is not
    // computed again.
    assert_eq!(calls.load(Ordering::SeqCst), 5);
    let spans = engine.timeline();
    let ahead: Vec<_> = spans
        .iter()
        .filter(|s| s.phase == "synthesize ahead")
        .collect();
    assert!(!ahead.is_empty(), "nothing computed ahead: {spans:?}");
    assert!(
        ahead
            .iter()
            .all(|s| s.worker == cuzk_scheduler::READ_AHEAD_LANE)
    );
    // Some witness was computed while the worker worked on another job.
    let overlaps = ahead.iter().any(|a| {
        spans.iter().any(|s| {
            s.job != a.job
                && s.worker < cuzk_scheduler::READ_AHEAD_LANE
                && s.kind != SpanKind::Wait
                && s.start < a.end
                && a.start < s.end
        })
    });
    assert!(overlaps, "no synthesis ahead beside the worker: {spans:?}");
}

#[test]
fn a_finished_witness_is_the_storage_of_the_next_one_of_its_key() {
    use std::sync::Mutex;
    let c = circuit(10, 13);
    let engine = one_read_ahead(&c);
    let key_bytes = engine.status().host_in_use;
    // The storage of every witness made, and of each passed on: whether an earlier one made it.
    let made = Arc::new(Mutex::new(Vec::new()));
    let passed = Arc::new(Mutex::new(Vec::new()));
    let compute = || {
        let (made, passed, w) = (made.clone(), passed.clone(), c.witness.clone());
        WitnessSource::Compute(Arc::new(move |storage: Option<WitnessBuffer>| {
            // Slower than a proof: the worker ends jobs while the read-ahead computes.
            std::thread::sleep(Duration::from_millis(300));
            let mut z = match storage {
                Some(s) => {
                    let z = s.into_stale(w.len()).ok_or("storage of another length")?;
                    let earlier = made.lock().unwrap().contains(&z.as_ptr().addr());
                    passed.lock().unwrap().push(earlier);
                    z
                }
                None => vec![Fr::ZERO; w.len()],
            };
            z.copy_from_slice(w.assignment());
            made.lock().unwrap().push(z.as_ptr().addr());
            Witness::from_assignment(w.num_public(), z).map_err(|e| e.to_string())
        }))
    };
    let jobs: Vec<_> = (0..6)
        .map(|_| engine.submit(JobSpec::new("k", compute())).unwrap())
        .collect();
    for h in &jobs {
        verify(&c, h);
    }
    let passed = passed.lock().unwrap();
    assert!(!passed.is_empty(), "no storage passed on");
    assert!(passed.iter().all(|&earlier| earlier), "{passed:?}");
    // The bytes passed on with it went back with the last job.
    assert_idle(&engine, key_bytes);
}

#[test]
fn the_next_jobs_evaluations_are_made_ahead_once_and_a_cancelled_jobs_come_back() {
    let big = circuit(14, 21);
    let c = circuit(12, 22);
    let (mems, _) = memories(1, 256 * MIB);
    let host_map = EngineConfig {
        witness_map_on_device: false, // evaluations are made ahead on the host only
        ..config(1)
    };
    let engine = Engine::on_cpu(host_map, mems).unwrap();
    engine.load_key("big", key(&big), None).unwrap();
    engine.load_key("k", key(&c), None).unwrap();
    let key_bytes = engine.status().host_in_use;
    let blocker = engine.submit(JobSpec::new("big", memory(&big))).unwrap();
    while blocker.status() == JobStatus::Queued {
        std::thread::sleep(Duration::from_millis(1));
    }
    let first = engine.submit(JobSpec::new("k", memory(&c))).unwrap();
    // `first` holds its evaluations made ahead while the blocker runs. (The blocker's own may
    // have been made ahead too, before its worker took it.)
    let made = wait_for(|| {
        engine
            .timeline()
            .into_iter()
            .find(|s| s.phase == "witness map ahead" && s.job == first.id())
    });
    assert!(made.worker >= cuzk_scheduler::READ_AHEAD_LANE);
    assert_eq!(first.status(), JobStatus::Queued);
    assert!(first.cancel());
    let jobs: Vec<_> = (0..4)
        .map(|_| engine.submit(JobSpec::new("k", memory(&c))).unwrap())
        .collect();
    verify(&big, &blocker);
    for h in &jobs {
        verify(&c, h);
    }
    assert_eq!(first.wait(WAIT).unwrap().unwrap_err(), JobError::Cancelled);
    let spans = engine.timeline();
    let ahead: Vec<_> = spans
        .iter()
        .filter(|s| s.phase == "witness map ahead")
        .map(|s| s.job)
        .collect();
    assert!(
        ahead.len() > 1,
        "one job's evaluations made ahead: {spans:?}"
    );
    // A job whose evaluations were made ahead is not mapped again by its worker.
    for s in spans.iter().filter(|s| s.phase == "witness map") {
        assert!(!ahead.contains(&s.job), "job {} mapped twice", s.job);
    }
    // Every job's set and host bytes came back, the cancelled one's included.
    assert_idle(&engine, key_bytes);
}

/// A job charges host memory for its witness only: with a pinned a, b, c set (the set is the
/// pinned budget's), and without pinned room, where a, b, c are made in pieces through the
/// backend's staging after the witness MSMs (no host set at all).
#[test]
fn a_job_charges_host_memory_for_its_witness_only() {
    use std::sync::{Mutex, mpsc};
    let c = circuit(8, 14);
    let (zb, _) = staged_bytes(&c);
    let mut charges = Vec::new();
    for pinned in [256 * MIB, 0] {
        let device = 64 * MIB;
        let vram = Vram::with_budgets(
            Arc::new(FakeBackend::new(device)),
            Budget::new("device", device),
            Budget::new("host", pinned),
        );
        let no_ahead = EngineConfig {
            read_ahead: 0,
            witness_map_on_device: false, // the host's witness map, into a pinned set or not
            ..config(1)
        };
        let engine = Engine::on_cpu(no_ahead, vec![vram]).unwrap();
        engine.load_key("k", key(&c), None).unwrap();
        let key_bytes = engine.status().host_in_use;
        // The witness function waits while the charge is read.
        let (started, started_rx) = mpsc::channel();
        let (go, go_rx) = mpsc::channel::<()>();
        let (go_rx, w) = (Mutex::new(go_rx), c.witness.clone());
        let job = engine
            .submit(JobSpec::new(
                "k",
                WitnessSource::Compute(Arc::new(move |_| {
                    started.send(()).ok();
                    go_rx.lock().unwrap().recv().ok();
                    Ok((*w).clone())
                })),
            ))
            .unwrap();
        started_rx.recv_timeout(Duration::from_secs(300)).unwrap();
        charges.push(engine.status().host_in_use - key_bytes);
        go.send(()).unwrap();
        let out = verify(&c, &job);
        assert_idle(&engine, key_bytes);
        let span = |p: &str| out.timings.spans.iter().find(|s| s.phase == p).cloned();
        let map = span("witness map").expect("a witness map span");
        let msms_end = ["MSM A", "MSM B (G1)", "MSM B (G2)", "MSM L"]
            .iter()
            .filter_map(|p| span(p).map(|s| s.end))
            .fold(0.0, f64::max);
        if pinned == 0 {
            assert!(
                map.start >= msms_end,
                "a, b, c made in pieces after the witness MSMs"
            );
            fails_naming_the_broken_row(&engine, &c, 9);
            assert_idle(&engine, key_bytes);
        }
    }
    // The staged witness rounds up a little.
    assert!(
        charges.iter().all(|c| (zb..zb + 1024).contains(c)),
        "charged {charges:?}, witness {zb} B"
    );
}

#[test]
fn a_device_with_room_holds_the_circuit_and_makes_a_b_c_itself() {
    let c = circuit(10, 31);
    let (zb, eb) = staged_bytes(&c);
    let phases = |out: &cuzk_scheduler::JobOutput| -> Vec<&'static str> {
        out.timings.spans.iter().map(|s| s.phase).collect()
    };
    // Room for the circuit beside two proofs' witness and a, b, c: the device holds it.
    let (mems, _) = memories(1, 64 * MIB);
    let engine = Engine::on_cpu(config(2), mems).unwrap();
    engine.load_key("k", key(&c), None).unwrap();
    let held = engine.status().devices[0].keys[0].1;
    assert!(held > 0, "the circuit is charged to the device");
    let host_idle = engine.status().host_in_use;
    let jobs: Vec<_> = (0..3)
        .map(|_| engine.submit(JobSpec::new("k", memory(&c))).unwrap())
        .collect();
    for h in &jobs {
        let p = phases(&verify(&c, h));
        assert!(p.contains(&"witness map (device)"), "{p:?}");
        assert!(
            !p.contains(&"witness map") && !p.contains(&"upload a,b,c"),
            "{p:?}"
        );
    }
    assert_idle(&engine, host_idle);
    fails_naming_the_broken_row(&engine, &c, 5);
    assert_idle(&engine, host_idle);
    drop(engine);

    // Room for one proof's witness and a, b, c but not for the circuit beside them: the host
    // evaluates.
    let (mems, _) = memories(1, zb + eb);
    let engine = Engine::on_cpu(config(1), mems).unwrap();
    engine.load_key("k", key(&c), None).unwrap();
    assert_eq!(engine.status().devices[0].keys[0].1, 0);
    let p = phases(&verify(
        &c,
        &engine.submit(JobSpec::new("k", memory(&c))).unwrap(),
    ));
    let host_map = p.iter().any(|s| s.starts_with("witness map"));
    assert!(host_map && p.contains(&"upload a,b,c"), "{p:?}");
}
