//! The CPU engine behind a simulated device: staged witnesses and evaluations are copied into
//! buffers of a [`Vram`] (normally over [`cuzk_vram::FakeBackend`], host memory with fault
//! injection) and read back by the CPU MSMs and quotient. So a proving engine drives the same
//! data flow, budgets and allocation failures as on a GPU, on a machine without one.

use std::sync::Arc;

use cuzk_field::Fr;
use cuzk_ntt::Domain;
use cuzk_vram::{DeviceBuffer, Reservation, Vram};

use crate::backend::{
    BackendError, DeviceWitness, Evaluations, HeldCircuit, HeldData, MsmValue, ProverBackend,
    QuotientMsm, Stage, StagedData, StagedEvaluations, StagedWitness, host_quotient_msm,
    host_witness_msm,
};
use crate::keys::KeyRef;
use crate::keys::Query;
use crate::r1cs::R1cs;
use crate::witness_map;

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

    /// Page-locked (simulated) host buffers when the pinned budget has room.
    fn pinned_evaluation_buffers(&self, n: usize) -> Option<Evaluations> {
        let set = self.vram.pinned_many([n; 3]).ok()?;
        Some(Evaluations::pinned_or_heap(Some(set), n))
    }

    /// As a GPU's: a proof without a pinned set stages a, b, c without a host set of its own
    /// ([`ProverBackend::map_and_stage`]'s provided method, whose brief host copy the engine
    /// does not charge: it stands for the GPU's staging slots).
    fn maps_through_staging(&self) -> bool {
        true
    }

    /// Holds the system itself, charging the simulated budget what a GPU's copy takes.
    fn hold_circuit(
        &self,
        r1cs: &Arc<R1cs>,
        keep_free: u64,
    ) -> Result<Option<HeldCircuit>, BackendError> {
        let room = HeldCircuit::room(&self.vram, r1cs, keep_free)
            .map_err(|e| BackendError::new(NAME, e))?;
        Ok(room.map(|room| {
            let bytes = room.bytes();
            let data = HeldData::Simulated {
                r1cs: r1cs.clone(),
                _room: room,
            };
            HeldCircuit::new(data, r1cs, bytes)
        }))
    }

    /// The CPU's witness map, its a, b, c copied into the simulated device's memory.
    fn stage_and_evaluate(
        &self,
        circuit: &HeldCircuit,
        z: &[Fr],
        n: usize,
        mut room: Reservation,
    ) -> Result<(StagedWitness, StagedEvaluations), BackendError> {
        circuit.check_witness(NAME, z, n)?;
        let HeldData::Simulated { r1cs, .. } = &circuit.data else {
            return Err(BackendError::invalid(NAME, "the circuit is held by a GPU"));
        };
        let witness =
            cuzk_vram::Vram::bytes_for::<Fr>(z.len()).map_err(|e| BackendError::new(NAME, e))?;
        let abc_room = room
            .split(room.bytes().saturating_sub(witness))
            .map_err(|e| BackendError::new(NAME, e))?;
        let staged = self.stage_witness(z, room)?;
        let mut abc = Evaluations::pinned_or_heap(None, n);
        let start = std::time::Instant::now();
        witness_map(r1cs, z, &mut abc).map_err(|e| BackendError::from_witness(NAME, e))?;
        let mut abc = self.stage_evaluations(abc, abc_room)?;
        abc.made_in = Some(start.elapsed());
        Ok((staged, abc))
    }

    fn reserve(&self, _what: Stage, bytes: u64) -> Result<Reservation, BackendError> {
        self.vram
            .reserve(bytes)
            .map_err(|e| BackendError::new(NAME, e))
    }

    fn stage_witness(
        &self,
        z: &[Fr],
        mut room: Reservation,
    ) -> Result<StagedWitness, BackendError> {
        let device = self.upload(&mut room, z)?;
        Ok(StagedWitness {
            device: Some(DeviceWitness::Simulated(device)),
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
        let Some(DeviceWitness::Simulated(d)) = &staged.device else {
            return Err(BackendError::invalid(
                NAME,
                "the witness was not staged here",
            ));
        };
        host_witness_msm(key.host(NAME)?, &download(d)?, query, offset)
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
            made_in: None,
        })
    }

    fn quotient_msm(
        &self,
        domain: &Domain,
        abc: StagedEvaluations,
        key: KeyRef<'_>,
    ) -> Result<QuotientMsm, BackendError> {
        let pk = key.host(NAME)?;
        let StagedData::Device([a, b, c]) = &abc.data else {
            return Err(BackendError::invalid(
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
        host_quotient_msm(domain, host, pk.h_query())
    }
}
