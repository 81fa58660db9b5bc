//! Host <-> device transfer helpers shared by the MSM and the prover: scoped asynchronous
//! uploads of host sub-ranges, a two-slot ring of pinned result buffers, and two pinned slots
//! that stage pageable host data into a device buffer.

use std::marker::PhantomData;
use std::sync::Arc;

use bytemuck::Pod;
use cuzk_vram::{DeviceBuffer, MemoryBackend, PinnedBuffer};

use crate::device::{Event, Gpu, Stream};
use crate::error::{GpuError, Result};

fn invalid(what: &str, reason: String) -> GpuError {
    GpuError::InvalidLaunch {
        kernel: format!("transfer::{what}"),
        reason,
    }
}

fn need(what: &str, buffer: &str, have: usize, want: usize) -> Result<()> {
    if have < want {
        return Err(invalid(
            what,
            format!("{buffer} holds {have} elements, needs {want}"),
        ));
    }
    Ok(())
}

/// Runs `f` with an [`Uploader`] that enqueues asynchronous copies from `src` on `stream`;
/// when this returns (or unwinds), `stream` has been synchronized, so no copy outlives the
/// borrow of `src`. Copies are truly asynchronous when `src` is pinned.
pub fn with_uploads<'a, T: Pod, R>(
    gpu: &Gpu,
    stream: &Stream,
    src: &'a [T],
    f: impl FnOnce(&Uploader<'a, '_, T>) -> Result<R>,
) -> Result<R> {
    struct SyncOnDrop<'s>(&'s Stream);
    impl Drop for SyncOnDrop<'_> {
        fn drop(&mut self) {
            let _ = self.0.synchronize();
        }
    }
    let guard = SyncOnDrop(stream);
    let up = Uploader {
        src,
        stream,
        backend: gpu.vram().backend().clone(),
        _p: PhantomData,
    };
    let r = f(&up);
    drop(guard);
    let synced = stream.synchronize();
    let r = r?;
    synced?;
    Ok(r)
}

/// See [`with_uploads`].
#[derive(Debug)]
pub struct Uploader<'a, 's, T: Pod> {
    src: &'a [T],
    stream: &'s Stream,
    backend: Arc<dyn MemoryBackend>,
    _p: PhantomData<&'a T>,
}

impl<T: Pod> Uploader<'_, '_, T> {
    /// Enqueues `dst[0..len) = src[start..start+len)` on the scope's stream. `dst` must not be
    /// used by other streams until they wait for an event recorded after this.
    pub fn upload(&self, start: usize, len: usize, dst: &mut DeviceBuffer<T>) -> Result<()> {
        let end = start.checked_add(len).filter(|&e| e <= self.src.len());
        let Some(end) = end else {
            return Err(invalid(
                "upload",
                format!("range {start}+{len} outside {} elements", self.src.len()),
            ));
        };
        need("upload", "dst", dst.len(), len)?;
        if len == 0 {
            return Ok(());
        }
        let part = &self.src[start..end];
        // SAFETY: dst[0..len) lies in dst's live allocation; `part` is borrowed for the scope
        // lifetime 'a and with_uploads synchronizes the stream before that borrow ends.
        unsafe {
            self.backend.copy_htod(
                dst.device_ptr(),
                part.as_ptr().cast(),
                size_of_val(part),
                Some(self.stream.cuda()),
            )
        }
        .map_err(GpuError::from)
    }
}

/// Two pinned host buffers of `len` elements used in turn for device → host results: a copy
/// into one slot overlaps the caller's use of the other. Reading a slot waits for its copy.
#[derive(Debug)]
pub struct ResultRing<T: Pod> {
    slots: [PinnedBuffer<T>; 2],
    done: [Event; 2],
    pending: [bool; 2],
    stream: Stream,
}

impl<T: Pod> ResultRing<T> {
    pub fn new(gpu: &Gpu, stream: &Stream, len: usize) -> Result<Self> {
        Ok(Self {
            slots: gpu.vram().pinned_many([len; 2])?,
            done: [gpu.event()?, gpu.event()?],
            pending: [false; 2],
            stream: stream.clone(),
        })
    }

    /// Enqueues `slot ← src` (whole buffer, same length) on the ring's stream. Fails if the
    /// slot still holds an unread result.
    pub fn push(&mut self, slot: usize, src: &DeviceBuffer<T>) -> Result<()> {
        let s = slot % 2;
        if self.pending[s] {
            return Err(invalid(
                "ResultRing::push",
                format!("slot {s} was not read"),
            ));
        }
        need("ResultRing::push", "slot", self.slots[s].len(), src.len())?;
        let dst = &mut self.slots[s][..src.len()];
        // SAFETY: the pinned slot is owned by `self`; it is only read through `take`, which
        // waits for `done[s]` first, and Drop synchronizes before freeing it.
        unsafe { src.copy_to_host_async(dst, self.stream.cuda())? };
        self.stream.record(&self.done[s])?;
        self.pending[s] = true;
        Ok(())
    }

    /// Waits for the copy into `slot` and returns its contents (and frees the slot).
    pub fn take(&mut self, slot: usize) -> Result<&[T]> {
        let s = slot % 2;
        if !self.pending[s] {
            return Err(invalid("ResultRing::take", format!("slot {s} is empty")));
        }
        self.done[s].synchronize()?;
        self.pending[s] = false;
        Ok(&self.slots[s])
    }

    pub fn is_pending(&self, slot: usize) -> bool {
        self.pending[slot % 2]
    }
}

impl<T: Pod> Drop for ResultRing<T> {
    fn drop(&mut self) {
        for s in 0..2 {
            if self.pending[s] {
                let _ = self.done[s].synchronize();
            }
        }
    }
}

/// Two pinned host slots of `slot_len` elements for staging pageable host data into a device
/// buffer: the caller's copy into one slot (e.g. a parallel memcpy) overlaps the DMA from the
/// other. A pageable `cuMemcpyHtoD` runs at ~7 GB/s through the driver's own small staging
/// buffers; a pinned DMA runs at PCIe speed, so the host memcpy becomes the limit.
#[derive(Debug)]
pub struct Staging<T: Pod> {
    slots: [PinnedBuffer<T>; 2],
    done: [Event; 2],
    pending: [bool; 2],
    backend: Arc<dyn MemoryBackend>,
}

impl<T: Pod> Staging<T> {
    pub fn new(gpu: &Gpu, slot_len: usize) -> Result<Self> {
        let slot_len = slot_len.max(1);
        Ok(Self {
            slots: gpu.vram().pinned_many([slot_len; 2])?,
            done: [gpu.event()?, gpu.event()?],
            pending: [false; 2],
            backend: gpu.vram().backend().clone(),
        })
    }

    /// Elements per slot.
    pub fn slot_len(&self) -> usize {
        self.slots[0].len()
    }

    /// Enqueues `dst[dst_start..dst_start + src.len()) = src` on `stream` in slot-sized pieces;
    /// `fill(slot, piece)` must copy `piece` into `slot` (same length). Returns once the last
    /// piece is enqueued: `src` is no longer needed, later work on `stream` sees the data, and
    /// the next use of a slot (or dropping `self`) waits for its DMA.
    pub fn upload(
        &mut self,
        stream: &Stream,
        src: &[T],
        dst: &mut DeviceBuffer<T>,
        dst_start: usize,
        mut fill: impl FnMut(&mut [T], &[T]),
    ) -> Result<()> {
        self.upload_made(stream, &mut [dst], dst_start, src.len(), |at, parts| {
            let part = &mut *parts[0];
            let from = at - dst_start;
            fill(part, &src[from..from + part.len()]);
        })
    }

    /// Enqueues `dsts[k][start..start + len)` for every destination k on `stream`, made piece
    /// by piece in the slots (a slot split evenly between the destinations): `make(at, parts)`
    /// must write elements `at..at + parts[k].len()` of destination k into `parts[k]`. Making
    /// one piece overlaps the DMA of the one before; returns once the last is enqueued, with
    /// the same guarantees as [`Self::upload`].
    pub fn upload_made(
        &mut self,
        stream: &Stream,
        dsts: &mut [&mut DeviceBuffer<T>],
        start: usize,
        len: usize,
        mut make: impl FnMut(usize, &mut [&mut [T]]),
    ) -> Result<()> {
        let what = "Staging::upload";
        let end = start.checked_add(len);
        for dst in dsts.iter() {
            if end.is_none_or(|e| e > dst.len()) {
                return Err(invalid(
                    what,
                    format!(
                        "{len} elements at {start} do not fit {} elements",
                        dst.len()
                    ),
                ));
            }
        }
        if dsts.is_empty() || len == 0 {
            return Ok(());
        }
        let piece_len = self.slot_len() / dsts.len();
        if piece_len == 0 {
            return Err(invalid(
                what,
                format!(
                    "{} destinations share a slot of {}",
                    dsts.len(),
                    self.slot_len()
                ),
            ));
        }
        for (i, at) in (start..start + len).step_by(piece_len).enumerate() {
            let piece = piece_len.min(start + len - at);
            let b = i % 2;
            if self.pending[b] {
                self.done[b].synchronize()?;
                self.pending[b] = false;
            }
            let mut parts: Vec<&mut [T]> = self.slots[b]
                .chunks_mut(piece_len)
                .take(dsts.len())
                .map(|p| &mut p[..piece])
                .collect();
            make(at, &mut parts);
            for (dst, part) in dsts.iter_mut().zip(&parts) {
                let to = dst.device_ptr() + (at * size_of::<T>()) as u64;
                // SAFETY: the destination range lies inside dst's live allocation (checked
                // above); the source is a pinned slot owned by self, which is not written again
                // before `done[b]` (recorded right after these copies) completes, and Drop
                // waits for it.
                unsafe {
                    self.backend.copy_htod(
                        to,
                        part.as_ptr().cast(),
                        size_of_val(&**part),
                        Some(stream.cuda()),
                    )
                }
                .map_err(GpuError::from)?;
            }
            stream.record(&self.done[b])?;
            self.pending[b] = true;
        }
        Ok(())
    }
}

impl<T: Pod> Drop for Staging<T> {
    fn drop(&mut self) {
        for s in 0..2 {
            if self.pending[s] {
                let _ = self.done[s].synchronize();
            }
        }
    }
}
