//! Text for `cuzk devices`.

use std::fmt::Write as _;

use cuzk_vram::BudgetConfig;

use crate::device::{Gpu, device_count, driver_present};
use crate::module::{kernel_archs, kernels_built};

fn gib(b: u64) -> String {
    format!("{:.2} GiB", b as f64 / (1u64 << 30) as f64)
}

/// Each GPU (name, compute capability, SMs, total/free memory) and the budget the allocator
/// uses with the current settings (env `CUZK_VRAM_LIMIT`, ...). Says so plainly when there is
/// no driver or no GPU. Never fails: errors become lines of the report.
pub fn devices_report() -> String {
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
            "kernels: built for {} (+PTX for the newest)",
            kernel_archs()
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
            }
            Err(e) => {
                let _ = writeln!(s, "GPU {i}: cannot open: {e}");
            }
        }
    }
    s
}
