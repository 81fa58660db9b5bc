//! The overlapped product against witness-only synthesis followed by `R1cs::evaluate_into`, on
//! random circuits: inputs allocated first, last or among the aux values, aux values allocated
//! one by one or in bulk (`allocate_empty_aux`, `extend_aux`), satisfied or not, and blocks from
//! one value to more than the whole witness. Sizes are chosen so that the rows left after
//! synthesis take each of `Evaluator::finish`'s three ways.

use bellpepper_core::{Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError};
use blstrs::Scalar;
use cuzk_field::Fr;
use cuzk_groth16::WitnessError;
use ff::Field;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::{BellpepperError, CompiledCircuit, aux_block, synthesize};

type BpVar = bellpepper_core::Variable;

/// Where the public inputs are allocated.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Inputs {
    /// After every aux value, each bound to an aux value, then read by more rows.
    Last,
    /// Among the aux values, read by later rows.
    Interleaved,
    /// Before every aux value, and read by every product row: all of them wait for the end.
    First,
    /// Before every aux value, and read by two product rows in five.
    FirstSome,
}

/// A random circuit: `shape` fixes the structure, `values` the free values of one instance.
#[derive(Clone, Debug)]
struct RandomCircuit {
    shape: u64,
    values: u64,
    products: usize,
    inputs: usize,
    where_inputs: Inputs,
    /// Allocate the free values with `allocate_empty_aux` and `extend_aux` when the system is
    /// a witness generator (values written after the call returns).
    bulk: bool,
    /// Product rows whose allocated output is off by one.
    corrupt: Vec<usize>,
    /// Allocate one more aux value at the end (a different shape).
    extra_aux: bool,
    /// Fail (`AssignmentMissing`) or panic after this many products.
    fail_after: Option<(usize, bool)>,
}

impl RandomCircuit {
    fn new(shape: u64, products: usize, inputs: usize, where_inputs: Inputs, bulk: bool) -> Self {
        Self {
            shape,
            values: 0,
            products,
            inputs,
            where_inputs,
            bulk,
            corrupt: Vec::new(),
            extra_aux: false,
            fail_after: None,
        }
    }

    fn instance(&self, values: u64) -> Self {
        Self {
            values,
            ..self.clone()
        }
    }
}

/// A value of the kinds the evaluation treats apart: 0, 1, -1, bits of powers of two, random.
fn value(rng: &mut ChaCha8Rng) -> Scalar {
    match rng.gen_range(0..6) {
        0 => Scalar::ZERO,
        1 | 2 => Scalar::ONE,
        3 => -Scalar::ONE,
        4 => Scalar::from(1u64 << rng.gen_range(0..64)),
        _ => Scalar::random(&mut *rng),
    }
}

/// A random linear combination over `vars`, mostly short, sometimes long (its sum carries past
/// 256 bits), with its value.
fn random_lc(
    shape: &mut ChaCha8Rng,
    vars: &[(BpVar, Scalar)],
) -> (LinearCombination<Scalar>, Scalar) {
    let len = if shape.gen_range(0..20) == 0 {
        shape.gen_range(50..300)
    } else {
        shape.gen_range(0..5)
    };
    let mut lc = LinearCombination::zero();
    let mut v = Scalar::ZERO;
    for _ in 0..len {
        let (var, x) = vars[shape.gen_range(0..vars.len())];
        let coeff = value(shape);
        lc = lc + (coeff, var);
        v += coeff * x;
    }
    (lc, v)
}

impl Circuit<Scalar> for RandomCircuit {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let mut shape = ChaCha8Rng::seed_from_u64(self.shape);
        let mut vals = ChaCha8Rng::seed_from_u64(self.values);
        let mut vars = vec![(CS::one(), Scalar::ONE)];

        // Free values: one by one, or in bulk and written after the call.
        let free = shape.gen_range(1..40);
        let values: Vec<Scalar> = (0..free).map(|_| value(&mut vals)).collect();
        if self.bulk && cs.is_witness_generator() {
            let start = cs.aux_slice().len();
            let half = free / 2;
            cs.allocate_empty_aux(half).copy_from_slice(&values[..half]);
            cs.extend_aux(&values[half..]);
            for (i, &x) in values.iter().enumerate() {
                vars.push((BpVar::new_unchecked(Index::Aux(start + i)), x));
            }
        } else {
            for (i, &x) in values.iter().enumerate() {
                let v = cs.alloc(|| format!("free {i}"), || Ok(x))?;
                vars.push((v, x));
            }
        }

        let alloc_input = |cs: &mut CS, vars: &mut Vec<(BpVar, Scalar)>, i: usize| {
            // An input equal to an earlier value, bound by `input * 1 = value`.
            let (src, x) = vars[i % vars.len()];
            let input = cs.alloc_input(|| format!("input {i}"), || Ok(x))?;
            cs.enforce(
                || format!("bind {i}"),
                |lc| lc + input,
                |lc| lc + CS::one(),
                |lc| lc + src,
            );
            vars.push((input, x));
            Ok::<_, SynthesisError>(())
        };

        let mut inputs_done = 0;
        let first = matches!(self.where_inputs, Inputs::First | Inputs::FirstSome);
        if first {
            for i in 0..self.inputs {
                let pick = shape.gen_range(0..vars.len());
                alloc_input(cs, &mut vars, pick + i)?;
            }
            inputs_done = self.inputs;
        }
        let late_products = if self.where_inputs == Inputs::Last {
            self.products / 10
        } else {
            0
        };
        for p in 0..self.products + late_products {
            if p == self.products {
                for i in inputs_done..self.inputs {
                    let pick = shape.gen_range(0..vars.len());
                    alloc_input(cs, &mut vars, pick + i)?;
                }
                inputs_done = self.inputs;
            }
            if let Some((after, panic)) = self.fail_after
                && p == after
            {
                assert!(!panic, "the circuit panics");
                return Err(SynthesisError::AssignmentMissing);
            }
            if self.where_inputs == Inputs::Interleaved
                && inputs_done < self.inputs
                && shape.gen_range(0..self.products.max(1)) < self.inputs
            {
                let pick = shape.gen_range(0..vars.len());
                alloc_input(cs, &mut vars, pick)?;
                inputs_done += 1;
            }
            // out = a·b - rest, enforced as a · b = out + rest.
            let (mut a, mut va) = random_lc(&mut shape, &vars);
            let reads_input = self.where_inputs == Inputs::First || p % 5 < 2;
            if first && reads_input && self.inputs > 0 {
                let (input, x) = vars[1 + free];
                a = a + input;
                va += x;
            }
            let (b, vb) = random_lc(&mut shape, &vars);
            let (rest, vrest) = random_lc(&mut shape, &vars);
            let mut x = va * vb - vrest;
            if self.corrupt.contains(&p) {
                x += Scalar::ONE;
            }
            let out = cs.alloc(|| format!("product {p}"), || Ok(x))?;
            cs.enforce(|| format!("product {p}"), |_| a, |_| b, |_| rest + out);
            vars.push((out, x));
        }
        for i in inputs_done..self.inputs {
            let pick = shape.gen_range(0..vars.len());
            alloc_input(cs, &mut vars, pick + i)?;
        }
        if self.extra_aux {
            cs.alloc(|| "extra", || Ok(Scalar::ONE))?;
        }
        Ok(())
    }
}

/// What the two-step path gives: the witness, a, b, c and the evaluation's verdict.
fn reference(
    compiled: &CompiledCircuit,
    circuit: RandomCircuit,
) -> (
    cuzk_groth16::Witness,
    [Vec<Fr>; 3],
    Result<(), WitnessError>,
) {
    let w = compiled.witness(circuit).unwrap();
    let n = compiled.r1cs().num_constraints();
    let mut out = [vec![Fr::ZERO; n], vec![Fr::ZERO; n], vec![Fr::ZERO; n]];
    let [a, b, c] = &mut out;
    let verdict = compiled.r1cs().evaluate_into(w.assignment(), a, b, c);
    (w, out, verdict)
}

/// The overlapped path with `block` values a block, outputs longer than the rows (their tail
/// must stay untouched).
fn overlapped(
    compiled: &CompiledCircuit,
    circuit: RandomCircuit,
    block: usize,
) -> (Result<cuzk_groth16::Witness, BellpepperError>, [Vec<Fr>; 3]) {
    let n = compiled.r1cs().num_constraints();
    let sentinel = Fr::from_u64(0x5e_47_1e);
    let mut out = [
        vec![sentinel; n + 3],
        vec![sentinel; n + 3],
        vec![sentinel; n + 3],
    ];
    let [a, b, c] = &mut out;
    let r = compiled.witness_and_evaluations_in_blocks(circuit, block, [a, b, c]);
    for v in &mut out {
        assert_eq!(
            &v[n..],
            &[sentinel; 3],
            "entries past the rows are untouched"
        );
        v.truncate(n);
    }
    (r, out)
}

fn check_same(compiled: &CompiledCircuit, circuit: &RandomCircuit, what: &str) {
    let (w, want, verdict) = reference(compiled, circuit.clone());
    let aux = compiled.r1cs().num_private();
    // From one value a block to more than the whole witness.
    for block in [
        1,
        2,
        7,
        64,
        aux / 2 + 1,
        aux * 2 / 3 + 1,
        aux_block(aux),
        aux + 1,
    ] {
        let (got, out) = overlapped(compiled, circuit.clone(), block);
        for (m, (got, want)) in out.iter().zip(&want).enumerate() {
            if let Some(row) = (0..got.len()).find(|&r| got[r] != want[r]) {
                panic!("{what}, block {block}: matrix {m} differs at row {row}");
            }
        }
        match (&verdict, got) {
            (Ok(()), Ok(got)) => assert_eq!(got, w, "{what}, block {block}"),
            (Err(e), Err(BellpepperError::Witness(got))) => {
                assert_eq!(&got, e, "{what}, block {block}")
            }
            (v, g) => panic!("{what}, block {block}: evaluate_into gives {v:?}, overlapped {g:?}"),
        }
    }
}

#[test]
fn overlapped_evaluation_equals_witness_then_evaluate_into() {
    let mut cases = 0;
    for shape in 0..12u64 {
        let products = [0, 1, 5, 40, 300, 6000][shape as usize % 6];
        let inputs = [0, 1, 3, 8][shape as usize % 4];
        let all = [
            Inputs::Last,
            Inputs::Interleaved,
            Inputs::First,
            Inputs::FirstSome,
        ];
        for where_inputs in all {
            for bulk in [false, true] {
                let circuit = RandomCircuit::new(shape, products, inputs, where_inputs, bulk);
                let (compiled, _) = CompiledCircuit::compile(circuit.instance(1)).unwrap();
                let (r1cs, _) = synthesize(circuit.instance(2)).unwrap();
                assert_eq!(
                    &r1cs,
                    compiled.r1cs(),
                    "the structure depends on the shape only"
                );
                let what = format!(
                    "shape {shape} ({products} products, {inputs} inputs, {where_inputs:?}, bulk {bulk})"
                );
                check_same(&compiled, &circuit.instance(2), &what);
                if products > 0 {
                    // Unsatisfied: one row, then several (the smallest is named).
                    let mut bad = circuit.instance(3);
                    bad.corrupt = vec![products / 2];
                    check_same(&compiled, &bad, &format!("{what}, one bad row"));
                    bad.corrupt = vec![products - 1, products / 3, products / 2];
                    check_same(&compiled, &bad, &format!("{what}, bad rows"));
                }
                cases += 1;
            }
        }
    }
    assert_eq!(cases, 96);
}

#[test]
fn inputs_allocated_last_leave_only_their_rows_for_the_end() {
    let circuit = RandomCircuit::new(7, 2000, 4, Inputs::Last, false);
    let (compiled, _) = CompiledCircuit::compile(circuit.instance(1)).unwrap();
    let r1cs = compiled.r1cs();
    // Rows that read an input: the bindings, the late products that read one, the instance
    // rows of the inputs; every other row is evaluated during synthesis.
    let reads_input = (0..r1cs.num_constraints())
        .filter(|&row| {
            [r1cs.a(), r1cs.b(), r1cs.c()].iter().any(|m| {
                m.row(row)
                    .unwrap()
                    .cols()
                    .iter()
                    .any(|&c| c >= 1 && c as usize <= r1cs.num_public())
            })
        })
        .count();
    assert!(reads_input >= 2 * 4, "{reads_input}");
    assert_eq!(
        compiled.schedule.early_rows(),
        r1cs.num_constraints() - reads_input
    );
}

#[test]
fn a_changed_shape_a_failing_or_panicking_circuit_and_short_outputs_are_reported() {
    let circuit = RandomCircuit::new(3, 300, 2, Inputs::Last, false);
    let (compiled, _) = CompiledCircuit::compile(circuit.instance(1)).unwrap();
    let n = compiled.r1cs().num_constraints();
    let mut out = [vec![Fr::ZERO; n], vec![Fr::ZERO; n], vec![Fr::ZERO; n]];
    let mut run = |c: RandomCircuit| {
        let [a, b, c2] = &mut out;
        compiled.witness_and_evaluations(c, a, b, c2)
    };

    let mut more = circuit.instance(2);
    more.extra_aux = true;
    let err = run(more).unwrap_err();
    assert!(
        matches!(err, BellpepperError::ShapeChanged { found_aux, aux, .. } if found_aux == aux + 1),
        "{err}"
    );
    let fewer = RandomCircuit::new(3, 200, 2, Inputs::Last, false);
    assert!(matches!(
        run(fewer.instance(2)).unwrap_err(),
        BellpepperError::ShapeChanged { .. }
    ));
    let mut failing = circuit.instance(2);
    failing.fail_after = Some((150, false));
    assert!(matches!(
        run(failing).unwrap_err(),
        BellpepperError::Synthesis(SynthesisError::AssignmentMissing)
    ));
    // A panic in the circuit reaches the caller (the evaluator thread ends with it).
    let mut panicking = circuit.instance(2);
    panicking.fail_after = Some((150, true));
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(panicking)));
    assert!(caught.is_err());
    assert!(
        run(circuit.instance(2)).is_ok(),
        "usable after all of these"
    );

    let mut short = vec![Fr::ZERO; n - 1];
    let [a, b, _] = &mut out;
    let err = compiled
        .witness_and_evaluations(circuit.instance(2), a, b, &mut short)
        .unwrap_err();
    assert!(matches!(
        err,
        BellpepperError::Witness(WitnessError::OutputLength { expected, found }) if expected == n && found == n - 1
    ));
}
