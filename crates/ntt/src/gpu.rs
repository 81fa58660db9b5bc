//! GPU transforms on [`Domain`]: in place on device buffers on a caller's stream
//! (asynchronous), host-slice conveniences staged through pinned memory, and the fused Groth16
//! quotient pipeline. Bit-identical to the CPU calls (checked in `tests/gpu.rs`).
//!
//! Every device owns one table buffer (~39 MiB, all sizes up to 2^28), uploaded on first use
//! and kept for the life of the process, and a roots table ([`RootsCache`]: up to 2^(D+4)
//! bytes for the twiddles of order D > 19), a cache of the budget that only free bytes build
//! and that any other request of the budget takes back.

use std::sync::{Arc, Mutex, MutexGuard, Weak};

use cuzk_field::Fr;
use cuzk_gpu::{DeviceBuffer, Event, Gpu, Reclaim, Stream, Vram};

use crate::kernels as k;
use crate::plan::{self, Pass, Transform};
use crate::{Domain, NttError, Order};

/// The device's table buffer, uploaded once per device.
pub fn device_tables(gpu: &Gpu) -> Result<Arc<DeviceTables>, NttError> {
    gpu.cached(|| {
        Ok(Arc::new(DeviceTables(
            gpu.vram().from_host(&plan::tables())?,
        )))
    })
}

/// The twiddle tables in a device's memory ([`device_tables`]).
#[derive(Debug)]
pub struct DeviceTables(DeviceBuffer<Fr>);

impl std::ops::Deref for DeviceTables {
    type Target = DeviceBuffer<Fr>;

    fn deref(&self) -> &DeviceBuffer<Fr> {
        &self.0
    }
}

/// A device's roots table ([`k::Twiddles`]: w_(2^D)^i, i < 2^(D-1), for the inter-pass twiddles
/// of order 19 < ord <= D), kept between transforms as a cache of the device budget
/// ([`Reclaim`]): built only from free bytes (a transform never makes another cache give its
/// memory back for it; without the table it multiplies two table values instead, same result),
/// at the order the transform needs (a larger one replaces it), and freed when any other
/// request of the budget needs the bytes, after every kernel that read it has finished.
pub struct RootsCache {
    entry: Mutex<Option<RootsEntry>>,
}

struct RootsEntry {
    lg: u32,
    table: Arc<DeviceBuffer<Fr>>,
    /// Recorded after the table's construction: users on other streams wait for it.
    ready: Event,
    /// Recorded after the launches of each use still running (completed ones are pruned).
    uses: Vec<Event>,
}

impl RootsEntry {
    /// Bytes freeing this table would give back: none while a transform holds it.
    fn idle_bytes(&self) -> u64 {
        if Arc::strong_count(&self.table) == 1 {
            self.table.reserved_bytes()
        } else {
            0
        }
    }

    /// Waits for every use, then frees the table (unless a user still holds it: that user
    /// waits for its own launches before letting go, see [`RootsUse`]).
    fn retire(self) {
        for e in self.uses.iter().chain([&self.ready]) {
            if e.synchronize().is_err() {
                // The device failed: never free memory a kernel may still read.
                std::mem::forget(self.table);
                return;
            }
        }
    }
}

impl std::fmt::Debug for RootsCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RootsCache")
            .field("order", &self.order())
            .finish()
    }
}

impl Reclaim for RootsCache {
    fn reclaimable(&self) -> u64 {
        self.lock().as_ref().map_or(0, RootsEntry::idle_bytes)
    }
    fn reclaim(&self) {
        let taken = self.lock().take();
        if let Some(e) = taken {
            e.retire(); // outside the lock
        }
    }
}

impl RootsCache {
    fn lock(&self) -> MutexGuard<'_, Option<RootsEntry>> {
        // A panic while holding the lock leaves a consistent entry behind.
        self.entry.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The device's cache (registered with its budget on first use).
    pub fn of(gpu: &Gpu) -> Arc<RootsCache> {
        let made = gpu.cached(|| {
            let c = Arc::new(RootsCache {
                entry: Mutex::new(None),
            });
            let weak: Weak<dyn Reclaim> = Arc::downgrade(&c) as Weak<RootsCache>;
            gpu.vram().budget().add_reclaimer(weak);
            Ok::<_, std::convert::Infallible>(c)
        });
        match made {
            Ok(c) => c,
            Err(never) => match never {},
        }
    }

    /// The order of the table held now (0: none).
    pub fn order(&self) -> u32 {
        self.lock().as_ref().map_or(0, |e| e.lg)
    }

    /// A table for launches on `stream`: one of order `lg` or more if held, else one of order
    /// `lg` built if the budget has the bytes free (counting a smaller held table's, which it
    /// replaces), else the smaller one (it serves the twiddles of order up to its own; the
    /// kernels take the rest from the split tables), else `None`; `None` for `lg == 0`.
    fn take<'s>(
        self: &Arc<Self>,
        gpu: &Gpu,
        stream: &'s Stream,
        tables: &DeviceBuffer<Fr>,
        lg: u32,
    ) -> Result<Option<RootsUse<'s>>, NttError> {
        if lg == 0 {
            return Ok(None);
        }
        let len = k::roots_len(lg);
        let need = Vram::bytes_for::<Fr>(len)?;
        // The held table, its order, the wait for it on `stream`, and whether replacing it
        // would give back its bytes (no other transform holds it).
        let held = self.lock().as_ref().map(|e| {
            let idle_bytes = e.idle_bytes(); // before the clone below holds it
            (e.table.clone(), e.lg, stream.wait(&e.ready), idle_bytes)
        });
        let free = gpu.vram().budget().free();
        match held {
            Some((table, held_lg, waited, idle_bytes))
                if held_lg >= lg || free + idle_bytes < need =>
            {
                let u = self.use_of(gpu, stream, table, held_lg)?;
                waited?;
                return Ok(Some(u));
            }
            Some(h) => {
                drop(h); // replaced by a larger one: its bytes count as free
                self.reclaim();
            }
            None if free < need => return Ok(None),
            None => {}
        }
        let Ok(mut table) = gpu.vram().alloc::<Fr>(len) else {
            return Ok(None); // taken meanwhile: run without
        };
        let ready = gpu.event()?;
        let built =
            k::roots(gpu, stream, &mut table, tables, lg).and_then(|()| stream.record(&ready));
        let table = Arc::new(table);
        let u = self.use_of(gpu, stream, table.clone(), lg)?;
        built?;
        let mut e = self.lock();
        if e.is_none() {
            *e = Some(RootsEntry {
                lg,
                table,
                ready,
                uses: Vec::new(),
            });
        }
        Ok(Some(u))
    }

    fn use_of<'s>(
        self: &Arc<Self>,
        gpu: &Gpu,
        stream: &'s Stream,
        table: Arc<DeviceBuffer<Fr>>,
        lg: u32,
    ) -> Result<RootsUse<'s>, NttError> {
        let done = gpu.event();
        let mut u = RootsUse {
            cache: self.clone(),
            stream,
            table: Some(table),
            done: None,
            lg,
        };
        u.done = Some(done?); // on failure `u` drops: it waits for the stream instead
        Ok(u)
    }
}

/// A transform's hold on the roots table: on drop (after its launches, or after a failed one)
/// it records `done` on its stream and leaves it with the cache, or, if the cache has let go
/// of the table meanwhile, waits for it before releasing its handle.
struct RootsUse<'s> {
    cache: Arc<RootsCache>,
    stream: &'s Stream,
    table: Option<Arc<DeviceBuffer<Fr>>>,
    done: Option<Event>,
    lg: u32,
}

impl RootsUse<'_> {
    fn twiddles<'a>(&'a self, tables: &'a DeviceBuffer<Fr>) -> k::Twiddles<'a, Fr> {
        k::Twiddles {
            tables,
            roots: self.table.as_deref().map(|t| (t, self.lg)),
        }
    }
}

impl Drop for RootsUse<'_> {
    fn drop(&mut self) {
        let Some(table) = self.table.take() else {
            return;
        };
        let done = self.done.take().filter(|e| self.stream.record(e).is_ok());
        let mut entry = self.cache.lock();
        if let Some(e) = entry.as_mut().filter(|e| Arc::ptr_eq(&e.table, &table))
            && let Some(done) = done
        {
            e.uses.retain(|u| !u.is_complete());
            e.uses.push(done);
            return;
        }
        drop(entry);
        let finished = match &done {
            Some(e) => e.synchronize().is_ok(),
            None => self.stream.synchronize().is_ok(),
        };
        if !finished {
            std::mem::forget(table); // the device failed: never free memory a kernel may read
        }
    }
}

/// The twiddle tables of a transform: the device's tables and the roots table it holds, if any.
fn twiddles<'a>(
    tables: &'a DeviceBuffer<Fr>,
    roots: Option<&'a RootsUse<'_>>,
) -> k::Twiddles<'a, Fr> {
    match roots {
        Some(r) => r.twiddles(tables),
        None => k::Twiddles {
            tables,
            roots: None,
        },
    }
}

/// Bytes of device budget that `count` vectors of `n` elements need, or `DoesNotFit`.
pub fn check_fits(
    vram: &Vram,
    what: &'static str,
    count: usize,
    n: usize,
) -> Result<u64, NttError> {
    let one = Vram::bytes_for::<Fr>(n)?;
    let bytes = one.saturating_mul(count as u64);
    let budget = vram.budget().total();
    if bytes > budget {
        return Err(NttError::DoesNotFit {
            what,
            bytes,
            budget,
        });
    }
    Ok(bytes)
}

fn pass_kernel(p: &Pass) -> k::PassKernel {
    if p.radix4() {
        k::PassKernel::Radix4
    } else {
        k::PassKernel::Radix2
    }
}

fn run_passes(
    gpu: &Gpu,
    stream: &Stream,
    data: &mut DeviceBuffer<Fr>,
    tw: &k::Twiddles<'_, Fr>,
    lg_n: u32,
    passes: &[Pass],
) -> Result<(), NttError> {
    for p in passes {
        let kernel = pass_kernel(p);
        k::pass(
            gpu, stream, kernel, data, tw, lg_n, p.s0, p.k, p.lg_c, p.flags,
        )?;
    }
    Ok(())
}

/// [`run_passes`] over up to three separate one-polynomial buffers, each pass one launch for
/// all of them (grid.y = `polys.len()`): a third of the launches, and their blocks fill the
/// device's last wave of each pass (a 2^24 pass is 93 waves of 4 blocks per SM instead of 31).
fn run_passes_many(
    gpu: &Gpu,
    stream: &Stream,
    polys: &mut [&mut DeviceBuffer<Fr>],
    tw: &k::Twiddles<'_, Fr>,
    lg_n: u32,
    passes: &[Pass],
) -> Result<(), NttError> {
    for p in passes {
        let kernel = pass_kernel(p);
        k::pass_many(
            gpu, stream, kernel, polys, tw, lg_n, p.s0, p.k, p.lg_c, p.flags,
        )?;
    }
    Ok(())
}

/// The configured pass split (`CUZK_NTT_SPLIT`; `None` when unset or out of range), for
/// callers of the `_split` calls that want it.
#[doc(hidden)]
pub fn configured_split() -> Option<Vec<u32>> {
    plan::split_override()
}

/// A split given to the `_split` calls: pass bits in `2..=TILE_LG` (as `CUZK_NTT_SPLIT`,
/// where an out-of-range value is ignored; an explicit one is an error).
fn check_split(bits: &[u32]) -> Result<(), NttError> {
    if !plan::valid_split(bits) {
        return Err(NttError::Gpu(cuzk_gpu::GpuError::InvalidLaunch {
            kernel: "ntt pass split".into(),
            reason: format!("pass bits {bits:?} outside 2..={}", plan::TILE_LG),
        }));
    }
    Ok(())
}

/// Bit-reversal of every polynomial of `data` on the kernel the plan selects.
fn permute(
    gpu: &Gpu,
    stream: &Stream,
    data: &mut DeviceBuffer<Fr>,
    lg_n: u32,
) -> Result<(), NttError> {
    if plan::tiled_bitrev(lg_n) {
        k::bit_reverse_tiled(gpu, stream, data, lg_n)?;
    } else {
        k::bit_reverse(gpu, stream, data, lg_n)?;
    }
    Ok(())
}

impl Domain {
    /// `t` on every polynomial of `data` (a batch: `data.len()` a multiple of the domain size),
    /// in place, with the given element orders. Enqueued on `stream`; returns before it runs.
    pub fn gpu_transform(
        &self,
        gpu: &Gpu,
        stream: &Stream,
        data: &mut DeviceBuffer<Fr>,
        t: Transform,
        input: Order,
        output: Order,
    ) -> Result<(), NttError> {
        let split = configured_split();
        self.gpu_transform_split(gpu, stream, data, t, input, output, split.as_deref())
    }

    /// [`Self::gpu_transform`] with the pass split `split` (DIF-order pass bits, as
    /// `CUZK_NTT_SPLIT`; used where they sum to the domain's log size, else the default split)
    /// instead of the configured one, for tests and split measurements; same result every way.
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    pub fn gpu_transform_split(
        &self,
        gpu: &Gpu,
        stream: &Stream,
        data: &mut DeviceBuffer<Fr>,
        t: Transform,
        input: Order,
        output: Order,
        split: Option<&[u32]>,
    ) -> Result<(), NttError> {
        let n = self.size();
        if data.is_empty() || !data.len().is_multiple_of(n) || data.len() / n > 65535 {
            return Err(NttError::BadBatch { n, got: data.len() });
        }
        if let Some(bits) = split {
            check_split(bits)?;
        }
        let lg_n = self.log_size();
        let tables = device_tables(gpu)?;
        let plan = plan::plan_split(lg_n, t, input, output, split);
        let roots_lg = plan::roots_order(&plan.passes, plan::roots_cap());
        let roots = RootsCache::of(gpu).take(gpu, stream, &tables, roots_lg)?;
        let tw = twiddles(&tables, roots.as_ref());
        if plan.permute_before {
            permute(gpu, stream, data, lg_n)?;
        }
        run_passes(gpu, stream, data, &tw, lg_n, &plan.passes)?;
        if plan.permute_after {
            permute(gpu, stream, data, lg_n)?;
        }
        Ok(())
    }

    /// [`Self::gpu_transform`] on host data (one polynomial or a batch), staged through pinned
    /// memory; returns when the result is back in `data`.
    pub fn gpu_transform_host(
        &self,
        gpu: &Gpu,
        data: &mut [Fr],
        t: Transform,
        input: Order,
        output: Order,
    ) -> Result<(), NttError> {
        let n = self.size();
        if data.is_empty() || !data.len().is_multiple_of(n) {
            return Err(NttError::BadBatch { n, got: data.len() });
        }
        check_fits(gpu.vram(), "the transform", data.len() / n, n)?;
        let stream = gpu.stream("ntt-host")?;
        let mut pinned = gpu.vram().pinned::<Fr>(data.len())?;
        pinned.copy_from_slice(data);
        let mut dev = gpu.alloc::<Fr>(data.len())?;
        dev.copy_from_host_on(&pinned, stream.cuda())?;
        self.gpu_transform(gpu, &stream, &mut dev, t, input, output)?;
        dev.copy_to_host_on(&mut pinned, stream.cuda())?;
        data.copy_from_slice(&pinned);
        Ok(())
    }

    /// The Groth16 quotient on the device: `a`, `b`, `c` hold the evaluations of A·w, B·w, C·w
    /// on the domain (natural order); on return `a` holds the coefficients of H (natural order),
    /// exactly [`Domain::quotient_in_place`]. `b` and `c` are freed — their budget returned — as
    /// soon as the point-wise step has consumed them (this call then waits for that step). No
    /// host round trip between steps.
    ///
    /// Schedule: each pass of the unscaled inverse DIF (→ coefficients, bit-reversed) and of
    /// the forward DIT onto the half-root coset s = w_2N (s^i folded into the inter-pass
    /// twiddles; → natural evaluations on s·H, n times too large) runs once over a, b and c
    /// together; the point-wise step writes `(a·b − n·c)·K`, K = 1/(Z·n^3), into `a`
    /// bit-reversed (through the tiles of the bit reversal from 2^10); the unscaled inverse DIT
    /// (s^-i folded into its last pass) leaves H in natural order. 2^28 runs the same steps on
    /// the g coset (g^i, g^-i fused into the first load and the last store). The result is
    /// [`Domain::quotient_in_place`]'s whenever Z divides A·B − C (every satisfied witness:
    /// then H does not depend on the coset); for other inputs the two cosets give different
    /// polynomials.
    pub fn gpu_quotient(
        &self,
        gpu: &Gpu,
        stream: &Stream,
        a: &mut DeviceBuffer<Fr>,
        b: DeviceBuffer<Fr>,
        c: DeviceBuffer<Fr>,
    ) -> Result<(), NttError> {
        let split = configured_split();
        self.gpu_quotient_split(gpu, stream, a, b, c, split.as_deref(), &mut |_| Ok(()))
    }

    /// [`Self::gpu_quotient`] with the pass split `split` (as in [`Self::gpu_transform_split`])
    /// instead of the configured one, for tests and split measurements (same result), with
    /// `mark(step)` called after the launches of each step are enqueued (0 to_coeffs,
    /// 1 to_coset, 2 quotient, 3 back), e.g. to record events between them.
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    pub fn gpu_quotient_split(
        &self,
        gpu: &Gpu,
        stream: &Stream,
        a: &mut DeviceBuffer<Fr>,
        mut b: DeviceBuffer<Fr>,
        mut c: DeviceBuffer<Fr>,
        split: Option<&[u32]>,
        mark: &mut dyn FnMut(usize) -> Result<(), NttError>,
    ) -> Result<(), NttError> {
        if let Some(bits) = split {
            check_split(bits)?;
        }
        let n = self.size();
        for v in [&*a, &b, &c] {
            if v.len() != n {
                return Err(NttError::LengthMismatch {
                    expected: n,
                    got: v.len(),
                });
            }
        }
        let lg_n = self.log_size();
        let tables = device_tables(gpu)?;
        let (to_coeffs, to_coset, back) = plan::quotient_plan_split(lg_n, split);
        let all = [to_coeffs.as_slice(), &to_coset, &back].concat();
        let roots_lg = plan::roots_order(&all, plan::roots_cap());
        let roots = RootsCache::of(gpu).take(gpu, stream, &tables, roots_lg)?;
        let tw = twiddles(&tables, roots.as_ref());
        {
            let mut polys = [&mut *a, &mut b, &mut c];
            run_passes_many(gpu, stream, &mut polys, &tw, lg_n, &to_coeffs)?;
            mark(0)?;
            run_passes_many(gpu, stream, &mut polys, &tw, lg_n, &to_coset)?;
            mark(1)?;
        }
        // The quotient's constants were folded into to_coeffs' last store (F_TW_FOLD): a·b − c.
        let fold = to_coeffs
            .last()
            .is_some_and(|p| p.flags & plan::F_TW_FOLD != 0);
        if plan::tiled_bitrev(lg_n) {
            k::quotient_bit_reverse_tiled(gpu, stream, a, &b, &c, &tables, lg_n, fold)?;
        } else {
            k::quotient_bit_reverse(gpu, stream, a, &b, &c, &tables, lg_n, fold)?;
        }
        mark(2)?;
        // `back` is enqueued before b and c are freed, so the device does not idle through the
        // host's wait and the frees; the free waits for the point-wise kernel only (its
        // event), then the budget is available to others while `back` runs.
        let consumed = gpu.event()?;
        stream.record(&consumed)?;
        run_passes(gpu, stream, a, &tw, lg_n, &back)?;
        mark(3)?;
        consumed.synchronize()?;
        drop((b, c));
        Ok(())
    }

    /// [`Self::gpu_quotient`] from host slices: allocates the three device vectors (any failed
    /// allocation frees the ones before it), uploads, computes, downloads H.
    pub fn gpu_quotient_host(
        &self,
        gpu: &Gpu,
        a: &[Fr],
        b: &[Fr],
        c: &[Fr],
    ) -> Result<Vec<Fr>, NttError> {
        let n = self.size();
        for v in [a, b, c] {
            self.check_len(v.len())?;
        }
        check_fits(gpu.vram(), "the quotient pipeline", 3, n)?;
        let stream = gpu.stream("ntt-quotient")?;
        let mut pinned = gpu.vram().pinned::<Fr>(n)?;
        let mut upload = |src: &[Fr]| -> Result<DeviceBuffer<Fr>, NttError> {
            let mut d = gpu.alloc::<Fr>(n)?;
            pinned.copy_from_slice(src);
            d.copy_from_host_on(&pinned, stream.cuda())?;
            Ok(d)
        };
        let mut da = upload(a)?;
        let db = upload(b)?;
        let dc = upload(c)?;
        self.gpu_quotient(gpu, &stream, &mut da, db, dc)?;
        da.copy_to_host_on(&mut pinned, stream.cuda())?;
        Ok(pinned.to_vec())
    }
}
