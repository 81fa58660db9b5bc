//! The heavy steps of a proof behind one trait, so a GPU implementation can replace the CPU one
//! without changing the prover API: the quotient H (NTTs) and the G1/G2 MSMs.

use core::fmt;

use cuzk_field::{Fr, G1Affine, G1Projective, G2Affine, G2Projective};
use cuzk_ntt::Domain;

/// A backend failure (device error, out of memory, bad lengths), with the backend's name.
#[derive(Debug, thiserror::Error)]
#[error("{backend} backend: {source}")]
pub struct BackendError {
    pub backend: &'static str,
    #[source]
    pub source: Box<dyn std::error::Error + Send + Sync>,
}

impl BackendError {
    pub fn new(
        backend: &'static str,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self {
            backend,
            source: source.into(),
        }
    }
}

/// What the prover needs from an engine. Every implementation must return exactly what
/// [`CpuBackend`] returns (the GPU one is checked bit for bit against it).
pub trait ProverBackend: Send + Sync + fmt::Debug {
    fn name(&self) -> &'static str;

    /// The coefficients of H = (A·B − C)/Z (length n; the top one is zero for a satisfied
    /// witness) from the evaluations of A·z, B·z, C·z on `domain` (each of length n). Takes
    /// the vectors by value so an implementation can transform in place or free them early.
    fn quotient(
        &self,
        domain: &Domain,
        a: Vec<Fr>,
        b: Vec<Fr>,
        c: Vec<Fr>,
    ) -> Result<Vec<Fr>, BackendError>;

    /// `Σ scalars[i] · points[i]` in G1; lengths are equal (the prover guarantees it).
    fn msm_g1(&self, points: &[G1Affine], scalars: &[Fr]) -> Result<G1Projective, BackendError>;

    /// `Σ scalars[i] · points[i]` in G2.
    fn msm_g2(&self, points: &[G2Affine], scalars: &[Fr]) -> Result<G2Projective, BackendError>;
}

/// The CPU engine: cuzk-ntt transforms and cuzk-msm's parallel, sparse-aware MSM (rayon).
#[derive(Debug, Clone, Copy, Default)]
pub struct CpuBackend;

impl ProverBackend for CpuBackend {
    fn name(&self) -> &'static str {
        "cpu"
    }

    fn quotient(
        &self,
        domain: &Domain,
        mut a: Vec<Fr>,
        mut b: Vec<Fr>,
        mut c: Vec<Fr>,
    ) -> Result<Vec<Fr>, BackendError> {
        domain
            .quotient_in_place(&mut a, &mut b, &mut c)
            .map_err(|e| BackendError::new("cpu", e))?;
        Ok(a)
    }

    fn msm_g1(&self, points: &[G1Affine], scalars: &[Fr]) -> Result<G1Projective, BackendError> {
        cuzk_msm::cpu::msm(points, scalars).map_err(|e| BackendError::new("cpu", e))
    }

    fn msm_g2(&self, points: &[G2Affine], scalars: &[Fr]) -> Result<G2Projective, BackendError> {
        cuzk_msm::cpu::msm(points, scalars).map_err(|e| BackendError::new("cpu", e))
    }
}
