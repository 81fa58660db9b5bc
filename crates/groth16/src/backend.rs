//! The heavy steps of a proof behind one trait, so a GPU implementation can replace the CPU one
//! without changing the prover API: the quotient H (NTTs) and the G1/G2 MSMs.

use core::fmt;

use core::str::FromStr;

use cuzk_field::{Fr, G1Affine, G1Projective, G2Affine, G2Projective};
use cuzk_ntt::Domain;

use crate::keys::ProvingKey;

/// Which proving-key query an MSM runs over, so a backend can keep each query's points
/// resident on a device between proofs. `BG2` is the G2 query; the rest are G1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Query {
    A,
    BG1,
    BG2,
    H,
    L,
}

impl Query {
    pub const ALL: [Query; 5] = [Query::A, Query::BG1, Query::BG2, Query::H, Query::L];

    pub fn name(self) -> &'static str {
        match self {
            Query::A => "A",
            Query::BG1 => "B (G1)",
            Query::BG2 => "B (G2)",
            Query::H => "H",
            Query::L => "L",
        }
    }
}

impl fmt::Display for Query {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

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

    /// A one-line description for users (the GPU backend names its device).
    fn describe(&self) -> String {
        self.name().to_owned()
    }

    /// Called by the prover once per proof, before any other call, with the key and the
    /// domain size: a backend plans its memory here and may load the key's points (a no-op
    /// when the same key is already loaded).
    fn prepare(&self, pk: &ProvingKey, domain_size: usize) -> Result<(), BackendError> {
        let _ = (pk, domain_size);
        Ok(())
    }

    /// Highest device memory in use so far, in bytes (None for host-only backends).
    fn device_peak(&self) -> Option<u64> {
        None
    }

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

    /// `Σ scalars[i] · points[i]` in G1 over the key query `query`; lengths are equal (the
    /// prover guarantees it). `query` only lets a backend reuse points it already holds.
    fn msm_g1(
        &self,
        query: Query,
        points: &[G1Affine],
        scalars: &[Fr],
    ) -> Result<G1Projective, BackendError>;

    /// `Σ scalars[i] · points[i]` in G2 (the `BG2` query).
    fn msm_g2(
        &self,
        query: Query,
        points: &[G2Affine],
        scalars: &[Fr],
    ) -> Result<G2Projective, BackendError>;
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

    fn msm_g1(
        &self,
        _query: Query,
        points: &[G1Affine],
        scalars: &[Fr],
    ) -> Result<G1Projective, BackendError> {
        cuzk_msm::cpu::msm(points, scalars).map_err(|e| BackendError::new("cpu", e))
    }

    fn msm_g2(
        &self,
        _query: Query,
        points: &[G2Affine],
        scalars: &[Fr],
    ) -> Result<G2Projective, BackendError> {
        cuzk_msm::cpu::msm(points, scalars).map_err(|e| BackendError::new("cpu", e))
    }
}

/// Which engine proves: `Auto` takes the GPU when a device is present and the kernels are
/// built, otherwise the CPU; `Gpu` fails (with the reason) rather than falling back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BackendChoice {
    #[default]
    Auto,
    Cpu,
    Gpu,
}

impl FromStr for BackendChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "auto" => Ok(Self::Auto),
            "cpu" => Ok(Self::Cpu),
            "gpu" => Ok(Self::Gpu),
            _ => Err(format!("unknown backend {s:?} (expected auto, cpu or gpu)")),
        }
    }
}

/// The GPU backend could not be opened; says why (no driver, no device, kernels not built).
#[derive(Debug, thiserror::Error)]
/// (The reason is in the message, not a source, so error chains do not print it twice.)
#[error("the GPU backend is not available: {0}")]
pub struct GpuUnavailable(pub cuzk_gpu::GpuError);

/// Resolves a choice to a backend (see [`BackendChoice`]).
pub fn select_backend(choice: BackendChoice) -> Result<Box<dyn ProverBackend>, GpuUnavailable> {
    match choice {
        BackendChoice::Cpu => Ok(Box::new(CpuBackend)),
        BackendChoice::Gpu => Ok(Box::new(open_gpu()?)),
        BackendChoice::Auto => {
            let b: Box<dyn ProverBackend> = match open_gpu() {
                Ok(g) => Box::new(g),
                Err(e) => {
                    tracing::info!(reason = %e, "using the CPU backend");
                    Box::new(CpuBackend)
                }
            };
            Ok(b)
        }
    }
}

fn open_gpu() -> Result<crate::gpu::GpuBackend, GpuUnavailable> {
    if !cuzk_gpu::driver_present() {
        return Err(GpuUnavailable(cuzk_gpu::GpuError::NoDriver));
    }
    let gpu = cuzk_gpu::Gpu::first().map_err(GpuUnavailable)?;
    if !cuzk_gpu::kernels_built() {
        return Err(GpuUnavailable(cuzk_gpu::GpuError::KernelsNotBuilt));
    }
    Ok(crate::gpu::GpuBackend::new(gpu))
}
