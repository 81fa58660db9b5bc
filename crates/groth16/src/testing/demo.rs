//! Demo circuits whose witnesses look like real ones: about 70% of the values are bits from
//! bit decompositions (booleanity and packing constraints), the rest full-width field elements
//! from chains of squarings and products, with a few public inputs feeding the chains.
//! Satisfied by construction; the total row count (instance rows included) is exactly 2^k (or
//! the given count, whose QAP domain is the next power of two).

use cuzk_field::Fr;
use rand_core::RngCore;

use crate::r1cs::{R1cs, R1csBuilder, R1csError, Variable, Witness};

/// Fraction of the circuit constraints spent on bit decompositions by [`circuit`] (percent).
pub const REALISTIC_BOOLEAN_PERCENT: u32 = 70;
/// Bits per decomposed value: 32 booleanity rows + 1 packing row per block.
const BITS_PER_VALUE: usize = 32;

/// Why a demo circuit could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DemoError {
    #[error("{rows} rows cannot hold {num_public} public inputs plus their instance rows")]
    TooSmall { rows: usize, num_public: usize },
    #[error("{0} constraints is above the supported maximum 2^28")]
    TooLarge(usize),
    #[error("boolean percentage {0} is above 100")]
    BadPercent(u32),
    #[error(transparent)]
    R1cs(#[from] R1csError),
}

/// A satisfied circuit of exactly 2^`log_constraints` rows (including the `num_public + 1`
/// instance rows) and its witness, ~70% of the values bits.
pub fn circuit(
    log_constraints: u32,
    num_public: usize,
    rng: &mut impl RngCore,
) -> Result<(R1cs, Witness), DemoError> {
    circuit_with(log_constraints, num_public, REALISTIC_BOOLEAN_PERCENT, rng)
}

/// As [`circuit`], with `boolean_percent` of the constraints spent on bit decompositions
/// (0 gives a full-width random witness: every value a product or square of random elements).
pub fn circuit_with(
    log_constraints: u32,
    num_public: usize,
    boolean_percent: u32,
    rng: &mut impl RngCore,
) -> Result<(R1cs, Witness), DemoError> {
    let rows = 1usize
        .checked_shl(log_constraints)
        .ok_or(DemoError::TooLarge(usize::MAX))?;
    circuit_with_rows(rows, num_public, boolean_percent, rng)
}

/// As [`circuit_with`], with exactly `rows` rows (the domain is the next power of two: a
/// 32 GiB PoRep partition has ~130M constraints in a 2^27 domain).
pub fn circuit_with_rows(
    rows: usize,
    num_public: usize,
    boolean_percent: u32,
    rng: &mut impl RngCore,
) -> Result<(R1cs, Witness), DemoError> {
    if boolean_percent > 100 {
        return Err(DemoError::BadPercent(boolean_percent));
    }
    if rows > 1 << 28 {
        return Err(DemoError::TooLarge(rows));
    }
    // Each public input starts a chain with one product row; keep at least one more row.
    let Some(budget) = rows.checked_sub(2 * num_public + 2) else {
        return Err(DemoError::TooSmall { rows, num_public });
    };
    let total = budget + num_public + 1; // constraints excluding instance rows
    // Every public input needs its own product row in the field part.
    let field = (total - total * boolean_percent as usize / 100).max(num_public);
    let boolean = total - field;

    let mut b = R1csBuilder::with_capacity(total, 2 * total);
    let one = Fr::ONE;
    let minus_one = -Fr::ONE;

    // Bit decompositions: b_j·(b_j − 1) = 0 for each bit, then (Σ 2^j·b_j)·1 = x.
    let mut left = boolean;
    let mut powers = Vec::with_capacity(BITS_PER_VALUE);
    let mut p = Fr::ONE;
    for _ in 0..BITS_PER_VALUE {
        powers.push(p);
        p = p.double();
    }
    let mut packing: Vec<(Variable, Fr)> = Vec::with_capacity(BITS_PER_VALUE);
    while left > 0 {
        let bits = (left - 1).min(BITS_PER_VALUE);
        if bits == 0 {
            // One row left: a lone booleanity constraint.
            let bit = b.alloc_private(Fr::from_u64(rng.next_u64() & 1));
            b.enforce(
                &[(bit, one)],
                &[(bit, one), (Variable::One, minus_one)],
                &[],
            );
            break;
        }
        let value = rng.next_u64() & ((1u64 << bits) - 1);
        packing.clear();
        for (j, &pow) in powers.iter().enumerate().take(bits) {
            let bit = b.alloc_private(Fr::from_u64((value >> j) & 1));
            b.enforce(
                &[(bit, one)],
                &[(bit, one), (Variable::One, minus_one)],
                &[],
            );
            packing.push((bit, pow));
        }
        let x = b.alloc_private(Fr::from_u64(value));
        b.enforce(&packing, &[(Variable::One, one)], &[(x, one)]);
        left -= bits + 1;
    }

    // Full-width chains: segment j starts with x1 = p_j·x0 for public input p_j, then
    // alternates squarings x' = x·x and products x' = (x + 3)·x_prev.
    let segments = num_public.max(1);
    let mut left = field;
    for seg in 0..segments {
        let mut len = left / (segments - seg);
        left -= len;
        let x0 = b.alloc_private(Fr::random(rng));
        let mut prev = x0;
        let mut cur = if seg < num_public {
            let p = b.alloc_public(Fr::random(rng));
            let v = value(&b, p) * value(&b, x0);
            let x1 = b.alloc_private(v);
            b.enforce(&[(p, one)], &[(x0, one)], &[(x1, one)]);
            len = len.saturating_sub(1);
            x1
        } else {
            x0
        };
        let three = Fr::from_u64(3);
        for i in 0..len {
            let next = if i % 2 == 0 {
                let v = value(&b, cur).square();
                let x = b.alloc_private(v);
                b.enforce(&[(cur, one)], &[(cur, one)], &[(x, one)]);
                x
            } else {
                let v = (value(&b, cur) + three) * value(&b, prev);
                let x = b.alloc_private(v);
                b.enforce(
                    &[(cur, one), (Variable::One, three)],
                    &[(prev, one)],
                    &[(x, one)],
                );
                x
            };
            prev = cur;
            cur = next;
        }
    }
    Ok(b.build()?)
}

fn value(b: &R1csBuilder, v: Variable) -> Fr {
    // Only variables allocated by this module are read back.
    b.value(v).unwrap_or(Fr::ZERO)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    #[test]
    fn exact_size_satisfied_and_mostly_boolean() {
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        for (k, p) in [(3u32, 3usize), (4, 0), (5, 2), (10, 3), (12, 1)] {
            let (r1cs, w) = circuit(k, p, &mut rng).unwrap();
            assert_eq!(r1cs.num_constraints(), 1 << k, "k = {k}");
            assert_eq!(r1cs.num_public(), p);
            assert_eq!(r1cs.is_satisfied(&w), Ok(()));
            if k >= 10 {
                let bits = w
                    .private()
                    .iter()
                    .filter(|v| v.is_zero() || **v == Fr::ONE)
                    .count();
                let frac = bits as f64 / w.private().len() as f64;
                assert!((0.6..0.8).contains(&frac), "boolean fraction {frac}");
            }
        }
        assert!(matches!(
            circuit(2, 2, &mut rng),
            Err(DemoError::TooSmall { .. })
        ));
        assert_eq!(
            circuit(29, 1, &mut rng).unwrap_err(),
            DemoError::TooLarge(1 << 29)
        );
        // Rows short of a power of two: that many constraints, the next power's domain,
        // fewer variables than the domain (as a 2^27 Filecoin partition has).
        let (r1cs, w) = circuit_with_rows(1000, 3, 75, &mut rng).unwrap();
        assert_eq!(r1cs.num_constraints(), 1000);
        assert_eq!(r1cs.domain_size(), 1024);
        assert!(r1cs.num_variables() < 1024, "{}", r1cs.num_variables());
        assert_eq!(r1cs.is_satisfied(&w), Ok(()));
    }

    #[test]
    fn boolean_percent_controls_the_witness_profile() {
        let mut rng = ChaCha20Rng::seed_from_u64(2);
        let bits = |w: &Witness| {
            let n = w.private().len() as f64;
            w.private()
                .iter()
                .filter(|v| v.is_zero() || **v == Fr::ONE)
                .count() as f64
                / n
        };
        for (pct, lo, hi) in [(0u32, 0.0, 0.01), (40, 0.3, 0.5), (100, 0.9, 1.0)] {
            let (r1cs, w) = circuit_with(11, 2, pct, &mut rng).unwrap();
            assert_eq!(r1cs.num_constraints(), 1 << 11);
            assert_eq!(r1cs.is_satisfied(&w), Ok(()));
            let f = bits(&w);
            assert!((lo..=hi).contains(&f), "{pct}%: boolean fraction {f}");
        }
        assert_eq!(
            circuit_with(8, 1, 101, &mut rng).unwrap_err(),
            DemoError::BadPercent(101)
        );
    }
}

/// A demo circuit with its witness and key, for tests and benches.
#[derive(Debug)]
pub struct Fixture {
    pub r1cs: R1cs,
    pub witness: Witness,
    pub pk: crate::ProvingKey,
    /// Time of the parameter generation, and where it ran (`"gpu"` or `"cpu"`).
    pub setup: std::time::Duration,
    pub setup_on: &'static str,
}

impl Fixture {
    /// [`circuit_with`]`(log, 4, boolean_percent)` and its key from fresh toxic waste, all from
    /// `seed`; the key made on `gpu` when given (the CPU setup, said on stdout, if that fails).
    pub fn new(log: u32, boolean_percent: u32, seed: u64, gpu: Option<&cuzk_gpu::Gpu>) -> Self {
        use rand_core::SeedableRng;
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
        let (r1cs, witness) =
            circuit_with(log, 4, boolean_percent, &mut rng).expect("a demo circuit of this size");
        let tw = crate::ToxicWaste::random(&mut rng);
        if let Some(g) = gpu {
            let t = std::time::Instant::now();
            match crate::setup::gpu::generate_parameters_gpu(g, &r1cs, &tw) {
                Ok((pk, _)) => {
                    return Self {
                        r1cs,
                        witness,
                        pk,
                        setup: t.elapsed(),
                        setup_on: "gpu",
                    };
                }
                Err(e) => println!("2^{log}: GPU setup failed ({e}); using the CPU setup"),
            }
        }
        let t = std::time::Instant::now();
        let (pk, _) = crate::generate_parameters_with_toxic_waste(&r1cs, &tw)
            .expect("parameters of a demo circuit");
        Self {
            r1cs,
            witness,
            pk,
            setup: t.elapsed(),
            setup_on: "cpu",
        }
    }

    /// The proof randomness (r, s) of `seed`.
    pub fn randomness(seed: u64) -> (Fr, Fr) {
        use rand_core::SeedableRng;
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed ^ 0x5eed);
        (Fr::random(&mut rng), Fr::random(&mut rng))
    }

    /// A proof on `backend` with the randomness of `seed`.
    pub fn prove(
        &self,
        backend: &dyn crate::ProverBackend,
        seed: u64,
    ) -> Result<(crate::Proof, crate::ProofTimings), crate::ProveError> {
        let (r, s) = Self::randomness(seed);
        crate::create_proof_with_backend(backend, &self.pk, &self.r1cs, &self.witness, r, s)
    }
}
