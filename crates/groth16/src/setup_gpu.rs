//! Parameter generation on a GPU: the same proving key as
//! [`generate_parameters_with_toxic_waste`](crate::setup::generate_parameters_with_toxic_waste)
//! (bit-identical points), with the fixed-base multiplications on the device.
//!
//! The scalar side (Lagrange coefficients at τ, u/v/w at τ; O(nnz)) is the CPU code. The host
//! builds the window table of each generator (the CPU setup's table, w ≤ 12 so it stays small
//! enough for L2), uploads it once, and streams the scalars through in chunks sized to the VRAM
//! budget: per chunk one kernel computes `s·G` in XYZZ with mixed additions, a second converts
//! to affine with one inversion per 32 points (`kernels/setup.cu`).

use std::time::Instant;

use cuzk_field::{Fr, G1Affine, G1Projective, G2Affine, G2Projective};
use cuzk_gpu::{DeviceBuffer, Gpu, GpuError, Stream};
use cuzk_msm::kernels::Curve;

use crate::fixed_base::{AffinePoint, FixedBaseTable, best_window};
use crate::keys::ProvingKey;
use crate::r1cs::R1cs;
use crate::setup::{SetupError, SetupTimings, ToxicWaste, assemble, key_scalars};
use crate::timing::timed;

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
    let timings = SetupTimings {
        lagrange: ks.t_lagrange,
        qap_at_tau: ks.t_qap,
        g1: t_g1,
        g2: t_g2,
        total: start.elapsed(),
    };
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
    let mut out = vec![P::default(); scalars.len()];
    if scalars.is_empty() {
        return Ok(out);
    }
    let window = gpu_window(scalars.len());
    let table = FixedBaseTable::<P>::with_window(generator, window);
    let d_table = gpu.vram().from_host(table.points())?;
    drop(table);
    let chunk = chunk_len(gpu.vram().budget().available(), scalars.len(), group);
    in_chunks(
        gpu, stream, group, &d_table, window, scalars, chunk, &mut out,
    )?;
    Ok(out)
}

/// The products of `scalars` into `out` (same length), `chunk` scalars per kernel pair.
#[allow(clippy::too_many_arguments)]
fn in_chunks<P: AffinePoint>(
    gpu: &Gpu,
    stream: &Stream,
    group: Curve,
    d_table: &DeviceBuffer<P>,
    window: usize,
    scalars: &[Fr],
    chunk: usize,
    out: &mut [P],
) -> Result<(), GpuError> {
    let words = crate::kernels::xyzz_words(group);
    // Buffers are sized to the chunk; only the last (shorter) chunk reallocates them.
    let mut bufs: Option<(DeviceBuffer<Fr>, DeviceBuffer<u32>, DeviceBuffer<P>)> = None;
    for (s, o) in scalars.chunks(chunk).zip(out.chunks_mut(chunk)) {
        let (d_scalars, d_xyzz, d_out) = match bufs.take() {
            Some(b) if b.0.len() == s.len() => b,
            other => {
                drop(other);
                (
                    gpu.alloc::<Fr>(s.len())?,
                    gpu.alloc::<u32>(s.len() * words)?,
                    gpu.alloc::<P>(s.len())?,
                )
            }
        };
        let (mut d_scalars, mut d_xyzz, mut d_out) = (d_scalars, d_xyzz, d_out);
        d_scalars.copy_from_host_on(s, stream.cuda())?;
        crate::kernels::fixed_base_mul(
            gpu,
            stream,
            group,
            d_table,
            window as u32,
            &d_scalars,
            &mut d_xyzz,
        )?;
        crate::kernels::batch_to_affine(gpu, stream, group, &d_xyzz, &mut d_out)?;
        d_out.copy_to_host_on(o, stream.cuda())?;
        bufs = Some((d_scalars, d_xyzz, d_out));
    }
    Ok(())
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
            let table = FixedBaseTable::<G1Affine>::with_window(g1, window);
            let d_table = gpu.vram().from_host(table.points()).unwrap();
            let mut out = vec![G1Affine::default(); scalars.len()];
            in_chunks(
                &gpu,
                &stream,
                Curve::G1,
                &d_table,
                window,
                &scalars,
                1000,
                &mut out,
            )
            .unwrap();
            for (i, (s, p)) in scalars.iter().zip(&out).enumerate() {
                assert_eq!(*p, (g1 * *s).to_affine(), "G1 window {window} scalar {i}");
            }
        }
        let g2 = G2Projective::generator();
        let table = FixedBaseTable::<G2Affine>::with_window(g2, 7);
        let d_table = gpu.vram().from_host(table.points()).unwrap();
        let few = &scalars[..700];
        let mut out = vec![G2Affine::default(); few.len()];
        in_chunks(&gpu, &stream, Curve::G2, &d_table, 7, few, 300, &mut out).unwrap();
        for (i, (s, p)) in few.iter().zip(&out).enumerate() {
            assert_eq!(*p, (g2 * *s).to_affine(), "G2 scalar {i}");
        }
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
