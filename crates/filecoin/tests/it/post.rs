//! WindowPoSt and WinningPoSt of real 2 KiB sectors: sealed by filecoin-proofs on the CPU,
//! vanilla proofs made by filecoin-proofs (`generate_fallback_sector_challenges`,
//! `generate_single_vanilla_proof`), parameters made by cuzk's setup under filecoin-proofs'
//! names, proven by cuzk, accepted by filecoin-proofs' `verify_window_post` and
//! `verify_winning_post`; bad inputs get errors naming the file and field.
//!
//! filecoin-proofs reads `FIL_PROOFS_PARAMETER_CACHE` once per process, so the proving test
//! runs itself again in a child process with it set (as porep_c2.rs does).

use std::path::PathBuf;
use std::time::Instant;

use cuzk_filecoin::workload::{SealedSector, post_vanilla_proofs, seal_sector};
use cuzk_filecoin::{
    FilecoinError, FilecoinProver, PARTITION_PROOF_BYTES, ParamStore, PostKind, PostProof,
    PostStatement, PostVanilla, SealProof, verify_window_post, verify_winning_post,
};
use filecoin_proofs::{FallbackPoStSectorProof, SectorShape2KiB};
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::support::{expect_field, in_param_env, params_dir};

const KIB2: SealProof = SealProof::StackedDrg2KiBV1_1;

fn seal(name: &str, sector_id: u64) -> SealedSector {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("filecoin-post-{name}"));
    std::fs::remove_dir_all(&dir).ok();
    let start = Instant::now();
    let s = seal_sector(
        KIB2,
        &dir,
        1234,
        sector_id,
        &mut ChaCha8Rng::seed_from_u64(100 + sector_id),
    )
    .expect("sealing a 2 KiB sector");
    eprintln!(
        "seal sector {sector_id} (add_piece, PC1, PC2, C1): {:?}",
        start.elapsed()
    );
    s
}

/// Field-element randomness, as the chain's is after filecoin-proofs' masking.
fn randomness(seed: u64) -> [u8; 32] {
    let mut r = [0u8; 32];
    ChaCha8Rng::seed_from_u64(seed).fill_bytes(&mut r);
    r[31] &= 0x3f;
    r
}

type Vanilla2K = FallbackPoStSectorProof<SectorShape2KiB>;

fn split(bytes: &[u8]) -> Vec<Vanilla2K> {
    bincode::deserialize(bytes).unwrap()
}

fn join(proofs: &[Vanilla2K]) -> Vec<u8> {
    bincode::serialize(proofs).unwrap()
}

#[test]
fn post_proof_names() {
    for name in [
        "StackedDrgWinning2KiBV1",
        "StackedDrgWindow2KiBV1",
        "StackedDrgWindow2KiBV1_2",
        "StackedDrgWindow32GiBV1_2",
        "StackedDrgWinning64GiBV1",
    ] {
        let p: PostProof = name.parse().unwrap();
        assert_eq!(p.to_string(), name);
    }
    // The chain's name for V1_2.
    let p: PostProof = "StackedDrgWindow2KiBV1_1".parse().unwrap();
    assert_eq!(p, PostProof::window(KIB2));
    assert_eq!(p.kind, PostKind::Window);
    assert_eq!(p.config().unwrap().sector_count, 2);
    assert_eq!(
        PostProof::winning(KIB2).config().unwrap().challenge_count,
        66
    );
    for bad in [
        "StackedDrgWinning2KiBV1_2",
        "StackedDrgWindow4KiBV1",
        "StackedDrg2KiBV1_1",
        "",
    ] {
        match bad.parse::<PostProof>() {
            Err(FilecoinError::UnknownPostProof(s)) => assert_eq!(s, bad),
            other => panic!("{bad}: {other:?}"),
        }
    }
}

#[test]
fn window_and_winning_post_2kib_are_accepted() {
    if !in_param_env(module_path!(), "window_and_winning_post_2kib_are_accepted") {
        return;
    }
    let sectors: Vec<SealedSector> = (1..=3).map(|i| seal(&format!("s{i}"), i)).collect();
    let refs: Vec<&SealedSector> = sectors.iter().collect();
    let st = PostStatement {
        randomness: randomness(7),
        prover_id: sectors[0].commit.prover_id(),
    };
    let store = ParamStore::new(params_dir());
    let prover = FilecoinProver::new(Box::new(cuzk_groth16::CpuBackend), store.clone());
    let rng = &mut ChaCha8Rng::seed_from_u64(8);

    // WindowPoSt of 3 sectors: 2 per partition at 2 KiB, so partitions 0 (sectors 1, 2) and
    // 1 (sector 3, padded by filecoin-proofs' rule), each proven alone from its own vanilla
    // proofs, as curio proves partitions.
    let window = PostProof::window(KIB2);
    let start = Instant::now();
    let all = post_vanilla_proofs(window, &refs, st.randomness).expect("vanilla proofs");
    eprintln!("window vanilla proofs: {:?}", start.elapsed());
    let all = split(&all);
    assert_eq!(all.len(), 3);
    let parts = [join(&all[..2]), join(&all[2..])];
    let v0 = PostVanilla::parse("p0.bin", &parts[0], window).unwrap();
    let v1 = PostVanilla::parse("p1.bin", &parts[1], window).unwrap();
    assert_eq!(v0.len(), 2);

    let start = Instant::now();
    let made = store
        .generate_post(&v0, &st, &mut ChaCha8Rng::seed_from_u64(9))
        .expect("generating the 2 KiB WindowPoSt parameters");
    eprintln!(
        "window parameters: {} in {:?}",
        if made { "generated" } else { "already there" },
        start.elapsed()
    );
    let mut proof = Vec::new();
    for (k, v) in [&v0, &v1].into_iter().enumerate() {
        let start = Instant::now();
        let p = prover
            .prove_window_post(&format!("p{k}.bin"), v, &st, k, rng)
            .expect("WindowPoSt partition");
        eprintln!("window partition {k}: {:?}\n{}", start.elapsed(), p.timings);
        assert_eq!(p.bytes.len(), PARTITION_PROOF_BYTES);
        // Partition 0 loads and compiles; partition 1 reuses the compiled circuit.
        assert_eq!(p.timings.load_params.is_some(), k == 0);
        proof.extend_from_slice(&p.bytes);
    }
    let public: Vec<(u64, [u8; 32])> = sectors
        .iter()
        .map(|s| (s.commit.sector_id, s.commit.comm_r))
        .collect();
    let start = Instant::now();
    let ok = verify_window_post(window, &st, &public, &proof, &store).unwrap();
    eprintln!("verify_window_post: {:?}", start.elapsed());
    assert!(ok, "verify_window_post rejects cuzk's proof");

    // Partition 0 alone is the WindowPoSt of sectors 1 and 2.
    assert!(verify_window_post(window, &st, &public[..2], &proof[..192], &store).unwrap());
    // Another randomness, a changed proof, partitions swapped, another sector: rejected.
    let other = PostStatement {
        randomness: randomness(70),
        ..st
    };
    assert!(!verify_window_post(window, &other, &public, &proof, &store).unwrap());
    let mut bad = proof.clone();
    bad[10] ^= 1;
    assert!(!verify_window_post(window, &st, &public, &bad, &store).unwrap_or(false));
    let swapped = [&proof[192..], &proof[..192]].concat();
    assert!(!verify_window_post(window, &st, &public, &swapped, &store).unwrap());
    let other_sector = [public[0], public[2]];
    assert!(!verify_window_post(window, &st, &other_sector, &proof[..192], &store).unwrap());

    // Vanilla proofs of another randomness: filecoin-proofs' check of them fails, and the
    // error names the file and field, before anything is proven.
    expect_field(
        prover.prove_window_post("p0.bin", &v0, &other, 0, rng),
        "p0.bin",
        "vanilla_proofs",
    );
    // A tampered vanilla proof (sector 1's comm_r given to sector 2).
    let mut tampered = split(&parts[0]);
    tampered[1].comm_r = tampered[0].comm_r;
    let t = PostVanilla::parse("tampered.bin", &join(&tampered), window).unwrap();
    expect_field(
        prover.prove_window_post("tampered.bin", &t, &st, 0, rng),
        "tampered.bin",
        "vanilla_proofs",
    );
    // Truncated, trailing bytes, empty, or another sector size's shape.
    for (what, bytes) in [
        ("truncated", parts[0][..parts[0].len() - 7].to_vec()),
        ("trailing", [&parts[0][..], &[0u8; 3]].concat()),
        ("short", parts[0][..5].to_vec()),
        ("empty list", join(&[])),
    ] {
        match PostVanilla::parse("p0.bin", &bytes, window) {
            Err(e @ FilecoinError::Field { .. }) => {
                assert!(
                    e.to_string().starts_with("p0.bin: field vanilla_proofs"),
                    "{what}: {e}"
                );
            }
            other => panic!("{what}: {other:?}"),
        }
    }
    // 2 KiB proofs read as 32 GiB ones (bincode does not record the tree's arity): their
    // paths are too short, which filecoin-proofs' check of them finds.
    let big = PostProof::window(SealProof::StackedDrg32GiBV1_1);
    let v32 = PostVanilla::parse("p0.bin", &parts[0], big).unwrap();
    expect_field(
        prover.prove_window_post("p0.bin", &v32, &st, 0, rng),
        "p0.bin",
        "vanilla_proofs",
    );
    // Three sectors do not fit one partition.
    let three = PostVanilla::parse("all.bin", &join(&all), window).unwrap();
    expect_field(
        prover.prove_window_post("all.bin", &three, &st, 0, rng),
        "all.bin",
        "vanilla_proofs",
    );
    // Randomness that is not a field element.
    let huge = PostStatement {
        randomness: [0xff; 32],
        ..st
    };
    expect_field(
        prover.prove_window_post("p0.bin", &v0, &huge, 0, rng),
        "PoSt statement",
        "randomness",
    );

    // WinningPoSt of sector 2.
    let winning = PostProof::winning(KIB2);
    let st_w = PostStatement {
        randomness: randomness(11),
        ..st
    };
    let start = Instant::now();
    let bytes = post_vanilla_proofs(winning, &[&sectors[1]], st_w.randomness).unwrap();
    eprintln!("winning vanilla proofs: {:?}", start.elapsed());
    let vw = PostVanilla::parse("winning.bin", &bytes, winning).unwrap();
    assert_eq!(vw.sectors(), vec![(2, sectors[1].commit.comm_r)]);
    let start = Instant::now();
    let made = store
        .generate_post(&vw, &st_w, &mut ChaCha8Rng::seed_from_u64(12))
        .expect("generating the 2 KiB WinningPoSt parameters");
    eprintln!(
        "winning parameters: {} in {:?}",
        if made { "generated" } else { "already there" },
        start.elapsed()
    );
    let start = Instant::now();
    let p = prover
        .prove_winning_post("winning.bin", &vw, &st_w, rng)
        .expect("WinningPoSt");
    eprintln!("winning: {:?}\n{}", start.elapsed(), p.timings);
    assert_eq!(p.bytes.len(), PARTITION_PROOF_BYTES);
    let start = Instant::now();
    assert!(
        verify_winning_post(winning, &st_w, &vw.sectors(), &p.bytes, &store).unwrap(),
        "verify_winning_post rejects cuzk's proof"
    );
    eprintln!("verify_winning_post: {:?}", start.elapsed());
    let wrong_sector = [(1, sectors[0].commit.comm_r)];
    assert!(!verify_winning_post(winning, &st_w, &wrong_sector, &p.bytes, &store).unwrap());
    assert!(!verify_winning_post(winning, &st, &vw.sectors(), &p.bytes, &store).unwrap());
    expect_field(
        prover.prove_winning_post("winning.bin", &vw, &st, rng),
        "winning.bin",
        "vanilla_proofs",
    );
    // A window proof's vanilla proofs given to the winning prover, and the reverse.
    expect_field(
        prover.prove_winning_post("p0.bin", &v0, &st, rng),
        "p0.bin",
        "registered_proof",
    );
    expect_field(
        prover.prove_window_post("winning.bin", &vw, &st_w, 0, rng),
        "winning.bin",
        "registered_proof",
    );

    for s in &sectors {
        std::fs::remove_dir_all(&s.dir).ok();
    }
}
