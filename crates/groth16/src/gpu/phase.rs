//! The phases of a GPU proof, as named in its errors.

use std::error::Error;
use std::fmt;

use crate::backend::BackendError;
use crate::keys::Query;

/// The GPU backend's name in its errors.
pub(super) const NAME: &str = "gpu";

/// A phase of a GPU proof, named in errors and used by fault injection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Prepare,
    /// The witness's copy to the device, shared by the A, B and L MSMs.
    Upload,
    /// A, B, C times the witness (on the device, or on the host in pieces staged to it), and
    /// the check of every row.
    Evaluate,
    Quotient,
    Msm(Query),
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Phase::Prepare => f.write_str("prepare"),
            Phase::Upload => f.write_str("witness upload"),
            Phase::Evaluate => f.write_str("witness map"),
            Phase::Quotient => f.write_str("quotient"),
            Phase::Msm(q) => write!(f, "MSM {q}"),
        }
    }
}

/// A GPU failure and the phase it happened in (the source of the [`BackendError`]).
#[derive(Debug, thiserror::Error)]
#[error("{phase}: {source}")]
pub struct GpuPhaseError {
    pub phase: Phase,
    #[source]
    pub source: Box<dyn Error + Send + Sync>,
}

pub(super) fn fail(phase: Phase, e: impl Into<Box<dyn Error + Send + Sync>>) -> BackendError {
    BackendError::new(
        NAME,
        GpuPhaseError {
            phase,
            source: e.into(),
        },
    )
}

/// A key this backend does not hold the points of, or another key than the one it holds
/// ([`BackendErrorKind::HeldKey`](crate::BackendErrorKind::HeldKey)).
pub(super) fn refuse_key(phase: Phase, e: impl Into<Box<dyn Error + Send + Sync>>) -> BackendError {
    BackendError::held_key(
        NAME,
        GpuPhaseError {
            phase,
            source: e.into(),
        },
    )
}
