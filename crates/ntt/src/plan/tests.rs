//! The plans and tables against the CPU transforms, through the kernel emulator.

use super::*;
use crate::{Domain, bit_reverse_index};
use rand::SeedableRng;

/// The kernels' thread mappings (kernels/ntt/ntt.cuh `pass`), for every tile geometry
/// k + lg_c = TILE_LG: where the radix-4 group remap applies, each warp's 32 groups share
/// j (so the j = 0 warps skip their w = 1 products) and the step still covers the tile
/// once; the load / store order of an R = 0 tile of groups puts each quarter-warp's
/// 16-byte accesses on 8 distinct bank groups and its global reads in runs.
#[test]
fn remapped_offsets_are_warp_uniform_and_group_tiles_conflict_free() {
    use emu::remap_group;
    let mut remapped = 0;
    for k in 2..=TILE_LG {
        let lg_c = TILE_LG - k;
        let nthr = 1u32 << (TILE_LG - 2);
        let odd = k & 1 == 1;
        for s in 0..k.div_ceil(2) {
            let lg_hi = k - 1 - 2 * s + u32::from(odd);
            if (odd && s == 0) || lg_hi < 3 {
                continue;
            }
            let lg_lo = lg_hi - 1;
            let hh = 1u32 << lg_lo;
            let q_of = |t: u32| remap_group(t >> lg_c, k, lg_lo, lg_c, nthr);
            if q_of(1 << lg_c) == 1 {
                continue; // not remapped
            }
            remapped += 1;
            let mut seen = vec![false; 1 << (k - 2 + lg_c)];
            for t in 0..nthr {
                let q = q_of(t);
                let i = ((q << lg_c) | (t & ((1 << lg_c) - 1))) as usize;
                assert!(!seen[i], "remap is a permutation");
                seen[i] = true;
                let warp0 = t & !31;
                assert_eq!(q & (hh - 1), q_of(warp0) & (hh - 1), "j uniform per warp");
            }
        }
        // The groups' load / store order (glo = 3 - lg_c low row bits first).
        let glo = 3u32.saturating_sub(lg_c);
        let place = |i: u32| {
            let row = ((i >> (glo + lg_c)) << glo) | (i & ((1 << glo) - 1));
            let cl = (i >> glo) & ((1 << lg_c) - 1);
            (row, cl)
        };
        let mut seen = vec![false; 1 << TILE_LG];
        for i in 0..1u32 << TILE_LG {
            let (row, cl) = place(i);
            let e = ((row << lg_c) | cl) as usize;
            assert!(!seen[e], "k {k}: the order covers the tile once");
            seen[e] = true;
        }
        for quarter in 0..(1u32 << TILE_LG) / 8 {
            let banks: std::collections::BTreeSet<u32> = (0..8)
                .map(|i| {
                    let (row, cl) = place(quarter * 8 + i);
                    ((row << lg_c) | cl) & 7
                })
                .collect();
            assert!(lg_c > 3 || banks.len() == 8, "k {k}: bank conflict");
        }
    }
    // the (8, 4) step of every tile with k >= 7, among others
    assert!(remapped >= 4, "{remapped}");
}

fn random(n: usize, seed: u64) -> Vec<Fr> {
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
    (0..n).map(|_| Fr::random(&mut rng)).collect()
}

fn cpu(d: &Domain, v: &mut [Fr], t: Transform) {
    d.transform_in_place(v, t).unwrap()
}

fn reorder(v: &[Fr], order: Order, lg_n: u32) -> Vec<Fr> {
    match order {
        Order::Natural => v.to_vec(),
        Order::BitReversed => (0..v.len())
            .map(|i| v[bit_reverse_index(i, lg_n)])
            .collect(),
    }
}

#[test]
fn split_override_is_checked_and_applies_to_its_size_only() {
    assert!(valid_split(&[10, 8, 6]) && valid_split(&[2, 10]));
    for bad in [&[][..], &[11, 7, 6], &[1, 10, 10, 3], &[0, 24]] {
        assert!(!valid_split(bad), "{bad:?}");
    }
    let over = [10u32, 8, 6];
    let bits = |lg: u32, dit: bool| -> Vec<u32> {
        let mut v: Vec<u32> = network_split(lg, dit, false, 0, 0, Some(&over))
            .iter()
            .map(|p| p.k)
            .collect();
        if dit {
            v.reverse();
        }
        v
    };
    assert_eq!(bits(24, false), vec![10, 8, 6]);
    assert_eq!(bits(24, true), vec![10, 8, 6]);
    assert_eq!(bits(26, false), split(26));
    let (a, b, c) = quotient_plan_split(24, Some(&over));
    for net in [a, b, c] {
        let mut ks: Vec<u32> = net.iter().map(|p| p.k).collect();
        if net[0].flags & F_DIT != 0 {
            ks.reverse();
        }
        assert_eq!(ks, vec![10, 8, 6]);
    }
}

#[test]
fn splits_are_balanced() {
    assert_eq!(split(24), vec![8, 8, 8]);
    assert_eq!(split(26), vec![8, 9, 9]);
    assert_eq!(split(28), vec![9, 9, 10]);
    assert_eq!(split(10), vec![10]);
    assert_eq!(split(11), vec![5, 6]);
    assert_eq!(split(1), vec![1]);
    for lg in 1..=28 {
        let s = split(lg);
        assert_eq!(s.iter().sum::<u32>(), lg);
        assert!(s.iter().all(|&k| (1..=TILE_LG).contains(&k)));
    }
}

#[test]
fn tables_have_the_layout_of_the_kernels() {
    let t = tables();
    assert_eq!(t.len(), T_LEN);
    let w = Fr::root_of_unity_of_order(MAX_LG).unwrap();
    assert_eq!(emu_pow(&t, T_FWD_LO, 123_456_789), w.pow(&[123_456_789]));
    assert_eq!(emu_pow(&t, T_INV_LO, 5) * w.pow(&[5]), Fr::ONE);
    assert_eq!(
        emu_pow(&t, T_G_LO, (1 << 28) - 1),
        Fr::from_u64(7).pow(&[(1 << 28) - 1])
    );
    assert_eq!(t[T_FWD_INT + 1], Fr::root_of_unity_of_order(10).unwrap());
    assert_eq!(t[T_NINV + 20] * Fr::from_u64(1 << 20), Fr::ONE);
    assert_eq!(
        t[T_FWD_DIR + 12_345],
        w.pow(&[12_345 << (MAX_LG - DIRECT_LG)])
    );
    assert_eq!(t[T_INV_DIR + 777] * t[T_FWD_DIR + 777], Fr::ONE);
    assert_eq!(GN_LEN, (1 << 15) + 13);
    let (g, n_inv) = (Fr::from_u64(7), |lg: u32| {
        Fr::from_u64(1 << lg).inverse().unwrap()
    });
    assert_eq!(t[T_GN_HI + gn_off(3)], n_inv(3));
    assert_eq!(
        t[T_GN_HI + gn_off(20) + 5],
        g.pow(&[5 << SPLIT_BITS]) * n_inv(20)
    );
    assert_eq!(
        t[T_GIN_HI + gn_off(28) + (1 << 14) - 1] * g.pow(&[((1 << 14) - 1) << SPLIT_BITS]),
        n_inv(28)
    );
    assert_eq!(
        t[T_FWD_DIR + 1],
        Fr::root_of_unity_of_order(DIRECT_LG).unwrap()
    );
    // K_L = 1/(Z·n^3): Z = −2 (half-root coset) up to 2^27, g^n − 1 at 2^28; n = 2^L.
    let n_inv3 = |lg: u32| n_inv(lg) * n_inv(lg) * n_inv(lg);
    assert_eq!(t[T_HK + 16] * -Fr::from_u64(2), n_inv3(16));
    assert_eq!(t[T_HK + 27] * -Fr::from_u64(2), n_inv3(27));
    assert_eq!(
        t[T_HK + 28],
        Domain::new(28).unwrap().vanishing_on_coset_inverse() * n_inv3(28)
    );
    assert_eq!(t[T_HN + 20], Fr::from_u64(1 << 20));
    // T_HTW: the quotient constants times w_2048^j for a, b, c of each L < MAX_LG, after
    // everything else.
    assert_eq!(T_HTW + HTW_LEN, T_LEN);
    assert_eq!(HTW_LEN, 3 * 28 * 1024);
    let w2048 = Fr::root_of_unity_of_order(INT_LG + 1).unwrap();
    for (lg, j) in [(0usize, 0u64), (1, 1), (16, 513), (24, 1000), (27, 1023)] {
        let at = |y: usize| t[T_HTW + ((3 * lg + y) << INT_LG) + j as usize];
        let (k, n) = (t[T_HK + lg], Fr::from_u64(1 << lg));
        assert_eq!(at(0), k * w2048.pow(&[j]), "a 2^{lg} j {j}");
        assert_eq!(at(1), w2048.pow(&[j]), "b 2^{lg} j {j}");
        assert_eq!(at(2), n * k * w2048.pow(&[j]), "c 2^{lg} j {j}");
    }
    // The unscaled entries agree with the internal table on the even exponents.
    assert_eq!(t[T_HTW + (1 << INT_LG) + 2 * 77], t[T_FWD_INT + 77]);
    // w_2N for N = 2^27 is in the direct table's range of orders.
    assert_eq!(
        t[T_FWD_DIR + (1 << (DIRECT_LG - 1))],
        -Fr::ONE,
        "w_(2^DIRECT_LG)^(2^(DIRECT_LG-1)) = -1"
    );
}

/// The roots table's index math (kernels' `pass_twiddle`, mirrored by `emu::roots_twiddle`)
/// against the split tables, at order 20 for every twiddle order it serves, both ways.
#[test]
fn roots_table_gives_the_split_twiddles() {
    let t = tables();
    let lg = DIRECT_LG + 1;
    let w = Fr::root_of_unity_of_order(lg).unwrap();
    let mut roots = vec![Fr::ONE; 1 << (lg - 1)];
    for i in 1..roots.len() {
        roots[i] = roots[i - 1] * w;
    }
    let mut x = 0x9e37_79b9_u32;
    for ord in [1, DIRECT_LG, lg] {
        for j in 0..200u32 {
            x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            let e = match j {
                0 => 0,
                1 => 1 << (ord - 1), // -1
                _ => x >> (32 - ord),
            };
            let ex = e << (MAX_LG - ord);
            for inv in [false, true] {
                let want = emu_pow(&t, if inv { T_INV_LO } else { T_FWD_LO }, ex);
                let got = emu::roots_twiddle(&roots, lg, inv, ex);
                assert_eq!(got, want, "ord {ord} e {e} inv {inv}");
            }
        }
    }
}

/// Which order of roots table a plan asks for: the largest store-side twiddle order above
/// DIRECT_LG, under the cap.
#[test]
fn roots_order_of_plans() {
    use crate::Order::*;
    let fwd = |lg| plan_split(lg, Transform::Forward, Natural, BitReversed, None).passes;
    assert_eq!(roots_order(&fwd(19), MAX_LG), 0);
    assert_eq!(roots_order(&fwd(20), MAX_LG), 20);
    assert_eq!(roots_order(&fwd(24), MAX_LG), 24);
    assert_eq!(roots_order(&fwd(26), MAX_LG), 26);
    assert_eq!(
        roots_order(&fwd(26), 25),
        0,
        "only the first pass is above 19"
    );
    let h = |lg| {
        let (a, b, c) = quotient_plan_split(lg, None);
        roots_order(&[a, b, c].concat(), MAX_LG)
    };
    assert_eq!(
        h(24),
        25,
        "the half-root coset's odd twiddles are of order 2N"
    );
    assert_eq!(h(27), 28);
    assert_eq!(roots_cap_from(None), MAX_LG);
    assert_eq!(roots_cap_from(Some(0)), 0);
    assert_eq!(roots_cap_from(Some(24)), 24);
    assert_eq!(roots_cap_from(Some(40)), MAX_LG);
}

fn emu_pow(t: &[Fr], off: usize, e: u32) -> Fr {
    let lo = t[off + (e as usize & (SPLIT - 1))];
    lo * t[off + SPLIT + (e >> SPLIT_BITS) as usize]
}

/// Test vectors for `kernels/ntt/host_emu` (the CUDA sources run on the host with emulated
/// threads): `CUZK_NTT_DUMP=dir cargo test --release -p cuzk-ntt dump_host_emu_vectors --
/// --ignored`. Writes the table buffer and, per case, the plan, input and CPU result.
#[test]
#[ignore = "writes files for kernels/ntt/host_emu"]
fn dump_host_emu_vectors() {
    use std::io::Write;
    let dir = std::path::PathBuf::from(std::env::var("CUZK_NTT_DUMP").expect("CUZK_NTT_DUMP"));
    std::fs::create_dir_all(&dir).unwrap();
    let bytes = |v: &[Fr]| -> Vec<u8> { bytemuck::cast_slice(v).to_vec() };
    std::fs::write(dir.join("tables.bin"), bytes(&tables())).unwrap();
    let mut list = std::fs::File::create(dir.join("cases.txt")).unwrap();
    // "id lg_n batch permute_before permute_after passes (radix4 s0 k lg_c flags)*"
    let write_case = |list: &mut std::fs::File, i: usize, lg_n: u32, batch: usize, p: &Plan| {
        write!(
            list,
            "{i} {lg_n} {batch} {} {} {}",
            u8::from(p.permute_before),
            u8::from(p.permute_after),
            p.passes.len()
        )
        .unwrap();
        for q in &p.passes {
            // 0 radix-2, 1 the radix-4 kernel specialized for the flags.
            let r4 = u8::from(q.radix4());
            write!(list, " {r4} {} {} {} {}", q.s0, q.k, q.lg_c, q.flags).unwrap();
        }
        writeln!(list).unwrap();
    };
    let cases = [
        (2u32, Transform::Forward, Order::Natural, Order::BitReversed),
        (3, Transform::Inverse, Order::BitReversed, Order::Natural),
        (5, Transform::CosetForward, Order::Natural, Order::Natural),
        (
            10,
            Transform::CosetInverse,
            Order::BitReversed,
            Order::BitReversed,
        ),
        (11, Transform::Forward, Order::Natural, Order::Natural),
        (12, Transform::CosetInverse, Order::Natural, Order::Natural),
        (
            13,
            Transform::CosetForward,
            Order::BitReversed,
            Order::Natural,
        ),
        (16, Transform::Forward, Order::Natural, Order::Natural),
        // The pre-scaled DIF pass with the twiddle (cuzk_ntt_pass4_dif_tw_pre).
        (14, Transform::CosetForward, Order::Natural, Order::Natural),
        (
            17,
            Transform::CosetInverse,
            Order::BitReversed,
            Order::Natural,
        ),
        (19, Transform::Inverse, Order::Natural, Order::Natural),
        (
            20,
            Transform::CosetForward,
            Order::BitReversed,
            Order::BitReversed,
        ),
        (21, Transform::Forward, Order::BitReversed, Order::Natural),
    ];
    for (i, (lg_n, tr, input, output)) in cases.into_iter().enumerate() {
        let d = Domain::new(lg_n).unwrap();
        let n = d.size();
        // Batches of 2 to 4: polynomials 1, 2 and 3 reach the kernels through the data1 and
        // data2 arguments (`poly_base`).
        let batch = match lg_n {
            0..=5 => 4,
            6..=10 => 3,
            11..=12 => 2,
            _ => 1,
        };
        let x = random(n * batch, 1000 + i as u64);
        let dev: Vec<Fr> = x.chunks(n).flat_map(|p| reorder(p, input, lg_n)).collect();
        let want: Vec<Fr> = x
            .chunks(n)
            .flat_map(|p| {
                let mut w = p.to_vec();
                cpu(&d, &mut w, tr);
                reorder(&w, output, lg_n)
            })
            .collect();
        std::fs::write(dir.join(format!("in{i}.bin")), bytes(&dev)).unwrap();
        std::fs::write(dir.join(format!("want{i}.bin")), bytes(&want)).unwrap();
        let p = plan_split(lg_n, tr, input, output, None);
        write_case(&mut list, i, lg_n, batch, &p);
    }
    // The quotient pipeline: two "Q"-prefixed lines per case: the passes run once over
    // a, b, c (grid.y = 3, three separate buffers), the fused quotient with bit-reversed
    // output (element-wise, and tiled from 2^10, both checked), the DIT back. Satisfied
    // inputs (c = a∘b, so Z divides A·B − C and H does not depend on the coset) against
    // `Domain::quotient` (g coset), odd ones (random c) against the half-root reference.
    // Last field: a split override (DIF-order bits) or none.
    let quotient_cases: [(usize, u32, bool, &[u32]); 9] = [
        (110, 4, true, &[]),
        (111, 9, true, &[]),
        (112, 10, true, &[]),
        (113, 11, true, &[]),
        (114, 12, false, &[]),
        (115, 17, true, &[]),
        (116, 13, true, &[3, 6, 4]),
        (117, 14, false, &[2, 10, 2]),
        (118, 15, true, &[7, 8]),
    ];
    for (i, lg_n, satisfied, over) in quotient_cases {
        let d = Domain::new(lg_n).unwrap();
        let n = d.size();
        let (a, b, c) = quotient_inputs(n, 7 + i as u64, satisfied);
        let want = if satisfied {
            d.quotient(&a, &b, &c).unwrap()
        } else {
            d.gpu_coset_quotient(&a, &b, &c).unwrap()
        };
        for (name, v) in [("a", &a), ("b", &b), ("c", &c), ("want", &want)] {
            std::fs::write(dir.join(format!("{name}{i}.bin")), bytes(v)).unwrap();
        }
        let over = (!over.is_empty()).then_some(over);
        let (to_coeffs, to_coset, back) = quotient_plan_split(lg_n, over);
        for passes in [[to_coeffs, to_coset].concat(), back] {
            let p = Plan {
                permute_before: false,
                passes,
                permute_after: false,
            };
            write!(list, "Q ").unwrap();
            write_case(&mut list, i, lg_n, 1, &p);
        }
    }
}

/// Inputs of the quotient tests: random a, b and c, or (`satisfied`) c = a∘b, so that Z
/// divides A·B − C (as for every satisfied Groth16 witness) and H is the same on every coset.
fn quotient_inputs(n: usize, seed: u64, satisfied: bool) -> (Vec<Fr>, Vec<Fr>, Vec<Fr>) {
    let (a, b) = (random(n, seed), random(n, seed + 1));
    let c = if satisfied {
        a.iter().zip(&b).map(|(x, y)| *x * *y).collect()
    } else {
        random(n, seed + 2)
    };
    (a, b, c)
}

#[test]
fn tiled_bit_reverse_is_the_permutation() {
    for lg_n in [10u32, 11, 12, 13, 16] {
        let n = 1usize << lg_n;
        let x = random(2 * n, u64::from(lg_n));
        let mut got = x.clone();
        emu::bit_reverse_tiled(&mut got, lg_n);
        let mut want = x;
        emu::bit_reverse(&mut want, lg_n);
        assert!(got == want, "2^{lg_n}");
    }
}

/// Every radix-4 pass of every plan has its specialized kernel (the launcher refuses a
/// flag set none covers).
#[test]
fn every_plan_pass_has_a_specialized_kernel() {
    let mut passes = Vec::new();
    for lg in 1..=28 {
        for tr in Transform::ALL {
            for input in [Order::Natural, Order::BitReversed] {
                for output in [Order::Natural, Order::BitReversed] {
                    passes.extend(plan_split(lg, tr, input, output, None).passes);
                }
            }
        }
        for half_root in [false, lg <= H_HALF_ROOT_MAX_LG] {
            let (a, b, c) = quotient_plan_coset(lg, None, half_root);
            passes.extend(a.into_iter().chain(b).chain(c));
        }
    }
    for p in passes.iter().filter(|p| p.radix4()) {
        assert!(crate::kernels::specialized_name(p.flags).is_some(), "{p:?}");
    }
}

/// Only the one-bit pass of a size-2 transform runs on the radix-2 kernel.
#[test]
fn radix4_everywhere_but_size_2() {
    for lg in 1..=28 {
        for p in plan_split(lg, Transform::Forward, Order::Natural, Order::Natural, None).passes {
            assert_eq!(p.radix4(), lg > 1, "2^{lg} {p:?}");
        }
    }
}

/// Every transform, every order pair, sizes covering one, two and three passes, batches.
#[test]
fn emulated_kernels_match_cpu() {
    let t = tables();
    // 16 = 8+8 and 18 = 9+9 are the pass sizes of 2^24 and 2^26/2^27.
    for lg_n in [1u32, 2, 3, 4, 5, 10, 11, 12, 16, 18, 21] {
        let d = Domain::new(lg_n).unwrap();
        let n = d.size();
        let batch = if lg_n <= 11 { 3 } else { 1 };
        for tr in Transform::ALL {
            for input in [Order::Natural, Order::BitReversed] {
                for output in [Order::Natural, Order::BitReversed] {
                    // The three-pass size once for DIF and once for DIT, all fused scalings.
                    let big_ok = (tr, input, output)
                        == (Transform::CosetInverse, Order::Natural, Order::Natural)
                        || (tr, input, output)
                            == (Transform::CosetForward, Order::BitReversed, Order::Natural);
                    if lg_n >= 16 && !big_ok {
                        continue;
                    }
                    let x = random(n * batch, u64::from(lg_n) * 31 + tr as u64);
                    let mut dev: Vec<Fr> =
                        x.chunks(n).flat_map(|p| reorder(p, input, lg_n)).collect();
                    let p = plan_split(lg_n, tr, input, output, None);
                    emu::run(&mut dev, &t, lg_n, &p);
                    for (b, poly) in x.chunks(n).enumerate() {
                        let mut want = poly.to_vec();
                        cpu(&d, &mut want, tr);
                        let want = reorder(&want, output, lg_n);
                        assert!(
                            dev[b * n..(b + 1) * n] == want[..],
                            "2^{lg_n} {tr:?} {input:?}->{output:?} poly {b}"
                        );
                    }
                }
            }
        }
    }
}

/// The H pipeline as gpu.rs runs it, on the emulated kernels: the inputs' passes, the fused
/// quotient with its bit-reversed output, the DIT `back`; on the half-root coset or (what
/// 2^28 runs, here at any size with K computed for the size) the g coset.
fn emulated_quotient(
    t: &[Fr],
    lg_n: u32,
    [a, b, c]: [&[Fr]; 3],
    over: Option<&[u32]>,
    half_root: bool,
) -> Vec<Fr> {
    let (to_coeffs, to_coset, back) = quotient_plan_coset(lg_n, over, half_root);
    assert!(back.iter().chain(&to_coset).all(|p| p.flags & F_DIT != 0));
    assert!(to_coeffs.iter().all(|p| p.flags & F_DIT == 0));
    // No 1/n anywhere in the passes: it is in K.
    let all = to_coeffs.iter().chain(&to_coset).chain(&back);
    assert!(
        all.clone()
            .all(|p| p.flags & (F_PRE_NINV | F_POST_NINV) == 0)
    );
    // Every twiddle at a store: the last pass of each transform stores none, except
    // to_coeffs' on the half-root coset (to_coset's R = 0 twiddle, forward, odd rows).
    for net in [&to_coset, &back] {
        assert_eq!(net.last().unwrap().flags & F_TWIDDLE, 0);
    }
    let tw_last = to_coeffs.last().unwrap().flags;
    // The quotient's constants folded into that store (k ≤ INT_LG on the half-root coset).
    let fold = tw_last & F_TW_FOLD != 0;
    assert!(all.clone().filter(|p| p.flags & F_TW_FOLD != 0).count() <= 1);
    if half_root {
        assert!(all.clone().all(|p| p.flags & (F_PRE_G | F_POST_GI) == 0));
        let last_k = to_coeffs.last().unwrap().k;
        assert_eq!(fold, last_k <= INT_LG);
        assert_eq!(
            tw_last & TW_BITS & !F_TW_FOLD,
            F_TWIDDLE | F_ODD_ROW | tw_geometry(last_k, 0)
        );
        let n = to_coset.len();
        assert!(to_coset[..n - 1].iter().all(|p| p.flags & F_ODD_ROW != 0));
        assert!(to_coset.iter().all(|p| p.flags & F_TW_INV == 0));
        assert!(back.last().unwrap().flags & F_POST_ROW != 0);
    } else {
        assert_eq!(tw_last & F_TWIDDLE, 0);
    }
    // The passes run over a, b, c as polynomials 0, 1, 2 of one launch (grid.y = 3).
    let n = 1usize << lg_n;
    let mut abc = [a, b, c].concat();
    for p in to_coeffs.iter().chain(&to_coset) {
        emu::pass(&mut abc, t, lg_n, *p);
    }
    let (mut a, b, c) = (
        abc[..n].to_vec(),
        abc[n..2 * n].to_vec(),
        abc[2 * n..].to_vec(),
    );
    let nk = if fold {
        None
    } else if half_root {
        Some((t[T_HN + lg_n as usize], t[T_HK + lg_n as usize]))
    } else {
        let d = Domain::new(lg_n).unwrap();
        let n_inv = Fr::from_u64(1 << lg_n).inverse().unwrap();
        Some((
            Fr::from_u64(1 << lg_n),
            d.vanishing_on_coset_inverse() * n_inv * n_inv * n_inv,
        ))
    };
    emu::quotient_permute(&mut a, &b, &c, nk, lg_n);
    for p in &back {
        emu::pass(&mut a, t, lg_n, *p);
    }
    a
}

#[test]
fn emulated_quotient_matches_cpu() {
    let t = tables();
    // Below (element-wise fused kernel) and above (tiled) TILED_BITREV_MIN_LG, odd sizes,
    // one to three passes; satisfied inputs against `Domain::quotient` on both cosets,
    // random ones against the reference of each coset.
    for lg_n in [1u32, 2, 3, 4, 9, 10, 11, 12, 13, 21] {
        let d = Domain::new(lg_n).unwrap();
        let n = d.size();
        for satisfied in [true, false] {
            if lg_n == 21 && !satisfied {
                continue;
            }
            let (a, b, c) = quotient_inputs(n, u64::from(lg_n), satisfied);
            let want_g = d.quotient(&a, &b, &c).unwrap();
            let want_s = if satisfied {
                want_g.clone()
            } else {
                d.gpu_coset_quotient(&a, &b, &c).unwrap()
            };
            for (half_root, want) in [(true, &want_s), (false, &want_g)] {
                let got = emulated_quotient(&t, lg_n, [&a, &b, &c], None, half_root);
                assert!(
                    got == *want,
                    "2^{lg_n} half-root {half_root} satisfied {satisfied}"
                );
            }
        }
    }
    // Split overrides (odd pass sizes in every position, the radix-2 minimum excluded).
    for (lg_n, over) in [
        (13u32, &[3u32, 6, 4][..]),
        (12, &[2, 8, 2]),
        (11, &[4, 7]),
        (14, &[5, 2, 2, 5]),
    ] {
        let d = Domain::new(lg_n).unwrap();
        let (a, b, c) = quotient_inputs(d.size(), 90 + u64::from(lg_n), true);
        let want = d.quotient(&a, &b, &c).unwrap();
        for half_root in [true, false] {
            let got = emulated_quotient(&t, lg_n, [&a, &b, &c], Some(over), half_root);
            assert!(got == want, "2^{lg_n} split {over:?} half-root {half_root}");
        }
    }
}

/// `F_TW_FOLD` is on to_coeffs' last pass exactly on the half-root coset (not the g coset
/// of 2^MAX_LG), and on no other pass.
#[test]
fn tw_fold_only_on_the_half_root_coset() {
    for (lg_n, half_root) in [(24u32, true), (27, true), (24, false), (1, true)] {
        let (to_coeffs, to_coset, back) = quotient_plan_coset(lg_n, None, half_root);
        let last = to_coeffs.last().unwrap();
        assert_eq!(last.flags & F_TW_FOLD != 0, half_root, "2^{lg_n}");
        let n = to_coeffs.len();
        let others = to_coeffs[..n - 1].iter().chain(&to_coset).chain(&back);
        assert!(others.clone().all(|p| p.flags & F_TW_FOLD == 0));
    }
}

/// Both fused quotient kernels are the quotient followed by the bit reversal, in place.
#[test]
fn fused_quotient_bit_reverse_is_quotient_then_permutation() {
    for lg_n in [0u32, 1, 3, 10, 11, 14] {
        let n = 1usize << lg_n;
        let (a, b, c) = (random(n, 11), random(n, 12), random(n, 13));
        let (nn, kk) = (random(1, 14)[0], random(1, 15)[0]);
        for nk in [Some((nn, kk)), None] {
            let mut want: Vec<Fr> = (0..n)
                .map(|i| match nk {
                    Some(_) => (a[i] * b[i] - c[i] * nn) * kk,
                    None => a[i] * b[i] - c[i],
                })
                .collect();
            emu::bit_reverse(&mut want, lg_n);
            let mut got = a.clone();
            emu::quotient_bit_reverse(&mut got, &b, &c, nk, lg_n);
            assert!(got == want, "element-wise 2^{lg_n} {nk:?}");
            if lg_n >= TILED_BITREV_MIN_LG {
                let mut got = a.clone();
                emu::quotient_bit_reverse_tiled(&mut got, &b, &c, nk, lg_n);
                assert!(got == want, "tiled 2^{lg_n} {nk:?}");
            }
        }
    }
}
