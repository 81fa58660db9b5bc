//! Which backend proves: the GPU when one is usable, the CPU otherwise, or as asked.

use core::str::FromStr;

use crate::backend::{CpuBackend, ProverBackend};

/// Which engine proves: `Auto` takes the GPU when a device is present and the kernels are
/// built, otherwise the CPU; `Gpu` fails (with the reason) rather than falling back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BackendChoice {
    #[default]
    Auto,
    Cpu,
    Gpu,
}

impl FromStr for BackendChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "auto" => Ok(Self::Auto),
            "cpu" => Ok(Self::Cpu),
            "gpu" => Ok(Self::Gpu),
            _ => Err(format!("unknown backend {s:?} (expected auto, cpu or gpu)")),
        }
    }
}

/// The GPU backend could not be opened; says why (no driver, no device, kernels not built).
#[derive(Debug, thiserror::Error)]
/// (The reason is in the message, not a source, so error chains do not print it twice.)
#[error("the GPU backend is not available: {0}")]
pub struct GpuUnavailable(pub cuzk_gpu::GpuError);

/// Resolves a choice to a backend (see [`BackendChoice`]).
pub fn select_backend(choice: BackendChoice) -> Result<Box<dyn ProverBackend>, GpuUnavailable> {
    match choice {
        BackendChoice::Cpu => Ok(Box::new(CpuBackend)),
        BackendChoice::Gpu => Ok(Box::new(open_gpu()?)),
        BackendChoice::Auto => {
            let b: Box<dyn ProverBackend> = match open_gpu() {
                Ok(g) => Box::new(g),
                Err(e) => {
                    tracing::info!(reason = %e, "using the CPU backend");
                    Box::new(CpuBackend)
                }
            };
            Ok(b)
        }
    }
}

fn open_gpu() -> Result<crate::gpu::GpuBackend, GpuUnavailable> {
    if !cuzk_gpu::driver_present() {
        return Err(GpuUnavailable(cuzk_gpu::GpuError::NoDriver));
    }
    let gpu = cuzk_gpu::Gpu::first().map_err(GpuUnavailable)?;
    if !cuzk_gpu::kernels_built() {
        return Err(GpuUnavailable(cuzk_gpu::GpuError::KernelsNotBuilt));
    }
    Ok(crate::gpu::GpuBackend::new(gpu))
}
