//! The reliability suite's failure at every site (RELIABILITY.md), for one whole engine job on
//! the GPU (what a daemon job runs): a counting job finds how many driver calls of each kind a
//! job makes with its key loaded; then for every kind and every k the k-th call fails. Each
//! failure must fail that job alone with an error naming its phase, the device budget, staging
//! and pinned use must return to their idle level, and the next job must succeed and verify.
//! Needs an NVIDIA GPU and panics without one. `CUZK_SITES_LOG=K` picks the size.

use std::sync::Arc;
use std::time::Duration;

use cuzk_groth16::testing::demo;
use cuzk_groth16::{ToxicWaste, generate_parameters_with_toxic_waste};
use cuzk_scheduler::{Engine, EngineConfig, JobError, JobSpec, KeySource, WitnessSource, Workers};
use cuzk_vram::inject::{INJECTED, Injection, Site};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

#[test]
#[ignore = "gpu"]
fn gpu_a_failure_at_every_driver_call_of_a_job_fails_it_alone() {
    let log = std::env::var("CUZK_SITES_LOG")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(16);
    let engine = Engine::new(EngineConfig {
        backend: cuzk_groth16::BackendChoice::Gpu,
        gpus: Some(vec![0]),
        workers_per_device: Workers::Fixed(1),
        ..EngineConfig::default()
    })
    .expect("gpu_* tests need an NVIDIA GPU");
    let mut rng = ChaCha20Rng::seed_from_u64(5);
    let (r1cs, witness) = demo::circuit_with(log, 4, 75, &mut rng).unwrap();
    let (pk, _) =
        generate_parameters_with_toxic_waste(&r1cs, &ToxicWaste::random(&mut rng)).unwrap();
    let pvk = cuzk_groth16::prepare_verifying_key(&pk.vk);
    let (pk, r1cs, witness) = (Arc::new(pk), Arc::new(r1cs), Arc::new(witness));
    engine
        .load_key("k", KeySource::Memory { pk, r1cs }, None)
        .expect("key loads");
    let run = || {
        let h = engine
            .submit(JobSpec::new("k", WitnessSource::Memory(witness.clone())))
            .expect("submit");
        h.wait(Some(Duration::from_secs(120)))
            .expect("the job ends (it did not hang)")
    };
    let good = |what: &str| {
        let o = run().unwrap_or_else(|e| panic!("{what}: {e}"));
        cuzk_groth16::verify_proof(&pvk, &o.proof, &o.public_inputs).expect("the proof verifies");
    };
    let idle = || {
        let st = engine.status();
        let d = &st.devices[0];
        (
            // Held by jobs and keys; the idle caches of a failed job's contexts may go.
            d.budget_in_use - d.budget_cached,
            d.staging_in_use,
            d.pinned_in_use,
            st.host_in_use,
        )
    };
    good("warm-up");
    let start = idle();
    let counts: Vec<(Site, u64)> = {
        let inj = Injection::start(None);
        good("the counting job");
        Site::ALL.map(|s| (s, inj.calls(s))).to_vec()
    };
    println!("2^{log}: driver calls of one job: {counts:?}");
    let mut injections = 0u64;
    let mut absorbed = 0u64;
    let mut by_phase = std::collections::BTreeMap::<String, u64>::new();
    for &(site, n) in &counts {
        for k in 1..=n {
            let inj = Injection::start(Some((site, k)));
            let r = run();
            let fired = inj.fired();
            drop(inj);
            match r {
                Err(JobError::Failed { phase, message }) => {
                    assert!(
                        message.contains(INJECTED),
                        "{site} #{k}: the error is the injected one: {message}"
                    );
                    *by_phase.entry(format!("{site} in {phase}")).or_default() += 1;
                }
                Err(e) => panic!("{site} #{k}: not a phase failure: {e:?}"),
                // Not reached, or absorbed by a fallback: the job's proof verified (self-check).
                Ok(_) => {
                    absorbed += u64::from(fired);
                    continue;
                }
            }
            let (budget, staging, pinned, host) = idle();
            // The pinned a/b/c pool may drop the failed job's set: never more than at the start.
            assert_eq!(
                (budget, staging, host),
                (start.0, start.1, start.3),
                "{site} #{k}: memory back at idle"
            );
            assert!(
                pinned <= start.2,
                "{site} #{k}: pinned {pinned} above idle {}",
                start.2
            );
            good(&format!("the job after {site} #{k}"));
            injections += 1;
        }
    }
    for (what, n) in &by_phase {
        println!("  {what}: {n}");
    }
    let st = engine.status();
    println!(
        "2^{log}: {} sites, {injections} injections failed their job alone, {absorbed} absorbed; engine counted {} failed, {} completed",
        counts.iter().filter(|(_, n)| *n > 0).count(),
        st.counters.failed,
        st.counters.completed
    );
    println!(
        "reliability: injection gpu-engine-job log={log} sites={} injections={injections} absorbed={absorbed}",
        counts.iter().filter(|(_, n)| *n > 0).count()
    );
    assert!(injections > 0);
    assert_eq!(st.counters.failed, injections);
}
