//! Unit tests of the GPU backend's memory plan and key identity (no GPU needed).

use super::*;

const GIB: u64 = 1 << 30;

fn lens(log: u32) -> Vec<(Query, usize)> {
    let n = 1usize << log;
    vec![
        (Query::A, n),
        (Query::BG1, n),
        (Query::H, n - 1),
        (Query::L, n - 8),
        (Query::BG2, n),
    ]
}

#[test]
fn plan_keeps_everything_resident_when_it_fits() {
    let p = MemoryPlan::new(1 << 20, &lens(20), 100 * GIB, 132).unwrap();
    assert!(p.fits());
    assert!(p.queries.iter().all(|q| q.resident));
    assert!(p.overlap_upload, "a, b, c fit beside the witness MSMs");
    assert!(p.work_bytes >= p.quotient_bytes);
    assert_eq!(p.quotient_bytes, 3 * 32 * (1 << 20) + SLACK);
}

#[test]
fn plan_for_a_16_gib_card_at_2_24_fits_and_leaves_work_room() {
    let p = MemoryPlan::new(1 << 24, &lens(24), 16 * GIB - GIB / 2, 132).unwrap();
    assert!(p.fits(), "{p:?}");
    assert!(p.resident_bytes() + p.work_bytes <= p.room);
    // Five queries of 2^24 points (~9.6 GB) plus a G2 run do not all fit: G2 goes last.
    assert!(p.is_resident(Query::A));
    let g2 = p.queries.iter().find(|q| q.query == Query::BG2).unwrap();
    assert_eq!(g2.point_bytes, (192 << 24) + (4 << 19)); // points + identity bits
}

#[test]
fn plan_streams_everything_when_room_is_tiny_and_says_it_does_not_fit() {
    let p = MemoryPlan::new(1 << 20, &lens(20), 64 << 20, 132).unwrap();
    assert!(!p.fits());
    assert!(!p.overlap_upload);
    assert_eq!(p.resident_bytes(), 0);
    assert!(p.queries.iter().all(|q| !q.resident));
}

#[test]
fn residency_follows_priority() {
    let log = 20;
    let resident = |room: u64| -> Vec<Query> {
        let p = MemoryPlan::new(1 << log, &lens(log), room, 132).unwrap();
        p.queries
            .iter()
            .filter(|q| q.resident)
            .map(|q| q.query)
            .collect()
    };
    // At the least room that makes A resident (bisection: residency grows with room) A goes
    // first, though L's points are fewer; one G1 query's points more make B (G1) resident.
    let (mut lo, mut hi) = (0u64, 100 * GIB);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if !resident(mid).contains(&Query::A) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let g1 = GpuMsm::<G1Affine>::resident_bytes_for(1 << log, 1).unwrap();
    assert_eq!(resident(hi), vec![Query::A]);
    assert_eq!(resident(hi + g1), vec![Query::A, Query::BG1]);
}

/// A 32 GiB PoRep partition's domain under a 16 GiB card: no query fits resident, and the
/// streamed MSMs run in chunks small enough that a, b, c (12.9 GB) stage beside them.
#[test]
fn a_2_27_key_streamed_under_16_gib_leaves_room_for_a_b_c() {
    let log = 27;
    let n = 1usize << log;
    let room = 16 * GIB;
    let one_shot = MemoryPlan::new(n, &lens(log), room, 132).unwrap();
    assert!(one_shot.fits(), "{one_shot:?}");
    assert_eq!(one_shot.resident_bytes(), 0);
    assert_eq!(
        one_shot.work_bytes, one_shot.quotient_bytes,
        "the quotient is the largest phase"
    );
    assert_eq!(one_shot.streamed_cap(), None);

    let evaluations = 3 * 32 * n as u64;
    let staged = MemoryPlan::staged(n, &lens(log), room, 132, evaluations).unwrap();
    assert!(staged.fits(), "{staged:?}");
    assert_eq!(staged.resident_bytes(), 0);
    let largest_chunks = staged.queries.iter().map(|q| q.stream_bytes).max().unwrap();
    assert_eq!(staged.lock_bytes(), largest_chunks);
    // Beside a, b, c and an engine's 64 MiB of device tables.
    assert!(
        staged.lock_bytes() + evaluations + (64 << 20) <= room,
        "{}",
        staged.lock_bytes()
    );
    assert_eq!(staged.streamed_cap(), Some(staged.lock_bytes()));
    // Resident, one MSM of 2^27 would take its scratch: more than a, b, c leave.
    let resident_run = staged.queries.iter().map(|q| q.run_bytes).max().unwrap();
    assert!(resident_run + evaluations > room);
}

#[test]
fn key_identity_changes_with_whatever_may_change_the_points() {
    let mut rng = <rand_chacha::ChaCha20Rng as rand::SeedableRng>::seed_from_u64(1);
    let (r1cs, _) = crate::testing::demo::circuit(4, 1, &mut rng).unwrap();
    let mut pk = crate::generate_parameters(&r1cs, &mut rng).unwrap();
    let id = pk.identity();
    assert_eq!(KeyRef::from(&pk).identity(), id);
    let copy = pk.clone();
    assert_eq!(copy, pk, "same points");
    assert_ne!(copy.identity(), id, "another allocation is another key");
    pk.queries_mut().a_query.swap(0, 1);
    assert_ne!(
        pk.identity(),
        id,
        "a key whose points may have changed is another key"
    );
    assert_eq!(Phase::Msm(Query::BG2).to_string(), "MSM B (G2)");
}
