//! SnapDeals of a real 2 KiB sector: sealed by filecoin-proofs on the CPU, updated with new
//! data (`encode_into`, `generate_partition_proofs`), parameters made by cuzk's setup under
//! filecoin-proofs' names, proven by cuzk, accepted by filecoin-proofs'
//! `verify_empty_sector_update_proof`; bad inputs get errors naming the file and field.
//!
//! filecoin-proofs reads `FIL_PROOFS_PARAMETER_CACHE` once per process: the test runs itself
//! again in a child process with it set (as porep_c2.rs does).

use std::path::PathBuf;
use std::time::Instant;

use cuzk_filecoin::workload::{seal_sector, snap_update};
use cuzk_filecoin::{
    FilecoinProver, PARTITION_PROOF_BYTES, ParamStore, PartitionedProof, SealProof, SnapStatement,
    SnapVanilla, verify_snap,
};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::support::{expect_field, in_param_env, params_dir};

const KIB2: SealProof = SealProof::StackedDrg2KiBV1_1;

#[test]
fn snap_2kib_is_accepted_by_verify_empty_sector_update_proof() {
    if !in_param_env(
        module_path!(),
        "snap_2kib_is_accepted_by_verify_empty_sector_update_proof",
    ) {
        return;
    }
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("filecoin-snap");
    std::fs::remove_dir_all(&dir).ok();
    let rng = &mut ChaCha8Rng::seed_from_u64(21);
    let start = Instant::now();
    let sector = seal_sector(KIB2, &dir, 1234, 9, rng).expect("sealing a 2 KiB sector");
    let (st, bytes) = snap_update(&sector, rng).expect("SnapDeals update");
    eprintln!("seal and update: {:?}", start.elapsed());
    let vanilla = SnapVanilla::parse("snap.bin", &bytes, KIB2).unwrap();

    let store = ParamStore::new(params_dir());
    let start = Instant::now();
    let made = store
        .generate_snap(&vanilla, &st, &mut ChaCha8Rng::seed_from_u64(22))
        .expect("generating the 2 KiB SnapDeals parameters");
    eprintln!(
        "parameters: {} in {:?}",
        if made { "generated" } else { "already there" },
        start.elapsed()
    );
    let prover = FilecoinProver::new(Box::new(cuzk_groth16::CpuBackend), store.clone());
    let start = Instant::now();
    let proof = prover
        .prove_snap("snap.bin", &vanilla, &st, rng)
        .expect("SnapDeals proof");
    eprintln!("prove: {:?}\n{}", start.elapsed(), proof.timings);
    assert_eq!(proof.bytes.len(), PARTITION_PROOF_BYTES);
    let start = Instant::now();
    assert!(
        verify_snap(KIB2, &st, &proof.bytes, &store).unwrap(),
        "verify_empty_sector_update_proof rejects cuzk's proof"
    );
    eprintln!("verify: {:?}", start.elapsed());

    // Another comm_d_new, or a changed proof: rejected.
    let other = SnapStatement {
        comm_d_new: st.comm_r_old,
        ..st
    };
    assert!(!verify_snap(KIB2, &other, &proof.bytes, &store).unwrap_or(false));
    let mut bad = proof.bytes.clone();
    bad[50] ^= 1;
    assert!(!verify_snap(KIB2, &st, &bad, &store).unwrap_or(false));

    // Vanilla proofs of another update, a truncated or empty file: errors naming the file.
    expect_field(
        prover.prove_snap("snap.bin", &vanilla, &other, rng),
        "snap.bin",
        "vanilla_proofs",
    );
    for b in [&bytes[..bytes.len() - 9], &bytes[..4], &[0u8; 8][..]] {
        expect_field(
            SnapVanilla::parse("snap.bin", b, KIB2),
            "snap.bin",
            "vanilla_proofs",
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// curio's form (one bincode `PartitionProof` per partition) reads as the whole list does, and
/// splits into its partitions for the daemon after filecoin-proofs' check; a truncated
/// partition, or another update's statement, is an error naming the field.
#[test]
fn snap_partition_proofs_one_per_message_split_into_partitions() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("filecoin-snap-split");
    std::fs::remove_dir_all(&dir).ok();
    let rng = &mut ChaCha8Rng::seed_from_u64(23);
    let sector = seal_sector(KIB2, &dir, 1234, 10, rng).expect("sealing a 2 KiB sector");
    let (st, bytes) = snap_update(&sector, rng).expect("SnapDeals update");
    // bincode's Vec: its length, then the one partition's proof.
    let blobs = [bytes[8..].to_vec()];
    let vanilla = SnapVanilla::from_partition_proofs("vanilla_proofs", &blobs, KIB2).unwrap();
    let split = PartitionedProof::snap("vanilla_proofs", vanilla, st).unwrap();
    assert_eq!(split.partitions(), 0..1);
    assert_eq!(split.circuit().to_string(), "snap-2k");
    let short = [blobs[0][..blobs[0].len() - 3].to_vec()];
    expect_field(
        SnapVanilla::from_partition_proofs("vanilla_proofs", &short, KIB2),
        "vanilla_proofs",
        "vanilla_proofs",
    );
    let vanilla = SnapVanilla::from_partition_proofs("vanilla_proofs", &blobs, KIB2).unwrap();
    let other = SnapStatement {
        comm_d_new: st.comm_r_old,
        ..st
    };
    expect_field(
        PartitionedProof::snap("vanilla_proofs", vanilla, other),
        "vanilla_proofs",
        "vanilla_proofs",
    );
    std::fs::remove_dir_all(&dir).ok();
}
