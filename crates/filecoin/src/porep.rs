//! PoRep C2: the partition circuits of a C1 output, exactly as filecoin-proofs'
//! `seal_commit_phase2` builds them, and filecoin-proofs' verifier.

use std::time::Duration;

use filecoin_hashers::{Domain as _, Hasher};
use filecoin_proofs::{
    DefaultPieceDomain, DefaultPieceHasher, MerkleTreeTrait, PoRepConfig, SealCommitPhase1Output,
    as_safe_commitment, parameters::setup_params,
};
use storage_proofs_core::compound_proof::{self, CompoundProof};
use storage_proofs_core::sector::SectorId;
use storage_proofs_porep::stacked::{self, StackedCircuit, StackedCompound, StackedDrg};

use crate::c1::with_phase1;
use crate::error::upstream;
use crate::native_witness::{ChallengeWitness, Head, PorepSection};
use crate::params::check_verifier_dir;
use crate::seal_proof::with_shape;
use crate::synth::{PartitionCircuit, Synth, synthesis_error};
use crate::{C1Output, FilecoinError, ParamStore, SealProof};
use cuzk_bellpepper::CompiledCircuit;
use cuzk_groth16::Witness;

/// A PoRep C2 proof: filecoin-proofs' bytes (192 per partition, in partition order).
#[derive(Clone, Debug)]
pub struct PorepProof {
    pub bytes: Vec<u8>,
    pub timings: ProofTimings,
}

/// Where a C2's time went (kept under its first name: the CLI and daemon print it).
pub type PorepTimings = ProofTimings;

/// Where a proof's time went: PoRep C2, WindowPoSt or WinningPoSt.
#[derive(Clone, Debug, Default)]
pub struct ProofTimings {
    /// Building the partition circuits from the vanilla proofs (for PoSt: checking them with
    /// filecoin-proofs first, as its prover does; PoRep builds each challenge's circuit as it
    /// synthesizes it, so that goes to `synthesis`).
    pub circuits: Duration,
    /// Loading the parameters (only when this circuit was not loaded before).
    pub load_params: Option<Duration>,
    /// Synthesis of every partition: the first proof of a circuit compiles it (a full
    /// synthesis of partition 0), the rest synthesize witnesses only.
    pub synthesis: Duration,
    /// Each partition's proof, in partition order.
    pub partitions: Vec<Duration>,
    /// The index of `partitions[0]` (a WindowPoSt partition is proven alone).
    pub first_partition: usize,
}

impl std::fmt::Display for ProofTimings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ms = |d: &Duration| d.as_secs_f64() * 1e3;
        writeln!(f, "circuits       {:>10.1} ms", ms(&self.circuits))?;
        if let Some(d) = &self.load_params {
            writeln!(f, "load params    {:>10.1} ms", ms(d))?;
        }
        writeln!(f, "synthesis      {:>10.1} ms", ms(&self.synthesis))?;
        for (k, d) in self.partitions.iter().enumerate() {
            let k = k + self.first_partition;
            writeln!(f, "prove part. {k:<2} {:>10.1} ms", ms(d))?;
        }
        Ok(())
    }
}

/// The partition circuits of a C1 output, built as `seal_commit_phase2` →
/// `StackedCompound::circuit_proofs` builds them.
pub(crate) struct PorepCircuits<'a, Tree: 'static + MerkleTreeTrait> {
    public_inputs: stacked::PublicInputs<<Tree::Hasher as Hasher>::Domain, DefaultPieceDomain>,
    public_params: stacked::PublicParams<Tree>,
    vanilla: &'a [Vec<stacked::Proof<Tree, DefaultPieceHasher>>],
}

impl<'a, Tree: 'static + MerkleTreeTrait> PorepCircuits<'a, Tree> {
    pub(crate) fn new(
        seal_proof: SealProof,
        c1: &'a SealCommitPhase1Output<Tree>,
    ) -> Result<Self, FilecoinError> {
        let file = "C1 output";
        for (field, value) in [
            ("comm_d", &c1.comm_d),
            ("comm_r", &c1.comm_r),
            ("seed", &c1.seed),
        ] {
            if *value == [0; 32] {
                return Err(FilecoinError::field(file, field, "all zero"));
            }
        }
        let comm_r = as_safe_commitment(&c1.comm_r, "comm_r")
            .map_err(|e| FilecoinError::field(file, "comm_r", format!("{e:#}")))?;
        let comm_d = DefaultPieceDomain::try_from_bytes(&c1.comm_d)
            .map_err(|e| FilecoinError::field(file, "comm_d", format!("{e:#}")))?;
        let public_inputs = stacked::PublicInputs {
            replica_id: c1.replica_id,
            tau: Some(stacked::Tau { comm_d, comm_r }),
            k: None,
            seed: Some(c1.seed),
        };
        let config = seal_proof.config();
        let setup = compound_proof::SetupParams {
            vanilla_params: setup_params(&config).map_err(upstream)?,
            partitions: Some(usize::from(config.partitions)),
            priority: false,
        };
        let public_params = <StackedCompound<Tree, DefaultPieceHasher> as CompoundProof<
            StackedDrg<'_, Tree, DefaultPieceHasher>,
            _,
        >>::setup(&setup)
        .map_err(upstream)?
        .vanilla_params;
        Ok(Self {
            public_inputs,
            public_params,
            vanilla: &c1.vanilla_proofs,
        })
    }

    /// The number of partitions.
    pub(crate) fn len(&self) -> usize {
        self.vanilla.len()
    }

    /// Partition `k`'s circuit.
    pub(crate) fn partition(&self, k: usize) -> Result<PorepPartition<'_, Tree>, FilecoinError> {
        if k >= self.len() {
            return Err(FilecoinError::field(
                "C1 output",
                "vanilla_proofs",
                format!("{} partitions, no partition {k}", self.len()),
            ));
        }
        Ok(PorepPartition { circuits: self, k })
    }

    /// Partition `k`'s shared values, as `StackedCompound::circuit` takes them (every
    /// challenge with the same comm_r_last and comm_c).
    fn head(&self, k: usize) -> Result<Head, FilecoinError> {
        let proofs = &self.vanilla[k];
        let reason = |reason: &str| FilecoinError::Circuit {
            partition: k,
            reason: reason.into(),
        };
        let first = proofs.first().ok_or_else(|| reason("no challenges"))?;
        let (comm_r_last, comm_c) = (first.comm_r_last(), first.comm_c());
        if proofs.iter().any(|p| p.comm_r_last() != comm_r_last) {
            return Err(reason("inconsistent comm_r_lasts"));
        }
        if proofs.iter().any(|p| p.comm_c() != comm_c) {
            return Err(reason("inconsistent comm_cs"));
        }
        let tau = self
            .public_inputs
            .tau
            .as_ref()
            .ok_or_else(|| reason("no comm_d, comm_r"))?;
        Ok(Head {
            replica_id: self.public_inputs.replica_id.into(),
            comm_d: tau.comm_d.into(),
            comm_r: tau.comm_r.into(),
            comm_r_last: comm_r_last.into(),
            comm_c: comm_c.into(),
        })
    }

    /// Partition `k`'s circuit over `proofs` (its challenges' vanilla proofs, or some of them).
    fn circuit(
        &self,
        k: usize,
        proofs: &Vec<stacked::Proof<Tree, DefaultPieceHasher>>,
    ) -> Result<StackedCircuit<Tree, DefaultPieceHasher>, FilecoinError> {
        // StackedCircuit has no private component inputs: `()`.
        StackedCompound::<Tree, DefaultPieceHasher>::circuit(
            &self.public_inputs,
            (),
            proofs,
            &self.public_params,
            Some(k),
        )
        .map_err(FilecoinError::circuit(k))
    }
}

/// One PoRep partition. Its parts are sections, each a group of its own: the head (replica id
/// and its bits, comm_d, comm_r, comm_r_last, comm_c and their hash), then each challenge's
/// sections (`PorepSection`).
pub(crate) struct PorepPartition<'a, Tree: 'static + MerkleTreeTrait> {
    circuits: &'a PorepCircuits<'a, Tree>,
    k: usize,
}

impl<Tree: 'static + MerkleTreeTrait> PartitionCircuit for PorepPartition<'_, Tree> {
    type Circuit = StackedCircuit<Tree, DefaultPieceHasher>;
    type Part = PorepSection<Tree>;

    fn whole(self) -> Result<Self::Circuit, FilecoinError> {
        self.circuits
            .circuit(self.k, &self.circuits.vanilla[self.k])
    }

    /// Replicated from the head and one challenge (checked on the head and two): every
    /// challenge has one shape.
    fn compile(self, partition: usize) -> Result<(CompiledCircuit, Witness), FilecoinError> {
        let (circuits, k) = (self.circuits, self.k);
        let Some(first) = circuits.vanilla[k].first() else {
            return Err(FilecoinError::Circuit {
                partition: k,
                reason: "no challenges".into(),
            });
        };
        let one = circuits.circuit(k, &vec![first.clone()])?;
        let two = circuits.circuit(k, &vec![first.clone(); 2])?;
        let groups = [circuits.vanilla[k].len()];
        let compiled = CompiledCircuit::replicate(one, two, vec![], &groups)
            .map_err(synthesis_error(partition))?;
        let witness = compiled
            .witness_of_parts(self.parts()?, None)
            .map_err(synthesis_error(partition))?;
        Ok((compiled, witness))
    }

    /// The head, then every challenge's sections, written natively (see `native_witness`).
    fn parts(self) -> Result<Vec<Vec<PorepSection<Tree>>>, FilecoinError> {
        let k = self.k;
        let head = self.circuits.head(k)?;
        let mut sections = vec![vec![PorepSection::Head(head)]];
        for (i, proof) in self.circuits.vanilla[k].iter().enumerate() {
            let challenge =
                ChallengeWitness::new(head, proof).map_err(|e| FilecoinError::Circuit {
                    partition: k,
                    reason: format!("challenge {i}: {e}"),
                })?;
            sections.extend(challenge.sections().map(|s| vec![s]));
        }
        Ok(sections)
    }
}

/// filecoin-proofs' cache id of the PoRep circuit of `seal_proof`.
pub(crate) fn porep_cache_id(seal_proof: SealProof) -> Result<String, FilecoinError> {
    with_shape!(seal_proof, Tree, seal_proof.cache_id::<Tree>())
}

/// Partition `k`'s circuit, synthesized as `how` says.
pub(crate) fn synthesize_partition<S: Synth>(
    c1: &C1Output,
    k: usize,
    how: S,
) -> Result<S::Out, FilecoinError> {
    with_phase1!(&c1.phase1, |o| {
        how.run(PorepCircuits::new(c1.seal_proof, o)?.partition(k)?, k)
    })
}

/// Curio's prover id of a miner actor: the actor id as unsigned LEB128 (an ID address's
/// payload), zero padded to 32 bytes.
pub fn prover_id_from_miner(miner_id: u64) -> [u8; 32] {
    let mut id = [0u8; 32];
    let mut v = miner_id;
    for byte in id.iter_mut() {
        *byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            break;
        }
        *byte |= 0x80;
    }
    id
}

/// filecoin-proofs' `verify_seal` of a C2 proof. filecoin-proofs reads the verifying key from
/// its own settings (`FIL_PROOFS_PARAMETER_CACHE`, read once per process): `store` must be
/// that directory, or this is an error saying so.
pub fn verify_porep(
    c1: &C1Output,
    proof: &[u8],
    prover_id: [u8; 32],
    sector_id: u64,
    store: &ParamStore,
) -> Result<bool, FilecoinError> {
    check_verifier_dir(store)?;
    let config = c1.seal_proof.config();
    with_phase1!(&c1.phase1, |o| verify_tree(
        &config, o, proof, prover_id, sector_id
    ))
}

/// filecoin-proofs' own `seal_commit_phase2` of `c1` (its prover, on the CPU: this build of
/// filecoin-proofs has no GPU features), for comparison with cuzk's. It reads the parameters
/// from its own settings as [`verify_porep`] does (`store` must be that directory), and checks
/// its proof with `verify_seal` before returning it.
pub fn filecoin_proofs_c2(
    c1: &C1Output,
    prover_id: [u8; 32],
    sector_id: u64,
    store: &ParamStore,
) -> Result<Vec<u8>, FilecoinError> {
    check_verifier_dir(store)?;
    let config = c1.seal_proof.config();
    with_phase1!(&c1.phase1, |o| seal_commit_phase2_tree(
        &config, o, prover_id, sector_id
    ))
}

fn seal_commit_phase2_tree<Tree: 'static + MerkleTreeTrait>(
    config: &PoRepConfig,
    c1: &SealCommitPhase1Output<Tree>,
    prover_id: [u8; 32],
    sector_id: u64,
) -> Result<Vec<u8>, FilecoinError> {
    // It takes the C1 output by value, and that is Clone only for Clone trees: a serde round
    // trip copies it.
    let copy = serde_json::to_vec(c1)
        .and_then(|json| serde_json::from_slice::<SealCommitPhase1Output<Tree>>(&json))
        .map_err(|e| FilecoinError::FilecoinProofs(format!("copying the C1 output: {e}")))?;
    filecoin_proofs::seal_commit_phase2(config, copy, prover_id, SectorId::from(sector_id))
        .map(|out| out.proof)
        .map_err(upstream)
}

fn verify_tree<Tree: 'static + MerkleTreeTrait>(
    config: &PoRepConfig,
    c1: &SealCommitPhase1Output<Tree>,
    proof: &[u8],
    prover_id: [u8; 32],
    sector_id: u64,
) -> Result<bool, FilecoinError> {
    filecoin_proofs::verify_seal::<Tree>(
        config,
        c1.comm_r,
        c1.comm_d,
        prover_id,
        SectorId::from(sector_id),
        c1.ticket,
        c1.seed,
        proof,
    )
    .map_err(upstream)
}

impl ParamStore {
    /// Generates the parameters of `c1`'s PoRep circuit with cuzk's CPU setup from random
    /// toxic waste, unless they are there already, and writes them under filecoin-proofs'
    /// names (see [`ParamStore::write_generated`]). For tests and private networks: Filecoin's
    /// own parameters come from its trusted setup. Returns whether it generated them.
    pub fn generate_porep(
        &self,
        c1: &C1Output,
        rng: &mut dyn rand::RngCore,
    ) -> Result<bool, FilecoinError> {
        with_phase1!(&c1.phase1, |o| self.generate_porep_tree(
            c1.seal_proof,
            o,
            rng
        ))
    }

    fn generate_porep_tree<Tree: 'static + MerkleTreeTrait>(
        &self,
        seal_proof: SealProof,
        c1: &SealCommitPhase1Output<Tree>,
        rng: &mut dyn rand::RngCore,
    ) -> Result<bool, FilecoinError> {
        let id = seal_proof.cache_id::<Tree>()?;
        self.generate_circuit(
            &id,
            seal_proof.sector_size(),
            || PorepCircuits::new(seal_proof, c1)?.partition(0)?.whole(),
            rng,
        )
    }
}
