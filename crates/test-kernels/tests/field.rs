//! GPU checks of the BLS12-381 field and curve kernels (`kernels/ff`, `kernels/ec`, entry file
//! `kernels/test/ff_test.cu`) against the host field crate (`cuzk-field`, blst), byte for byte (the
//! throughput bench is `benches/benches/gpu_field.rs`).
//!
//! All tests are `#[ignore = "gpu"]`: run them with `cargo xtask gpu-test` or the bundle. They
//! panic with a clear message when there is no GPU or the kernels were not built.

use std::fmt::Debug;
use std::ops::{Add, Mul, Neg, Sub};

use bytemuck::Pod;
use cuzk_field::{Fp, Fp2, Fr, G1Affine, G1Projective, G2Affine, G2Projective};
use cuzk_gpu::{DeviceBuffer, Gpu, Stream};
use cuzk_test_kernels::ff::{self, BinaryOp, Field, Group, PointOp, UnaryOp};
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
