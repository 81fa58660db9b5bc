//! VRAM and pinned-host-memory management for cuzk.
//!
//! Invariant: every device allocation goes through a [`Vram`] and is charged to its device
//! [`Budget`] before memory is requested from the driver; the charge is returned only after the
//! memory is freed. Every pinned/registered host allocation is charged to the host budget.
//!
//! Multi-buffer allocation is failure-atomic by construction: buffers are RAII, so allocating
//! with `?` frees the earlier buffers and returns their budget when a later step fails:
//!
//! ```
//! # use cuzk_vram::*;
//! # use std::sync::Arc;
//! # fn demo(vram: &Vram) -> Result<()> {
//! let mut res = vram.reserve(Vram::bytes_for::<u64>(1024)? + Vram::bytes_for::<u32>(4096)?)?;
//! let a = vram.alloc_in::<u64>(&mut res, 1024)?; // on error below, `a` and `res` drop here
//! let b = vram.alloc_in::<u32>(&mut res, 4096)?;
//! # drop((a, b)); Ok(()) }
//! # demo(&Vram::with_budgets(Arc::new(FakeBackend::new(1 << 30)), Budget::new("device", 1 << 20), Budget::new("host", 1 << 20))).unwrap();
//! ```

mod backend;
mod budget;
mod buffer;
mod config;
mod error;
mod host_pages;
pub mod inject;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytemuck::Pod;

pub use backend::{
    CudaBackend, DevicePtr, FakeBackend, FakeCounts, Faults, MemInfo, MemoryBackend,
    cuda_error_name,
};
pub use budget::{Budget, Reclaim, Reservation};
pub use buffer::{DEVICE_ALIGN, DeviceBuffer, PinnedBuffer, RegisteredHost, device_bytes_for};
pub use config::{
    BudgetConfig, DEFAULT_MARGIN_FLOOR, DEFAULT_MARGIN_FRACTION, parse_size, physical_ram,
};
pub use error::{CUDA_OUT_OF_MEMORY, Result, VramError};
pub use host_pages::{LARGE_ALLOCATION, LargePages, transparent_huge_pages};

/// Host bytes pinned per byte of device page table (8-byte entries for 4 KiB pages).
const PINNED_BYTES_PER_TABLE_BYTE: u64 = 512;
/// Readings [`Vram::steady_reading`] tries before it gives up on this moment.
pub const STEADY_ATTEMPTS: usize = 8;

/// The allocator of one device: a memory backend plus the device and host budgets.
/// Cheap to clone (shared state).
#[derive(Clone, Debug)]
pub struct Vram {
    backend: Arc<dyn MemoryBackend>,
    device: Budget,
    host: Budget,
    mem_at_start: Option<MemInfo>,
    /// The margin the device budget keeps below the free memory at start.
    margin: u64,
    unexplained: Arc<Unexplained>,
    /// Device memory the driver holds for our kernels (see [`Vram::add_kernel_bytes`]), shared
    /// by the logical devices of one GPU.
    kernels: Arc<AtomicU64>,
}

/// Device memory that [`Vram::refresh_limit`] found taken beyond the budget's own buffers and
/// [`Vram::driver_bytes`]: another process's, or the driver's own.
#[derive(Debug, Default)]
struct Unexplained {
    peak: AtomicU64,
    lowered: AtomicU64,
}

/// A change of the device budget's limit, as [`Vram::refresh_limit`] made it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitChange {
    pub before: u64,
    pub after: u64,
    /// Device memory that others (another process, or the driver) took since the start.
    pub taken_by_others: u64,
}

impl Vram {
    /// The device budget from `cuMemGetInfo` now and `cfg` (see [`BudgetConfig`] for the
    /// formula), beside `pinned`: the process's pinned host budget, one for all its devices
    /// (sized by [`BudgetConfig::pinned_budget`]), so that devices together pin no more than it.
    pub fn new(
        backend: Arc<dyn MemoryBackend>,
        cfg: &BudgetConfig,
        pinned: Budget,
    ) -> Result<Self> {
        let info = backend.mem_get_info()?;
        let device = Budget::new("device", cfg.device_budget(info.free, info.total));
        Ok(Self {
            backend,
            device,
            host: pinned,
            mem_at_start: Some(info),
            margin: cfg.margin(info.total),
            unexplained: Arc::default(),
            kernels: Arc::default(),
        })
    }

    /// Explicit budgets (tests, or several `Vram`s sharing one host budget).
    pub fn with_budgets(backend: Arc<dyn MemoryBackend>, device: Budget, host: Budget) -> Self {
        Self {
            backend,
            device,
            host,
            mem_at_start: None,
            margin: 0,
            unexplained: Arc::default(),
            kernels: Arc::default(),
        }
    }

    /// A logical device over this one's memory with a device budget of its own: it shares the
    /// backend, the host budget and the kernels' bytes, and does not follow free memory.
    pub fn logical(&self, device: Budget) -> Self {
        Self {
            backend: self.backend.clone(),
            device,
            host: self.host.clone(),
            mem_at_start: None,
            margin: 0,
            unexplained: Arc::default(),
            kernels: self.kernels.clone(),
        }
    }

    pub fn backend(&self) -> &Arc<dyn MemoryBackend> {
        &self.backend
    }
    pub fn budget(&self) -> &Budget {
        &self.device
    }
    pub fn host_budget(&self) -> &Budget {
        &self.host
    }
    /// What `cuMemGetInfo` said when the budget was computed (if built by [`Vram::new`]).
    pub fn mem_at_start(&self) -> Option<MemInfo> {
        self.mem_at_start
    }

    /// `cuMemGetInfo` now and the budget's bytes allocated at that moment, or `None` when one of
    /// our buffers was allocated or freed across every one of [`STEADY_ATTEMPTS`] readings. A
    /// reading that straddles an allocation would blame our own buffer on others: it must be
    /// dropped, not guessed at (the driver may finish a `cuMemAlloc` before `cuMemGetInfo`
    /// answers, so a burst of allocations can straddle every attempt).
    pub fn steady_reading(&self) -> Result<Option<(MemInfo, u64)>> {
        for _ in 0..STEADY_ATTEMPTS {
            let before = self.device.allocated();
            let info = self.backend.mem_get_info()?;
            if self.device.allocated() == before {
                return Ok(Some((info, before)));
            }
        }
        Ok(None)
    }

    /// Counts `bytes` the driver took for our own kernels (module images and the local memory
    /// their stack frames reserve), as the loader measured them: explained, so not taken by
    /// others.
    pub fn add_kernel_bytes(&self, bytes: u64) {
        self.kernels.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Device memory the driver holds for us outside the budget: our kernels (see
    /// [`Self::add_kernel_bytes`]) and the page tables that map our pinned host memory into the
    /// device, one 8-byte entry per 4 KiB page (2 MiB per GiB pinned, `cuMemHostAlloc` and
    /// `cuMemHostRegister` alike: measured in run 130).
    pub fn driver_bytes(&self) -> u64 {
        self.kernels.load(Ordering::Relaxed) + self.host.in_use() / PINNED_BYTES_PER_TABLE_BYTE
    }

    /// Compares `cuMemGetInfo` now with the start and lowers the device budget's limit by the
    /// memory others took since (another process, or beyond half the margin the driver's own
    /// later allocations): new requests then wait instead of meeting an out-of-memory error.
    /// Once that memory is back, the limit is back at the budget's total. `None`: unchanged,
    /// no steady reading now, or a budget not built by [`Vram::new`].
    pub fn refresh_limit(&self) -> Result<Option<LimitChange>> {
        let Some(start) = self.mem_at_start else {
            return Ok(None);
        };
        // Not steady: the next reading decides.
        let Some((info, ours)) = self.steady_reading()? else {
            return Ok(None);
        };
        let explained = ours.saturating_add(self.driver_bytes());
        let taken_by_others = start
            .free
            .saturating_sub(info.free.saturating_add(explained));
        self.unexplained
            .peak
            .fetch_max(taken_by_others, Ordering::Relaxed);
        let total = self.device.total();
        let limit = if taken_by_others <= self.margin / 2 {
            total
        } else {
            total.min(
                start
                    .free
                    .saturating_sub(self.margin)
                    .saturating_sub(taken_by_others),
            )
        };
        let before = self.device.limit();
        if limit == before {
            return Ok(None);
        }
        self.device.set_limit(limit);
        if limit < before {
            self.unexplained.lowered.fetch_add(1, Ordering::Relaxed);
        }
        Ok(Some(LimitChange {
            before,
            after: limit,
            taken_by_others,
        }))
    }

    /// The most device memory [`Self::refresh_limit`] has found taken beyond the budget's own
    /// buffers and [`Self::driver_bytes`] since the start, and how many times it lowered the
    /// limit for it.
    pub fn unexplained(&self) -> (u64, u64) {
        (
            self.unexplained.peak.load(Ordering::Relaxed),
            self.unexplained.lowered.load(Ordering::Relaxed),
        )
    }

    /// Device-budget bytes for `len` elements of `T` (rounded to [`DEVICE_ALIGN`]).
    pub fn bytes_for<T>(len: usize) -> Result<u64> {
        device_bytes_for::<T>(len)
    }

    /// Reserves device budget now or fails with `OutOfBudget` / `ExceedsBudget`.
    pub fn reserve(&self, bytes: u64) -> Result<Reservation> {
        self.device.try_acquire_or_err(bytes)
    }

    /// Reserves device budget, waiting up to `timeout` (first come, first served).
    pub fn reserve_wait(&self, bytes: u64, timeout: Duration) -> Result<Reservation> {
        self.device.acquire(bytes, timeout)
    }

    /// Allocates `len` elements, charging the budget; fails at once if the budget is short.
    /// Contents are unspecified (whatever the device memory held).
    pub fn alloc<T: Pod>(&self, len: usize) -> Result<DeviceBuffer<T>> {
        let r = self.reserve(Self::bytes_for::<T>(len)?)?;
        DeviceBuffer::new(self.backend.clone(), r, len)
    }

    /// As [`alloc`](Self::alloc) but waits up to `timeout` for budget.
    pub fn alloc_wait<T: Pod>(&self, len: usize, timeout: Duration) -> Result<DeviceBuffer<T>> {
        let r = self.reserve_wait(Self::bytes_for::<T>(len)?, timeout)?;
        DeviceBuffer::new(self.backend.clone(), r, len)
    }

    /// Allocates `len` elements out of an existing reservation (which shrinks by
    /// `bytes_for::<T>(len)`; the buffer returns those bytes to the budget when dropped).
    pub fn alloc_in<T: Pod>(&self, from: &mut Reservation, len: usize) -> Result<DeviceBuffer<T>> {
        if !from.budget().same_as(&self.device) {
            return Err(VramError::InvalidSize(
                "reservation is not from this device's budget".into(),
            ));
        }
        let r = from.split(Self::bytes_for::<T>(len)?)?;
        DeviceBuffer::new(self.backend.clone(), r, len)
    }

    /// Allocates one buffer per length, all or nothing: the total is reserved first, and if
    /// any allocation fails every earlier one is freed and the budget is restored exactly.
    pub fn alloc_many<T: Pod>(&self, lens: &[usize]) -> Result<Vec<DeviceBuffer<T>>> {
        let mut total = 0u64;
        for &l in lens {
            total = total
                .checked_add(Self::bytes_for::<T>(l)?)
                .ok_or_else(|| VramError::InvalidSize("total size overflows".into()))?;
        }
        let mut res = self.reserve(total)?;
        lens.iter().map(|&l| self.alloc_in(&mut res, l)).collect()
    }

    /// Allocates and fills from `data` (synchronous copy).
    pub fn from_host<T: Pod>(&self, data: &[T]) -> Result<DeviceBuffer<T>> {
        let mut b = self.alloc(data.len())?;
        b.copy_from_host(data)?;
        Ok(b)
    }

    /// Page-locked, zeroed host buffer charged to the host budget.
    pub fn pinned<T: Pod>(&self, len: usize) -> Result<PinnedBuffer<T>> {
        self.pinned_many([len]).map(|[b]| b)
    }

    /// Page-locked, zeroed host buffers, one per length, all or nothing: the total is taken
    /// from the host budget first, so a set that does not fit pins nothing (pinning and
    /// unpinning gigabytes takes seconds).
    pub fn pinned_many<T: Pod, const N: usize>(
        &self,
        lens: [usize; N],
    ) -> Result<[PinnedBuffer<T>; N]> {
        let mut total = 0u64;
        for l in lens {
            total = total
                .checked_add(pinned_bytes::<T>(l)?)
                .ok_or_else(|| VramError::InvalidSize("total size overflows".into()))?;
        }
        let mut room = self.host.try_acquire_or_err(total)?;
        let mut made = Vec::with_capacity(N);
        for l in lens {
            let r = room.split(pinned_bytes::<T>(l)?)?;
            made.push(PinnedBuffer::new(self.backend.clone(), r, l)?);
        }
        made.try_into()
            .map_err(|_| VramError::InvalidSize(format!("{N} pinned buffers asked, others made")))
    }

    /// Page-locks `data` until the returned guard drops; charged to the host budget.
    pub fn register<'a, T: Pod>(&self, data: &'a mut [T]) -> Result<RegisteredHost<'a, T>> {
        let r = self
            .host
            .try_acquire_or_err(std::mem::size_of_val(data) as u64)?;
        RegisteredHost::new(self.backend.clone(), r, data)
    }
}

/// Host bytes of `len` pinned elements (unrounded: page-locked memory is the host's).
fn pinned_bytes<T>(len: usize) -> Result<u64> {
    (len as u64)
        .checked_mul(std::mem::size_of::<T>() as u64)
        .ok_or_else(|| VramError::InvalidSize(format!("{len} elements overflow")))
}

#[cfg(test)]
mod tests;
