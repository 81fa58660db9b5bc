//! Subgroup checks of many affine points on the GPU (`kernels/msm/check.cu`: Scott's
//! endomorphism tests, σ against [z²] in G1 and ψ against [z] in G2), for loading parameter
//! files of unknown origin: the same verdict as `is_torsion_free` for every point on the curve,
//! at a fraction of the CPU's time. Points are uploaded in chunks sized to the device's budget.

use crate::kernels::Curve;
use cuzk_field::{G1Affine, G2Affine};
pub use cuzk_gpu::Gpu;
use cuzk_gpu::{DeviceBuffer, GpuError, Stream};

/// Share of the available budget one check may take.
const BUDGET_PERCENT: u64 = 80;
/// Points per upload at most: large enough that a launch fills the device many times over.
const MAX_CHUNK: usize = 1 << 22;

/// Why a batch failed its subgroup check.
#[derive(Debug, thiserror::Error)]
pub enum PointCheckError {
    /// The lowest index of a point outside the prime-order subgroup.
    #[error("point {index} is not in the prime-order subgroup")]
    NotInSubgroup { index: usize },
    #[error("GPU subgroup check: {0}")]
    Gpu(#[from] GpuError),
}

/// Checks that every point of `points` (each on the curve: the caller's decoder checks that) is
/// in G1; the error names the lowest failing index.
pub fn check_subgroup_g1(gpu: &Gpu, points: &[G1Affine]) -> Result<(), PointCheckError> {
    check(gpu, Curve::G1, points)
}

/// [`check_subgroup_g1`] for G2.
pub fn check_subgroup_g2(gpu: &Gpu, points: &[G2Affine]) -> Result<(), PointCheckError> {
    check(gpu, Curve::G2, points)
}

fn chunk_len(available: u64, count: usize, group: Curve) -> usize {
    let fit = (available / 100 * BUDGET_PERCENT / group.affine_bytes() as u64).max(1);
    usize::try_from(fit)
        .unwrap_or(usize::MAX)
        .min(MAX_CHUNK)
        .min(count)
}

fn check<P: bytemuck::Pod>(gpu: &Gpu, group: Curve, points: &[P]) -> Result<(), PointCheckError> {
    if points.is_empty() {
        return Ok(());
    }
    let chunk = chunk_len(gpu.vram().budget().available(), points.len(), group);
    check_in_chunks(gpu, group, points, chunk)
}

fn check_in_chunks<P: bytemuck::Pod>(
    gpu: &Gpu,
    group: Curve,
    points: &[P],
    chunk: usize,
) -> Result<(), PointCheckError> {
    let stream = gpu.stream("subgroup-check")?;
    let mut flag = gpu.alloc::<u32>(1)?;
    let mut buf: Option<DeviceBuffer<P>> = None;
    for (k, part) in points.chunks(chunk).enumerate() {
        let mut d = match buf.take() {
            Some(b) if b.len() == part.len() => b,
            other => {
                drop(other);
                gpu.alloc::<P>(part.len())?
            }
        };
        d.copy_from_host_on(part, stream.cuda())
            .map_err(GpuError::from)?;
        if let Some(i) = first_bad(gpu, &stream, group, &d, &mut flag)? {
            return Err(PointCheckError::NotInSubgroup {
                index: k * chunk + i,
            });
        }
        buf = Some(d);
    }
    Ok(())
}

/// The lowest failing index of the points in `d`, if any.
fn first_bad<P: bytemuck::Pod>(
    gpu: &Gpu,
    stream: &Stream,
    group: Curve,
    d: &DeviceBuffer<P>,
    flag: &mut DeviceBuffer<u32>,
) -> Result<Option<usize>, GpuError> {
    flag.copy_from_host_on(&[u32::MAX], stream.cuda())?;
    crate::kernels::check_subgroup(gpu, stream, group, d, flag)?;
    let mut out = [0u32];
    flag.copy_to_host_on(&mut out, stream.cuda())?;
    Ok((out[0] != u32::MAX).then_some(out[0] as usize))
}

/// Points on the curve for tests and benches: members of the group and points outside it (the
/// curve equation solved for a random x, no cofactor cleared).
pub mod testing {
    use cuzk_field::{Fp, Fp2, Fr, G1Affine, G1Projective, G2Affine, G2Projective};
    use rand_core::RngCore;

    /// √a in Fp (p ≡ 3 mod 4: a^((p+1)/4)).
    fn sqrt_fp(a: Fp) -> Option<Fp> {
        let mut e = Fp::MODULUS;
        // (p + 1) / 4 = (p >> 2) + 1, since p ≡ 3 (mod 4).
        for i in 0..6 {
            e[i] = (e[i] >> 2) | if i < 5 { e[i + 1] << 62 } else { 0 };
        }
        e[0] += 1;
        let r = a.pow(&e);
        (r.square() == a).then_some(r)
    }

    /// √a in Fp2 = Fp[u]/(u² + 1) through the norm: for a = a0 + a1·u with a root x0 + x1·u,
    /// x0² = (a0 ± √(a0² + a1²))/2 and x1 = a1/(2·x0). `None` when a has no root (or for the
    /// few a this route misses, e.g. a1 = 0 with a non-square a0; callers draw again).
    fn sqrt_fp2(a: Fp2) -> Option<Fp2> {
        let (a0, a1) = (a.c0(), a.c1());
        let t = sqrt_fp(a0.square() + a1.square())?;
        let half = Fp::from_u64(2).inverse()?;
        let x0 = sqrt_fp((a0 + t) * half).or_else(|| sqrt_fp((a0 - t) * half))?;
        let x1 = a1 * (x0 + x0).inverse()?;
        let r = Fp2::new(x0, x1);
        (r.square() == a).then_some(r)
    }

    /// A point of E(Fp) outside G1 (random x, cofactor not cleared).
    pub fn g1_outside(rng: &mut impl RngCore) -> G1Affine {
        loop {
            let x = Fp::random(rng);
            if let Some(y) = sqrt_fp(x.square() * x + Fp::from_u64(4)) {
                let p =
                    G1Affine::from_xy_unchecked(x, if rng.next_u32() & 1 == 1 { y } else { -y });
                if p.is_on_curve() && !p.is_torsion_free() {
                    return p;
                }
            }
        }
    }

    /// A point of E'(Fp2) outside G2 (random x, cofactor not cleared).
    pub fn g2_outside(rng: &mut impl RngCore) -> G2Affine {
        let b = Fp2::new(Fp::from_u64(4), Fp::from_u64(4));
        loop {
            let x = Fp2::random(rng);
            if let Some(y) = sqrt_fp2(x.square() * x + b) {
                let p =
                    G2Affine::from_xy_unchecked(x, if rng.next_u32() & 1 == 1 { y } else { -y });
                if p.is_on_curve() && !p.is_torsion_free() {
                    return p;
                }
            }
        }
    }

    pub fn g1_member(rng: &mut impl RngCore) -> G1Affine {
        (G1Projective::generator() * Fr::random(rng)).to_affine()
    }

    pub fn g2_member(rng: &mut impl RngCore) -> G2Affine {
        (G2Projective::generator() * Fr::random(rng)).to_affine()
    }
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::*;
    use cuzk_field::{G1Affine, G2Affine};
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha20Rng;

    /// Members and non-members in random order (at least one of each).
    fn mixed<P>(
        n: usize,
        rng: &mut ChaCha20Rng,
        member: fn(&mut ChaCha20Rng) -> P,
        outside: fn(&mut ChaCha20Rng) -> P,
    ) -> Vec<P> {
        let mut v: Vec<P> = (0..n)
            .map(|i| {
                if i == 0 || (i > 1 && rng.gen_bool(0.3)) {
                    outside(rng)
                } else {
                    member(rng)
                }
            })
            .collect();
        let k = rng.gen_range(0..n);
        v.swap(0, k);
        v
    }

    /// Runs `kernels/msm/check_host_emu.cpp` (the kernels compiled by g++ with emulated PTX)
    /// on members, non-members and the identity, against cuzk-field's `is_torsion_free`:
    /// `cargo test -p cuzk-msm --lib host_emu_subgroup -- --ignored` (needs g++, no GPU).
    #[test]
    #[ignore = "host emulation: needs g++"]
    fn host_emu_subgroup_check() {
        let mut rng = ChaCha20Rng::seed_from_u64(21);
        let mut g1 = mixed(96, &mut rng, g1_member, g1_outside);
        let mut g2 = mixed(40, &mut rng, g2_member, g2_outside);
        g1.push(G1Affine::identity());
        g2.push(G2Affine::identity());
        // (0, ±2) have order 3: the double-and-add meets P + P and P + (-P) on them.
        let (zero, two) = (cuzk_field::Fp::ZERO, cuzk_field::Fp::from_u64(2));
        g1.push(G1Affine::from_xy_unchecked(zero, two));
        g1.push(G1Affine::from_xy_unchecked(zero, -two));
        let ok1: Vec<u8> = g1.iter().map(|p| u8::from(p.is_torsion_free())).collect();
        let ok2: Vec<u8> = g2.iter().map(|p| u8::from(p.is_torsion_free())).collect();
        assert!(ok1.contains(&0) && ok1.contains(&1) && ok2.contains(&0) && ok2.contains(&1));
        let text = cuzk_kernel_build::run_host_emu(
            "msm/check_host_emu.cpp",
            &[
                ("g1.bin", bytemuck::cast_slice(&g1)),
                ("g2.bin", bytemuck::cast_slice(&g2)),
                ("g1.ok", &ok1),
                ("g2.ok", &ok2),
            ],
            &[],
        );
        println!("{text}");
    }

    /// The GPU check against `is_torsion_free`, members and non-members at random positions,
    /// also in small chunks (the index counts across chunks), G1 and G2.
    #[test]
    #[ignore = "gpu"]
    fn gpu_subgroup_check_matches_cpu() {
        let gpu = Gpu::first().expect("gpu tests need an NVIDIA GPU");
        let mut rng = ChaCha20Rng::seed_from_u64(2121);
        let n1 = 5000;
        let members1: Vec<G1Affine> = (0..n1).map(|_| g1_member(&mut rng)).collect();
        check_subgroup_g1(&gpu, &members1).expect("G1 members pass");
        let members2: Vec<G2Affine> = (0..1500).map(|_| g2_member(&mut rng)).collect();
        check_subgroup_g2(&gpu, &members2).expect("G2 members pass");
        for round in 0..4 {
            let mut v = members1.clone();
            let bad: Vec<usize> = (0..1 + round).map(|_| rng.gen_range(0..v.len())).collect();
            for &i in &bad {
                v[i] = g1_outside(&mut rng);
            }
            let want = *bad.iter().min().unwrap();
            match check_subgroup_g1(&gpu, &v) {
                Err(PointCheckError::NotInSubgroup { index }) => assert_eq!(index, want),
                other => panic!("G1 round {round}: {other:?}, want index {want}"),
            }
            match check_in_chunks(&gpu, Curve::G1, &v, 777) {
                Err(PointCheckError::NotInSubgroup { index }) => assert_eq!(index, want),
                other => panic!("G1 round {round}, chunks of 777: {other:?}, want {want}"),
            }
            let mut w = members2.clone();
            let bad2: Vec<usize> = (0..1 + round).map(|_| rng.gen_range(0..w.len())).collect();
            for &i in &bad2 {
                w[i] = g2_outside(&mut rng);
            }
            let want2 = *bad2.iter().min().unwrap();
            match check_subgroup_g2(&gpu, &w) {
                Err(PointCheckError::NotInSubgroup { index }) => assert_eq!(index, want2),
                other => panic!("G2 round {round}: {other:?}, want index {want2}"),
            }
            match check_in_chunks(&gpu, Curve::G2, &w, 333) {
                Err(PointCheckError::NotInSubgroup { index }) => assert_eq!(index, want2),
                other => panic!("G2 round {round}, chunks of 333: {other:?}, want {want2}"),
            }
        }
        // Mixed batches: every point judged as the CPU does.
        let mix1 = mixed(300, &mut rng, g1_member, g1_outside);
        let cpu1 = mix1.iter().position(|p| !p.is_torsion_free());
        let gpu1 = match check_subgroup_g1(&gpu, &mix1) {
            Ok(()) => None,
            Err(PointCheckError::NotInSubgroup { index }) => Some(index),
            Err(e) => panic!("{e}"),
        };
        assert_eq!(gpu1, cpu1);
        for (i, p) in mix1.iter().enumerate() {
            let one = check_subgroup_g1(&gpu, std::slice::from_ref(p)).is_ok();
            assert_eq!(one, p.is_torsion_free(), "G1 point {i}");
        }
        let mix2 = mixed(100, &mut rng, g2_member, g2_outside);
        for (i, p) in mix2.iter().enumerate() {
            let one = check_subgroup_g2(&gpu, std::slice::from_ref(p)).is_ok();
            assert_eq!(one, p.is_torsion_free(), "G2 point {i}");
        }
        assert!(check_subgroup_g1(&gpu, &[G1Affine::identity()]).is_ok());
        let order3 = G1Affine::from_xy_unchecked(cuzk_field::Fp::ZERO, cuzk_field::Fp::from_u64(2));
        assert!(check_subgroup_g1(&gpu, &[order3]).is_err());
        assert!(check_subgroup_g2(&gpu, &[]).is_ok());
    }

    #[test]
    fn chunks_fit_the_budget() {
        assert_eq!(chunk_len(1 << 30, 10, Curve::G1), 10);
        assert_eq!(chunk_len(0, 10, Curve::G2), 1);
        let c = chunk_len(1 << 30, usize::MAX, Curve::G2);
        assert!(c as u64 * 192 <= (1 << 30) / 100 * 80 && c <= MAX_CHUNK);
    }
}
