//! The reliability suite's failure at every site (RELIABILITY.md), for one whole GPU proof: a
//! counting run finds how many driver calls of each kind (device and pinned allocation, host
//! registration, stream and event creation, kernel launch, copy) a proof makes, from a fresh
//! backend to the proof; then for every kind and every k the k-th call fails. Each failure
//! must fail that proof with an error naming its phase (or be absorbed by a fallback, the
//! proof still verifying), leave the device and pinned budgets exactly where they started, and
//! the next proof must succeed and verify. Needs an NVIDIA GPU
//! and panics without one; CPU CI reports it as ignored. `CUZK_SITES_LOG=K` picks the size.

use std::sync::mpsc;
use std::time::Duration;

use cuzk_gpu::Gpu;
use cuzk_groth16::gpu::GpuPhaseError;
use cuzk_groth16::testing::demo::Fixture;
use cuzk_groth16::{GpuBackend, ProveError, prepare_verifying_key, verify_proof};
use cuzk_vram::inject::{INJECTED, Injection, Site};

/// One proof from a fresh backend, on its own thread: a failure that hangs the prover fails
/// the test instead of the device session.
fn prove(gpu: &Gpu, f: &std::sync::Arc<Fixture>, seed: u64) -> Result<(), ProveError> {
    let (tx, rx) = mpsc::channel();
    let (gpu, f2) = (gpu.clone(), f.clone());
    std::thread::spawn(move || {
        let b = GpuBackend::new(gpu);
        let r = f2.prove(&b, seed).map(|(p, _)| p);
        drop(b);
        let _ = tx.send(r);
    });
    let proof = rx
        .recv_timeout(Duration::from_secs(120))
        .expect("the proof ends (it did not hang)")?;
    verify_proof(
        &prepare_verifying_key(&f.pk.vk),
        &proof,
        f.witness.public_inputs(),
    )
    .expect("the proof verifies");
    Ok(())
}

fn levels(gpu: &Gpu) -> (u64, u64) {
    let vram = gpu.vram();
    vram.budget().reclaim_all();
    (vram.budget().in_use(), vram.host_budget().in_use())
}

#[test]
#[ignore = "gpu"]
fn gpu_a_failure_at_every_driver_call_of_a_proof_fails_it_alone() {
    let gpu = Gpu::first().expect("gpu_* tests need an NVIDIA GPU");
    let log = std::env::var("CUZK_SITES_LOG")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(16);
    let f = std::sync::Arc::new(Fixture::new(log, 70, 7, None));
    // Warm the process-wide caches (modules, NTT tables) so every counted proof is alike.
    prove(&gpu, &f, 1).expect("a warm-up proof");
    let start = levels(&gpu);
    let counts: Vec<(Site, u64)> = {
        let inj = Injection::start(None);
        prove(&gpu, &f, 2).expect("the counting proof");
        Site::ALL.map(|s| (s, inj.calls(s))).to_vec()
    };
    println!("2^{log}: driver calls of one proof: {counts:?}");
    let mut injections = 0u64;
    let mut absorbed = 0u64;
    let mut by_phase = std::collections::BTreeMap::<String, u64>::new();
    for &(site, n) in &counts {
        for k in 1..=n {
            let inj = Injection::start(Some((site, k)));
            let r = prove(&gpu, &f, 3);
            let fired = inj.fired();
            drop(inj);
            let e = match r {
                Err(e) => e,
                // Not reached this time (a call that only some runs make), or absorbed by a
                // fallback (e.g. key points streamed when they cannot be resident): either way
                // the proof verified; the budgets must still be back.
                Ok(()) => {
                    if fired {
                        absorbed += 1;
                        assert_eq!(
                            levels(&gpu),
                            start,
                            "{site} #{k} (absorbed): the budgets are back"
                        );
                    }
                    continue;
                }
            };
            let phase = match &e {
                ProveError::Backend(b) => b
                    .source
                    .downcast_ref::<GpuPhaseError>()
                    .map(|p| p.phase.to_string()),
                _ => None,
            }
            .unwrap_or_else(|| panic!("{site} #{k}: the error names no phase: {e}"));
            assert!(
                format!("{e:?}").contains(INJECTED),
                "{site} #{k}: the error is the injected one: {e:?}"
            );
            *by_phase.entry(format!("{site} in {phase}")).or_default() += 1;
            assert_eq!(levels(&gpu), start, "{site} #{k}: the budgets are back");
            prove(&gpu, &f, 4).unwrap_or_else(|e| panic!("after {site} #{k}: {e}"));
            injections += 1;
        }
    }
    for (what, n) in &by_phase {
        println!("  {what}: {n}");
    }
    println!(
        "2^{log}: {} sites, {injections} injections failed their proof alone and {absorbed} were absorbed by a fallback, the budgets back each time",
        counts.iter().filter(|(_, n)| *n > 0).count()
    );
    println!(
        "reliability: injection gpu-proof log={log} sites={} injections={injections} absorbed={absorbed}",
        counts.iter().filter(|(_, n)| *n > 0).count()
    );
    assert!(injections > 0);
}
