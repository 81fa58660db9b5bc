//! cuzk's synthesis of the real partition circuit against bellpepper's own test
//! `ConstraintSystem`: the same rows (a, b, c) in the same order and the same assignment.

use bellpepper_core::test_cs::TestConstraintSystem;
use bellpepper_core::{Circuit, Index, LinearCombination};
use blstrs::Scalar;
use cuzk_bellpepper::fr_from_scalar;
use cuzk_groth16::{Fr, SparseMatrix};
use rand::SeedableRng;

use crate::c1::with_phase1;
use crate::porep::partition_circuits;
use crate::workload::seal_sector;
use crate::{C1Output, SealProof};

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
    let (cols, vals) = m.row(i).expect("row in range");
    let mut terms: Vec<(u32, Fr)> = cols.iter().copied().zip(vals.iter().copied()).collect();
    terms.sort_by_key(|t| t.0);
    terms
}

fn same_synthesis<C: Circuit<Scalar> + Clone>(circuit: C) {
    let mut test_cs = TestConstraintSystem::<Scalar>::new();
    circuit
        .clone()
        .synthesize(&mut test_cs)
        .expect("bellpepper synthesis");
    assert!(
        test_cs.is_satisfied(),
        "{:?}",
        test_cs.which_is_unsatisfied()
    );
    let (r1cs, witness) = cuzk_bellpepper::synthesize(circuit).expect("cuzk synthesis");

    let inputs = test_cs.scalar_inputs();
    let aux = test_cs.scalar_aux();
    let num_public = inputs.len() - 1;
    assert_eq!(r1cs.num_public(), num_public);
    assert_eq!(r1cs.num_private(), aux.len());
    let expected: Vec<Fr> = inputs.iter().chain(&aux).map(fr_from_scalar).collect();
    assert!(witness.assignment() == &expected[..], "assignments differ");

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
    let c1 = C1Output::parse("c1.json", &sector.c1_json, None).expect("parse");
    with_phase1!(&c1.phase1, |o| {
        let circuits =
            partition_circuits(c1.seal_proof, o, 0..o.vanilla_proofs.len()).expect("circuits");
        assert_eq!(circuits.len(), 1);
        same_synthesis(circuits.into_iter().next().unwrap());
    });
    std::fs::remove_dir_all(&dir).ok();
}
