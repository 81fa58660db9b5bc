/// Why a domain could not be built or a transform could not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NttError {
    #[error("domain of size 2^{log_n} is not supported: the limit is 2^{max}")]
    LogSizeTooLarge { log_n: u32, max: u32 },
    #[error("no supported power-of-two domain holds {min_n} elements")]
    SizeTooLarge { min_n: usize },
    #[error("input has length {got}, the domain has size {expected}")]
    LengthMismatch { expected: usize, got: usize },
}
