//! Devices, contexts, streams and events.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, OnceLock};

use bytemuck::Pod;
use cudarc::driver::{CudaContext, CudaEvent, CudaStream, sys};
use cuzk_vram::inject::Site;
use cuzk_vram::{Budget, BudgetConfig, CudaBackend, DeviceBuffer, MemInfo, Vram};
use parking_lot::Mutex;

use crate::error::{GpuError, Result, cuda, injected};
use crate::module::ModuleCache;

/// Static facts about a device, read once when it is opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    pub ordinal: usize,
    pub name: String,
    /// (major, minor), e.g. (9, 0) for an H100/H200.
    pub compute_capability: (i32, i32),
    pub sm_count: u32,
    /// Most shared memory one block may use (opt-in limit, bytes).
    pub max_shared_per_block: u32,
    pub total_mem: u64,
    /// Free memory when the device was opened (what the budget was computed from).
    pub free_at_start: u64,
    /// The device budget in bytes.
    pub budget: u64,
}

/// One CUDA device: its (primary) context, VRAM allocator and lazily loaded kernel modules.
/// Cheap to clone; all clones share the device.
#[derive(Clone)]
pub struct Gpu {
    pub(crate) inner: Arc<GpuInner>,
}

pub(crate) struct GpuInner {
    pub(crate) ctx: Arc<CudaContext>,
    pub(crate) info: DeviceInfo,
    pub(crate) vram: Vram,
    /// Shared by the logical devices split from one GPU (see [`Gpu::split`]).
    pub(crate) modules: Arc<ModuleCache>,
    /// Per-device state of the domain crates (see [`Gpu::cached`]), dropped with the device.
    pub(crate) cached: Mutex<HashMap<std::any::TypeId, Arc<dyn std::any::Any + Send + Sync>>>,
}

impl fmt::Debug for Gpu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Gpu")
            .field("info", &self.inner.info)
            .field("budget", self.inner.vram.budget())
            .finish()
    }
}

/// Whether libcuda can be loaded. cudarc panics on first use without it, so check first.
pub fn driver_present() -> bool {
    // SAFETY: only tries to dlopen libcuda; no CUDA call is made.
    unsafe { sys::is_culib_present() }
}

/// Number of CUDA devices (`NoDriver` without libcuda).
pub fn device_count() -> Result<usize> {
    if !driver_present() {
        return Err(GpuError::NoDriver);
    }
    cudarc::driver::result::init().map_err(cuda("cuInit"))?;
    let n = CudaContext::device_count().map_err(cuda("cuDeviceGetCount"))?;
    Ok(n.max(0) as usize)
}

/// The process's one pinned host budget, shared by every device (sized by the configuration
/// of the first device opened): per-device budgets would let N devices pin N times the limit.
fn pinned_budget(cfg: &BudgetConfig) -> Budget {
    static P: OnceLock<Budget> = OnceLock::new();
    P.get_or_init(|| {
        Budget::new(
            "pinned host memory (CUZK_PINNED_LIMIT)",
            cfg.pinned_budget(cuzk_vram::physical_ram()),
        )
    })
    .clone()
}

/// One `Gpu` per ordinal per process, so that every user of a device shares one budget.
fn registry() -> &'static Mutex<HashMap<usize, Gpu>> {
    static R: OnceLock<Mutex<HashMap<usize, Gpu>>> = OnceLock::new();
    R.get_or_init(Default::default)
}

impl Gpu {
    /// All devices, with the budget configuration from the environment (`CUZK_VRAM_LIMIT`, ...).
    pub fn all() -> Result<Vec<Gpu>> {
        Self::all_with(&crate::Config::get()?.budget)
    }

    /// All devices with an explicit budget configuration (used only for devices not yet
    /// opened in this process: the first open fixes a device's budget).
    pub fn all_with(cfg: &BudgetConfig) -> Result<Vec<Gpu>> {
        let n = device_count()?;
        crate::module::require_kernels()?;
        if n == 0 {
            return Err(GpuError::NoDevice);
        }
        (0..n).map(|i| Self::open(i, cfg)).collect()
    }

    /// The first device when a driver, a device and built kernels are all there; `None` tells
    /// a caller that has a CPU path to take it.
    pub fn available() -> Option<Gpu> {
        if !driver_present() || !crate::module::kernels_built() {
            return None;
        }
        Self::first().ok()
    }

    /// The first device (ordinal 0).
    pub fn first() -> Result<Gpu> {
        let cfg = &crate::Config::get()?.budget;
        if device_count()? == 0 {
            return Err(GpuError::NoDevice);
        }
        crate::module::require_kernels()?;
        Self::open(0, cfg)
    }

    /// Opens device `ordinal` (or returns the already-open one). Needs no kernels, so
    /// reports can use it; launches still fail with `KernelsNotBuilt` when there are none.
    pub fn open(ordinal: usize, cfg: &BudgetConfig) -> Result<Gpu> {
        if !driver_present() {
            return Err(GpuError::NoDriver);
        }
        let mut reg = registry().lock();
        if let Some(g) = reg.get(&ordinal) {
            return Ok(g.clone());
        }
        let ctx = CudaContext::new(ordinal).map_err(cuda("cuDevicePrimaryCtxRetain"))?;
        let vram = Vram::new(
            Arc::new(CudaBackend::new(ctx.clone())),
            cfg,
            pinned_budget(cfg),
        )?;
        let mem = vram.mem_at_start().unwrap_or(MemInfo { free: 0, total: 0 });
        let info = DeviceInfo {
            ordinal,
            name: ctx.name().map_err(cuda("cuDeviceGetName"))?,
            compute_capability: ctx
                .compute_capability()
                .map_err(cuda("cuDeviceGetAttribute"))?,
            sm_count: ctx
                .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
                .map_err(cuda("cuDeviceGetAttribute"))? as u32,
            max_shared_per_block: ctx
                .attribute(
                    sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                )
                .map_err(cuda("cuDeviceGetAttribute"))? as u32,
            total_mem: mem.total,
            free_at_start: mem.free,
            budget: vram.budget().total(),
        };
        let g = Gpu {
            inner: Arc::new(GpuInner {
                ctx,
                info,
                vram,
                modules: Arc::default(),
                cached: Mutex::default(),
            }),
        };
        reg.insert(ordinal, g.clone());
        Ok(g)
    }

    pub fn info(&self) -> &DeviceInfo {
        &self.inner.info
    }

    /// Splits this device into `parts` logical devices, each with an equal share of the
    /// device budget (see [`Gpu::logical`]).
    pub fn split(&self, parts: usize) -> Vec<Gpu> {
        let share = self.inner.vram.budget().total() / parts.max(1) as u64;
        (0..parts.max(1)).map(|_| self.logical(share)).collect()
    }

    /// A logical device over this one with a budget of its own of `budget` bytes (at most this
    /// device's): it shares the context, the loaded kernels and the pinned budget, so several
    /// engines or tests can share one GPU without sharing a device budget. The caller keeps
    /// the logical budgets within the physical one.
    pub fn logical(&self, budget: u64) -> Gpu {
        let budget = budget.min(self.inner.vram.budget().total());
        let vram = self.inner.vram.logical(Budget::new("device", budget));
        Gpu {
            inner: Arc::new(GpuInner {
                ctx: self.inner.ctx.clone(),
                info: DeviceInfo {
                    budget,
                    ..self.inner.info.clone()
                },
                vram,
                modules: self.inner.modules.clone(),
                cached: Mutex::default(),
            }),
        }
    }

    /// This device's one value of type `T` (made by `make` on first use): state a domain crate
    /// keeps per device, such as tables in device memory. It lives as long as the device (the
    /// last clone of this `Gpu`), so a logical device's caches go with it.
    pub fn cached<T, E>(
        &self,
        make: impl FnOnce() -> std::result::Result<Arc<T>, E>,
    ) -> std::result::Result<Arc<T>, E>
    where
        T: std::any::Any + Send + Sync,
    {
        let mut cached = self.inner.cached.lock();
        if let Some(v) = cached.get(&std::any::TypeId::of::<T>())
            && let Ok(t) = v.clone().downcast::<T>()
        {
            return Ok(t);
        }
        let t = make()?;
        cached.insert(std::any::TypeId::of::<T>(), t.clone());
        Ok(t)
    }

    /// Forgets every [`Gpu::cached`] value: each one's memory goes back once its last user
    /// drops it (the engine calls this when no key is left to use them).
    pub fn drop_cached(&self) {
        self.inner.cached.lock().clear();
    }

    pub fn ordinal(&self) -> usize {
        self.inner.info.ordinal
    }
    /// This device's allocator (device budget + pinned host budget).
    pub fn vram(&self) -> &Vram {
        &self.inner.vram
    }
    /// The cudarc context, for code that needs cudarc directly.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.inner.ctx
    }

    /// Free and total memory now (`cuMemGetInfo`).
    pub fn mem_info(&self) -> Result<MemInfo> {
        Ok(self.inner.vram.backend().mem_get_info()?)
    }

    /// Allocates `len` elements under this device's budget.
    pub fn alloc<T: Pod>(&self, len: usize) -> Result<DeviceBuffer<T>> {
        Ok(self.inner.vram.alloc(len)?)
    }

    /// A new non-blocking stream; `name` shows in errors and Debug output.
    pub fn stream(&self, name: impl Into<String>) -> Result<Stream> {
        injected(Site::StreamCreate, "cuStreamCreate")?;
        let s = self
            .inner
            .ctx
            .new_stream()
            .map_err(cuda("cuStreamCreate"))?;
        Ok(Stream {
            name: name.into(),
            inner: s,
        })
    }

    /// A new event with timing enabled.
    pub fn event(&self) -> Result<Event> {
        injected(Site::EventCreate, "cuEventCreate")?;
        let e = self
            .inner
            .ctx
            .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(cuda("cuEventCreate"))?;
        Ok(Event { inner: e })
    }

    /// Median device time in ms of `runs` calls of `f` (after one warm-up call), timed by events
    /// recorded on `stream` around each call: the one way benches here time device work.
    pub fn median_ms(&self, stream: &Stream, runs: usize, mut f: impl FnMut()) -> Result<f64> {
        f();
        let mut times = Vec::with_capacity(runs);
        for _ in 0..runs.max(1) {
            let (start, end) = (self.event()?, self.event()?);
            stream.record(&start)?;
            f();
            stream.record(&end)?;
            end.synchronize()?;
            times.push(f64::from(start.elapsed_ms(&end)?));
        }
        times.sort_by(f64::total_cmp);
        Ok(times[times.len() / 2])
    }

    /// Waits for all work on the device.
    pub fn synchronize(&self) -> Result<()> {
        self.inner
            .ctx
            .synchronize()
            .map_err(cuda("cuCtxSynchronize"))
    }
}

/// A named CUDA stream.
#[derive(Clone)]
pub struct Stream {
    name: String,
    inner: Arc<CudaStream>,
}

impl fmt::Debug for Stream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stream").field("name", &self.name).finish()
    }
}

impl Stream {
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The cudarc stream (for `DeviceBuffer` async copies).
    pub fn cuda(&self) -> &Arc<CudaStream> {
        &self.inner
    }
    pub fn synchronize(&self) -> Result<()> {
        self.inner
            .synchronize()
            .map_err(cuda("cuStreamSynchronize"))
    }
    /// Records `event` at the current end of this stream.
    pub fn record(&self, event: &Event) -> Result<()> {
        event
            .inner
            .record(&self.inner)
            .map_err(cuda("cuEventRecord"))
    }
    /// Makes later work on this stream wait for `event`.
    pub fn wait(&self, event: &Event) -> Result<()> {
        self.inner
            .wait(&event.inner)
            .map_err(cuda("cuStreamWaitEvent"))
    }
}

/// A CUDA event (timing enabled).
#[derive(Debug)]
pub struct Event {
    inner: CudaEvent,
}

impl Event {
    pub fn synchronize(&self) -> Result<()> {
        self.inner.synchronize().map_err(cuda("cuEventSynchronize"))
    }
    /// Milliseconds from `self` to `end` (both recorded and complete).
    pub fn elapsed_ms(&self, end: &Event) -> Result<f32> {
        self.inner
            .elapsed_ms(&end.inner)
            .map_err(cuda("cuEventElapsedTime"))
    }
    pub fn is_complete(&self) -> bool {
        self.inner.is_complete()
    }
}
