//! `witness_of_parts` in a kept layout: after a first join, parts of as many groups of as many
//! parts are written in place (each group's first part into its slot of the witness), values
//! allocated one by one or in bulk; parts of the same groups split another way are joined by
//! copying and their sizes kept instead; a part with another head is still refused.

use std::sync::atomic::{AtomicUsize, Ordering};

use bellpepper_core::num::AllocatedNum;
use bellpepper_core::{Circuit, ConstraintSystem, Index, SynthesisError, Variable};
use blstrs::Scalar;
use ff::Field;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::{Aux, BellpepperError, CompiledCircuit, Gadgets, PartsError, WitnessCs, WitnessPart};

/// Groups in order: a head (a public seed and its square), then challenges, each a public
/// value `c`, `c · seed²` and its square; a witness generator allocates the challenge's value
/// and the square in bulk (`allocate_empty_aux`, `extend_aux`), as gadgets that fill slices do.
#[derive(Clone)]
struct Groups(Vec<(u64, Vec<u64>)>);

impl Circuit<Scalar> for Groups {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        for (seed, challenges) in self.0 {
            let x = AllocatedNum::alloc(cs.namespace(|| "seed"), || Ok(Scalar::from(seed)))?;
            x.inputize(cs.namespace(|| "seed input"))?;
            let square = x.square(cs.namespace(|| "seed²"))?;
            let sq = square.get_value().unwrap_or(Scalar::ZERO);
            for c in challenges {
                let c = Scalar::from(c);
                let product = c * sq;
                let bulk = cs.is_witness_generator();
                let var = if bulk {
                    let at = cs.aux_slice().len();
                    cs.allocate_empty_aux(1)[0] = c;
                    Variable::new_unchecked(Index::Aux(at))
                } else {
                    cs.alloc(|| "c", || Ok(c))?
                };
                let input = cs.alloc_input(|| "c input", || Ok(c))?;
                cs.enforce(|| "c", |lc| lc + var, |lc| lc + CS::one(), |lc| lc + input);
                let p = cs.alloc(|| "c·seed²", || Ok(product))?;
                let v = square.get_variable();
                cs.enforce(|| "c·seed²", |lc| lc + var, |lc| lc + v, |lc| lc + p);
                let p2 = if bulk {
                    let at = cs.aux_slice().len();
                    cs.extend_aux(&[product.square()]);
                    Variable::new_unchecked(Index::Aux(at))
                } else {
                    cs.alloc(|| "p²", || Ok(product.square()))?
                };
                cs.enforce(|| "p²", |lc| lc + p, |lc| lc + p, |lc| lc + p2);
            }
        }
        Ok(())
    }
}

impl Groups {
    fn random(rng: &mut impl Rng, sizes: &[usize]) -> Self {
        Self(
            sizes
                .iter()
                .map(|&n| (rng.r#gen(), (0..n).map(|_| rng.r#gen()).collect()))
                .collect(),
        )
    }

    /// Each group split into parts of `splits[g]` challenges each (its head and them).
    fn split(&self, splits: &[&[usize]]) -> Vec<Vec<Groups>> {
        self.0
            .iter()
            .zip(splits)
            .map(|((seed, cs), sizes)| {
                let mut at = 0;
                sizes
                    .iter()
                    .map(|&n| {
                        at += n;
                        Groups(vec![(*seed, cs[at - n..at].to_vec())])
                    })
                    .collect()
            })
            .collect()
    }
}

/// A part that counts the parts written into a slot of the witness.
struct Counted<'c>(Gadgets<Groups>, &'c AtomicUsize);

impl WitnessPart for Counted<'_> {
    fn write_witness(self, cs: &mut WitnessCs<'_>) -> Result<(), SynthesisError> {
        if matches!(cs.aux, Aux::InSlot { .. }) {
            self.1.fetch_add(1, Ordering::Relaxed);
        }
        self.0.write_witness(cs)
    }
}

/// The witness of `parts`, and how many were written into their slots.
fn witness_of(
    compiled: &CompiledCircuit,
    parts: Vec<Vec<Groups>>,
) -> (Result<cuzk_groth16::Witness, BellpepperError>, usize) {
    let in_slot = AtomicUsize::new(0);
    let parts = parts
        .into_iter()
        .map(|g| {
            g.into_iter()
                .map(|p| Counted(Gadgets(p), &in_slot))
                .collect()
        })
        .collect();
    let w = compiled.witness_of_parts(parts);
    (w, in_slot.into_inner())
}

#[test]
fn parts_are_written_in_place_once_their_sizes_are_kept() {
    let rng = &mut ChaCha8Rng::seed_from_u64(11);
    let shape = [3, 1, 4];
    let (compiled, _) = CompiledCircuit::compile(Groups::random(rng, &shape)).unwrap();
    for call in 0..3 {
        let next = Groups::random(rng, &shape);
        let (_, expected) = CompiledCircuit::compile(next.clone()).unwrap();
        let (joined, in_slot) = witness_of(&compiled, next.split(&[&[1; 3], &[1], &[1; 4]]));
        let joined = joined.unwrap();
        assert!(joined.assignment() == expected.assignment(), "call {call}");
        compiled.r1cs().is_satisfied(&joined).unwrap();
        assert_eq!(in_slot, if call == 0 { 0 } else { 3 }, "call {call}");
    }
}

#[test]
fn parts_split_another_way_are_joined_by_copying() {
    let rng = &mut ChaCha8Rng::seed_from_u64(12);
    let shape = [3, 2];
    let (compiled, _) = CompiledCircuit::compile(Groups::random(rng, &shape)).unwrap();
    let (a, b): (&[&[usize]], &[&[usize]]) = (&[&[1, 2], &[1, 1]], &[&[2, 1], &[1, 1]]);
    // b's first part outgrows a's slot, a's first part then falls short of b's; each call
    // keeps its own sizes, so the last one is written in place again.
    for (call, (split, in_place)) in [(a, 0), (b, 2), (a, 2), (a, 2)].into_iter().enumerate() {
        let next = Groups::random(rng, &shape);
        let (_, expected) = CompiledCircuit::compile(next.clone()).unwrap();
        let (joined, in_slot) = witness_of(&compiled, next.split(split));
        assert!(
            joined.unwrap().assignment() == expected.assignment(),
            "call {call}"
        );
        assert_eq!(in_slot, in_place, "call {call}");
    }
}

#[test]
fn parts_with_another_head_are_refused_in_place() {
    let rng = &mut ChaCha8Rng::seed_from_u64(13);
    let shape = [2, 2];
    let (compiled, _) = CompiledCircuit::compile(Groups::random(rng, &shape)).unwrap();
    let ones: &[&[usize]] = &[&[1, 1], &[1, 1]];
    let (first, _) = witness_of(&compiled, Groups::random(rng, &shape).split(ones));
    first.unwrap();
    let mut parts = Groups::random(rng, &shape).split(ones);
    parts[0][1] = parts[1][1].clone();
    let (refused, in_slot) = witness_of(&compiled, parts);
    assert_eq!(in_slot, 2);
    assert!(matches!(
        refused,
        Err(BellpepperError::Parts(PartsError::HeadsDiffer {
            group: 0,
            part: 1
        }))
    ));
    let next = Groups::random(rng, &shape);
    let (_, expected) = CompiledCircuit::compile(next.clone()).unwrap();
    let (joined, in_slot) = witness_of(&compiled, next.split(ones));
    assert!(joined.unwrap().assignment() == expected.assignment());
    assert_eq!(in_slot, 2);
}
