//! Runtime tests. CPU tests run everywhere; `gpu_*` tests are `#[ignore = "gpu"]` and run with
//! `cargo xtask gpu-test` or the bundle's run.sh; they panic with a clear message without a GPU.

use std::time::Duration;

use cuzk_gpu::{Gpu, GpuError, VramError, devices_report, driver_present, kernels_built};

fn gpu() -> Gpu {
    Gpu::first().unwrap_or_else(|e| panic!("this GPU test needs a CUDA GPU and built kernels: {e}"))
}

// ---- CPU ----

#[test]
fn no_driver_is_an_error_not_a_panic() {
    if driver_present() {
        return; // covered by the GPU tests on a GPU machine
    }
    assert_eq!(Gpu::all().unwrap_err(), GpuError::NoDriver);
    assert_eq!(Gpu::first().unwrap_err(), GpuError::NoDriver);
    assert_eq!(cuzk_gpu::device_count().unwrap_err(), GpuError::NoDriver);
    let r = devices_report(&[]);
    assert!(r.contains("No CUDA driver"), "{r}");
}

#[test]
fn kernels_report_matches_build() {
    if kernels_built() {
        assert!(!cuzk_gpu::kernel_archs().is_empty());
        assert!(devices_report(&[]).contains(cuzk_gpu::kernel_archs()));
    } else {
        assert!(cuzk_gpu::kernel_archs().is_empty());
        let e = GpuError::KernelsNotBuilt;
        assert!(
            e.to_string()
                .contains("kernels were not built: run `cargo xtask setup-cuda`"),
            "{e}"
        );
        assert!(devices_report(&[]).contains("kernels were not built"));
    }
}

#[test]
fn error_messages_name_op_and_cuda_error() {
    let e = GpuError::Cuda {
        op: "cuMemAlloc",
        name: "CUDA_ERROR_OUT_OF_MEMORY".into(),
    };
    assert_eq!(
        e.to_string(),
        "CUDA error CUDA_ERROR_OUT_OF_MEMORY in cuMemAlloc"
    );
    let e: GpuError = VramError::OutOfBudget {
        kind: "device",
        requested: 10,
        available: 5,
    }
    .into();
    assert!(e.to_string().contains("budget exhausted"), "{e}");
}

#[test]
fn launch_config_rounding() {
    let c = cuzk_gpu::LaunchConfig::for_elements(1000, 256).unwrap();
    assert_eq!(
        (c.grid, c.block, c.shared_bytes),
        ((4, 1, 1), (256, 1, 1), 0)
    );
    assert_eq!(
        cuzk_gpu::LaunchConfig::for_elements(0, 256).unwrap().grid,
        (1, 1, 1)
    );
}

// ---- GPU ----

#[test]
#[ignore = "gpu"]
fn gpu_devices_report_lists_devices() {
    let g = gpu();
    let r = devices_report(&[]);
    assert!(r.contains(&g.info().name), "{r}");
    assert!(g.info().compute_capability >= (8, 0), "{:?}", g.info());
    assert!(g.info().budget > 0 && g.info().budget <= g.info().free_at_start);
    println!("{r}");
}

/// Every device opens, and a device is opened once per process (shared budget). The runtime
/// embeds no modules: cuzk-test-kernels' `gpu_all_devices_load_all_modules` loads its modules on
/// every device, and each kernel crate's GPU tests launch its own.
#[test]
#[ignore = "gpu"]
fn gpu_all_devices_open_once() {
    let g = gpu();
    let all = Gpu::all().unwrap();
    assert!(!all.is_empty());
    assert!(
        all[0].vram().budget().same_as(g.vram().budget()),
        "device 0 opened twice"
    );
}

/// cuMemFreeAsync would keep freed memory in the stream pool; we use cuMemAlloc/cuMemFree, so
/// allocate ~90% of the budget, free, and allocate it again.
#[test]
#[ignore = "gpu"]
fn gpu_alloc_free_realloc_most_of_budget() {
    let g = gpu();
    let v = g.vram();
    let bytes = (v.budget().total() / 10 * 9) as usize;
    for round in 0..3 {
        // Waits if other tests of this binary (run in parallel) hold memory.
        let mut b = v
            .alloc_wait::<u8>(bytes, Duration::from_secs(120))
            .unwrap_or_else(|e| panic!("round {round}: {e}"));
        b.fill_bytes(round as u8).unwrap();
        let free = g.mem_info().unwrap().free;
        assert!(
            free < g.info().free_at_start - bytes as u64 / 2,
            "allocation not visible in cuMemGetInfo"
        );
        drop(b);
    }
    // Several buffers, waiting acquire, then all again.
    let parts = v.alloc_many::<u64>(&[bytes / 8 / 3; 3]).unwrap();
    drop(parts);
    let again = v.alloc_wait::<u8>(bytes, Duration::from_secs(120)).unwrap();
    drop(again);
    // Over the budget fails cleanly, without touching the driver.
    assert!(matches!(
        v.alloc::<u8>(v.budget().total() as usize + 1),
        Err(VramError::ExceedsBudget { .. })
    ));
}

#[test]
#[ignore = "gpu"]
fn gpu_pinned_roundtrip() {
    let g = gpu();
    let s = g.stream("pinned").unwrap();
    let mut p = g.vram().pinned::<u64>(1 << 20).unwrap();
    for (i, x) in p.iter_mut().enumerate() {
        *x = i as u64 * 3;
    }
    let mut d = g.alloc::<u64>(1 << 20).unwrap();
    d.copy_from_host_on(&p, s.cuda()).unwrap();
    let mut back = vec![0u64; 1 << 20];
    {
        let mut reg = g.vram().register(&mut back).unwrap();
        d.copy_to_host_on(&mut reg, s.cuda()).unwrap();
    }
    assert_eq!(&back[..], &p[..]);
}

/// Pieces made in the slots land at their offsets in every destination, around untouched
/// elements, whatever the piece boundaries; a plain `upload` at an offset too.
#[test]
#[ignore = "gpu"]
fn gpu_staging_uploads_made_pieces_into_several_buffers() {
    use cuzk_gpu::transfer::Staging;
    let g = gpu();
    let s = g.stream("staging").unwrap();
    let len = 1000;
    for (slot, start, count) in [
        (10, 5, 37),
        (9, 0, 1000),
        (3, 999, 1),
        (64, 100, 0),
        (1 << 12, 7, 993),
    ] {
        let mut staging = Staging::<u64>::new(&g, slot).unwrap();
        let mut dsts: Vec<_> = (0..3).map(|_| g.alloc::<u64>(len).unwrap()).collect();
        for d in &mut dsts {
            d.copy_from_host(&vec![u64::MAX; len]).unwrap();
        }
        let value = |k: usize, i: usize| (k * 1_000_000 + i * 7 + 1) as u64;
        let mut refs: Vec<_> = dsts.iter_mut().collect();
        staging
            .upload_made(&s, &mut refs, start, count, |at, parts| {
                for (k, part) in parts.iter_mut().enumerate() {
                    for (j, x) in part.iter_mut().enumerate() {
                        *x = value(k, at + j);
                    }
                }
            })
            .unwrap();
        s.synchronize().unwrap();
        for (k, d) in dsts.iter().enumerate() {
            let got = d.to_vec().unwrap();
            for (i, x) in got.iter().enumerate() {
                let want = if (start..start + count).contains(&i) {
                    value(k, i)
                } else {
                    u64::MAX
                };
                assert_eq!(
                    *x, want,
                    "slot {slot}, start {start}, count {count}: buffer {k}[{i}]"
                );
            }
        }
        let src: Vec<u64> = (0..count as u64).map(|i| i * 11 + 3).collect();
        staging
            .upload(&s, &src, &mut dsts[0], start, |slot, piece| {
                slot.copy_from_slice(piece)
            })
            .unwrap();
        s.synchronize().unwrap();
        assert_eq!(&dsts[0].to_vec().unwrap()[start..start + count], &src[..]);
    }
    let mut staging = Staging::<u64>::new(&g, 4).unwrap();
    let mut d = g.alloc::<u64>(10).unwrap();
    let err = staging
        .upload_made(&s, &mut [&mut d], 5, 6, |_, _| panic!("made nothing"))
        .unwrap_err();
    assert!(err.to_string().contains("do not fit"), "{err}");
}
