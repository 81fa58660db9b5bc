//! GPU MSM window bench: one resident MSM per candidate window at n = 2^16..2^26 (G2 to
//! 2^24), full-width and 70% 0/1 scalars, median of 3; prints the rows for `MEASURED_WINDOWS`
//! (crates/msm/src/gpu.rs). Every result is checked: against the CPU MSM up to 2^22, and all
//! windows against each other. `cargo bench -p cuzk-benches --bench gpu_msm_windows`.

#![forbid(unsafe_code)]

use cuzk_benches::{check, gpu};
use cuzk_field::{Fr, G1Affine, G2Affine};
use cuzk_gpu::Gpu;
use cuzk_msm::gpu::{GpuMsm, Plan};
use cuzk_msm::testing::{self, ScalarKind};
use cuzk_msm::{Group, MsmPoint, cpu};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

/// Times one resident MSM per candidate window at each n (median of 3 after a warm-up) and
/// prints machine-readable lines:
///   `msm_window curve=.. n_log2=.. kind=.. general=.. general_log2=.. c=.. ms=..`
///   `msm_window_best curve=.. n_log2=.. kind=.. general_log2=.. best_c=.. best_ms=.. chosen_c=.. chosen_ms=..`
///   `msm_window_row (Group::G1, 23.13, 21),` — the rows for `MEASURED_WINDOWS`
///   (crates/msm/src/gpu.rs), each measured point's best c from the midpoint to the previous.
/// Every result is checked: against the CPU MSM up to 2^22, and all windows against each other.
/// `CUZK_MSM_WINDOWS_LOGS=24,26` measures only those log2 n (even values 16..=26; G2 stops at
/// 24); unset: all of them (~3 minutes on an H200). The printed rows then cover only those
/// sizes: merge them into the table by hand.
fn main() {
    let g = gpu();
    let mut rng = ChaCha20Rng::seed_from_u64(56);
    let mut best = Vec::new();
    let selected: Option<Vec<u32>> = std::env::var("CUZK_MSM_WINDOWS_LOGS").ok().map(|v| {
        v.split(',')
            .filter_map(|x| x.trim().parse::<u32>().ok())
            .collect()
    });
    let want = |log: u32| selected.as_ref().is_none_or(|s| s.contains(&log));
    if let Some(s) = &selected {
        println!("msm_window sizes: log2 n in {s:?} (CUZK_MSM_WINDOWS_LOGS)");
    }
    // G1 2^26 needs ~20 GB (points, scalars, canon, a c = 22 scratch).
    let budget_max = if g.vram().budget().available() >= 24 << 30 {
        26
    } else {
        24
    };
    let g1_logs: Vec<u32> = (16..=budget_max).step_by(2).filter(|&l| want(l)).collect();
    let g2_logs: Vec<u32> = (16..=24).step_by(2).filter(|&l| want(l)).collect();
    let g1_max = g1_logs.iter().chain(&g2_logs).copied().max().unwrap_or(16);
    let sc = [
        (
            ScalarKind::Random,
            testing::random_scalars(1 << g1_max, ScalarKind::Random, &mut rng),
        ),
        (
            ScalarKind::Mostly01,
            testing::random_scalars(1 << g1_max, ScalarKind::Mostly01, &mut rng),
        ),
    ];
    if !g1_logs.is_empty() {
        let g1: Vec<G1Affine> = testing::random_points(
            1 << g1_logs[g1_logs.len() - 1],
            &mut ChaCha20Rng::seed_from_u64(26),
        );
        for &log in &g1_logs {
            windows_at(&g, &g1[..1 << log], log, &sc, &mut best);
        }
    }
    if let Some(&g2_max) = g2_logs.last() {
        let g2: Vec<G2Affine> = testing::random_points(1 << g2_max, &mut rng);
        for &log in &g2_logs {
            windows_at(&g, &g2[..1 << log], log, &sc, &mut best);
        }
    }
    for group in [Group::G1, Group::G2] {
        let mut pts: Vec<(f64, u32)> = best
            .iter()
            .filter(|b: &&(Group, f64, u32)| b.0 == group)
            .map(|b| (b.1, b.2))
            .collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        for (i, &(l, c)) in pts.iter().enumerate() {
            let from = if i == 0 {
                l - 1.0
            } else {
                (pts[i - 1].0 + l) / 2.0
            };
            println!(
                "msm_window_row    (Group::{group:?}, {from:.2}, {c}), // measured best at log2 general {l:.2}"
            );
        }
    }
}

fn windows_at<P: MsmPoint>(
    g: &Gpu,
    pts: &[P],
    log: u32,
    sc: &[(ScalarKind, Vec<Fr>)],
    best: &mut Vec<(Group, f64, u32)>,
) {
    let n = pts.len();
    let curve = format!("{:?}", P::GROUP);
    let mut ctx = GpuMsm::resident(g, pts).unwrap();
    for (kind, s) in sc {
        let s = &s[..n];
        let general = s.iter().filter(|&&x| x != Fr::ZERO && x != Fr::ONE).count();
        let gl = (general as f64).log2();
        let dev = g.vram().from_host(s).unwrap();
        ctx.set_window_bits(None);
        let chosen_c = Plan::choose_window_for(P::GROUP, general);
        let want = if log <= 22 {
            cpu::msm(pts, s).unwrap()
        } else {
            ctx.msm_device(&dev).unwrap()
        };
        if log <= 22 {
            check(
                ctx.msm_device(&dev).unwrap() == want,
                &format!("{curve} 2^{log} {kind:?}"),
            );
        }
        let mut times = Vec::new();
        for c in log.saturating_sub(8).max(10)..=log.min(22) {
            ctx.set_window_bits(Some(c));
            assert_eq!(
                ctx.msm_device(&dev).unwrap(),
                want,
                "{curve} 2^{log} {kind:?} c = {c}"
            );
            let ms = g.median_ms(ctx.stream(), 3, || {
                ctx.msm_device(&dev).unwrap();
            });
            let ms = ms.unwrap();
            println!(
                "msm_window curve={curve} n_log2={log} kind={kind:?} general={general} general_log2={gl:.2} c={c} ms={ms:.3}"
            );
            times.push((c, ms));
        }
        let &(bc, bms) = times.iter().min_by(|a, b| a.1.total_cmp(&b.1)).unwrap();
        let chosen_ms = times
            .iter()
            .find(|t| t.0 == chosen_c)
            .map_or(f64::NAN, |t| t.1);
        println!(
            "msm_window_best curve={curve} n_log2={log} kind={kind:?} general_log2={gl:.2} best_c={bc} best_ms={bms:.3} chosen_c={chosen_c} chosen_ms={chosen_ms:.3}"
        );
        best.push((P::GROUP, gl, bc));
    }
}
