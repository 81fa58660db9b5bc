//! CPU reference benches: NTT 2^16..2^20, MSM G1/G2 2^16, proving 2^14..2^16.
//! Inputs are random (never zeros); each size is set up once outside the timed loop.

#![forbid(unsafe_code)]

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use cuzk_field::{Fr, G1Affine, G2Affine};
use cuzk_groth16::testing::demo;
use cuzk_groth16::{
    ToxicWaste, create_proof_with_randomness, generate_parameters_with_toxic_waste,
};
use cuzk_msm::{cpu, testing::random_points};
use cuzk_ntt::Domain;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

fn ntt(c: &mut Criterion) {
    let mut group = c.benchmark_group("cpu_ntt_forward");
    group.sample_size(10);
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    for log_n in [16u32, 18, 20] {
        let domain = Domain::new(log_n).expect("domain");
        let input: Vec<Fr> = (0..domain.size()).map(|_| Fr::random(&mut rng)).collect();
        group.bench_with_input(
            BenchmarkId::from_parameter(format!("2^{log_n}")),
            &input,
            |b, input| {
                let mut data = input.clone();
                b.iter(|| domain.fft_in_place(&mut data).expect("fft"));
            },
        );
    }
    group.finish();
}

fn msm(c: &mut Criterion) {
    let mut group = c.benchmark_group("cpu_msm");
    group.sample_size(10);
    let mut rng = ChaCha20Rng::seed_from_u64(2);
    let n = 1 << 16;
    let scalars: Vec<Fr> = (0..n).map(|_| Fr::random(&mut rng)).collect();
    let g1: Vec<G1Affine> = random_points(n, &mut rng);
    group.bench_function("g1_2^16", |b| {
        b.iter(|| cpu::msm(&g1, &scalars).expect("msm"))
    });
    let g2: Vec<G2Affine> = random_points(n, &mut rng);
    group.bench_function("g2_2^16", |b| {
        b.iter(|| cpu::msm(&g2, &scalars).expect("msm"))
    });
    group.finish();
}

fn prove(c: &mut Criterion) {
    let mut group = c.benchmark_group("cpu_prove");
    group.sample_size(10);
    let mut rng = ChaCha20Rng::seed_from_u64(3);
    for log_n in [14u32, 15, 16] {
        let (r1cs, witness) = demo::circuit(log_n, 4, &mut rng).expect("circuit");
        let (pk, _) = generate_parameters_with_toxic_waste(&r1cs, &ToxicWaste::random(&mut rng))
            .expect("setup");
        let (r, s) = (Fr::random(&mut rng), Fr::random(&mut rng));
        group.bench_function(format!("2^{log_n}"), |b| {
            b.iter(|| create_proof_with_randomness(&pk, &r1cs, &witness, r, s).expect("prove"))
        });
    }
    group.finish();
}

criterion_group!(benches, ntt, msm, prove);
criterion_main!(benches);
