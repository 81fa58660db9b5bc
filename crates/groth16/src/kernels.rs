//! Launch wrappers for this crate's kernels, embedded by its build script; the only module of
//! cuzk-groth16 allowed `unsafe`. `kernels/groth16/setup.cu` (parameter generation): `s_i · G`
//! for one generator G and many scalars, then XYZZ → affine. `kernels/groth16/evaluate.cu` (the
//! witness map on the device): A·z, B·z, C·z of a [`SparseMatrix`] held as a [`DeviceMatrix`], and
//! the check a·b = c.
//!
//! Generic over [`Pod`] element types of the right size so this crate does not depend on the
//! field crate: `cuzk_field::Fr` (32 bytes, Montgomery), `G1Affine` (96 bytes) and `G2Affine`
//! (192 bytes) have exactly the kernels' layouts. The XYZZ intermediate is opaque `u32` words.

use bytemuck::Pod;
use cuzk_field::Fr;
use cuzk_gpu::{
    DeviceBuffer, Gpu, GpuError, LaunchConfig, Module, Reservation, Result, Stream, Vram,
};
use cuzk_msm::kernels::Curve;

use std::sync::Mutex;

use crate::r1cs::{R1cs, SparseMatrix};

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

/// Threads per block of the evaluation kernels.
const EVALUATE_BLOCK: u32 = 256;
/// Rows of more entries than this are evaluated apart, longest first
/// (`cuzk_r1cs_evaluate_long`), so that no warp of short rows waits on one long row.
const SHORT_ROW: u32 = 4;

/// One matrix of an R1CS in device memory, as `cuzk_r1cs_evaluate` reads it: 32-bit row
/// offsets, each entry's column and coefficient id, the coefficient table, the ids of 1 and
/// −1 (`u32::MAX` when absent), and the rows longer than [`SHORT_ROW`], longest first. Made only
/// from a [`SparseMatrix`], whose constructors check every column and id in range and its row
/// offsets monotone: the kernels rely on them.
#[derive(Debug)]
pub struct DeviceMatrix {
    row_ptr: DeviceBuffer<u32>,
    cols: DeviceBuffer<u32>,
    ids: DeviceBuffer<u32>,
    coeffs: DeviceBuffer<Fr>,
    long_rows: DeviceBuffer<u32>,
    rows: u32,
    num_cols: usize,
    one: u32,
    minus_one: u32,
}

/// The rows of `m` longer than [`SHORT_ROW`], longest first.
fn long_rows(m: &SparseMatrix) -> Vec<u32> {
    let len = |r: usize| m.row_ptr()[r + 1] - m.row_ptr()[r];
    let mut long: Vec<u32> = (0..m.num_rows())
        .filter(|&r| len(r) > SHORT_ROW as usize)
        .map(|r| r as u32)
        .collect();
    long.sort_by_key(|&r| std::cmp::Reverse(len(r as usize)));
    long
}

impl DeviceMatrix {
    /// Device bytes of `m` held this way, or `None` when its rows or entries do not fit the
    /// kernels' 32-bit offsets.
    pub fn bytes_for(m: &SparseMatrix) -> Option<u64> {
        u32::try_from(m.num_rows()).ok()?;
        u32::try_from(m.nnz()).ok()?;
        let long = m
            .row_ptr()
            .windows(2)
            .filter(|w| w[1] - w[0] > SHORT_ROW as usize)
            .count();
        let words = |len| Vram::bytes_for::<u32>(len).ok();
        Some(
            words(m.num_rows() + 1)?
                + 2 * words(m.nnz())?
                + words(long)?
                + Vram::bytes_for::<Fr>(m.coeffs().len()).ok()?,
        )
    }

    /// `m` copied into buffers taken from `room` (at least [`Self::bytes_for`] bytes);
    /// synchronous.
    pub fn upload(gpu: &Gpu, room: &mut Reservation, m: &SparseMatrix) -> Result<Self> {
        let kernel = "cuzk_r1cs_evaluate";
        if Self::bytes_for(m).is_none() {
            return Err(invalid(
                kernel,
                format!(
                    "{} rows and {} entries do not fit 32-bit offsets",
                    m.num_rows(),
                    m.nnz()
                ),
            ));
        }
        // nnz < 2^32 (checked), so every offset fits.
        let row_ptr: Vec<u32> = m.row_ptr().iter().map(|&o| o as u32).collect();
        let vram = gpu.vram();
        let mut put = |data: &[u32]| -> Result<DeviceBuffer<u32>> {
            let mut d = vram.alloc_in::<u32>(room, data.len())?;
            d.copy_from_host(data)?;
            Ok(d)
        };
        let (row_ptr, cols, ids) = (put(&row_ptr)?, put(m.cols())?, put(m.coeff_ids())?);
        let long_rows = put(&long_rows(m))?;
        let mut coeffs = vram.alloc_in::<Fr>(room, m.coeffs().len())?;
        coeffs.copy_from_host(m.coeffs())?;
        let id = |v: Fr| m.coeff_id(v).unwrap_or(u32::MAX);
        Ok(Self {
            row_ptr,
            cols,
            ids,
            coeffs,
            long_rows,
            rows: m.num_rows() as u32,
            num_cols: m.num_cols(),
            one: id(Fr::ONE),
            minus_one: id(-Fr::ONE),
        })
    }

    pub fn rows(&self) -> usize {
        self.rows as usize
    }
}

/// `out = m · z` on `stream`: rows past `m`'s are zero (`out` is the domain, at least `m`'s
/// rows long). `z` is Montgomery, one value per column of `m`.
pub fn evaluate(
    gpu: &Gpu,
    stream: &Stream,
    m: &DeviceMatrix,
    z: &DeviceBuffer<Fr>,
    out: &mut DeviceBuffer<Fr>,
) -> Result<()> {
    let kernel = "cuzk_r1cs_evaluate";
    if z.len() != m.num_cols {
        return Err(invalid(
            kernel,
            format!(
                "z has {} values, the matrix {} columns",
                z.len(),
                m.num_cols
            ),
        ));
    }
    let n = out.len();
    if n < m.rows() || n >= 1 << 31 {
        return Err(invalid(
            kernel,
            format!("{n} outputs for {} rows (at most 2^31 - 1)", m.rows),
        ));
    }
    let cfg = LaunchConfig::for_elements(n, EVALUATE_BLOCK)?;
    let n32 = n as u32;
    // SAFETY: thread t handles rows t + j·T < n, writing out[row] (n = out.len()); for a row
    // below m.rows it reads row_ptr[row], row_ptr[row + 1] (m.rows + 1 offsets), the entries
    // between them (monotone offsets ending at the entry count: SparseMatrix's invariants),
    // z[col] with col < num_cols = z.len() and coeffs[id] with id < the table's length (both
    // checked when the SparseMatrix was made). `out` is borrowed mutably for the call.
    unsafe {
        gpu.launch(
            stream,
            &EVALUATE,
            kernel,
            cfg,
            &[
                &*out,
                &m.row_ptr,
                &m.cols,
                &m.ids,
                &m.coeffs,
                z,
                &m.rows,
                &n32,
                &m.one,
                &m.minus_one,
                &SHORT_ROW,
            ],
        )?;
    }
    let count = m.long_rows.len();
    if count == 0 {
        return Ok(());
    }
    let count32 = count as u32; // at most the rows, < 2^32
    let cfg = LaunchConfig::for_elements(count, EVALUATE_BLOCK)?;
    // SAFETY: thread t handles list entries i = t + j·T < count = long_rows.len(), each a row
    // below m.rows (made so by `long_rows`), read as above and written to out[row] (row <
    // m.rows <= n = out.len()); `out` is borrowed mutably for the call.
    unsafe {
        gpu.launch(
            stream,
            &EVALUATE,
            "cuzk_r1cs_evaluate_long",
            cfg,
            &[
                &*out,
                &m.long_rows,
                &count32,
                &m.row_ptr,
                &m.cols,
                &m.ids,
                &m.coeffs,
                z,
                &m.one,
                &m.minus_one,
            ],
        )
    }
}

/// The lowest row below `rows` where a·b ≠ c, or `None`; `flag` is a one-word scratch. Waits
/// for `stream`.
pub fn first_unsatisfied(
    gpu: &Gpu,
    stream: &Stream,
    [a, b, c]: [&DeviceBuffer<Fr>; 3],
    rows: usize,
    flag: &mut DeviceBuffer<u32>,
) -> Result<Option<usize>> {
    let kernel = "cuzk_r1cs_check";
    if [a.len(), b.len(), c.len()].iter().any(|&l| l < rows) || flag.len() != 1 {
        return Err(invalid(
            kernel,
            format!(
                "{rows} rows, a, b, c of {}, {}, {}, a flag of {}",
                a.len(),
                b.len(),
                c.len(),
                flag.len()
            ),
        ));
    }
    let rows32 = u32::try_from(rows).map_err(|_| invalid(kernel, format!("{rows} rows")))?;
    flag.fill_bytes_async(0xff, stream.cuda())?;
    if rows > 0 {
        let cfg = LaunchConfig::for_elements(rows, EVALUATE_BLOCK)?;
        // SAFETY: thread t reads a, b, c at rows t + j·T < rows (each at least rows long,
        // checked) and writes only flag[0] (one word, checked), borrowed mutably for the call.
        unsafe {
            gpu.launch(stream, &EVALUATE, kernel, cfg, &[&*flag, a, b, c, &rows32])?;
        }
    }
    let mut out = [0u32];
    flag.copy_to_host_on(&mut out, stream.cuda())?;
    Ok((out[0] != u32::MAX).then_some(out[0] as usize))
}

/// The three matrices of one R1CS on one device, and the one-word flag of the row check.
#[derive(Debug)]
pub struct DeviceCircuit {
    matrices: [DeviceMatrix; 3],
    flag: Mutex<DeviceBuffer<u32>>,
    rows: usize,
    /// The budget its buffers were charged to (they live on that device only).
    budget: cuzk_gpu::Budget,
}

impl DeviceCircuit {
    /// Device bytes `r1cs` takes this way, or `None` when a matrix does not fit the kernel's
    /// 32-bit offsets.
    pub fn bytes_for(r1cs: &R1cs) -> Option<u64> {
        let mut bytes = Vram::bytes_for::<u32>(1).ok()?;
        for m in [r1cs.a(), r1cs.b(), r1cs.c()] {
            bytes += DeviceMatrix::bytes_for(m)?;
        }
        Some(bytes)
    }

    /// `r1cs` copied to `gpu` into `room` (at least [`Self::bytes_for`] bytes).
    pub fn upload(gpu: &Gpu, room: &mut Reservation, r1cs: &R1cs) -> Result<Self, GpuError> {
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
    pub fn is_on(&self, gpu: &Gpu) -> bool {
        self.budget.same_as(gpu.vram().budget())
    }

    /// a, b, c = A·z, B·z, C·z into `out` (each the domain's length, zero past the rows) on
    /// `stream`, then the lowest row with a·b ≠ c, if any (waits for `stream`).
    pub fn evaluate(
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

#[cfg(test)]
mod tests {
    use cuzk_field::{Fr, G1Affine, G1Projective, G2Affine, G2Projective};
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    /// Runs `kernels/groth16/setup_emu.cpp` (the kernels compiled by g++ with emulated PTX) on a
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
            "groth16/setup_emu.cpp",
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

    /// The rows the long-row kernel runs: those of more than [`super::SHORT_ROW`] entries,
    /// longest first, and the device bytes count them.
    #[test]
    fn long_rows_are_listed_longest_first_and_counted() {
        let lens = [0usize, 5, 1, 9, 4, 5, 2, 12];
        let mut row_ptr = vec![0];
        let (mut cols, mut vals) = (Vec::new(), Vec::new());
        for &l in &lens {
            cols.extend(0..l as u32);
            vals.extend((1..=l as u64).map(Fr::from_u64));
            row_ptr.push(cols.len());
        }
        let m = crate::r1cs::SparseMatrix::from_csr(16, row_ptr, cols, vals).unwrap();
        assert_eq!(super::long_rows(&m), vec![7, 3, 1, 5]);
        let rows_only = super::DeviceMatrix::bytes_for(&m).unwrap();
        let vram = |len| cuzk_gpu::Vram::bytes_for::<u32>(len).unwrap();
        assert_eq!(
            rows_only,
            vram(lens.len() + 1)
                + 2 * vram(m.nnz())
                + vram(4)
                + cuzk_gpu::Vram::bytes_for::<Fr>(m.coeffs().len()).unwrap()
        );
    }

    /// Runs `kernels/groth16/evaluate_emu.cpp` (the evaluation kernels compiled by g++ with
    /// emulated PTX) on a demo circuit of 1000 rows in a domain of 1024, satisfied and with one
    /// witness value changed, against `R1cs::evaluate_into`:
    /// `cargo test -p cuzk-groth16 --lib host_emu -- --ignored` (needs g++, no GPU).
    #[test]
    #[ignore = "host emulation: needs g++"]
    fn host_emu_evaluate_kernels() {
        let mut rng = ChaCha20Rng::seed_from_u64(5);
        let (r1cs, witness) =
            crate::testing::demo::circuit_with_rows(1000, 3, 60, &mut rng).unwrap();
        let mut z = witness.assignment().to_vec();
        for broken in [false, true] {
            if broken {
                z[700] += Fr::ONE;
            }
            let n = 1024;
            let mut e = [vec![Fr::ZERO; n], vec![Fr::ZERO; n], vec![Fr::ZERO; n]];
            let [ea, eb, ec] = &mut e;
            let rows = r1cs.num_constraints();
            let bad =
                match r1cs.evaluate_into(&z, &mut ea[..rows], &mut eb[..rows], &mut ec[..rows]) {
                    Ok(()) => u32::MAX,
                    Err(crate::WitnessError::Unsatisfied { constraint }) => constraint as u32,
                    Err(e) => panic!("{e}"),
                };
            assert_eq!(broken, bad != u32::MAX);
            let mut files: Vec<(String, Vec<u8>)> =
                vec![("z.bin".into(), bytemuck::cast_slice(&z).to_vec())];
            let mut args = vec![rows.to_string(), n.to_string()];
            for (name, m, want) in [
                ("a", r1cs.a(), ea),
                ("b", r1cs.b(), eb),
                ("c", r1cs.c(), ec),
            ] {
                let ptr: Vec<u32> = m.row_ptr().iter().map(|&o| o as u32).collect();
                let long = super::long_rows(m);
                assert!(
                    name != "a" || !long.is_empty(),
                    "the demo's packing rows are long"
                );
                let parts: [(&str, &[u8]); 6] = [
                    ("ptr", bytemuck::cast_slice(&ptr)),
                    ("cols", bytemuck::cast_slice(m.cols())),
                    ("ids", bytemuck::cast_slice(m.coeff_ids())),
                    ("coeffs", bytemuck::cast_slice(m.coeffs())),
                    ("long", bytemuck::cast_slice(&long)),
                    ("expected", bytemuck::cast_slice(want.as_slice())),
                ];
                for (part, bytes) in parts {
                    files.push((format!("{name}_{part}.bin"), bytes.to_vec()));
                }
                for v in [Fr::ONE, -Fr::ONE] {
                    let id = m.coeff_id(v).unwrap_or(u32::MAX);
                    args.push(id.to_string());
                }
            }
            args.push(bad.to_string());
            args.push(super::SHORT_ROW.to_string());
            let files: Vec<(&str, &[u8])> = files
                .iter()
                .map(|(n, b)| (n.as_str(), b.as_slice()))
                .collect();
            let out = cuzk_kernel_build::run_host_emu("groth16/evaluate_emu.cpp", &files, &args);
            assert!(out.contains(" 0 mismatches"), "{out}");
        }
    }
}
