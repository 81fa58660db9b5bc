//! The runtime's whole path with a real kernel: embedded fatbins, module loading, struct
//! parameters, checked launches, copies (the smoke kernel). CPU tests run everywhere; `gpu_*`
//! tests are `#[ignore = "gpu"]` and panic with a clear message without a GPU.

use cuzk_gpu::{Gpu, GpuError, kernels_built};
use cuzk_test_kernels::{KERNELS, smoke};

fn gpu() -> Gpu {
    Gpu::first().unwrap_or_else(|e| panic!("this GPU test needs a CUDA GPU and built kernels: {e}"))
}

// ---- CPU ----

#[test]
fn embedded_modules_match_build() {
    let names: Vec<&str> = KERNELS.modules().iter().map(|m| m.name()).collect();
    assert_eq!(names, ["ff_test", "smoke"]);
    assert_eq!(
        KERNELS.module("no_such_module").unwrap_err(),
        GpuError::UnknownModule("no_such_module".into())
    );
    let smoke = KERNELS.module("smoke").unwrap();
    assert_eq!(KERNELS.built(), kernels_built());
    if kernels_built() {
        assert!(
            smoke.fatbin().unwrap().len() > 64,
            "fatbin suspiciously small"
        );
        // The test kernels are built for the runtime's archs or fewer (`TEST_ARCHS`).
        let runtime: Vec<&str> = cuzk_gpu::kernel_archs().split(',').collect();
        assert!(
            KERNELS.archs().split(',').all(|a| runtime.contains(&a)),
            "{} not among {runtime:?}",
            KERNELS.archs()
        );
        assert!(KERNELS.ptxas_report().contains("cuzk_smoke_fill"));
    } else {
        let e = smoke.fatbin().unwrap_err();
        assert_eq!(e, GpuError::KernelsNotBuilt);
        assert!(KERNELS.archs().is_empty());
    }
}

#[test]
fn smoke_pattern() {
    assert_eq!(smoke::pattern(0, 0), 0);
    assert_ne!(smoke::pattern(1, 0), smoke::pattern(2, 0));
}

// ---- GPU ----

/// Poison, fill with the index pattern, copy back, check every element; time it with events.
#[test]
#[ignore = "gpu"]
fn gpu_smoke_kernel_fills_pattern() {
    let g = gpu();
    let s = g.stream("smoke").unwrap();
    for n in [1usize, 255, 256, 257, 1 << 20, 3_000_017] {
        let mut buf = g.alloc::<u32>(n).unwrap();
        buf.fill_bytes(0xA5).unwrap();
        let (t0, t1) = (g.event().unwrap(), g.event().unwrap());
        s.record(&t0).unwrap();
        smoke::fill(&g, &s, &mut buf, 0xC0FFEE).unwrap();
        s.record(&t1).unwrap();
        let mut host = vec![0u32; n];
        buf.copy_to_host_on(&mut host, s.cuda()).unwrap();
        for (i, &v) in host.iter().enumerate() {
            assert_eq!(v, smoke::pattern(i as u32, 0xC0FFEE), "n={n} i={i}");
        }
        assert!(t0.elapsed_ms(&t1).unwrap() >= 0.0);
    }
}

/// Every device loads every module of this crate (catches fatbins the driver rejects).
#[test]
#[ignore = "gpu"]
fn gpu_all_devices_load_all_modules() {
    let g = gpu();
    for d in &Gpu::all().unwrap() {
        d.load_modules(&KERNELS)
            .unwrap_or_else(|e| panic!("GPU {}: {e}", d.ordinal()));
    }
    let s = g.stream("empty").unwrap();
    let mut empty = g.alloc::<u32>(0).unwrap();
    smoke::fill(&g, &s, &mut empty, 1).unwrap(); // n = 0: no launch
    s.synchronize().unwrap();
}
