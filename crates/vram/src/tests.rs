//! Allocator tests on the FakeBackend: accounting after every failure point.

use super::*;

const MIB: u64 = 1 << 20;

fn setup(device_budget: u64) -> (Arc<FakeBackend>, Vram) {
    let fake = Arc::new(FakeBackend::new(64 << 30));
    let vram = Vram::with_budgets(
        fake.clone(),
        Budget::new("device", device_budget),
        Budget::new("host", 64 * MIB),
    );
    (fake, vram)
}

#[test]
fn budget_from_mem_info() {
    let fake = Arc::new(FakeBackend::with_free(16 << 30, 15 << 30));
    let cfg = BudgetConfig {
        vram_limit: Some(8 << 30),
        ..Default::default()
    };
    let v = Vram::new(fake.clone(), &cfg, Budget::new("host", 64 * MIB)).unwrap();
    assert_eq!(v.budget().total(), 8 << 30);
    let v = Vram::new(
        fake,
        &BudgetConfig::default(),
        Budget::new("host", 64 * MIB),
    )
    .unwrap();
    // margin = max(512 MiB, 5% of 16 GiB = 819.2 MiB)
    assert_eq!(
        v.budget().total(),
        (15 << 30) - ((16u64 << 30) as f64 * 0.05) as u64
    );
    assert_eq!(
        v.mem_at_start(),
        Some(MemInfo {
            free: 15 << 30,
            total: 16 << 30
        })
    );
}

#[test]
fn buffer_roundtrip_and_raii() {
    let (fake, vram) = setup(10 * MIB);
    {
        let data: Vec<u32> = (0..1000).map(|i| i * 7 + 1).collect();
        let mut b = vram.from_host(&data).unwrap();
        assert_eq!(b.reserved_bytes(), 4096); // 4000 rounded up to 256
        assert_eq!(vram.budget().in_use(), 4096);
        assert_eq!(b.to_vec().unwrap(), data);
        b.fill_bytes(0xff).unwrap();
        assert!(b.to_vec().unwrap().iter().all(|&x| x == u32::MAX));
        assert!(matches!(
            b.copy_from_host(&data[1..]),
            Err(VramError::LengthMismatch {
                expected: 1000,
                got: 999
            })
        ));
        assert_eq!(fake.counts().device_allocs, 1);
        let empty = vram.alloc::<u64>(0).unwrap();
        assert!(empty.is_empty() && empty.to_vec().unwrap().is_empty());
        assert_eq!(
            fake.counts().device_allocs,
            1,
            "empty buffers take no device memory"
        );
    }
    assert_eq!(vram.budget().in_use(), 0);
    assert_eq!(fake.counts().device_allocs, 0);
    assert_eq!(vram.budget().peak(), 4096);
}

#[test]
fn over_budget_never_reaches_driver() {
    let (fake, vram) = setup(MIB);
    let _a = vram.alloc::<u8>(600 << 10).unwrap();
    let e = vram.alloc::<u8>(600 << 10).unwrap_err();
    assert!(
        matches!(e, VramError::OutOfBudget { kind: "device", .. }),
        "{e}"
    );
    let e = vram.alloc::<u8>(2 << 20).unwrap_err();
    assert!(matches!(e, VramError::ExceedsBudget { .. }), "{e}");
    let e = vram
        .alloc_wait::<u8>(2 << 20, Duration::from_secs(3600))
        .unwrap_err();
    assert!(matches!(e, VramError::ExceedsBudget { .. }), "{e}");
    assert_eq!(fake.counts().device_alloc_calls, 1);
    assert!(matches!(
        vram.alloc::<u64>(usize::MAX / 4),
        Err(VramError::InvalidSize(_))
    ));
}

/// Fail the k-th allocation of a 5-buffer `alloc_many`, for every k: afterwards no device
/// memory is live and the budget is back to exactly what it was.
#[test]
fn alloc_many_fault_at_every_step() {
    let lens = [1000usize, 1, 4096, 77, 100_000];
    for k in 1..=lens.len() as u64 {
        let (fake, vram) = setup(10 * MIB);
        let keep = vram.alloc::<u32>(10).unwrap(); // pre-existing state must be untouched
        let before = (
            vram.budget().in_use(),
            fake.counts().device_allocs,
            fake.counts().device_bytes,
        );
        fake.set_faults(Faults {
            fail_device_alloc_at: Some(1 + k),
            ..Default::default()
        });
        let e = vram.alloc_many::<u64>(&lens).unwrap_err();
        assert!(
            matches!(&e, VramError::Backend { op: "cuMemAlloc", name } if name == "CUDA_ERROR_OUT_OF_MEMORY"),
            "{e}"
        );
        let c = fake.counts();
        assert_eq!(c.device_alloc_calls, 1 + k, "stops at the failing step");
        assert_eq!(
            (vram.budget().in_use(), c.device_allocs, c.device_bytes),
            before,
            "failure at step {k}"
        );
        drop(keep);
        assert_eq!(
            (vram.budget().in_use(), fake.counts().device_allocs),
            (0, 0)
        );
    }
    // And with no fault it all succeeds.
    let (fake, vram) = setup(10 * MIB);
    let bufs = vram.alloc_many::<u64>(&lens).unwrap();
    assert_eq!(bufs.iter().map(|b| b.len()).collect::<Vec<_>>(), lens);
    let expected: u64 = lens
        .iter()
        .map(|&l| Vram::bytes_for::<u64>(l).unwrap())
        .sum();
    assert_eq!(vram.budget().in_use(), expected);
    drop(bufs);
    assert_eq!(
        (vram.budget().in_use(), fake.counts().device_allocs),
        (0, 0)
    );
}

#[test]
fn alloc_many_over_budget_allocates_nothing() {
    let (fake, vram) = setup(MIB);
    let e = vram
        .alloc_many::<u8>(&[512 << 10, 512 << 10, 1])
        .unwrap_err();
    assert!(matches!(e, VramError::ExceedsBudget { .. }), "{e}");
    assert_eq!(
        (fake.counts().device_alloc_calls, vram.budget().in_use()),
        (0, 0)
    );
}

/// Heterogeneous multi-buffer allocation with `?` (the documented pattern), failing at each step.
#[test]
fn heterogeneous_alloc_in_fault_at_every_step() {
    fn three(vram: &Vram) -> Result<(DeviceBuffer<u64>, DeviceBuffer<u32>, DeviceBuffer<u8>)> {
        let mut res = vram.reserve(
            Vram::bytes_for::<u64>(100)?
                + Vram::bytes_for::<u32>(200)?
                + Vram::bytes_for::<u8>(300)?,
        )?;
        let a = vram.alloc_in::<u64>(&mut res, 100)?;
        let b = vram.alloc_in::<u32>(&mut res, 200)?;
        let c = vram.alloc_in::<u8>(&mut res, 300)?;
        assert_eq!(res.bytes(), 0);
        Ok((a, b, c))
    }
    for k in 1..=3 {
        let (fake, vram) = setup(MIB);
        fake.set_faults(Faults {
            fail_device_alloc_at: Some(k),
            ..Default::default()
        });
        assert!(three(&vram).is_err());
        assert_eq!(
            (vram.budget().in_use(), fake.counts().device_allocs),
            (0, 0),
            "step {k}"
        );
    }
    let (_fake, vram) = setup(MIB);
    let bufs = three(&vram).unwrap();
    assert_eq!(vram.budget().in_use(), 1024 + 1024 + 512);
    drop(bufs);
    assert_eq!(vram.budget().in_use(), 0);
}

#[test]
fn alloc_in_rejects_foreign_reservation() {
    let (_f, vram) = setup(MIB);
    let other = Budget::new("device", MIB);
    let mut r = other.try_acquire(4096).unwrap();
    assert!(vram.alloc_in::<u8>(&mut r, 10).is_err());
    assert_eq!(r.bytes(), 4096);
}

#[test]
fn driver_oom_after_budget_ok_restores_budget() {
    // Budget says yes but the device is fuller than at start (another process grew).
    let fake = Arc::new(FakeBackend::with_free(MIB, MIB));
    let vram = Vram::with_budgets(
        fake.clone(),
        Budget::new("device", 100 * MIB),
        Budget::new("host", MIB),
    );
    assert!(matches!(
        vram.alloc::<u8>(2 * MIB as usize),
        Err(VramError::Backend { .. })
    ));
    assert_eq!(vram.budget().in_use(), 0);
}

#[test]
fn pinned_and_registered_accounting() {
    let (fake, vram) = setup(MIB);
    {
        let mut p = vram.pinned::<u64>(1000).unwrap();
        assert!(p.iter().all(|&x| x == 0), "pinned memory is zeroed");
        p[999] = 5;
        assert_eq!(p.iter().sum::<u64>(), 5);
        assert_eq!(vram.host_budget().in_use(), 8000);
        let mut v = vec![1u32; 1024];
        {
            let mut r = vram.register(&mut v).unwrap();
            r[0] = 9;
            assert_eq!(vram.host_budget().in_use(), 8000 + 4096);
            assert_eq!(fake.counts().registered, 1);
            let mut empty = vec![0u8; 0];
            let _e = vram.register(&mut empty).unwrap(); // empty: no driver call
            assert_eq!(fake.counts().registered, 1);
        }
        assert_eq!(v[0], 9);
        assert_eq!(
            (fake.counts().registered, vram.host_budget().in_use()),
            (0, 8000)
        );
        assert!(matches!(
            vram.pinned::<u8>(64 * MIB as usize),
            Err(VramError::OutOfBudget { kind: "host", .. })
        ));
    }
    assert_eq!(
        (fake.counts().pinned_allocs, vram.host_budget().in_use()),
        (0, 0)
    );
}

/// A set of pinned buffers is taken from the host budget whole: one that does not fit pins
/// nothing (not some buffers, then frees them), one that fits is charged exactly.
#[test]
fn a_pinned_set_that_does_not_fit_pins_nothing() {
    let (fake, vram) = setup(MIB);
    let _held = vram.pinned::<u8>(10 * MIB as usize).unwrap();
    let calls = fake.counts().pinned_alloc_calls;
    assert!(matches!(
        vram.pinned_many::<u8, 3>([20 * MIB as usize; 3]),
        Err(VramError::OutOfBudget { kind: "host", .. })
    ));
    assert_eq!(fake.counts().pinned_alloc_calls, calls, "nothing pinned");
    assert_eq!(vram.host_budget().in_use(), 10 * MIB);
    {
        let set = vram.pinned_many::<u64, 3>([1000, 0, 7]).unwrap();
        assert_eq!(
            set.iter().map(|b| b.len()).collect::<Vec<_>>(),
            [1000, 0, 7]
        );
        assert_eq!(vram.host_budget().in_use(), 10 * MIB + 8 * 1007);
    }
    assert_eq!(vram.host_budget().in_use(), 10 * MIB);
}

#[test]
fn pinning_faults_restore_host_budget() {
    let (fake, vram) = setup(MIB);
    let _keep = vram.pinned::<u8>(100).unwrap();
    fake.set_faults(Faults {
        fail_pinned_alloc: true,
        fail_register: true,
        ..Default::default()
    });
    let e = vram.pinned::<u8>(4096).unwrap_err();
    assert!(
        matches!(
            e,
            VramError::Backend {
                op: "cuMemHostAlloc",
                ..
            }
        ),
        "{e}"
    );
    let mut v = vec![0u16; 10];
    let e = vram.register(&mut v).unwrap_err();
    assert!(
        matches!(
            e,
            VramError::Backend {
                op: "cuMemHostRegister",
                ..
            }
        ),
        "{e}"
    );
    let c = fake.counts();
    assert_eq!(
        (c.pinned_allocs, c.registered, vram.host_budget().in_use()),
        (1, 0, 100)
    );
}

/// Buffers and their budget can move across threads; the fair queue hands memory to a
/// waiting allocation when another thread frees.
#[test]
fn alloc_wait_across_threads() {
    let (fake, vram) = setup(MIB);
    let big = vram.alloc::<u8>(MIB as usize).unwrap();
    let v2 = vram.clone();
    let h = std::thread::spawn(move || {
        v2.alloc_wait::<u8>(MIB as usize / 2, Duration::from_secs(10))
            .map(|b| b.len())
    });
    while vram.budget().waiters() == 0 {
        std::thread::yield_now();
    }
    drop(big);
    assert_eq!(h.join().unwrap().unwrap(), MIB as usize / 2);
    assert_eq!(
        (vram.budget().in_use(), fake.counts().device_allocs),
        (0, 0)
    );
}

#[test]
fn memory_taken_by_another_process_lowers_the_limit_until_it_is_back() {
    const GIB: u64 = 1 << 30;
    let fake = Arc::new(FakeBackend::with_free(16 * GIB, 15 * GIB));
    let v = Vram::new(
        fake.clone(),
        &BudgetConfig::default(),
        Budget::new("host", 64 * MIB),
    )
    .unwrap();
    let total = v.budget().total();
    let margin = 15 * GIB - total;
    // Our own buffers are not "taken by others".
    let ours = v.alloc::<u8>((4 * GIB) as usize).unwrap();
    assert_eq!(v.budget().allocated(), 4 * GIB);
    assert_eq!(v.refresh_limit().unwrap(), None);
    // Memory the driver takes within half the margin does not lower it either.
    fake.set_held_by_another_process(margin / 2);
    assert_eq!(v.refresh_limit().unwrap(), None);

    assert_eq!(fake.set_held_by_another_process(6 * GIB), 6 * GIB);
    let change = v.refresh_limit().unwrap().expect("the limit falls");
    assert_eq!(change.before, total);
    assert_eq!(change.after, total - 6 * GIB);
    assert_eq!(change.taken_by_others, 6 * GIB);
    assert_eq!(v.budget().limit(), total - 6 * GIB);
    assert_eq!(v.budget().free(), total - 6 * GIB - 4 * GIB);
    // A request that fits the total but not the limit waits, then fails by timeout, not by size.
    let e = v
        .reserve_wait(total - 5 * GIB, Duration::from_millis(30))
        .unwrap_err();
    assert!(matches!(e, VramError::Timeout { .. }), "{e}");
    assert_eq!(
        v.refresh_limit().unwrap(),
        None,
        "steady while nothing changes"
    );

    // The waiter is served once the other process exits and the limit is refreshed.
    let waiter = {
        let v = v.clone();
        std::thread::spawn(move || v.reserve_wait(total - 5 * GIB, Duration::from_secs(10)))
    };
    drop(ours);
    std::thread::sleep(Duration::from_millis(50));
    fake.set_held_by_another_process(0);
    let change = v.refresh_limit().unwrap().expect("the limit is back");
    assert_eq!((change.before, change.after), (total - 6 * GIB, total));
    let r = waiter.join().unwrap().unwrap();
    assert_eq!(r.bytes(), total - 5 * GIB);
    drop(r);
    assert_eq!((v.budget().in_use(), v.budget().allocated()), (0, 0));
}

#[test]
fn a_limit_under_a_capped_budget_only_bites_below_the_cap() {
    const GIB: u64 = 1 << 30;
    let fake = Arc::new(FakeBackend::with_free(80 * GIB, 79 * GIB));
    let cfg = BudgetConfig {
        vram_limit: Some(16 * GIB),
        ..Default::default()
    };
    let v = Vram::new(fake.clone(), &cfg, Budget::new("host", 64 * MIB)).unwrap();
    assert_eq!(v.budget().total(), 16 * GIB);
    fake.set_held_by_another_process(40 * GIB);
    assert_eq!(
        v.refresh_limit().unwrap(),
        None,
        "39 GiB still free: the cap binds"
    );
    fake.set_held_by_another_process(70 * GIB);
    let change = v
        .refresh_limit()
        .unwrap()
        .expect("9 GiB free: the limit falls");
    let margin = cfg.margin(80 * GIB);
    assert_eq!(change.after, 79 * GIB - margin - 70 * GIB);
}

#[test]
fn a_reading_that_every_attempt_sees_straddle_an_allocation_is_dropped() {
    const GIB: u64 = 1 << 30;
    let fake = Arc::new(FakeBackend::with_free(80 * GIB, 79 * GIB));
    let v = Vram::new(
        fake.clone(),
        &BudgetConfig::default(),
        Budget::new("host", 64 * MIB),
    )
    .unwrap();
    // Each reading meets one more of our allocations, made by the driver before it answers:
    // guessing our bytes from either side of such a reading blames our buffer on others.
    let kept = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let (alloc, kept2) = (v.clone(), kept.clone());
    fake.on_mem_info(move || kept2.lock().push(alloc.alloc::<u8>(GIB as usize).unwrap()));
    assert_eq!(v.steady_reading().unwrap(), None);
    assert_eq!(
        v.refresh_limit().unwrap(),
        None,
        "no steady reading: nothing changes"
    );
    assert_eq!(v.unexplained(), (0, 0), "(peak bytes, limit lowerings)");
    assert_eq!(kept.lock().len(), 2 * crate::STEADY_ATTEMPTS);
    // Once our buffers stop coming, the readings are steady and explain them all.
    fake.on_mem_info(|| {});
    let (info, ours) = v.steady_reading().unwrap().expect("steady");
    assert_eq!((info.free, ours), (63 * GIB, 16 * GIB));
    v.refresh_limit().unwrap();
    assert_eq!(v.unexplained(), (0, 0));
}

#[test]
fn budgets_not_built_from_mem_info_have_no_limit_to_refresh() {
    let (_, v) = setup(64 * MIB);
    assert_eq!(v.refresh_limit().unwrap(), None);
    v.budget().set_limit(128 * MIB);
    assert_eq!(v.budget().limit(), 64 * MIB, "clamped to the total");
}

#[test]
fn our_buffers_are_never_unexplained_even_while_the_driver_allocates_them() {
    const GIB: u64 = 1 << 30;
    let fake = Arc::new(FakeBackend::with_free(80 * GIB, 79 * GIB));
    let v = Vram::new(
        fake.clone(),
        &BudgetConfig::default(),
        Budget::new("host", 64 * MIB),
    )
    .unwrap();
    // Another thread reading free memory in the middle of a driver allocation.
    let watcher = v.clone();
    fake.on_alloc(move || {
        watcher.refresh_limit().unwrap();
    });
    let buffers: Vec<_> = (0..3)
        .map(|_| v.alloc::<u8>((4 * GIB) as usize).unwrap())
        .collect();
    drop(buffers);
    v.refresh_limit().unwrap();
    assert_eq!(v.unexplained(), (0, 0), "(peak bytes, limit lowerings)");
    // Memory another process takes is unexplained, and lowers the limit.
    fake.set_held_by_another_process(6 * GIB);
    v.refresh_limit().unwrap();
    assert_eq!(v.unexplained(), (6 * GIB, 1));
}

#[test]
fn the_drivers_bytes_for_our_kernels_and_pinned_memory_are_explained() {
    const GIB: u64 = 1 << 30;
    let fake = Arc::new(FakeBackend::with_free(80 * GIB, 79 * GIB));
    let v = Vram::new(
        fake.clone(),
        &BudgetConfig::default(),
        Budget::new("host", 64 * MIB),
    )
    .unwrap();
    let logical = v.logical(Budget::new("device", 16 * GIB));
    // A module load takes 300 MiB outside the budget (modules, local memory): unexplained
    // until the loader counts it, through any logical device of the GPU.
    fake.set_held_by_another_process(300 * MIB);
    let (info, ours) = v.steady_reading().unwrap().expect("steady");
    assert_eq!((info.free, ours), (79 * GIB - 300 * MIB, 0));
    logical.add_kernel_bytes(300 * MIB);
    assert_eq!(v.driver_bytes(), 300 * MIB);
    v.refresh_limit().unwrap();
    assert_eq!(v.unexplained(), (0, 0));
    // Pinned host memory costs the device its page tables: 2 MiB per GiB.
    let pinned = logical.pinned::<u8>(64 * MIB as usize).unwrap();
    assert_eq!(v.driver_bytes(), 300 * MIB + 128 * 1024);
    fake.set_held_by_another_process(300 * MIB + 128 * 1024);
    v.refresh_limit().unwrap();
    assert_eq!(v.unexplained(), (0, 0));
    drop(pinned);
    assert_eq!(v.driver_bytes(), 300 * MIB);
    // What another process takes stays unexplained.
    fake.set_held_by_another_process(300 * MIB + GIB);
    v.refresh_limit().unwrap();
    assert_eq!(v.unexplained().0, GIB);
    assert_eq!(
        logical.refresh_limit().unwrap(),
        None,
        "follows no free memory"
    );
}
