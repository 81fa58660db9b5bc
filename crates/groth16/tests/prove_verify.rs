//! End to end: setup, prove, verify, and every way a proof or witness can be wrong.

use std::sync::atomic::{AtomicUsize, Ordering};

use cuzk_field::{Fr, G1Projective, G2Projective};
use cuzk_groth16::testing::demo;
use cuzk_groth16::{
    BackendError, BackendErrorKind, CpuBackend, Evaluations, KeyRef, MsmValue, ProveError,
    ProverBackend, Query, R1cs, R1csBuilder, StagedWitness, Variable, VerifyError, Witness,
    WitnessError, create_proof, create_proof_with_backend, create_proof_with_randomness,
    generate_parameters, prepare_verifying_key, verify_proof,
};
use cuzk_ntt::Domain;
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

fn rng(seed: u64) -> ChaCha20Rng {
    ChaCha20Rng::seed_from_u64(seed)
}

#[test]
fn proof_verifies_and_any_tampering_fails() {
    let mut rng = rng(1);
    let (r1cs, w) = demo::circuit(8, 3, &mut rng).unwrap();
    let pk = generate_parameters(&r1cs, &mut rng).unwrap();
    let pvk = prepare_verifying_key(&pk.vk);
    let proof = create_proof(&pk, &r1cs, &w, &mut rng).unwrap();
    let inputs = w.public_inputs().to_vec();
    assert_eq!(verify_proof(&pvk, &proof, &inputs), Ok(()));

    let g1 = G1Projective::generator();
    let g2 = G2Projective::generator();
    let mut bad = proof;
    bad.a = (bad.a.to_projective() + g1).to_affine();
    assert_eq!(
        verify_proof(&pvk, &bad, &inputs),
        Err(VerifyError::InvalidProof)
    );
    let mut bad = proof;
    bad.b = (bad.b.to_projective() + g2).to_affine();
    assert_eq!(
        verify_proof(&pvk, &bad, &inputs),
        Err(VerifyError::InvalidProof)
    );
    let mut bad = proof;
    bad.c = (bad.c.to_projective() + g1).to_affine();
    assert_eq!(
        verify_proof(&pvk, &bad, &inputs),
        Err(VerifyError::InvalidProof)
    );
    // Swapping A and C must fail too (not just "any change to one point").
    let mut bad = proof;
    core::mem::swap(&mut bad.a, &mut bad.c);
    assert_eq!(
        verify_proof(&pvk, &bad, &inputs),
        Err(VerifyError::InvalidProof)
    );

    for i in 0..inputs.len() {
        let mut x = inputs.clone();
        x[i] += Fr::ONE;
        assert_eq!(
            verify_proof(&pvk, &proof, &x),
            Err(VerifyError::InvalidProof),
            "input {i}"
        );
    }
    assert_eq!(
        verify_proof(&pvk, &proof, &inputs[1..]),
        Err(VerifyError::PublicInputCount {
            expected: 3,
            found: 2
        })
    );
}

#[test]
fn unsatisfied_or_misshapen_witness_gives_an_error_not_a_proof() {
    let mut rng = rng(2);
    let (r1cs, w) = demo::circuit(6, 1, &mut rng).unwrap();
    let pk = generate_parameters(&r1cs, &mut rng).unwrap();

    // Flip a bit variable (index 2 = first private value, a boolean in the demo layout).
    let mut bad = w.clone();
    let v = w.assignment()[2];
    bad.set(2, Fr::ONE - v).unwrap();
    let err = create_proof(&pk, &r1cs, &bad, &mut rng).unwrap_err();
    let ProveError::Witness(WitnessError::Unsatisfied { constraint }) = err else {
        panic!("expected an unsatisfied constraint, got {err:?}");
    };
    assert_eq!(
        r1cs.is_satisfied(&bad),
        Err(WitnessError::Unsatisfied { constraint })
    );

    let mut z = w.assignment().to_vec();
    z.pop();
    let short = Witness::from_assignment(1, z).unwrap();
    assert!(matches!(
        create_proof(&pk, &r1cs, &short, &mut rng),
        Err(ProveError::Witness(WitnessError::Length { .. }))
    ));
    let mut z = w.assignment().to_vec();
    z.push(Fr::ONE);
    let long = Witness::from_assignment(1, z).unwrap();
    assert!(matches!(
        create_proof(&pk, &r1cs, &long, &mut rng),
        Err(ProveError::Witness(WitnessError::Length { .. }))
    ));

    // A key for another circuit shape is refused.
    let (other, ow) = demo::circuit(7, 1, &mut rng).unwrap();
    assert!(matches!(
        create_proof(&pk, &other, &ow, &mut rng),
        Err(ProveError::KeyMismatch { .. })
    ));
}

#[test]
fn fixed_randomness_is_deterministic() {
    let mut rng = rng(3);
    let (r1cs, w) = demo::circuit(7, 2, &mut rng).unwrap();
    let pk = generate_parameters(&r1cs, &mut rng).unwrap();
    let (r, s) = (Fr::random(&mut rng), Fr::random(&mut rng));
    let p1 = create_proof_with_randomness(&pk, &r1cs, &w, r, s).unwrap();
    let p2 = create_proof_with_randomness(&pk, &r1cs, &w, r, s).unwrap();
    assert_eq!(p1, p2);
    assert_eq!(p1.to_bytes(), p2.to_bytes());
    let p3 = create_proof_with_randomness(&pk, &r1cs, &w, r + Fr::ONE, s).unwrap();
    assert_ne!(p1, p3);
    let pvk = prepare_verifying_key(&pk.vk);
    assert_eq!(verify_proof(&pvk, &p3, w.public_inputs()), Ok(()));
    // r = s = 0 is a valid (unblinded) proof as well.
    let p0 = create_proof_with_randomness(&pk, &r1cs, &w, Fr::ZERO, Fr::ZERO).unwrap();
    assert_eq!(verify_proof(&pvk, &p0, w.public_inputs()), Ok(()));
}

/// A CPU backend whose witness MSM over one query fails, and which counts the evaluation
/// buffers it lends and gets back.
#[derive(Debug)]
struct FailingMsm {
    fails: Query,
    lent: AtomicUsize,
    returned: AtomicUsize,
}

impl ProverBackend for FailingMsm {
    fn name(&self) -> &'static str {
        "probe"
    }

    fn witness_msm(
        &self,
        pk: KeyRef<'_>,
        z: &[Fr],
        staged: &StagedWitness,
        query: Query,
        offset: usize,
    ) -> Result<MsmValue, BackendError> {
        if query == self.fails {
            return Err(BackendError::invalid("probe", "injected failure"));
        }
        CpuBackend.witness_msm(pk, z, staged, query, offset)
    }

    fn evaluation_buffers(&self, n: usize) -> Result<Evaluations, BackendError> {
        self.lent.fetch_add(1, Ordering::Relaxed);
        CpuBackend.evaluation_buffers(n)
    }

    fn return_evaluations(&self, abc: Evaluations) {
        self.returned.fetch_add(1, Ordering::Relaxed);
        drop(abc);
    }
}

#[test]
fn a_failed_witness_msm_fails_the_proof_and_returns_the_evaluation_buffers() {
    let mut rng = rng(5);
    let (r1cs, w) = demo::circuit(8, 2, &mut rng).unwrap();
    let pk = generate_parameters(&r1cs, &mut rng).unwrap();
    let (r, s) = (Fr::random(&mut rng), Fr::random(&mut rng));
    for (query, _) in cuzk_groth16::witness_msm_order(r1cs.num_public()) {
        let b = FailingMsm {
            fails: query,
            lent: AtomicUsize::new(0),
            returned: AtomicUsize::new(0),
        };
        let e = create_proof_with_backend(&b, &pk, &r1cs, &w, r, s).expect_err("the MSM failed");
        assert!(
            matches!(&e, ProveError::Backend(b) if b.kind() == BackendErrorKind::Invalid),
            "{query}: {e}"
        );
        assert_eq!(b.lent.load(Ordering::Relaxed), 1, "{query}");
        assert_eq!(b.returned.load(Ordering::Relaxed), 1, "{query}");
    }
    // A witness error outranks the backend's error of the same proof.
    let mut bad = w.assignment().to_vec();
    let last = bad.len() - 1;
    bad[last] += Fr::ONE;
    let bad = Witness::from_assignment(r1cs.num_public(), bad).unwrap();
    let b = FailingMsm {
        fails: Query::A,
        lent: AtomicUsize::new(0),
        returned: AtomicUsize::new(0),
    };
    let e = create_proof_with_backend(&b, &pk, &r1cs, &bad, r, s).expect_err("bad witness");
    assert!(matches!(e, ProveError::Witness(_)), "{e}");
    assert_eq!(b.returned.load(Ordering::Relaxed), 1);
}

/// Horner evaluation of coefficients at x.
fn eval(coeffs: &[Fr], x: Fr) -> Fr {
    coeffs.iter().rev().fold(Fr::ZERO, |acc, c| acc * x + *c)
}

#[test]
fn quotient_satisfies_the_qap_identity_at_a_random_point() {
    let mut rng = rng(4);
    for (k, p) in [(4u32, 1usize), (9, 2)] {
        let (r1cs, w) = demo::circuit(k, p, &mut rng).unwrap();
        let domain = Domain::for_size(r1cs.num_constraints()).unwrap();
        let n = domain.size();
        let (mut a, mut b, mut c) = (vec![Fr::ZERO; n], vec![Fr::ZERO; n], vec![Fr::ZERO; n]);
        r1cs.evaluate_into(w.assignment(), &mut a, &mut b, &mut c)
            .unwrap();
        let abc = Evaluations {
            a: a.clone().into(),
            b: b.clone().into(),
            c: c.clone().into(),
        };
        let h = CpuBackend.quotient(&domain, abc).unwrap();
        assert!(h[n - 1].is_zero(), "deg H ≤ n − 2");
        for v in [&mut a, &mut b, &mut c] {
            domain.ifft_in_place(v).unwrap();
        }
        let x = Fr::random(&mut rng);
        let z = domain.evaluate_vanishing_polynomial(x);
        assert_eq!(
            eval(&a, x) * eval(&b, x) - eval(&c, x),
            eval(&h, x) * z,
            "k = {k}"
        );
    }
}

/// A random satisfied R1CS: each constraint multiplies two random linear combinations of
/// existing variables into a new variable, with random extra terms on the C side.
fn random_circuit(
    seed: u64,
    constraints: usize,
    num_public: usize,
    density: usize,
) -> (R1cs, Witness) {
    let mut rng = rng(seed);
    let mut b = R1csBuilder::new();
    let mut vars = vec![Variable::One];
    for _ in 0..num_public {
        vars.push(b.alloc_public(Fr::random(&mut rng)));
    }
    for _ in 0..2 {
        vars.push(b.alloc_private(Fr::random(&mut rng)));
    }
    let value = |b: &R1csBuilder, lc: &[(Variable, Fr)]| -> Fr {
        lc.iter().map(|(v, c)| b.value(*v).unwrap() * *c).sum()
    };
    for _ in 0..constraints {
        let lc = |rng: &mut ChaCha20Rng| -> Vec<(Variable, Fr)> {
            (0..rng.gen_range(0..=density))
                .map(|_| {
                    let v = vars[rng.gen_range(0..vars.len())];
                    let c = if rng.gen_bool(0.5) {
                        Fr::ONE
                    } else {
                        Fr::random(rng)
                    };
                    (v, c)
                })
                .collect()
        };
        let la = lc(&mut rng);
        let lb = lc(&mut rng);
        let mut lc_c = lc(&mut rng);
        // out = <a>·<b> − <c extra>, so <c extra> + out = <a>·<b>.
        let out_val = value(&b, &la) * value(&b, &lb) - value(&b, &lc_c);
        let out = b.alloc_private(out_val);
        lc_c.push((out, Fr::ONE));
        b.enforce(&la, &lb, &lc_c);
        vars.push(out);
    }
    b.build().unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(6))]
    #[test]
    fn random_circuits_prove_and_verify(
        seed in any::<u64>(),
        constraints in 1usize..200,
        num_public in 0usize..5,
        density in 1usize..5,
    ) {
        let (r1cs, w) = random_circuit(seed, constraints, num_public, density);
        prop_assert_eq!(r1cs.is_satisfied(&w), Ok(()));
        let mut rng = rng(seed ^ 0x5eed);
        let pk = generate_parameters(&r1cs, &mut rng).unwrap();
        let pvk = prepare_verifying_key(&pk.vk);
        let proof = create_proof(&pk, &r1cs, &w, &mut rng).unwrap();
        prop_assert_eq!(verify_proof(&pvk, &proof, w.public_inputs()), Ok(()));
        if num_public > 0 {
            let mut x = w.public_inputs().to_vec();
            x[0] += Fr::ONE;
            prop_assert_eq!(verify_proof(&pvk, &proof, &x), Err(VerifyError::InvalidProof));
        }
    }
}

#[test]
fn smallest_circuits_work() {
    // No constraints at all: one instance row, a domain of size 1, an empty h_query.
    let mut rng = rng(5);
    for public in [0usize, 1] {
        let mut b = R1csBuilder::new();
        for _ in 0..public {
            b.alloc_public(Fr::from_u64(9));
        }
        let (r1cs, w) = b.build().unwrap();
        assert_eq!(r1cs.num_constraints(), public + 1);
        let pk = generate_parameters(&r1cs, &mut rng).unwrap();
        let proof = create_proof(&pk, &r1cs, &w, &mut rng).unwrap();
        let pvk = prepare_verifying_key(&pk.vk);
        assert_eq!(verify_proof(&pvk, &proof, w.public_inputs()), Ok(()));
    }
}
