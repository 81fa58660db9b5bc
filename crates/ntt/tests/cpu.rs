//! CPU transforms against a direct O(n^2) DFT, round trips at large sizes, and the algebraic
//! identities the Groth16 quotient relies on.

use cuzk_field::Fr;
use cuzk_ntt::{Domain, NttError, bit_reverse_index};
use proptest::prelude::*;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

fn random_vec(len: usize, seed: u64) -> Vec<Fr> {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    (0..len).map(|_| Fr::random(&mut rng)).collect()
}

/// X_k = Σ_j x_j (shift·ω^k)^j — evaluation of the polynomial with coefficients x.
fn naive_eval(x: &[Fr], omega: Fr, shift: Fr) -> Vec<Fr> {
    let mut point = shift;
    let mut out = Vec::with_capacity(x.len());
    for _ in 0..x.len() {
        // Horner.
        out.push(x.iter().rev().fold(Fr::ZERO, |acc, c| acc * point + c));
        point *= omega;
    }
    out
}

fn domain(log_n: u32) -> Domain {
    Domain::new(log_n).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn fft_matches_direct_dft(log_n in 0u32..=8, seed: u64) {
        let d = domain(log_n);
        let x = random_vec(d.size(), seed);
        let mut y = x.clone();
        d.fft_in_place(&mut y).unwrap();
        prop_assert_eq!(&y, &naive_eval(&x, d.generator(), Fr::ONE));
    }

    #[test]
    fn coset_fft_matches_direct_dft(log_n in 0u32..=8, seed: u64) {
        let d = domain(log_n);
        let x = random_vec(d.size(), seed);
        let mut y = x.clone();
        d.coset_fft_in_place(&mut y).unwrap();
        prop_assert_eq!(&y, &naive_eval(&x, d.generator(), Fr::multiplicative_generator()));
    }

    #[test]
    fn ifft_matches_direct_inverse_dft(log_n in 0u32..=8, seed: u64) {
        let d = domain(log_n);
        let x = random_vec(d.size(), seed);
        let mut y = x.clone();
        d.ifft_in_place(&mut y).unwrap();
        // The inverse DFT is (1/n)·DFT with ω^-1.
        let expected: Vec<Fr> =
            naive_eval(&x, d.generator_inv(), Fr::ONE).into_iter().map(|v| v * d.size_inv()).collect();
        prop_assert_eq!(&y, &expected);
        let mut z = x.clone();
        d.coset_ifft_in_place(&mut z).unwrap();
        // Coefficients c_i = g^-i · (inverse DFT)_i.
        let g_inv = d.coset_shift_inv();
        let mut s = Fr::ONE;
        let expected: Vec<Fr> = expected.into_iter().map(|v| { let r = v * s; s *= g_inv; r }).collect();
        prop_assert_eq!(&z, &expected);
    }

    #[test]
    fn transforms_are_linear(log_n in 0u32..=10, seed: u64, k in any::<u64>()) {
        let d = domain(log_n);
        let x = random_vec(d.size(), seed);
        let y = random_vec(d.size(), seed ^ 0x9e37_79b9);
        let k = Fr::from_u64(k);
        let mut lhs: Vec<Fr> = x.iter().zip(&y).map(|(a, b)| *a * k + b).collect();
        let (mut fx, mut fy) = (x, y);
        d.coset_fft_in_place(&mut lhs).unwrap();
        d.coset_fft_in_place(&mut fx).unwrap();
        d.coset_fft_in_place(&mut fy).unwrap();
        let rhs: Vec<Fr> = fx.iter().zip(&fy).map(|(a, b)| *a * k + b).collect();
        prop_assert_eq!(lhs, rhs);
    }

    #[test]
    fn lagrange_coefficients_interpolate(log_n in 0u32..=7, seed: u64, in_domain: bool, idx: usize) {
        let d = domain(log_n);
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let tau = if in_domain { d.element(idx) } else { Fr::random(&mut rng) };
        let evals = random_vec(d.size(), seed.wrapping_add(1));
        // Σ L_i(τ)·p(ω^i) = p(τ) for p of degree < n.
        let mut coeffs = evals.clone();
        d.ifft_in_place(&mut coeffs).unwrap();
        let p_tau = coeffs.iter().rev().fold(Fr::ZERO, |acc, c| acc * tau + c);
        let l = d.evaluate_all_lagrange_coefficients(tau);
        let combo: Fr = l.iter().zip(&evals).map(|(a, b)| *a * b).sum();
        prop_assert_eq!(combo, p_tau);
    }
}

#[test]
fn round_trips_at_large_sizes() {
    for log_n in [11u32, 12, 13, 16, 18] {
        let d = domain(log_n);
        let x = random_vec(d.size(), u64::from(log_n));
        let mut y = x.clone();
        d.fft_in_place(&mut y).unwrap();
        assert_ne!(y, x);
        d.ifft_in_place(&mut y).unwrap();
        assert_eq!(y, x, "ifft∘fft at 2^{log_n}");
        d.coset_fft_in_place(&mut y).unwrap();
        d.coset_ifft_in_place(&mut y).unwrap();
        assert_eq!(y, x, "coset round trip at 2^{log_n}");
    }
}

#[test]
fn coset_fft_is_fft_of_scaled_coefficients() {
    for log_n in [5u32, 12, 15] {
        let d = domain(log_n);
        let x = random_vec(d.size(), 7 + u64::from(log_n));
        let mut scaled = x.clone();
        let mut s = Fr::ONE;
        for v in scaled.iter_mut() {
            *v *= s;
            s *= Fr::multiplicative_generator();
        }
        d.fft_in_place(&mut scaled).unwrap();
        let mut y = x;
        d.coset_fft_in_place(&mut y).unwrap();
        assert_eq!(y, scaled);
    }
}

/// A single evaluation point checked by Horner at a size where the blocked and the chunked
/// stages both run.
#[test]
fn large_fft_spot_values() {
    let d = domain(14);
    let x = random_vec(d.size(), 99);
    let mut y = x.clone();
    d.fft_in_place(&mut y).unwrap();
    for k in [0usize, 1, 2047, 2048, 8191, 16383] {
        let point = d.element(k);
        let expect = x.iter().rev().fold(Fr::ZERO, |acc, c| acc * point + c);
        assert_eq!(y[k], expect, "X_{k}");
    }
}

#[test]
fn quotient_matches_definition() {
    // A satisfied "circuit": a·b = c on H, so (a·b − c) vanishes on H and H has degree < n − 1.
    let d = domain(10);
    let a = random_vec(d.size(), 1);
    let b = random_vec(d.size(), 2);
    let c: Vec<Fr> = a.iter().zip(&b).map(|(x, y)| *x * y).collect();
    let h = d.quotient(&a, &b, &c).unwrap();
    // Check A(τ)·B(τ) − C(τ) = H(τ)·Z(τ) at a random τ.
    let tau = Fr::from_u64(123_456_789);
    let eval = |evals: &[Fr]| {
        let l = d.evaluate_all_lagrange_coefficients(tau);
        l.iter().zip(evals).map(|(x, y)| *x * y).sum::<Fr>()
    };
    let h_tau = h.iter().rev().fold(Fr::ZERO, |acc, c| acc * tau + c);
    assert_eq!(
        eval(&a) * eval(&b) - eval(&c),
        h_tau * d.evaluate_vanishing_polynomial(tau)
    );
    assert_eq!(h[d.size() - 1], Fr::ZERO, "deg H ≤ n − 2");

    // And the step-by-step definition, transform by transform.
    let z_inv = d.vanishing_on_coset_inverse();
    let mut steps = [a, b, c];
    for v in steps.iter_mut() {
        d.ifft_in_place(v).unwrap();
        d.coset_fft_in_place(v).unwrap();
    }
    let [a, b, c] = steps;
    let mut expect: Vec<Fr> = (0..d.size())
        .map(|i| (a[i] * b[i] - c[i]) * z_inv)
        .collect();
    d.coset_ifft_in_place(&mut expect).unwrap();
    assert_eq!(h, expect);
}

#[test]
fn vanishing_on_coset_is_constant() {
    let d = domain(6);
    let g = d.coset_shift();
    let z_inv = d.vanishing_on_coset_inverse();
    for i in [0usize, 1, 33, 63] {
        let z = d.evaluate_vanishing_polynomial(g * d.element(i));
        assert_eq!(z * z_inv, Fr::ONE);
    }
    assert_eq!(d.evaluate_vanishing_polynomial(d.element(5)), Fr::ZERO);
}

#[test]
fn domain_sizes_and_errors() {
    assert_eq!(Domain::for_size(0).unwrap().size(), 1);
    assert_eq!(Domain::for_size(1).unwrap().size(), 1);
    assert_eq!(Domain::for_size(5).unwrap().log_size(), 3);
    assert_eq!(Domain::for_size(1 << 20).unwrap().log_size(), 20);
    assert_eq!(Domain::for_size((1 << 20) + 1).unwrap().log_size(), 21);
    assert!(matches!(
        Domain::new(29),
        Err(NttError::LogSizeTooLarge { log_n: 29, .. })
    ));
    assert!(matches!(
        Domain::new(33),
        Err(NttError::LogSizeTooLarge { .. })
    ));
    assert!(matches!(
        Domain::for_size(usize::MAX),
        Err(NttError::SizeTooLarge { .. })
    ));
    assert!(matches!(
        Domain::for_size((1 << 28) + 1),
        Err(NttError::SizeTooLarge { .. })
    ));

    let d = domain(4);
    assert_eq!(d.generator().pow(&[16]), Fr::ONE);
    assert_ne!(d.generator().pow(&[8]), Fr::ONE);
    assert_eq!(d.element(17), d.generator());
    let mut short = vec![Fr::ONE; 15];
    let err = Err(NttError::LengthMismatch {
        expected: 16,
        got: 15,
    });
    assert_eq!(d.fft_in_place(&mut short), err);
    assert_eq!(d.ifft_in_place(&mut short), err);
    assert_eq!(d.coset_fft_in_place(&mut short), err);
    assert_eq!(d.coset_ifft_in_place(&mut short), err);
    assert_eq!(d.bit_reverse_in_place(&mut short), err);
    let ok = vec![Fr::ONE; 16];
    assert!(d.quotient(&ok, &short, &ok).is_err());
}

#[test]
fn bit_reversal_permutes() {
    assert_eq!(bit_reverse_index(1, 4), 8);
    assert_eq!(bit_reverse_index(0b0110, 4), 0b0110);
    assert_eq!(bit_reverse_index(0b0011, 4), 0b1100);
    assert_eq!(bit_reverse_index(0, 0), 0);
    for log_n in [3u32, 13] {
        let d = domain(log_n);
        let x = random_vec(d.size(), 5);
        let mut y = x.clone();
        d.bit_reverse_in_place(&mut y).unwrap();
        for (i, v) in y.iter().enumerate() {
            assert_eq!(*v, x[bit_reverse_index(i, log_n)]);
        }
        d.bit_reverse_in_place(&mut y).unwrap();
        assert_eq!(y, x);
    }
}

/// Fixed values: the first outputs of a transform of 0, 1, …, 7, pinned so a silent change of
/// ω, of the coset shift or of the output order is caught.
#[test]
fn fixed_regression_values() {
    let d = domain(3);
    let x: Vec<Fr> = (0..8u64).map(Fr::from_u64).collect();
    let mut y = x.clone();
    d.fft_in_place(&mut y).unwrap();
    // X_0 = Σ j = 28; X_4 = Σ (−1)^j j = −4.
    assert_eq!(y[0], Fr::from_u64(28));
    assert_eq!(y[4], -Fr::from_u64(4));
    let mut z = x.clone();
    d.coset_fft_in_place(&mut z).unwrap();
    // X_0 on the coset = Σ j·7^j.
    let expect: Fr = (0..8u64)
        .map(|j| Fr::from_u64(j) * Fr::from_u64(7).pow(&[j]))
        .sum();
    assert_eq!(z[0], expect);
}

/// The textbook transform the fast paths must reproduce: bit-reversal, then radix-2 DIT
/// stages with Fr arithmetic, twiddles by repeated multiplication.
fn reference_dft(x: &[Fr], omega: Fr) -> Vec<Fr> {
    let n = x.len();
    let log_n = n.trailing_zeros();
    let mut a: Vec<Fr> = (0..n).map(|i| x[bit_reverse_index(i, log_n)]).collect();
    let mut m = 1;
    while m < n {
        let w_m = omega.pow(&[(n / (2 * m)) as u64]);
        for k in (0..n).step_by(2 * m) {
            let mut w = Fr::ONE;
            for j in k..k + m {
                let t = w * a[j + m];
                a[j + m] = a[j] - t;
                a[j] += t;
                w *= w_m;
            }
        }
        m *= 2;
    }
    a
}

fn scaled_by_powers(v: Vec<Fr>, start: Fr, base: Fr) -> Vec<Fr> {
    let mut s = start;
    v.into_iter()
        .map(|x| {
            let r = x * s;
            s *= base;
            r
        })
        .collect()
}

/// Every transform and the quotient against the reference, at sizes done as one row, with
/// few and with many column groups, and with odd and even splits.
#[test]
fn transforms_and_quotient_match_reference() {
    for log_n in (0u32..=14).chain([17]) {
        let d = domain(log_n);
        let (g, g_inv, n_inv) = (d.coset_shift(), d.coset_shift_inv(), d.size_inv());
        let fft = |v: &[Fr]| reference_dft(v, d.generator());
        let ifft = |v: &[Fr]| scaled_by_powers(reference_dft(v, d.generator_inv()), n_inv, Fr::ONE);
        let x = random_vec(d.size(), 1000 + u64::from(log_n));

        let mut y = x.clone();
        d.fft_in_place(&mut y).unwrap();
        assert_eq!(y, fft(&x), "fft 2^{log_n}");
        let mut y = x.clone();
        d.ifft_in_place(&mut y).unwrap();
        assert_eq!(y, ifft(&x), "ifft 2^{log_n}");
        let mut y = x.clone();
        d.coset_fft_in_place(&mut y).unwrap();
        assert_eq!(
            y,
            fft(&scaled_by_powers(x.clone(), Fr::ONE, g)),
            "coset fft 2^{log_n}"
        );
        let mut y = x.clone();
        d.coset_ifft_in_place(&mut y).unwrap();
        assert_eq!(
            y,
            scaled_by_powers(ifft(&x), Fr::ONE, g_inv),
            "coset ifft 2^{log_n}"
        );
        let mut y = x.clone();
        d.bit_reverse_in_place(&mut y).unwrap();
        let want: Vec<Fr> = (0..d.size())
            .map(|i| x[bit_reverse_index(i, log_n)])
            .collect();
        assert_eq!(y, want, "bit reversal 2^{log_n}");

        // The quotient of arbitrary (unsatisfied) inputs, step by step.
        let b = random_vec(d.size(), 2000 + u64::from(log_n));
        let c = random_vec(d.size(), 3000 + u64::from(log_n));
        let to_coset = |v: &[Fr]| fft(&scaled_by_powers(ifft(v), Fr::ONE, g));
        let (ea, eb, ec) = (to_coset(&x), to_coset(&b), to_coset(&c));
        let z_inv = d.vanishing_on_coset_inverse();
        let q: Vec<Fr> = (0..d.size())
            .map(|i| (ea[i] * eb[i] - ec[i]) * z_inv)
            .collect();
        let want = scaled_by_powers(ifft(&q), Fr::ONE, g_inv);
        assert_eq!(d.quotient(&x, &b, &c).unwrap(), want, "quotient 2^{log_n}");
    }
}
