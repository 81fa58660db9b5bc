//! The Groth16 prover: witness map, quotient, five MSMs, assembly.
//!
//! Order of work, the phases of [`ProverBackend`] as the scheduler's engine runs them: the
//! backend plans its memory (`prepare`) and stages the witness into room of its own memory;
//! the four MSMs whose scalars are the witness (A, B in G1 and G2, L) run on a second thread
//! while this thread evaluates a, b, c (and checks every constraint) into the backend's
//! buffers; then a, b, c are staged, the quotient H and its MSM run; then the assembly. On a
//! GPU the witness MSMs keep the device busy while the CPU does the witness map.
//!
//! With r, s the blinding scalars:
//! - A = α + Σ z_i·a_i + r·δ (G1)
//! - B = β + Σ z_i·b_i + s·δ (G2, and in G1 for C)
//! - C = Σ_private z_i·l_i + Σ h_j·h_query_j + s·A + r·B_g1 − r·s·δ (G1)

use core::fmt;
use std::time::{Duration, Instant};

use cuzk_field::{Fr, G1Projective};
use cuzk_ntt::{Domain, NttError};
use rand_core::RngCore;

use crate::backend::{
    BackendError, CpuBackend, Evaluations, ProverBackend, Stage, StagedData, StagedWitness,
    WitnessMsms, witness_msm_order,
};
use crate::keys::{KeyRef, Proof, ProvingKey, Query};
use crate::r1cs::{R1cs, Witness, WitnessError};
use crate::timing::timed;

/// Why no proof was produced.
#[derive(Debug, thiserror::Error)]
pub enum ProveError {
    #[error("witness rejected: {0}")]
    Witness(#[from] WitnessError),
    #[error(
        "proving key does not match the circuit: {what} has {found} entries, expected {expected}"
    )]
    KeyMismatch {
        what: &'static str,
        expected: usize,
        found: usize,
    },
    #[error("no QAP domain for this circuit: {0}")]
    Domain(#[from] NttError),
    #[error(transparent)]
    Backend(#[from] BackendError),
}

/// Wall-clock time of each prover phase.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProofTimings {
    /// The backend's memory plan and key loading (a GPU uploads resident key points on the
    /// first proof with a key; later proofs only check that the key is the same).
    pub prepare: Duration,
    /// a, b, c = A·z, B·z, C·z over the domain, and the satisfaction check (runs at the same
    /// time as the four witness MSMs, whose times are their own).
    pub witness_map: Duration,
    /// Host → device copy of the witness for the A, B and L MSMs; `None` on a host-only
    /// backend, which stages by reference.
    pub upload_witness: Option<Duration>,
    /// Host → device copy of a, b, c; `None` on a host-only backend.
    pub upload_abc: Option<Duration>,
    /// H from a, b, c (7 NTTs and the point-wise step; on a GPU without the upload).
    pub quotient: Duration,
    pub msm_a: Duration,
    pub msm_b_g1: Duration,
    pub msm_b_g2: Duration,
    pub msm_h: Duration,
    pub msm_l: Duration,
    /// Blinding with r and s, and conversion to affine.
    pub assembly: Duration,
    pub total: Duration,
}

impl ProofTimings {
    /// `(phase, duration)` rows for printing, `total` last; the upload rows only where the
    /// backend uploads.
    pub fn rows(&self) -> Vec<(&'static str, Duration)> {
        [
            ("prepare key", Some(self.prepare)),
            ("witness map", Some(self.witness_map)),
            ("upload z", self.upload_witness),
            ("upload a,b,c", self.upload_abc),
            ("quotient H", Some(self.quotient)),
            ("MSM A (G1)", Some(self.msm_a)),
            ("MSM B (G1)", Some(self.msm_b_g1)),
            ("MSM B (G2)", Some(self.msm_b_g2)),
            ("MSM H (G1)", Some(self.msm_h)),
            ("MSM L (G1)", Some(self.msm_l)),
            ("assembly", Some(self.assembly)),
            ("total", Some(self.total)),
        ]
        .into_iter()
        .filter_map(|(name, d)| Some((name, d?)))
        .collect()
    }
}

impl fmt::Display for ProofTimings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (name, d) in self.rows() {
            writeln!(f, "{name:<14} {:>10.1} ms", d.as_secs_f64() * 1e3)?;
        }
        Ok(())
    }
}

/// A proof with fresh random r, s on the CPU backend.
pub fn create_proof(
    pk: &ProvingKey,
    r1cs: &R1cs,
    witness: &Witness,
    rng: &mut impl RngCore,
) -> Result<Proof, ProveError> {
    let (r, s) = (Fr::random(rng), Fr::random(rng));
    create_proof_with_randomness(pk, r1cs, witness, r, s)
}

/// A proof with caller-chosen r, s on the CPU backend (deterministic).
pub fn create_proof_with_randomness(
    pk: &ProvingKey,
    r1cs: &R1cs,
    witness: &Witness,
    r: Fr,
    s: Fr,
) -> Result<Proof, ProveError> {
    create_proof_with_backend(&CpuBackend, pk, r1cs, witness, r, s).map(|(p, _)| p)
}

/// The checks every proof starts with: the witness fits the circuit and the key was made for
/// it. Returns the QAP domain.
pub fn check_inputs<'k>(
    key: impl Into<KeyRef<'k>>,
    r1cs: &R1cs,
    witness: &Witness,
) -> Result<Domain, ProveError> {
    r1cs.check_witness(witness)?;
    let domain = Domain::for_size(r1cs.num_constraints())?;
    check_key(key.into(), r1cs, domain.size())?;
    Ok(domain)
}

/// The witness map: a, b, c = A·z, B·z, C·z over the domain into `abc` (zero past the rows),
/// checking every constraint on the way.
pub fn witness_map(r1cs: &R1cs, z: &[Fr], abc: &mut Evaluations) -> Result<(), WitnessError> {
    let rows = r1cs.num_constraints();
    for v in [&mut abc.a, &mut abc.b, &mut abc.c] {
        if v.len() < rows {
            return Err(WitnessError::OutputLength {
                expected: rows,
                found: v.len(),
            });
        }
        v[rows..].fill(Fr::ZERO);
    }
    r1cs.evaluate_into(z, &mut abc.a, &mut abc.b, &mut abc.c)
}

/// Checks that the key was made for this circuit's shape.
fn check_key(pk: KeyRef<'_>, r1cs: &R1cs, n: usize) -> Result<(), ProveError> {
    let m = r1cs.num_variables();
    let checks = [
        ("a_query", m, pk.query_len(Query::A)),
        ("b_g1_query", m, pk.query_len(Query::BG1)),
        ("b_g2_query", m, pk.query_len(Query::BG2)),
        ("h_query", n - 1, pk.query_len(Query::H)),
        ("l_query", r1cs.num_private(), pk.query_len(Query::L)),
        ("ic", r1cs.num_public() + 1, pk.vk().ic.len()),
    ];
    for (what, expected, found) in checks {
        if expected != found {
            return Err(ProveError::KeyMismatch {
                what,
                expected,
                found,
            });
        }
    }
    Ok(())
}

/// A proof with r, s on any backend, with per-phase timings. Every phase is also a tracing
/// span with an event carrying its duration. A [`HeldKey`](crate::HeldKey) proves only on the
/// backend that holds its points (any other refuses it with
/// [`BackendErrorKind::HeldKey`](crate::BackendErrorKind::HeldKey)).
pub fn create_proof_with_backend<'k>(
    backend: &dyn ProverBackend,
    key: impl Into<KeyRef<'k>>,
    r1cs: &R1cs,
    witness: &Witness,
    r: Fr,
    s: Fr,
) -> Result<(Proof, ProofTimings), ProveError> {
    let _span = tracing::info_span!(
        "prove",
        backend = backend.name(),
        constraints = r1cs.num_constraints(),
        variables = r1cs.num_variables()
    )
    .entered();
    let start = Instant::now();
    let pk = key.into();
    let domain = check_inputs(pk, r1cs, witness)?;
    let n = domain.size();
    let z = witness.assignment();
    let mut t = ProofTimings::default();

    let (prepared, d) = timed("prepare", || backend.prepare(pk, n));
    t.prepare = d;
    prepared?;
    let needs = backend.staging_needs(pk, n)?;
    let (staged, d) = timed("upload_witness", || {
        backend.stage_witness(z, backend.reserve(Stage::Witness, needs.witness)?)
    });
    let staged = staged?;
    // A host-only backend stages by reference: no copy, no upload row.
    t.upload_witness = staged.device.is_some().then_some(d);
    let mut abc = backend.evaluation_buffers(n)?;
    if [&abc.a, &abc.b, &abc.c].iter().any(|v| v.len() != n) {
        backend.return_evaluations(abc);
        return Err(BackendError::invalid(
            backend.name(),
            format!("evaluation buffers are not of the domain size {n}"),
        )
        .into());
    }

    // The witness is staged before the witness map starts, so its copy has the CPU to itself.
    let num_public = r1cs.num_public();
    let (msms, evaluated) = std::thread::scope(|scope| {
        let span = tracing::Span::current();
        let staged = &staged;
        let msms =
            scope.spawn(move || span.in_scope(|| witness_msms(backend, pk, z, staged, num_public)));
        let evaluated = timed("witness_map", || witness_map(r1cs, z, &mut abc));
        let msms = msms
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (msms, evaluated)
    });
    drop(staged);
    let (evaluated, d) = evaluated;
    t.witness_map = d;
    // A witness error outranks a backend error of the same proof.
    let msms = match evaluated.map_err(ProveError::from).and_then(|()| Ok(msms?)) {
        Ok(m) => m,
        Err(e) => {
            backend.return_evaluations(abc);
            return Err(e);
        }
    };
    t.msm_a = msms.time_a;
    t.msm_b_g1 = msms.time_b_g1;
    t.msm_b_g2 = msms.time_b_g2;
    t.msm_l = msms.time_l;

    let (staged, d) = timed("upload_abc", || {
        match backend.reserve(Stage::Evaluations, needs.evaluations) {
            Ok(room) => backend.stage_evaluations(abc, room),
            Err(e) => {
                backend.return_evaluations(abc);
                Err(e)
            }
        }
    });
    let staged = staged?;
    t.upload_abc = matches!(staged.data, StagedData::Device(_)).then_some(d);
    let q = backend.quotient_msm(&domain, staged, pk)?;
    t.quotient = q.quotient;
    t.msm_h = q.msm;

    let (proof, d) = timed("assembly", || assemble(pk, r, s, &msms, q.h));
    t.assembly = d;
    t.total = start.elapsed();
    tracing::info!(total_ms = t.total.as_secs_f64() * 1e3, "proof done");
    Ok((proof, t))
}

/// The four witness MSMs over the staged witness, in order, each timed.
fn witness_msms(
    backend: &dyn ProverBackend,
    pk: KeyRef<'_>,
    z: &[Fr],
    staged: &StagedWitness,
    num_public: usize,
) -> Result<WitnessMsms, BackendError> {
    let mut out = WitnessMsms::default();
    for (query, offset) in witness_msm_order(num_public) {
        let (value, took) = timed(query.span(), || {
            backend.witness_msm(pk, z, staged, query, offset)
        });
        out.set(query, value?, took)
            .map_err(|e| BackendError::invalid(backend.name(), e))?;
    }
    Ok(out)
}

/// The proof from the MSM results and the blinding scalars r, s (see the module docs).
pub fn assemble<'k>(
    key: impl Into<KeyRef<'k>>,
    r: Fr,
    s: Fr,
    msms: &WitnessMsms,
    msm_h: G1Projective,
) -> Proof {
    let pk = key.into();
    let vk = pk.vk();
    let delta_g1 = pk.delta_g1().to_projective();
    let a = vk.alpha_g1.to_projective() + msms.a + delta_g1 * r;
    let b_g2 = vk.beta_g2.to_projective() + msms.b_g2 + vk.delta_g2.to_projective() * s;
    let b_g1 = pk.beta_g1().to_projective() + msms.b_g1 + delta_g1 * s;
    let c = msms.l + msm_h + a * s + b_g1 * r - delta_g1 * (r * s);
    Proof {
        a: a.to_affine(),
        b: b_g2.to_affine(),
        c: c.to_affine(),
    }
}
