use std::path::PathBuf;

use cuzk_bellpepper::batch::BatchError;
use cuzk_formats::FormatError;

/// Why a Filecoin proof could not be made or checked. Input errors name the file and the field.
#[derive(Debug, thiserror::Error)]
pub enum FilecoinError {
    #[error("{file}: at {path}: {source}")]
    Json {
        file: String,
        /// Where in the document serde stopped (`vanilla_proofs.StackedDrg2KiBV1[0][1]...`).
        path: String,
        source: serde_json::Error,
    },
    #[error("{file}: field {field}: {reason}")]
    Field {
        file: String,
        field: &'static str,
        reason: String,
    },
    #[error(
        "{file}: a bare SealCommitPhase1Output does not say its sector size: name the registered proof (e.g. StackedDrg2KiBV1_1)"
    )]
    SealProofNeeded { file: String },
    #[error(
        "unknown sector size {0} bytes: cuzk proves StackedDrg*V1_1 (2 KiB, 8 MiB, 512 MiB, 32 GiB, 64 GiB)"
    )]
    UnknownSectorSize(u64),
    #[error(
        "unknown seal proof {0:?}: StackedDrg{{2KiB,8MiB,512MiB,32GiB,64GiB}}V1_1 or the size alone (2KiB)"
    )]
    UnknownSealProof(String),
    #[error(
        "unknown PoSt proof {0:?}: StackedDrgWinning{{2KiB,8MiB,512MiB,32GiB,64GiB}}V1 or StackedDrgWindow{{size}}V1_2 (V1_1, the chain's name for it, and V1 too)"
    )]
    UnknownPostProof(String),
    #[error(
        "unknown circuit {0:?}: porep, wpost, winning or snap, a dash and the sector size (2k, 8m, 512m, 32g, 64g), e.g. porep-32g"
    )]
    UnknownCircuit(String),
    #[error("the {circuit} circuit: {reason}")]
    PublicInputs { circuit: String, reason: String },
    #[error("missing parameter file {path} (the {circuit} circuit)")]
    MissingParameters { path: PathBuf, circuit: String },
    #[error(transparent)]
    Format(#[from] FormatError),
    #[error("partition {partition}: building its circuit: {reason}")]
    Circuit { partition: usize, reason: String },
    #[error(
        "partition {partition}: {source} (the vanilla proofs do not satisfy the circuit, or the parameters are another circuit's)"
    )]
    Partition {
        partition: usize,
        source: Box<BatchError>,
    },
    #[error(transparent)]
    Batch(#[from] BatchError),
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    #[error("cuzk's setup of {circuit}: {reason}")]
    Setup { circuit: String, reason: String },
    #[error("filecoin-proofs: {0}")]
    FilecoinProofs(String),
    #[error(
        "filecoin-proofs reads verifying keys from {settings} (FIL_PROOFS_PARAMETER_CACHE), not from {store}: set FIL_PROOFS_PARAMETER_CACHE={store}"
    )]
    VerifierDir { settings: PathBuf, store: PathBuf },
    #[error(
        "{dir} holds parameter files but no {marker}: locally generated parameters are never written beside published ones"
    )]
    MixedParameters { dir: PathBuf, marker: &'static str },
}

impl FilecoinError {
    /// storage-proofs' `CompoundProof::circuit` refused partition `partition`'s circuit.
    pub(crate) fn circuit(partition: usize) -> impl FnOnce(anyhow::Error) -> Self {
        move |e| Self::Circuit {
            partition,
            reason: format!("{e:#}"),
        }
    }

    pub(crate) fn io(what: impl std::fmt::Display, source: std::io::Error) -> Self {
        Self::Io {
            what: what.to_string(),
            source,
        }
    }

    pub(crate) fn field(file: &str, field: &'static str, reason: impl Into<String>) -> Self {
        Self::Field {
            file: file.to_string(),
            field,
            reason: reason.into(),
        }
    }
}

/// filecoin-proofs' errors are `anyhow` chains: kept as their full text.
pub(crate) fn upstream(e: anyhow::Error) -> FilecoinError {
    FilecoinError::FilecoinProofs(format!("{e:#}"))
}
