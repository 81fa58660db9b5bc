//! A trivial kernel (`kernels/test/smoke.cu`) that checks the whole path: embedded fatbin,
//! module loading, struct parameters, checked launch, copies.

use cuzk_gpu::shared::{CUZK_DEFAULT_BLOCK, cuzk_smoke_params};
use cuzk_gpu::{DeviceBuffer, Gpu, GpuError, LaunchConfig, Module, Result, Stream};

const MODULE: &Module = &crate::embedded::SMOKE;

/// Host reference of the device pattern: `out[i] = pattern(i, seed)`.
pub fn pattern(i: u32, seed: u32) -> u32 {
    let x = i.wrapping_mul(2_654_435_761) ^ seed;
    x ^ (x >> 15)
}

/// Fills `out` with `pattern(i, seed)` on `stream` (asynchronous).
pub fn fill(gpu: &Gpu, stream: &Stream, out: &mut DeviceBuffer<u32>, seed: u32) -> Result<()> {
    let n = u32::try_from(out.len()).map_err(|_| GpuError::InvalidLaunch {
        kernel: "cuzk_smoke_fill".into(),
        reason: "more than 2^32 elements".into(),
    })?;
    if n == 0 {
        return Ok(());
    }
    let params = cuzk_smoke_params { n, seed };
    let cfg = LaunchConfig::for_elements(out.len(), CUZK_DEFAULT_BLOCK)?;
    // SAFETY: the kernel writes out[i] for i < params.n == out.len() only; `out` is borrowed
    // mutably here, and callers must sync `stream` before reading it (DeviceBuffer copies do).
    unsafe { gpu.launch(stream, MODULE, "cuzk_smoke_fill", cfg, &[&*out, &params]) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Launches whose arguments do not match the kernel signature, or whose grid is invalid,
    /// are rejected before reaching the driver; a correct launch then works.
    #[test]
    #[ignore = "gpu"]
    fn gpu_launch_rejects_wrong_arguments() {
        let gpu = Gpu::first()
            .unwrap_or_else(|e| panic!("this GPU test needs a CUDA GPU and built kernels: {e}"));
        let s = gpu.stream("launch-checks").unwrap();
        let mut out = gpu.alloc::<u32>(1024).unwrap();
        let p = cuzk_smoke_params { n: 1024, seed: 7 };
        let cfg = LaunchConfig::for_elements(1024, 256).unwrap();
        let invalid = |r: Result<()>| match r {
            Err(GpuError::InvalidLaunch { reason, .. }) => reason,
            other => panic!("expected InvalidLaunch, got {other:?}"),
        };
        // SAFETY (all below): rejected before launch, or the correct call as in `fill`.
        let r = invalid(unsafe { gpu.launch(&s, MODULE, "cuzk_smoke_fill", cfg, &[&out]) });
        assert!(r.contains("sizes"), "{r}");
        let r = invalid(unsafe { gpu.launch(&s, MODULE, "cuzk_smoke_fill", cfg, &[&out, &7u32]) });
        assert!(r.contains("sizes"), "{r}");
        let bad = LaunchConfig {
            block: (2048, 1, 1),
            ..cfg
        };
        assert!(
            invalid(unsafe { gpu.launch(&s, MODULE, "cuzk_smoke_fill", bad, &[&out, &p]) })
                .contains("1024")
        );
        let e = unsafe { gpu.launch(&s, MODULE, "no_such_kernel", cfg, &[&out, &p]) }.unwrap_err();
        assert!(
            matches!(&e, GpuError::Cuda { op: "cuModuleGetFunction", name } if name == "CUDA_ERROR_NOT_FOUND"),
            "{e}"
        );
        let e = crate::KERNELS.module("nope").unwrap_err();
        assert_eq!(e, GpuError::UnknownModule("nope".into()));
        fill(&gpu, &s, &mut out, 7).unwrap();
        let mut host = vec![0u32; 1024];
        out.copy_to_host_on(&mut host, s.cuda()).unwrap();
        assert!(
            host.iter()
                .enumerate()
                .all(|(i, &v)| v == pattern(i as u32, 7))
        );
    }
}
