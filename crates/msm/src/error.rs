use thiserror::Error;

#[derive(Debug, Error)]
#[non_exhaustive]
pub enum MsmError {
    #[error("MSM over {points} points with {scalars} scalars: the lengths must be equal")]
    LengthMismatch { points: usize, scalars: usize },
    #[error("MSM of {0} points: at most 2^27 are supported")]
    TooLarge(usize),
    #[error(
        "the VRAM budget cannot hold even the smallest MSM chunk ({needed} bytes needed, {available} available)"
    )]
    NoRoom { needed: u64, available: u64 },
    #[error("not supported: {0}")]
    Unsupported(&'static str),
    #[error(transparent)]
    Gpu(#[from] cuzk_gpu::GpuError),
}

impl MsmError {
    /// Whether the driver ran out of device memory.
    pub fn is_out_of_memory(&self) -> bool {
        matches!(self, Self::Gpu(e) if e.is_out_of_memory())
    }

    /// Whether the device budget had no room (for the MSM, or even for its smallest chunk).
    pub fn is_out_of_budget(&self) -> bool {
        match self {
            Self::NoRoom { .. } => true,
            Self::Gpu(e) => e.is_out_of_budget(),
            _ => false,
        }
    }
}

impl From<cuzk_gpu::VramError> for MsmError {
    fn from(e: cuzk_gpu::VramError) -> Self {
        Self::Gpu(e.into())
    }
}
