//! Plans and windows on the CPU (no GPU needed).

use super::*;

#[test]
fn window_choice_grows_with_n() {
    let cs: Vec<u32> = [1usize << 10, 1 << 16, 1 << 20, 1 << 24]
        .iter()
        .map(|&m| Plan::model_window(m))
        .collect();
    assert!(cs.windows(2).all(|w| w[0] <= w[1]), "{cs:?}");
    assert_eq!(Plan::model_window(1 << 20), 16);
    assert!(cs[3] >= 18, "{cs:?}");
    for g in [Group::G1, Group::G2] {
        let cs: Vec<u32> = (0..=27)
            .map(|l| Plan::choose_window_for(g, 1 << l))
            .collect();
        assert!(
            cs.iter().all(|c| (2..=MAX_WINDOW_BITS).contains(c)),
            "{cs:?}"
        );
    }
}

#[test]
fn window_table_is_well_formed() {
    for g in [Group::G1, Group::G2] {
        let rows: Vec<_> = MEASURED_WINDOWS.iter().filter(|r| r.0 == g).collect();
        assert!(
            rows.windows(2).all(|w| w[0].1 < w[1].1),
            "{g:?} rows must be sorted by log2"
        );
        assert!(
            rows.iter()
                .all(|r| (2..=MAX_WINDOW_BITS).contains(&r.2) && r.1 >= 0.0 && r.1 <= 32.0),
            "{g:?}"
        );
    }
}

#[test]
fn window_table_lookup() {
    let t = [
        (Group::G1, 16.00, 13),
        (Group::G1, 19.00, 17),
        (Group::G1, 23.00, 21),
    ];
    assert_eq!(
        table_window(&t, Group::G1, (1 << 16) - 1),
        None,
        "below: model"
    );
    assert_eq!(table_window(&t, Group::G1, 1 << 16), Some(13));
    assert_eq!(table_window(&t, Group::G1, (1 << 19) - 1), Some(13));
    assert_eq!(table_window(&t, Group::G1, 1 << 19), Some(17));
    assert_eq!(table_window(&t, Group::G1, 1 << 22), Some(17));
    assert_eq!(
        table_window(&t, Group::G1, 1 << 27),
        Some(21),
        "clamped above"
    );
    assert_eq!(table_window(&t, Group::G2, 1 << 20), None, "no rows: model");
    assert_eq!(table_window(&t, Group::G1, 0), None);
}

#[test]
fn plan_sizes_are_consistent() {
    // One wave of groups with work (the top window's groups past its reachable keys
    // have none), nearly all of it used (up to the rounding of the group length).
    for lg in [20, 24] {
        let p = Plan::new(1 << lg, 1 << lg, None, 132);
        let reach = k::top_window_keys(p.c);
        let busy = (p.nwin - 1) * p.groups() + reach.div_ceil(p.group);
        assert!(busy <= 132 * THREADS_PER_SM, "2^{lg}: {busy}");
        assert!(busy > 132 * THREADS_PER_SM * 95 / 100, "2^{lg}: {busy}");
    }
    let p = Plan::new(1 << 20, 1 << 20, None, 132);
    assert!(p.nwin * p.c as usize >= 256);
    assert!(p.group >= 1 && p.group <= p.buckets_per_window);
    assert!(
        (p.groups() - 1) * p.group < p.buckets_per_window,
        "no empty group"
    );
    assert!(p.threads >= 1 && p.threads <= 132 * THREADS_PER_SM);
    let tiny = Plan::new(0, 3, None, 132);
    assert_eq!(tiny.threads, 1);
    assert!(tiny.sorted_cap >= 1);
}

/// Level-0 threads: one wave while slices are short, up to `acc_waves` waves of slices of
/// at least 256 entries for large MSMs.
#[test]
fn accumulation_waves_only_for_long_slices() {
    let sm = 132;
    let wave = |cv: Curve| sm * cv.resident_threads_per_sm();
    let threads = |n: usize, cv| Plan::for_curve(n, n, None, sm, cv).threads;
    assert_eq!(threads(1 << 20, Curve::G1), wave(Curve::G1));
    assert_eq!(threads(1 << 24, Curve::G1), 8 * wave(Curve::G1));
    assert_eq!(threads(1 << 26, Curve::G1), 8 * wave(Curve::G1));
    assert_eq!(threads(1 << 24, Curve::G2), 2 * wave(Curve::G2));
    let p = Plan::for_curve(1 << 22, 1 << 22, None, sm, Curve::G1);
    assert!(p.threads > wave(Curve::G1) && p.threads < 8 * wave(Curve::G1));
    assert!(p.sorted_cap / p.threads >= 256);
    let small = Plan::for_curve(100, 100, None, sm, Curve::G1);
    assert_eq!(small.threads, 100 * small.nwin / 16);
}

/// What groth16 reserves per MSM (`Plan::new(len, len, None, sm).scratch_bytes(curve)`)
/// bounds what a resident run allocates for every general count and curve.
#[test]
fn sizing_plan_bounds_every_run() {
    let scratch_lens_bytes = |p: &Plan, cv: Curve| -> u64 {
        let w = cv.xyzz_words();
        let nk = p.nkeys();
        let b = |elems: usize, size: usize| ((elems * size) as u64).div_ceil(256) * 256;
        b(p.sort_bins(), 4)
            + b(nk + 1, 4)
            + b(nk, 4)
            + b(p.sorted_cap, 4)
            + b(p.sort_bins() + 2, 4)
            + b((nk + 1) * w, 8)
            + b(2 * p.threads, 4)
            + b(2 * p.threads * w, 8)
            + b(p.level1(), 4)
            + b(p.level1() * w, 8)
            + b(p.sets * p.groups() * w, 8)
            + b(p.ones_threads * w, 8)
            + b(p.sets + 1, cv.jacobian_bytes())
    };
    for sm in [132usize, 108, 46] {
        for log in [0u32, 10, 14, 17, 18, 19, 20, 22, 23, 24, 25, 26, 27] {
            let n = 1usize << log;
            let sizing = Plan::new(n, n, None, sm);
            // general counts: powers of two, every table boundary +- 1, and n
            let mut gs: Vec<usize> = (0..=log).map(|l| 1usize << l).collect();
            for r in MEASURED_WINDOWS {
                let b = 2f64.powf(r.1) as usize;
                gs.extend([b.saturating_sub(1), b, b + 1]);
            }
            gs.extend((1..64).map(|i| n / 64 * i));
            gs.retain(|&g| g <= n);
            for cv in [Curve::G1, Curve::G2] {
                for &g in &gs {
                    let run = Plan::for_curve(g, n, None, sm, cv);
                    assert!(run.scratch_bytes(cv) >= scratch_lens_bytes(&run, cv));
                    assert!(
                        sizing.scratch_bytes(cv) >= run.scratch_bytes(cv),
                        "{cv:?} sm {sm} n 2^{log} general {g}: sizing {} < run {} (c = {})",
                        sizing.scratch_bytes(cv),
                        run.scratch_bytes(cv),
                        run.c
                    );
                }
            }
            // a fixed window is bounded too
            let fixed = Plan::new(n, n, Some(22), sm);
            for cv in [Curve::G1, Curve::G2] {
                let run = Plan::for_curve(n / 3, n, Some(22), sm, cv);
                assert!(fixed.scratch_bytes(cv) >= run.scratch_bytes(cv));
            }
        }
    }
}

/// The binned sort's fine bits: ~4K entries per bin for full windows, within what the
/// kernels accept (F <= c - 1, <= 10, F + index bits <= 31).
#[test]
fn sort_fine_bits() {
    let f = |general: usize, n: usize, c: u32| {
        Plan::for_curve(general, n, Some(c), 132, Curve::G1).sort_fine_bits
    };
    assert_eq!(f(1 << 24, 1 << 24, 20), 7); // 32 entries per key, bins of 4096
    assert_eq!(f(1 << 26, 1 << 26, 20), 5); // 128 per key
    assert_eq!(f(1 << 20, 1 << 20, 16), 7);
    assert_eq!(f(1 << 27, 1 << 27, 16), 0); // 4096 per key: one key per bin
    assert_eq!(f(1 << 27, 1 << 27, 22), 4); // 27 index bits leave 4 for the fine key
    assert_eq!(f(10, 1 << 20, 4), 3); // capped by c - 1
    // the top window at c = 20 reaches 0x73ee of 2^19 keys: bins of 2^(7-4)
    assert_eq!(k::top_window_keys(20), 0x73ee);
    let p = Plan::for_curve(1 << 24, 1 << 24, Some(20), 132, Curve::G1);
    assert_eq!(p.sort_top_fine_bits, 3);
    assert_eq!(k::top_window_keys(16), 0x73ee); // bits 240..256 again: nearly full
    assert_eq!(k::top_window_keys(13), 0xe7 + 1); // bits 247..256
    for log in 0..=27u32 {
        for c in 2..=MAX_WINDOW_BITS {
            let n = 1usize << log;
            let p = Plan::for_curve(n, n, Some(c), 132, Curve::G1);
            let (fb, ft) = (p.sort_fine_bits, p.sort_top_fine_bits);
            assert!(fb < c && fb <= k::SORT_MAX_FINE_BITS && fb + k::index_bits(n) <= 31);
            assert!(ft <= fb);
            let b = p.buckets_per_window;
            assert_eq!(
                p.sort_bins(),
                (p.nwin - 1) * (b >> fb) + (b >> ft),
                "c {c} n 2^{log}"
            );
        }
    }
}

/// Plans over precomputed copies: h = ⌈nwin / m⌉ full bucket sets (no reduced top set),
/// fine bits within the kernels' bounds for indices spanning the copies, ~4K entries per
/// bin, and the reduction's wave filled by the sets.
#[test]
fn folded_plans() {
    let sm = 132;
    let n = 1usize << 24;
    let p = Plan::folded(n, n, 20, 2, sm, Curve::G1);
    assert_eq!((p.nwin, p.sets, p.copies), (13, 7, 2));
    assert_eq!(p.nkeys(), 7 << 19);
    // 13/7 windows per set: ~59 entries per key, bins of 2^6 keys; Ft = F (full sets)
    assert_eq!((p.sort_fine_bits, p.sort_top_fine_bits), (6, 6));
    assert_eq!(p.sort_bins(), 7 << 13);
    assert_eq!(p.windows(n), Windows::folded(20, 2, n));
    assert_eq!(p.windows(n).index_bound(n), 2 * n);
    // the same sort and accumulation work as unfolded, fewer buckets
    let u = Plan::for_curve(n, n, Some(20), sm, Curve::G1);
    assert_eq!((u.sets, u.copies), (13, 1));
    assert_eq!((p.sorted_cap, p.threads), (u.sorted_cap, u.threads));
    let busy = p.sets * p.groups();
    assert!(busy <= sm * THREADS_PER_SM && busy > sm * THREADS_PER_SM * 95 / 100);
    assert!(
        u.nwin * u.groups() > busy,
        "unfolded: more groups (with empty ones)"
    );
    // full folding: one set of 13 windows
    let full = Plan::folded(n, n, 20, 13, sm, Curve::G2);
    assert_eq!(
        (full.sets, full.copies, full.sort_top_fine_bits),
        (1, 13, full.sort_fine_bits)
    );
    // 2^26 at 2 copies: indices need 27 bits, F <= 4
    let p26 = Plan::folded(1 << 26, 1 << 26, 20, 2, sm, Curve::G1);
    assert_eq!(k::index_bits(p26.windows(1 << 26).index_bound(1 << 26)), 27);
    assert_eq!(p26.sort_fine_bits, 4);
    for log in 0..=24u32 {
        for c in 2..=MAX_WINDOW_BITS {
            for m in [2usize, 3, 7, 200] {
                let n = (1usize << log) + 3;
                let p = Plan::folded(n, n, c, m, sm, Curve::G1);
                let win = p.windows(n);
                let bound = win.index_bound(n);
                if !win.indices_fit(n) {
                    continue; // rejected by the constructor (indices carry a sign bit)
                }
                assert_eq!((win.sets as usize, win.copies()), (p.sets, p.copies));
                assert!(p.copies <= m && p.copies * p.sets >= p.nwin);
                let (fb, ft) = (p.sort_fine_bits, p.sort_top_fine_bits);
                assert!(fb <= k::max_fine_bits(bound, c), "c {c} m {m} n 2^{log}");
                assert!(fb + k::index_bits(bound) <= 31 && fb < c);
                if p.sets < p.nwin {
                    assert_eq!(ft, fb, "folded sets are full: c {c} m {m}");
                }
                let b = p.buckets_per_window;
                assert_eq!(p.sort_bins(), (p.sets - 1) * (b >> fb) + (b >> ft));
                assert!(p.group >= 1 && (p.groups() - 1) * p.group < p.buckets_per_window);
            }
        }
    }
}

#[test]
fn combine_is_horner() {
    use cuzk_field::{G1Affine, G1Projective};
    let g = G1Projective::generator();
    // windows [g, 2g] with c = 3: g + 8 · 2g = 17 g
    let got = combine::<G1Affine>(&[g, g.double()], 3);
    assert_eq!(got, g * Fr::from_u64(17));
}
