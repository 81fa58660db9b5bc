//! GPU checks of the BLS12-381 field and curve kernels (`kernels/ff`, `kernels/ec`, entry file
//! `kernels/ff_test.cu`) against the host field crate (`cuzk-field`, blst), byte for byte, and
//! the field-multiplication throughput bench.
//!
//! All tests are `#[ignore = "gpu"]`: run them with `cargo xtask gpu-test` or the bundle. They
//! panic with a clear message when there is no GPU or the kernels were not built.

use std::fmt::Debug;
use std::ops::{Add, Mul, Neg, Sub};

use bytemuck::Pod;
use cuzk_field::{Fp, Fp2, Fr, G1Affine, G1Projective, G2Affine, G2Projective};
use cuzk_gpu::ff::{self, BinaryOp, Field, Group, PointOp, UnaryOp};
use cuzk_gpu::{DeviceBuffer, Gpu, Stream};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

fn gpu() -> Gpu {
    Gpu::first().unwrap_or_else(|e| panic!("this GPU test needs a CUDA GPU and built kernels: {e}"))
}

fn upload<T: Pod>(gpu: &Gpu, host: &[T]) -> DeviceBuffer<T> {
    let mut d = gpu.alloc::<T>(host.len()).expect("device allocation");
    d.copy_from_host(host).expect("host -> device copy");
    d
}

fn download<T: Pod>(stream: &Stream, d: &DeviceBuffer<T>) -> Vec<T> {
    stream.synchronize().expect("kernel execution");
    d.to_vec().expect("device -> host copy")
}

/// Byte-for-byte comparison; panics with the first few mismatches.
fn assert_same<T: Pod + Debug>(
    what: &str,
    inputs: &dyn Fn(usize) -> String,
    got: &[T],
    want: &[T],
) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let bad: Vec<usize> = (0..got.len())
        .filter(|&i| bytemuck::bytes_of(&got[i]) != bytemuck::bytes_of(&want[i]))
        .collect();
    if !bad.is_empty() {
        let mut msg = format!(
            "{what}: {} of {} results differ from blst",
            bad.len(),
            got.len()
        );
        for &i in bad.iter().take(4) {
            msg += &format!(
                "\n  [{i}] inputs {}\n       gpu  {:?}\n       blst {:?}",
                inputs(i),
                got[i],
                want[i]
            );
        }
        panic!("{msg}");
    }
}

// ---- host field abstraction --------------------------------------------------------------------

trait HostField:
    Pod
    + Debug
    + PartialEq
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Neg<Output = Self>
{
    const FIELD: Field;
    fn random(rng: &mut ChaCha20Rng) -> Self;
    fn sqr(&self) -> Self;
    /// 0, 1, -1, p-1 as raw Montgomery limbs, 2^k - 1 both as raw limbs and as values, ...
    fn edges() -> Vec<Self>;
}

macro_rules! prime_field {
    ($t:ty, $field:expr, $limbs:expr, $bits:expr) => {
        impl HostField for $t {
            const FIELD: Field = $field;
            fn random(rng: &mut ChaCha20Rng) -> Self {
                <$t>::random(rng)
            }
            fn sqr(&self) -> Self {
                self.square()
            }
            fn edges() -> Vec<Self> {
                let mut v = vec![
                    <$t>::ZERO,
                    <$t>::ONE,
                    -<$t>::ONE,
                    <$t>::ONE + <$t>::ONE,
                    -(<$t>::ONE + <$t>::ONE),
                ];
                // raw Montgomery limbs p - 1 and p - 2
                let mut pm1 = <$t>::MODULUS;
                pm1[0] -= 1;
                v.push(<$t>::from_montgomery(pm1).expect("p-1 < p"));
                pm1[0] -= 1;
                v.push(<$t>::from_montgomery(pm1).expect("p-2 < p"));
                // 2^k - 1: as raw limbs for k < bits, as values (mod p) for all k up to 64 * limbs
                let two = <$t>::ONE + <$t>::ONE;
                for k in [
                    1u32, 2, 31, 32, 33, 63, 64, 65, 127, 128, 129, 191, 192, 193, 254, 255, 256,
                    380, 381, 383, 384,
                ] {
                    if k > 64 * $limbs {
                        continue;
                    }
                    v.push(two.pow(&[k as u64]) - <$t>::ONE);
                    if k < $bits {
                        let mut raw = [0u64; $limbs];
                        for (i, l) in raw.iter_mut().enumerate() {
                            let lo = 64 * i as u32;
                            *l = if k >= lo + 64 {
                                u64::MAX
                            } else if k > lo {
                                (1u64 << (k - lo)) - 1
                            } else {
                                0
                            };
                        }
                        v.push(<$t>::from_montgomery(raw).expect("2^k - 1 < p"));
                    }
                }
                v
            }
        }
    };
}
prime_field!(Fr, Field::Fr, 4, 255);
prime_field!(Fp, Field::Fp, 6, 381);

impl HostField for Fp2 {
    const FIELD: Field = Field::Fp2;
    fn random(rng: &mut ChaCha20Rng) -> Self {
        Fp2::random(rng)
    }
    fn sqr(&self) -> Self {
        self.square()
    }
    fn edges() -> Vec<Self> {
        let e = <Fp as HostField>::edges();
        let mut v = Vec::new();
        for (i, a) in e.iter().enumerate() {
            for b in e.iter().skip(i % 5).step_by(5) {
                v.push(Fp2::new(*a, *b));
            }
        }
        v
    }
}

/// Inputs: every pair of edge values, then random values up to `n` in total.
fn operands<T: HostField>(rng: &mut ChaCha20Rng, n: usize) -> (Vec<T>, Vec<T>) {
    let e = T::edges();
    let (mut a, mut b) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for x in &e {
        for y in &e {
            a.push(*x);
            b.push(*y);
        }
    }
    // mix edges with random values too
    for x in &e {
        a.push(*x);
        b.push(T::random(rng));
        a.push(T::random(rng));
        b.push(*x);
    }
    while a.len() < n {
        a.push(T::random(rng));
        b.push(T::random(rng));
    }
    (a, b)
}

fn check_field<T: HostField>(n: usize, seed: u64) {
    let gpu = gpu();
    let stream = gpu.stream("field").expect("stream");
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let (a, b) = operands::<T>(&mut rng, n);
    let (da, db) = (upload(&gpu, &a), upload(&gpu, &b));
    let mut dout = gpu.alloc::<T>(a.len()).expect("device allocation");
    let field = T::FIELD;
    let show2 = |i: usize| format!("{:?}, {:?}", a[i], b[i]);
    let show1 = |i: usize| format!("{:?}", a[i]);

    for op in BinaryOp::ALL {
        ff::field_binary(&gpu, &stream, field, op, &da, &db, &mut dout).expect("launch");
        let got = download(&stream, &dout);
        let want: Vec<T> = a
            .iter()
            .zip(&b)
            .map(|(x, y)| match op {
                BinaryOp::Mul => *x * *y,
                BinaryOp::Add => *x + *y,
                BinaryOp::Sub => *x - *y,
            })
            .collect();
        assert_same(&format!("{field:?} {op:?}"), &show2, &got, &want);
    }
    for op in [UnaryOp::Sqr, UnaryOp::Neg, UnaryOp::Dbl] {
        if !op.supported(field) {
            continue;
        }
        ff::field_unary(&gpu, &stream, field, op, &da, &mut dout).expect("launch");
        let got = download(&stream, &dout);
        let want: Vec<T> = a
            .iter()
            .map(|x| match op {
                UnaryOp::Sqr => x.sqr(),
                UnaryOp::Neg => -*x,
                _ => *x + *x,
            })
            .collect();
        assert_same(&format!("{field:?} {op:?}"), &show1, &got, &want);
    }
}

/// Montgomery <-> canonical conversions (Fr, Fp): to_canonical(a) has the limbs of blst's
/// canonical integer; to_mont of those limbs gives back a.
macro_rules! check_conversions {
    ($t:ty, $field:expr, $n:expr, $seed:expr) => {{
        let gpu = gpu();
        let stream = gpu.stream("conv").expect("stream");
        let mut rng = ChaCha20Rng::seed_from_u64($seed);
        let (a, _) = operands::<$t>(&mut rng, $n);
        let da = upload(&gpu, &a);
        let mut dout = gpu.alloc::<$t>(a.len()).expect("device allocation");
        ff::field_unary(&gpu, &stream, $field, UnaryOp::ToCanonical, &da, &mut dout)
            .expect("launch");
        let got = download(&stream, &dout);
        let canon: Vec<$t> = a.iter().map(|x| bytemuck::cast(x.to_canonical())).collect();
        assert_same(
            &format!("{:?} to_canonical", $field),
            &|i| format!("{:?}", a[i]),
            &got,
            &canon,
        );
        let dc = upload(&gpu, &canon);
        ff::field_unary(&gpu, &stream, $field, UnaryOp::ToMont, &dc, &mut dout).expect("launch");
        let got = download(&stream, &dout);
        assert_same(
            &format!("{:?} to_mont", $field),
            &|i| format!("{:?}", canon[i]),
            &got,
            &a,
        );
    }};
}

const PRODUCTS: usize = 1 << 20; // >= 10^6 random products per type

#[test]
#[ignore = "gpu"]
fn gpu_fr_arithmetic_matches_blst() {
    check_field::<Fr>(PRODUCTS, 1);
    check_conversions!(Fr, Field::Fr, 1 << 16, 11);
}

#[test]
#[ignore = "gpu"]
fn gpu_fp_arithmetic_matches_blst() {
    check_field::<Fp>(PRODUCTS, 2);
    check_conversions!(Fp, Field::Fp, 1 << 16, 12);
}

#[test]
#[ignore = "gpu"]
fn gpu_fp2_arithmetic_matches_blst() {
    check_field::<Fp2>(PRODUCTS, 3);
}

#[test]
#[ignore = "gpu"]
fn gpu_field_launches_reject_wrong_sizes() {
    let gpu = gpu();
    let stream = gpu.stream("sizes").expect("stream");
    let a = gpu.alloc::<Fr>(8).expect("alloc");
    let b = gpu.alloc::<Fr>(7).expect("alloc");
    let mut out = gpu.alloc::<Fr>(8).expect("alloc");
    assert!(ff::field_binary(&gpu, &stream, Field::Fr, BinaryOp::Mul, &a, &b, &mut out).is_err());
    // an Fr buffer is not an Fp buffer
    assert!(ff::field_binary(&gpu, &stream, Field::Fp, BinaryOp::Mul, &a, &a, &mut out).is_err());
    let mut o2 = gpu.alloc::<Fp2>(8).expect("alloc");
    let a2 = gpu.alloc::<Fp2>(8).expect("alloc");
    assert!(ff::field_unary(&gpu, &stream, Field::Fp2, UnaryOp::Dbl, &a2, &mut o2).is_err());
}

// ---- points ------------------------------------------------------------------------------------

/// Host group abstraction over cuzk-field's G1 / G2 types.
trait HostGroup {
    type Proj: Pod + Debug + PartialEq + Add<Output = Self::Proj> + Neg<Output = Self::Proj>;
    type Aff: Pod + Debug + PartialEq;
    const GROUP: Group;
    fn random(rng: &mut ChaCha20Rng) -> Self::Proj;
    fn identity() -> Self::Proj;
    fn double(p: &Self::Proj) -> Self::Proj;
    fn add_affine(p: &Self::Proj, q: &Self::Aff) -> Self::Proj;
    fn to_affine(p: &Self::Proj) -> Self::Aff;
    fn from_affine(p: &Self::Aff) -> Self::Proj;
    fn aff_identity() -> Self::Aff;
    /// Whether every coordinate of the Jacobian point is a canonical field element.
    fn canonical(p: &Self::Proj) -> bool;
}

fn fp_canonical(words: &[u64]) -> bool {
    words
        .chunks(6)
        .all(|c| Fp::from_montgomery(c.try_into().expect("6 limbs")).is_some())
}

macro_rules! host_group {
    ($name:ident, $proj:ty, $aff:ty, $group:expr) => {
        struct $name;
        impl HostGroup for $name {
            type Proj = $proj;
            type Aff = $aff;
            const GROUP: Group = $group;
            fn random(rng: &mut ChaCha20Rng) -> $proj {
                <$proj>::random(rng)
            }
            fn identity() -> $proj {
                <$proj>::identity()
            }
            fn double(p: &$proj) -> $proj {
                p.double()
            }
            fn add_affine(p: &$proj, q: &$aff) -> $proj {
                *p + *q
            }
            fn to_affine(p: &$proj) -> $aff {
                p.to_affine()
            }
            fn from_affine(p: &$aff) -> $proj {
                p.to_projective()
            }
            fn aff_identity() -> $aff {
                <$aff>::identity()
            }
            fn canonical(p: &$proj) -> bool {
                fp_canonical(bytemuck::cast_slice::<$proj, u64>(std::slice::from_ref(p)))
            }
        }
    };
}
host_group!(G1, G1Projective, G1Affine, Group::G1);
host_group!(G2, G2Projective, G2Affine, Group::G2);

fn check_points<H: HostGroup>(n_random: usize, seed: u64) {
    let gpu = gpu();
    let stream = gpu.stream("points").expect("stream");
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    // a walk P_i = P_{i-1} + R gives many distinct points with unrelated Z cheaply
    let (r1, r2) = (H::random(&mut rng), H::random(&mut rng));
    let (mut p, mut q) = (H::random(&mut rng), H::random(&mut rng));
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let o = H::identity();
    // special cases: P+P, P+(-P), P+O, O+P, O+O, P+2P, and a Z = 1 input; doubling of O
    for _ in 0..8 {
        p = p + r1;
        q = q + r2;
        let p_z1 = H::from_affine(&H::to_affine(&p)); // Z = 1
        a.extend([p, p, p, o, o, p, p_z1]);
        b.extend([p, -p, o, p, o, p + p, q]);
    }
    while a.len() < n_random {
        p = p + r1;
        q = q + r2;
        a.push(p);
        b.push(q);
    }
    let n = a.len();
    // affine operands: b as affine, plus the doubling / cancelling / identity cases
    let mut c: Vec<H::Aff> = b.iter().map(H::to_affine).collect();
    for i in 0..8 {
        c[7 * i] = H::to_affine(&a[7 * i]); // P + P (affine) -> doubling branch
        c[7 * i + 1] = H::to_affine(&-a[7 * i + 1]); // P + (-P) -> identity
        c[7 * i + 2] = H::aff_identity(); // P + O
    }
    let (da, db, dc) = (upload(&gpu, &a), upload(&gpu, &b), upload(&gpu, &c));
    let mut dout = gpu.alloc::<H::Proj>(n).expect("device allocation");
    for op in PointOp::ALL {
        ff::point_op(&gpu, &stream, H::GROUP, op, &da, &db, &dc, &mut dout).expect("launch");
        let got = download(&stream, &dout);
        let want: Vec<H::Proj> = (0..n)
            .map(|i| match op {
                PointOp::XyzzAdd | PointOp::JacobianAdd => a[i] + b[i],
                PointOp::XyzzDbl | PointOp::JacobianDbl => H::double(&a[i]),
                PointOp::XyzzAddAffine | PointOp::JacobianAddAffine => H::add_affine(&a[i], &c[i]),
            })
            .collect();
        let mut bad = Vec::new();
        for i in 0..n {
            let ok = H::canonical(&got[i])
                && got[i] == want[i]
                && bytemuck::bytes_of(&H::to_affine(&got[i]))
                    == bytemuck::bytes_of(&H::to_affine(&want[i]));
            if !ok {
                bad.push(i);
            }
        }
        if !bad.is_empty() {
            let mut msg = format!(
                "{:?} {op:?}: {} of {n} results differ from blst",
                H::GROUP,
                bad.len()
            );
            for &i in bad.iter().take(3) {
                msg += &format!(
                    "\n  [{i}] a {:?}\n       b {:?}\n       c {:?}\n       gpu  {:?}\n       blst {:?}",
                    a[i], b[i], c[i], got[i], want[i]
                );
            }
            panic!("{msg}");
        }
    }
}

#[test]
#[ignore = "gpu"]
fn gpu_g1_point_ops_match_blst() {
    check_points::<G1>(1 << 14, 21);
}

#[test]
#[ignore = "gpu"]
fn gpu_g2_point_ops_match_blst() {
    check_points::<G2>(1 << 12, 22);
}

// ---- throughput --------------------------------------------------------------------------------

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|x, y| x.partial_cmp(y).expect("finite"));
    v[v.len() / 2]
}

/// One timed configuration of a throughput kernel.
struct BenchCfg<'a> {
    kernel: &'a str,
    chains: u32,
    block: u32,
    n: usize,
    iters: u32,
}

/// Runs `cfg.kernel` on `input[..cfg.n]` `runs` times (after two warm-ups), CUDA events around
/// each launch, and checks 16 threads' outputs (the first 8 and the last 8, which wrap around)
/// against the host model. Returns the median multiplications per second.
fn bench_one<T: HostField>(
    gpu: &Gpu,
    stream: &Stream,
    cfg: &BenchCfg<'_>,
    input: &[T],
    runs: usize,
) -> f64 {
    let input = &input[..cfg.n];
    let din = upload(gpu, input);
    let mut dout = gpu.alloc::<T>(cfg.n).expect("device allocation");
    let (start, end) = (gpu.event().expect("event"), gpu.event().expect("event"));
    let launch = |dout: &mut DeviceBuffer<T>| {
        ff::mul_bench_kernel(
            gpu,
            stream,
            cfg.kernel,
            T::FIELD,
            cfg.chains,
            cfg.block,
            &din,
            dout,
            cfg.iters,
        )
        .expect("launch")
    };
    for _ in 0..2 {
        launch(&mut dout);
    }
    let mut rates = Vec::new();
    for _ in 0..runs {
        stream.record(&start).expect("record");
        let muls = launch(&mut dout);
        stream.record(&end).expect("record");
        end.synchronize().expect("kernel execution");
        let ms = start.elapsed_ms(&end).expect("elapsed") as f64;
        rates.push(muls as f64 / (ms * 1e-3));
    }
    let out = download(stream, &dout);
    let n = cfg.n;
    for t in (0..8).chain(n - 8..n) {
        assert!(
            out[t] == bench_expected(input, t, cfg.chains, cfg.iters),
            "{} (block {}, n {n}) thread {t}: output differs from the host model",
            cfg.kernel,
            cfg.block
        );
    }
    median(rates)
}

/// Host model of the bench kernel for thread t: chains c_0 = x, c_k = c_{k-1} + y, each
/// multiplied by y `iters` times, summed.
fn bench_expected<T: HostField>(input: &[T], t: usize, chains: u32, iters: u32) -> T {
    let n = input.len();
    let (x, y) = (input[t], input[(t + 1) % n]);
    let mut c = vec![x];
    for k in 1..chains as usize {
        let prev = c[k - 1];
        c.push(prev + y);
    }
    for _ in 0..iters {
        for v in c.iter_mut() {
            *v = *v * y;
        }
    }
    let mut s = c[0];
    for v in &c[1..] {
        s = s + *v;
    }
    s
}

/// Threads for a launch of `kernel` at `block`: a whole number of full waves (SMs x resident
/// blocks x block threads) near 2^20, so no SM idles in a partial last wave; 2^20 when the
/// occupancy is unknown. Returns (threads, waves; 0 = unknown).
fn full_wave_threads(gpu: &Gpu, kernel: &str, block: u32) -> (usize, usize) {
    const TARGET: usize = 1 << 20;
    match ff::resident_blocks_per_sm(gpu, kernel, block) {
        Some(b) if b > 0 => {
            let wave = gpu.info().sm_count as usize * b as usize * block as usize;
            let waves = ((TARGET + wave / 2) / wave).max(1);
            (waves * wave, waves)
        }
        _ => (TARGET, 0),
    }
}

/// All configurations of one field: the default kernel on the old 2^20-thread grid (for
/// comparison with earlier runs), then the default kernel and each variant at blocks 256, 128,
/// 64 on full-wave grids. Prints a row per configuration and BENCH lines for the default
/// (256 threads, full waves) and the fastest configuration.
fn bench_field<T: HostField>(gpu: &Gpu, stream: &Stream, chains: u32, iters: u32, ceiling: f64) {
    let field = T::FIELD;
    let default = format!("{}_mul_bench", field.name());
    let mut kernels = vec![(default.as_str(), chains)];
    kernels.extend(
        ff::MUL_BENCH_VARIANTS
            .iter()
            .filter(|(f, _, _)| *f == field)
            .map(|&(_, k, c)| (k, c)),
    );
    let mut cfgs = vec![(
        BenchCfg {
            kernel: &default,
            chains,
            block: 256,
            n: 1 << 20,
            iters,
        },
        0,
    )];
    for &(kernel, ch) in &kernels {
        for block in [256, 128, 64] {
            let (n, waves) = full_wave_threads(gpu, kernel, block);
            // same multiplications per thread as the default kernel
            let it = (iters * chains).div_ceil(ch);
            cfgs.push((
                BenchCfg {
                    kernel,
                    chains: ch,
                    block,
                    n,
                    iters: it,
                },
                waves,
            ));
        }
    }
    let max_n = cfgs.iter().map(|(c, _)| c.n).max().unwrap_or(0);
    let mut rng = ChaCha20Rng::seed_from_u64(99);
    let input: Vec<T> = (0..max_n)
        .map(|_| {
            loop {
                let x = T::random(&mut rng);
                if bytemuck::bytes_of(&x).iter().any(|&b| b != 0) {
                    break x;
                }
            }
        })
        .collect();
    let runs = 11;
    let mut best: Option<(f64, String)> = None;
    for (i, (cfg, waves)) in cfgs.iter().enumerate() {
        let rate = bench_one::<T>(gpu, stream, cfg, &input, runs);
        let pct = 100.0 * rate * field.imad_per_mul() as f64 / ceiling;
        let g = rate / 1e9;
        let grid = if i == 0 {
            "2^20".to_string()
        } else if *waves == 0 {
            "2^20?".to_string()
        } else {
            format!("{waves}w")
        };
        println!(
            "{:<6} {:<18} {:>6} {:>5} {:>8} {:>6} {:>5} {:>9.2} {:>10.1}% {:>8.3}x",
            field.name(),
            cfg.kernel,
            cfg.chains,
            cfg.block,
            cfg.n,
            grid,
            cfg.iters,
            g,
            pct,
            g / field.sppark_h200_gmul_per_s()
        );
        let label = format!("kernel={} block={} n={}", cfg.kernel, cfg.block, cfg.n);
        if i == 1 {
            println!(
                "BENCH ff.{}_mul gmul_per_s={g:.3} imad_ceiling_pct={pct:.1} sppark_gmul_per_s={} {label}",
                field.name(),
                field.sppark_h200_gmul_per_s()
            );
        }
        if best.as_ref().is_none_or(|(r, _)| rate > *r) {
            best = Some((rate, label));
        }
    }
    if let Some((rate, label)) = best {
        let g = rate / 1e9;
        println!(
            "BENCH ff.{}_mul_best gmul_per_s={g:.3} imad_ceiling_pct={:.1} vs_sppark={:.3} {label}",
            field.name(),
            100.0 * rate * field.imad_per_mul() as f64 / ceiling,
            g / field.sppark_h200_gmul_per_s()
        );
    }
}

#[test]
#[ignore = "gpu"]
fn gpu_bench_field_throughput() {
    let gpu = gpu();
    let stream = gpu.stream("bench").expect("stream");
    let chains = ff::bench_chains(&gpu, &stream).expect("bench_chains");
    let ceiling = ff::imad_ceiling_per_s(&gpu).expect("clock rate");
    println!(
        "field multiplication throughput on {} ({} SMs, IMAD ceiling {:.2e}/s), median of 11 runs; \
         grid: 2^20 threads or <w> full waves",
        gpu.info().name,
        gpu.info().sm_count,
        ceiling
    );
    println!(
        "{:<6} {:<18} {:>6} {:>5} {:>8} {:>6} {:>5} {:>9} {:>11} {:>9}",
        "field",
        "kernel",
        "chains",
        "block",
        "threads",
        "grid",
        "iters",
        "G mul/s",
        "% ceiling",
        "vs sppark"
    );
    bench_field::<Fr>(&gpu, &stream, chains[0], 256, ceiling);
    bench_field::<Fp>(&gpu, &stream, chains[1], 128, ceiling);
    bench_field::<Fp2>(&gpu, &stream, chains[2], 64, ceiling);
}
