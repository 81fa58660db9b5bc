//! Parameter generation from toxic waste (τ, α, β, γ, δ) for a given R1CS.
//!
//! u_i(τ), v_i(τ), w_i(τ) come from the domain's Lagrange coefficients at τ: u_i(τ) =
//! `Σ_rows A[row][i]·L_row(τ)`, computed column by column over a transposed (CSC) copy of each
//! matrix so the work is parallel without per-thread copies of the outputs. All points are then
//! made by windowed fixed-base multiplication (one table per group) with batched affine
//! additions (see `fixed_base`). [`gpu`] makes the same key on a GPU (the fixed-base kernels of
//! `kernels/groth16/setup.cu`, launched by [`crate::kernels`]).

use std::time::{Duration, Instant};

use cuzk_field::{Fr, G1Affine, G1Projective, G2Affine, G2Projective};
use cuzk_ntt::{Domain, NttError};
use rand_core::RngCore;
use rayon::prelude::*;

use crate::keys::{KeyQueries, ProvingKey, VerifyingKey};
use crate::r1cs::{R1cs, SparseMatrix};
use crate::timing::timed;
use fixed_base::FixedBaseTable;

mod fixed_base;
pub mod gpu;

/// Why parameters could not be generated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SetupError {
    #[error("no QAP domain for this circuit: {0}")]
    Domain(#[from] NttError),
    #[error("toxic waste {0} is zero")]
    ZeroToxicWaste(&'static str),
    #[error("τ lies in the evaluation domain (Z(τ) = 0)")]
    TauInDomain,
    /// A device failure of the GPU setup (CUDA error, VRAM budget, launch check).
    #[error("GPU setup failed: {0}")]
    Gpu(#[from] cuzk_gpu::GpuError),
    /// The MSM context over points made on the device could not be built.
    #[error("GPU setup could not keep the key's points on the device: {0}")]
    Held(String),
}

/// The secret trapdoor of one setup; whoever knows it can forge proofs.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct ToxicWaste {
    pub tau: Fr,
    pub alpha: Fr,
    pub beta: Fr,
    pub gamma: Fr,
    pub delta: Fr,
}

impl core::fmt::Debug for ToxicWaste {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("ToxicWaste(…)")
    }
}

impl ToxicWaste {
    /// Uniformly random non-zero values.
    pub fn random(rng: &mut (impl RngCore + ?Sized)) -> Self {
        let mut nonzero = || loop {
            let v = Fr::random(rng);
            if !v.is_zero() {
                return v;
            }
        };
        Self {
            tau: nonzero(),
            alpha: nonzero(),
            beta: nonzero(),
            gamma: nonzero(),
            delta: nonzero(),
        }
    }
}

/// Wall-clock time of each setup phase.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SetupTimings {
    /// L_i(τ) over the domain.
    pub lagrange: Duration,
    /// u, v, w at τ from the transposed matrices, and the key scalars.
    pub qap_at_tau: Duration,
    /// G1 table and the a, b_g1, ic, l, h points.
    pub g1: Duration,
    /// G2 table and the b_g2 points.
    pub g2: Duration,
    pub total: Duration,
}

impl SetupTimings {
    /// `(phase, duration)` rows for printing.
    pub fn rows(&self) -> [(&'static str, Duration); 5] {
        [
            ("lagrange coefficients", self.lagrange),
            ("QAP at tau", self.qap_at_tau),
            ("G1 fixed-base", self.g1),
            ("G2 fixed-base", self.g2),
            ("total", self.total),
        ]
    }
}

/// A proving key for `r1cs` from fresh random toxic waste (which is dropped).
pub fn generate_parameters(
    r1cs: &R1cs,
    rng: &mut (impl RngCore + ?Sized),
) -> Result<ProvingKey, SetupError> {
    generate_parameters_with_toxic_waste(r1cs, &ToxicWaste::random(rng)).map(|(pk, _)| pk)
}

/// A proving key for `r1cs` from the given toxic waste, with per-phase timings.
pub fn generate_parameters_with_toxic_waste(
    r1cs: &R1cs,
    tw: &ToxicWaste,
) -> Result<(ProvingKey, SetupTimings), SetupError> {
    let _span = tracing::info_span!(
        "setup",
        constraints = r1cs.num_constraints(),
        variables = r1cs.num_variables()
    )
    .entered();
    let start = Instant::now();
    let ks = key_scalars(r1cs, tw)?;
    let m = ks.num_variables;
    let (g1_points, t_g1) = timed("setup.g1", || {
        let table = FixedBaseTable::<G1Affine>::new(G1Projective::generator(), ks.g1.len());
        table.batch_mul(&ks.g1)
    });
    let (b_g2_query, t_g2) = timed("setup.g2", || {
        FixedBaseTable::<G2Affine>::new(G2Projective::generator(), m).batch_mul(&ks.b_g2)
    });
    let pk = assemble(tw, ks.num_instance, m, g1_points, b_g2_query);
    let timings = ks.timings(t_g1, t_g2, start);
    tracing::info!(total_ms = timings.total.as_secs_f64() * 1e3, "setup done");
    Ok((pk, timings))
}

/// The scalar side of a setup, shared by the CPU and GPU paths.
pub(crate) struct KeyScalars {
    /// Scalars of every G1 point, laid out as [a | b_g1 | ic | l | h] so one table serves all.
    pub(crate) g1: Vec<Fr>,
    /// v_i(τ): the scalars of b_g2_query.
    pub(crate) b_g2: Vec<Fr>,
    pub(crate) num_variables: usize,
    /// num_public + 1.
    pub(crate) num_instance: usize,
    pub(crate) t_lagrange: Duration,
    pub(crate) t_qap: Duration,
}

impl KeyScalars {
    /// The setup's timings, given its point phases and its start.
    pub(crate) fn timings(&self, g1: Duration, g2: Duration, start: Instant) -> SetupTimings {
        SetupTimings {
            lagrange: self.t_lagrange,
            qap_at_tau: self.t_qap,
            g1,
            g2,
            total: start.elapsed(),
        }
    }
}

/// Checks the toxic waste and computes every key scalar (Lagrange coefficients at τ, then
/// u, v, w at τ per variable).
pub(crate) fn key_scalars(r1cs: &R1cs, tw: &ToxicWaste) -> Result<KeyScalars, SetupError> {
    for (name, v) in [
        ("tau", tw.tau),
        ("alpha", tw.alpha),
        ("beta", tw.beta),
        ("gamma", tw.gamma),
        ("delta", tw.delta),
    ] {
        if v.is_zero() {
            return Err(SetupError::ZeroToxicWaste(name));
        }
    }
    let domain = Domain::for_size(r1cs.num_constraints())?;
    let n = domain.size();
    let z_tau = domain.evaluate_vanishing_polynomial(tw.tau);
    if z_tau.is_zero() {
        return Err(SetupError::TauInDomain);
    }
    let gamma_inv = tw
        .gamma
        .inverse()
        .ok_or(SetupError::ZeroToxicWaste("gamma"))?;
    let delta_inv = tw
        .delta
        .inverse()
        .ok_or(SetupError::ZeroToxicWaste("delta"))?;

    let (lagrange, t_lagrange) = timed("setup.lagrange", || {
        domain.evaluate_all_lagrange_coefficients(tw.tau)
    });

    let m = r1cs.num_variables();
    let num_instance = r1cs.num_public() + 1;
    let ((g1, b_g2), t_qap) = timed("setup.qap_at_tau", || {
        let (u, (v, w)) = rayon::join(
            || column_evaluations(r1cs.a(), &lagrange),
            || {
                rayon::join(
                    || column_evaluations(r1cs.b(), &lagrange),
                    || column_evaluations(r1cs.c(), &lagrange),
                )
            },
        );
        let mut s = Vec::with_capacity(3 * m + n - 1);
        s.extend_from_slice(&u);
        s.extend_from_slice(&v);
        let start = s.len();
        s.resize(start + m, Fr::ZERO);
        s[start..].par_iter_mut().enumerate().for_each(|(i, out)| {
            let k = tw.beta * u[i] + tw.alpha * v[i] + w[i];
            *out = k * if i < num_instance {
                gamma_inv
            } else {
                delta_inv
            };
        });
        let start = s.len();
        s.resize(start + n - 1, Fr::ZERO);
        powers_into(&mut s[start..], z_tau * delta_inv, tw.tau);
        (s, v)
    });
    Ok(KeyScalars {
        g1,
        b_g2,
        num_variables: m,
        num_instance,
        t_lagrange,
        t_qap,
    })
}

/// The proving key from the G1 points of [`KeyScalars::g1`] (same layout) and b_g2_query.
pub(crate) fn assemble(
    tw: &ToxicWaste,
    num_instance: usize,
    m: usize,
    g1_points: Vec<G1Affine>,
    b_g2_query: Vec<G2Affine>,
) -> ProvingKey {
    // Parallel copies into exact-size vectors: `split_off` copied each tail on one thread
    // (~3 s at 2^24) and left `a_query` holding the capacity of every G1 point.
    let part = |r: std::ops::Range<usize>| {
        let mut v = Vec::with_capacity(r.len());
        v.par_extend(g1_points[r].par_iter().copied());
        v
    };
    let a_query = part(0..m);
    let b_g1_query = part(m..2 * m);
    let ic = part(2 * m..2 * m + num_instance);
    let l_query = part(2 * m + num_instance..3 * m);
    let h_query = part(3 * m..g1_points.len());
    drop(g1_points);
    let (vk, beta_g1, delta_g1) = single_points(tw, ic);
    let queries = KeyQueries {
        a_query,
        b_g1_query,
        b_g2_query,
        h_query,
        l_query,
    };
    ProvingKey::new(vk, beta_g1, delta_g1, queries)
}

/// The verifying key and the single points of a proving key: `(vk, β·G1, δ·G1)`.
pub(crate) fn single_points(
    tw: &ToxicWaste,
    ic: Vec<G1Affine>,
) -> (VerifyingKey, G1Affine, G1Affine) {
    let g1 = G1Projective::generator();
    let g2 = G2Projective::generator();
    let vk = VerifyingKey {
        alpha_g1: (g1 * tw.alpha).to_affine(),
        beta_g2: (g2 * tw.beta).to_affine(),
        gamma_g2: (g2 * tw.gamma).to_affine(),
        delta_g2: (g2 * tw.delta).to_affine(),
        ic,
    };
    (vk, (g1 * tw.beta).to_affine(), (g1 * tw.delta).to_affine())
}

/// `out[j] = Σ_rows M[row][j] · lagrange[row]` for every column j, in parallel over column
/// ranges.
fn column_evaluations(m: &SparseMatrix, lagrange: &[Fr]) -> Vec<Fr> {
    // out[c] = sum over the entries (row, c, v) of v · L_row(τ). Each rayon task owns a range of
    // columns and scans every entry (a u32 compare each), adding only its own: no transpose (a
    // serial counting sort that took ~3 s and 40 bytes per entry at 2^24) and no shared writes.
    let cols = m.num_cols();
    let mut out = vec![Fr::ZERO; cols];
    let parts = rayon::current_num_threads().max(1);
    let span = cols.div_ceil(parts).max(1);
    let (row_ptr, col_idx, ids, coeffs) = (m.row_ptr(), m.cols(), m.coeff_ids(), m.coeffs());
    out.par_chunks_mut(span).enumerate().for_each(|(p, out)| {
        let lo = p * span;
        for (row, (&s, &e)) in row_ptr.iter().zip(&row_ptr[1..]).enumerate() {
            for (&c, &id) in col_idx[s..e].iter().zip(&ids[s..e]) {
                let k = (c as usize).wrapping_sub(lo);
                if k < out.len() {
                    let (l, v) = (lagrange[row], coeffs[id as usize]);
                    out[k] += if v == Fr::ONE { l } else { v * l };
                }
            }
        }
    });
    out
}

/// `out[i] = first · base^i`, in parallel chunks.
fn powers_into(out: &mut [Fr], first: Fr, base: Fr) {
    const CHUNK: usize = 1 << 12;
    let step = base.pow(&[CHUNK as u64]);
    let starts: Vec<Fr> = {
        let mut s = Vec::with_capacity(out.len().div_ceil(CHUNK));
        let mut acc = first;
        for _ in 0..out.len().div_ceil(CHUNK) {
            s.push(acc);
            acc *= step;
        }
        s
    };
    out.par_chunks_mut(CHUNK)
        .zip(starts)
        .for_each(|(chunk, mut acc)| {
            for slot in chunk {
                *slot = acc;
                acc *= base;
            }
        });
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    /// u_i(τ) the slow way: interpolate the column over the domain, evaluate by Horner.
    fn column_at_tau(m: &SparseMatrix, col: usize, domain: &Domain, tau: Fr) -> Fr {
        let mut evals = vec![Fr::ZERO; domain.size()];
        for (row, slot) in evals.iter_mut().enumerate().take(m.num_rows()) {
            if let Some((_, v)) = m
                .row(row)
                .unwrap()
                .terms()
                .find(|&(c, _)| c as usize == col)
            {
                *slot = v;
            }
        }
        domain.ifft_in_place(&mut evals).unwrap();
        evals.iter().rev().fold(Fr::ZERO, |acc, c| acc * tau + *c)
    }

    #[test]
    fn key_matches_direct_polynomial_evaluation() {
        let mut rng = ChaCha20Rng::seed_from_u64(5);
        let (r1cs, _) = crate::testing::demo::circuit(5, 2, &mut rng).unwrap();
        let tw = ToxicWaste::random(&mut rng);
        let (pk, _) = generate_parameters_with_toxic_waste(&r1cs, &tw).unwrap();
        let domain = Domain::for_size(r1cs.num_constraints()).unwrap();
        let g1 = G1Projective::generator();
        let g2 = G2Projective::generator();
        let np = r1cs.num_public();
        for i in 0..r1cs.num_variables() {
            let u = column_at_tau(r1cs.a(), i, &domain, tw.tau);
            let v = column_at_tau(r1cs.b(), i, &domain, tw.tau);
            let w = column_at_tau(r1cs.c(), i, &domain, tw.tau);
            assert_eq!(pk.a_query()[i], (g1 * u).to_affine(), "a_query[{i}]");
            assert_eq!(pk.b_g1_query()[i], (g1 * v).to_affine(), "b_g1_query[{i}]");
            assert_eq!(pk.b_g2_query()[i], (g2 * v).to_affine(), "b_g2_query[{i}]");
            let k = tw.beta * u + tw.alpha * v + w;
            if i <= np {
                let expected = g1 * (k * tw.gamma.inverse().unwrap());
                assert_eq!(pk.vk.ic[i], expected.to_affine(), "ic[{i}]");
            } else {
                let expected = g1 * (k * tw.delta.inverse().unwrap());
                assert_eq!(
                    pk.l_query()[i - np - 1],
                    expected.to_affine(),
                    "l_query[{i}]"
                );
            }
        }
        let z = tw.tau.pow(&[domain.size() as u64]) - Fr::ONE;
        let mut t = z * tw.delta.inverse().unwrap();
        assert_eq!(pk.h_query().len(), domain.size() - 1);
        for (j, h) in pk.h_query().iter().enumerate() {
            assert_eq!(*h, (g1 * t).to_affine(), "h_query[{j}]");
            t *= tw.tau;
        }
        assert_eq!(pk.vk.alpha_g1, (g1 * tw.alpha).to_affine());
        assert_eq!(pk.delta_g1, (g1 * tw.delta).to_affine());
        assert_eq!(pk.vk.gamma_g2, (g2 * tw.gamma).to_affine());
    }

    #[test]
    fn degenerate_toxic_waste_is_refused() {
        let mut rng = ChaCha20Rng::seed_from_u64(6);
        let (r1cs, _) = crate::testing::demo::circuit(4, 1, &mut rng).unwrap();
        let mut tw = ToxicWaste::random(&mut rng);
        tw.gamma = Fr::ZERO;
        assert_eq!(
            generate_parameters_with_toxic_waste(&r1cs, &tw).unwrap_err(),
            SetupError::ZeroToxicWaste("gamma")
        );
        tw.gamma = Fr::ONE;
        tw.tau = Domain::for_size(16).unwrap().element(3);
        assert_eq!(
            generate_parameters_with_toxic_waste(&r1cs, &tw).unwrap_err(),
            SetupError::TauInDomain
        );
    }
}
