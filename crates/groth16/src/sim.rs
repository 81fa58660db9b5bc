//! The CPU engine behind a simulated device: staged witnesses and evaluations are copied into
//! buffers of a [`Vram`] (normally over [`cuzk_vram::FakeBackend`], host memory with fault
//! injection) and read back by the CPU MSMs and quotient. So a proving engine drives the same
//! data flow, budgets and allocation failures as on a GPU, on a machine without one.

use cuzk_field::{Fr, G1Affine, G1Projective, G2Affine, G2Projective};
use cuzk_ntt::Domain;
use cuzk_vram::{DeviceBuffer, PinnedBuffer, Reservation, Vram};

use crate::backend::{
    BackendError, CpuBackend, Evaluations, MsmValue, ProverBackend, Query, QuotientMsm, StagedData,
    StagedEvaluations, StagedWitness, host_witness_msm,
};
use crate::keys::ProvingKey;

const NAME: &str = "cpu";

/// [`CpuBackend`] with its staged data in a simulated device memory (module docs).
#[derive(Debug, Clone)]
pub struct SimBackend {
    vram: Vram,
}

impl SimBackend {
    pub fn new(vram: Vram) -> Self {
        Self { vram }
    }

    pub fn vram(&self) -> &Vram {
        &self.vram
    }

    fn upload(
        &self,
        room: &mut Reservation,
        data: &[Fr],
    ) -> Result<DeviceBuffer<Fr>, BackendError> {
        let mut d = self
            .vram
            .alloc_in::<Fr>(room, data.len())
            .map_err(|e| BackendError::new(NAME, e))?;
        d.copy_from_host(data)
            .map_err(|e| BackendError::new(NAME, e))?;
        Ok(d)
    }
}

fn download(d: &DeviceBuffer<Fr>) -> Result<Vec<Fr>, BackendError> {
    d.to_vec().map_err(|e| BackendError::new(NAME, e))
}

impl ProverBackend for SimBackend {
    fn name(&self) -> &'static str {
        NAME
    }

    fn describe(&self) -> String {
        format!(
            "cpu (simulated device memory, budget {:.1} MiB)",
            self.vram.budget().total() as f64 / f64::from(1u32 << 20)
        )
    }

    fn device_peak(&self) -> Option<u64> {
        Some(self.vram.budget().peak())
    }

    /// Page-locked (simulated) host buffers when the pinned budget has room, else the heap.
    fn evaluation_buffers(&self, n: usize) -> Result<Evaluations, BackendError> {
        let pinned = || -> Option<[PinnedBuffer<Fr>; 3]> {
            Some([
                self.vram.pinned(n).ok()?,
                self.vram.pinned(n).ok()?,
                self.vram.pinned(n).ok()?,
            ])
        };
        Ok(Evaluations::pinned_or_heap(pinned(), n))
    }

    fn quotient(&self, domain: &Domain, abc: Evaluations) -> Result<Vec<Fr>, BackendError> {
        CpuBackend.quotient(domain, abc)
    }

    fn stage_witness(
        &self,
        z: &[Fr],
        mut room: Reservation,
    ) -> Result<StagedWitness, BackendError> {
        let device = self.upload(&mut room, z)?;
        Ok(StagedWitness {
            device: Some(device),
            _room: room,
        })
    }

    fn staged_msm(
        &self,
        pk: &ProvingKey,
        _z: &[Fr],
        staged: &StagedWitness,
        query: Query,
        offset: usize,
    ) -> Result<MsmValue, BackendError> {
        let Some(d) = &staged.device else {
            return Err(BackendError::new(NAME, "the witness was not staged here"));
        };
        host_witness_msm(self, pk, &download(d)?, query, offset)
    }

    fn stage_evaluations(
        &self,
        abc: Evaluations,
        mut room: Reservation,
    ) -> Result<StagedEvaluations, BackendError> {
        let a = self.upload(&mut room, &abc.a)?;
        let b = self.upload(&mut room, &abc.b)?;
        let c = self.upload(&mut room, &abc.c)?;
        Ok(StagedEvaluations {
            data: StagedData::Device([a, b, c]),
            _room: room,
        })
    }

    fn staged_quotient_msm(
        &self,
        domain: &Domain,
        abc: StagedEvaluations,
        h_query: &[G1Affine],
    ) -> Result<QuotientMsm, BackendError> {
        let StagedData::Device([a, b, c]) = &abc.data else {
            return Err(BackendError::new(
                NAME,
                "the evaluations were not staged here",
            ));
        };
        let host = Evaluations {
            a: download(a)?.into(),
            b: download(b)?.into(),
            c: download(c)?.into(),
        };
        drop(abc);
        self.quotient_msm(domain, host, h_query)
    }

    fn msm_g1(
        &self,
        query: Query,
        points: &[G1Affine],
        scalars: &[Fr],
    ) -> Result<G1Projective, BackendError> {
        CpuBackend.msm_g1(query, points, scalars)
    }

    fn msm_g2(
        &self,
        query: Query,
        points: &[G2Affine],
        scalars: &[Fr],
    ) -> Result<G2Projective, BackendError> {
        CpuBackend.msm_g2(query, points, scalars)
    }
}
