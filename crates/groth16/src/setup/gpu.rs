//! Parameter generation on a GPU: the same proving key as
//! [`generate_parameters_with_toxic_waste`](crate::setup::generate_parameters_with_toxic_waste)
//! (bit-identical points), with the fixed-base multiplications on the device.
//!
//! The scalar side (Lagrange coefficients at τ, u/v/w at τ; O(nnz)) is the CPU code. The host
//! builds the window table of each generator (the CPU setup's table, w ≤ 12 so it stays small
//! enough for L2), uploads it once, and streams the scalars through in chunks sized to the VRAM
//! budget: per chunk one kernel computes `s·G` in XYZZ with mixed additions, a second converts
//! to affine with one inversion per 32 points (`kernels/groth16/setup.cu`).

use std::time::Instant;

use cuzk_field::{Fr, G1Affine, G1Projective, G2Affine, G2Projective};
use cuzk_gpu::{DeviceBuffer, Gpu, GpuError, PinnedBuffer, Stream};
use cuzk_msm::gpu::GpuMsm;
use cuzk_msm::kernels::Curve;

use super::fixed_base::{AffinePoint, FixedBaseTable, best_window};
use crate::gpu::MemoryPlan;
use crate::keys::{HeldKey, ProvingKey};
use crate::r1cs::R1cs;
use crate::setup::{SetupError, SetupTimings, ToxicWaste, assemble, key_scalars, single_points};
use crate::timing::timed;
use crate::{GpuBackend, Query};

/// Largest window on the device: 22 windows of 4095 points (8.6 MB for G1) stay in L2;
/// w = 16 would save 6 of 22 additions but make every table read a DRAM access.
const MAX_GPU_WINDOW: usize = 12;
/// Fraction (percent) of the available VRAM budget the chunk buffers may take.
const BUDGET_PERCENT: u64 = 80;
/// Upper bound on one chunk, so the host copies interleave with kernels at a useful grain.
const MAX_CHUNK: usize = 1 << 24;

/// A proving key for `r1cs` from `tw`, with the G1 and G2 fixed-base multiplications on `gpu`.
/// Bit-identical to the CPU key for the same toxic waste. On error every device buffer is freed.
pub fn generate_parameters_gpu(
    gpu: &Gpu,
    r1cs: &R1cs,
    tw: &ToxicWaste,
) -> Result<(ProvingKey, SetupTimings), SetupError> {
    let _span = tracing::info_span!(
        "setup_gpu",
        constraints = r1cs.num_constraints(),
        variables = r1cs.num_variables()
    )
    .entered();
    let start = Instant::now();
    let ks = key_scalars(r1cs, tw)?;
    let stream = gpu.stream("setup")?;
    let (g1_points, t_g1) = timed("setup.g1", || {
        batch_mul::<G1Affine>(gpu, &stream, Curve::G1, G1Projective::generator(), &ks.g1)
    });
    let g1_points = g1_points?;
    let (b_g2_query, t_g2) = timed("setup.g2", || {
        batch_mul::<G2Affine>(gpu, &stream, Curve::G2, G2Projective::generator(), &ks.b_g2)
    });
    let b_g2_query = b_g2_query?;
    let pk = assemble(tw, ks.num_instance, ks.num_variables, g1_points, b_g2_query);
    let timings = ks.timings(t_g1, t_g2, start);
    tracing::info!(
        total_ms = timings.total.as_secs_f64() * 1e3,
        "GPU setup done"
    );
    Ok((pk, timings))
}

/// Window for `count` products on the device.
fn gpu_window(count: usize) -> usize {
    best_window(count).min(MAX_GPU_WINDOW)
}

/// Scalars per chunk: what fits in `BUDGET_PERCENT` of the available budget (scalar, XYZZ
/// and affine point per product), at least one, at most `MAX_CHUNK` and `count`.
fn chunk_len(available: u64, count: usize, group: Curve) -> usize {
    let per = (32 + 4 * crate::kernels::xyzz_words(group) + group.affine_bytes()) as u64;
    let fit = (available / 100 * BUDGET_PERCENT / per).max(1);
    usize::try_from(fit)
        .unwrap_or(usize::MAX)
        .min(MAX_CHUNK)
        .min(count)
}

/// `s · G` for every scalar, affine, computed on `gpu`.
fn batch_mul<P: AffinePoint>(
    gpu: &Gpu,
    stream: &Stream,
    group: Curve,
    generator: P::Projective,
    scalars: &[Fr],
) -> Result<Vec<P>, GpuError> {
    if scalars.is_empty() {
        return Ok(Vec::new());
    }
    let table = DeviceTable::new(gpu, generator, scalars.len())?;
    table.to_host(gpu, stream, group, scalars)
}

/// A generator's window table on the device.
struct DeviceTable<P: AffinePoint> {
    points: DeviceBuffer<P>,
    window: usize,
}

impl<P: AffinePoint> DeviceTable<P> {
    /// The table of `generator` with the best window for `count` products.
    fn new(gpu: &Gpu, generator: P::Projective, count: usize) -> Result<Self, GpuError> {
        Self::with_window(gpu, generator, gpu_window(count))
    }

    fn with_window(gpu: &Gpu, generator: P::Projective, window: usize) -> Result<Self, GpuError> {
        let table = FixedBaseTable::<P>::with_window(generator, window);
        let points = gpu.vram().from_host(table.points())?;
        Ok(Self { points, window })
    }

    /// The products of `scalars`, downloaded into a host vector.
    fn to_host(
        &self,
        gpu: &Gpu,
        stream: &Stream,
        group: Curve,
        scalars: &[Fr],
    ) -> Result<Vec<P>, GpuError> {
        let chunk = chunk_len(gpu.vram().budget().available(), scalars.len(), group);
        self.to_host_in(gpu, stream, group, scalars, chunk)
    }

    /// [`Self::to_host`] in chunks of `chunk` products.
    fn to_host_in(
        &self,
        gpu: &Gpu,
        stream: &Stream,
        group: Curve,
        scalars: &[Fr],
        chunk: usize,
    ) -> Result<Vec<P>, GpuError> {
        let mut out = vec![P::default(); scalars.len()];
        self.download_into(gpu, stream, group, scalars, chunk, &mut out)?;
        Ok(out)
    }

    /// The products of `scalars` in page-locked host memory (from which an MSM streams them).
    fn to_pinned(
        &self,
        gpu: &Gpu,
        stream: &Stream,
        group: Curve,
        scalars: &[Fr],
    ) -> Result<PinnedBuffer<P>, GpuError> {
        let mut out = gpu.vram().pinned::<P>(scalars.len())?;
        let chunk = chunk_len(gpu.vram().budget().available(), scalars.len(), group);
        self.download_into(gpu, stream, group, scalars, chunk, &mut out)?;
        Ok(out)
    }

    /// The products of `scalars` into `out` (as long), `chunk` at a time.
    fn download_into(
        &self,
        gpu: &Gpu,
        stream: &Stream,
        group: Curve,
        scalars: &[Fr],
        chunk: usize,
        out: &mut [P],
    ) -> Result<(), GpuError> {
        // Sized to the chunk; only the last (shorter) chunk reallocates it.
        let mut d_out: Option<DeviceBuffer<P>> = None;
        self.in_chunks(gpu, stream, group, scalars, chunk, |xyzz, at, n| {
            let mut d = match d_out.take() {
                Some(d) if d.len() == n => d,
                other => {
                    drop(other);
                    gpu.alloc::<P>(n)?
                }
            };
            crate::kernels::batch_to_affine(gpu, stream, group, xyzz, &mut d, 0)?;
            d.copy_to_host_on(&mut out[at..at + n], stream.cuda())?;
            d_out = Some(d);
            Ok(())
        })
    }

    /// The products of `scalars` in a device buffer that never leaves the device (`None` for
    /// no scalars); complete when this returns.
    fn to_device(
        &self,
        gpu: &Gpu,
        stream: &Stream,
        group: Curve,
        scalars: &[Fr],
    ) -> Result<Option<DeviceBuffer<P>>, GpuError> {
        if scalars.is_empty() {
            return Ok(None);
        }
        let out = gpu.alloc::<P>(scalars.len())?;
        let chunk = chunk_len(gpu.vram().budget().available(), scalars.len(), group);
        self.to_device_in(gpu, stream, group, scalars, chunk, out)
    }

    /// [`Self::to_device`] into `out` (as long as `scalars`) in chunks of `chunk` products.
    fn to_device_in(
        &self,
        gpu: &Gpu,
        stream: &Stream,
        group: Curve,
        scalars: &[Fr],
        chunk: usize,
        mut out: DeviceBuffer<P>,
    ) -> Result<Option<DeviceBuffer<P>>, GpuError> {
        self.in_chunks(gpu, stream, group, scalars, chunk, |xyzz, at, _| {
            crate::kernels::batch_to_affine(gpu, stream, group, xyzz, &mut out, at)
        })?;
        stream.synchronize()?;
        Ok(Some(out))
    }

    /// Runs the fixed-base products of `scalars`, `chunk` at a time, handing each chunk's XYZZ
    /// points, its offset and its length to `store`.
    fn in_chunks(
        &self,
        gpu: &Gpu,
        stream: &Stream,
        group: Curve,
        scalars: &[Fr],
        chunk: usize,
        mut store: impl FnMut(&DeviceBuffer<u32>, usize, usize) -> Result<(), GpuError>,
    ) -> Result<(), GpuError> {
        let words = crate::kernels::xyzz_words(group);
        // Sized to the chunk; only the last (shorter) chunk reallocates them.
        let mut bufs: Option<(DeviceBuffer<Fr>, DeviceBuffer<u32>)> = None;
        for (k, s) in scalars.chunks(chunk).enumerate() {
            let (mut d_scalars, mut d_xyzz) = match bufs.take() {
                Some(b) if b.0.len() == s.len() => b,
                other => {
                    drop(other);
                    (
                        gpu.alloc::<Fr>(s.len())?,
                        gpu.alloc::<u32>(s.len() * words)?,
                    )
                }
            };
            d_scalars.copy_from_host_on(s, stream.cuda())?;
            crate::kernels::fixed_base_mul(
                gpu,
                stream,
                group,
                &self.points,
                self.window as u32,
                &d_scalars,
                &mut d_xyzz,
            )?;
            store(&d_xyzz, k * chunk, s.len())?;
            bufs = Some((d_scalars, d_xyzz));
        }
        Ok(())
    }
}

/// One query's points made for a held key: resident on the device when `plan` keeps the
/// query resident, else in page-locked host memory streamed on every MSM (`None`: no points).
fn place<P: AffinePoint + cuzk_msm::MsmPoint>(
    gpu: &Gpu,
    stream: &Stream,
    table: &DeviceTable<P>,
    plan: &MemoryPlan,
    q: Query,
    scalars: &[Fr],
) -> Result<Option<GpuMsm<P>>, SetupError> {
    if scalars.is_empty() {
        return Ok(None);
    }
    let group = Curve::from(P::GROUP);
    let msm = if plan.is_resident(q) {
        let points = table.to_device(gpu, stream, group, scalars)?;
        points.map(|p| GpuMsm::from_device(gpu, p)).transpose()
    } else {
        let points = table.to_pinned(gpu, stream, group, scalars)?;
        GpuMsm::streamed(gpu, points).map(Some)
    };
    msm.map_err(|e| SetupError::Held(e.to_string()))
}

impl GpuBackend {
    /// The proving key of `r1cs` made on `gpu` and held by the returned backend: each query's
    /// points go from the setup kernels into a resident MSM context, or, for the queries a
    /// proof's memory plan cannot keep resident (a VRAM cap), into page-locked host memory the
    /// context owns and streams from; there is no other host copy, so a key larger than host
    /// memory beside its circuit and its pinned copy (72 GiB at 2^27) can prove. The returned
    /// [`HeldKey`] has the verifying key, the single points and the shape: only this backend
    /// proves it. The points are those of [`generate_parameters_gpu`] for the same toxic waste.
    pub fn generate_key(
        gpu: &Gpu,
        r1cs: &R1cs,
        tw: &ToxicWaste,
    ) -> Result<(Self, HeldKey, SetupTimings), SetupError> {
        let _span = tracing::info_span!(
            "setup_on_device",
            constraints = r1cs.num_constraints(),
            variables = r1cs.num_variables()
        )
        .entered();
        let start = Instant::now();
        let mut ks = key_scalars(r1cs, tw)?;
        let (m, ni) = (ks.num_variables, ks.num_instance);
        let mut g1s = std::mem::take(&mut ks.g1);
        let b_g2 = std::mem::take(&mut ks.b_g2);
        let n = g1s.len() - 3 * m + 1;
        let lens = [
            (Query::A, m),
            (Query::BG1, m),
            (Query::H, n - 1),
            (Query::L, m - ni),
            (Query::BG2, m),
        ];
        // The queries a proof's plan keeps resident go to device memory; the rest to
        // page-locked host memory the backend owns and streams from.
        let sm = gpu.info().sm_count as usize;
        let plan = MemoryPlan::new(n, &lens, gpu.vram().budget().available(), sm)
            .map_err(|e| SetupError::Held(e.to_string()))?;
        let stream = gpu.stream("setup")?;
        let (g1, t_g1) = timed("setup.g1", || -> Result<_, SetupError> {
            let table = DeviceTable::<G1Affine>::new(gpu, G1Projective::generator(), g1s.len())?;
            // From the tail of [a | b_g1 | ic | l | h], each query's scalars freed once made.
            let tail = |g1s: &mut Vec<Fr>, q: Query, from: usize| -> Result<_, SetupError> {
                let made = place(gpu, &stream, &table, &plan, q, &g1s[from..])?;
                g1s.truncate(from);
                g1s.shrink_to_fit();
                Ok(made)
            };
            let h = tail(&mut g1s, Query::H, 3 * m)?;
            let l = tail(&mut g1s, Query::L, 2 * m + ni)?;
            let ic = table.to_host(gpu, &stream, Curve::G1, &g1s[2 * m..])?;
            g1s.truncate(2 * m);
            let b = tail(&mut g1s, Query::BG1, m)?;
            let a = tail(&mut g1s, Query::A, 0)?;
            // In the order of the backend's G1 queries: A, B, H, L.
            Ok((ic, [a, b, h, l]))
        });
        let (ic, g1) = g1?;
        let (g2, t_g2) = timed("setup.g2", || -> Result<_, SetupError> {
            let table = DeviceTable::<G2Affine>::new(gpu, G2Projective::generator(), b_g2.len())?;
            place(gpu, &stream, &table, &plan, Query::BG2, &b_g2)
        });
        drop(b_g2);
        let g2 = g2?;
        let (vk, beta_g1, delta_g1) = single_points(tw, ic);
        let pk = HeldKey::new(vk, beta_g1, delta_g1, m, m - ni, n);
        let backend = Self::holding(gpu.clone(), pk.identity(), g1, g2);
        let timings = ks.timings(t_g1, t_g2, start);
        tracing::info!(
            total_ms = timings.total.as_secs_f64() * 1e3,
            resident_bytes = backend.resident_bytes(),
            "key made and held on the device"
        );
        Ok((backend, pk, timings))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    /// Several chunks with a shorter last one (buffers reallocated), zero and small scalars,
    /// and every window width the device path can pick, against blst.
    #[test]
    #[ignore = "gpu"]
    fn gpu_fixed_base_chunks_match_blst() {
        let gpu = Gpu::first().expect("gpu tests need an NVIDIA GPU");
        let stream = gpu.stream("setup-test").unwrap();
        let mut rng = ChaCha20Rng::seed_from_u64(11);
        let mut scalars: Vec<Fr> = (0..2500).map(|_| Fr::random(&mut rng)).collect();
        scalars[0] = Fr::ZERO;
        scalars[1] = Fr::ONE;
        scalars[2] = -Fr::ONE;
        scalars[1000] = Fr::ZERO;
        scalars[2499] = Fr::ZERO;
        let g1 = G1Projective::generator();
        for window in [1, 5, 8, 12] {
            let table = DeviceTable::<G1Affine>::with_window(&gpu, g1, window).unwrap();
            let out = table
                .to_host_in(&gpu, &stream, Curve::G1, &scalars, 1000)
                .unwrap();
            for (i, (s, p)) in scalars.iter().zip(&out).enumerate() {
                assert_eq!(*p, (g1 * *s).to_affine(), "G1 window {window} scalar {i}");
            }
            // Into one device buffer at each chunk's offset: the same points.
            let d_out = gpu.alloc::<G1Affine>(scalars.len()).unwrap();
            let held = table
                .to_device_in(&gpu, &stream, Curve::G1, &scalars, 1000, d_out)
                .unwrap()
                .unwrap();
            assert_eq!(
                held.to_vec().unwrap(),
                out,
                "G1 window {window} on the device"
            );
        }
        let g2 = G2Projective::generator();
        let table = DeviceTable::<G2Affine>::with_window(&gpu, g2, 7).unwrap();
        let few = &scalars[..700];
        let out = table
            .to_host_in(&gpu, &stream, Curve::G2, few, 300)
            .unwrap();
        for (i, (s, p)) in few.iter().zip(&out).enumerate() {
            assert_eq!(*p, (g2 * *s).to_affine(), "G2 scalar {i}");
        }
        let d_out = gpu.alloc::<G2Affine>(few.len()).unwrap();
        let held = table
            .to_device_in(&gpu, &stream, Curve::G2, few, 300, d_out)
            .unwrap()
            .unwrap();
        assert_eq!(held.to_vec().unwrap(), out, "G2 on the device");
    }

    #[test]
    fn chunks_fit_the_budget() {
        assert_eq!(chunk_len(0, 10, Curve::G1), 1);
        assert_eq!(chunk_len(u64::MAX, 10, Curve::G2), 10);
        assert_eq!(chunk_len(u64::MAX, usize::MAX, Curve::G1), MAX_CHUNK);
        // G1: 32 + 192 + 96 = 320 bytes per product.
        assert_eq!(chunk_len(320_000, 1 << 20, Curve::G1), 800);
        assert_eq!(gpu_window(1 << 28), MAX_GPU_WINDOW);
        assert!(gpu_window(16) < MAX_GPU_WINDOW);
    }
}
