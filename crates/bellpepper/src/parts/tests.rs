//! `CompiledCircuit::witness_of_parts`: a circuit of groups (a head each, then independent
//! challenges) synthesized one part per challenge and joined gives the whole circuit's witness;
//! parts of another circuit, missing parts and no parts are errors. After a first join, parts of
//! as many groups of as many parts are written in place (each group's first part into its slot
//! of the witness), values allocated one by one or in bulk; the same groups split another way
//! are joined by copying and their sizes kept instead; a part with another head is still
//! refused. `CompiledCircuit::replicate` builds the whole circuit's system from one group of one
//! and of two challenges, and refuses circuits whose challenges differ in shape.

use std::sync::atomic::{AtomicUsize, Ordering};

use bellpepper_core::num::AllocatedNum;
use bellpepper_core::{Circuit, ConstraintSystem, Index, SynthesisError, Variable};
use blstrs::Scalar;
use ff::Field;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::{
    Aux, BellpepperError, CompiledCircuit, Gadgets, PartsError, ReplicateError, WitnessCs,
    WitnessPart,
};

/// Groups in order: a head (a public seed and its square), then challenges, each a public
/// value `c`, `c · seed²` and its square; a witness generator allocates the challenge's value
/// and the square in bulk (`allocate_empty_aux`, `extend_aux`), as gadgets that fill slices do.
#[derive(Clone)]
struct Groups(Vec<(u64, Vec<u64>)>);

/// A group's head: its public seed, and the seed's square.
fn head<CS: ConstraintSystem<Scalar>>(
    cs: &mut CS,
    seed: u64,
) -> Result<AllocatedNum<Scalar>, SynthesisError> {
    let x = AllocatedNum::alloc(cs.namespace(|| "seed"), || Ok(Scalar::from(seed)))?;
    x.inputize(cs.namespace(|| "seed input"))?;
    x.square(cs.namespace(|| "seed²"))
}

impl Circuit<Scalar> for Groups {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        for (seed, challenges) in self.0 {
            let square = head(cs, seed)?;
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

    /// One part per challenge: its group's head and that challenge.
    fn parts(&self) -> Vec<Vec<Groups>> {
        self.0
            .iter()
            .map(|(seed, cs)| cs.iter().map(|&c| Groups(vec![(*seed, vec![c])])).collect())
            .collect()
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
    witness_into(compiled, parts, None)
}

/// `witness_of`, into `reuse`.
fn witness_into(
    compiled: &CompiledCircuit,
    parts: Vec<Vec<Groups>>,
    reuse: Option<cuzk_groth16::WitnessBuffer>,
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
    let w = compiled.witness_of_parts(parts, reuse);
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
fn a_reused_witness_is_overwritten_whole() {
    let rng = &mut ChaCha8Rng::seed_from_u64(14);
    let shape = [3, 1, 4];
    let ones: &[&[usize]] = &[&[1; 3], &[1], &[1; 4]];
    let another: &[&[usize]] = &[&[2, 1], &[1], &[1; 4]];
    let (compiled, _) = CompiledCircuit::compile(Groups::random(rng, &shape)).unwrap();
    let (first, _) = witness_of(&compiled, Groups::random(rng, &shape).split(ones));
    let mut last = first.unwrap();
    // Each call writes into the last one's storage, whose stale values are another instance's;
    // split another way, the parts are joined into fresh memory.
    for (call, split) in [ones, ones, another].into_iter().enumerate() {
        let next = Groups::random(rng, &shape);
        let (_, expected) = CompiledCircuit::compile(next.clone()).unwrap();
        let storage = last.assignment().as_ptr();
        let (joined, _) = witness_into(&compiled, next.split(split), Some(last.into_buffer()));
        let joined = joined.unwrap();
        assert!(joined.assignment() == expected.assignment(), "call {call}");
        assert_eq!(
            joined.assignment().as_ptr() == storage,
            call < 2,
            "call {call}"
        );
        last = joined;
    }
    // Another circuit's storage is not used.
    let (_, other) = CompiledCircuit::compile(Groups::random(rng, &[2])).unwrap();
    let next = Groups::random(rng, &shape);
    let (_, expected) = CompiledCircuit::compile(next.clone()).unwrap();
    let (joined, _) = witness_into(&compiled, next.split(ones), Some(other.into_buffer()));
    assert!(joined.unwrap().assignment() == expected.assignment());
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

fn gadgets(groups: Vec<Vec<Groups>>) -> Vec<Vec<Gadgets<Groups>>> {
    groups
        .into_iter()
        .map(|g| g.into_iter().map(Gadgets).collect())
        .collect()
}

#[test]
fn parts_join_into_the_whole_circuits_witness() {
    let rng = &mut ChaCha8Rng::seed_from_u64(5);
    let (compiled, _) = CompiledCircuit::compile(Groups::random(rng, &[3, 1, 4])).unwrap();
    for _ in 0..3 {
        let next = Groups::random(rng, &[3, 1, 4]);
        let (_, expected) = CompiledCircuit::compile(next.clone()).unwrap();
        let joined = compiled
            .witness_of_parts(gadgets(next.parts()), None)
            .unwrap();
        assert!(joined.assignment() == expected.assignment());
        compiled.r1cs().is_satisfied(&joined).unwrap();
        // One part is the whole circuit.
        let whole = compiled
            .witness_of_parts(gadgets(vec![vec![next]]), None)
            .unwrap();
        assert!(whole.assignment() == expected.assignment());
    }
}

#[test]
fn parts_of_another_circuit_are_refused() {
    let rng = &mut ChaCha8Rng::seed_from_u64(6);
    let (compiled, _) = CompiledCircuit::compile(Groups::random(rng, &[2, 2])).unwrap();
    let next = Groups::random(rng, &[2, 2]);

    // A part whose head is another group's.
    let mut parts = next.parts();
    parts[0][1] = parts[1][1].clone();
    assert!(matches!(
        compiled.witness_of_parts(gadgets(parts), None),
        Err(BellpepperError::Parts(PartsError::HeadsDiffer {
            group: 0,
            part: 1
        }))
    ));

    // A part left out.
    let mut parts = next.parts();
    parts[1].pop();
    assert!(matches!(
        compiled.witness_of_parts(gadgets(parts), None),
        Err(BellpepperError::Parts(PartsError::Sizes { .. }))
    ));

    // A part too many.
    let mut parts = next.parts();
    let again = parts[1][0].clone();
    parts[1].push(again);
    assert!(matches!(
        compiled.witness_of_parts(gadgets(parts), None),
        Err(BellpepperError::Parts(PartsError::Sizes { .. }))
    ));

    for empty in [vec![], vec![vec![]], vec![next.parts()[0].clone(), vec![]]] {
        assert!(matches!(
            compiled.witness_of_parts(gadgets(empty), None),
            Err(BellpepperError::Parts(PartsError::Empty))
        ));
    }
}

/// `Groups`, but every challenge after a group's first also squares itself: challenges of two
/// shapes.
#[derive(Clone)]
struct Uneven(Groups);

impl Circuit<Scalar> for Uneven {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        for (seed, challenges) in self.0.0 {
            let square = head(cs, seed)?;
            for (j, c) in challenges.into_iter().enumerate() {
                let c = AllocatedNum::alloc(cs.namespace(|| "c"), || Ok(Scalar::from(c)))?;
                c.inputize(cs.namespace(|| "c input"))?;
                c.mul(cs.namespace(|| "c·seed²"), &square)?;
                if j > 0 {
                    c.square(cs.namespace(|| "c²"))?;
                }
            }
        }
        Ok(())
    }
}

#[test]
fn a_replicated_system_is_the_compiled_one() {
    let rng = &mut ChaCha8Rng::seed_from_u64(8);
    let shape = [3, 1, 4];
    let whole = Groups::random(rng, &shape);
    let (compiled, expected) = CompiledCircuit::compile(whole.clone()).unwrap();
    let (s, c) = (whole.0[0].0, whole.0[0].1[0]);
    let one = Groups(vec![(s, vec![c])]);
    let two = Groups(vec![(s, vec![c, c])]);
    let two_groups = Groups(vec![(s, vec![c]), (whole.0[1].0, vec![c])]);
    let replicated = CompiledCircuit::replicate(
        one.clone(),
        two.clone(),
        vec![(vec![1, 1], two_groups)],
        &shape,
    )
    .unwrap();
    assert!(replicated.r1cs() == compiled.r1cs());
    let joined = replicated
        .witness_of_parts(gadgets(whole.parts()), None)
        .unwrap();
    assert!(joined.assignment() == expected.assignment());
    replicated.r1cs().is_satisfied(&joined).unwrap();

    // Swapped, the sizes make no head.
    assert!(matches!(
        CompiledCircuit::replicate(two, one, vec![], &shape),
        Err(BellpepperError::Replicate(ReplicateError::Sizes { .. }))
    ));
}

#[test]
fn challenges_of_two_shapes_are_not_replicated() {
    let one = Uneven(Groups(vec![(3, vec![5])]));
    let two = Uneven(Groups(vec![(3, vec![5, 7])]));
    assert!(matches!(
        CompiledCircuit::replicate(one, two, vec![], &[4]),
        Err(BellpepperError::Replicate(ReplicateError::Differs))
    ));
    // A check of another shape that does not hold.
    let one = Groups(vec![(3, vec![5])]);
    let two = Groups(vec![(3, vec![5, 7])]);
    let not_two_groups = Groups(vec![(3, vec![5, 7]), (4, vec![5])]);
    assert!(matches!(
        CompiledCircuit::replicate(one, two, vec![(vec![1, 1], not_two_groups)], &[4]),
        Err(BellpepperError::Replicate(ReplicateError::Differs))
    ));
}
