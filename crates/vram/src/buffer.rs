//! RAII device buffers and pinned / registered host memory.

use std::fmt;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;
use std::sync::Arc;

use bytemuck::Pod;
use cudarc::driver::CudaStream;

use crate::backend::{DevicePtr, MemoryBackend};
use crate::budget::Reservation;
use crate::error::{Result, VramError};

/// Device memory is accounted in multiples of this (cuMemAlloc's minimum alignment).
pub const DEVICE_ALIGN: u64 = 256;

/// Bytes a `DeviceBuffer<T>` of `len` elements takes from the device budget.
pub fn device_bytes_for<T>(len: usize) -> Result<u64> {
    let raw = len.checked_mul(std::mem::size_of::<T>()).ok_or_else(|| {
        VramError::InvalidSize(format!(
            "{len} x {} bytes overflows",
            std::mem::size_of::<T>()
        ))
    })?;
    Ok((raw as u64).div_ceil(DEVICE_ALIGN) * DEVICE_ALIGN)
}

/// `len` elements of `T` in device memory, freed (and its budget returned) on drop.
///
/// Dropping frees with `cuMemFree`, which waits for pending work that uses the buffer.
pub struct DeviceBuffer<T: Pod> {
    ptr: DevicePtr,
    len: usize,
    backend: Arc<dyn MemoryBackend>,
    reservation: Reservation,
    _t: PhantomData<T>,
}

impl<T: Pod> fmt::Debug for DeviceBuffer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceBuffer")
            .field("type", &std::any::type_name::<T>())
            .field("ptr", &format_args!("{:#x}", self.ptr))
            .field("len", &self.len)
            .finish()
    }
}

impl<T: Pod> DeviceBuffer<T> {
    /// Allocates under `reservation`, which must hold exactly `device_bytes_for::<T>(len)`.
    pub(crate) fn new(
        backend: Arc<dyn MemoryBackend>,
        reservation: Reservation,
        len: usize,
    ) -> Result<Self> {
        let bytes = len * std::mem::size_of::<T>();
        // cuMemAlloc(0) is an error; an empty buffer needs no memory.
        // Counted before the driver takes the memory (and uncounted after it has it back):
        // a free-memory reading then never finds our own buffers unexplained.
        let ptr = if bytes == 0 {
            0
        } else {
            reservation.budget().note_allocated(bytes as u64);
            backend.alloc_device(bytes).inspect_err(|_| {
                reservation.budget().note_freed(bytes as u64);
            })?
        };
        Ok(Self {
            ptr,
            len,
            backend,
            reservation,
            _t: PhantomData,
        })
    }

    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Size of the data in bytes.
    pub fn byte_len(&self) -> usize {
        self.len * std::mem::size_of::<T>()
    }
    /// Bytes charged to the device budget.
    pub fn reserved_bytes(&self) -> u64 {
        self.reservation.bytes()
    }
    /// The raw device address, for kernel arguments (0 for an empty buffer).
    pub fn device_ptr(&self) -> DevicePtr {
        self.ptr
    }
    /// The address as a reference, for building kernel parameter arrays without a temporary.
    pub fn device_ptr_ref(&self) -> &DevicePtr {
        &self.ptr
    }

    fn check_len(&self, got: usize) -> Result<()> {
        if got != self.len {
            return Err(VramError::LengthMismatch {
                expected: self.len,
                got,
            });
        }
        Ok(())
    }

    /// Copies `src` to the device and waits for the copy.
    pub fn copy_from_host(&mut self, src: &[T]) -> Result<()> {
        self.check_len(src.len())?;
        if self.len == 0 {
            return Ok(());
        }
        // SAFETY: lengths checked; synchronous copy, `src` outlives it.
        unsafe {
            self.backend
                .copy_htod(self.ptr, src.as_ptr().cast(), self.byte_len(), None)
        }
    }

    /// Copies the device data into `dst` and waits for the copy.
    pub fn copy_to_host(&self, dst: &mut [T]) -> Result<()> {
        self.check_len(dst.len())?;
        if self.len == 0 {
            return Ok(());
        }
        // SAFETY: lengths checked; synchronous copy into an exclusive borrow.
        unsafe {
            self.backend
                .copy_dtoh(dst.as_mut_ptr().cast(), self.ptr, self.byte_len(), None)
        }
    }

    /// Copies the device data into a new `Vec` (synchronous).
    pub fn to_vec(&self) -> Result<Vec<T>> {
        let mut v = vec![T::zeroed(); self.len];
        self.copy_to_host(&mut v)?;
        Ok(v)
    }

    /// Sets every byte to `value` (synchronous), e.g. to poison a buffer in tests.
    pub fn fill_bytes(&mut self, value: u8) -> Result<()> {
        if self.len == 0 {
            return Ok(());
        }
        // SAFETY: the range is exactly this live allocation.
        unsafe {
            self.backend
                .memset_d8(self.ptr, value, self.byte_len(), None)
        }
    }

    /// Enqueues setting every byte to `value` on `stream`.
    pub fn fill_bytes_async(&mut self, value: u8, stream: &CudaStream) -> Result<()> {
        if self.len == 0 {
            return Ok(());
        }
        // SAFETY: the range is exactly this live allocation; no host memory involved.
        unsafe {
            self.backend
                .memset_d8(self.ptr, value, self.byte_len(), Some(stream))
        }
    }

    /// Copies `src` to the device, then synchronizes `stream` (ordered after earlier work on it).
    pub fn copy_from_host_on(&mut self, src: &[T], stream: &CudaStream) -> Result<()> {
        // SAFETY: we synchronize before `src`'s borrow ends.
        unsafe { self.copy_from_host_async(src, stream)? };
        stream
            .synchronize()
            .map_err(crate::backend::backend_err("cuStreamSynchronize"))
    }

    /// Copies to `dst`, then synchronizes `stream` (ordered after earlier work on it, e.g. a kernel).
    pub fn copy_to_host_on(&self, dst: &mut [T], stream: &CudaStream) -> Result<()> {
        // SAFETY: we synchronize before `dst`'s borrow ends.
        unsafe { self.copy_to_host_async(dst, stream)? };
        stream
            .synchronize()
            .map_err(crate::backend::backend_err("cuStreamSynchronize"))
    }

    /// Enqueues a host→device copy on `stream`. Truly asynchronous only from pinned memory.
    ///
    /// # Safety
    /// `src` must stay alive and unmodified until `stream` has passed this copy (synchronize
    /// the stream or an event recorded after it).
    pub unsafe fn copy_from_host_async(&mut self, src: &[T], stream: &CudaStream) -> Result<()> {
        self.check_len(src.len())?;
        if self.len == 0 {
            return Ok(());
        }
        // SAFETY: lengths checked; caller keeps `src` alive until the copy ran.
        unsafe {
            self.backend
                .copy_htod(self.ptr, src.as_ptr().cast(), self.byte_len(), Some(stream))
        }
    }

    /// Enqueues a device→host copy on `stream`.
    ///
    /// # Safety
    /// `dst` must stay alive and must not be read or written until `stream` has passed this copy.
    pub unsafe fn copy_to_host_async(&self, dst: &mut [T], stream: &CudaStream) -> Result<()> {
        self.check_len(dst.len())?;
        if self.len == 0 {
            return Ok(());
        }
        // SAFETY: lengths checked; caller keeps `dst` alive and untouched until the copy ran.
        unsafe {
            self.backend.copy_dtoh(
                dst.as_mut_ptr().cast(),
                self.ptr,
                self.byte_len(),
                Some(stream),
            )
        }
    }
}

impl<T: Pod> Drop for DeviceBuffer<T> {
    fn drop(&mut self) {
        if self.ptr != 0 {
            // SAFETY: we own this allocation and drop ends all use of it.
            unsafe { self.backend.free_device(self.ptr) };
            self.reservation.budget().note_freed(self.byte_len() as u64);
        }
        // `reservation` drops after this, returning the budget once the memory is really free.
    }
}

/// Page-locked host memory (`cuMemHostAlloc`), counted against the host budget, freed on drop.
/// Zero-initialized, so it derefs to an ordinary slice.
pub struct PinnedBuffer<T: Pod> {
    ptr: NonNull<T>,
    len: usize,
    backend: Arc<dyn MemoryBackend>,
    _reservation: Reservation,
}

// SAFETY: PinnedBuffer owns its allocation exclusively, like a Box<[T]>.
unsafe impl<T: Pod + Send> Send for PinnedBuffer<T> {}
// SAFETY: shared access only hands out &[T].
unsafe impl<T: Pod + Sync> Sync for PinnedBuffer<T> {}

impl<T: Pod> fmt::Debug for PinnedBuffer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PinnedBuffer")
            .field("type", &std::any::type_name::<T>())
            .field("len", &self.len)
            .finish()
    }
}

impl<T: Pod> PinnedBuffer<T> {
    pub(crate) fn new(
        backend: Arc<dyn MemoryBackend>,
        reservation: Reservation,
        len: usize,
    ) -> Result<Self> {
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .ok_or_else(|| VramError::InvalidSize(format!("{len} elements overflow")))?;
        let ptr = if bytes == 0 {
            NonNull::dangling()
        } else {
            let p = backend.alloc_pinned(bytes)?;
            // SAFETY: fresh allocation of `bytes` bytes; zero is a valid T (Pod), so after this
            // the memory is initialized. Alignment: pinned allocations are page-aligned.
            unsafe { p.as_ptr().write_bytes(0, bytes) };
            p.cast()
        };
        Ok(Self {
            ptr,
            len,
            backend,
            _reservation: reservation,
        })
    }
}

impl<T: Pod> Deref for PinnedBuffer<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: ptr is valid, aligned and initialized for len elements (or dangling with len 0).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Pod> DerefMut for PinnedBuffer<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in deref, and &mut self gives exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Pod> Drop for PinnedBuffer<T> {
    fn drop(&mut self) {
        if self.len * std::mem::size_of::<T>() != 0 {
            // SAFETY: allocated by this backend in `new`, no borrows outlive self.
            unsafe { self.backend.free_pinned(self.ptr.cast()) };
        }
    }
}

/// Existing host memory page-locked with `cuMemHostRegister` for the borrow's lifetime;
/// unregistered on drop. Counted against the host budget.
pub struct RegisteredHost<'a, T: Pod> {
    data: &'a mut [T],
    backend: Arc<dyn MemoryBackend>,
    _reservation: Reservation,
}

impl<T: Pod> fmt::Debug for RegisteredHost<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegisteredHost")
            .field("type", &std::any::type_name::<T>())
            .field("len", &self.data.len())
            .finish()
    }
}

impl<'a, T: Pod> RegisteredHost<'a, T> {
    pub(crate) fn new(
        backend: Arc<dyn MemoryBackend>,
        reservation: Reservation,
        data: &'a mut [T],
    ) -> Result<Self> {
        let bytes = std::mem::size_of_val(data);
        if bytes != 0 {
            // SAFETY: `data` is a live exclusive borrow that outlives self; unregistered in Drop.
            unsafe { backend.register_host(data.as_mut_ptr().cast(), bytes)? };
        }
        Ok(Self {
            data,
            backend,
            _reservation: reservation,
        })
    }
}

impl<T: Pod> Deref for RegisteredHost<'_, T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        self.data
    }
}

impl<T: Pod> DerefMut for RegisteredHost<'_, T> {
    fn deref_mut(&mut self) -> &mut [T] {
        self.data
    }
}

impl<T: Pod> Drop for RegisteredHost<'_, T> {
    fn drop(&mut self) {
        if std::mem::size_of_val(self.data) != 0 {
            // SAFETY: registered in `new` with this pointer.
            unsafe { self.backend.unregister_host(self.data.as_mut_ptr().cast()) };
        }
    }
}
