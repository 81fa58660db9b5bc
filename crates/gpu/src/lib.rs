//! CUDA device runtime for cuzk: device enumeration, one context per device, named streams,
//! events, the embedded kernel fatbins (built by `build.rs` from `kernels/*.cu`), and a
//! checked launch layer so that crates outside this one never need `unsafe`.
//!
//! Invariants: kernels never allocate; every device allocation goes through the device's
//! [`Vram`] budget; every launch checks its argument sizes against the kernel signature and
//! checks the launch result.

mod config;
mod device;
mod error;
pub mod ff;
mod module;
pub mod msm;
pub mod ntt;
mod report;
pub mod setup;
pub mod shared;
pub mod smoke;
pub mod transfer;

pub use config::Config;
pub use cuzk_vram::{
    Budget, BudgetConfig, DeviceBuffer, MemInfo, PinnedBuffer, Reclaim, RegisteredHost,
    Reservation, Vram, VramError,
};
pub use device::{DeviceInfo, Event, Gpu, Stream, device_count, driver_present};
pub use error::{GpuError, Result};
pub use module::{
    KernelArg, LaunchConfig, fatbin, kernel_archs, kernels_built, module_names, ptxas_report,
};
pub use report::devices_report;
