//! Launch wrappers for the fixed-base kernels of `kernels/setup/setup.cu` (Groth16 parameter
//! generation): `s_i · G` for one generator G and many scalars, then XYZZ → affine. Embedded by
//! this crate's build script; the only module of cuzk-groth16 allowed `unsafe`.
//!
//! Generic over [`Pod`] element types of the right size so this crate does not depend on the
//! field crate: `cuzk_field::Fr` (32 bytes, Montgomery), `G1Affine` (96 bytes) and `G2Affine`
//! (192 bytes) have exactly the kernels' layouts. The XYZZ intermediate is opaque `u32` words.

use bytemuck::Pod;
use cuzk_gpu::{DeviceBuffer, Gpu, GpuError, LaunchConfig, Module, Result, Stream};
use cuzk_msm::kernels::Curve;

include!(concat!(env!("OUT_DIR"), "/kernels.rs"));

const MODULE: &Module = &SETUP;

/// Bits of an Fr scalar (the kernels consume ⌈255 / w⌉ digits).
const SCALAR_BITS: u32 = 255;
/// Largest window the kernels accept (digits are taken from a 32-bit funnel shift).
pub const MAX_WINDOW: u32 = 16;
/// Points per thread in the affine conversion: one Fp inversion (~570 multiplications) per
/// this many points.
const AFFINE_PER_THREAD: u32 = 32;

/// Number of windows of width `window`.
pub const fn windows(window: u32) -> u32 {
    SCALAR_BITS.div_ceil(window)
}

/// Table entries for `window`: `windows · (2^w − 1)`, window k digit d at `k·(2^w − 1) + d − 1`.
pub const fn table_len(window: u32) -> usize {
    windows(window) as usize * ((1usize << window) - 1)
}

/// `u32` words of one XYZZ point (X, Y, ZZ, ZZZ).
pub const fn xyzz_words(group: Curve) -> usize {
    match group {
        Curve::G1 => 4 * 12,
        Curve::G2 => 4 * 24,
    }
}

fn names(group: Curve) -> (&'static str, &'static str, u32) {
    match group {
        Curve::G1 => ("cuzk_setup_g1_mul", "cuzk_setup_g1_to_affine", 256),
        Curve::G2 => ("cuzk_setup_g2_mul", "cuzk_setup_g2_to_affine", 128),
    }
}

fn invalid(kernel: &str, reason: String) -> GpuError {
    GpuError::InvalidLaunch {
        kernel: format!("{}::{kernel}", MODULE.name()),
        reason,
    }
}

fn check_affine<A>(kernel: &str, group: Curve) -> Result<()> {
    if size_of::<A>() != group.affine_bytes() {
        return Err(invalid(
            kernel,
            format!(
                "point type has {} bytes, affine {group:?} has {}",
                size_of::<A>(),
                group.affine_bytes()
            ),
        ));
    }
    Ok(())
}

/// `xyzz` holds exactly `n` XYZZ points of `group` (`what` names them in the error).
fn check_xyzz(
    kernel: &str,
    group: Curve,
    xyzz: &DeviceBuffer<u32>,
    n: usize,
    what: &str,
) -> Result<()> {
    if xyzz.len() != n * xyzz_words(group) {
        return Err(invalid(
            kernel,
            format!(
                "{} XYZZ words for {n} {what}, need {}",
                xyzz.len(),
                n * xyzz_words(group)
            ),
        ));
    }
    Ok(())
}

/// `xyzz[i] = scalars[i] · G` for every i, from the affine window table of G (on `stream`,
/// asynchronous). Scalars are Fr in Montgomery form; the table must hold valid non-identity
/// points (the kernel's memory accesses are in bounds whatever it holds).
pub fn fixed_base_mul<S: Pod, A: Pod>(
    gpu: &Gpu,
    stream: &Stream,
    group: Curve,
    table: &DeviceBuffer<A>,
    window: u32,
    scalars: &DeviceBuffer<S>,
    xyzz: &mut DeviceBuffer<u32>,
) -> Result<()> {
    let (kernel, _, block) = names(group);
    if size_of::<S>() != 32 {
        return Err(invalid(
            kernel,
            format!("scalar type has {} bytes, Fr has 32", size_of::<S>()),
        ));
    }
    check_affine::<A>(kernel, group)?;
    if !(1..=MAX_WINDOW).contains(&window) {
        return Err(invalid(
            kernel,
            format!("window {window} outside 1..={MAX_WINDOW}"),
        ));
    }
    if table.len() < table_len(window) {
        return Err(invalid(
            kernel,
            format!(
                "table of {} points, window {window} needs {}",
                table.len(),
                table_len(window)
            ),
        ));
    }
    let n = scalars.len();
    check_xyzz(kernel, group, xyzz, n, "scalars")?;
    let n32 =
        u32::try_from(n).map_err(|_| invalid(kernel, format!("{n} scalars: more than 2^32")))?;
    if n == 0 {
        return Ok(());
    }
    let w = windows(window);
    let cfg = LaunchConfig::for_elements(n, block)?;
    // SAFETY: thread i < n reads scalars[i] and writes xyzz point i (n points fit, checked);
    // table indices are k·(2^w − 1) + d − 1 with k < windows(w), 1 ≤ d < 2^w, below
    // table_len(w) ≤ table.len(). `xyzz` is borrowed mutably for the call; callers order later
    // reads after the stream (DeviceBuffer copies on the same stream do).
    unsafe {
        gpu.launch(
            stream,
            MODULE,
            kernel,
            cfg,
            &[&*xyzz, scalars, table, &n32, &window, &w],
        )
    }
}

/// `out[offset + i]` = the affine form of XYZZ point i (identity → (0, 0)) for every point
/// of `xyzz`, on `stream`.
pub fn batch_to_affine<A: Pod>(
    gpu: &Gpu,
    stream: &Stream,
    group: Curve,
    xyzz: &DeviceBuffer<u32>,
    out: &mut DeviceBuffer<A>,
    offset: usize,
) -> Result<()> {
    let (_, kernel, block) = names(group);
    check_affine::<A>(kernel, group)?;
    let n = xyzz.len() / xyzz_words(group);
    check_xyzz(kernel, group, xyzz, n, "points")?;
    if offset.checked_add(n).is_none_or(|end| end > out.len()) {
        return Err(invalid(
            kernel,
            format!(
                "{n} points at offset {offset} overrun an output of {}",
                out.len()
            ),
        ));
    }
    let n32 =
        u32::try_from(n).map_err(|_| invalid(kernel, format!("{n} points: more than 2^32")))?;
    if n == 0 {
        return Ok(());
    }
    let threads = n.div_ceil(AFFINE_PER_THREAD as usize);
    let cfg = LaunchConfig::for_elements(threads, block)?;
    let dst = out.device_ptr() + (offset * size_of::<A>()) as u64;
    // SAFETY: thread t handles points t + j·T (T = launched threads ≥ threads, j < 32) below n
    // only: it reads xyzz point i and writes out[offset + i] (offset + n ≤ out.len(), checked;
    // `dst` is that element's address). `out` is borrowed mutably for the call.
    unsafe {
        gpu.launch(
            stream,
            MODULE,
            kernel,
            cfg,
            &[&dst, xyzz, &n32, &AFFINE_PER_THREAD],
        )
    }
}

#[cfg(test)]
mod tests {
    use cuzk_field::{Fr, G1Affine, G1Projective, G2Affine, G2Projective};
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    /// Runs `kernels/setup/host_emu.cpp` (the kernels compiled by g++ with emulated PTX) on a
    /// window-7 table (digits cross limb boundaries, last window partial) against blst:
    /// `cargo test -p cuzk-groth16 --lib host_emu -- --ignored` (needs g++, no GPU).
    #[test]
    #[ignore = "host emulation: needs g++"]
    fn host_emu_setup_kernels() {
        let w = 7u32;
        let (g1, g2) = (G1Projective::generator(), G2Projective::generator());
        let (mut t1, mut t2) = (Vec::new(), Vec::new());
        for k in 0..super::windows(w) {
            for d in 1..1u64 << w {
                let s = Fr::from_u64(2).pow(&[u64::from(w * k)]) * Fr::from_u64(d);
                t1.push((g1 * s).to_affine());
                t2.push((g2 * s).to_affine());
            }
        }
        let mut rng = ChaCha20Rng::seed_from_u64(4);
        let mut sc: Vec<Fr> = (0..333).map(|_| Fr::random(&mut rng)).collect();
        sc[0] = Fr::ZERO;
        sc[1] = Fr::ONE;
        sc[2] = -Fr::ONE;
        sc[5] = Fr::from_u64(u64::MAX);
        sc[332] = Fr::ZERO;
        let e1: Vec<G1Affine> = sc.iter().map(|s| (g1 * *s).to_affine()).collect();
        let e2: Vec<G2Affine> = sc.iter().map(|s| (g2 * *s).to_affine()).collect();
        cuzk_kernel_build::run_host_emu(
            "setup/host_emu.cpp",
            &[
                ("t1.bin", bytemuck::cast_slice(&t1)),
                ("t2.bin", bytemuck::cast_slice(&t2)),
                ("sc.bin", bytemuck::cast_slice(&sc)),
                ("e1.bin", bytemuck::cast_slice(&e1)),
                ("e2.bin", bytemuck::cast_slice(&e2)),
            ],
            &[w.to_string()],
        );
    }
}
