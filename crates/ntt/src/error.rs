/// Why a domain could not be built or a transform could not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NttError {
    #[error("domain of size 2^{log_n} is not supported: the limit is 2^{max}")]
    LogSizeTooLarge { log_n: u32, max: u32 },
    #[error("no supported power-of-two domain holds {min_n} elements")]
    SizeTooLarge { min_n: usize },
    #[error("input has length {got}, the domain has size {expected}")]
    LengthMismatch { expected: usize, got: usize },
    #[error(
        "a batch of {got} elements is not a whole number (1..=65535) of polynomials of size {n}"
    )]
    BadBatch { n: usize, got: usize },
    #[error(
        "{what} needs {bytes} bytes of device memory, more than the whole VRAM budget of {budget} bytes"
    )]
    DoesNotFit {
        what: &'static str,
        bytes: u64,
        budget: u64,
    },
    #[error(transparent)]
    Gpu(#[from] cuzk_gpu::GpuError),
}

impl NttError {
    /// Whether the driver ran out of device memory.
    pub fn is_out_of_memory(&self) -> bool {
        matches!(self, Self::Gpu(e) if e.is_out_of_memory())
    }

    /// Whether the device budget had no room.
    pub fn is_out_of_budget(&self) -> bool {
        match self {
            Self::DoesNotFit { .. } => true,
            Self::Gpu(e) => e.is_out_of_budget(),
            _ => false,
        }
    }
}

impl From<cuzk_gpu::VramError> for NttError {
    fn from(e: cuzk_gpu::VramError) -> Self {
        Self::Gpu(e.into())
    }
}
