//! Valid workloads: a sector sealed by filecoin-proofs on the CPU (add_piece, PC1, PC2, C1),
//! its C1 output written as filecoin-ffi writes it; PoSt vanilla proofs of sealed sectors; a
//! SnapDeals update of a sealed sector.

use std::fs::File;
use std::io::Cursor;
use std::path::{Path, PathBuf};

use filecoin_proofs::{
    MerkleTreeTrait, PieceInfo, PoRepConfig, PrivateReplicaInfo, SectorShapeBase, SectorShapeSub8,
    SectorShapeTop2, UnpaddedBytesAmount, add_piece, generate_fallback_sector_challenges,
    generate_piece_commitment, generate_single_vanilla_proof, seal_commit_phase1,
    seal_pre_commit_phase1, seal_pre_commit_phase2,
};
use filecoin_proofs::{SectorUpdateConfig, TreeRHasher, encode_into, generate_partition_proofs};
use rand::RngCore;
use storage_proofs_core::sector::SectorId;

use crate::error::upstream;
use crate::seal_proof::with_shape;
use crate::{FilecoinError, PostProof, SealProof, SnapStatement, prover_id_from_miner};

/// A PoRep C1 output and the identities `verify_seal` needs.
#[derive(Clone, Debug)]
pub struct SealCommit {
    pub seal_proof: SealProof,
    pub miner_id: u64,
    pub sector_id: u64,
    /// filecoin-proofs-api's `SealCommitPhase1Output` as JSON (filecoin-ffi's C1 output).
    pub c1_json: Vec<u8>,
    pub comm_r: [u8; 32],
}

impl SealCommit {
    pub fn prover_id(&self) -> [u8; 32] {
        prover_id_from_miner(self.miner_id)
    }
}

/// A sector sealed on the CPU: its C1 output, and its files (`sealed`, `cache/`), which PoSt's
/// and SnapDeals' vanilla proofs read.
#[derive(Clone, Debug)]
pub struct SealedSector {
    pub commit: SealCommit,
    pub dir: PathBuf,
}

/// Seals a sector of random data in `dir` (its staged, sealed and cache files; a sector's
/// worth of disk and, at 32 GiB, filecoin-proofs' full PC1 memory) and returns its C1 output.
pub fn seal_sector(
    seal_proof: SealProof,
    dir: &Path,
    miner_id: u64,
    sector_id: u64,
    rng: &mut dyn RngCore,
) -> Result<SealedSector, FilecoinError> {
    let config = seal_proof.config();
    let mut ticket = [0u8; 32];
    let mut seed = [0u8; 32];
    rng.fill_bytes(&mut ticket);
    rng.fill_bytes(&mut seed);
    // Both end up as field elements: keep them below the modulus, as filecoin's tests do.
    ticket[31] &= 0x3f;
    seed[31] &= 0x3f;
    let ids = Ids {
        prover: prover_id_from_miner(miner_id),
        sector: SectorId::from(sector_id),
        ticket,
        seed,
    };
    let c1 = match seal_proof {
        SealProof::StackedDrg2KiBV1_1
        | SealProof::StackedDrg8MiBV1_1
        | SealProof::StackedDrg512MiBV1_1 => seal::<SectorShapeBase>(&config, dir, &ids, rng)?,
        SealProof::StackedDrg32GiBV1_1 => seal::<SectorShapeSub8>(&config, dir, &ids, rng)?,
        SealProof::StackedDrg64GiBV1_1 => seal::<SectorShapeTop2>(&config, dir, &ids, rng)?,
    };
    let (c1_json, comm_r) = api_c1_json(seal_proof, c1)?;
    Ok(SealedSector {
        commit: SealCommit {
            seal_proof,
            miner_id,
            sector_id,
            c1_json,
            comm_r,
        },
        dir: dir.to_path_buf(),
    })
}

/// filecoin-proofs-api's form of a `SealCommitPhase1Output` (its serde JSON value): the
/// registered proof, and the proofs in a variant named by the sector size
/// (`StackedDrg2KiBV1`, whatever the API version). Returns the JSON and its comm_r.
pub(crate) fn api_c1_json(
    seal_proof: SealProof,
    mut value: serde_json::Value,
) -> Result<(Vec<u8>, [u8; 32]), FilecoinError> {
    let obj = value
        .as_object_mut()
        .ok_or_else(|| FilecoinError::FilecoinProofs("C1 output is not a JSON object".into()))?;
    let proofs = obj
        .remove("vanilla_proofs")
        .ok_or_else(|| FilecoinError::FilecoinProofs("C1 output has no vanilla_proofs".into()))?;
    let variant = seal_proof.name().trim_end_matches("_1");
    let mut by_size = serde_json::Map::new();
    by_size.insert(variant.to_string(), proofs);
    obj.insert("vanilla_proofs".into(), by_size.into());
    obj.insert("registered_proof".into(), seal_proof.name().into());
    let comm_r = serde_json::from_value(value["comm_r"].clone())
        .map_err(|e| FilecoinError::FilecoinProofs(format!("C1 output's comm_r: {e}")))?;
    let c1_json = serde_json::to_vec(&value)
        .map_err(|e| FilecoinError::FilecoinProofs(format!("writing C1 JSON: {e}")))?;
    Ok((c1_json, comm_r))
}

struct Ids {
    prover: [u8; 32],
    sector: SectorId,
    ticket: [u8; 32],
    seed: [u8; 32],
}

fn seal<Tree: 'static + MerkleTreeTrait>(
    config: &PoRepConfig,
    dir: &Path,
    ids: &Ids,
    rng: &mut dyn RngCore,
) -> Result<serde_json::Value, FilecoinError> {
    let io = |what: &str, e: std::io::Error| {
        FilecoinError::io(format!("{what} in {}", dir.display()), e)
    };
    let cache = dir.join("cache");
    std::fs::create_dir_all(&cache).map_err(|e| io("creating cache", e))?;
    let staged = dir.join("staged");
    let sealed = dir.join("sealed");
    File::create(&sealed).map_err(|e| io("creating sealed", e))?;

    let size = UnpaddedBytesAmount::from(config.padded_bytes_amount());
    let mut data = vec![0u8; u64::from(size) as usize];
    rng.fill_bytes(&mut data);
    let piece: PieceInfo = generate_piece_commitment(Cursor::new(&data), size).map_err(upstream)?;
    let mut staged_file = File::create(&staged).map_err(|e| io("creating staged", e))?;
    add_piece(Cursor::new(&data), &mut staged_file, size, &[]).map_err(upstream)?;
    drop(staged_file);
    let pieces = [piece];

    let pc1 = seal_pre_commit_phase1::<_, _, _, Tree>(
        config, &cache, &staged, &sealed, ids.prover, ids.sector, ids.ticket, &pieces,
    )
    .map_err(upstream)?;
    let pc2 = seal_pre_commit_phase2(config, pc1, &cache, &sealed).map_err(upstream)?;
    let c1 = seal_commit_phase1::<_, Tree>(
        config, &cache, &sealed, ids.prover, ids.sector, ids.ticket, ids.seed, pc2, &pieces,
    )
    .map_err(upstream)?;
    serde_json::to_value(&c1)
        .map_err(|e| FilecoinError::FilecoinProofs(format!("writing C1 JSON: {e}")))
}

/// PoSt vanilla proofs of sealed sectors (all of one miner, sealed with `proof`'s sector
/// size, their files still there) as filecoin-proofs-api's callers make them: filecoin-proofs'
/// `generate_fallback_sector_challenges`, then `generate_single_vanilla_proof` per sector.
/// Returns the bincode of `Vec<FallbackPoStSectorProof<Tree>>`, in `sectors`' order.
pub fn post_vanilla_proofs(
    proof: PostProof,
    sectors: &[&SealedSector],
    randomness: [u8; 32],
) -> Result<Vec<u8>, FilecoinError> {
    let first = &sectors
        .first()
        .ok_or_else(|| FilecoinError::FilecoinProofs("no sectors to prove".into()))?
        .commit;
    if let Some(s) = sectors
        .iter()
        .map(|s| &s.commit)
        .find(|s| s.miner_id != first.miner_id || s.seal_proof != proof.sector)
    {
        return Err(FilecoinError::FilecoinProofs(format!(
            "sector {} is not miner {}'s {} sector",
            s.sector_id, first.miner_id, proof.sector
        )));
    }
    with_shape!(
        proof.sector,
        Tree,
        vanilla::<Tree>(proof, sectors, randomness, first.prover_id())
    )
}

fn vanilla<Tree: 'static + MerkleTreeTrait>(
    proof: PostProof,
    sectors: &[&SealedSector],
    randomness: [u8; 32],
    prover_id: [u8; 32],
) -> Result<Vec<u8>, FilecoinError> {
    let config = proof.config()?;
    let ids: Vec<SectorId> = sectors
        .iter()
        .map(|s| SectorId::from(s.commit.sector_id))
        .collect();
    let challenges =
        generate_fallback_sector_challenges::<Tree>(&config, &randomness, &ids, prover_id)
            .map_err(upstream)?;
    let mut proofs = Vec::with_capacity(sectors.len());
    // WinningPoSt challenges its one sector only.
    for (s, id) in sectors.iter().zip(&ids) {
        let Some(c) = challenges.get(id) else {
            continue;
        };
        let replica = PrivateReplicaInfo::<Tree>::new(
            s.dir.join("sealed"),
            s.commit.comm_r,
            s.dir.join("cache"),
        )
        .map_err(upstream)?;
        proofs.push(
            generate_single_vanilla_proof::<Tree>(&config, *id, &replica, c).map_err(upstream)?,
        );
    }
    bincode::serialize(&proofs)
        .map_err(|e| FilecoinError::FilecoinProofs(format!("writing vanilla proofs: {e}")))
}

/// A SnapDeals update of a sealed sector (its files still there) as filecoin-proofs' own
/// tests make one: new random data added as a piece, `encode_into` the sector key, then
/// `generate_partition_proofs`. Returns the update's statement and the bincode of
/// `Vec<PartitionProof<Tree>>`. The new replica is written under the sector's directory.
pub fn snap_update(
    sector: &SealedSector,
    rng: &mut dyn RngCore,
) -> Result<(SnapStatement, Vec<u8>), FilecoinError> {
    with_shape!(sector.commit.seal_proof, Tree, update::<Tree>(sector, rng))
}

fn update<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    sector: &SealedSector,
    rng: &mut dyn RngCore,
) -> Result<(SnapStatement, Vec<u8>), FilecoinError> {
    let dir = &sector.dir;
    let io = |what: &str, e: std::io::Error| {
        FilecoinError::io(format!("{what} in {}", dir.display()), e)
    };
    let porep_config = sector.commit.seal_proof.config();
    let config = SectorUpdateConfig::from_porep_config(&porep_config);
    let new_cache = dir.join("update-cache");
    std::fs::create_dir_all(&new_cache).map_err(|e| io("creating update-cache", e))?;
    let size = UnpaddedBytesAmount::from(porep_config.padded_bytes_amount());
    let mut data = vec![0u8; u64::from(size) as usize];
    rng.fill_bytes(&mut data);
    let piece: PieceInfo = generate_piece_commitment(Cursor::new(&data), size).map_err(upstream)?;
    let staged = dir.join("update-staged");
    let mut staged_file = File::create(&staged).map_err(|e| io("creating update-staged", e))?;
    add_piece(Cursor::new(&data), &mut staged_file, size, &[]).map_err(upstream)?;
    drop(staged_file);
    // encode_into maps the new replica: it must have the sealed sector's length already.
    let sealed = dir.join("sealed");
    let len = std::fs::metadata(&sealed)
        .map_err(|e| io("reading sealed", e))?
        .len();
    let new_replica = dir.join("update-sealed");
    File::create(&new_replica)
        .and_then(|f| f.set_len(len))
        .map_err(|e| io("creating update-sealed", e))?;
    let cache = dir.join("cache");
    let encoded = encode_into::<Tree>(
        &config,
        &new_replica,
        &new_cache,
        &sealed,
        &cache,
        &staged,
        &[piece],
    )
    .map_err(upstream)?;
    let proofs = generate_partition_proofs::<Tree>(
        config,
        sector.commit.comm_r,
        encoded.comm_r_new,
        encoded.comm_d_new,
        &sealed,
        &cache,
        &new_replica,
        &new_cache,
    )
    .map_err(upstream)?;
    let st = SnapStatement {
        comm_r_old: sector.commit.comm_r,
        comm_r_new: encoded.comm_r_new,
        comm_d_new: encoded.comm_d_new,
    };
    let bytes = bincode::serialize(&proofs)
        .map_err(|e| FilecoinError::FilecoinProofs(format!("writing partition proofs: {e}")))?;
    Ok((st, bytes))
}
