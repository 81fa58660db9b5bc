//! A circuit's A, B, C in device memory, so that a proof's witness map runs on the GPU
//! (`kernels/groth16/evaluate.cu`): the host then neither evaluates a, b, c nor copies them to
//! the device, only the witness.

use std::sync::Mutex;

use cuzk_field::Fr;
use cuzk_gpu::{DeviceBuffer, Gpu, GpuError, Reservation, Stream, Vram};

use crate::kernels::{DeviceMatrix, evaluate, first_unsatisfied};
use crate::r1cs::R1cs;

/// The three matrices of one R1CS on one device, and the one-word flag of the row check.
#[derive(Debug)]
pub(crate) struct DeviceCircuit {
    matrices: [DeviceMatrix; 3],
    flag: Mutex<DeviceBuffer<u32>>,
    rows: usize,
    /// The budget its buffers were charged to (they live on that device only).
    budget: cuzk_gpu::Budget,
}

impl DeviceCircuit {
    /// Device bytes `r1cs` takes this way, or `None` when a matrix does not fit the kernel's
    /// 32-bit offsets.
    pub(crate) fn bytes_for(r1cs: &R1cs) -> Option<u64> {
        let mut bytes = Vram::bytes_for::<u32>(1).ok()?;
        for m in [r1cs.a(), r1cs.b(), r1cs.c()] {
            bytes += DeviceMatrix::bytes_for(m)?;
        }
        Some(bytes)
    }

    /// `r1cs` copied to `gpu` into `room` (at least [`Self::bytes_for`] bytes).
    pub(crate) fn upload(gpu: &Gpu, room: &mut Reservation, r1cs: &R1cs) -> Result<Self, GpuError> {
        let [a, b, c] = [r1cs.a(), r1cs.b(), r1cs.c()];
        let matrices = [
            DeviceMatrix::upload(gpu, room, a)?,
            DeviceMatrix::upload(gpu, room, b)?,
            DeviceMatrix::upload(gpu, room, c)?,
        ];
        let flag = gpu.vram().alloc_in::<u32>(room, 1)?;
        Ok(Self {
            matrices,
            flag: Mutex::new(flag),
            rows: r1cs.num_constraints(),
            budget: gpu.vram().budget().clone(),
        })
    }

    /// Whether its buffers are on `gpu`.
    pub(crate) fn is_on(&self, gpu: &Gpu) -> bool {
        self.budget.same_as(gpu.vram().budget())
    }

    /// a, b, c = A·z, B·z, C·z into `out` (each the domain's length, zero past the rows) on
    /// `stream`, then the lowest row with a·b ≠ c, if any (waits for `stream`).
    pub(crate) fn evaluate(
        &self,
        gpu: &Gpu,
        stream: &Stream,
        z: &DeviceBuffer<Fr>,
        out: &mut [DeviceBuffer<Fr>; 3],
    ) -> Result<Option<usize>, GpuError> {
        for (m, o) in self.matrices.iter().zip(out.iter_mut()) {
            evaluate(gpu, stream, m, z, o)?;
        }
        let mut flag = self.flag.lock().unwrap_or_else(|p| p.into_inner());
        let [a, b, c] = out;
        first_unsatisfied(gpu, stream, [a, b, c], self.rows, &mut flag)
    }
}
