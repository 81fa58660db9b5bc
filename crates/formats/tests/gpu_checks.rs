//! The fully checked bellperson and cuzk loads with their subgroup checks on the GPU: every
//! query long enough to go to the device, points outside the subgroup at random positions, the
//! error naming the query and the first bad index as the CPU path does. Ignored without a GPU
//! (`cargo test -p cuzk-formats --test gpu_checks -- --ignored`; panics if none is found).

use cuzk_field::{DecodeError, Fp, G1Affine, G2Affine};
use cuzk_formats::{BpParameters, BpVerifyingKey, FormatError, PointChecks, cuzk};
use cuzk_groth16::{KeyQueries, ProvingKey, VerifyingKey};
use cuzk_msm::subgroup::{Gpu, testing};
use cuzk_msm::testing::random_points;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

#[test]
#[ignore = "gpu"]
fn gpu_full_checks_name_the_first_point_outside_the_subgroup() {
    assert!(
        Gpu::available().is_some(),
        "gpu tests need an NVIDIA GPU and built kernels"
    );
    let mut rng = ChaCha8Rng::seed_from_u64(2121);
    let g1 = |n: usize, rng: &mut ChaCha8Rng| random_points::<G1Affine>(n, rng);
    let vk1 = g1(5, &mut rng);
    let vk2 = random_points::<G2Affine>(3, &mut rng);
    let bp = BpParameters {
        vk: BpVerifyingKey {
            alpha_g1: vk1[0],
            beta_g1: vk1[1],
            beta_g2: vk2[0],
            gamma_g2: vk2[1],
            delta_g1: vk1[2],
            delta_g2: vk2[2],
            ic: vk1[3..].to_vec(),
        },
        // Above the loader's GPU threshold (4096), so every query is checked on the device.
        h: g1(6000, &mut rng),
        l: g1(5000, &mut rng),
        a: g1(4096, &mut rng),
        b_g1: g1(7000, &mut rng),
        b_g2: random_points::<G2Affine>(4500, &mut rng),
    };
    let dir = std::env::temp_dir().join(format!("cuzk-formats-gpu-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("params");
    bp.write_file(&path).unwrap();
    assert_eq!(BpParameters::read(&path, &PointChecks::Full).unwrap(), bp);

    for round in 0..6 {
        let mut bad = bp.clone();
        let field = ["h", "l", "a", "b_g1", "b_g2"][round % 5];
        let len = match field {
            "h" => bad.h.len(),
            "l" => bad.l.len(),
            "a" => bad.a.len(),
            "b_g1" => bad.b_g1.len(),
            _ => bad.b_g2.len(),
        };
        let at: Vec<usize> = (0..1 + round % 3).map(|_| rng.gen_range(0..len)).collect();
        for &i in &at {
            match field {
                "h" => bad.h[i] = testing::g1_outside(&mut rng),
                "l" => bad.l[i] = testing::g1_outside(&mut rng),
                "a" => bad.a[i] = testing::g1_outside(&mut rng),
                "b_g1" => bad.b_g1[i] = testing::g1_outside(&mut rng),
                _ => bad.b_g2[i] = testing::g2_outside(&mut rng),
            }
        }
        let want = *at.iter().min().unwrap();
        bad.write_file(&path).unwrap();
        // Default blocks, then small ones (records straddle blocks; runs decode separately).
        for block in [None, Some(100_003)] {
            let e = BpParameters::read_blocks(&path, &PointChecks::Full, block).unwrap_err();
            assert!(
                matches!(&e, FormatError::BadPoint {
                    field: f,
                    index,
                    source: cuzk_field::DecodeError::NotInSubgroup,
                    ..
                } if f == field && *index == want),
                "round {round}, {field}[{want}], blocks {block:?}: {e}"
            );
        }
    }
    // A point outside the subgroup and one off the curve in the same query: the lower index
    // is reported either way, as on the CPU (the decode finds the second, the GPU the first).
    let off_curve = |p: G1Affine| G1Affine::from_xy_unchecked(p.x(), p.y() + cuzk_field::Fp::ONE);
    for (outside_at, off_at) in [(1000, 4000), (4000, 1000), (10, 4090)] {
        let mut bad = bp.clone();
        bad.l[outside_at] = testing::g1_outside(&mut rng);
        bad.l[off_at] = off_curve(bad.l[off_at]);
        bad.write_file(&path).unwrap();
        let want = if outside_at < off_at {
            (outside_at, cuzk_field::DecodeError::NotInSubgroup)
        } else {
            (off_at, cuzk_field::DecodeError::NotOnCurve)
        };
        for block in [None, Some(100_003)] {
            let e = BpParameters::read_blocks(&path, &PointChecks::Full, block).unwrap_err();
            assert!(
                matches!(&e, FormatError::BadPoint { field, index, source, .. }
                    if field == "l" && (*index, *source) == want),
                "outside at {outside_at}, off the curve at {off_at}, blocks {block:?}: {e}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// cuzk's reader decodes a query in 8 MiB chunks and checks the whole query on the GPU after:
/// points outside the subgroup before and after the chunk boundary (87381 G1 points), and one
/// beside a point off the curve, name the lowest index.
#[test]
#[ignore = "gpu"]
fn gpu_full_checks_of_a_cuzk_key_name_the_first_point_outside_the_subgroup() {
    assert!(
        Gpu::available().is_some(),
        "gpu tests need an NVIDIA GPU and built kernels"
    );
    let mut rng = ChaCha8Rng::seed_from_u64(4343);
    let g1 = |n: usize, rng: &mut ChaCha8Rng| random_points::<G1Affine>(n, rng);
    let (m, np) = (5000, 2);
    let vk1 = g1(np + 4, &mut rng);
    let vk2 = random_points::<G2Affine>(3, &mut rng);
    let vk = VerifyingKey {
        alpha_g1: vk1[0],
        beta_g2: vk2[0],
        gamma_g2: vk2[1],
        delta_g2: vk2[2],
        ic: vk1[3..].to_vec(),
    };
    let queries = KeyQueries {
        a_query: g1(m, &mut rng),
        b_g1_query: g1(m, &mut rng),
        b_g2_query: random_points::<G2Affine>(m, &mut rng),
        // Domain 2^17: two read chunks.
        h_query: g1((1 << 17) - 1, &mut rng),
        l_query: g1(m - np - 1, &mut rng),
    };
    let pk = ProvingKey::new(vk, vk1[1], vk1[2], queries);
    let bytes = |pk: &ProvingKey| {
        let mut out = Vec::new();
        cuzk::write_proving_key(&mut out, pk).unwrap();
        out
    };
    let read = |b: &[u8]| cuzk::read_proving_key("k.pk", b, &PointChecks::Full);
    assert_eq!(read(&bytes(&pk)).unwrap(), pk);

    for at in [vec![3], vec![90_000, 100_000], vec![131_070, 5000]] {
        let mut bad = pk.clone();
        for &i in &at {
            bad.queries_mut().h_query[i] = testing::g1_outside(&mut rng);
        }
        let want = *at.iter().min().unwrap();
        let e = read(&bytes(&bad)).unwrap_err();
        assert!(
            matches!(&e, FormatError::BadPoint { field, index, source: DecodeError::NotInSubgroup, .. }
                if field == "h_query" && *index == want),
            "h_query{at:?}: {e}"
        );
    }
    let mut bad = pk.clone();
    bad.queries_mut().b_g2_query[4321] = testing::g2_outside(&mut rng);
    let e = read(&bytes(&bad)).unwrap_err();
    assert!(
        matches!(&e, FormatError::BadPoint { field, index: 4321, source: DecodeError::NotInSubgroup, .. }
            if field == "b_g2_query"),
        "{e}"
    );
    let off_curve = |p: G1Affine| G1Affine::from_xy_unchecked(p.x(), p.y() + Fp::ONE);
    for (outside_at, off_at) in [(1000, 100_000), (100_000, 1000)] {
        let mut bad = pk.clone();
        bad.queries_mut().h_query[outside_at] = testing::g1_outside(&mut rng);
        bad.queries_mut().h_query[off_at] = off_curve(bad.h_query()[off_at]);
        let want = if outside_at < off_at {
            (outside_at, DecodeError::NotInSubgroup)
        } else {
            (off_at, DecodeError::NotOnCurve)
        };
        let e = read(&bytes(&bad)).unwrap_err();
        assert!(
            matches!(&e, FormatError::BadPoint { field, index, source, .. }
                if field == "h_query" && (*index, *source) == want),
            "outside at {outside_at}, off the curve at {off_at}: {e}"
        );
    }
}
