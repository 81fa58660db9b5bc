use cuzk_vram::VramError;

/// Errors of the GPU runtime. Every CUDA failure carries the driver's error name and the
/// operation that failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GpuError {
    #[error("no CUDA driver (libcuda) found on this machine")]
    NoDriver,
    #[error("no CUDA device found")]
    NoDevice,
    #[error("kernels were not built: run `cargo xtask setup-cuda` and rebuild")]
    KernelsNotBuilt,
    #[error("CUDA error {name} in {op}")]
    Cuda { op: &'static str, name: String },
    #[error("no kernel module {0:?} is embedded (expected kernels/{0}.cu)")]
    UnknownModule(String),
    #[error("invalid launch of {kernel}: {reason}")]
    InvalidLaunch { kernel: String, reason: String },
    #[error(transparent)]
    Vram(#[from] VramError),
}

impl GpuError {
    /// Whether the driver ran out of device memory (in a runtime call or an allocation).
    pub fn is_out_of_memory(&self) -> bool {
        match self {
            Self::Cuda { name, .. } => name == cuzk_vram::CUDA_OUT_OF_MEMORY,
            Self::Vram(e) => e.is_out_of_memory(),
            _ => false,
        }
    }

    /// Whether the device budget had no room for a request.
    pub fn is_out_of_budget(&self) -> bool {
        matches!(self, Self::Vram(e) if e.is_out_of_budget())
    }
}

pub type Result<T, E = GpuError> = std::result::Result<T, E>;

/// Maps a driver error of operation `op` to [`GpuError::Cuda`].
pub fn cuda(op: &'static str) -> impl Fn(cudarc::driver::DriverError) -> GpuError {
    move |e| GpuError::Cuda {
        op,
        name: cuzk_vram::cuda_error_name(&e),
    }
}

/// The reliability suite's injected failure of a driver call of kind `site`, if it is due.
pub(crate) fn injected(site: cuzk_vram::inject::Site, op: &'static str) -> Result<()> {
    if cuzk_vram::inject::fails(site) {
        return Err(GpuError::Cuda {
            op,
            name: cuzk_vram::inject::INJECTED.into(),
        });
    }
    Ok(())
}
