//! cuzk's synthesis of every real Filecoin circuit (PoRep, WindowPoSt, WinningPoSt, SnapDeals
//! partitions of 2 KiB sectors) against bellpepper's own test `ConstraintSystem`: the same rows
//! (a, b, c) in the same order and the same assignment; the circuit's own compile (replicated
//! from one challenge, for PoRep and PoSt) is that system; and the witness of the circuit's
//! parts, synthesized apart and joined, is that same assignment.

use bellpepper_core::test_cs::TestConstraintSystem;
use bellpepper_core::{Circuit, Index, LinearCombination};
use blstrs::Scalar;
use cuzk_bellpepper::{CompiledCircuit, fr_from_scalar};
use cuzk_groth16::{Fr, SparseMatrix};
use ff::Field;
use rand::SeedableRng;

use crate::c1::with_phase1;
use crate::porep::PorepCircuits;
use crate::post::{Sectors, post_circuit};
use crate::snap::{Proofs, SnapPartition, snap_circuits};
use crate::sparse::sparse_snap;
use crate::synth::PartitionCircuit;
use crate::workload::{post_vanilla_proofs, seal_sector, snap_update};
use crate::{
    C1Output, FilecoinError, PostProof, PostStatement, PostVanilla, SealProof, SnapVanilla,
};

/// A row of bellpepper's as cuzk's columns (the one, the inputs, the aux), zero terms
/// dropped, sorted.
fn row(lc: &LinearCombination<Scalar>, num_public: usize) -> Vec<(u32, Fr)> {
    let mut terms: Vec<(u32, Fr)> = lc
        .iter()
        .map(|(v, c)| {
            let col = match v.get_unchecked() {
                Index::Input(i) => i,
                Index::Aux(i) => 1 + num_public + i,
            };
            (col as u32, fr_from_scalar(c))
        })
        .filter(|(_, c)| !c.is_zero())
        .collect();
    terms.sort_by_key(|t| t.0);
    terms
}

fn cuzk_row(m: &SparseMatrix, i: usize) -> Vec<(u32, Fr)> {
    let mut terms: Vec<(u32, Fr)> = m.row(i).expect("row in range").terms().collect();
    terms.sort_by_key(|t| t.0);
    terms
}

/// `build` builds one circuit each time (not every Filecoin circuit is `Clone`).
fn same_synthesis<P: PartitionCircuit>(build: impl Fn() -> P) {
    let whole = || build().whole().expect("circuit");
    let mut test_cs = TestConstraintSystem::<Scalar>::new();
    whole()
        .synthesize(&mut test_cs)
        .expect("bellpepper synthesis");
    assert!(
        test_cs.is_satisfied(),
        "{:?}",
        test_cs.which_is_unsatisfied()
    );
    let (r1cs, witness) = cuzk_bellpepper::synthesize(whole()).expect("cuzk synthesis");
    let compiled = CompiledCircuit::new(r1cs);
    let r1cs = compiled.r1cs();

    let inputs = test_cs.scalar_inputs();
    let aux = test_cs.scalar_aux();
    let num_public = inputs.len() - 1;
    assert_eq!(r1cs.num_public(), num_public);
    assert_eq!(r1cs.num_private(), aux.len());
    let expected: Vec<Fr> = inputs.iter().chain(&aux).map(fr_from_scalar).collect();
    assert!(witness.assignment() == &expected[..], "assignments differ");
    // The circuit's own compile (a replication, for PoRep and PoSt) is that same system.
    let (own, own_witness) = build().compile(0).expect("the circuit's compile");
    assert!(
        own.r1cs() == r1cs,
        "the circuit's compile has another system"
    );
    assert!(
        own_witness.assignment() == &expected[..],
        "the circuit's compile has another witness"
    );
    // The second join writes its parts in place, in the sizes the first kept.
    for call in ["first", "in place"] {
        let parts = build().parts().expect("parts");
        let joined = compiled
            .witness_of_parts(parts, None)
            .expect("parts joined");
        assert!(
            joined.assignment() == &expected[..],
            "the parts' witness differs ({call})"
        );
    }

    let constraints = bellpepper_core::Comparable::constraints(&test_cs);
    // cuzk appends bellperson's `input · 0 = 0` row for every input, the one included.
    assert_eq!(r1cs.num_constraints(), constraints.len() + num_public + 1);
    for (i, (a, b, c, name)) in constraints.iter().enumerate() {
        for (m, lc, which) in [(r1cs.a(), a, "a"), (r1cs.b(), b, "b"), (r1cs.c(), c, "c")] {
            assert!(
                cuzk_row(m, i) == row(lc, num_public),
                "row {i} ({name}): {which} differs"
            );
        }
    }
}

#[test]
fn porep_partition_synthesis_matches_bellpeppers() {
    let dir = std::env::temp_dir().join(format!("cuzk-filecoin-synthesis-{}", std::process::id()));
    let rng = &mut rand_chacha::ChaCha8Rng::seed_from_u64(7);
    let sector = seal_sector(SealProof::StackedDrg2KiBV1_1, &dir, 1000, 1, rng).expect("seal");
    let c1 = C1Output::parse("c1.json", &sector.commit.c1_json, None).expect("parse");
    with_phase1!(&c1.phase1, |o| {
        let circuits = PorepCircuits::new(c1.seal_proof, o).expect("circuits");
        assert_eq!(circuits.len(), 1);
        same_synthesis(|| circuits.partition(0).unwrap());
    });
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn post_and_snap_synthesis_matches_bellpeppers() {
    const KIB2: SealProof = SealProof::StackedDrg2KiBV1_1;
    let dir =
        std::env::temp_dir().join(format!("cuzk-filecoin-synthesis-ps-{}", std::process::id()));
    let rng = &mut rand_chacha::ChaCha8Rng::seed_from_u64(11);
    let sector = seal_sector(KIB2, &dir, 1000, 2, rng).expect("seal");
    // A field element, as the chain's randomness is after filecoin-proofs' masking.
    let mut randomness = [5u8; 32];
    randomness[31] &= 0x3f;
    let st = PostStatement {
        randomness,
        prover_id: sector.commit.prover_id(),
    };
    for proof in [PostProof::window(KIB2), PostProof::winning(KIB2)] {
        let bytes = post_vanilla_proofs(proof, &[&sector], randomness).expect("vanilla proofs");
        let vanilla = PostVanilla::parse("vanilla.bin", &bytes, proof).expect("parse");
        let Sectors::Base(v) = &vanilla.sectors else {
            panic!("a 2 KiB sector has the base tree shape");
        };
        same_synthesis(|| {
            post_circuit("vanilla.bin", proof, &st, v, 0)
                .expect("circuit")
                .1
                .circuit
        });
    }

    let (st, bytes) = snap_update(&sector, rng).expect("SnapDeals update");
    let vanilla = SnapVanilla::parse("snap.bin", &bytes, KIB2).expect("parse");
    let Proofs::Base(v) = &vanilla.proofs else {
        panic!("a 2 KiB sector has the base tree shape");
    };
    let build = || {
        snap_circuits("snap.bin", KIB2, &st, v, 0..1, true)
            .expect("circuits")
            .1
    };
    assert_eq!(build().len(), 1, "a 2 KiB update has one partition");
    same_synthesis(|| SnapPartition::new(build().swap_remove(0), 0));
    std::fs::remove_dir_all(&dir).ok();
}

/// A 2 KiB update has one partition, so its partition bits and partition path are empty, and
/// its apex tree one section: the last partition of an 8 MiB update has them all (against
/// cuzk's own full synthesis: bellpepper's test system would take minutes at 10M rows). What
/// the circuit asserts, and would panic on, is an error of the parts.
#[test]
fn snap_parts_of_a_later_8mib_partition_match_its_synthesis() {
    const MIB8: SealProof = SealProof::StackedDrg8MiBV1_1;
    let rng = &mut rand_chacha::ChaCha8Rng::seed_from_u64(13);
    let (st, bytes) = sparse_snap(MIB8, rng).expect("SnapDeals update");
    let vanilla = SnapVanilla::parse("snap.bin", &bytes, MIB8).expect("parse");
    let Proofs::Base(v) = &vanilla.proofs else {
        panic!("an 8 MiB sector has the base tree shape");
    };
    let k = v.len() - 1;
    assert!(k > 0, "an 8 MiB update has several partitions");
    let circuit = || {
        snap_circuits("snap.bin", MIB8, &st, v, k..k + 1, false)
            .expect("circuits")
            .1
            .swap_remove(0)
    };
    let (compiled, expected) = CompiledCircuit::compile(circuit()).expect("cuzk synthesis");
    let parts = SnapPartition::new(circuit(), k).parts().expect("parts");
    let joined = compiled
        .witness_of_parts(parts, None)
        .expect("parts joined");
    assert!(
        joined.assignment() == expected.assignment(),
        "the parts' witness differs"
    );

    let mut short = circuit();
    short.priv_inputs.challenge_proofs.pop();
    assert!(matches!(
        SnapPartition::new(short, k).parts(),
        Err(FilecoinError::Circuit { partition, .. }) if partition == k
    ));
    let mut unencoded = circuit();
    unencoded.priv_inputs.challenge_proofs[1].leaf_r_new = Some(Scalar::ONE);
    let parts = SnapPartition::new(unencoded, k).parts().expect("parts");
    assert!(compiled.witness_of_parts(parts, None).is_err());
}
