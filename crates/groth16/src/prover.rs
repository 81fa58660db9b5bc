//! The Groth16 prover: witness map, quotient, five MSMs, assembly.
//!
//! With r, s the blinding scalars:
//! - A = α + Σ z_i·a_i + r·δ (G1)
//! - B = β + Σ z_i·b_i + s·δ (G2, and in G1 for C)
//! - C = Σ_private z_i·l_i + Σ h_j·h_query_j + s·A + r·B_g1 − r·s·δ (G1)

use core::fmt;
use std::time::{Duration, Instant};

use cuzk_field::{Fr, G1Projective, G2Projective};
use cuzk_ntt::{Domain, NttError};
use rand_core::RngCore;

use crate::backend::{BackendError, CpuBackend, ProverBackend, Query};
use crate::keys::{Proof, ProvingKey};
use crate::r1cs::{R1cs, Witness, WitnessError, first_unsatisfied};
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
    /// a, b, c = A·z, B·z, C·z over the domain, and the satisfaction check.
    pub witness_map: Duration,
    /// H from a, b, c (7 NTTs and the point-wise step).
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
    /// `(phase, duration)` rows for printing, `total` last.
    pub fn rows(&self) -> [(&'static str, Duration); 10] {
        [
            ("prepare key", self.prepare),
            ("witness map", self.witness_map),
            ("quotient H", self.quotient),
            ("MSM A (G1)", self.msm_a),
            ("MSM B (G1)", self.msm_b_g1),
            ("MSM B (G2)", self.msm_b_g2),
            ("MSM H (G1)", self.msm_h),
            ("MSM L (G1)", self.msm_l),
            ("assembly", self.assembly),
            ("total", self.total),
        ]
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

/// Checks that the key was made for this circuit's shape.
fn check_key(pk: &ProvingKey, r1cs: &R1cs, n: usize) -> Result<(), ProveError> {
    let m = r1cs.num_variables();
    let checks = [
        ("a_query", m, pk.a_query.len()),
        ("b_g1_query", m, pk.b_g1_query.len()),
        ("b_g2_query", m, pk.b_g2_query.len()),
        ("h_query", n - 1, pk.h_query.len()),
        ("l_query", r1cs.num_private(), pk.l_query.len()),
        ("ic", r1cs.num_public() + 1, pk.vk.ic.len()),
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
/// span with an event carrying its duration.
pub fn create_proof_with_backend(
    backend: &dyn ProverBackend,
    pk: &ProvingKey,
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
    r1cs.check_witness(witness)?;
    let domain = Domain::for_size(r1cs.num_constraints())?;
    let n = domain.size();
    check_key(pk, r1cs, n)?;
    let z = witness.assignment();
    let mut t = ProofTimings::default();

    let (prepared, d) = timed("prepare", || backend.prepare(pk, n));
    t.prepare = d;
    prepared?;

    let (abc, d) = timed("witness_map", || -> Result<_, WitnessError> {
        let (mut a, mut b, mut c) = (vec![Fr::ZERO; n], vec![Fr::ZERO; n], vec![Fr::ZERO; n]);
        r1cs.evaluate_into(z, &mut a, &mut b, &mut c)?;
        first_unsatisfied(&a, &b, &c, r1cs.num_constraints())?;
        Ok((a, b, c))
    });
    t.witness_map = d;
    let (a, b, c) = abc?;

    let (h, d) = timed("quotient", || backend.quotient(&domain, a, b, c));
    t.quotient = d;
    let h = h?;
    if h.len() != n {
        return Err(BackendError::new(
            backend.name(),
            format!("quotient returned {} coefficients, expected {n}", h.len()),
        )
        .into());
    }

    let (msm_a, d) = timed("msm_a", || backend.msm_g1(Query::A, &pk.a_query, z));
    t.msm_a = d;
    let msm_a = msm_a?;
    let (msm_b_g1, d) = timed("msm_b_g1", || backend.msm_g1(Query::BG1, &pk.b_g1_query, z));
    t.msm_b_g1 = d;
    let msm_b_g1 = msm_b_g1?;
    let (msm_b_g2, d) = timed("msm_b_g2", || backend.msm_g2(Query::BG2, &pk.b_g2_query, z));
    t.msm_b_g2 = d;
    let msm_b_g2 = msm_b_g2?;
    let (msm_h, d) = timed("msm_h", || {
        backend.msm_g1(Query::H, &pk.h_query, &h[..n - 1])
    });
    t.msm_h = d;
    let msm_h = msm_h?;
    drop(h);
    let (msm_l, d) = timed("msm_l", || {
        backend.msm_g1(Query::L, &pk.l_query, &z[r1cs.num_public() + 1..])
    });
    t.msm_l = d;
    let msm_l = msm_l?;

    let (proof, d) = timed("assembly", || {
        assemble(pk, r, s, msm_a, msm_b_g1, msm_b_g2, msm_h, msm_l)
    });
    t.assembly = d;
    t.total = start.elapsed();
    tracing::info!(total_ms = t.total.as_secs_f64() * 1e3, "proof done");
    Ok((proof, t))
}

#[allow(clippy::too_many_arguments)]
fn assemble(
    pk: &ProvingKey,
    r: Fr,
    s: Fr,
    msm_a: G1Projective,
    msm_b_g1: G1Projective,
    msm_b_g2: G2Projective,
    msm_h: G1Projective,
    msm_l: G1Projective,
) -> Proof {
    let delta_g1 = pk.delta_g1.to_projective();
    let a = pk.vk.alpha_g1.to_projective() + msm_a + delta_g1 * r;
    let b_g2 = pk.vk.beta_g2.to_projective() + msm_b_g2 + pk.vk.delta_g2.to_projective() * s;
    let b_g1 = pk.beta_g1.to_projective() + msm_b_g1 + delta_g1 * s;
    let c = msm_l + msm_h + a * s + b_g1 * r - delta_g1 * (r * s);
    Proof {
        a: a.to_affine(),
        b: b_g2.to_affine(),
        c: c.to_affine(),
    }
}
