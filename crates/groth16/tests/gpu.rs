//! GPU prover tests: GPU proof == CPU proof for the same r, s, proofs verify, memory plan,
//! injected allocation failures (the end-to-end bench is `benches/benches/gpu_prove.rs`).
//! Every test needs an NVIDIA GPU and panics without one; CPU CI reports them as ignored.
//! Tests hold one lock: they measure and squeeze the device budget, shared by the process.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use cuzk_field::Fr;
use cuzk_gpu::Gpu;
use cuzk_groth16::gpu::{GpuPhaseError, Phase};
use cuzk_groth16::testing::demo;
use cuzk_groth16::testing::demo::Fixture;
use cuzk_groth16::{
    BackendChoice, BackendErrorKind, GpuBackend, HeldCircuit, KeyRef, Proof, ProofTimings,
    ProveError, ProverBackend, Query, ToxicWaste, create_proof_with_randomness,
    generate_parameters_with_toxic_waste, prepare_verifying_key, select_backend, verify_proof,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

const GIB: u64 = 1 << 30;

fn gpu() -> Gpu {
    Gpu::first().expect("gpu_* tests need an NVIDIA GPU")
}

fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

fn rs(seed: u64) -> (Fr, Fr) {
    Fixture::randomness(seed)
}

/// A demo circuit and its key; the key on the GPU when `gpu_setup`.
fn fixture(log: u32, boolean_percent: u32, seed: u64, gpu_setup: bool) -> Fixture {
    Fixture::new(log, boolean_percent, seed, gpu_setup.then(gpu).as_ref())
}

/// The 2^24 realistic fixture.
fn fixture_24() -> Fixture {
    fixture(24, 70, 24, true)
}

/// A random demo circuit of 2^log rows and its key from the CPU setup.
fn random_fixture(log: u32, public: usize, pct: u32, seed: u64) -> Fixture {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let (r1cs, witness) = demo::circuit_with(log, public, pct, &mut rng).unwrap();
    with_cpu_key(r1cs, witness, &mut rng)
}

/// A random demo circuit of about `rows` rows (not a power of two) and its key from the CPU
/// setup.
fn rows_fixture(rows: usize, public: usize, pct: u32, seed: u64) -> Fixture {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let (r1cs, witness) =
        demo::circuit_with_rows(rows.max(2 * public + 4), public, pct, &mut rng).unwrap();
    with_cpu_key(r1cs, witness, &mut rng)
}

/// A circuit and its witness with a key from the CPU setup, its toxic waste drawn from `rng`.
fn with_cpu_key(
    r1cs: cuzk_groth16::R1cs,
    witness: cuzk_groth16::Witness,
    rng: &mut ChaCha20Rng,
) -> Fixture {
    let (pk, _) = generate_parameters_with_toxic_waste(&r1cs, &ToxicWaste::random(rng)).unwrap();
    Fixture {
        r1cs,
        witness,
        pk,
        setup: Duration::ZERO,
        setup_on: "cpu",
    }
}

/// The witness of `f` with one value (chosen by `seed`) changed, and the first row that
/// breaks as the CPU's witness map finds it (`None`: no row reading the value breaks).
fn broken_witness(f: &Fixture, seed: u64) -> (Vec<Fr>, Option<usize>) {
    let mut z = f.witness.assignment().to_vec();
    let i = (seed as usize % (z.len() - 1)) + 1;
    z[i] += Fr::ONE;
    let mut abc = cuzk_groth16::Evaluations::pinned_or_heap(None, f.r1cs.domain_size());
    match cuzk_groth16::witness_map(&f.r1cs, &z, &mut abc) {
        Err(cuzk_groth16::WitnessError::Unsatisfied { constraint }) => (z, Some(constraint)),
        Ok(()) => (z, None),
        Err(e) => panic!("{e}"),
    }
}

/// A backend's a, b, c of a broken witness: refused naming the CPU's row, or made when the
/// CPU found none.
fn names_the_cpus_row<T>(
    made: Result<T, cuzk_groth16::BackendError>,
    want: Option<usize>,
) -> Result<(), TestCaseError> {
    match (made, want) {
        (Ok(_), None) => {}
        (Err(e), Some(row)) => {
            prop_assert_eq!(e.kind(), BackendErrorKind::Unsatisfied);
            prop_assert!(
                e.to_string().contains(&format!("constraint {row} is")),
                "{}",
                e
            );
        }
        (r, want) => prop_assert!(false, "backend {:?}, CPU {:?}", r.err(), want),
    }
    Ok(())
}

fn prove(
    b: &dyn ProverBackend,
    f: &Fixture,
    seed: u64,
) -> Result<(Proof, ProofTimings), ProveError> {
    f.prove(b, seed)
}

fn verifies(f: &Fixture, p: &Proof) {
    verify_proof(
        &prepare_verifying_key(&f.pk.vk),
        p,
        f.witness.public_inputs(),
    )
    .expect("the GPU proof verifies");
}

/// GPU proof == CPU proof for the same r, s, and it verifies.
fn check_against_cpu(b: &GpuBackend, f: &Fixture, seed: u64) {
    let (gpu_proof, _) = prove(b, f, seed).expect("GPU proof");
    let (r, s) = rs(seed);
    let cpu_proof = create_proof_with_randomness(&f.pk, &f.r1cs, &f.witness, r, s).unwrap();
    assert_eq!(gpu_proof, cpu_proof, "GPU proof differs from the CPU proof");
    verifies(f, &gpu_proof);
}

fn phase_of(e: &ProveError) -> Option<Phase> {
    match e {
        ProveError::Backend(b) => b.source.downcast_ref::<GpuPhaseError>().map(|p| p.phase),
        _ => None,
    }
}

#[test]
#[ignore = "gpu"]
fn gpu_backend_selection_picks_the_gpu() {
    let _l = serial();
    let _ = gpu();
    for choice in [BackendChoice::Auto, BackendChoice::Gpu] {
        let b = select_backend(choice).expect("GPU backend");
        assert_eq!(b.name(), "gpu", "{choice:?}");
        assert!(b.describe().contains(&gpu().info().name));
    }
    assert_eq!(select_backend(BackendChoice::Cpu).unwrap().name(), "cpu");
}

#[test]
#[ignore = "gpu"]
fn gpu_proofs_match_cpu_on_random_small_circuits() {
    let _l = serial();
    let b = GpuBackend::new(gpu());
    let mut runner = TestRunner::new(Config {
        cases: 8,
        ..Config::default()
    });
    runner
        .run(
            &(4u32..=14, 0usize..6, 0u32..=100, any::<u64>()),
            |(log, public, pct, seed)| {
                let f = random_fixture(log, public, pct, seed);
                let (r, s) = rs(seed);
                let (gpu_proof, _) = prove(&b, &f, seed).expect("GPU proof");
                let cpu_proof =
                    create_proof_with_randomness(&f.pk, &f.r1cs, &f.witness, r, s).unwrap();
                prop_assert_eq!(gpu_proof, cpu_proof, "2^{} {} public {}%", log, public, pct);
                prop_assert!(
                    verify_proof(
                        &prepare_verifying_key(&f.pk.vk),
                        &gpu_proof,
                        f.witness.public_inputs()
                    )
                    .is_ok()
                );
                Ok(())
            },
        )
        .unwrap();
}

/// A proof through the staged steps an engine drives (witness and a, b, c staged into
/// reservations of the device budget, one MSM at a time), with r, s fixed.
fn prove_staged(b: &GpuBackend, f: &Fixture, r: Fr, s: Fr) -> Proof {
    prove_staged_with(b, f, r, s, Map::HostSet)
}

/// Where a staged proof's a, b, c are made.
#[derive(Clone, Copy)]
enum Map<'a> {
    /// The host's witness map into a host set, then copied.
    HostSet,
    /// The host's witness map in pieces staged as they are made ([`ProverBackend::map_and_stage`]).
    InPieces,
    /// The device, from a circuit it holds.
    Device(&'a HeldCircuit),
}

/// The engine's phases by hand, a, b, c made where `map` says.
fn prove_staged_with(b: &GpuBackend, f: &Fixture, r: Fr, s: Fr, map: Map<'_>) -> Proof {
    let domain = cuzk_groth16::check_inputs(&f.pk, &f.r1cs, &f.witness).unwrap();
    let n = domain.size();
    let key = KeyRef::from(&f.pk);
    let needs = b.staging_needs(key, n).unwrap();
    b.load_staged(key, n, needs.witness + needs.evaluations)
        .unwrap();
    let vram = b.gpu().vram();
    let z = f.witness.assignment();
    let (staged, device_abc) = match map {
        Map::Device(c) => {
            let room = vram.reserve(needs.witness + needs.evaluations).unwrap();
            let (staged, abc) = b.stage_and_evaluate(c, z, n, room).unwrap();
            (staged, Some(abc))
        }
        Map::HostSet | Map::InPieces => (
            b.stage_witness(z, vram.reserve(needs.witness).unwrap())
                .unwrap(),
            None,
        ),
    };
    let mut msms = cuzk_groth16::WitnessMsms::default();
    for (q, offset) in cuzk_groth16::witness_msm_order(f.r1cs.num_public()) {
        let v = b.witness_msm(key, z, &staged, q, offset).unwrap();
        msms.set(q, v, Duration::ZERO).unwrap();
    }
    drop(staged);
    let room = || vram.reserve(needs.evaluations).unwrap();
    let abc = match (device_abc, map) {
        (Some(abc), _) => abc,
        (None, Map::InPieces) => b.map_and_stage(&f.r1cs, z, n, room()).unwrap(),
        (None, _) => {
            let mut abc = b.evaluation_buffers(n).unwrap();
            cuzk_groth16::witness_map(&f.r1cs, z, &mut abc).unwrap();
            b.stage_evaluations(abc, room()).unwrap()
        }
    };
    let q = b.quotient_msm(&domain, abc, key).unwrap();
    cuzk_groth16::assemble(&f.pk, r, s, &msms, q.h)
}

/// a, b, c made by the host in pieces and staged as they are made: proofs equal the CPU's on
/// random shapes, at 2^20 rows (two pieces) the proof through a host set, and verify; a
/// witness that breaks a row is refused naming the row the CPU names; a domain too small is
/// refused; every byte of the budget comes back.
#[test]
#[ignore = "gpu"]
fn gpu_a_b_c_made_in_pieces_match_the_cpu() {
    let _l = serial();
    let b = GpuBackend::new(gpu());
    let budget = b.gpu().vram().budget().clone();
    // Two pieces; the device's NTT tables made by this first quotient stay for the process.
    let f = fixture(20, 70, 20, true);
    let (r, s) = rs(20);
    let pieces = prove_staged_with(&b, &f, r, s, Map::InPieces);
    assert_eq!(pieces, prove_staged(&b, &f, r, s), "2^20 rows in pieces");
    verifies(&f, &pieces);
    b.release();
    budget.reclaim_all();
    let idle = budget.in_use();
    let mut runner = TestRunner::new(Config {
        cases: 6,
        ..Config::default()
    });
    runner
        .run(
            &(40usize..40_000, 0usize..6, 0u32..=100, any::<u64>()),
            |(rows, public, pct, seed)| {
                let f = rows_fixture(rows, public, pct, seed);
                let (r, s) = rs(seed);
                let cpu = create_proof_with_randomness(&f.pk, &f.r1cs, &f.witness, r, s).unwrap();
                let pieces = prove_staged_with(&b, &f, r, s, Map::InPieces);
                prop_assert_eq!(pieces, cpu, "{} rows {} public {}%", rows, public, pct);

                let (z, want) = broken_witness(&f, seed);
                let n = f.r1cs.domain_size();
                let needs = b.staging_needs(KeyRef::from(&f.pk), n).unwrap();
                let room = || b.gpu().vram().reserve(needs.evaluations).unwrap();
                names_the_cpus_row(b.map_and_stage(&f.r1cs, &z, n, room()), want)?;
                let small = b.map_and_stage(&f.r1cs, &z, f.r1cs.num_constraints() - 1, room());
                prop_assert_eq!(
                    small.map(|_| ()).unwrap_err().kind(),
                    BackendErrorKind::Invalid
                );
                Ok(())
            },
        )
        .unwrap();
    b.release();
    budget.reclaim_all();
    assert_eq!(budget.in_use(), idle, "every byte of the budget comes back");
}

/// The device's witness map: proofs with a, b, c made from the held circuit equal the CPU's
/// (random shapes: rows not a power of two, any share of bits, full-width), a witness that
/// breaks a row is refused naming the row the CPU names, a circuit that does not fit beside
/// the requested free room is not held, and the held circuit's bytes go back with it.
#[test]
#[ignore = "gpu"]
fn gpu_witness_map_on_the_device_matches_the_cpu() {
    let _l = serial();
    let b = GpuBackend::new(gpu());
    let budget = b.gpu().vram().budget().clone();
    let mut runner = TestRunner::new(Config {
        cases: 8,
        ..Config::default()
    });
    runner
        .run(
            &(40usize..40_000, 0usize..6, 0u32..=100, any::<u64>()),
            |(rows, public, pct, seed)| {
                let f = rows_fixture(rows, public, pct, seed);
                let r1cs = Arc::new(f.r1cs.clone());
                let held = b
                    .hold_circuit(&r1cs, 0)
                    .unwrap()
                    .expect("room for the circuit");
                let (r, s) = rs(seed);
                let cpu = create_proof_with_randomness(&f.pk, &f.r1cs, &f.witness, r, s).unwrap();
                let device = prove_staged_with(&b, &f, r, s, Map::Device(&held));
                prop_assert_eq!(device, cpu, "{} rows {} public {}%", rows, public, pct);

                let (z, want) = broken_witness(&f, seed);
                let n = f.r1cs.domain_size();
                let needs = b.staging_needs(KeyRef::from(&f.pk), n).unwrap();
                let room = b
                    .gpu()
                    .vram()
                    .reserve(needs.witness + needs.evaluations)
                    .unwrap();
                names_the_cpus_row(b.stage_and_evaluate(&held, &z, n, room), want)
            },
        )
        .unwrap();
    b.release();
    budget.reclaim_all();
    let idle = budget.in_use();
    let f = random_fixture(12, 2, 70, 3);
    let r1cs = Arc::new(f.r1cs.clone());
    assert!(
        b.hold_circuit(&r1cs, budget.available()).unwrap().is_none(),
        "no room beside what must stay free: not held"
    );
    let held = b.hold_circuit(&r1cs, 0).unwrap().unwrap();
    assert_eq!(budget.in_use(), idle + held.bytes());
    drop(held);
    assert_eq!(budget.in_use(), idle, "the circuit's bytes go back with it");
}

/// The evaluation sets pinned when a key loads (one per proof in flight) serve the proofs:
/// filling the pool pins exactly the missing sets, later proofs pin nothing more (the proofs
/// equal the CPU's), and sets given back by proofs that stop early stay in the pool.
#[test]
#[ignore = "gpu"]
fn gpu_evaluation_sets_pinned_at_load_serve_every_proof() {
    let _l = serial();
    let b = GpuBackend::new(gpu());
    let pinned = || b.gpu().vram().host_budget().in_use();
    let f = random_fixture(12, 2, 70, 12);
    let n = cuzk_groth16::check_inputs(&f.pk, &f.r1cs, &f.witness)
        .unwrap()
        .size();
    b.set_evaluation_sets(2);
    let (r, s) = rs(1);
    let cpu = create_proof_with_randomness(&f.pk, &f.r1cs, &f.witness, r, s).unwrap();
    // One proof first: it pins one set (kept by the pool) and the witness staging slots.
    assert_eq!(prove_staged(&b, &f, r, s), cpu);
    let one = pinned();
    b.pin_evaluation_sets(n, 2);
    let set = 3 * n as u64 * std::mem::size_of::<Fr>() as u64;
    assert_eq!(
        pinned() - one,
        set,
        "the second set pinned, the first reused"
    );
    let full = pinned();
    for seed in [2, 3] {
        let (r, s) = rs(seed);
        let cpu = create_proof_with_randomness(&f.pk, &f.r1cs, &f.witness, r, s).unwrap();
        assert_eq!(prove_staged(&b, &f, r, s), cpu);
        assert_eq!(pinned(), full, "a proof pins nothing once the pool is full");
    }
    // Two proofs out at once take both sets, and proofs that stop before staging give them
    // back: the second round again finds both in the pool.
    for round in 0..2 {
        let (x, y) = (
            b.evaluation_buffers(n).unwrap(),
            b.evaluation_buffers(n).unwrap(),
        );
        assert_eq!(
            pinned(),
            full,
            "round {round}: both sets come from the pool"
        );
        b.return_evaluations(x);
        b.return_evaluations(y);
    }
}

#[test]
#[ignore = "gpu"]
fn gpu_staged_steps_match_cpu_and_return_the_budget() {
    let _l = serial();
    let b = GpuBackend::new(gpu());
    let budget = b.gpu().vram().budget().clone();
    // Per-device tables made by the first quotient stay for the process: measure after one.
    let warm = fixture(10, 70, 77, false);
    let (r, s) = rs(77);
    prove_staged(&b, &warm, r, s);
    b.release();
    budget.reclaim_all();
    let idle = budget.in_use();
    let mut runner = TestRunner::new(Config {
        cases: 6,
        ..Config::default()
    });
    runner
        .run(
            &(4u32..=16, 0usize..6, 0u32..=100, any::<u64>()),
            |(log, public, pct, seed)| {
                let f = random_fixture(log, public, pct, seed);
                let (r, s) = rs(seed);
                let staged = prove_staged(&b, &f, r, s);
                let cpu = create_proof_with_randomness(&f.pk, &f.r1cs, &f.witness, r, s).unwrap();
                prop_assert_eq!(staged, cpu, "2^{} {} public {}%", log, public, pct);
                Ok(())
            },
        )
        .unwrap();
    b.release();
    budget.reclaim_all();
    assert_eq!(
        budget.in_use(),
        idle,
        "staged buffers and key points all returned"
    );
}

#[test]
#[ignore = "gpu"]
fn gpu_tampered_witness_is_rejected_and_new_keys_are_never_stale() {
    let _l = serial();
    let b = GpuBackend::new(gpu());
    let f = fixture(12, 70, 5, false);
    check_against_cpu(&b, &f, 1);
    // One private value changed: an error, not a proof.
    let mut bad = Fixture {
        r1cs: f.r1cs.clone(),
        witness: f.witness.clone(),
        pk: f.pk.clone(),
        setup: Duration::ZERO,
        setup_on: "cpu",
    };
    let i = bad.witness.num_public() + 3;
    let v = bad.witness.assignment()[i];
    bad.witness.set(i, v + Fr::ONE).unwrap();
    assert!(matches!(prove(&b, &bad, 2), Err(ProveError::Witness(_))));
    // Same circuit, another key of the same size on the same backend: the resident points
    // must be replaced (a stale key would not give the CPU proof).
    let other = Fixture {
        pk: generate_parameters_with_toxic_waste(
            &f.r1cs,
            &ToxicWaste::random(&mut ChaCha20Rng::seed_from_u64(77)),
        )
        .unwrap()
        .0,
        ..bad
    };
    let other = Fixture {
        witness: f.witness.clone(),
        ..other
    };
    check_against_cpu(&b, &other, 3);
    check_against_cpu(&b, &f, 4);
    // The key changed in place (same allocation): handing out its queries mutably made it
    // another key.
    let mut moved = Fixture {
        r1cs: f.r1cs.clone(),
        witness: f.witness.clone(),
        pk: f.pk.clone(),
        setup: Duration::ZERO,
        setup_on: "cpu",
    };
    check_against_cpu(&b, &moved, 5);
    let a = &mut moved.pk.queries_mut().a_query;
    let last = a.len() - 1;
    a.swap(0, last);
    let (gpu_proof, _) = prove(&b, &moved, 6).unwrap();
    let (r, s) = rs(6);
    let cpu = create_proof_with_randomness(&moved.pk, &moved.r1cs, &moved.witness, r, s).unwrap();
    assert_eq!(gpu_proof, cpu, "a key edited in place must be reloaded");
}

#[test]
#[ignore = "gpu"]
fn gpu_proofs_2_20_and_2_22_verify_and_match_cpu() {
    let _l = serial();
    for log in [20u32, 22] {
        let f = fixture(log, 70, log.into(), false);
        let b = GpuBackend::new(gpu());
        check_against_cpu(&b, &f, 10);
        check_against_cpu(&b, &f, 11); // second proof: key resident
        assert!(Query::ALL.iter().all(|&q| b.residency(q) == Some(true)));
        drop(b);
        if log == 22 {
            // A small budget: part of the key streamed from pinned memory, same proof.
            let vram = gpu().vram().clone();
            let room = 2 * GIB;
            let hold = vram
                .reserve(vram.budget().available().saturating_sub(room))
                .unwrap();
            let b = GpuBackend::new(gpu());
            check_against_cpu(&b, &f, 12);
            let plan = b.plan().unwrap();
            assert!(plan.queries.iter().any(|q| !q.resident), "{plan:?}");
            assert!(Query::ALL.iter().any(|&q| b.residency(q) == Some(false)));
            drop(b);
            drop(hold);
        }
    }
}

#[test]
#[ignore = "gpu"]
fn gpu_proof_2_24_under_a_16_gib_budget() {
    let _l = serial();
    let f = &fixture_24();
    let vram = gpu().vram().clone();
    // The NTT tables stay on the device once uploaded: upload them before measuring.
    cuzk_ntt::gpu::device_tables(&gpu()).unwrap();
    vram.budget().reclaim_all(); // caches (e.g. the NTT roots table) may come and go
    let before = vram.budget().in_use();
    // A held reservation of everything above 16 GiB emulates a 16 GiB card.
    let hold = vram
        .reserve(vram.budget().available().saturating_sub(16 * GIB))
        .unwrap();
    assert!(vram.budget().available() <= 16 * GIB);
    let b = GpuBackend::new(gpu());
    for seed in [20, 21] {
        let (p, t) = prove(&b, f, seed).expect("2^24 proof in 16 GiB");
        verifies(f, &p);
        println!("2^24 in 16 GiB: {:.0} ms", t.total.as_secs_f64() * 1e3);
    }
    let plan = b.plan().unwrap();
    assert!(plan.fits(), "{plan:?}");
    drop(b);
    drop(hold);
    vram.budget().reclaim_all();
    assert_eq!(vram.budget().in_use(), before, "budget restored");
}

#[test]
#[ignore = "gpu"]
fn gpu_injected_allocation_failure_in_each_phase_restores_the_budget() {
    let _l = serial();
    let f = fixture(16, 70, 16, false);
    let vram = gpu().vram().clone();
    // Warm up (the NTT tables stay on the device for the life of the process).
    check_against_cpu(&GpuBackend::new(gpu()), &f, 30);
    vram.budget().reclaim_all(); // e.g. an NTT roots table of an earlier, larger proof
    let before = vram.budget().in_use();

    // Witness upload (the first phase that allocates): a fresh backend with almost no room.
    {
        let hold = vram.reserve(vram.budget().available() - (1 << 20)).unwrap();
        let b = GpuBackend::new(gpu());
        let e = prove(&b, &f, 31).expect_err("no room for the witness");
        assert_eq!(phase_of(&e), Some(Phase::Upload), "{e}");
        assert_eq!(
            vram.budget().in_use(),
            before + hold.bytes() + b.resident_bytes()
        );
        drop(b);
        drop(hold);
        assert_eq!(vram.budget().in_use(), before);
    }

    // Each phase: a warm backend (points resident) squeezed to zero free bytes in that phase;
    // afterwards the same backend proves correctly again.
    let b = GpuBackend::new(gpu());
    check_against_cpu(&b, &f, 32);
    let phases = [Phase::Upload, Phase::Quotient]
        .into_iter()
        .chain(Query::ALL.map(Phase::Msm));
    for phase in phases {
        b.inject_squeeze(phase, 0);
        let e = prove(&b, &f, 33).expect_err("no room for the phase");
        assert_eq!(phase_of(&e), Some(phase), "{e}");
        // MSMs that ran beside the failed phase (the quotient overlaps the witness MSMs) may
        // have kept their scratch.
        assert_eq!(
            vram.budget().in_use(),
            before + b.resident_bytes() + b.kept_bytes(),
            "{phase}"
        );
        check_against_cpu(&b, &f, 34);
    }
    // The same for streamed points.
    b.release();
    let hold = vram
        .reserve(vram.budget().available() - (64 << 20))
        .unwrap();
    let small = GpuBackend::new(gpu());
    small.prepare((&f.pk).into(), f.r1cs.domain_size()).unwrap();
    assert_eq!(small.residency(Query::BG2), Some(false));
    small.inject_squeeze(Phase::Msm(Query::BG2), 0);
    let e = prove(&small, &f, 35).expect_err("no room for a streamed MSM");
    assert_eq!(phase_of(&e), Some(Phase::Msm(Query::BG2)), "{e}");
    drop((small, hold));
    drop(b);
    assert_eq!(vram.budget().in_use(), before, "budget restored");
}
