//! A trivial kernel (`kernels/smoke.cu`) that checks the whole path: embedded fatbin, module
//! loading, struct parameters, checked launch, copies.

use cuzk_vram::DeviceBuffer;

use crate::device::{Gpu, Stream};
use crate::error::{GpuError, Result};
use crate::module::LaunchConfig;
use crate::shared::{CUZK_DEFAULT_BLOCK, cuzk_smoke_params};

/// Host reference of the device pattern: `out[i] = pattern(i, seed)`.
pub fn pattern(i: u32, seed: u32) -> u32 {
    let x = i.wrapping_mul(2_654_435_761) ^ seed;
    x ^ (x >> 15)
}

/// Fills `out` with `pattern(i, seed)` on `stream` (asynchronous).
pub fn fill(gpu: &Gpu, stream: &Stream, out: &mut DeviceBuffer<u32>, seed: u32) -> Result<()> {
    let n = u32::try_from(out.len())
        .map_err(|_| GpuError::InvalidLaunch { kernel: "cuzk_smoke_fill".into(), reason: "more than 2^32 elements".into() })?;
    if n == 0 {
        return Ok(());
    }
    let params = cuzk_smoke_params { n, seed };
    let cfg = LaunchConfig::for_elements(out.len(), CUZK_DEFAULT_BLOCK)?;
    // SAFETY: the kernel writes out[i] for i < params.n == out.len() only; `out` is borrowed
    // mutably here, and callers must sync `stream` before reading it (DeviceBuffer copies do).
    unsafe { gpu.launch(stream, "smoke", "cuzk_smoke_fill", cfg, &[&*out, &params]) }
}
