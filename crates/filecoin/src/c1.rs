//! PoRep C1 output, in the three forms it travels in.

use base64::Engine as _;
use filecoin_proofs::{
    Commitment, DefaultTreeDomain, SealCommitPhase1Output, SectorShape2KiB, SectorShape8MiB,
    SectorShape32GiB, SectorShape64GiB, SectorShape512MiB, SectorShapeBase, SectorShapeSub8,
    SectorShapeTop2, Ticket, VanillaSealProof, parameters::setup_params,
};
use serde::Deserialize;
use serde::de::{DeserializeOwned, IgnoredAny};

use crate::error::upstream;
use crate::{FilecoinError, SealProof};

/// The form a C1 output came in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum C1Form {
    /// `serde_json` of filecoin-proofs' `SealCommitPhase1Output<Tree>`: no registered proof.
    FilecoinProofs,
    /// filecoin-proofs-api's `SealCommitPhase1Output` (what filecoin-ffi writes).
    ProofsApi,
    /// curio's `{"SectorNum","Phase1Out":base64(api JSON),"SectorSize"}`.
    Curio,
}

/// A parsed C1 output: the registered proof it is for and its vanilla proofs, typed by the
/// sector's tree shape.
#[derive(Debug)]
pub struct C1Output {
    pub seal_proof: SealProof,
    pub form: C1Form,
    /// curio's wrapper carries it; the other forms do not.
    pub sector_number: Option<u64>,
    pub(crate) phase1: Phase1,
}

/// `SealCommitPhase1Output` by tree shape (2 KiB, 8 MiB and 512 MiB sectors share one).
#[derive(Debug)]
pub(crate) enum Phase1 {
    Base(SealCommitPhase1Output<SectorShapeBase>),
    Sub8(SealCommitPhase1Output<SectorShapeSub8>),
    Top2(SealCommitPhase1Output<SectorShapeTop2>),
}

macro_rules! with_phase1 {
    ($p:expr, |$o:ident| $body:expr) => {
        match $p {
            $crate::c1::Phase1::Base($o) => $body,
            $crate::c1::Phase1::Sub8($o) => $body,
            $crate::c1::Phase1::Top2($o) => $body,
        }
    };
}
pub(crate) use with_phase1;

/// Which keys the top-level object has: enough to tell the forms apart.
#[derive(Deserialize)]
struct Probe {
    #[serde(rename = "Phase1Out")]
    phase1_out: Option<IgnoredAny>,
    registered_proof: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct Curio {
    #[serde(rename = "SectorNum")]
    sector_num: u64,
    #[serde(rename = "Phase1Out")]
    phase1_out: String,
    #[serde(rename = "SectorSize")]
    sector_size: u64,
}

/// filecoin-proofs-api's form; its proof variants are named `*V1` whatever the registered
/// proof's version.
#[derive(Deserialize)]
struct Api {
    registered_proof: SealProof,
    vanilla_proofs: ApiVanilla,
    comm_r: Commitment,
    comm_d: Commitment,
    replica_id: DefaultTreeDomain,
    seed: Ticket,
    ticket: Ticket,
}

#[derive(Deserialize)]
#[allow(clippy::enum_variant_names)]
enum ApiVanilla {
    StackedDrg2KiBV1(Vec<Vec<VanillaSealProof<SectorShape2KiB>>>),
    StackedDrg8MiBV1(Vec<Vec<VanillaSealProof<SectorShape8MiB>>>),
    StackedDrg512MiBV1(Vec<Vec<VanillaSealProof<SectorShape512MiB>>>),
    StackedDrg32GiBV1(Vec<Vec<VanillaSealProof<SectorShape32GiB>>>),
    StackedDrg64GiBV1(Vec<Vec<VanillaSealProof<SectorShape64GiB>>>),
}

fn json<T: DeserializeOwned>(file: &str, bytes: &[u8]) -> Result<T, FilecoinError> {
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(de).map_err(|e| FilecoinError::Json {
        file: file.to_string(),
        path: e.path().to_string(),
        source: e.into_inner(),
    })
}

impl C1Output {
    /// Parses C1 output bytes of any of the three forms (`file` names them in errors). The
    /// bare filecoin-proofs form does not say its sector size: `stated` must name it. When the
    /// bytes name their own registered proof, `stated` (if given) must agree.
    pub fn parse(
        file: &str,
        bytes: &[u8],
        stated: Option<SealProof>,
    ) -> Result<Self, FilecoinError> {
        let probe: Probe = json(file, bytes)?;
        let out = if probe.phase1_out.is_some() {
            let curio: Curio = json(file, bytes)?;
            let size = SealProof::from_sector_size(curio.sector_size)
                .map_err(|e| FilecoinError::field(file, "SectorSize", e.to_string()))?;
            let inner = base64::engine::general_purpose::STANDARD
                .decode(curio.phase1_out.as_bytes())
                .map_err(|e| FilecoinError::field(file, "Phase1Out", format!("not base64: {e}")))?;
            let inner_file = format!("{file} (Phase1Out)");
            let mut out = Self::parse_api(&inner_file, &inner)?;
            if out.seal_proof != size {
                return Err(FilecoinError::field(
                    file,
                    "SectorSize",
                    format!(
                        "{} bytes, but Phase1Out's registered_proof is {}",
                        curio.sector_size, out.seal_proof
                    ),
                ));
            }
            out.form = C1Form::Curio;
            out.sector_number = Some(curio.sector_num);
            out
        } else if probe.registered_proof.is_some() {
            Self::parse_api(file, bytes)?
        } else {
            let seal_proof = stated.ok_or_else(|| FilecoinError::SealProofNeeded {
                file: file.to_string(),
            })?;
            let phase1 = match seal_proof {
                SealProof::StackedDrg2KiBV1_1
                | SealProof::StackedDrg8MiBV1_1
                | SealProof::StackedDrg512MiBV1_1 => Phase1::Base(json(file, bytes)?),
                SealProof::StackedDrg32GiBV1_1 => Phase1::Sub8(json(file, bytes)?),
                SealProof::StackedDrg64GiBV1_1 => Phase1::Top2(json(file, bytes)?),
            };
            Self {
                seal_proof,
                form: C1Form::FilecoinProofs,
                sector_number: None,
                phase1,
            }
        };
        if let Some(stated) = stated.filter(|&s| s != out.seal_proof) {
            return Err(FilecoinError::field(
                file,
                "registered_proof",
                format!("{}, but {stated} was asked for", out.seal_proof),
            ));
        }
        out.check_partitions(file)?;
        Ok(out)
    }

    fn parse_api(file: &str, bytes: &[u8]) -> Result<Self, FilecoinError> {
        let api: Api = json(file, bytes)?;
        macro_rules! phase1 {
            ($variant:ident, $proofs:expr, $size:expr) => {{
                if api.registered_proof != $size {
                    return Err(FilecoinError::field(
                        file,
                        "vanilla_proofs",
                        format!(
                            "proofs of a {} sector, but registered_proof is {}",
                            $size, api.registered_proof
                        ),
                    ));
                }
                Phase1::$variant(SealCommitPhase1Output {
                    vanilla_proofs: $proofs,
                    comm_r: api.comm_r,
                    comm_d: api.comm_d,
                    replica_id: api.replica_id,
                    seed: api.seed,
                    ticket: api.ticket,
                })
            }};
        }
        let phase1 = match api.vanilla_proofs {
            ApiVanilla::StackedDrg2KiBV1(p) => phase1!(Base, p, SealProof::StackedDrg2KiBV1_1),
            ApiVanilla::StackedDrg8MiBV1(p) => phase1!(Base, p, SealProof::StackedDrg8MiBV1_1),
            ApiVanilla::StackedDrg512MiBV1(p) => {
                phase1!(Base, p, SealProof::StackedDrg512MiBV1_1)
            }
            ApiVanilla::StackedDrg32GiBV1(p) => phase1!(Sub8, p, SealProof::StackedDrg32GiBV1_1),
            ApiVanilla::StackedDrg64GiBV1(p) => phase1!(Top2, p, SealProof::StackedDrg64GiBV1_1),
        };
        Ok(Self {
            seal_proof: api.registered_proof,
            form: C1Form::ProofsApi,
            sector_number: None,
            phase1,
        })
    }

    /// One list of vanilla proofs per partition, as many as the proof has, each with the
    /// proof's challenge count (a partition short of challenges would build a smaller circuit).
    fn check_partitions(&self, file: &str) -> Result<(), FilecoinError> {
        let expected = self.seal_proof.partitions();
        let counts: Vec<usize> = with_phase1!(&self.phase1, |o| o
            .vanilla_proofs
            .iter()
            .map(Vec::len)
            .collect());
        if counts.len() != expected {
            return Err(FilecoinError::field(
                file,
                "vanilla_proofs",
                format!(
                    "{} partitions, but {} has {expected}",
                    counts.len(),
                    self.seal_proof
                ),
            ));
        }
        let challenges = setup_params(&self.seal_proof.config())
            .map_err(upstream)?
            .challenges
            .num_challenges_per_partition();
        if let Some(k) = counts.iter().position(|&n| n != challenges) {
            return Err(FilecoinError::field(
                file,
                "vanilla_proofs",
                format!(
                    "partition {k} has {} challenge proofs, but {} has {challenges}",
                    counts[k], self.seal_proof
                ),
            ));
        }
        Ok(())
    }

    pub fn comm_r(&self) -> Commitment {
        with_phase1!(&self.phase1, |o| o.comm_r)
    }

    pub fn comm_d(&self) -> Commitment {
        with_phase1!(&self.phase1, |o| o.comm_d)
    }

    pub fn seed(&self) -> Ticket {
        with_phase1!(&self.phase1, |o| o.seed)
    }

    pub fn ticket(&self) -> Ticket {
        with_phase1!(&self.phase1, |o| o.ticket)
    }

    /// filecoin-proofs' id of this proof's circuit: its parameter files are
    /// `v28-{id}.params` and `.vk` ([`crate::ParamStore::params_path`]).
    pub fn circuit_id(&self) -> Result<String, FilecoinError> {
        with_phase1!(&self.phase1, |o| tree_cache_id(self.seal_proof, o))
    }

    pub fn partitions(&self) -> usize {
        with_phase1!(&self.phase1, |o| o.vanilla_proofs.len())
    }
}

/// [`SealProof::cache_id`] with the tree shape taken from a C1 output.
fn tree_cache_id<Tree: 'static + filecoin_proofs::MerkleTreeTrait>(
    seal_proof: SealProof,
    _: &SealCommitPhase1Output<Tree>,
) -> Result<String, FilecoinError> {
    seal_proof.cache_id::<Tree>()
}
