//! The GPU prover backend: the fused quotient pipeline of cuzk-ntt and the Pippenger MSMs of
//! cuzk-msm on one device, bit-identical to [`CpuBackend`](crate::CpuBackend).
//!
//! Key points stay on the device between proofs: one [`GpuMsm`] context per key query, made by
//! [`ProverBackend::prepare`] (called by the prover before each proof) or on the first MSM over
//! a query. A context is reused only for the same key, by its [`KeyIdentity`] (a key whose
//! points may have changed is another key); anything else is dropped and loaded again, so a
//! new key never meets stale points. A backend made with a [`HeldKey`] holds that key's points
//! alone and proves no other key.
//!
//! [`HeldKey`]: crate::HeldKey
//!
//! Memory plan ([`MemoryPlan`]): before loading anything, the backend computes the transient
//! bytes of the largest phase (the quotient's three vectors of n Fr, or one MSM's Pippenger
//! scratch: the witness and H are made canonical once, where every MSM reads them with no copy)
//! and keeps that much of the budget free; the key queries are then made
//! resident in priority order while they fit (A, B in G1, L, H, then B in G2, whose compute
//! hides streaming best), the rest streamed from pinned host memory in chunks. If the budget
//! shrank since (another user), the quotient drops resident contexts until its vectors fit and
//! the MSMs stream what no longer fits. The contexts keep their MSM scratch between calls
//! (saving its allocation per MSM); the budget counts kept scratch as available and frees it
//! for any allocation that needs the room, so the plan treats it as free. Every failure is a
//! [`BackendError`] whose source is a [`GpuPhaseError`] naming the phase; RAII buffers return
//! their budget on every path.
//!
//! A circuit's matrices may be held beside the key ([`ProverBackend::hold_circuit`], only when
//! the budget keeps the caller's room free beside them): its proofs' a, b, c are then made on
//! the device from the uploaded witness (`kernels/groth16/evaluate.cu`), every row checked.

use core::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use cuzk_field::{Fr, G1Affine, G2Affine};
use cuzk_gpu::transfer::Staging;
use cuzk_gpu::{DeviceBuffer, Gpu, PinnedBuffer, Reservation, Vram, VramError};
use cuzk_msm::gpu::{CanonicalScalars, GpuMsm, Plan};
use cuzk_msm::{Group, MsmPoint};
use cuzk_ntt::Domain;
use rayon::prelude::*;

use crate::backend::{
    BackendError, DeviceWitness, Evaluations, HeldCircuit, HeldData, HostVec, MsmValue,
    ProverBackend, QuotientMsm, Stage, StagedData, StagedEvaluations, StagedWitness, StagingNeeds,
    map_then_stage,
};
use crate::kernels::DeviceCircuit;
use crate::keys::{KeyIdentity, KeyRef, ProvingKey, Query};
use crate::r1cs::R1cs;
use crate::timing::timed;

/// Per-phase allowance for small buffers (counters, result rings, rounding) and the NTT tables
/// (~36 MiB, allocated once per device by the first quotient).
const SLACK: u64 = 48 << 20;
/// Elements per pinned witness staging slot (16 MiB; two slots).
const STAGING_SLOT: usize = 1 << 19;
/// Threads copying the witness into the staging slots (memory-bound: a few suffice).
const STAGING_THREADS: usize = 4;
/// Elements per pinned slot of a, b, c made in pieces (48 MiB: 2^19 rows of each; two slots).
const MAP_SLOT: usize = 3 << 19;
/// Residency priority, most valuable first.
const PRIORITY: [Query; 5] = [Query::A, Query::BG1, Query::L, Query::H, Query::BG2];
const G1_QUERIES: [Query; 4] = [Query::A, Query::BG1, Query::H, Query::L];
const HOLDS_ANOTHER_KEY: &str =
    "this backend holds the points of a key made on its device and proves that key only";

mod phase;
pub use phase::{GpuPhaseError, Phase};
use phase::{NAME, fail, refuse_key};

mod memory;
use memory::point_bytes;
pub use memory::{MemoryPlan, QueryPlan, msm_run_bytes, quotient_bytes};

/// Where one MSM's points are: a host key's slice, or on this device for a held key (with
/// the key's length of that query).
#[derive(Clone, Copy)]
enum Points<'a, P> {
    Host(KeyIdentity, &'a [P]),
    Held(KeyIdentity, usize),
}

impl<'a, P> Points<'a, P> {
    fn of(key: KeyRef<'a>, q: Query, host: impl FnOnce(&'a ProvingKey) -> &'a [P]) -> Self {
        match key {
            KeyRef::Host(pk) => Self::Host(pk.identity(), host(pk)),
            KeyRef::Held(k) => Self::Held(k.identity(), k.query_len(q)),
        }
    }
}

struct Ctx<P: MsmPoint> {
    /// The key whose points these are.
    key: KeyIdentity,
    /// Points with no host copy (a held key's): never evicted, never reloaded.
    held: bool,
    msm: GpuMsm<P>,
}

impl<P: MsmPoint> Ctx<P> {
    fn resident_bytes(&self) -> u64 {
        self.msm.resident_bytes()
    }

    /// Loads `points` of `key` resident (falling back to streamed if the budget is short) or
    /// streamed.
    fn load(
        gpu: &Gpu,
        key: KeyIdentity,
        points: &[P],
        resident: bool,
        phase: Phase,
    ) -> Result<Self, BackendError> {
        let ctx = |msm| Self {
            key,
            held: false,
            msm,
        };
        if resident {
            match GpuMsm::resident(gpu, points) {
                Ok(msm) => return Ok(ctx(msm)),
                Err(e) if e.is_out_of_budget() => {
                    tracing::warn!(%phase, "budget too small for resident points; streaming")
                }
                Err(e) => return Err(fail(phase, e)),
            }
        }
        let mut pinned = gpu
            .vram()
            .pinned::<P>(points.len())
            .map_err(|e| fail(phase, e))?;
        pinned.copy_from_slice(points);
        let msm = GpuMsm::streamed(gpu, pinned).map_err(|e| fail(phase, e))?;
        Ok(ctx(msm))
    }
}

/// How a context holds its points.
struct Holding {
    resident: bool,
    key: KeyIdentity,
    /// No host copy (a held key's points).
    held: bool,
    len: usize,
}

#[derive(Default)]
struct State {
    /// Indexed like [`G1_QUERIES`].
    g1: [Option<Ctx<G1Affine>>; 4],
    g2: Option<Ctx<G2Affine>>,
    plan: Option<MemoryPlan>,
}

/// Two page-locked slots through which a witness is copied to the device, and the threads that
/// fill them: its own pool, because the global one is busy with the witness map while the
/// witness uploads (measured: 114 ms for 2^24 through the global pool, the length of the
/// witness map). Its own lock, so that staging a witness never waits for running MSMs.
type Uploader = Option<(Staging<Fr>, rayon::ThreadPool)>;

/// One set of page-locked a, b, c of `n` elements each, or nothing pinned at all.
fn pinned_set(gpu: &Gpu, n: usize) -> Result<[PinnedBuffer<Fr>; 3], VramError> {
    gpu.vram().pinned_many([n; 3])
}

/// What the quotient's upload needs while the witness MSMs hold [`State`] (locked only
/// briefly, and never while waiting for the state lock).
#[derive(Default)]
struct Side {
    squeeze: Option<(Phase, u64)>,
    /// Sets of page-locked a, b, c, lent to the prover for the witness map and returned by
    /// the quotient's upload (absent while lent).
    abc_host: Vec<[PinnedBuffer<Fr>; 3]>,
    /// How many sets [`Side::abc_host`] keeps (one per proof that can be in flight).
    abc_sets: usize,
    /// The plan leaves room to upload a, b, c while the witness MSMs run.
    overlap_upload: bool,
    /// A proof found no pinned set and said so (once: with a key that fills the pinned budget
    /// every proof does, and makes its a, b, c in pieces instead).
    told_no_set: bool,
}

impl State {
    fn resident_bytes(&self) -> u64 {
        self.g1
            .iter()
            .flatten()
            .map(Ctx::resident_bytes)
            .sum::<u64>()
            + self.g2.as_ref().map_or(0, Ctx::resident_bytes)
    }

    fn kept_bytes(&self) -> u64 {
        self.g1
            .iter()
            .flatten()
            .map(|c| c.msm.kept_bytes())
            .sum::<u64>()
            + self.g2.as_ref().map_or(0, |c| c.msm.kept_bytes())
    }

    /// How `q`'s context holds its points, if there is one.
    fn holding(&self, q: Query) -> Option<Holding> {
        fn of<P: MsmPoint>(c: &Ctx<P>) -> Holding {
            Holding {
                resident: c.msm.is_resident(),
                key: c.key,
                held: c.held,
                len: c.msm.len(),
            }
        }
        if q == Query::BG2 {
            self.g2.as_ref().map(of)
        } else {
            self.g1[g1_index(q)?].as_ref().map(of)
        }
    }

    fn residency(&self, q: Query) -> Option<bool> {
        self.holding(q).map(|h| h.resident)
    }

    /// The held key whose points this state holds, if any.
    fn held_key(&self) -> Option<KeyIdentity> {
        Query::ALL
            .into_iter()
            .find_map(|q| self.holding(q).filter(|h| h.held).map(|h| h.key))
    }

    /// Drops the resident context of `q`, if it is one that can be loaded again; returns
    /// whether it did.
    fn evict(&mut self, q: Query) -> bool {
        if !self.holding(q).is_some_and(|h| h.resident && !h.held) {
            return false;
        }
        if q == Query::BG2 {
            self.g2 = None;
        } else if let Some(i) = g1_index(q) {
            self.g1[i] = None;
        }
        true
    }
}

fn g1_points(pk: &ProvingKey, q: Query) -> &[G1Affine] {
    match q {
        Query::A => pk.a_query(),
        Query::BG1 => pk.b_g1_query(),
        Query::H => pk.h_query(),
        _ => pk.l_query(),
    }
}

fn g1_source(key: KeyRef<'_>, q: Query) -> Points<'_, G1Affine> {
    Points::of(key, q, |pk| g1_points(pk, q))
}

fn g2_source(key: KeyRef<'_>) -> Points<'_, G2Affine> {
    Points::of(key, Query::BG2, ProvingKey::b_g2_query)
}

/// Every query of `key` with its length, G1 first.
fn query_lens(key: KeyRef<'_>) -> Vec<(Query, usize)> {
    let mut lens: Vec<(Query, usize)> = G1_QUERIES.iter().map(|&q| (q, key.query_len(q))).collect();
    lens.push((Query::BG2, key.query_len(Query::BG2)));
    lens
}

fn g1_index(q: Query) -> Option<usize> {
    G1_QUERIES.iter().position(|&x| x == q)
}

/// The GPU backend (see the module docs). Proofs through one backend run one at a time.
pub struct GpuBackend {
    gpu: Gpu,
    state: Mutex<State>,
    side: Mutex<Side>,
    uploader: Mutex<Uploader>,
    /// Page-locked slots that a, b, c are made into piece by piece when a proof has no pinned
    /// set ([`ProverBackend::map_and_stage`]); made at first use.
    map_staging: Mutex<Option<Staging<Fr>>>,
}

impl fmt::Debug for GpuBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GpuBackend")
            .field("device", &self.gpu.info().name)
            .field(
                "resident_bytes",
                &self.state.try_lock().ok().map(|s| s.resident_bytes()),
            )
            .finish()
    }
}

impl GpuBackend {
    /// A backend on `gpu` holding nothing yet; key points load on the first proof.
    pub fn new(gpu: Gpu) -> Self {
        Self {
            gpu,
            state: Mutex::new(State::default()),
            side: Mutex::new(Side {
                abc_sets: 1,
                ..Side::default()
            }),
            uploader: Mutex::new(None),
            map_staging: Mutex::new(None),
        }
    }

    /// A backend holding the points of the device-made key `key`: `g1` in the order of
    /// [`G1_QUERIES`] (A, B in G1, H, L), `g2` the B query in G2 (`None` for an empty query).
    pub(crate) fn holding(
        gpu: Gpu,
        key: KeyIdentity,
        g1: [Option<GpuMsm<G1Affine>>; 4],
        g2: Option<GpuMsm<G2Affine>>,
    ) -> Self {
        fn held<P: MsmPoint>(key: KeyIdentity, msm: GpuMsm<P>) -> Ctx<P> {
            Ctx {
                key,
                held: true,
                msm,
            }
        }
        let b = Self::new(gpu);
        let mut st = b.lock();
        for (slot, msm) in st.g1.iter_mut().zip(g1) {
            *slot = msm.map(|m| held(key, m));
        }
        st.g2 = g2.map(|m| held(key, m));
        drop(st);
        b
    }

    /// A backend with `pk`'s points already loaded (resident where the plan allows).
    pub fn with_key(gpu: Gpu, pk: &ProvingKey) -> Result<Self, BackendError> {
        let b = Self::new(gpu);
        b.prepare(pk.into(), pk.domain_size())?;
        Ok(b)
    }

    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The side lock; taken after (never before waiting for) the state lock.
    fn side(&self) -> MutexGuard<'_, Side> {
        self.side.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Device bytes held by resident key points.
    pub fn resident_bytes(&self) -> u64 {
        self.lock().resident_bytes()
    }

    /// Device bytes of MSM scratch the contexts keep between calls (idle, given back to any
    /// allocation of the budget that needs them).
    pub fn kept_bytes(&self) -> u64 {
        self.lock().kept_bytes()
    }

    /// Whether `q`'s points are loaded resident (`Some(true)`), streamed, or not loaded.
    pub fn residency(&self, q: Query) -> Option<bool> {
        self.lock().residency(q)
    }

    /// The plan of the last [`ProverBackend::prepare`].
    pub fn plan(&self) -> Option<MemoryPlan> {
        self.lock().plan.clone()
    }

    /// Drops every loaded key point (their device budget and pinned memory come back).
    pub fn release(&self) {
        let mut st = self.lock();
        st.g1 = Default::default();
        st.g2 = None;
        st.plan = None;
        drop(st);
        *self.uploader.lock().unwrap_or_else(|p| p.into_inner()) = None;
        self.side().abc_host.clear();
    }

    /// Fault injection for tests: at the start of the next `phase`, hold the device budget
    /// down to `leave` free bytes for the duration of that phase (one shot).
    pub fn inject_squeeze(&self, phase: Phase, leave: u64) {
        self.side().squeeze = Some((phase, leave));
    }

    /// Applies an injected squeeze if it targets `phase`: holds the budget down to the
    /// requested free bytes until the returned reservation drops.
    fn squeeze(&self, phase: Phase) -> Result<Option<Reservation>, BackendError> {
        let leave = self.take_squeeze(phase);
        self.hold(phase, leave)
    }

    /// The injected squeeze's free bytes if it targets `phase` (consumed).
    fn take_squeeze(&self, phase: Phase) -> Option<u64> {
        let mut side = self.side();
        match side.squeeze {
            Some((p, leave)) if p == phase => {
                side.squeeze = None;
                Some(leave)
            }
            _ => None,
        }
    }

    /// Reserves what is free beyond `leave` bytes (nothing for `None`).
    fn hold(&self, phase: Phase, leave: Option<u64>) -> Result<Option<Reservation>, BackendError> {
        let Some(leave) = leave else {
            return Ok(None);
        };
        let avail = self.gpu.vram().budget().available();
        if avail <= leave {
            return Ok(None);
        }
        self.gpu
            .vram()
            .reserve(avail - leave)
            .map(Some)
            .map_err(|e| fail(phase, e))
    }

    /// The context for `points` of `key` in `slot`, loading it if the slot is empty or holds
    /// another key's points (resident if the points plus one run fit the free budget).
    fn ensure<P: MsmPoint>(
        &self,
        slot: &mut Option<Ctx<P>>,
        query: Query,
        key: KeyIdentity,
        points: &[P],
    ) -> Result<(), BackendError> {
        let phase = Phase::Msm(query);
        if slot.as_ref().is_some_and(|c| c.key != key) {
            *slot = None; // free stale points before loading new ones
        }
        if slot.is_none() {
            let need = point_bytes(query, points.len())
                .and_then(|p| Ok(p + msm_run_bytes(P::GROUP, points.len(), self.sm_count())?))
                .map_err(|e| fail(phase, e))?;
            let resident = need <= self.gpu.vram().budget().available();
            *slot = Some(Ctx::load(&self.gpu, key, points, resident, phase)?);
        }
        Ok(())
    }

    fn sm_count(&self) -> usize {
        self.gpu.info().sm_count as usize
    }

    /// One MSM over the key query `query` (loading its points if needed) with the scalars of
    /// `scalars` from `offset` on.
    fn run<P: MsmPoint>(
        &self,
        st: &mut State,
        query: Query,
        points: Points<'_, P>,
        (scalars, offset): (&CanonicalScalars, usize),
        slot: fn(&mut State, Query) -> Option<&mut Option<Ctx<P>>>,
    ) -> Result<P::Projective, BackendError> {
        let phase = Phase::Msm(query);
        let cap = st.plan.as_ref().and_then(MemoryPlan::streamed_cap);
        let slot = slot(st, query)
            .ok_or_else(|| fail(phase, format!("query {query} is not in this group")))?;
        let held_here = slot.as_ref().filter(|c| c.held).map(|c| c.key);
        let load = match points {
            Points::Held(key, len) => match held_here {
                Some(h) if h != key => return Err(refuse_key(phase, HOLDS_ANOTHER_KEY)),
                Some(_) => None,
                None if len == 0 => return Ok(P::Projective::default()),
                None => {
                    return Err(refuse_key(
                        phase,
                        format!("this backend does not hold the key's {query} points"),
                    ));
                }
            },
            Points::Host(..) if held_here.is_some() => {
                return Err(refuse_key(phase, HOLDS_ANOTHER_KEY));
            }
            Points::Host(_, []) => return Ok(P::Projective::default()),
            Points::Host(key, points) => Some((key, points)),
        };
        let _hold = self.squeeze(phase)?;
        if let Some((key, points)) = load {
            self.ensure(slot, query, key, points)?;
        }
        let Some(ctx) = slot.as_mut() else {
            return Err(fail(phase, "no MSM context"));
        };
        // A streamed context takes no more than the plan gives one MSM (resident ones ignore
        // the cap).
        ctx.msm.set_vram_limit(cap);
        ctx.msm
            .msm_canonical_at(scalars, offset)
            .map_err(|e| fail(phase, e))
    }

    /// The witness on the device, made canonical for its MSMs, in a buffer allocated from
    /// `room` ([`Self::upload_montgomery`]).
    fn upload_witness(
        &self,
        z: &[Fr],
        room: &mut Reservation,
    ) -> Result<CanonicalScalars, BackendError> {
        let (dz, stream) = self.upload_montgomery(z, room)?;
        CanonicalScalars::from_montgomery(&self.gpu, &stream, dz)
            .map_err(|e| fail(Phase::Upload, e))
    }

    /// The witness on the device as it is on the host (Montgomery), in a buffer allocated from
    /// `room`, copied through two kept page-locked slots (a parallel copy into one overlaps the
    /// DMA from the other; a plain pageable copy if pinning fails), with the stream it was
    /// copied on (synchronized).
    fn upload_montgomery(
        &self,
        z: &[Fr],
        room: &mut Reservation,
    ) -> Result<(DeviceBuffer<Fr>, cuzk_gpu::Stream), BackendError> {
        let phase = Phase::Upload;
        let _hold = self.squeeze(phase)?;
        let vram = self.gpu.vram();
        let mut dz = vram
            .alloc_in::<Fr>(room, z.len())
            .map_err(|e| fail(phase, e))?;
        let mut uploader = self.uploader.lock().unwrap_or_else(|p| p.into_inner());
        if uploader.is_none() {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(STAGING_THREADS)
                .thread_name(|i| format!("cuzk-staging-{i}"))
                .build();
            match (Staging::new(&self.gpu, STAGING_SLOT), pool) {
                (Ok(s), Ok(p)) => *uploader = Some((s, p)),
                (Err(e), _) => {
                    tracing::warn!(error = %e, "no pinned witness staging; pageable upload")
                }
                (_, Err(e)) => tracing::warn!(error = %e, "no staging threads; pageable upload"),
            }
        }
        let stream = self
            .gpu
            .stream("groth16-witness")
            .map_err(|e| fail(phase, e))?;
        match uploader.as_mut() {
            Some((staging, pool)) => {
                staging
                    .upload(&stream, z, &mut dz, 0, |slot, piece| {
                        const PART: usize = 1 << 14;
                        pool.install(|| {
                            slot.par_chunks_mut(PART)
                                .zip(piece.par_chunks(PART))
                                .for_each(|(d, s)| d.copy_from_slice(s))
                        });
                    })
                    .and_then(|()| stream.synchronize())
                    .map_err(|e| fail(phase, e))?;
            }
            None => dz.copy_from_host(z).map_err(|e| fail(phase, e))?,
        }
        Ok((dz, stream))
    }

    /// The witness staged for its MSMs and a, b, c made from it by `circuit` on this device
    /// ([`ProverBackend::stage_and_evaluate`]).
    fn evaluate_staged(
        &self,
        circuit: &DeviceCircuit,
        z: &[Fr],
        n: usize,
        mut room: Reservation,
    ) -> Result<(StagedWitness, StagedEvaluations), BackendError> {
        let phase = Phase::Evaluate;
        let witness = Vram::bytes_for::<Fr>(z.len()).map_err(|e| fail(phase, e))?;
        let mut abc_room = room
            .split(room.bytes().saturating_sub(witness))
            .map_err(|e| fail(phase, e))?;
        let (dz, stream) = self.upload_montgomery(z, &mut room)?;
        let vram = self.gpu.vram();
        let mut alloc = || {
            vram.alloc_in::<Fr>(&mut abc_room, n)
                .map_err(|e| fail(phase, e))
        };
        let mut abc = [alloc()?, alloc()?, alloc()?];
        let (bad, took) = timed("evaluate", || {
            circuit.evaluate(&self.gpu, &stream, &dz, &mut abc)
        });
        if let Some(row) = bad.map_err(|e| fail(phase, e))? {
            return Err(BackendError::unsatisfied(NAME, row));
        }
        let dz = CanonicalScalars::from_montgomery(&self.gpu, &stream, dz)
            .map_err(|e| fail(Phase::Upload, e))?;
        Ok((
            StagedWitness {
                device: Some(DeviceWitness::Canonical(dz)),
                _room: room,
            },
            StagedEvaluations {
                data: StagedData::Device(abc),
                _room: abc_room,
                made_in: Some(took),
            },
        ))
    }

    /// [`ProverBackend::map_and_stage`]: pieces of rows made by the host's witness map into
    /// [`GpuBackend::map_staging`]'s slots and copied to the device while the next is made, so
    /// the proof holds no host set (without page-locked slots: the host's witness map into
    /// [`ProverBackend::evaluation_buffers`], then copied).
    fn map_in_pieces(
        &self,
        r1cs: &R1cs,
        z: &[Fr],
        n: usize,
        mut room: Reservation,
    ) -> Result<StagedEvaluations, BackendError> {
        let phase = Phase::Evaluate;
        if n < r1cs.num_constraints() {
            return Err(BackendError::invalid(
                NAME,
                format!(
                    "a domain of {n} cannot hold {} constraints",
                    r1cs.num_constraints()
                ),
            ));
        }
        let mut slots = self.map_staging.lock().unwrap_or_else(|p| p.into_inner());
        if slots.is_none() {
            *slots = Staging::new(&self.gpu, MAP_SLOT)
                .map_err(|e| tracing::warn!(error = %e, "no pinned slots for a, b, c; pageable"))
                .ok();
        }
        let Some(slots) = slots.as_mut() else {
            return map_then_stage(self, r1cs, z, n, room);
        };
        let vram = self.gpu.vram();
        let mut alloc = || {
            vram.alloc_in::<Fr>(&mut room, n)
                .map_err(|e| fail(phase, e))
        };
        let [mut a, mut b, mut c] = [alloc()?, alloc()?, alloc()?];
        let stream = self.gpu.stream("groth16-map").map_err(|e| fail(phase, e))?;
        let mut failed = None;
        let (copied, _) = timed("map_in_pieces", || {
            let copied =
                slots.upload_made(&stream, &mut [&mut a, &mut b, &mut c], 0, n, |at, parts| {
                    // After a failing row the rest is not made: the first failure is named.
                    if let ([a, b, c], None) = (parts, &failed) {
                        failed = r1cs.evaluate_rows(z, at, [a, b, c]).err();
                    }
                });
            copied.and_then(|()| stream.synchronize())
        });
        copied.map_err(|e| fail(phase, e))?;
        if let Some(e) = failed {
            return Err(BackendError::from_witness(NAME, e));
        }
        Ok(StagedEvaluations {
            data: StagedData::Device([a, b, c]),
            _room: room,
            made_in: None,
        })
    }

    /// Copies a, b, c into `dev` on a copy stream and waits for the copies; the pinned
    /// buffers go back to the pool. Returns the copy time.
    fn upload_evaluations(
        &self,
        dev: &mut [DeviceBuffer<Fr>; 3],
        abc: Evaluations,
    ) -> Result<Duration, BackendError> {
        let phase = Phase::Quotient;
        let stream = match self.gpu.stream("groth16-upload") {
            Ok(s) => s,
            Err(e) => {
                self.recycle(abc);
                return Err(fail(phase, e));
            }
        };
        let (up, upload) = timed("upload_abc", || -> Result<(), VramError> {
            for (d, h) in dev.iter_mut().zip([&abc.a, &abc.b, &abc.c]) {
                d.copy_from_host_on(h, stream.cuda())?; // waits for the copy
            }
            Ok(())
        });
        self.recycle(abc);
        up.map_err(|e| fail(phase, e))?;
        Ok(upload)
    }

    /// Returns lent pinned evaluation buffers to the pool (the pool keeps `abc_sets` sets).
    fn recycle(&self, abc: Evaluations) {
        if let (HostVec::Pinned(a), HostVec::Pinned(b), HostVec::Pinned(c)) = (abc.a, abc.b, abc.c)
        {
            let mut side = self.side();
            if side.abc_host.len() < side.abc_sets {
                side.abc_host.push([a, b, c]);
            }
        }
    }

    /// Keeps up to `sets` sets of pinned evaluation buffers between proofs (one per proof an
    /// engine runs at once; default 1).
    pub fn set_evaluation_sets(&self, sets: usize) {
        let mut side = self.side();
        side.abc_sets = sets.max(1);
        let keep = side.abc_sets;
        side.abc_host.truncate(keep);
    }

    /// Pins `sets` of the pool's evaluation sets (at most its size) for domain size `n` now,
    /// so that the proofs that use them pin no memory on their path. The rest, and what cannot
    /// be pinned now, is left to the proofs that need them (pageable if it still cannot be).
    pub fn pin_evaluation_sets(&self, n: usize, sets: usize) {
        let mut side = self.side();
        side.abc_host.retain(|set| set[0].len() == n);
        while side.abc_host.len() < sets.min(side.abc_sets) {
            match pinned_set(&self.gpu, n) {
                Ok(set) => side.abc_host.push(set),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot pin the evaluation sets ahead; proofs pin them");
                    break;
                }
            }
        }
    }

    /// Loads `key`'s points for an engine that stages each proof's data itself: the plan
    /// ([`MemoryPlan::staged`]) keeps `staging` bytes free beside the resident points and the
    /// lock room. Returns the plan.
    pub fn load_staged(
        &self,
        key: KeyRef<'_>,
        n: usize,
        staging: u64,
    ) -> Result<MemoryPlan, BackendError> {
        let phase = Phase::Prepare;
        let mut st = self.lock();
        let room = self.gpu.vram().budget().available() + st.resident_bytes();
        let plan = MemoryPlan::staged(n, &query_lens(key), room, self.sm_count(), staging)
            .map_err(|e| fail(phase, e))?;
        let plan = if key.is_held() {
            plan.as_held(|q| st.residency(q) == Some(true))
        } else {
            plan
        };
        self.load_plan(&mut st, key, plan.clone(), phase)?;
        Ok(plan)
    }

    /// Drops resident key points, least valuable first, until `need` bytes are free; the
    /// MSMs reload what they need (streamed if it no longer fits).
    fn make_room(&self, st: &mut State, need: u64) {
        let budget = self.gpu.vram().budget();
        for q in PRIORITY.iter().rev() {
            if budget.available() >= need {
                break;
            }
            if st.evict(*q) {
                tracing::warn!(query = %q, "dropped resident key points to fit the quotient");
            }
        }
    }

    /// Room for a, b, c on the device (`bytes`, [`StagingNeeds::evaluations`]), with the
    /// quotient's slack free beside it. When the plan leaves room for them beside the witness
    /// MSMs this reserves without the state lock, so another proof's copies can overlap the
    /// MSMs; otherwise (or if the room has gone) it waits for the lock and drops resident key
    /// points until the quotient fits.
    fn reserve_evaluations(&self, bytes: u64) -> Result<Reservation, BackendError> {
        let phase = Phase::Quotient;
        let need = bytes + SLACK;
        let overlap = self.side().overlap_upload;
        let mut st = (!overlap).then(|| self.lock());
        if let Some(st) = st.as_mut() {
            self.make_room(st, need);
        }
        // An injected squeeze stands for another user taking memory after the plan (and
        // again after any room we make).
        let leave = self.take_squeeze(phase);
        let hold = self.hold(phase, leave)?;
        let vram = self.gpu.vram();
        let room = match (vram.reserve(bytes), st.is_some()) {
            (Ok(r), _) => r,
            (Err(e), true) => return Err(fail(phase, e)),
            (Err(_), false) => {
                let mut locked = self.lock();
                self.make_room(&mut locked, need);
                let _more = self.hold(phase, leave)?;
                vram.reserve(bytes).map_err(|e| fail(phase, e))?
            }
        };
        drop(hold);
        Ok(room)
    }

    /// For a backend holding the device-made key `held`: `key` must be that key and its
    /// points all still here; `plan` counts them as they are held.
    fn check_held(
        &self,
        st: &mut State,
        key: KeyRef<'_>,
        held: KeyIdentity,
        plan: MemoryPlan,
        phase: Phase,
    ) -> Result<(), BackendError> {
        if key.identity() != held {
            return Err(refuse_key(phase, HOLDS_ANOTHER_KEY));
        }
        for q in Query::ALL {
            let len = key.query_len(q);
            let ok = st
                .holding(q)
                .is_some_and(|h| h.held && h.key == held && h.len == len);
            if !ok && len > 0 {
                return Err(fail(
                    phase,
                    format!("the device no longer holds the key's {q} points"),
                ));
            }
        }
        self.adopt(st, plan);
        Ok(())
    }

    /// Makes `plan` the current one. One that does not fit is a warning, not an error: the
    /// phases allocate within the budget or fail cleanly.
    fn adopt(&self, st: &mut State, plan: MemoryPlan) {
        if !plan.fits() {
            tracing::warn!(
                room = plan.room,
                work = plan.work_bytes,
                "the device budget is below what one phase needs; the proof may fail"
            );
        }
        self.side().overlap_upload = plan.overlap_upload;
        st.plan = Some(plan);
    }

    /// Makes `key`'s queries resident or streamed as `plan` says, keeping contexts that
    /// already hold the same key's points in the same way.
    fn load_plan(
        &self,
        st: &mut State,
        key: KeyRef<'_>,
        plan: MemoryPlan,
        phase: Phase,
    ) -> Result<(), BackendError> {
        if let Some(held) = st.held_key() {
            return self.check_held(st, key, held, plan, phase);
        }
        let pk = key.host(NAME)?;
        let id = pk.identity();
        // Drop what is stale or changes residency first, so its memory is free for the rest.
        let keep = |c: &Ctx<_>, q| c.key == id && c.msm.is_resident() == plan.is_resident(q);
        for (i, &q) in G1_QUERIES.iter().enumerate() {
            if !st.g1[i].as_ref().is_some_and(|c| keep(c, q)) {
                st.g1[i] = None;
            }
        }
        if !st
            .g2
            .as_ref()
            .is_some_and(|c| c.key == id && c.msm.is_resident() == plan.is_resident(Query::BG2))
        {
            st.g2 = None;
        }
        for q in PRIORITY {
            if q == Query::BG2 {
                let points = pk.b_g2_query();
                if st.g2.is_none() && !points.is_empty() {
                    st.g2 = Some(Ctx::load(
                        &self.gpu,
                        id,
                        points,
                        plan.is_resident(q),
                        phase,
                    )?);
                }
            } else if let Some(i) = g1_index(q) {
                let points = g1_points(pk, q);
                if st.g1[i].is_none() && !points.is_empty() {
                    st.g1[i] = Some(Ctx::load(
                        &self.gpu,
                        id,
                        points,
                        plan.is_resident(q),
                        phase,
                    )?);
                }
            }
        }
        tracing::info!(
            resident_bytes = st.resident_bytes(),
            work_bytes = plan.work_bytes,
            room = plan.room,
            "gpu memory plan"
        );
        self.adopt(st, plan);
        Ok(())
    }

    /// The quotient of a, b, c already on the device, then the H MSM over it in place (H
    /// never leaves the device: its MSM reads the first n − 1 coefficients of the a buffer).
    fn quotient_then_h(
        &self,
        domain: &Domain,
        dev: [DeviceBuffer<Fr>; 3],
        key: KeyRef<'_>,
    ) -> Result<QuotientMsm, BackendError> {
        let mut st = self.lock();
        let (h, quotient) = self.device_quotient(domain, dev)?;
        let (r, msm) = timed("msm_h", || {
            self.run(
                &mut st,
                Query::H,
                g1_source(key, Query::H),
                (&h, 0),
                g1_slot,
            )
        });
        Ok(QuotientMsm {
            h: r?,
            quotient,
            msm,
        })
    }

    /// H's coefficients on the device (in the a buffer), made canonical for the H MSM; `b` and
    /// `c` are freed on the way.
    fn device_quotient(
        &self,
        domain: &Domain,
        [mut a, b, c]: [DeviceBuffer<Fr>; 3],
    ) -> Result<(CanonicalScalars, Duration), BackendError> {
        let phase = Phase::Quotient;
        let stream = self
            .gpu
            .stream("groth16-quotient")
            .map_err(|e| fail(phase, e))?;
        let (q, quotient) = timed("quotient", || {
            domain.gpu_quotient(&self.gpu, &stream, &mut a, b, c)?;
            stream.synchronize().map_err(cuzk_ntt::NttError::from)
        });
        q.map_err(|e| fail(phase, e))?;
        let h = CanonicalScalars::from_montgomery(&self.gpu, &stream, a);
        Ok((h.map_err(|e| fail(phase, e))?, quotient))
    }
}

fn g1_slot(st: &mut State, q: Query) -> Option<&mut Option<Ctx<G1Affine>>> {
    g1_index(q).map(|i| &mut st.g1[i])
}

fn g2_slot(st: &mut State, q: Query) -> Option<&mut Option<Ctx<G2Affine>>> {
    (q == Query::BG2).then_some(&mut st.g2)
}

impl ProverBackend for GpuBackend {
    fn name(&self) -> &'static str {
        NAME
    }

    fn describe(&self) -> String {
        let i = self.gpu.info();
        format!(
            "gpu {} ({}, {} SMs, budget {:.1} GiB)",
            i.ordinal,
            i.name,
            i.sm_count,
            self.gpu.vram().budget().total() as f64 / (1u64 << 30) as f64
        )
    }

    fn device_peak(&self) -> Option<u64> {
        Some(self.gpu.vram().budget().peak())
    }

    fn prepare(&self, key: KeyRef<'_>, domain_size: usize) -> Result<(), BackendError> {
        let phase = Phase::Prepare;
        let mut st = self.lock();
        let _hold = self.squeeze(phase)?;
        let room = self.gpu.vram().budget().available() + st.resident_bytes();
        let plan = MemoryPlan::new(domain_size, &query_lens(key), room, self.sm_count())
            .map_err(|e| fail(phase, e))?;
        let plan = if key.is_held() {
            plan.as_held(|q| st.residency(q) == Some(true))
        } else {
            plan
        };
        self.load_plan(&mut st, key, plan, phase)
    }

    fn hold_circuit(
        &self,
        r1cs: &Arc<R1cs>,
        keep_free: u64,
    ) -> Result<Option<HeldCircuit>, BackendError> {
        let phase = Phase::Prepare;
        let Some(mut room) =
            HeldCircuit::room(self.gpu.vram(), r1cs, keep_free).map_err(|e| fail(phase, e))?
        else {
            return Ok(None);
        };
        let bytes = room.bytes();
        let (circuit, took) = timed("hold_circuit", || {
            DeviceCircuit::upload(&self.gpu, &mut room, r1cs)
        });
        let circuit = circuit.map_err(|e| fail(phase, e))?;
        tracing::info!(
            bytes,
            seconds = took.as_secs_f64(),
            constraints = r1cs.num_constraints(),
            "circuit held on the device: its witness map runs there"
        );
        let data = HeldData::Device(Box::new(circuit));
        Ok(Some(HeldCircuit::new(data, r1cs, bytes)))
    }

    fn stage_and_evaluate(
        &self,
        circuit: &HeldCircuit,
        z: &[Fr],
        n: usize,
        room: Reservation,
    ) -> Result<(StagedWitness, StagedEvaluations), BackendError> {
        circuit.check_witness(NAME, z, n)?;
        match &circuit.data {
            HeldData::Device(c) if c.is_on(&self.gpu) => self.evaluate_staged(c, z, n, room),
            _ => Err(BackendError::invalid(
                NAME,
                "the circuit is held by another device",
            )),
        }
    }

    fn maps_through_staging(&self) -> bool {
        true
    }

    fn map_and_stage(
        &self,
        r1cs: &R1cs,
        z: &[Fr],
        n: usize,
        room: Reservation,
    ) -> Result<StagedEvaluations, BackendError> {
        self.map_in_pieces(r1cs, z, n, room)
    }

    fn pinned_evaluation_buffers(&self, n: usize) -> Option<Evaluations> {
        self.idle_evaluation_buffers(n).or_else(|| match pinned_set(&self.gpu, n) {
            Ok(set) => Some(Evaluations::pinned_or_heap(Some(set), n)),
            Err(e) => {
                let first = !std::mem::replace(&mut self.side().told_no_set, true);
                if first {
                    tracing::warn!(error = %e, "no pinned set for a, b, c: proofs make them in pieces");
                } else {
                    tracing::debug!(error = %e, "no pinned set for a, b, c");
                }
                None
            }
        })
    }

    fn idle_evaluation_buffers(&self, n: usize) -> Option<Evaluations> {
        let mut side = self.side();
        side.abc_host.retain(|set| set[0].len() == n); // free stale sizes before new ones
        let set = side.abc_host.pop()?;
        Some(Evaluations::pinned_or_heap(Some(set), n))
    }

    fn return_evaluations(&self, abc: Evaluations) {
        self.recycle(abc);
    }

    fn staging_needs(&self, key: KeyRef<'_>, n: usize) -> Result<StagingNeeds, BackendError> {
        let phase = Phase::Prepare;
        let plan = MemoryPlan::staged(n, &query_lens(key), 0, self.sm_count(), 0)
            .map_err(|e| fail(phase, e))?;
        let needs = StagingNeeds::nominal(key.num_variables(), n).map_err(|e| fail(phase, e))?;
        // Before the key is placed: each query's larger run, resident or streamed; the plan
        // of [`Self::load_staged`] says what the placed queries take.
        let lock = plan
            .queries
            .iter()
            .map(QueryPlan::largest_bytes)
            .max()
            .unwrap_or(0);
        Ok(StagingNeeds {
            lock: lock.max(SLACK),
            ..needs
        })
    }

    fn reserve(&self, what: Stage, bytes: u64) -> Result<Reservation, BackendError> {
        match what {
            Stage::Witness => {
                let phase = Phase::Upload;
                let _hold = self.squeeze(phase)?;
                self.gpu.vram().reserve(bytes).map_err(|e| fail(phase, e))
            }
            Stage::Evaluations => self.reserve_evaluations(bytes),
        }
    }

    fn stage_witness(
        &self,
        z: &[Fr],
        mut room: Reservation,
    ) -> Result<StagedWitness, BackendError> {
        let dz = self.upload_witness(z, &mut room)?;
        Ok(StagedWitness {
            device: Some(DeviceWitness::Canonical(dz)),
            _room: room,
        })
    }

    fn witness_msm(
        &self,
        key: KeyRef<'_>,
        _z: &[Fr],
        staged: &StagedWitness,
        query: Query,
        offset: usize,
    ) -> Result<MsmValue, BackendError> {
        let phase = Phase::Msm(query);
        let Some(DeviceWitness::Canonical(dz)) = &staged.device else {
            return Err(fail(phase, "the witness was not staged on this device"));
        };
        let scalars = (dz, offset);
        let mut st = self.lock();
        match query {
            Query::BG2 => self
                .run(&mut st, query, g2_source(key), scalars, g2_slot)
                .map(MsmValue::G2),
            Query::H => Err(fail(phase, "H is not a witness MSM")),
            q => self
                .run(&mut st, q, g1_source(key, q), scalars, g1_slot)
                .map(MsmValue::G1),
        }
    }

    fn stage_evaluations(
        &self,
        abc: Evaluations,
        mut room: Reservation,
    ) -> Result<StagedEvaluations, BackendError> {
        let phase = Phase::Quotient;
        let n = abc.a.len();
        if abc.b.len() != n || abc.c.len() != n {
            return Err(fail(phase, "a, b, c differ in length"));
        }
        let vram = self.gpu.vram();
        let mut alloc = || {
            vram.alloc_in::<Fr>(&mut room, n)
                .map_err(|e| fail(phase, e))
        };
        let mut dev = match (|| Ok::<_, BackendError>([alloc()?, alloc()?, alloc()?]))() {
            Ok(dev) => dev,
            Err(e) => {
                self.recycle(abc);
                return Err(e);
            }
        };
        self.upload_evaluations(&mut dev, abc)?;
        Ok(StagedEvaluations {
            data: StagedData::Device(dev),
            _room: room,
            made_in: None,
        })
    }

    fn quotient_msm(
        &self,
        domain: &Domain,
        abc: StagedEvaluations,
        key: KeyRef<'_>,
    ) -> Result<QuotientMsm, BackendError> {
        let phase = Phase::Quotient;
        let StagedEvaluations { data, _room, .. } = abc;
        let dev = match data {
            StagedData::Device(dev) => dev,
            StagedData::Host(abc) => {
                self.recycle(abc);
                return Err(BackendError::invalid(
                    NAME,
                    "evaluations staged on the host given to the GPU backend",
                ));
            }
        };
        if dev.iter().any(|d| d.len() != domain.size()) {
            return Err(fail(phase, "staged evaluations are not of the domain size"));
        }
        self.quotient_then_h(domain, dev, key)
    }
}

#[cfg(test)]
mod tests;
