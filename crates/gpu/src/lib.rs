//! CUDA device runtime for cuzk: device enumeration, one context per device, named streams,
//! events, module loading (each kernel crate embeds its own fatbins as [`Module`]s) and the
//! checked [`Gpu::launch`], which each kernel crate calls from its one launcher module.
//!
//! Invariants: kernels never allocate; every device allocation goes through the device's
//! [`Vram`] budget; every launch checks its argument sizes against the kernel signature and
//! checks the launch result.

mod config;
mod device;
mod error;
mod module;
mod report;
pub mod shared;
pub mod transfer;

pub use config::Config;
pub use cuzk_vram::{
    Budget, BudgetConfig, DeviceBuffer, MemInfo, PinnedBuffer, Reclaim, RegisteredHost,
    Reservation, Vram, VramError,
};
pub use device::{DeviceInfo, Event, Gpu, Stream, device_count, driver_present};
pub use error::{GpuError, Result, cuda as cuda_error};
pub use module::{
    KernelArg, KernelFit, Kernels, LaunchConfig, Module, kernel_archs, kernel_cuda_version,
    kernel_ptx, kernels_built,
};
pub use report::{devices_report, kernel_fit_line};
