//! Workloads of sectors that were never sealed, from `cuzk_filecoin::sparse`: at 2 KiB a PoRep
//! C1 is proven by filecoin-proofs' own C2, and WindowPoSt and WinningPoSt vanilla proofs and a
//! SnapDeals update are proven by cuzk, each accepted by filecoin-proofs' verifiers; at
//! 32 GiB and 64 GiB, which no test can seal, filecoin-proofs' vanilla checks accept them.
//!
//! filecoin-proofs reads `FIL_PROOFS_PARAMETER_CACHE` once per process: the tests that prove
//! run themselves again in a child process with it set (as porep_c2.rs does).

use std::time::Instant;

use cuzk_filecoin::sparse::{sparse_post, sparse_seal, sparse_snap};
use cuzk_filecoin::{
    C1Output, FilecoinProver, ParamStore, PartitionedProof, PostProof, PostStatement, PostVanilla,
    SealProof, SnapVanilla, filecoin_proofs_c2, prover_id_from_miner, verify_porep, verify_snap,
    verify_window_post, verify_winning_post,
};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::support::{in_param_env, params_dir};

const KIB2: SealProof = SealProof::StackedDrg2KiBV1_1;
const MINER: u64 = 1234;

fn randomness(seed: u8) -> [u8; 32] {
    let mut r = [seed; 32];
    r[31] &= 0x3f;
    r
}

#[test]
fn sparse_porep_2kib_is_proven_by_filecoin_proofs() {
    if !in_param_env(
        module_path!(),
        "sparse_porep_2kib_is_proven_by_filecoin_proofs",
    ) {
        return;
    }
    let rng = &mut ChaCha8Rng::seed_from_u64(31);
    let start = Instant::now();
    let s = sparse_seal(KIB2, MINER, 77, rng).expect("sparse C1");
    eprintln!("sparse C1: {:?}", start.elapsed());
    let c1 = C1Output::parse("c1.json", &s.c1_json, None).unwrap();
    assert_eq!(c1.comm_r(), s.comm_r);
    let store = ParamStore::new(params_dir());
    store
        .generate_porep(&c1, &mut ChaCha8Rng::seed_from_u64(99))
        .expect("generating the 2 KiB PoRep parameters");

    // filecoin-proofs' own C2 proves it (and checks its proof with verify_seal). cuzk proves
    // sparse 2 KiB C1s in `tests/filecoin_cli.rs` (the CLI) and in the daemon's curio tests: each
    // CPU proof is most of a minute on CI's two cores.
    let start = Instant::now();
    let theirs = filecoin_proofs_c2(&c1, s.prover_id(), s.sector_id, &store)
        .expect("filecoin-proofs' seal_commit_phase2 of the sparse C1");
    eprintln!("filecoin-proofs C2: {:?}", start.elapsed());
    assert!(verify_porep(&c1, &theirs, s.prover_id(), s.sector_id, &store).unwrap());
}

#[test]
fn sparse_post_and_snap_2kib_are_proven_by_cuzk_and_accepted() {
    if !in_param_env(
        module_path!(),
        "sparse_post_and_snap_2kib_are_proven_by_cuzk_and_accepted",
    ) {
        return;
    }
    let rng = &mut ChaCha8Rng::seed_from_u64(32);
    let store = ParamStore::new(params_dir());
    let prover = FilecoinProver::new(Box::new(cuzk_groth16::CpuBackend), store.clone());
    let st = PostStatement {
        randomness: randomness(5),
        prover_id: prover_id_from_miner(MINER),
    };

    // WindowPoSt: 2 sectors, one partition at 2 KiB.
    let window = PostProof::window(KIB2);
    let bytes = sparse_post(window, MINER, &[3, 4], st.randomness, rng).expect("vanilla");
    let v = PostVanilla::parse("window.bin", &bytes, window).unwrap();
    store
        .generate_post(&v, &st, &mut ChaCha8Rng::seed_from_u64(9))
        .expect("WindowPoSt parameters");
    let p = prover
        .prove_window_post("window.bin", &v, &st, 0, rng)
        .expect("WindowPoSt");
    assert!(verify_window_post(window, &st, &v.sectors(), &p.bytes, &store).unwrap());

    // WinningPoSt of one sector.
    let winning = PostProof::winning(KIB2);
    let bytes = sparse_post(winning, MINER, &[6], st.randomness, rng).expect("vanilla");
    let v = PostVanilla::parse("winning.bin", &bytes, winning).unwrap();
    store
        .generate_post(&v, &st, &mut ChaCha8Rng::seed_from_u64(10))
        .expect("WinningPoSt parameters");
    let p = prover
        .prove_winning_post("winning.bin", &v, &st, rng)
        .expect("WinningPoSt");
    assert!(verify_winning_post(winning, &st, &v.sectors(), &p.bytes, &store).unwrap());

    // SnapDeals.
    let (snap, bytes) = sparse_snap(KIB2, rng).expect("sparse update");
    let v = SnapVanilla::parse("snap.bin", &bytes, KIB2).unwrap();
    store
        .generate_snap(&v, &snap, &mut ChaCha8Rng::seed_from_u64(22))
        .expect("SnapDeals parameters");
    let p = prover
        .prove_snap("snap.bin", &v, &snap, rng)
        .expect("SnapDeals");
    assert!(verify_snap(KIB2, &snap, &p.bytes, &store).unwrap());
}

/// Sizes no test can seal: the generators' own filecoin-proofs checks pass, and what they
/// make reads as the provers read it, with the shape filecoin-proofs gives that size.
#[test]
fn sparse_workloads_at_32_and_64_gib_pass_filecoin_proofs_vanilla_checks() {
    let rng = &mut ChaCha8Rng::seed_from_u64(33);
    for sp in [
        SealProof::StackedDrg32GiBV1_1,
        SealProof::StackedDrg64GiBV1_1,
    ] {
        let start = Instant::now();
        let s = sparse_seal(sp, MINER, 8, rng).expect("sparse C1");
        let c1 = C1Output::parse("c1.json", &s.c1_json, None).unwrap();
        let porep = PartitionedProof::porep(c1).unwrap();
        assert_eq!(porep.partitions().len(), sp.partitions());
        eprintln!("{sp} C1: {:?}, {} bytes", start.elapsed(), s.c1_json.len());

        let start = Instant::now();
        let window = PostProof::window(sp);
        let bytes = sparse_post(window, MINER, &[1, 2, 3], randomness(6), rng).expect("window");
        assert_eq!(
            PostVanilla::parse("w.bin", &bytes, window).unwrap().len(),
            3
        );
        let winning = PostProof::winning(sp);
        let bytes = sparse_post(winning, MINER, &[9], randomness(7), rng).expect("winning");
        assert_eq!(
            PostVanilla::parse("v.bin", &bytes, winning).unwrap().len(),
            1
        );
        eprintln!("{sp} PoSt: {:?}", start.elapsed());

        let start = Instant::now();
        let (st, bytes) = sparse_snap(sp, rng).expect("snap");
        let v = SnapVanilla::parse("snap.bin", &bytes, sp).unwrap();
        let snap = PartitionedProof::snap("snap.bin", v, st).expect("filecoin-proofs' check");
        assert_eq!(snap.partitions().len(), 16);
        eprintln!("{sp} SnapDeals: {:?}", start.elapsed());
    }
}
