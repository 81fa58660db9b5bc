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

impl From<cuzk_gpu::VramError> for MsmError {
    fn from(e: cuzk_gpu::VramError) -> Self {
        Self::Gpu(e.into())
    }
}
