//! Witness-only synthesis plus the sparse matrix-vector product against full synthesis, on
//! bellpepper's SHA-256 gadget: the kept-system path must be at least 3x faster.

use std::time::{Duration, Instant};

use cuzk_bellpepper::sha256_circuit::Sha256Circuit;
use cuzk_bellpepper::{CompiledCircuit, synthesize};
use cuzk_field::Fr;

fn best_of<T>(runs: usize, mut f: impl FnMut() -> T) -> (Duration, T) {
    let mut best = Duration::MAX;
    let mut out = None;
    for _ in 0..runs {
        let t = Instant::now();
        let v = f();
        best = best.min(t.elapsed());
        out = Some(v);
    }
    (best, out.expect("runs >= 1"))
}

#[test]
fn witness_only_synthesis_is_at_least_3x_faster_on_sha256() {
    let (compiled, _) = CompiledCircuit::compile(Sha256Circuit::new(2, 1)).unwrap();
    let n = compiled.r1cs.num_constraints();
    let next = Sha256Circuit::new(2, 2);

    let (full, (r1cs_full, w_full)) = best_of(3, || synthesize(next.clone()).unwrap());
    assert_eq!(r1cs_full, compiled.r1cs, "same circuit, same system");
    let (fast, w_fast) = best_of(3, || {
        let w = compiled.witness(next.clone()).unwrap();
        let (mut a, mut b, mut c) = (vec![Fr::ZERO; n], vec![Fr::ZERO; n], vec![Fr::ZERO; n]);
        compiled
            .r1cs
            .evaluate_into(w.assignment(), &mut a, &mut b, &mut c)
            .expect("the witness satisfies every row");
        w
    });
    assert_eq!(
        w_fast, w_full,
        "witness-only synthesis gives the full synthesis's witness"
    );
    let ratio = full.as_secs_f64() / fast.as_secs_f64();
    println!(
        "SHA-256 x2 ({n} constraints): full synthesis {:.1} ms, witness-only + A·z,B·z,C·z {:.1} ms: {ratio:.2}x",
        full.as_secs_f64() * 1e3,
        fast.as_secs_f64() * 1e3
    );
    assert!(ratio >= 3.0, "witness-only path is only {ratio:.2}x faster");

    // A different circuit shape is refused by the kept system.
    let err = compiled.witness(Sha256Circuit::new(1, 2)).unwrap_err();
    assert!(err.to_string().contains("not the same circuit"), "{err}");
}
