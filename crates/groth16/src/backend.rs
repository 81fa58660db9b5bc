//! The heavy steps of a proof behind one trait, one method per phase, so a GPU implementation
//! can replace the CPU one without changing the prover API: the witness staged and its four
//! MSMs (A, B in G1 and G2, L: they run while the CPU evaluates a, b, c), then a, b, c staged
//! and the quotient H with its MSM. A backend holding the circuit ([`HeldCircuit`]) makes a,
//! b, c itself from the staged witness instead. The one-shot prover and the scheduler's engine
//! drive the same phases; only the engine admits and locks around them.

use core::fmt;
use core::ops::{Deref, DerefMut};
use std::sync::Arc;
use std::time::Duration;

use cuzk_field::{Fr, G1Affine, G1Projective, G2Projective};
use cuzk_msm::gpu::CanonicalScalars;
use cuzk_ntt::Domain;
use cuzk_vram::{DeviceBuffer, PinnedBuffer, Reservation, Vram, VramError};

use crate::kernels::DeviceCircuit;
use crate::keys::{KeyRef, ProvingKey, Query};
use crate::r1cs::{R1cs, WitnessError};
use crate::timing::timed;

/// What went wrong in a backend, for callers that act on it (an engine retries later after
/// [`BackendErrorKind::OutOfDeviceMemory`], and reports the rest).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum BackendErrorKind {
    /// The driver could not allocate device memory (another process, or fragmentation).
    OutOfDeviceMemory,
    /// The device budget had no room for a request.
    OutOfBudget,
    /// The request does not fit this backend: data staged elsewhere, lengths that do not
    /// match.
    Invalid,
    /// A key held by a device ([`HeldKey`](crate::HeldKey)) given to a backend that does not
    /// hold its points, or a backend holding one key given another.
    HeldKey,
    /// The witness does not satisfy the circuit: a row the backend's own witness map
    /// ([`ProverBackend::stage_and_evaluate`]) found with a·b ≠ c.
    Unsatisfied,
    /// Any other failure of the device or of a computation.
    Failed,
}

/// A backend failure with the backend's name and its [`BackendErrorKind`].
#[derive(Debug, thiserror::Error)]
#[error("{backend} backend: {source}")]
pub struct BackendError {
    pub backend: &'static str,
    pub kind: BackendErrorKind,
    #[source]
    pub source: Box<dyn std::error::Error + Send + Sync>,
}

impl BackendError {
    /// An error whose kind is read from its cause: out of memory or out of budget when a
    /// memory, GPU, MSM or NTT error in its chain says so, [`BackendErrorKind::Failed`] otherwise.
    pub fn new(
        backend: &'static str,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        let source = source.into();
        Self {
            backend,
            kind: kind_of(&*source),
            source,
        }
    }

    /// A request this backend cannot serve ([`BackendErrorKind::Invalid`]).
    pub fn invalid(
        backend: &'static str,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self {
            backend,
            kind: BackendErrorKind::Invalid,
            source: source.into(),
        }
    }

    /// A key this backend does not hold the points of ([`BackendErrorKind::HeldKey`]).
    pub fn held_key(
        backend: &'static str,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self {
            backend,
            kind: BackendErrorKind::HeldKey,
            source: source.into(),
        }
    }

    /// A witness that fails `constraint` ([`BackendErrorKind::Unsatisfied`]).
    pub fn unsatisfied(backend: &'static str, constraint: usize) -> Self {
        Self {
            backend,
            kind: BackendErrorKind::Unsatisfied,
            source: Box::new(WitnessError::Unsatisfied { constraint }),
        }
    }

    /// A witness map's error: [`BackendErrorKind::Unsatisfied`] for a failing row, a request
    /// this backend cannot serve ([`BackendErrorKind::Invalid`]) for a witness or output of the
    /// wrong shape.
    pub fn from_witness(backend: &'static str, e: WitnessError) -> Self {
        match e {
            WitnessError::Unsatisfied { constraint } => Self::unsatisfied(backend, constraint),
            e => Self::invalid(backend, e),
        }
    }

    pub fn kind(&self) -> BackendErrorKind {
        self.kind
    }
}

/// The kind of the first memory error in `e`'s chain. Wrappers that are `transparent` hide
/// their inner error from `source()`, so each layer's error type is asked directly.
fn kind_of(e: &(dyn std::error::Error + 'static)) -> BackendErrorKind {
    let mut cause = Some(e);
    while let Some(c) = cause {
        let (oom, budget) = if let Some(e) = c.downcast_ref::<VramError>() {
            (e.is_out_of_memory(), e.is_out_of_budget())
        } else if let Some(e) = c.downcast_ref::<cuzk_gpu::GpuError>() {
            (e.is_out_of_memory(), e.is_out_of_budget())
        } else if let Some(e) = c.downcast_ref::<cuzk_msm::MsmError>() {
            (e.is_out_of_memory(), e.is_out_of_budget())
        } else if let Some(e) = c.downcast_ref::<cuzk_ntt::NttError>() {
            (e.is_out_of_memory(), e.is_out_of_budget())
        } else {
            (false, false)
        };
        if oom {
            return BackendErrorKind::OutOfDeviceMemory;
        }
        if budget {
            return BackendErrorKind::OutOfBudget;
        }
        cause = c.source();
    }
    BackendErrorKind::Failed
}

/// One host vector of field elements: ordinary memory, or page-locked memory that a GPU
/// backend hands out (and takes back) so uploads run at full bus speed and the pages are
/// already mapped when the witness map writes them.
pub enum HostVec {
    Heap(Vec<Fr>),
    Pinned(PinnedBuffer<Fr>),
}

impl HostVec {
    /// `n` zeros in ordinary memory.
    pub fn zeros(n: usize) -> Self {
        Self::Heap(vec![Fr::ZERO; n])
    }
}

impl fmt::Debug for HostVec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self {
            Self::Heap(_) => "heap",
            Self::Pinned(_) => "pinned",
        };
        write!(f, "HostVec({kind}, {})", self.len())
    }
}

impl Deref for HostVec {
    type Target = [Fr];
    fn deref(&self) -> &[Fr] {
        match self {
            Self::Heap(v) => v,
            Self::Pinned(p) => p,
        }
    }
}

impl DerefMut for HostVec {
    fn deref_mut(&mut self) -> &mut [Fr] {
        match self {
            Self::Heap(v) => v,
            Self::Pinned(p) => p,
        }
    }
}

impl From<Vec<Fr>> for HostVec {
    fn from(v: Vec<Fr>) -> Self {
        Self::Heap(v)
    }
}

/// The evaluations a = A·z, b = B·z, c = C·z over the domain (each of the domain's length).
#[derive(Debug)]
pub struct Evaluations {
    pub a: HostVec,
    pub b: HostVec,
    pub c: HostVec,
}

impl Evaluations {
    /// Whether all three live in pinned memory (charged to the pinned budget, not the heap).
    pub fn is_pinned(&self) -> bool {
        [&self.a, &self.b, &self.c]
            .iter()
            .all(|v| matches!(v, HostVec::Pinned(_)))
    }

    /// A set of three pinned buffers, or (without one) `n` zeros each on the heap.
    pub fn pinned_or_heap(set: Option<[PinnedBuffer<Fr>; 3]>, n: usize) -> Self {
        match set {
            Some([a, b, c]) => Self {
                a: HostVec::Pinned(a),
                b: HostVec::Pinned(b),
                c: HostVec::Pinned(c),
            },
            None => Self {
                a: HostVec::zeros(n),
                b: HostVec::zeros(n),
                c: HostVec::zeros(n),
            },
        }
    }
}

/// Results of the witness MSMs with their wall-clock times.
#[derive(Debug, Clone, Copy, Default)]
pub struct WitnessMsms {
    pub a: G1Projective,
    pub b_g1: G1Projective,
    pub b_g2: G2Projective,
    pub l: G1Projective,
    pub time_a: Duration,
    pub time_b_g1: Duration,
    pub time_b_g2: Duration,
    pub time_l: Duration,
}

/// `Σ h_j · h_query_j` with the time of the quotient and of the MSM.
#[derive(Debug, Clone, Copy, Default)]
pub struct QuotientMsm {
    pub h: G1Projective,
    pub quotient: Duration,
    pub msm: Duration,
}

/// Device bytes one proof of a key needs besides the key's resident points, so that an
/// engine can admit jobs before anything is allocated: the witness and the evaluations are
/// staged (copied ahead) into reservations the engine takes, and `lock` is the most any device
/// phase allocates while it runs (MSM scratch and small buffers). A host-only backend needs no
/// `lock` bytes; it still reports the staged sizes so admission is tested on the CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StagingNeeds {
    pub witness: u64,
    pub evaluations: u64,
    pub lock: u64,
}

impl StagingNeeds {
    /// The staged sizes of a proof with `num_variables` and a domain of `n`, and no lock bytes.
    pub fn nominal(num_variables: usize, n: usize) -> Result<Self, VramError> {
        Ok(Self {
            witness: Vram::bytes_for::<Fr>(num_variables)?,
            evaluations: 3 * Vram::bytes_for::<Fr>(n)?,
            lock: 0,
        })
    }

    /// The witness and a, b, c together: what one proof stages when both are on the device at
    /// once.
    pub fn staged(&self) -> u64 {
        self.witness + self.evaluations
    }
}

/// What a reservation of [`ProverBackend::reserve`] is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// The witness, read by the witness MSMs ([`StagingNeeds::witness`] bytes).
    Witness,
    /// a, b, c, read by the quotient ([`StagingNeeds::evaluations`] bytes).
    Evaluations,
}

/// A proof's witness where its MSMs read it: on the device, or (host backends) the caller's
/// slice. Holds the reservation it was staged into until dropped.
#[derive(Debug)]
pub struct StagedWitness {
    pub(crate) device: Option<DeviceWitness>,
    pub(crate) _room: Reservation,
}

/// A witness on a device.
#[derive(Debug)]
pub(crate) enum DeviceWitness {
    /// Made canonical once, where the GPU's MSMs read it with no copy.
    Canonical(CanonicalScalars),
    /// As uploaded, in a simulated device's memory.
    Simulated(DeviceBuffer<Fr>),
}

/// A proof's a, b, c where the quotient reads them. Holds its reservation until dropped.
#[derive(Debug)]
pub struct StagedEvaluations {
    pub(crate) data: StagedData,
    pub(crate) _room: Reservation,
    /// How long the backend took to make them ([`ProverBackend::stage_and_evaluate`]); `None`
    /// for evaluations made by the host and copied.
    pub(crate) made_in: Option<Duration>,
}

impl StagedEvaluations {
    /// How long the backend's own witness map took, for evaluations it made.
    pub fn made_in(&self) -> Option<Duration> {
        self.made_in
    }
}

#[derive(Debug)]
pub(crate) enum StagedData {
    Host(Evaluations),
    Device([DeviceBuffer<Fr>; 3]),
}

/// A circuit's A, B, C held where a backend evaluates them itself (a GPU's memory): a proof of
/// it takes its a, b, c from [`ProverBackend::stage_and_evaluate`] instead of the host's witness
/// map, so neither the host's time nor a, b, c's copies are spent. Its memory is held until it
/// drops.
#[derive(Debug)]
pub struct HeldCircuit {
    pub(crate) data: HeldData,
    pub(crate) num_variables: usize,
    pub(crate) num_constraints: usize,
    pub(crate) bytes: u64,
}

#[derive(Debug)]
pub(crate) enum HeldData {
    Device(Box<DeviceCircuit>),
    /// A simulated device's: the system itself, its bytes charged to the simulated budget.
    Simulated {
        r1cs: Arc<R1cs>,
        _room: Reservation,
    },
}

impl HeldCircuit {
    /// Room in `vram` for `r1cs`'s matrices as the device holds them, if it leaves `keep_free`
    /// bytes of the budget available; `None` when it would not, or when a matrix is too large
    /// for the kernels' 32-bit offsets.
    pub(crate) fn room(
        vram: &Vram,
        r1cs: &R1cs,
        keep_free: u64,
    ) -> Result<Option<Reservation>, VramError> {
        let Some(bytes) = DeviceCircuit::bytes_for(r1cs) else {
            return Ok(None);
        };
        if vram.budget().available() < bytes.saturating_add(keep_free) {
            return Ok(None);
        }
        vram.reserve(bytes).map(Some)
    }

    pub(crate) fn new(data: HeldData, r1cs: &R1cs, bytes: u64) -> Self {
        Self {
            data,
            num_variables: r1cs.num_variables(),
            num_constraints: r1cs.num_constraints(),
            bytes,
        }
    }

    /// The device bytes it holds.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// That `z` and a domain of `n` fit it.
    pub(crate) fn check_witness(
        &self,
        backend: &'static str,
        z: &[Fr],
        n: usize,
    ) -> Result<(), BackendError> {
        if z.len() != self.num_variables || n < self.num_constraints {
            return Err(BackendError::invalid(
                backend,
                format!(
                    "a witness of {} values and a domain of {n} for a held circuit of {} variables and {} constraints",
                    z.len(),
                    self.num_variables,
                    self.num_constraints
                ),
            ));
        }
        Ok(())
    }
}

/// One witness MSM's result: G1 for A, B and L, G2 for B in G2.
#[derive(Debug, Clone, Copy)]
pub enum MsmValue {
    G1(G1Projective),
    G2(G2Projective),
}

impl WitnessMsms {
    /// Stores the result of the MSM over `query` (the group must match the query).
    pub fn set(&mut self, query: Query, value: MsmValue, took: Duration) -> Result<(), String> {
        match (query, value) {
            (Query::A, MsmValue::G1(p)) => (self.a, self.time_a) = (p, took),
            (Query::BG1, MsmValue::G1(p)) => (self.b_g1, self.time_b_g1) = (p, took),
            (Query::L, MsmValue::G1(p)) => (self.l, self.time_l) = (p, took),
            (Query::BG2, MsmValue::G2(p)) => (self.b_g2, self.time_b_g2) = (p, took),
            (q, _) => return Err(format!("MSM {q} is not a witness MSM of that group")),
        }
        Ok(())
    }
}

/// The witness MSMs in the order they run, each with its offset into the witness (L runs over
/// the private part, after `num_public + 1`).
pub fn witness_msm_order(num_public: usize) -> [(Query, usize); 4] {
    [
        (Query::A, 0),
        (Query::BG1, 0),
        (Query::BG2, 0),
        (Query::L, num_public + 1),
    ]
}

/// One witness MSM on the CPU over `z[offset..]` (the host backends' [`ProverBackend::witness_msm`]).
/// The host's witness map into `backend`'s [`ProverBackend::evaluation_buffers`], staged by
/// [`ProverBackend::stage_evaluations`] (the buffers go back to it on a witness error).
pub(crate) fn map_then_stage<B: ProverBackend + ?Sized>(
    backend: &B,
    r1cs: &R1cs,
    z: &[Fr],
    n: usize,
    room: Reservation,
) -> Result<StagedEvaluations, BackendError> {
    let mut abc = backend.evaluation_buffers(n)?;
    if let Err(e) = crate::witness_map(r1cs, z, &mut abc) {
        backend.return_evaluations(abc);
        return Err(BackendError::from_witness(backend.name(), e));
    }
    backend.stage_evaluations(abc, room)
}

pub fn host_witness_msm(
    pk: &ProvingKey,
    z: &[Fr],
    query: Query,
    offset: usize,
) -> Result<MsmValue, BackendError> {
    let scalars = z.get(offset..).unwrap_or_default();
    let g1 = |points: &[G1Affine]| cuzk_msm::cpu::msm(points, scalars).map(MsmValue::G1);
    match query {
        Query::BG2 => cuzk_msm::cpu::msm(pk.b_g2_query(), scalars).map(MsmValue::G2),
        Query::A => g1(pk.a_query()),
        Query::BG1 => g1(pk.b_g1_query()),
        Query::L => g1(pk.l_query()),
        Query::H => return Err(BackendError::invalid(CPU, "H is not a witness MSM")),
    }
    .map_err(|e| BackendError::new(CPU, e))
}

/// The CPU quotient and H MSM over host evaluations (the host backends' quotient phase).
pub fn host_quotient_msm(
    domain: &Domain,
    abc: Evaluations,
    h_query: &[G1Affine],
) -> Result<QuotientMsm, BackendError> {
    let (h, quotient) = timed("quotient", || CpuBackend.quotient(domain, abc));
    let h = h?;
    let Some(coeffs) = h.get(..h_query.len()) else {
        return Err(BackendError::invalid(
            CPU,
            format!(
                "quotient returned {} coefficients for {} H points",
                h.len(),
                h_query.len()
            ),
        ));
    };
    let (r, msm) = timed("msm_h", || cuzk_msm::cpu::msm(h_query, coeffs));
    Ok(QuotientMsm {
        h: r.map_err(|e| BackendError::new(CPU, e))?,
        quotient,
        msm,
    })
}

const CPU: &str = "cpu";

/// The phases of a proof as an engine drives them, one method each: [`Self::prepare`] once per
/// proof; the witness staged ([`Self::reserve`], [`Self::stage_witness`]) and its four MSMs
/// ([`Self::witness_msm`], in [`witness_msm_order`]) while the CPU evaluates a, b, c into
/// [`Self::evaluation_buffers`]; a, b, c staged ([`Self::stage_evaluations`]); the quotient
/// and its MSM ([`Self::quotient_msm`]). [`create_proof_with_backend`](crate::create_proof_with_backend)
/// and the scheduler's engine both drive these. The provided methods are the CPU's; every
/// implementation must return exactly what they return (the GPU is checked bit for bit).
pub trait ProverBackend: Send + Sync + fmt::Debug {
    fn name(&self) -> &'static str;

    /// A one-line description for users (the GPU backend names its device).
    fn describe(&self) -> String {
        self.name().to_owned()
    }

    /// Called once per proof, before any other call, with the key and the domain size: a
    /// backend plans its memory here and may load the key's points (a no-op when the same key
    /// is already loaded). A backend without a held key's points refuses it here
    /// ([`KeyRef::host`]).
    fn prepare(&self, key: KeyRef<'_>, domain_size: usize) -> Result<(), BackendError> {
        let _ = domain_size;
        key.host(self.name()).map(drop)
    }

    /// Highest device memory in use so far, in bytes (None for host-only backends).
    fn device_peak(&self) -> Option<u64> {
        None
    }

    /// What one proof of `key` (domain `n`) needs on the device besides the resident points.
    fn staging_needs(&self, key: KeyRef<'_>, n: usize) -> Result<StagingNeeds, BackendError> {
        StagingNeeds::nominal(key.num_variables(), n).map_err(|e| BackendError::new(self.name(), e))
    }

    /// `bytes` of this backend's own memory to stage `what` into, for a caller that is not an
    /// engine admitting jobs (which reserves from its device's budget itself). A host backend
    /// has no device: its room is an unlimited host budget.
    fn reserve(&self, what: Stage, bytes: u64) -> Result<Reservation, BackendError> {
        let _ = what;
        cuzk_vram::Budget::new("host", u64::MAX)
            .try_acquire_or_err(bytes)
            .map_err(|e| BackendError::new(self.name(), e))
    }

    /// Copies the witness to where the witness MSMs read it, into `room` (at least
    /// [`StagingNeeds::witness`] bytes). Runs outside any lock the MSMs hold, so it can overlap
    /// another proof's kernels.
    fn stage_witness(&self, z: &[Fr], room: Reservation) -> Result<StagedWitness, BackendError> {
        let _ = z;
        Ok(StagedWitness {
            device: None,
            _room: room,
        })
    }

    /// One witness MSM (`query` of [`witness_msm_order`]) over the staged witness from `offset`;
    /// `z` is the same witness on the host.
    fn witness_msm(
        &self,
        key: KeyRef<'_>,
        z: &[Fr],
        staged: &StagedWitness,
        query: Query,
        offset: usize,
    ) -> Result<MsmValue, BackendError> {
        let _ = staged;
        host_witness_msm(key.host(self.name())?, z, query, offset)
    }

    /// Holds `r1cs`'s matrices where this backend evaluates them, if they fit with `keep_free`
    /// bytes of its memory left; `None` when they do not, or when the backend evaluates on the
    /// host (the provided method).
    fn hold_circuit(
        &self,
        r1cs: &Arc<R1cs>,
        keep_free: u64,
    ) -> Result<Option<HeldCircuit>, BackendError> {
        let _ = (r1cs, keep_free);
        Ok(None)
    }

    /// The witness staged as [`Self::stage_witness`] stages it, and a, b, c = A·z, B·z, C·z of
    /// `circuit` over a domain of `n`, made by this backend from the staged witness where
    /// [`Self::quotient_msm`] reads them; every row is checked (a witness that fails one is a
    /// [`BackendErrorKind::Unsatisfied`] error naming it). `room` holds at least
    /// [`StagingNeeds::witness`] + [`StagingNeeds::evaluations`] bytes; the witness's part of it
    /// goes with the staged witness.
    fn stage_and_evaluate(
        &self,
        circuit: &HeldCircuit,
        z: &[Fr],
        n: usize,
        room: Reservation,
    ) -> Result<(StagedWitness, StagedEvaluations), BackendError> {
        let _ = (circuit, z, n, room);
        Err(BackendError::invalid(
            self.name(),
            "this backend holds no circuits",
        ))
    }

    /// Host storage for the evaluations of one proof, each of length `n` (contents
    /// unspecified: the witness map overwrites every entry): a pinned set when
    /// [`Self::pinned_evaluation_buffers`] has one, else the heap.
    fn evaluation_buffers(&self, n: usize) -> Result<Evaluations, BackendError> {
        Ok(self
            .pinned_evaluation_buffers(n)
            .unwrap_or_else(|| Evaluations::pinned_or_heap(None, n)))
    }

    /// A pinned set for one proof's evaluations, from those the backend keeps between proofs
    /// or newly pinned within the pinned budget; never the heap. `None` for host backends. The
    /// GPU backend takes its sets back in [`Self::stage_evaluations`].
    fn pinned_evaluation_buffers(&self, n: usize) -> Option<Evaluations> {
        let _ = n;
        None
    }

    /// Buffers for evaluations made ahead of their proof's turn: those the backend keeps idle,
    /// `None` when it has none. Unlike [`Self::evaluation_buffers`] this never pins memory, so
    /// work ahead holds no set beyond those kept for the proofs in flight. Host backends keep
    /// none and allocate, as [`Self::evaluation_buffers`] does.
    fn idle_evaluation_buffers(&self, n: usize) -> Option<Evaluations> {
        self.evaluation_buffers(n).ok()
    }

    /// Takes back buffers lent by [`Self::evaluation_buffers`] from a proof that stops before
    /// staging them (a witness error, a failed MSM, a cancel), so the pool stays whole.
    fn return_evaluations(&self, abc: Evaluations) {
        drop(abc);
    }

    /// Whether [`Self::map_and_stage`] makes a, b, c straight into the memory the quotient
    /// reads, piece by piece through the backend's own small staging buffers, so that a proof
    /// with no pinned set holds no host set of a, b, c at all (a heap set is faulted in, then
    /// copied at pageable speed, for every proof). `false` for host backends.
    fn maps_through_staging(&self) -> bool {
        false
    }

    /// The host's witness map (A·z, B·z, C·z of `r1cs` over a domain of `n`, every row
    /// checked: a failing one is a [`BackendErrorKind::Unsatisfied`] error naming the first),
    /// staged into `room` (at least [`StagingNeeds::evaluations`] bytes) as
    /// [`Self::stage_evaluations`] stages it. The provided method maps into
    /// [`Self::evaluation_buffers`] and stages them; a backend that
    /// [`Self::maps_through_staging`] copies each piece of rows while it makes the next.
    fn map_and_stage(
        &self,
        r1cs: &R1cs,
        z: &[Fr],
        n: usize,
        room: Reservation,
    ) -> Result<StagedEvaluations, BackendError> {
        map_then_stage(self, r1cs, z, n, room)
    }

    /// Copies a, b, c to where the quotient reads them, into `room` (at least
    /// [`StagingNeeds::evaluations`] bytes); host buffers lent by
    /// [`Self::evaluation_buffers`] go back to the backend. Runs outside the MSMs' lock.
    fn stage_evaluations(
        &self,
        abc: Evaluations,
        room: Reservation,
    ) -> Result<StagedEvaluations, BackendError> {
        Ok(StagedEvaluations {
            data: StagedData::Host(abc),
            _room: room,
            made_in: None,
        })
    }

    /// The coefficients of H = (A·B − C)/Z from the staged evaluations (the top one is zero
    /// for a satisfied witness), then `Σ h_j · h_query_j` over the first n − 1 coefficients
    /// (the key's H points).
    fn quotient_msm(
        &self,
        domain: &Domain,
        abc: StagedEvaluations,
        key: KeyRef<'_>,
    ) -> Result<QuotientMsm, BackendError> {
        let pk = key.host(self.name())?;
        match abc.data {
            StagedData::Host(abc) => host_quotient_msm(domain, abc, pk.h_query()),
            StagedData::Device(_) => Err(BackendError::invalid(
                self.name(),
                "device-staged evaluations given to a host backend",
            )),
        }
    }
}

/// The CPU engine: cuzk-ntt transforms and cuzk-msm's parallel, sparse-aware MSM (rayon).
#[derive(Debug, Clone, Copy, Default)]
pub struct CpuBackend;

impl CpuBackend {
    /// The coefficients of H = (A·B − C)/Z (length n) from the evaluations of A·z, B·z, C·z
    /// on `domain`, transformed in place.
    pub fn quotient(&self, domain: &Domain, abc: Evaluations) -> Result<Vec<Fr>, BackendError> {
        let Evaluations {
            mut a,
            mut b,
            mut c,
        } = abc;
        domain
            .quotient_in_place(&mut a, &mut b, &mut c)
            .map_err(|e| BackendError::new(CPU, e))?;
        Ok(match a {
            HostVec::Heap(v) => v,
            HostVec::Pinned(p) => p.to_vec(),
        })
    }
}

impl ProverBackend for CpuBackend {
    fn name(&self) -> &'static str {
        CPU
    }
}

/// The backend half of [`KeyRef`]: how a backend without a held key's points refuses it.
impl<'a> KeyRef<'a> {
    /// The host key, or for a held key [`BackendErrorKind::HeldKey`] from `backend`: the one
    /// place a backend without the points refuses a held key.
    ///
    /// [`BackendErrorKind::HeldKey`]: crate::BackendErrorKind::HeldKey
    pub fn host(self, backend: &'static str) -> Result<&'a ProvingKey, BackendError> {
        match self {
            Self::Host(pk) => Ok(pk),
            Self::Held(_) => Err(BackendError::held_key(
                backend,
                "the key's points are held by the GPU backend that made them, and nowhere else: prove on that backend",
            )),
        }
    }
}
