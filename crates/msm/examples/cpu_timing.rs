//! Prints CPU MSM times (G1 and G2, dense and 90%-sparse) for quick comparisons:
//! `cargo run --release -p cuzk-msm --example cpu_timing -- [log_n]` (default 16).

use std::time::Instant;

use cuzk_field::{Fr, G1Affine, G2Affine};
use cuzk_msm::{MsmPoint, cpu, testing};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

fn time<P: MsmPoint>(name: &str, points: &[P], scalars: &[Fr]) {
    let _ = cpu::msm(points, scalars).unwrap(); // warm-up
    let mut runs: Vec<f64> = (0..5)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(cpu::msm(points, scalars).unwrap());
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    runs.sort_by(f64::total_cmp);
    println!(
        "{name:<28} n = {:>9}: median {:>9.1} ms (min {:.1}, {} threads)",
        points.len(),
        runs[2],
        runs[0],
        rayon::current_num_threads()
    );
}

fn main() {
    let log_n: u32 = std::env::args()
        .nth(1)
        .map_or(16, |s| s.parse().expect("log_n"));
    let n = 1usize << log_n;
    let mut rng = ChaCha20Rng::seed_from_u64(42);
    let dense: Vec<Fr> = (0..n).map(|_| Fr::random(&mut rng)).collect();
    let sparse: Vec<Fr> = (0..n)
        .map(|_| match rng.gen_range(0..10) {
            0..=4 => Fr::ZERO,
            5..=8 => Fr::ONE,
            _ => Fr::random(&mut rng),
        })
        .collect();
    let g1: Vec<G1Affine> = testing::random_points(n, &mut rng);
    time("G1 random scalars", &g1, &dense);
    time("G1 90% 0/1 scalars", &g1, &sparse);
    let g2: Vec<G2Affine> = testing::random_points(n, &mut rng);
    time("G2 random scalars", &g2, &dense);
    time("G2 90% 0/1 scalars", &g2, &sparse);
}
