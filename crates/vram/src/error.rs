use std::time::Duration;

/// Errors of the VRAM / pinned-memory layer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VramError {
    /// The request can never be satisfied: it is larger than the whole budget.
    #[error("request of {requested} bytes exceeds the whole {kind} budget of {total} bytes")]
    ExceedsBudget {
        kind: &'static str,
        requested: u64,
        total: u64,
    },
    /// `try_*` path: not enough budget free right now.
    #[error("{kind} budget exhausted: requested {requested} bytes, {available} available")]
    OutOfBudget {
        kind: &'static str,
        requested: u64,
        available: u64,
    },
    /// Blocking acquire gave up.
    #[error("timed out after {waited:?} waiting for {requested} bytes of {kind} budget")]
    Timeout {
        kind: &'static str,
        requested: u64,
        waited: Duration,
    },
    /// A driver call failed; `name` is the CUDA error name (e.g. `CUDA_ERROR_OUT_OF_MEMORY`).
    #[error("CUDA error {name} in {op}")]
    Backend { op: &'static str, name: String },
    /// Length × element size overflowed, or a part larger than what is held was released.
    #[error("invalid size: {0}")]
    InvalidSize(String),
    /// Host and device lengths differ in a copy.
    #[error("length mismatch: buffer has {expected} elements, slice has {got}")]
    LengthMismatch { expected: usize, got: usize },
    /// Configuration (env var) could not be parsed.
    #[error("invalid configuration {key}={value:?}: {reason}")]
    Config {
        key: &'static str,
        value: String,
        reason: String,
    },
}

/// The CUDA driver's name for an allocation it could not serve.
pub const CUDA_OUT_OF_MEMORY: &str = "CUDA_ERROR_OUT_OF_MEMORY";

impl VramError {
    /// Whether the driver itself ran out of device memory (not the budget: see
    /// [`Self::is_out_of_budget`]).
    pub fn is_out_of_memory(&self) -> bool {
        matches!(self, Self::Backend { name, .. } if name == CUDA_OUT_OF_MEMORY)
    }

    /// Whether the budget had no room for the request, now or ever.
    pub fn is_out_of_budget(&self) -> bool {
        matches!(self, Self::OutOfBudget { .. } | Self::ExceedsBudget { .. })
    }
}

pub type Result<T, E = VramError> = std::result::Result<T, E>;
