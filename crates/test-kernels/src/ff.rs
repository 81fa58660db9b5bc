//! Launch wrappers for the field and curve test / benchmark kernels of `kernels/test/ff_test.cu`
//! (BLS12-381 Fr, Fp, Fp2 arithmetic from `kernels/ff/`, G1/G2 point operations from
//! `kernels/ec/`).
//!
//! The wrappers are generic over any [`Pod`] element type of the right size, so that this crate
//! does not depend on the host field crate; `cuzk-field`'s `Fr`, `Fp`, `Fp2`, `G1Affine`,
//! `G1Projective`, `G2Affine`, `G2Projective` have exactly the layouts the kernels use
//! (Montgomery limbs, affine identity = (0, 0), Jacobian (X, Y, Z)). Every input element must be
//! canonical (< modulus); every output element is canonical.

use bytemuck::Pod;
use cudarc::driver::sys::CUdevice_attribute;
use cuzk_gpu::cuda_error as cuda;
use cuzk_gpu::{DeviceBuffer, Gpu, GpuError, LaunchConfig, Module, Result, Stream};

const MODULE: &Module = &crate::embedded::FF_TEST;
const FIELD_BLOCK: u32 = 256;
const POINT_BLOCK: u32 = 128;

/// A field the kernels implement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Field {
    /// BLS12-381 scalar field, 8 x 32-bit limbs.
    Fr,
    /// BLS12-381 base field, 12 x 32-bit limbs.
    Fp,
    /// Fp[u]/(u^2 + 1), two Fp elements.
    Fp2,
}

impl Field {
    pub const ALL: [Field; 3] = [Field::Fr, Field::Fp, Field::Fp2];

    /// Bytes of one element.
    pub const fn bytes(self) -> usize {
        match self {
            Field::Fr => 32,
            Field::Fp => 48,
            Field::Fp2 => 96,
        }
    }
    /// Kernel name prefix.
    pub const fn name(self) -> &'static str {
        match self {
            Field::Fr => "fr",
            Field::Fp => "fp",
            Field::Fp2 => "fp2",
        }
    }
    /// 32-bit integer multiply-adds (IMAD) in one multiplication as implemented in
    /// `kernels/ff`: 4n^2 + n for a Montgomery product over n limbs; Fp2 (lazy Karatsuba) is
    /// 3 wide products (2n^2 each) plus 2 reductions (2n^2 + n each).
    pub const fn imad_per_mul(self) -> u64 {
        match self {
            Field::Fr => 4 * 8 * 8 + 8,
            Field::Fp => 4 * 12 * 12 + 12,
            Field::Fp2 => 10 * 12 * 12 + 2 * 12,
        }
    }
    /// Multiplications per second of sppark's field types on an H200 (2026-11-30), the
    /// throughput target.
    pub const fn sppark_h200_gmul_per_s(self) -> f64 {
        match self {
            Field::Fr => 58.9,
            Field::Fp => 26.8,
            Field::Fp2 => 8.7,
        }
    }
}

/// Element-wise binary operations: `out[i] = a[i] op b[i]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    Mul,
    Add,
    Sub,
}

impl BinaryOp {
    pub const ALL: [BinaryOp; 3] = [BinaryOp::Mul, BinaryOp::Add, BinaryOp::Sub];
    const fn suffix(self) -> &'static str {
        match self {
            BinaryOp::Mul => "mul",
            BinaryOp::Add => "add",
            BinaryOp::Sub => "sub",
        }
    }
}

/// Element-wise unary operations: `out[i] = op(a[i])`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    /// a^2 (Montgomery).
    Sqr,
    /// -a.
    Neg,
    /// 2a (Fr and Fp only).
    Dbl,
    /// Montgomery form -> canonical integer limbs, i.e. a * R^-1 (Fr and Fp only).
    ToCanonical,
    /// Canonical integer limbs -> Montgomery form, i.e. a * R (Fr and Fp only).
    ToMont,
}

impl UnaryOp {
    const fn suffix(self) -> &'static str {
        match self {
            UnaryOp::Sqr => "sqr",
            UnaryOp::Neg => "neg",
            UnaryOp::Dbl => "dbl",
            UnaryOp::ToCanonical => "to_canonical",
            UnaryOp::ToMont => "to_mont",
        }
    }
    /// Whether `field` has a kernel for this operation.
    pub const fn supported(self, field: Field) -> bool {
        match field {
            Field::Fp2 => matches!(self, UnaryOp::Sqr | UnaryOp::Neg),
            _ => true,
        }
    }
}

/// A curve group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Group {
    /// Over Fp: affine 96 bytes, Jacobian 144 bytes.
    G1,
    /// Over Fp2: affine 192 bytes, Jacobian 288 bytes.
    G2,
}

impl Group {
    pub const fn affine_bytes(self) -> usize {
        match self {
            Group::G1 => 96,
            Group::G2 => 192,
        }
    }
    pub const fn jacobian_bytes(self) -> usize {
        match self {
            Group::G1 => 144,
            Group::G2 => 288,
        }
    }
}

/// Point operations. Inputs `a`, `b` are Jacobian (any Z), `c` affine ((0,0) = identity); the
/// XYZZ operations convert the Jacobian inputs to XYZZ (ZZ = Z^2, ZZZ = Z^3), operate, and
/// convert back to Jacobian (X*ZZ, Y*ZZZ, ZZ).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PointOp {
    /// a + b in XYZZ.
    XyzzAdd,
    /// 2a in XYZZ.
    XyzzDbl,
    /// a + c in XYZZ, c affine (mixed addition).
    XyzzAddAffine,
    /// a + b in Jacobian.
    JacobianAdd,
    /// 2a in Jacobian.
    JacobianDbl,
    /// a + c in Jacobian, c affine.
    JacobianAddAffine,
}

impl PointOp {
    pub const ALL: [PointOp; 6] = [
        PointOp::XyzzAdd,
        PointOp::XyzzDbl,
        PointOp::XyzzAddAffine,
        PointOp::JacobianAdd,
        PointOp::JacobianDbl,
        PointOp::JacobianAddAffine,
    ];
    const fn suffix(self) -> &'static str {
        match self {
            PointOp::XyzzAdd => "xyzz_add",
            PointOp::XyzzDbl => "xyzz_dbl",
            PointOp::XyzzAddAffine => "xyzz_add_affine",
            PointOp::JacobianAdd => "jacobian_add",
            PointOp::JacobianDbl => "jacobian_dbl",
            PointOp::JacobianAddAffine => "jacobian_add_affine",
        }
    }
    /// Selector of the G2 kernel (`g2_point_op`), same order as [`PointOp::ALL`].
    const fn code(self) -> u32 {
        match self {
            PointOp::XyzzAdd => 0,
            PointOp::XyzzDbl => 1,
            PointOp::XyzzAddAffine => 2,
            PointOp::JacobianAdd => 3,
            PointOp::JacobianDbl => 4,
            PointOp::JacobianAddAffine => 5,
        }
    }
    /// Whether the operation reads `b` (Jacobian) / `c` (affine).
    pub const fn uses_b(self) -> bool {
        matches!(self, PointOp::XyzzAdd | PointOp::JacobianAdd)
    }
    pub const fn uses_c(self) -> bool {
        matches!(self, PointOp::XyzzAddAffine | PointOp::JacobianAddAffine)
    }
}

fn invalid(kernel: &str, reason: String) -> GpuError {
    GpuError::InvalidLaunch {
        kernel: format!("{}::{kernel}", MODULE.name()),
        reason,
    }
}

fn check_elem<T>(kernel: &str, what: &str, bytes: usize) -> Result<()> {
    let got = std::mem::size_of::<T>();
    if got != bytes {
        return Err(invalid(
            kernel,
            format!("{what}: element type is {got} bytes, the kernel needs {bytes}"),
        ));
    }
    Ok(())
}

fn check_len(kernel: &str, what: &str, len: usize, n: usize) -> Result<()> {
    if len != n {
        return Err(invalid(
            kernel,
            format!("{what} has {len} elements, expected {n}"),
        ));
    }
    Ok(())
}

fn count_u32(kernel: &str, n: usize) -> Result<u32> {
    u32::try_from(n).map_err(|_| invalid(kernel, format!("{n} elements: more than 2^32")))
}

/// `out[i] = a[i] op b[i]` on `stream` (asynchronous). All three buffers have the same length
/// and elements of `field.bytes()` bytes.
pub fn field_binary<T: Pod>(
    gpu: &Gpu,
    stream: &Stream,
    field: Field,
    op: BinaryOp,
    a: &DeviceBuffer<T>,
    b: &DeviceBuffer<T>,
    out: &mut DeviceBuffer<T>,
) -> Result<()> {
    let kernel = format!("{}_{}", field.name(), op.suffix());
    check_elem::<T>(&kernel, "element", field.bytes())?;
    let n = out.len();
    check_len(&kernel, "a", a.len(), n)?;
    check_len(&kernel, "b", b.len(), n)?;
    let n32 = count_u32(&kernel, n)?;
    if n == 0 {
        return Ok(());
    }
    let cfg = LaunchConfig::for_elements(n, FIELD_BLOCK)?;
    // SAFETY: the kernel reads a[i], b[i] and writes out[i] for i < n32 == len of all three;
    // `out` is borrowed mutably until the call returns, callers sync `stream` before reading.
    unsafe { gpu.launch(stream, MODULE, &kernel, cfg, &[a, b, &*out, &n32]) }
}

/// `out[i] = op(a[i])` on `stream` (asynchronous).
pub fn field_unary<T: Pod>(
    gpu: &Gpu,
    stream: &Stream,
    field: Field,
    op: UnaryOp,
    a: &DeviceBuffer<T>,
    out: &mut DeviceBuffer<T>,
) -> Result<()> {
    let kernel = format!("{}_{}", field.name(), op.suffix());
    if !op.supported(field) {
        return Err(invalid(
            &kernel,
            format!("{op:?} is not implemented for {field:?}"),
        ));
    }
    check_elem::<T>(&kernel, "element", field.bytes())?;
    let n = out.len();
    check_len(&kernel, "a", a.len(), n)?;
    let n32 = count_u32(&kernel, n)?;
    if n == 0 {
        return Ok(());
    }
    let cfg = LaunchConfig::for_elements(n, FIELD_BLOCK)?;
    // SAFETY: the kernel reads a[i] and writes out[i] for i < n32 == a.len() == out.len().
    unsafe { gpu.launch(stream, MODULE, &kernel, cfg, &[a, &*out, &n32]) }
}

/// `out[i] = op(a[i], b[i] | c[i])` on `stream` (asynchronous). `J` is the group's Jacobian
/// point type, `A` its affine type. Buffers the operation does not read (see
/// [`PointOp::uses_b`], [`PointOp::uses_c`]) may have any length (e.g. empty).
#[allow(clippy::too_many_arguments)]
pub fn point_op<J: Pod, A: Pod>(
    gpu: &Gpu,
    stream: &Stream,
    group: Group,
    op: PointOp,
    a: &DeviceBuffer<J>,
    b: &DeviceBuffer<J>,
    c: &DeviceBuffer<A>,
    out: &mut DeviceBuffer<J>,
) -> Result<()> {
    let kernel = match group {
        Group::G1 => format!("g1_{}", op.suffix()),
        Group::G2 => "g2_point_op".to_string(),
    };
    check_elem::<J>(&kernel, "Jacobian point", group.jacobian_bytes())?;
    check_elem::<A>(&kernel, "affine point", group.affine_bytes())?;
    let n = out.len();
    check_len(&kernel, "a", a.len(), n)?;
    if op.uses_b() {
        check_len(&kernel, "b", b.len(), n)?;
    }
    if op.uses_c() {
        check_len(&kernel, "c", c.len(), n)?;
    }
    let n32 = count_u32(&kernel, n)?;
    if n == 0 {
        return Ok(());
    }
    let cfg = LaunchConfig::for_elements(n, POINT_BLOCK)?;
    // SAFETY: the kernel reads a[i] (and b[i] when op.uses_b(), c[i] when op.uses_c(), whose
    // lengths were checked) and writes out[i], for i < n32 == out.len() == a.len().
    unsafe {
        match group {
            Group::G1 => {
                if op.uses_b() {
                    gpu.launch(stream, MODULE, &kernel, cfg, &[a, b, &*out, &n32])
                } else if op.uses_c() {
                    gpu.launch(stream, MODULE, &kernel, cfg, &[a, c, &*out, &n32])
                } else {
                    gpu.launch(stream, MODULE, &kernel, cfg, &[a, &*out, &n32])
                }
            }
            Group::G2 => {
                let code = op.code();
                gpu.launch(stream, MODULE, &kernel, cfg, &[&code, a, b, c, &*out, &n32])
            }
        }
    }
}

/// Chain counts of the throughput kernels (`FR/FP/FP2_BENCH_CHAINS` in ff_test.cu), read from
/// the device so the host never disagrees with the build.
pub fn bench_chains(gpu: &Gpu, stream: &Stream) -> Result<[u32; 3]> {
    let out = gpu.alloc::<u32>(3)?;
    let cfg = LaunchConfig {
        grid: (1, 1, 1),
        block: (1, 1, 1),
        shared_bytes: 0,
    };
    // SAFETY: the kernel writes out[0..3] with a single thread; out has 3 elements.
    unsafe { gpu.launch(stream, MODULE, "bench_chains", cfg, &[&out])? };
    stream.synchronize()?;
    let mut host = [0u32; 3];
    out.copy_to_host(&mut host)?;
    Ok(host)
}

/// Launches the throughput kernel `<field>_mul_bench`: thread t < input.len() runs `chains`
/// independent chains of `iters` dependent multiplications and writes out[t]. Returns the
/// number of multiplications the launch performs (input.len() * iters * chains).
pub fn mul_bench<T: Pod>(
    gpu: &Gpu,
    stream: &Stream,
    field: Field,
    chains: u32,
    input: &DeviceBuffer<T>,
    out: &mut DeviceBuffer<T>,
    iters: u32,
) -> Result<u64> {
    let kernel = format!("{}_mul_bench", field.name());
    mul_bench_kernel(
        gpu,
        stream,
        &kernel,
        field,
        chains,
        FIELD_BLOCK,
        input,
        out,
        iters,
    )
}

/// Extra throughput kernels of ff_test.cu (same contract as `<field>_mul_bench`: another chain
/// count `_c<k>`; `_generic`: the generic CIOS rows `mont_t::mul_<false>` (Fr's operator* is
/// `mul_lo_special`, Fp's the Karatsuba product); `_split`: `fp2x_t::mul_split`), timed side by
/// side with the defaults: (field, kernel, chains).
pub const MUL_BENCH_VARIANTS: &[(Field, &str, u32)] = &[
    (Field::Fr, "fr_mul_bench_generic", 4),
    (Field::Fr, "fr_mul_bench_generic_c2", 2),
    (Field::Fr, "fr_mul_bench_c2", 2),
    (Field::Fr, "fr_mul_bench_c8", 8),
    (Field::Fp, "fp_mul_bench_c1", 1),
    (Field::Fp, "fp_mul_bench_c4", 4),
    (Field::Fp, "fp_mul_bench_generic", 4),
    (Field::Fp, "fp_mul_bench_generic_c2", 2),
    (Field::Fp, "fp_mul_bench_generic_c1", 1),
    (Field::Fp2, "fp2_mul_bench_split", 2),
    (Field::Fp2, "fp2_mul_bench_split_c1", 1),
    (Field::Fp2, "fp2_mul_bench_split_c3", 3),
];

/// [`mul_bench`] with an explicit kernel (`<field>_mul_bench*`, see [`MUL_BENCH_VARIANTS`];
/// `chains` must be that kernel's chain count) and block size (1..=256, the kernels' launch
/// bound).
#[allow(clippy::too_many_arguments)]
pub fn mul_bench_kernel<T: Pod>(
    gpu: &Gpu,
    stream: &Stream,
    kernel: &str,
    field: Field,
    chains: u32,
    block: u32,
    input: &DeviceBuffer<T>,
    out: &mut DeviceBuffer<T>,
    iters: u32,
) -> Result<u64> {
    let prefix = format!("{}_mul_bench", field.name());
    if !kernel.starts_with(&prefix) || !(1..=FIELD_BLOCK).contains(&block) {
        return Err(GpuError::InvalidLaunch {
            kernel: kernel.to_string(),
            reason: format!("not a {prefix} kernel or block {block} outside 1..={FIELD_BLOCK}"),
        });
    }
    check_elem::<T>(kernel, "element", field.bytes())?;
    let n = input.len();
    check_len(kernel, "out", out.len(), n)?;
    let n32 = count_u32(kernel, n)?;
    if n == 0 {
        return Ok(0);
    }
    let cfg = LaunchConfig::for_elements(n, block)?;
    // SAFETY: thread t < n32 reads input[t], input[(t + 1) % n32] and writes out[t];
    // n32 == input.len() == out.len(); threads t >= n32 return at once.
    unsafe { gpu.launch(stream, MODULE, kernel, cfg, &[input, &*out, &n32, &iters])? };
    Ok(n as u64 * iters as u64 * chains as u64)
}

/// Resident blocks per SM of `kernel` (an ff_test.cu kernel) at `block` threads, from the
/// registers in the embedded ptxas report for the device's arch and the per-SM limits (64 Ki
/// registers allocated per warp in units of 256; warps/blocks: sm_80 and sm_90 64/32, sm_86
/// 48/16, sm_89 48/24). None when the report has no line for it. Used to size benchmark grids
/// to whole waves.
pub fn resident_blocks_per_sm(gpu: &Gpu, kernel: &str, block: u32) -> Option<u32> {
    let (major, minor) = gpu.info().compute_capability;
    let arch = format!("sm_{major}{minor}");
    let regs: u32 = crate::KERNELS.ptxas_report().lines().find_map(|l| {
        let mut f = l.split_whitespace();
        (f.next() == Some(kernel) && f.next() == Some(arch.as_str()))
            .then(|| f.next()?.parse().ok())
            .flatten()
    })?;
    let warps = block.div_ceil(32).max(1);
    let per_warp = (regs.max(1) * 32).div_ceil(256) * 256;
    let by_regs = (65536 / per_warp) / warps;
    let (max_warps, max_blocks) = match (major, minor) {
        (8, 6) => (48, 16),
        (8, 9) => (48, 24),
        _ => (64, 32),
    };
    Some(by_regs.min(max_warps / warps).min(max_blocks))
}

/// The chip's 32-bit IMAD ceiling in operations per second: SMs x 64 IMAD/clock x the maximum
/// SM clock (cuDeviceGetAttribute CLOCK_RATE).
pub fn imad_ceiling_per_s(gpu: &Gpu) -> Result<f64> {
    let khz = gpu
        .context()
        .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)
        .map_err(cuda("cuDeviceGetAttribute(CLOCK_RATE)"))?;
    Ok(gpu.info().sm_count as f64 * 64.0 * khz as f64 * 1e3)
}
