//! The raw memory operations the allocator needs, behind a trait so that the accounting and
//! failure paths are tested on the CPU with [`FakeBackend`].
//!
//! Device memory uses plain `cuMemAlloc`/`cuMemFree`, never the stream-ordered pool
//! (`cuMemAllocAsync`/`cuMemFreeAsync`): memory freed into a pool stays reserved by that pool
//! and is invisible to a later synchronous allocation (and to `cuMemGetInfo`), so a budget
//! computed from free memory would lie after the first free. `cuMemFree` returns memory to the
//! device at once (it waits for outstanding work on the buffer, which is what we want for RAII).

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::ptr::NonNull;
use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaStream, DriverError, result, sys};
use parking_lot::Mutex;

use crate::error::{Result, VramError};
use crate::inject::Site;

/// A device address (`CUdeviceptr`).
pub type DevicePtr = u64;

/// What `cuMemGetInfo` reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemInfo {
    pub free: u64,
    pub total: u64,
}

/// Raw device and host memory operations for one device.
///
/// `stream: None` means a synchronous operation; `Some` enqueues on that stream.
pub trait MemoryBackend: Send + Sync + fmt::Debug {
    fn mem_get_info(&self) -> Result<MemInfo>;
    /// Allocates `bytes > 0` bytes of device memory.
    fn alloc_device(&self, bytes: usize) -> Result<DevicePtr>;
    /// # Safety
    /// `ptr` came from `alloc_device` of this backend and is not used afterwards.
    unsafe fn free_device(&self, ptr: DevicePtr);
    /// # Safety
    /// `src..src+bytes` is readable host memory and `dst..dst+bytes` lies in one live device
    /// allocation; with a stream, `src` must stay valid until the stream reaches the copy.
    unsafe fn copy_htod(
        &self,
        dst: DevicePtr,
        src: *const u8,
        bytes: usize,
        stream: Option<&CudaStream>,
    ) -> Result<()>;
    /// # Safety
    /// As `copy_htod`, with `dst` writable host memory that nothing else accesses until the copy
    /// completes.
    unsafe fn copy_dtoh(
        &self,
        dst: *mut u8,
        src: DevicePtr,
        bytes: usize,
        stream: Option<&CudaStream>,
    ) -> Result<()>;
    /// # Safety
    /// `dst..dst+bytes` lies in one live device allocation.
    unsafe fn memset_d8(
        &self,
        dst: DevicePtr,
        value: u8,
        bytes: usize,
        stream: Option<&CudaStream>,
    ) -> Result<()>;
    /// Page-locked host allocation of `bytes > 0` bytes, aligned to at least 256 bytes.
    fn alloc_pinned(&self, bytes: usize) -> Result<NonNull<u8>>;
    /// # Safety
    /// `ptr` came from `alloc_pinned` of this backend and is not used afterwards.
    unsafe fn free_pinned(&self, ptr: NonNull<u8>);
    /// # Safety
    /// `ptr..ptr+bytes` is a live host allocation that outlives the registration.
    unsafe fn register_host(&self, ptr: *mut u8, bytes: usize) -> Result<()>;
    /// # Safety
    /// `ptr` was registered with `register_host` of this backend.
    unsafe fn unregister_host(&self, ptr: *mut u8);
}

/// CUDA error name of a driver error, e.g. `CUDA_ERROR_OUT_OF_MEMORY`.
pub fn cuda_error_name(e: &DriverError) -> String {
    // The enum variant names are the CUDA error names; no driver call needed.
    format!("{:?}", e.0)
}

pub(crate) fn backend_err(op: &'static str) -> impl Fn(DriverError) -> VramError {
    move |e| VramError::Backend {
        op,
        name: cuda_error_name(&e),
    }
}

/// The real backend: CUDA driver API calls in `ctx`.
#[derive(Debug, Clone)]
pub struct CudaBackend {
    ctx: Arc<CudaContext>,
}

impl CudaBackend {
    pub fn new(ctx: Arc<CudaContext>) -> Self {
        Self { ctx }
    }
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }
    fn bind(&self, op: &'static str) -> Result<()> {
        self.ctx.bind_to_thread().map_err(backend_err(op))
    }

    /// Binds the context for a call of kind `site`, or fails it when the reliability suite's
    /// injector says so.
    fn enter(&self, site: Site, op: &'static str) -> Result<()> {
        if crate::inject::fails(site) {
            return Err(VramError::Backend {
                op,
                name: crate::inject::INJECTED.into(),
            });
        }
        self.bind(op)
    }
}

/// Waits for the work of the legacy default stream, where the driver's "synchronous" copy and
/// memset run. Neither has finished on the device when it returns (a pageable host-to-device
/// copy returns once the data is staged; cuMemsetD8 is asynchronous), and our streams are all
/// non-blocking, so without this wait a kernel launched next may read the old contents.
fn wait_legacy_stream(op: &'static str) -> Result<()> {
    // SAFETY: the null handle names the context's legacy default stream, always valid.
    unsafe { result::stream::synchronize(std::ptr::null_mut()) }.map_err(backend_err(op))
}

const CU_MEMHOSTALLOC_PORTABLE: u32 = 0x01;
const CU_MEMHOSTREGISTER_PORTABLE: u32 = 0x01;

impl MemoryBackend for CudaBackend {
    fn mem_get_info(&self) -> Result<MemInfo> {
        self.bind("cuMemGetInfo")?;
        let (free, total) = result::mem_get_info().map_err(backend_err("cuMemGetInfo"))?;
        Ok(MemInfo {
            free: free as u64,
            total: total as u64,
        })
    }

    fn alloc_device(&self, bytes: usize) -> Result<DevicePtr> {
        self.enter(Site::DeviceAlloc, "cuMemAlloc")?;
        // SAFETY: context bound; the result is an owned allocation or an error.
        unsafe { result::malloc_sync(bytes) }.map_err(backend_err("cuMemAlloc"))
    }

    unsafe fn free_device(&self, ptr: DevicePtr) {
        // Errors here mean a dead context; nothing useful can be done from Drop.
        let _ = self.ctx.bind_to_thread();
        // SAFETY: caller guarantees ptr is a live allocation of ours.
        let _ = unsafe { result::free_sync(ptr) };
    }

    unsafe fn copy_htod(
        &self,
        dst: DevicePtr,
        src: *const u8,
        bytes: usize,
        stream: Option<&CudaStream>,
    ) -> Result<()> {
        self.enter(Site::Copy, "cuMemcpyHtoD")?;
        // SAFETY: caller guarantees both ranges are valid for `bytes`.
        let src = unsafe { std::slice::from_raw_parts(src, bytes) };
        match stream {
            // SAFETY: as above; caller keeps `src` alive until the stream passes the copy.
            Some(s) => unsafe { result::memcpy_htod_async(dst, src, s.cu_stream()) }
                .map_err(backend_err("cuMemcpyHtoDAsync")),
            // SAFETY: as above.
            None => {
                unsafe { result::memcpy_htod_sync(dst, src) }
                    .map_err(backend_err("cuMemcpyHtoD"))?;
                wait_legacy_stream("cuMemcpyHtoD")
            }
        }
    }

    unsafe fn copy_dtoh(
        &self,
        dst: *mut u8,
        src: DevicePtr,
        bytes: usize,
        stream: Option<&CudaStream>,
    ) -> Result<()> {
        self.enter(Site::Copy, "cuMemcpyDtoH")?;
        // SAFETY: caller guarantees both ranges are valid for `bytes` and `dst` is exclusive.
        let dst = unsafe { std::slice::from_raw_parts_mut(dst, bytes) };
        match stream {
            // SAFETY: as above.
            Some(s) => unsafe { result::memcpy_dtoh_async(dst, src, s.cu_stream()) }
                .map_err(backend_err("cuMemcpyDtoHAsync")),
            // SAFETY: as above.
            None => {
                unsafe { result::memcpy_dtoh_sync(dst, src) }.map_err(backend_err("cuMemcpyDtoH"))
            }
        }
    }

    unsafe fn memset_d8(
        &self,
        dst: DevicePtr,
        value: u8,
        bytes: usize,
        stream: Option<&CudaStream>,
    ) -> Result<()> {
        self.enter(Site::Copy, "cuMemsetD8")?;
        match stream {
            // SAFETY: caller guarantees the range lies in a live allocation.
            Some(s) => unsafe { result::memset_d8_async(dst, value, bytes, s.cu_stream()) }
                .map_err(backend_err("cuMemsetD8Async")),
            // SAFETY: as above.
            None => {
                unsafe { result::memset_d8_sync(dst, value, bytes) }
                    .map_err(backend_err("cuMemsetD8"))?;
                wait_legacy_stream("cuMemsetD8")
            }
        }
    }

    fn alloc_pinned(&self, bytes: usize) -> Result<NonNull<u8>> {
        self.enter(Site::PinnedAlloc, "cuMemHostAlloc")?;
        // SAFETY: context bound; returns an owned page-locked allocation or an error.
        let p = unsafe { result::malloc_host(bytes, CU_MEMHOSTALLOC_PORTABLE) }
            .map_err(backend_err("cuMemHostAlloc"))?;
        NonNull::new(p.cast()).ok_or(VramError::Backend {
            op: "cuMemHostAlloc",
            name: "null pointer".into(),
        })
    }

    unsafe fn free_pinned(&self, ptr: NonNull<u8>) {
        let _ = self.ctx.bind_to_thread();
        // SAFETY: caller guarantees ptr came from alloc_pinned.
        let _ = unsafe { result::free_host(ptr.as_ptr().cast()) };
    }

    unsafe fn register_host(&self, ptr: *mut u8, bytes: usize) -> Result<()> {
        self.enter(Site::HostRegister, "cuMemHostRegister")?;
        // SAFETY: caller guarantees the range is a live host allocation outliving registration.
        unsafe { sys::cuMemHostRegister_v2(ptr.cast(), bytes, CU_MEMHOSTREGISTER_PORTABLE) }
            .result()
            .map_err(backend_err("cuMemHostRegister"))
    }

    unsafe fn unregister_host(&self, ptr: *mut u8) {
        let _ = self.ctx.bind_to_thread();
        // SAFETY: caller guarantees ptr was registered by us.
        let _ = unsafe { sys::cuMemHostUnregister(ptr.cast()) }.result();
    }
}

/// Faults a [`FakeBackend`] can inject.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Faults {
    /// Fail the Nth `alloc_device` call (1-based, counted over the backend's life).
    pub fail_device_alloc_at: Option<u64>,
    /// Fail every `alloc_device` call from the Nth on.
    pub fail_device_alloc_from: Option<u64>,
    /// Fail `alloc_pinned`.
    pub fail_pinned_alloc: bool,
    /// Fail `register_host`.
    pub fail_register: bool,
}

/// Live allocations of a [`FakeBackend`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FakeCounts {
    pub device_allocs: usize,
    pub device_bytes: u64,
    pub pinned_allocs: usize,
    pub registered: usize,
    /// Total `alloc_device` calls made (successful or not).
    pub device_alloc_calls: u64,
    /// Total `alloc_pinned` calls made (successful or not).
    pub pinned_alloc_calls: u64,
}

/// CPU stand-in for a device: "device memory" is host memory (materialized on first touch,
/// so large fake budgets cost nothing), with fault injection and live-allocation records.
pub struct FakeBackend {
    total: u64,
    state: Mutex<FakeState>,
    /// Runs in each device allocation once the memory is taken, as a driver call that has not
    /// returned yet (what another thread may see meanwhile).
    on_alloc: Mutex<Option<Arc<dyn Fn() + Send + Sync>>>,
    /// Runs in each free-memory reading before it reads (what other threads do meanwhile).
    on_mem_info: Mutex<Option<Arc<dyn Fn() + Send + Sync>>>,
}

impl fmt::Debug for FakeBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FakeBackend")
            .field("total", &self.total)
            .field("state", &self.state)
            .finish()
    }
}

#[derive(Debug, Default)]
struct FakeState {
    free: u64,
    held_by_others: u64,
    next_addr: u64,
    device: BTreeMap<u64, (usize, Option<Vec<u8>>)>,
    pinned: HashMap<usize, std::alloc::Layout>,
    registered: HashMap<usize, usize>,
    calls: u64,
    pinned_calls: u64,
    faults: Faults,
}

const FAKE_OOM: &str = crate::error::CUDA_OUT_OF_MEMORY;

impl FakeBackend {
    /// A fake device with `total` bytes, all free.
    pub fn new(total: u64) -> Self {
        Self::with_free(total, total)
    }
    pub fn with_free(total: u64, free: u64) -> Self {
        Self {
            total,
            state: Mutex::new(FakeState {
                free,
                next_addr: 1 << 32,
                ..Default::default()
            }),
            on_alloc: Mutex::new(None),
            on_mem_info: Mutex::new(None),
        }
    }

    /// Runs `f` inside every later device allocation, after the memory is taken.
    pub fn on_alloc(&self, f: impl Fn() + Send + Sync + 'static) {
        *self.on_alloc.lock() = Some(Arc::new(f));
    }
    /// Runs `f` inside every later free-memory reading, before it reads.
    pub fn on_mem_info(&self, f: impl Fn() + Send + Sync + 'static) {
        *self.on_mem_info.lock() = Some(Arc::new(f));
    }
    /// Simulates another process holding `bytes` of this device (as much of them as is free;
    /// 0 gives it all back). Returns the bytes it holds now.
    pub fn set_held_by_another_process(&self, bytes: u64) -> u64 {
        let mut s = self.state.lock();
        s.free += s.held_by_others;
        s.held_by_others = bytes.min(s.free);
        s.free -= s.held_by_others;
        s.held_by_others
    }
    pub fn set_faults(&self, f: Faults) {
        self.state.lock().faults = f;
    }
    pub fn counts(&self) -> FakeCounts {
        let s = self.state.lock();
        FakeCounts {
            device_allocs: s.device.len(),
            device_bytes: s.device.values().map(|(n, _)| *n as u64).sum(),
            pinned_allocs: s.pinned.len(),
            registered: s.registered.len(),
            device_alloc_calls: s.calls,
            pinned_alloc_calls: s.pinned_calls,
        }
    }

    /// Runs `f` on the fake device bytes at `ptr..ptr+bytes`.
    fn with_range<R>(
        &self,
        op: &'static str,
        ptr: u64,
        bytes: usize,
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> Result<R> {
        let mut s = self.state.lock();
        let invalid = || VramError::Backend {
            op,
            name: "CUDA_ERROR_INVALID_VALUE".into(),
        };
        let (&base, (len, data)) = s.device.range_mut(..=ptr).next_back().ok_or_else(invalid)?;
        let off = (ptr - base) as usize;
        if off + bytes > *len {
            return Err(invalid());
        }
        let data = data.get_or_insert_with(|| vec![0u8; *len]);
        Ok(f(&mut data[off..off + bytes]))
    }
}

impl MemoryBackend for FakeBackend {
    fn mem_get_info(&self) -> Result<MemInfo> {
        let observer = self.on_mem_info.lock().clone();
        if let Some(f) = observer {
            f();
        }
        Ok(MemInfo {
            free: self.state.lock().free,
            total: self.total,
        })
    }

    fn alloc_device(&self, bytes: usize) -> Result<DevicePtr> {
        let mut s = self.state.lock();
        s.calls += 1;
        let n = s.calls;
        let f = &s.faults;
        if f.fail_device_alloc_at == Some(n)
            || f.fail_device_alloc_from.is_some_and(|k| n >= k)
            || bytes as u64 > s.free
        {
            return Err(VramError::Backend {
                op: "cuMemAlloc",
                name: FAKE_OOM.into(),
            });
        }
        let addr = s.next_addr;
        s.next_addr += (bytes as u64).div_ceil(256) * 256 + 256;
        s.free -= bytes as u64;
        s.device.insert(addr, (bytes, None));
        drop(s);
        let observer = self.on_alloc.lock().clone();
        if let Some(f) = observer {
            f();
        }
        Ok(addr)
    }

    unsafe fn free_device(&self, ptr: DevicePtr) {
        let mut s = self.state.lock();
        let (len, _) = s
            .device
            .remove(&ptr)
            .expect("FakeBackend: free of unknown device pointer");
        s.free += len as u64;
    }

    unsafe fn copy_htod(
        &self,
        dst: DevicePtr,
        src: *const u8,
        bytes: usize,
        _: Option<&CudaStream>,
    ) -> Result<()> {
        // SAFETY: caller guarantees `src` is readable for `bytes`.
        let src = unsafe { std::slice::from_raw_parts(src, bytes) };
        self.with_range("cuMemcpyHtoD", dst, bytes, |d| d.copy_from_slice(src))
    }

    unsafe fn copy_dtoh(
        &self,
        dst: *mut u8,
        src: DevicePtr,
        bytes: usize,
        _: Option<&CudaStream>,
    ) -> Result<()> {
        // SAFETY: caller guarantees `dst` is writable and exclusive for `bytes`.
        let dst = unsafe { std::slice::from_raw_parts_mut(dst, bytes) };
        self.with_range("cuMemcpyDtoH", src, bytes, |d| dst.copy_from_slice(d))
    }

    unsafe fn memset_d8(
        &self,
        dst: DevicePtr,
        value: u8,
        bytes: usize,
        _: Option<&CudaStream>,
    ) -> Result<()> {
        self.with_range("cuMemsetD8", dst, bytes, |d| d.fill(value))
    }

    fn alloc_pinned(&self, bytes: usize) -> Result<NonNull<u8>> {
        let mut s = self.state.lock();
        s.pinned_calls += 1;
        if s.faults.fail_pinned_alloc {
            return Err(VramError::Backend {
                op: "cuMemHostAlloc",
                name: FAKE_OOM.into(),
            });
        }
        let layout = std::alloc::Layout::from_size_align(bytes, 4096)
            .map_err(|e| VramError::InvalidSize(e.to_string()))?;
        // SAFETY: bytes > 0 per the trait contract, so the layout is non-zero-sized.
        let p = NonNull::new(unsafe { std::alloc::alloc(layout) }).ok_or(VramError::Backend {
            op: "cuMemHostAlloc",
            name: FAKE_OOM.into(),
        })?;
        s.pinned.insert(p.as_ptr() as usize, layout);
        Ok(p)
    }

    unsafe fn free_pinned(&self, ptr: NonNull<u8>) {
        let layout = self
            .state
            .lock()
            .pinned
            .remove(&(ptr.as_ptr() as usize))
            .expect("FakeBackend: unknown pinned pointer");
        // SAFETY: allocated above with this layout.
        unsafe { std::alloc::dealloc(ptr.as_ptr(), layout) };
    }

    unsafe fn register_host(&self, ptr: *mut u8, bytes: usize) -> Result<()> {
        let mut s = self.state.lock();
        if s.faults.fail_register {
            return Err(VramError::Backend {
                op: "cuMemHostRegister",
                name: "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED".into(),
            });
        }
        if s.registered.insert(ptr as usize, bytes).is_some() {
            return Err(VramError::Backend {
                op: "cuMemHostRegister",
                name: "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED".into(),
            });
        }
        Ok(())
    }

    unsafe fn unregister_host(&self, ptr: *mut u8) {
        self.state
            .lock()
            .registered
            .remove(&(ptr as usize))
            .expect("FakeBackend: unregister of unknown pointer");
    }
}
