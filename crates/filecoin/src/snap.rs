//! SnapDeals (EmptySectorUpdate): every partition's circuit from the vanilla partition proofs
//! filecoin-proofs-api takes, built exactly as filecoin-proofs'
//! `generate_empty_sector_update_proof_with_vanilla` builds them, and filecoin-proofs'
//! `verify_empty_sector_update_proof`.

use std::time::Instant;

use filecoin_hashers::Hasher;
use filecoin_proofs::{
    DefaultPieceDomain, MerkleTreeTrait, SectorShapeBase, SectorShapeSub8, SectorShapeTop2,
    SectorUpdateConfig, TreeRHasher, verify_partition_proofs,
};
use storage_proofs_core::compound_proof::{self, CompoundProof};
use storage_proofs_core::parameter_cache::CacheableParameters;
use storage_proofs_update::{
    EmptySectorUpdateCircuit, EmptySectorUpdateCompound, PartitionProof, PublicInputs,
    PublicParams, SetupParams,
};

use crate::error::upstream;
use crate::native_snap::{self, SnapSection};
use crate::params::check_verifier_dir;
use crate::post::{VANILLA, bincode_each, bincode_vec};
use crate::seal_proof::with_shape;
use crate::synth::{PartitionCircuit, Synth};
use crate::{FilecoinError, FilecoinProver, ParamStore, ProofTimings, SealProof};

/// What a SnapDeals proof proves: the sector key's comm_r, and the updated replica's comm_r and
/// data commitment.
#[derive(Clone, Copy, Debug)]
pub struct SnapStatement {
    pub comm_r_old: [u8; 32],
    pub comm_r_new: [u8; 32],
    pub comm_d_new: [u8; 32],
}

/// The vanilla partition proofs of a SnapDeals update, typed by the sector's tree shape.
#[derive(Debug)]
pub struct SnapVanilla {
    pub seal_proof: SealProof,
    pub(crate) proofs: Proofs,
}

pub(crate) enum Proofs {
    Base(Vec<PartitionProof<SectorShapeBase>>),
    Sub8(Vec<PartitionProof<SectorShapeSub8>>),
    Top2(Vec<PartitionProof<SectorShapeTop2>>),
}

macro_rules! with_proofs {
    ($p:expr, |$v:ident| $body:expr) => {
        match $p {
            $crate::snap::Proofs::Base($v) => $body,
            $crate::snap::Proofs::Sub8($v) => $body,
            $crate::snap::Proofs::Top2($v) => $body,
        }
    };
}
#[cfg(test)]
pub(crate) use with_proofs;

// The proofs' types do not implement Debug: their count says enough.
impl std::fmt::Debug for Proofs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = with_proofs!(self, |v| v.len());
        write!(f, "{n} partition proofs")
    }
}

/// A SnapDeals proof: filecoin-proofs' bytes (192 per partition, in partition order).
#[derive(Clone, Debug)]
pub struct SnapProof {
    pub bytes: Vec<u8>,
    pub timings: ProofTimings,
}

impl SnapVanilla {
    /// bincode of `Vec<PartitionProof<Tree>>`, one per partition (`file` names it in errors);
    /// `seal_proof` names the sector size.
    pub fn parse(file: &str, bytes: &[u8], seal_proof: SealProof) -> Result<Self, FilecoinError> {
        let proofs = match seal_proof {
            SealProof::StackedDrg2KiBV1_1
            | SealProof::StackedDrg8MiBV1_1
            | SealProof::StackedDrg512MiBV1_1 => Proofs::Base(bincode_vec(file, bytes)?),
            SealProof::StackedDrg32GiBV1_1 => Proofs::Sub8(bincode_vec(file, bytes)?),
            SealProof::StackedDrg64GiBV1_1 => Proofs::Top2(bincode_vec(file, bytes)?),
        };
        Self::checked(file, seal_proof, proofs)
    }

    /// filecoin-proofs-api's form: one bincode `PartitionProof<Tree>` per partition.
    pub fn from_partition_proofs(
        file: &str,
        blobs: &[impl AsRef<[u8]>],
        seal_proof: SealProof,
    ) -> Result<Self, FilecoinError> {
        let proofs = match seal_proof {
            SealProof::StackedDrg2KiBV1_1
            | SealProof::StackedDrg8MiBV1_1
            | SealProof::StackedDrg512MiBV1_1 => {
                Proofs::Base(bincode_each(file, blobs, "partition")?)
            }
            SealProof::StackedDrg32GiBV1_1 => Proofs::Sub8(bincode_each(file, blobs, "partition")?),
            SealProof::StackedDrg64GiBV1_1 => Proofs::Top2(bincode_each(file, blobs, "partition")?),
        };
        Self::checked(file, seal_proof, proofs)
    }

    fn checked(file: &str, seal_proof: SealProof, proofs: Proofs) -> Result<Self, FilecoinError> {
        let expected = partitions(seal_proof);
        let found = with_proofs!(&proofs, |v| v.len());
        if found != expected {
            return Err(FilecoinError::field(
                file,
                VANILLA,
                format!("{found} partition proofs, but a {seal_proof} update has {expected}"),
            ));
        }
        Ok(Self { seal_proof, proofs })
    }
}

fn partitions(seal_proof: SealProof) -> usize {
    usize::from(SectorUpdateConfig::from_porep_config(&seal_proof.config()).update_partitions)
}

fn statement_field<D: filecoin_hashers::Domain>(
    value: &[u8; 32],
    field: &'static str,
) -> Result<D, FilecoinError> {
    D::try_from_bytes(value)
        .map_err(|e| FilecoinError::field("SnapDeals statement", field, format!("{e:#}")))
}

type Circuits<Tree> = (String, Vec<EmptySectorUpdateCircuit<Tree>>);

/// The circuits of `parts` (partition numbers), as
/// `generate_empty_sector_update_proof_with_vanilla` → `prove_with_vanilla` → `circuit_proofs`
/// builds them, and filecoin-proofs' cache id; `check` runs filecoin-proofs' check of the
/// partition proofs first.
pub(crate) fn snap_circuits<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    file: &str,
    seal_proof: SealProof,
    st: &SnapStatement,
    proofs: &[PartitionProof<Tree>],
    parts: std::ops::Range<usize>,
    check: bool,
) -> Result<Circuits<Tree>, FilecoinError> {
    let comm_r_old =
        statement_field::<<TreeRHasher as Hasher>::Domain>(&st.comm_r_old, "comm_r_old")?;
    let comm_r_new =
        statement_field::<<TreeRHasher as Hasher>::Domain>(&st.comm_r_new, "comm_r_new")?;
    let comm_d_new = statement_field::<DefaultPieceDomain>(&st.comm_d_new, "comm_d_new")?;
    let config = SectorUpdateConfig::from_porep_config(&seal_proof.config());
    let partitions = usize::from(config.update_partitions);
    if check {
        check_partition_proofs(file, seal_proof, st, proofs)?;
    }
    let public_inputs = PublicInputs {
        k: partitions,
        comm_r_old,
        comm_d_new,
        comm_r_new,
        h: config.h,
    };
    let setup = compound_proof::SetupParams {
        vanilla_params: SetupParams {
            sector_bytes: u64::from(config.sector_size),
        },
        partitions: Some(partitions),
        priority: false,
    };
    let pub_params = EmptySectorUpdateCompound::<Tree>::setup(&setup).map_err(upstream)?;
    let Some(chosen) = proofs.get(parts.clone()) else {
        return Err(FilecoinError::field(
            file,
            VANILLA,
            format!("{} partition proofs, no partitions {parts:?}", proofs.len()),
        ));
    };
    let circuits = chosen
        .iter()
        .zip(parts)
        .map(|(vanilla, k)| {
            // No private component inputs: `()`.
            EmptySectorUpdateCompound::<Tree>::circuit(
                &public_inputs,
                (),
                vanilla,
                &pub_params.vanilla_params,
                Some(k),
            )
            .map_err(FilecoinError::circuit(k))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((cache_id::<Tree>(seal_proof), circuits))
}

/// filecoin-proofs proves partition proofs without checking them; a bad one would then fail
/// deep in circuit building. Its own check (`verify_partition_proofs`) comes first here.
fn check_partition_proofs<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    file: &str,
    seal_proof: SealProof,
    st: &SnapStatement,
    proofs: &[PartitionProof<Tree>],
) -> Result<(), FilecoinError> {
    let config = SectorUpdateConfig::from_porep_config(&seal_proof.config());
    let valid = verify_partition_proofs::<Tree>(
        config,
        proofs,
        st.comm_r_old,
        st.comm_r_new,
        st.comm_d_new,
    )
    .map_err(|e| FilecoinError::field(file, VANILLA, format!("{e:#}")))?;
    if !valid {
        return Err(FilecoinError::field(
            file,
            VANILLA,
            "filecoin-proofs rejects them for this comm_r_old, comm_r_new and comm_d_new",
        ));
    }
    Ok(())
}

/// filecoin-proofs' check of every partition proof of `vanilla`.
pub(crate) fn check(
    file: &str,
    vanilla: &SnapVanilla,
    st: &SnapStatement,
) -> Result<(), FilecoinError> {
    with_proofs!(&vanilla.proofs, |v| check_partition_proofs(
        file,
        vanilla.seal_proof,
        st,
        v
    ))
}

pub(crate) fn partition_count(vanilla: &SnapVanilla) -> usize {
    with_proofs!(&vanilla.proofs, |v| v.len())
}

/// Partition `k`'s circuit, synthesized as `how` says (the partition proofs checked before:
/// [`check`]).
pub(crate) fn synthesize_partition<S: Synth>(
    file: &str,
    vanilla: &SnapVanilla,
    st: &SnapStatement,
    k: usize,
    how: S,
) -> Result<S::Out, FilecoinError> {
    with_proofs!(&vanilla.proofs, |v| {
        let (_, mut c) = snap_circuits(file, vanilla.seal_proof, st, v, k..k + 1, false)?;
        how.run(SnapPartition::new(c.swap_remove(0), k), k)
    })
}

/// Partition `k`'s circuit: compiled by a full synthesis (it cannot be replicated from one
/// challenge: see `native_snap`), its witness in native sections, each on a core of its own.
pub(crate) struct SnapPartition<Tree: MerkleTreeTrait<Hasher = TreeRHasher>> {
    circuit: EmptySectorUpdateCircuit<Tree>,
    k: usize,
}

impl<Tree: MerkleTreeTrait<Hasher = TreeRHasher>> SnapPartition<Tree> {
    pub(crate) fn new(circuit: EmptySectorUpdateCircuit<Tree>, k: usize) -> Self {
        Self { circuit, k }
    }
}

impl<Tree: MerkleTreeTrait<Hasher = TreeRHasher>> PartitionCircuit for SnapPartition<Tree> {
    type Circuit = EmptySectorUpdateCircuit<Tree>;
    type Part = SnapSection;

    fn whole(self) -> Result<Self::Circuit, FilecoinError> {
        Ok(self.circuit)
    }

    fn parts(self) -> Result<Vec<Vec<SnapSection>>, FilecoinError> {
        let k = self.k;
        native_snap::sections(self.circuit).map_err(|reason| FilecoinError::Circuit {
            partition: k,
            reason,
        })
    }
}

/// filecoin-proofs' cache id of the update circuit of `seal_proof`.
pub(crate) fn snap_cache_id(seal_proof: SealProof) -> String {
    with_shape!(seal_proof, Tree, cache_id::<Tree>(seal_proof))
}

/// filecoin-proofs' cache id of the update circuit (as `get_empty_sector_update_params`).
fn cache_id<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    seal_proof: SealProof,
) -> String {
    let params = PublicParams::from_sector_size(seal_proof.sector_size());
    <EmptySectorUpdateCompound<Tree> as CacheableParameters<EmptySectorUpdateCircuit<Tree>, _>>::cache_identifier(&params)
}

impl FilecoinProver {
    /// A SnapDeals proof (192 bytes per partition), as
    /// `generate_empty_sector_update_proof_with_vanilla` makes it.
    pub fn prove_snap(
        &self,
        file: &str,
        vanilla: &SnapVanilla,
        st: &SnapStatement,
        rng: &mut dyn rand::RngCore,
    ) -> Result<SnapProof, FilecoinError> {
        let mut timings = ProofTimings::default();
        let start = Instant::now();
        let bytes = with_proofs!(&vanilla.proofs, |v| {
            let n = v.len();
            let (id, circuits) = snap_circuits(file, vanilla.seal_proof, st, v, 0..n, true)?;
            timings.circuits = start.elapsed();
            let circuits = circuits
                .into_iter()
                .enumerate()
                .map(|(k, circuit)| SnapPartition::new(circuit, k))
                .collect();
            self.prove_circuits(&id, circuits, 0, &mut timings, |_, _| Ok(()), rng)?
        });
        Ok(SnapProof { bytes, timings })
    }
}

impl ParamStore {
    /// Generates the SnapDeals circuit's parameters with cuzk's CPU setup from random toxic
    /// waste (built from `vanilla`, valid for `st`), unless they are there already, under
    /// filecoin-proofs' names. For tests and private networks. Returns whether it generated
    /// them.
    pub fn generate_snap(
        &self,
        vanilla: &SnapVanilla,
        st: &SnapStatement,
        rng: &mut dyn rand::RngCore,
    ) -> Result<bool, FilecoinError> {
        let seal_proof = vanilla.seal_proof;
        with_proofs!(&vanilla.proofs, |v| {
            let id = snap_cache_id(seal_proof);
            self.generate_circuit(
                &id,
                seal_proof.sector_size(),
                || {
                    Ok(
                        snap_circuits("vanilla proofs", seal_proof, st, v, 0..1, true)?
                            .1
                            .swap_remove(0),
                    )
                },
                rng,
            )
        })
    }
}

/// filecoin-proofs' `verify_empty_sector_update_proof`. `store` must be filecoin-proofs'
/// parameter directory (`FIL_PROOFS_PARAMETER_CACHE`).
pub fn verify_snap(
    seal_proof: SealProof,
    st: &SnapStatement,
    bytes: &[u8],
    store: &ParamStore,
) -> Result<bool, FilecoinError> {
    check_verifier_dir(store)?;
    let config = seal_proof.config();
    with_shape!(
        seal_proof,
        Tree,
        filecoin_proofs::verify_empty_sector_update_proof::<Tree>(
            &config,
            bytes,
            st.comm_r_old,
            st.comm_r_new,
            st.comm_d_new,
        )
        .map_err(upstream)
    )
}
