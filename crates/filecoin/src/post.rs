//! WindowPoSt (one partition) and WinningPoSt from the vanilla proofs filecoin-proofs-api
//! takes, their circuits built exactly as filecoin-proofs'
//! `generate_single_window_post_with_vanilla` and `generate_winning_post_with_vanilla` build
//! them, and filecoin-proofs' verifiers.
//!
//! `FallbackPoStCircuit` synthesizes through `extend` only on an extensible constraint system
//! (bellperson's prover). cuzk-bellpepper's systems are not extensible, so the circuit takes
//! its plain path, whose inputs, aux variables and constraints come in the same order as the
//! extended system's (each sub-system's own ONE is dropped by `extend`). The prover checks
//! every witness's public inputs against filecoin-proofs' `generate_public_inputs` before
//! proving, so a difference would be an error, not a proof the verifier rejects.

use std::collections::BTreeMap;
use std::time::Instant;

use filecoin_hashers::Hasher;
use filecoin_proofs::parameters::{window_post_setup_params, winning_post_setup_params};
use filecoin_proofs::{
    FallbackPoStSectorProof, MerkleTreeTrait, PoStConfig, PoStType, PublicReplicaInfo,
    SectorShapeBase, SectorShapeSub8, SectorShapeTop2, SectorSize, WINDOW_POST_CHALLENGE_COUNT,
    WINDOW_POST_SECTOR_COUNT, WINNING_POST_CHALLENGE_COUNT, WINNING_POST_SECTOR_COUNT,
    as_safe_commitment, partition_vanilla_proofs, single_partition_vanilla_proofs,
};
use serde::de::DeserializeOwned;
use storage_proofs_core::api_version::ApiVersion;
use storage_proofs_core::compound_proof::{self, CompoundProof};
use storage_proofs_core::sector::SectorId;
use storage_proofs_post::fallback::{
    self, FallbackPoSt, FallbackPoStCircuit, FallbackPoStCompound, PublicSector, Sector,
};

use crate::error::upstream;
use crate::native_witness::{Path, PostSection};
use crate::params::check_verifier_dir;
use crate::prover::FilecoinProver;
use crate::seal_proof::with_shape;
use crate::synth::{PartitionCircuit, Synth, synthesis_error};
use crate::{FilecoinError, ParamStore, ProofTimings, SealProof};
use cuzk_bellpepper::CompiledCircuit;
use cuzk_groth16::Witness;

/// Window or Winning.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PostKind {
    Winning,
    Window,
}

/// A registered PoSt proof (filecoin-proofs-api's `RegisteredPoStProof`): its kind, sector
/// size and API version.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PostProof {
    pub kind: PostKind,
    /// The sector size, as the V1_1 seal proof of that size.
    pub sector: SealProof,
    /// WindowPoSt `*V1_2` (API 1.2, the grindability fix; the chain calls it `V1_1`). False:
    /// API 1.0, WinningPoSt's only version.
    pub v1_2: bool,
}

impl PostProof {
    pub fn window(sector: SealProof) -> Self {
        Self {
            kind: PostKind::Window,
            sector,
            v1_2: true,
        }
    }

    pub fn winning(sector: SealProof) -> Self {
        Self {
            kind: PostKind::Winning,
            sector,
            v1_2: false,
        }
    }

    fn size_name(self) -> &'static str {
        self.sector
            .name()
            .trim_start_matches("StackedDrg")
            .trim_end_matches("V1_1")
    }

    pub fn api_version(self) -> ApiVersion {
        if self.v1_2 {
            ApiVersion::V1_2_0
        } else {
            ApiVersion::V1_0_0
        }
    }

    /// filecoin-proofs' configuration, as filecoin-proofs-api's `as_v1_config` makes it.
    pub fn config(self) -> Result<PoStConfig, FilecoinError> {
        let size = self.sector.sector_size();
        let (typ, challenge_count, sector_count) = match self.kind {
            PostKind::Winning => (
                PoStType::Winning,
                WINNING_POST_CHALLENGE_COUNT,
                WINNING_POST_SECTOR_COUNT,
            ),
            PostKind::Window => {
                let count = WINDOW_POST_SECTOR_COUNT
                    .read()
                    .map_err(|_| FilecoinError::FilecoinProofs("WINDOW_POST_SECTOR_COUNT".into()))?
                    .get(&size)
                    .copied()
                    .ok_or(FilecoinError::UnknownSectorSize(size))?;
                (PoStType::Window, WINDOW_POST_CHALLENGE_COUNT, count)
            }
        };
        Ok(PoStConfig {
            sector_size: SectorSize(size),
            challenge_count,
            sector_count,
            typ,
            priority: true,
            api_version: self.api_version(),
        })
    }
}

impl std::fmt::Display for PostProof {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.kind {
            PostKind::Winning => "Winning",
            PostKind::Window => "Window",
        };
        let version = if self.v1_2 { "V1_2" } else { "V1" };
        write!(f, "StackedDrg{kind}{}{version}", self.size_name())
    }
}

impl std::str::FromStr for PostProof {
    type Err = FilecoinError;

    /// filecoin-proofs-api's names: `StackedDrgWinning2KiBV1`, `StackedDrgWindow2KiBV1`,
    /// `StackedDrgWindow2KiBV1_2`; also the chain's `StackedDrgWindow2KiBV1_1` (its name for
    /// V1_2).
    fn from_str(s: &str) -> Result<Self, FilecoinError> {
        let unknown = || FilecoinError::UnknownPostProof(s.to_string());
        let (kind, rest) = if let Some(r) = s.strip_prefix("StackedDrgWinning") {
            (PostKind::Winning, r)
        } else if let Some(r) = s.strip_prefix("StackedDrgWindow") {
            (PostKind::Window, r)
        } else {
            return Err(unknown());
        };
        let (size, v1_2) = if let Some(size) = rest.strip_suffix("V1_2") {
            (size, true)
        } else if let Some(size) = rest.strip_suffix("V1_1") {
            (size, true)
        } else if let Some(size) = rest.strip_suffix("V1") {
            (size, false)
        } else {
            return Err(unknown());
        };
        if v1_2 && kind == PostKind::Winning {
            return Err(unknown());
        }
        let sector = size.parse::<SealProof>().map_err(|_| unknown())?;
        Ok(Self { kind, sector, v1_2 })
    }
}

/// The vanilla proofs of a PoSt, one per sector, typed by the sectors' tree shape.
#[derive(Debug)]
pub struct PostVanilla {
    pub proof: PostProof,
    pub(crate) sectors: Sectors,
}

#[derive(Debug)]
pub(crate) enum Sectors {
    Base(Vec<FallbackPoStSectorProof<SectorShapeBase>>),
    Sub8(Vec<FallbackPoStSectorProof<SectorShapeSub8>>),
    Top2(Vec<FallbackPoStSectorProof<SectorShapeTop2>>),
}

macro_rules! with_sectors {
    ($s:expr, |$v:ident| $body:expr) => {
        match $s {
            $crate::post::Sectors::Base($v) => $body,
            $crate::post::Sectors::Sub8($v) => $body,
            $crate::post::Sectors::Top2($v) => $body,
        }
    };
}
#[cfg(test)]
pub(crate) use with_sectors;

pub(crate) const VANILLA: &str = "vanilla_proofs";

impl PostVanilla {
    /// bincode of `Vec<FallbackPoStSectorProof<Tree>>` (`file` names it in errors).
    pub fn parse(file: &str, bytes: &[u8], proof: PostProof) -> Result<Self, FilecoinError> {
        let sectors = match proof.sector {
            SealProof::StackedDrg2KiBV1_1
            | SealProof::StackedDrg8MiBV1_1
            | SealProof::StackedDrg512MiBV1_1 => Sectors::Base(bincode_vec(file, bytes)?),
            SealProof::StackedDrg32GiBV1_1 => Sectors::Sub8(bincode_vec(file, bytes)?),
            SealProof::StackedDrg64GiBV1_1 => Sectors::Top2(bincode_vec(file, bytes)?),
        };
        let out = Self { proof, sectors };
        out.check_shape(file)?;
        Ok(out)
    }

    /// filecoin-proofs-api's form: one bincode `FallbackPoStSectorProof<Tree>` per sector.
    pub fn from_sector_proofs(
        file: &str,
        blobs: &[impl AsRef<[u8]>],
        proof: PostProof,
    ) -> Result<Self, FilecoinError> {
        let sectors = match proof.sector {
            SealProof::StackedDrg2KiBV1_1
            | SealProof::StackedDrg8MiBV1_1
            | SealProof::StackedDrg512MiBV1_1 => {
                Sectors::Base(bincode_each(file, blobs, "sector")?)
            }
            SealProof::StackedDrg32GiBV1_1 => Sectors::Sub8(bincode_each(file, blobs, "sector")?),
            SealProof::StackedDrg64GiBV1_1 => Sectors::Top2(bincode_each(file, blobs, "sector")?),
        };
        let out = Self { proof, sectors };
        out.check_shape(file)?;
        Ok(out)
    }

    /// Each sector's id and comm_r, in order: the public statement.
    pub fn sectors(&self) -> Vec<(u64, [u8; 32])> {
        with_sectors!(&self.sectors, |v| v
            .iter()
            .map(|p| (u64::from(p.sector_id), comm_bytes(&p.comm_r)))
            .collect())
    }

    pub fn len(&self) -> usize {
        with_sectors!(&self.sectors, |v| v.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// What filecoin-proofs indexes without checking: at least one sector, each with
    /// challenge proofs.
    fn check_shape(&self, file: &str) -> Result<(), FilecoinError> {
        let shapes: Vec<Vec<usize>> = with_sectors!(&self.sectors, |v| v
            .iter()
            .map(|p| {
                p.vanilla_proof
                    .sectors
                    .iter()
                    .map(|s| s.inclusion_proofs.len())
                    .collect()
            })
            .collect());
        if shapes.is_empty() {
            return Err(FilecoinError::field(file, VANILLA, "no sector proofs"));
        }
        for (k, s) in shapes.iter().enumerate() {
            if s.is_empty() || s.contains(&0) {
                return Err(FilecoinError::field(
                    file,
                    VANILLA,
                    format!("sector proof {k} has no challenge proofs"),
                ));
            }
        }
        Ok(())
    }
}

fn comm_bytes<D: AsRef<[u8]>>(d: &D) -> [u8; 32] {
    let mut out = [0u8; 32];
    let b = d.as_ref();
    out[..b.len().min(32)].copy_from_slice(&b[..b.len().min(32)]);
    out
}

/// One bincode `T` per blob (filecoin-proofs-api's form: one per sector or partition); an
/// error names the `what` proof by its index.
pub(crate) fn bincode_each<T: DeserializeOwned>(
    file: &str,
    blobs: &[impl AsRef<[u8]>],
    what: &str,
) -> Result<Vec<T>, FilecoinError> {
    blobs
        .iter()
        .enumerate()
        .map(|(k, b)| {
            bincode::deserialize(b.as_ref())
                .map_err(|e| FilecoinError::field(file, VANILLA, format!("{what} proof {k}: {e}")))
        })
        .collect()
}

/// bincode (filecoin-proofs' fixed-width form) of a `Vec<T>`, read item by item so that an
/// error names the item.
pub(crate) fn bincode_vec<T: DeserializeOwned>(
    file: &str,
    bytes: &[u8],
) -> Result<Vec<T>, FilecoinError> {
    let mut r = bytes;
    let n: u64 = bincode::deserialize_from(&mut r)
        .map_err(|e| FilecoinError::field(file, VANILLA, format!("its length: {e}")))?;
    // Each item is far over 32 bytes: a longer list than that is not this file's.
    if n > (bytes.len() / 32) as u64 {
        return Err(FilecoinError::field(
            file,
            VANILLA,
            format!("{n} sector proofs in {} bytes", bytes.len()),
        ));
    }
    let mut out = Vec::with_capacity(n as usize);
    for k in 0..n {
        let item = bincode::deserialize_from(&mut r).map_err(|e| {
            FilecoinError::field(file, VANILLA, format!("sector proof {k} of {n}: {e}"))
        })?;
        out.push(item);
    }
    if !r.is_empty() {
        return Err(FilecoinError::field(
            file,
            VANILLA,
            format!("{} bytes after the last sector proof", r.len()),
        ));
    }
    Ok(out)
}

/// What a PoSt proves: the challenge randomness and the prover (the miner).
#[derive(Clone, Copy, Debug)]
pub struct PostStatement {
    pub randomness: [u8; 32],
    pub prover_id: [u8; 32],
}

/// A PoSt proof: filecoin-proofs' 192 bytes.
#[derive(Clone, Debug)]
pub struct PostProofBytes {
    pub bytes: Vec<u8>,
    pub timings: ProofTimings,
}

type Domain<Tree> = <<Tree as MerkleTreeTrait>::Hasher as Hasher>::Domain;

/// The circuit of one PoSt partition and the public inputs filecoin-proofs' verifier will
/// compute for it.
pub(crate) struct PostCircuit<Tree: 'static + MerkleTreeTrait> {
    pub(crate) circuit: PostPartition<Tree>,
    pub(crate) inputs: Vec<blstrs::Scalar>,
}

/// A PoSt partition's circuit and, beside it, each sector's challenge paths as the vanilla
/// proofs give them (the circuit keeps its paths opaque), for its parts.
pub(crate) struct PostPartition<Tree: 'static + MerkleTreeTrait> {
    pub(crate) circuit: FallbackPoStCircuit<Tree>,
    paths: Vec<Vec<Path>>,
}

impl<Tree: 'static + MerkleTreeTrait> PostPartition<Tree> {
    /// `circuit` of `proof`'s sectors, in order.
    fn new(circuit: FallbackPoStCircuit<Tree>, proof: &fallback::Proof<Tree::Proof>) -> Self {
        let paths = proof.sectors.iter().map(|s| s.as_options()).collect();
        Self { circuit, paths }
    }
}

fn statement_field<Tree: MerkleTreeTrait>(
    value: &[u8; 32],
    field: &'static str,
) -> Result<Domain<Tree>, FilecoinError> {
    as_safe_commitment(value, field)
        .map_err(|e| FilecoinError::field("PoSt statement", field, format!("{e:#}")))
}

fn vanilla_rejected(file: &str, e: anyhow::Error) -> FilecoinError {
    FilecoinError::field(
        file,
        VANILLA,
        format!("filecoin-proofs rejects them for this randomness, prover id and partition: {e:#}"),
    )
}

/// WindowPoSt partition `partition` as `generate_single_window_post_with_vanilla` builds it
/// (`vanilla` holds that partition's sectors).
fn window_circuit<Tree: 'static + MerkleTreeTrait>(
    file: &str,
    config: &PoStConfig,
    st: &PostStatement,
    vanilla: &[FallbackPoStSectorProof<Tree>],
    partition: usize,
) -> Result<PostCircuit<Tree>, FilecoinError> {
    let randomness = statement_field::<Tree>(&st.randomness, "randomness")?;
    let prover_id = statement_field::<Tree>(&st.prover_id, "prover_id")?;
    let vanilla_params = window_post_setup_params(config);
    // filecoin-proofs' `get_partitions_for_window_post` (crate-private there).
    let partitions = vanilla.len().div_ceil(config.sector_count);
    let setup = compound_proof::SetupParams {
        vanilla_params,
        partitions: (partitions > 1).then_some(partitions),
        priority: config.priority,
    };
    let pub_params: compound_proof::PublicParams<'_, FallbackPoSt<'_, Tree>> =
        FallbackPoStCompound::setup(&setup).map_err(upstream)?;
    let sectors = public_sectors(vanilla);
    let pub_inputs = fallback::PublicInputs {
        randomness,
        prover_id,
        sectors: sectors.clone(),
        k: Some(partition),
    };
    let partition_proof =
        single_partition_vanilla_proofs(config, &pub_params.vanilla_params, &pub_inputs, vanilla)
            .map_err(|e| vanilla_rejected(file, e))?;
    // `prove_with_vanilla` → `circuit_proofs` numbers its one partition 0.
    let circuit = FallbackPoStCompound::<Tree>::circuit(
        &pub_inputs,
        Default::default(),
        &partition_proof,
        &pub_params.vanilla_params,
        Some(0),
    )
    .map_err(FilecoinError::circuit(partition))?;
    let circuit = PostPartition::new(circuit, &partition_proof);
    // The verifier sees every sector and takes partition k's chunk: earlier chunks are
    // stand-ins here, as only partition k's are read.
    let mut all = vec![sectors[0].clone(); partition * pub_params.vanilla_params.sector_count];
    all.extend(sectors);
    let verifier_inputs = fallback::PublicInputs {
        randomness,
        prover_id,
        sectors: all,
        k: None,
    };
    let inputs = FallbackPoStCompound::<Tree>::generate_public_inputs(
        &verifier_inputs,
        &pub_params.vanilla_params,
        Some(partition),
    )
    .map_err(upstream)?;
    Ok(PostCircuit { circuit, inputs })
}

/// WinningPoSt as `generate_winning_post_with_vanilla` builds it.
fn winning_circuit<Tree: 'static + MerkleTreeTrait>(
    file: &str,
    config: &PoStConfig,
    st: &PostStatement,
    vanilla: &[FallbackPoStSectorProof<Tree>],
) -> Result<PostCircuit<Tree>, FilecoinError> {
    if vanilla.len() != config.sector_count {
        return Err(FilecoinError::field(
            file,
            VANILLA,
            format!(
                "{} sector proofs, but WinningPoSt proves {}",
                vanilla.len(),
                config.sector_count
            ),
        ));
    }
    let randomness = statement_field::<Tree>(&st.randomness, "randomness")?;
    let prover_id = statement_field::<Tree>(&st.prover_id, "prover_id")?;
    let vanilla_params = winning_post_setup_params(config).map_err(upstream)?;
    let param_sector_count = vanilla_params.sector_count;
    let setup = compound_proof::SetupParams {
        vanilla_params,
        partitions: None,
        priority: config.priority,
    };
    let pub_params: compound_proof::PublicParams<'_, FallbackPoSt<'_, Tree>> =
        FallbackPoStCompound::setup(&setup).map_err(upstream)?;
    let sectors = public_sectors(vanilla);
    let pub_inputs = fallback::PublicInputs {
        randomness,
        prover_id,
        sectors: sectors.clone(),
        k: None,
    };
    let partitions = pub_params.partitions.unwrap_or(1);
    let mut partition_proofs = partition_vanilla_proofs(
        config,
        &pub_params.vanilla_params,
        &pub_inputs,
        partitions,
        vanilla,
    )
    .map_err(|e| vanilla_rejected(file, e))?;
    if partition_proofs.len() != 1 {
        return Err(FilecoinError::field(
            file,
            VANILLA,
            format!("{} partitions; WinningPoSt has one", partition_proofs.len()),
        ));
    }
    let partition_proof = partition_proofs.swap_remove(0);
    let circuit = FallbackPoStCompound::<Tree>::circuit(
        &pub_inputs,
        Default::default(),
        &partition_proof,
        &pub_params.vanilla_params,
        Some(0),
    )
    .map_err(FilecoinError::circuit(0))?;
    let circuit = PostPartition::new(circuit, &partition_proof);
    // `verify_winning_post` repeats the sectors once per challenge slot.
    let verifier_inputs = fallback::PublicInputs {
        randomness,
        prover_id,
        sectors: (0..param_sector_count)
            .flat_map(|_| sectors.clone())
            .collect(),
        k: None,
    };
    let inputs = FallbackPoStCompound::<Tree>::generate_public_inputs(
        &verifier_inputs,
        &pub_params.vanilla_params,
        Some(0),
    )
    .map_err(upstream)?;
    Ok(PostCircuit { circuit, inputs })
}

pub(crate) fn post_circuit<Tree: 'static + MerkleTreeTrait>(
    file: &str,
    proof: PostProof,
    st: &PostStatement,
    vanilla: &[FallbackPoStSectorProof<Tree>],
    partition: usize,
) -> Result<(String, PostCircuit<Tree>), FilecoinError> {
    let config = proof.config()?;
    let id = config.get_cache_identifier::<Tree>().map_err(upstream)?;
    let circuit = match proof.kind {
        PostKind::Window => window_circuit(file, &config, st, vanilla, partition)?,
        PostKind::Winning if partition == 0 => winning_circuit(file, &config, st, vanilla)?,
        PostKind::Winning => {
            return Err(FilecoinError::field(
                "PoSt statement",
                "partition",
                format!("{partition}: WinningPoSt has partition 0 only"),
            ));
        }
    };
    Ok((id, circuit))
}

/// A PoSt partition's parts: each sector's head (its comm_r_last, comm_c and comm_r and their
/// hash), then each of its challenges (its inclusion proof), each a group of one, written
/// natively (see `native_witness`).
impl<Tree: 'static + MerkleTreeTrait> PartitionCircuit for PostPartition<Tree> {
    type Circuit = FallbackPoStCircuit<Tree>;
    type Part = PostSection<Tree>;

    fn whole(self) -> Result<FallbackPoStCircuit<Tree>, FilecoinError> {
        Ok(self.circuit)
    }

    /// Replicated from one sector of one challenge: every sector and every challenge has one
    /// shape (checked on one sector of two challenges and two sectors of one).
    fn compile(self, partition: usize) -> Result<(CompiledCircuit, Witness), FilecoinError> {
        let bad = |reason: &str| FilecoinError::field("vanilla proofs", VANILLA, reason);
        let prover_id = self.circuit.prover_id;
        let sectors = &self.circuit.sectors;
        let with = |sectors: Vec<Sector<Tree>>| FallbackPoStCircuit { prover_id, sectors };
        // A sector of its first challenge, `n` times over.
        let first = |s: &Sector<Tree>, n: usize| -> Result<Sector<Tree>, FilecoinError> {
            let (Some(leaf), Some(path)) = (s.leafs.first(), s.paths.first()) else {
                return Err(bad("a sector without challenges"));
            };
            Ok(Sector {
                leafs: vec![*leaf; n],
                paths: vec![path.clone(); n],
                ..s.clone()
            })
        };
        let s0 = sectors.first().ok_or_else(|| bad("no sectors"))?;
        let one = with(vec![first(s0, 1)?]);
        let two = with(vec![first(s0, 2)?]);
        let checks = match sectors.get(1) {
            Some(s1) => vec![(vec![1, 1], with(vec![first(s0, 1)?, first(s1, 1)?]))],
            None => vec![],
        };
        let groups: Vec<usize> = sectors.iter().map(|s| s.leafs.len()).collect();
        let compiled = CompiledCircuit::replicate(one, two, checks, &groups)
            .map_err(synthesis_error(partition))?;
        let witness = compiled
            .witness_of_parts(self.parts()?, None)
            .map_err(synthesis_error(partition))?;
        Ok((compiled, witness))
    }

    fn parts(self) -> Result<Vec<Vec<PostSection<Tree>>>, FilecoinError> {
        let bad = |reason: String| FilecoinError::field("vanilla proofs", VANILLA, reason);
        let missing = || bad("a sector value is missing".into());
        if self.paths.len() != self.circuit.sectors.len() {
            return Err(bad("paths of other sectors".into()));
        }
        let mut sections = Vec::new();
        for (i, (s, paths)) in self.circuit.sectors.into_iter().zip(self.paths).enumerate() {
            let root = |r: Option<blstrs::Scalar>| r.ok_or_else(missing);
            sections.push(vec![PostSection::Head([
                root(s.comm_r_last)?,
                root(s.comm_c)?,
                root(s.comm_r)?,
            ])]);
            if paths.len() != s.leafs.len() {
                let (l, p) = (s.leafs.len(), paths.len());
                return Err(bad(format!("sector {i}: {l} leaves, {p} paths")));
            }
            for (leaf, path) in s.leafs.iter().zip(paths) {
                let leaf = leaf.ok_or_else(missing)?;
                let challenge = PostSection::challenge(leaf, path)
                    .map_err(|e| bad(format!("sector {i}: {e}")))?;
                sections.push(vec![challenge]);
            }
        }
        Ok(sections)
    }
}

/// The circuit of PoSt partition `partition`, synthesized as `how` says, its public inputs
/// checked against filecoin-proofs' verifier's.
pub(crate) fn synthesize_partition<S: Synth>(
    file: &str,
    vanilla: &PostVanilla,
    st: &PostStatement,
    partition: usize,
    how: S,
) -> Result<S::Out, FilecoinError> {
    with_sectors!(&vanilla.sectors, |v| {
        let (id, c) = post_circuit(file, vanilla.proof, st, v, partition)?;
        let out = how.run(c.circuit, partition)?;
        check_inputs(&id, &c.inputs, S::witness(&out))?;
        Ok(out)
    })
}

/// The witness's public inputs are the ones filecoin-proofs' verifier computes.
fn check_inputs(
    id: &str,
    expected: &[blstrs::Scalar],
    w: &cuzk_groth16::Witness,
) -> Result<(), FilecoinError> {
    let found = w.public_inputs();
    if found.len() != expected.len() {
        return Err(FilecoinError::PublicInputs {
            circuit: id.to_string(),
            reason: format!(
                "{} public inputs, filecoin-proofs' verifier computes {}",
                found.len(),
                expected.len()
            ),
        });
    }
    if let Some(i) = expected
        .iter()
        .zip(found)
        .position(|(e, f)| cuzk_bellpepper::fr_from_scalar(e) != *f)
    {
        return Err(FilecoinError::PublicInputs {
            circuit: id.to_string(),
            reason: format!("input {i} is not the one filecoin-proofs' verifier computes"),
        });
    }
    Ok(())
}

impl FilecoinProver {
    /// One WindowPoSt partition's proof (192 bytes) from that partition's vanilla proofs, as
    /// `generate_single_window_post_with_vanilla` makes it.
    pub fn prove_window_post(
        &self,
        file: &str,
        vanilla: &PostVanilla,
        st: &PostStatement,
        partition: usize,
        rng: &mut dyn rand::RngCore,
    ) -> Result<PostProofBytes, FilecoinError> {
        self.expect_kind(file, vanilla, PostKind::Window)?;
        self.prove_post(file, vanilla, st, partition, rng)
    }

    /// A WinningPoSt proof (192 bytes), as `generate_winning_post_with_vanilla` makes it.
    pub fn prove_winning_post(
        &self,
        file: &str,
        vanilla: &PostVanilla,
        st: &PostStatement,
        rng: &mut dyn rand::RngCore,
    ) -> Result<PostProofBytes, FilecoinError> {
        self.expect_kind(file, vanilla, PostKind::Winning)?;
        self.prove_post(file, vanilla, st, 0, rng)
    }

    fn expect_kind(
        &self,
        file: &str,
        vanilla: &PostVanilla,
        kind: PostKind,
    ) -> Result<(), FilecoinError> {
        if vanilla.proof.kind != kind {
            return Err(FilecoinError::field(
                file,
                "registered_proof",
                format!("{}, not a {kind:?}PoSt proof", vanilla.proof),
            ));
        }
        Ok(())
    }

    fn prove_post(
        &self,
        file: &str,
        vanilla: &PostVanilla,
        st: &PostStatement,
        partition: usize,
        rng: &mut dyn rand::RngCore,
    ) -> Result<PostProofBytes, FilecoinError> {
        let mut timings = ProofTimings::default();
        let start = Instant::now();
        let bytes = with_sectors!(&vanilla.sectors, |v| {
            let (id, c) = post_circuit(file, vanilla.proof, st, v, partition)?;
            timings.circuits = start.elapsed();
            let inputs = c.inputs;
            self.prove_circuits(
                &id,
                vec![c.circuit],
                partition,
                &mut timings,
                |_, w| check_inputs(&id, &inputs, w),
                rng,
            )?
        });
        Ok(PostProofBytes { bytes, timings })
    }
}

impl ParamStore {
    /// Generates the parameters of `vanilla`'s PoSt circuit with cuzk's CPU setup from random
    /// toxic waste, unless they are there already, under filecoin-proofs' names; the circuit
    /// is built from `vanilla` (valid for `st`). For tests and private networks. Returns
    /// whether it generated them.
    pub fn generate_post(
        &self,
        vanilla: &PostVanilla,
        st: &PostStatement,
        rng: &mut dyn rand::RngCore,
    ) -> Result<bool, FilecoinError> {
        let size = vanilla.proof.sector.sector_size();
        let id = Self::post_circuit_id(vanilla.proof)?;
        let file = "vanilla proofs";
        with_sectors!(&vanilla.sectors, |v| self.generate_circuit(
            &id,
            size,
            || Ok(post_circuit(file, vanilla.proof, st, v, 0)?
                .1
                .circuit
                .circuit),
            rng
        ))
    }

    /// filecoin-proofs' cache id of a PoSt circuit (its files are `v28-{id}.params`, `.vk`).
    pub fn post_circuit_id(proof: PostProof) -> Result<String, FilecoinError> {
        let config = proof.config()?;
        with_shape!(
            proof.sector,
            Tree,
            config.get_cache_identifier::<Tree>().map_err(upstream)
        )
    }
}

/// filecoin-proofs' `verify_window_post` of a whole WindowPoSt (every partition's 192 bytes,
/// in order) over `sectors` (id, comm_r), in the order they were proven. `store` must be
/// filecoin-proofs' parameter directory (`FIL_PROOFS_PARAMETER_CACHE`).
pub fn verify_window_post(
    proof: PostProof,
    st: &PostStatement,
    sectors: &[(u64, [u8; 32])],
    bytes: &[u8],
    store: &ParamStore,
) -> Result<bool, FilecoinError> {
    check_verifier_dir(store)?;
    proof.require(PostKind::Window)?;
    let config = proof.config()?;
    let replicas: BTreeMap<SectorId, PublicReplicaInfo> = sectors
        .iter()
        .map(|&(id, comm_r)| Ok((SectorId::from(id), replica(comm_r)?)))
        .collect::<Result<_, FilecoinError>>()?;
    if replicas.len() != sectors.len() {
        return Err(FilecoinError::field(
            "PoSt statement",
            "sectors",
            "a sector id appears twice",
        ));
    }
    with_shape!(
        proof.sector,
        Tree,
        filecoin_proofs::verify_window_post::<Tree>(
            &config,
            &st.randomness,
            &replicas,
            st.prover_id,
            bytes,
        )
        .map_err(upstream)
    )
}

/// filecoin-proofs' `verify_winning_post` of a WinningPoSt over `sectors` (id, comm_r).
pub fn verify_winning_post(
    proof: PostProof,
    st: &PostStatement,
    sectors: &[(u64, [u8; 32])],
    bytes: &[u8],
    store: &ParamStore,
) -> Result<bool, FilecoinError> {
    check_verifier_dir(store)?;
    proof.require(PostKind::Winning)?;
    let config = proof.config()?;
    let replicas: Vec<(SectorId, PublicReplicaInfo)> = sectors
        .iter()
        .map(|&(id, comm_r)| Ok((SectorId::from(id), replica(comm_r)?)))
        .collect::<Result<_, FilecoinError>>()?;
    with_shape!(
        proof.sector,
        Tree,
        filecoin_proofs::verify_winning_post::<Tree>(
            &config,
            &st.randomness,
            &replicas,
            st.prover_id,
            bytes,
        )
        .map_err(upstream)
    )
}

fn replica(comm_r: [u8; 32]) -> Result<PublicReplicaInfo, FilecoinError> {
    PublicReplicaInfo::new(comm_r)
        .map_err(|e| FilecoinError::field("PoSt statement", "comm_r", format!("{e:#}")))
}

/// The sectors the vanilla proofs speak of, as the circuit's public inputs name them.
fn public_sectors<Tree: 'static + MerkleTreeTrait>(
    vanilla: &[FallbackPoStSectorProof<Tree>],
) -> Vec<PublicSector<Domain<Tree>>> {
    vanilla
        .iter()
        .map(|p| PublicSector {
            id: p.sector_id,
            comm_r: p.comm_r,
        })
        .collect()
}

impl PostProof {
    /// This proof is of `kind`, else an error naming the statement's registered proof.
    pub(crate) fn require(self, kind: PostKind) -> Result<(), FilecoinError> {
        if self.kind == kind {
            return Ok(());
        }
        Err(FilecoinError::field(
            "PoSt statement",
            "registered_proof",
            format!("{self} is not a {kind:?}PoSt proof"),
        ))
    }
}
