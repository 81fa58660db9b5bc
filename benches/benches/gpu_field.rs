//! GPU field-multiplication throughput (Fr, Fp, Fp2; kernels/test/ff_test.cu): every kernel and
//! variant at several block sizes, each run's output checked against the host model (16
//! threads: the first and the last 8) before its rate counts; `BENCH` lines for the default and
//! the fastest configuration, then a summary table against sppark.
//! `cargo bench -p cuzk-benches --bench gpu_field` (needs a GPU).

#![forbid(unsafe_code)]

use std::ops::{Add, Mul};

use bytemuck::Pod;
use cuzk_benches::{Summary, gpu};
use cuzk_field::{Fp, Fp2, Fr};
use cuzk_gpu::{DeviceBuffer, Gpu, Stream};
use cuzk_test_kernels::ff::{self, Field};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

/// A field the throughput kernels run on, with its host arithmetic (the reference).
trait BenchField: Pod + PartialEq + Add<Output = Self> + Mul<Output = Self> {
    const FIELD: Field;
    fn random(rng: &mut ChaCha20Rng) -> Self;
}

macro_rules! bench_field_impl {
    ($t:ty, $field:expr) => {
        impl BenchField for $t {
            const FIELD: Field = $field;
            fn random(rng: &mut ChaCha20Rng) -> Self {
                <$t>::random(rng)
            }
        }
    };
}
bench_field_impl!(Fr, Field::Fr);
bench_field_impl!(Fp, Field::Fp);
bench_field_impl!(Fp2, Field::Fp2);

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
fn bench_one<T: BenchField>(
    gpu: &Gpu,
    stream: &Stream,
    cfg: &BenchCfg<'_>,
    input: &[T],
    runs: usize,
) -> f64 {
    let input = &input[..cfg.n];
    let din = gpu.vram().from_host(input).expect("upload");
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
    stream.synchronize().expect("kernel execution");
    let out = dout.to_vec().expect("device -> host copy");
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
fn bench_expected<T: BenchField>(input: &[T], t: usize, chains: u32, iters: u32) -> T {
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
/// Returns the default configuration's G mul/s.
fn bench_field<T: BenchField>(
    gpu: &Gpu,
    stream: &Stream,
    chains: u32,
    iters: u32,
    ceiling: f64,
) -> f64 {
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
    let mut default_rate = 0.0;
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
            default_rate = g;
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
    default_rate
}

fn main() {
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
    let mut summary = Summary::default();
    let fr = bench_field::<Fr>(&gpu, &stream, chains[0], 256, ceiling);
    summary.add_rate("Fr mul (sppark)", fr, Field::Fr.sppark_h200_gmul_per_s());
    let fp = bench_field::<Fp>(&gpu, &stream, chains[1], 128, ceiling);
    summary.add_rate("Fp mul (sppark)", fp, Field::Fp.sppark_h200_gmul_per_s());
    let fp2 = bench_field::<Fp2>(&gpu, &stream, chains[2], 64, ceiling);
    summary.add_rate("Fp2 mul (sppark)", fp2, Field::Fp2.sppark_h200_gmul_per_s());
    summary.print("field throughput");
}
