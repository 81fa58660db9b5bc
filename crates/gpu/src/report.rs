//! Text for `cuzk devices`.

use std::fmt::Write as _;

use cuzk_vram::BudgetConfig;

use crate::device::{Gpu, device_count, driver_present};
use crate::module::{
    KernelFit, Kernels, kernel_archs, kernel_cuda_version, kernel_ptx, kernels_built,
};

fn gib(b: u64) -> String {
    format!("{:.2} GiB", b as f64 / (1u64 << 30) as f64)
}

/// Each GPU (name, compute capability, SMs, total/free memory) and the budget the allocator
/// uses with the current settings (env `CUZK_VRAM_LIMIT`, ...). Says so plainly when there is
/// no driver or no GPU. Never fails: errors become lines of the report.
///
/// `kernels` are the build's kernel sets (`cuzk_groth16::kernel_sets()`): where a GPU has no
/// machine code in the binary, they are loaded now, and the line says how long the driver's
/// compilation of their PTX took.
pub fn devices_report(kernels: &[&Kernels]) -> String {
    let mut s = String::new();
    let cfg = match crate::Config::get() {
        Ok(c) => c.budget.clone(),
        Err(e) => {
            let _ = writeln!(s, "invalid budget configuration: {e}; using defaults");
            BudgetConfig::default()
        }
    };
    if kernels_built() {
        let _ = writeln!(
            s,
            "kernels: built for {} (+{} PTX) by CUDA {}",
            kernel_archs(),
            kernel_ptx(),
            kernel_cuda_version()
        );
    } else {
        let _ = writeln!(s, "kernels: {}", crate::GpuError::KernelsNotBuilt);
    }
    if !driver_present() {
        let _ = writeln!(
            s,
            "No CUDA driver (libcuda) found: no GPU available on this machine."
        );
        return s;
    }
    let n = match device_count() {
        Ok(n) => n,
        Err(e) => {
            let _ = writeln!(s, "CUDA driver present but device query failed: {e}");
            return s;
        }
    };
    if n == 0 {
        let _ = writeln!(s, "CUDA driver present, but no GPU found.");
        return s;
    }
    let limit = cfg.vram_limit.map_or("none".to_string(), gib);
    for i in 0..n {
        match Gpu::open(i, &cfg) {
            Ok(g) => {
                let d = g.info();
                let free_now = g
                    .mem_info()
                    .map(|m| gib(m.free))
                    .unwrap_or_else(|e| format!("? ({e})"));
                let _ = writeln!(
                    s,
                    "GPU {}: {}, compute capability {}.{}, {} SMs, memory {} total, {} free",
                    i,
                    d.name,
                    d.compute_capability.0,
                    d.compute_capability.1,
                    d.sm_count,
                    gib(d.total_mem),
                    free_now
                );
                let _ = writeln!(
                    s,
                    "  budget {} = min(free at open {} - margin {}, limit {})",
                    gib(d.budget),
                    gib(d.free_at_start),
                    gib(cfg.margin(d.total_mem)),
                    limit
                );
                if d.compute_capability < (8, 0) {
                    let _ = writeln!(s, "  warning: cuzk needs compute capability 8.0 or newer");
                }
                let _ = writeln!(s, "  {}", kernel_fit_line(&g, kernels));
            }
            Err(e) => {
                let _ = writeln!(s, "GPU {i}: cannot open: {e}");
            }
        }
    }
    s
}

/// How the kernels run on `gpu`: machine code for its arch in the binary, or PTX that the
/// driver compiles at the first load. In the second case every module of `kernels` is loaded
/// now and the line gives the time it took (the driver caches the result on disk, so a later
/// first load can be faster).
pub fn kernel_fit_line(gpu: &Gpu, kernels: &[&Kernels]) -> String {
    let (major, minor) = gpu.info().compute_capability;
    match KernelFit::of(kernel_archs(), kernel_ptx(), (major, minor)) {
        KernelFit::Sass(arch) => format!("kernels: machine code for {arch} in the binary"),
        KernelFit::NotBuilt => "kernels: none in this build".to_string(),
        KernelFit::Unsupported => format!(
            "kernels: none runs on compute capability {major}.{minor} (built for {})",
            kernel_archs()
        ),
        KernelFit::Jit(ptx) => {
            let t = std::time::Instant::now();
            let loaded = kernels.iter().try_for_each(|k| gpu.load_modules(k));
            match loaded {
                Ok(()) => format!(
                    "kernels: no machine code for sm_{major}{minor}: the driver compiled the {ptx} PTX of {} modules at their first load in {:.1} s",
                    kernels.iter().map(|k| k.modules().len()).sum::<usize>(),
                    t.elapsed().as_secs_f64()
                ),
                Err(e) => format!(
                    "kernels: no machine code for sm_{major}{minor}, and the driver could not compile the {ptx} PTX: {e}"
                ),
            }
        }
    }
}
