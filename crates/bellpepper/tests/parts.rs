//! `CompiledCircuit::witness_of_parts`: a circuit of groups (a head each, then independent
//! challenges) synthesized one part per challenge and joined gives the whole circuit's witness;
//! parts of another circuit, missing parts and no parts are errors. `CompiledCircuit::replicate`
//! builds the whole circuit's system from one group of one and of two challenges, and refuses
//! circuits whose challenges differ in shape.

use bellpepper_core::num::AllocatedNum;
use bellpepper_core::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::Scalar;
use cuzk_bellpepper::{BellpepperError, CompiledCircuit, Gadgets, PartsError, ReplicateError};
use rand::{Rng, SeedableRng};

/// Groups in order; each group's head is a public seed and its square, then each challenge is
/// a public value times the square.
#[derive(Clone)]
struct Groups(Vec<(u64, Vec<u64>)>);

impl Circuit<Scalar> for Groups {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        for (seed, challenges) in self.0 {
            let x = AllocatedNum::alloc(cs.namespace(|| "seed"), || Ok(Scalar::from(seed)))?;
            x.inputize(cs.namespace(|| "seed input"))?;
            let square = x.square(cs.namespace(|| "seed²"))?;
            for c in challenges {
                let c = AllocatedNum::alloc(cs.namespace(|| "c"), || Ok(Scalar::from(c)))?;
                c.inputize(cs.namespace(|| "c input"))?;
                c.mul(cs.namespace(|| "c·seed²"), &square)?;
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
}

fn gadgets(groups: Vec<Vec<Groups>>) -> Vec<Vec<Gadgets<Groups>>> {
    groups
        .into_iter()
        .map(|g| g.into_iter().map(Gadgets).collect())
        .collect()
}

#[test]
fn parts_join_into_the_whole_circuits_witness() {
    let rng = &mut rand_chacha::ChaCha8Rng::seed_from_u64(5);
    let (compiled, _) = CompiledCircuit::compile(Groups::random(rng, &[3, 1, 4])).unwrap();
    for _ in 0..3 {
        let next = Groups::random(rng, &[3, 1, 4]);
        let (_, expected) = CompiledCircuit::compile(next.clone()).unwrap();
        let joined = compiled.witness_of_parts(gadgets(next.parts())).unwrap();
        assert!(joined.assignment() == expected.assignment());
        compiled.r1cs().is_satisfied(&joined).unwrap();
        // One part is the whole circuit.
        let whole = compiled
            .witness_of_parts(gadgets(vec![vec![next]]))
            .unwrap();
        assert!(whole.assignment() == expected.assignment());
    }
}

#[test]
fn parts_of_another_circuit_are_refused() {
    let rng = &mut rand_chacha::ChaCha8Rng::seed_from_u64(6);
    let (compiled, _) = CompiledCircuit::compile(Groups::random(rng, &[2, 2])).unwrap();
    let next = Groups::random(rng, &[2, 2]);

    // A part whose head is another group's.
    let mut parts = next.parts();
    parts[0][1] = parts[1][1].clone();
    assert!(matches!(
        compiled.witness_of_parts(gadgets(parts)),
        Err(BellpepperError::Parts(PartsError::HeadsDiffer {
            group: 0,
            part: 1
        }))
    ));

    // A part left out.
    let mut parts = next.parts();
    parts[1].pop();
    assert!(matches!(
        compiled.witness_of_parts(gadgets(parts)),
        Err(BellpepperError::Parts(PartsError::Sizes { .. }))
    ));

    // A part too many.
    let mut parts = next.parts();
    let again = parts[1][0].clone();
    parts[1].push(again);
    assert!(matches!(
        compiled.witness_of_parts(gadgets(parts)),
        Err(BellpepperError::Parts(PartsError::Sizes { .. }))
    ));

    for empty in [vec![], vec![vec![]], vec![next.parts()[0].clone(), vec![]]] {
        assert!(matches!(
            compiled.witness_of_parts(gadgets(empty)),
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
            let x = AllocatedNum::alloc(cs.namespace(|| "seed"), || Ok(Scalar::from(seed)))?;
            x.inputize(cs.namespace(|| "seed input"))?;
            let square = x.square(cs.namespace(|| "seed²"))?;
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
    let rng = &mut rand_chacha::ChaCha8Rng::seed_from_u64(8);
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
    let joined = replicated.witness_of_parts(gadgets(whole.parts())).unwrap();
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
