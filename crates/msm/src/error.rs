use thiserror::Error;

#[derive(Debug, Error)]
#[non_exhaustive]
pub enum MsmError {
    #[error("MSM over {points} points with {scalars} scalars: the lengths must be equal")]
    LengthMismatch { points: usize, scalars: usize },
}
