//! A Filecoin proof split into its partitions, for a prover that runs each partition as a job
//! of its own (the daemon's engine): the circuit it needs, that circuit compiled from one
//! partition, and each partition's witness by witness-only synthesis.

use std::ops::Range;

use cuzk_bellpepper::CompiledCircuit;
use cuzk_groth16::{Witness, WitnessBuffer};

use crate::synth::{CompileCircuit, Synth, WitnessOnly};
use crate::{
    C1Output, FilecoinError, ParamStore, PostKind, PostProof, PostStatement, PostVanilla,
    SealProof, SnapStatement, SnapVanilla,
};

/// The Filecoin proof kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProofKind {
    PorepC2,
    WindowPost,
    WinningPost,
    SnapDeals,
}

impl ProofKind {
    pub const ALL: [ProofKind; 4] = [
        ProofKind::PorepC2,
        ProofKind::WindowPost,
        ProofKind::WinningPost,
        ProofKind::SnapDeals,
    ];

    /// curio's circuit-name prefix.
    fn prefix(self) -> &'static str {
        match self {
            ProofKind::PorepC2 => "porep",
            ProofKind::WindowPost => "wpost",
            ProofKind::WinningPost => "winning",
            ProofKind::SnapDeals => "snap",
        }
    }
}

/// One Filecoin circuit: a proof kind at a sector size. Named as curio names them
/// (`porep-32g`, `wpost-32g`, `winning-32g`, `snap-64g`; `2k`, `8m` and `512m` for the small
/// sizes). WindowPoSt's API versions share one circuit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CircuitName {
    pub kind: ProofKind,
    pub sector: SealProof,
}

fn size_tag(sector: SealProof) -> &'static str {
    match sector {
        SealProof::StackedDrg2KiBV1_1 => "2k",
        SealProof::StackedDrg8MiBV1_1 => "8m",
        SealProof::StackedDrg512MiBV1_1 => "512m",
        SealProof::StackedDrg32GiBV1_1 => "32g",
        SealProof::StackedDrg64GiBV1_1 => "64g",
    }
}

impl CircuitName {
    /// filecoin-proofs' cache id of the circuit: its parameter files are `v28-{id}.params` and
    /// `.vk`.
    pub fn cache_id(self) -> Result<String, FilecoinError> {
        match self.kind {
            ProofKind::PorepC2 => crate::porep::porep_cache_id(self.sector),
            ProofKind::WindowPost => ParamStore::post_circuit_id(PostProof::window(self.sector)),
            ProofKind::WinningPost => ParamStore::post_circuit_id(PostProof::winning(self.sector)),
            ProofKind::SnapDeals => Ok(crate::snap::snap_cache_id(self.sector)),
        }
    }
}

impl std::fmt::Display for CircuitName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.kind.prefix(), size_tag(self.sector))
    }
}

impl std::str::FromStr for CircuitName {
    type Err = FilecoinError;

    fn from_str(s: &str) -> Result<Self, FilecoinError> {
        ProofKind::ALL
            .into_iter()
            .flat_map(|kind| SealProof::ALL.map(|sector| CircuitName { kind, sector }))
            .find(|c| c.to_string() == s)
            .ok_or_else(|| FilecoinError::UnknownCircuit(s.to_string()))
    }
}

#[derive(Debug)]
enum Input {
    Porep(C1Output),
    Post {
        file: String,
        vanilla: PostVanilla,
        st: PostStatement,
        partition: usize,
    },
    Snap {
        file: String,
        vanilla: SnapVanilla,
        st: SnapStatement,
    },
}

/// A Filecoin proof whose partitions are proven one by one by the caller. The proof is the
/// partitions' Groth16 proofs in filecoin-proofs' layout (192 bytes each), in the order of
/// [`Self::partitions`].
#[derive(Debug)]
pub struct PartitionedProof {
    circuit: CircuitName,
    cache_id: String,
    input: Input,
}

impl PartitionedProof {
    /// PoRep C2 of a C1 output.
    pub fn porep(c1: C1Output) -> Result<Self, FilecoinError> {
        Ok(Self {
            circuit: CircuitName {
                kind: ProofKind::PorepC2,
                sector: c1.seal_proof,
            },
            cache_id: c1.circuit_id()?,
            input: Input::Porep(c1),
        })
    }

    /// One WindowPoSt partition, from that partition's vanilla proofs (`file` names them in
    /// errors).
    pub fn window_post(
        file: &str,
        vanilla: PostVanilla,
        st: PostStatement,
        partition: usize,
    ) -> Result<Self, FilecoinError> {
        Self::post(file, vanilla, st, partition, PostKind::Window)
    }

    /// A WinningPoSt.
    pub fn winning_post(
        file: &str,
        vanilla: PostVanilla,
        st: PostStatement,
    ) -> Result<Self, FilecoinError> {
        Self::post(file, vanilla, st, 0, PostKind::Winning)
    }

    fn post(
        file: &str,
        vanilla: PostVanilla,
        st: PostStatement,
        partition: usize,
        kind: PostKind,
    ) -> Result<Self, FilecoinError> {
        vanilla.proof.require(kind)?;
        let name = match kind {
            PostKind::Window => ProofKind::WindowPost,
            PostKind::Winning => ProofKind::WinningPost,
        };
        Ok(Self {
            circuit: CircuitName {
                kind: name,
                sector: vanilla.proof.sector,
            },
            cache_id: ParamStore::post_circuit_id(vanilla.proof)?,
            input: Input::Post {
                file: file.to_string(),
                vanilla,
                st,
                partition,
            },
        })
    }

    /// A SnapDeals update; its partition proofs are checked here, once, by filecoin-proofs.
    pub fn snap(
        file: &str,
        vanilla: SnapVanilla,
        st: SnapStatement,
    ) -> Result<Self, FilecoinError> {
        crate::snap::check(file, &vanilla, &st)?;
        Ok(Self {
            circuit: CircuitName {
                kind: ProofKind::SnapDeals,
                sector: vanilla.seal_proof,
            },
            cache_id: crate::snap::snap_cache_id(vanilla.seal_proof),
            input: Input::Snap {
                file: file.to_string(),
                vanilla,
                st,
            },
        })
    }

    pub fn circuit(&self) -> CircuitName {
        self.circuit
    }

    /// filecoin-proofs' cache id of the circuit (it names the parameter files).
    pub fn cache_id(&self) -> &str {
        &self.cache_id
    }

    /// The partition numbers proven, in the proof's order.
    pub fn partitions(&self) -> Range<usize> {
        match &self.input {
            Input::Porep(c1) => 0..c1.partitions(),
            Input::Post { partition, .. } => *partition..*partition + 1,
            Input::Snap { vanilla, .. } => 0..crate::snap::partition_count(vanilla),
        }
    }

    /// Compiles the circuit by a full synthesis of the first partition; returns it and that
    /// partition's witness. The key comes from elsewhere: the circuit's parameters mapped onto
    /// it (`BpParameters::into_proving_key`), or a key made for it.
    pub fn compile(&self) -> Result<(CompiledCircuit, Witness), FilecoinError> {
        self.synthesize(self.partitions().start, CompileCircuit)
    }

    /// Partition `partition`'s witness, by witness-only synthesis of `compiled` (this proof's
    /// circuit, compiled before), written into `reuse` if given (a finished witness of the
    /// same circuit).
    pub fn witness(
        &self,
        partition: usize,
        compiled: &CompiledCircuit,
        reuse: Option<WitnessBuffer>,
    ) -> Result<Witness, FilecoinError> {
        self.synthesize(partition, WitnessOnly { compiled, reuse })
    }

    fn synthesize<S: Synth>(&self, partition: usize, how: S) -> Result<S::Out, FilecoinError> {
        match &self.input {
            Input::Porep(c1) => crate::porep::synthesize_partition(c1, partition, how),
            Input::Post {
                file,
                vanilla,
                st,
                partition,
            } => crate::post::synthesize_partition(file, vanilla, st, *partition, how),
            Input::Snap { file, vanilla, st } => {
                crate::snap::synthesize_partition(file, vanilla, st, partition, how)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn circuits_are_named_as_curio_names_them_and_name_the_published_files() {
        for (name, kind, sector) in [
            (
                "porep-2k",
                ProofKind::PorepC2,
                SealProof::StackedDrg2KiBV1_1,
            ),
            (
                "wpost-8m",
                ProofKind::WindowPost,
                SealProof::StackedDrg8MiBV1_1,
            ),
            (
                "winning-512m",
                ProofKind::WinningPost,
                SealProof::StackedDrg512MiBV1_1,
            ),
            (
                "snap-64g",
                ProofKind::SnapDeals,
                SealProof::StackedDrg64GiBV1_1,
            ),
        ] {
            let c: CircuitName = name.parse().unwrap();
            assert_eq!((c.kind, c.sector), (kind, sector));
            assert_eq!(c.to_string(), name);
        }
        for bad in ["porep-3k", "post-2k", "porep32g", ""] {
            assert!(matches!(
                bad.parse::<CircuitName>(),
                Err(FilecoinError::UnknownCircuit(_))
            ));
        }
        // The 32 GiB ids are those of the published files curio's SRS manager names.
        for (name, id) in [
            (
                "porep-32g",
                "stacked-proof-of-replication-merkletree-poseidon_hasher-8-8-0-sha256_hasher-82a357d2f2ca81dc61bb45f4a762807aedee1b0a53fd6c4e77b46a01bfef7820",
            ),
            (
                "wpost-32g",
                "proof-of-spacetime-fallback-merkletree-poseidon_hasher-8-8-0-0377ded656c6f524f1618760bffe4e0a1c51d5a70c4509eedae8a27555733edc",
            ),
            (
                "winning-32g",
                "proof-of-spacetime-fallback-merkletree-poseidon_hasher-8-8-0-559e581f022bb4e4ec6e719e563bf0e026ad6de42e56c18714a2c692b1b88d7e",
            ),
            (
                "snap-32g",
                "empty-sector-update-merkletree-poseidon_hasher-8-8-0-3b7f44a9362e3985369454947bc94022e118211e49fd672d52bec1cbfd599d18",
            ),
        ] {
            let c: CircuitName = name.parse().unwrap();
            assert_eq!(c.cache_id().unwrap(), id, "{name}");
        }
    }
}
