//! PoRep C2 of a real 2 KiB sector: sealed by filecoin-proofs on the CPU, its parameters made
//! by cuzk's setup under filecoin-proofs' names, proven by cuzk, accepted by filecoin-proofs'
//! `verify_seal`; and every bad input gets its own error.
//!
//! filecoin-proofs reads `FIL_PROOFS_PARAMETER_CACHE` once per process, so each test runs
//! itself again in a child process with it set to the shared generated-parameters directory
//! (under the target directory; generation holds a lock there, so parallel tests make the
//! files once).

use std::path::PathBuf;
use std::time::Instant;

use base64::Engine as _;
use cuzk_filecoin::workload::{SealCommit, seal_sector};
use cuzk_filecoin::{
    C1Form, C1Output, FilecoinError, FilecoinProver, PARTITION_PROOF_BYTES, ParamStore, SealProof,
    verify_porep,
};
use cuzk_formats::FormatError;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::support::{in_param_env, params_dir};

fn sealed(name: &str, seed: u64) -> SealCommit {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("filecoin-sector-{name}"));
    std::fs::remove_dir_all(&dir).ok();
    let start = Instant::now();
    let s = seal_sector(
        SealProof::StackedDrg2KiBV1_1,
        &dir,
        1234,
        seed,
        &mut ChaCha8Rng::seed_from_u64(seed),
    )
    .expect("sealing a 2 KiB sector");
    eprintln!("seal (add_piece, PC1, PC2, C1): {:?}", start.elapsed());
    std::fs::remove_dir_all(&dir).ok();
    s.commit
}

/// The same C1 in filecoin-proofs' bare form and in curio's wrapper.
fn other_forms(api_json: &[u8], sector_number: u64) -> (Vec<u8>, Vec<u8>) {
    let mut bare: serde_json::Value = serde_json::from_slice(api_json).unwrap();
    let obj = bare.as_object_mut().unwrap();
    obj.remove("registered_proof");
    let proofs = obj.remove("vanilla_proofs").unwrap();
    obj.insert(
        "vanilla_proofs".into(),
        proofs.as_object().unwrap().values().next().unwrap().clone(),
    );
    let curio = serde_json::json!({
        "SectorNum": sector_number,
        "Phase1Out": base64::engine::general_purpose::STANDARD.encode(api_json),
        "SectorSize": 2048,
    });
    (
        serde_json::to_vec(&bare).unwrap(),
        serde_json::to_vec(&curio).unwrap(),
    )
}

fn generate(store: &ParamStore, c1: &C1Output) {
    let start = Instant::now();
    let made = store
        .generate_porep(c1, &mut ChaCha8Rng::seed_from_u64(99))
        .expect("generating the 2 KiB PoRep parameters");
    eprintln!(
        "parameters: {} in {:?}",
        if made { "generated" } else { "already there" },
        start.elapsed()
    );
}

#[test]
fn porep_c2_2kib_is_accepted_by_verify_seal() {
    if !in_param_env(module_path!(), "porep_c2_2kib_is_accepted_by_verify_seal") {
        return;
    }
    let sector = sealed("accepted", 1);
    let c1 = C1Output::parse("c1.json", &sector.c1_json, None).unwrap();
    assert_eq!(c1.form, C1Form::ProofsApi);
    assert_eq!(c1.seal_proof, SealProof::StackedDrg2KiBV1_1);
    let store = ParamStore::new(params_dir());
    generate(&store, &c1);

    let prover = FilecoinProver::new(Box::new(cuzk_groth16::CpuBackend), store.clone());
    let rng = &mut ChaCha8Rng::seed_from_u64(2);
    let start = Instant::now();
    let proof = prover.prove_porep_c2(&c1, rng).expect("C2");
    eprintln!(
        "first C2 (load, compile, prove): {:?}\n{}",
        start.elapsed(),
        proof.timings
    );
    assert_eq!(proof.bytes.len(), PARTITION_PROOF_BYTES);
    assert!(proof.timings.load_params.is_some());
    let start = Instant::now();
    let ok = verify_porep(
        &c1,
        &proof.bytes,
        sector.prover_id(),
        sector.sector_id,
        &store,
    )
    .unwrap();
    eprintln!("verify_seal: {:?}", start.elapsed());
    assert!(ok, "verify_seal rejects cuzk's proof");

    // A changed proof, or another sector id, is rejected.
    let mut bad = proof.bytes.clone();
    bad[100] ^= 1;
    assert!(
        !verify_porep(&c1, &bad, sector.prover_id(), sector.sector_id, &store).unwrap_or(false)
    );
    assert!(
        !verify_porep(
            &c1,
            &proof.bytes,
            sector.prover_id(),
            sector.sector_id + 1,
            &store
        )
        .unwrap()
    );

    // The other forms of the same C1 parse to the same statement. (Curio's form is proven through
    // the daemon in its curio tests; a second proof with the kept circuit is post.rs's; each
    // CPU PoRep proof costs most of a minute on CI's two cores.)
    let (bare, curio) = other_forms(&sector.c1_json, sector.sector_id);
    let bare = C1Output::parse("bare.json", &bare, Some(SealProof::StackedDrg2KiBV1_1)).unwrap();
    assert_eq!(bare.form, C1Form::FilecoinProofs);
    let curio = C1Output::parse("curio.json", &curio, None).unwrap();
    assert_eq!(curio.form, C1Form::Curio);
    assert_eq!(curio.sector_number, Some(sector.sector_id));
    for c in [&bare, &curio] {
        assert_eq!(
            (c.comm_r(), c.comm_d(), c.seed(), c.ticket()),
            (c1.comm_r(), c1.comm_d(), c1.seed(), c1.ticket())
        );
    }

    // Vanilla proofs that do not match their commitment: cuzk's check of the witness fails,
    // naming the partition.
    let mut tampered: serde_json::Value = serde_json::from_slice(&sector.c1_json).unwrap();
    let comm_r = tampered["comm_r"].as_array_mut().unwrap();
    comm_r[0] = (comm_r[0].as_u64().unwrap() ^ 1).into();
    let tampered = C1Output::parse(
        "tampered.json",
        &serde_json::to_vec(&tampered).unwrap(),
        None,
    )
    .unwrap();
    match prover.prove_porep_c2(&tampered, rng) {
        Err(FilecoinError::Partition { partition: 0, .. }) => {}
        other => panic!("a tampered comm_r: {other:?}"),
    }
}

#[test]
fn porep_c2_parameter_errors() {
    if !in_param_env(module_path!(), "porep_c2_parameter_errors") {
        return;
    }
    let sector = sealed("param-errors", 3);
    let c1 = C1Output::parse("c1.json", &sector.c1_json, None).unwrap();
    let rng = &mut ChaCha8Rng::seed_from_u64(4);

    // No parameter file: the error names the path filecoin-proofs would read.
    let empty = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("filecoin-no-params");
    std::fs::create_dir_all(&empty).unwrap();
    let prover = FilecoinProver::new(Box::new(cuzk_groth16::CpuBackend), ParamStore::new(&empty));
    match prover.prove_porep_c2(&c1, rng) {
        Err(FilecoinError::MissingParameters { path, .. }) => {
            assert!(path.starts_with(&empty));
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            assert!(
                name.starts_with("v28-stacked-proof-of-replication-merkletree-poseidon_hasher-8-0-0-sha256_hasher-")
                    && name.ends_with(".params"),
                "{name}"
            );
        }
        other => panic!("missing parameters: {other:?}"),
    }

    // Parameters of another circuit under this circuit's name.
    let other = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("filecoin-other-params");
    std::fs::remove_dir_all(&other).ok();
    let store = ParamStore::new(&other);
    let id = c1.circuit_id().unwrap();
    let small = small_parameters();
    store.write_generated(&id, 2048, &small).unwrap();
    let prover = FilecoinProver::new(Box::new(cuzk_groth16::CpuBackend), store);
    match prover.prove_porep_c2(&c1, rng) {
        Err(FilecoinError::Batch(cuzk_bellpepper::batch::BatchError::Parameters(
            FormatError::Mismatch { .. },
        ))) => {}
        other => panic!("parameters of another circuit: {other:?}"),
    }

    // A directory of published parameters is never written into.
    let published = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("filecoin-published");
    std::fs::create_dir_all(&published).unwrap();
    std::fs::write(published.join("v28-published.vk"), b"").unwrap();
    match ParamStore::new(&published).write_generated(&id, 2048, &small) {
        Err(FilecoinError::MixedParameters { .. }) => {}
        other => panic!("writing beside published files: {other:?}"),
    }
}

/// Valid bellperson parameters of a one-constraint circuit.
fn small_parameters() -> cuzk_formats::BpParameters {
    let mut b = cuzk_groth16::R1csBuilder::new();
    let x = b.alloc_private(cuzk_groth16::Fr::from_u64(3));
    let y = b.alloc_public(cuzk_groth16::Fr::from_u64(9));
    b.enforce(
        &[(x, cuzk_groth16::Fr::ONE)],
        &[(x, cuzk_groth16::Fr::ONE)],
        &[(y, cuzk_groth16::Fr::ONE)],
    );
    let (r1cs, _) = b.build().unwrap();
    let pk = cuzk_groth16::generate_parameters(&r1cs, &mut ChaCha8Rng::seed_from_u64(6)).unwrap();
    cuzk_formats::BpParameters::from_proving_key(&pk).unwrap()
}

#[test]
fn c1_input_errors_name_the_file_and_field() {
    let sector = sealed("input-errors", 5);
    let json = &sector.c1_json;

    // Truncated JSON.
    match C1Output::parse("c1.json", &json[..json.len() / 2], None) {
        Err(e @ FilecoinError::Json { .. }) => assert!(e.to_string().starts_with("c1.json")),
        other => panic!("truncated: {other:?}"),
    }
    // A registered proof cuzk does not prove.
    let mut v: serde_json::Value = serde_json::from_slice(json).unwrap();
    v["registered_proof"] = "StackedDrg2KiBV1".into();
    match C1Output::parse("c1.json", &serde_json::to_vec(&v).unwrap(), None) {
        Err(FilecoinError::Json { path, .. }) => assert_eq!(path, "registered_proof"),
        other => panic!("V1 proof: {other:?}"),
    }
    // A registered proof that is not the vanilla proofs' size.
    v["registered_proof"] = "StackedDrg32GiBV1_1".into();
    match C1Output::parse("c1.json", &serde_json::to_vec(&v).unwrap(), None) {
        Err(FilecoinError::Field { field, .. }) => assert_eq!(field, "vanilla_proofs"),
        other => panic!("wrong size: {other:?}"),
    }
    // The caller asked for another proof.
    match C1Output::parse("c1.json", json, Some(SealProof::StackedDrg8MiBV1_1)) {
        Err(FilecoinError::Field { field, .. }) => assert_eq!(field, "registered_proof"),
        other => panic!("asked for another size: {other:?}"),
    }
    let (bare, curio) = other_forms(json, 5);
    // The bare form does not say its size.
    match C1Output::parse("bare.json", &bare, None) {
        Err(FilecoinError::SealProofNeeded { file }) => assert_eq!(file, "bare.json"),
        other => panic!("bare without a size: {other:?}"),
    }
    // curio's wrapper with a sector size that is not its C1's, or no size cuzk knows.
    for (size, field) in [(8u64 << 20, "SectorSize"), (4096, "SectorSize")] {
        let mut w: serde_json::Value = serde_json::from_slice(&curio).unwrap();
        w["SectorSize"] = size.into();
        match C1Output::parse("curio.json", &serde_json::to_vec(&w).unwrap(), None) {
            Err(FilecoinError::Field { field: f, file, .. }) => {
                assert_eq!((f, file.as_str()), (field, "curio.json"))
            }
            other => panic!("SectorSize {size}: {other:?}"),
        }
    }
    // curio's wrapper whose Phase1Out is not base64.
    let mut w: serde_json::Value = serde_json::from_slice(&curio).unwrap();
    w["Phase1Out"] = "not base64!".into();
    match C1Output::parse("curio.json", &serde_json::to_vec(&w).unwrap(), None) {
        Err(FilecoinError::Field { field, .. }) => assert_eq!(field, "Phase1Out"),
        other => panic!("Phase1Out: {other:?}"),
    }
    // No partitions.
    let mut v: serde_json::Value = serde_json::from_slice(json).unwrap();
    v["vanilla_proofs"]["StackedDrg2KiBV1"] = serde_json::json!([]);
    match C1Output::parse("c1.json", &serde_json::to_vec(&v).unwrap(), None) {
        Err(FilecoinError::Field { field, .. }) => assert_eq!(field, "vanilla_proofs"),
        other => panic!("no partitions: {other:?}"),
    }
    // A partition short of one challenge proof.
    let mut v: serde_json::Value = serde_json::from_slice(json).unwrap();
    let partitions = &mut v["vanilla_proofs"]["StackedDrg2KiBV1"];
    partitions[0].as_array_mut().unwrap().pop();
    match C1Output::parse("c1.json", &serde_json::to_vec(&v).unwrap(), None) {
        Err(FilecoinError::Field { field, reason, .. }) => {
            assert_eq!(field, "vanilla_proofs");
            assert!(reason.starts_with("partition 0 has "), "{reason}");
        }
        other => panic!("a challenge short: {other:?}"),
    }
}
