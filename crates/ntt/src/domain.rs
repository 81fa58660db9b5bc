//! The radix-2 evaluation domain H = {1, ω, …, ω^(n−1)} and its coset g·H.

use std::fmt;
use std::sync::{Arc, OnceLock};

use cuzk_field::Fr;
use rayon::prelude::*;

use crate::NttError;
use crate::cpu;

/// Element order of a vector handed to a transform.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Order {
    /// Index i holds the value for ω^i (evaluations) or x^i (coefficients).
    Natural,
    /// Index i holds what natural order keeps at `bit_reverse(i, log_n)`.
    BitReversed,
}

/// A multiplicative subgroup of Fr of order n = 2^log_n, with the coset shift g = 7 that
/// bellperson and arkworks use for the Groth16 quotient.
///
/// Cheap to build and to clone: the twiddle table is computed on first use and shared.
#[derive(Clone)]
pub struct Domain {
    log_n: u32,
    n: usize,
    omega: Fr,
    omega_inv: Fr,
    n_inv: Fr,
    shift: Fr,
    shift_inv: Fr,
    twiddles: Arc<OnceLock<cpu::Twiddles>>,
}

impl fmt::Debug for Domain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Domain")
            .field("log_n", &self.log_n)
            .field("omega", &self.omega)
            .field("twiddles_ready", &self.twiddles.get().is_some())
            .finish()
    }
}

impl PartialEq for Domain {
    fn eq(&self, other: &Self) -> bool {
        self.log_n == other.log_n
    }
}
impl Eq for Domain {}

impl Domain {
    /// Largest supported domain: 2^28 elements (8 GiB of Fr). Fr itself has 2-adicity 32, but
    /// nothing in cuzk can hold a larger vector.
    pub const MAX_LOG_SIZE: u32 = 28;

    /// The domain of size 2^log_n.
    pub fn new(log_n: u32) -> Result<Self, NttError> {
        if log_n > Self::MAX_LOG_SIZE {
            return Err(NttError::LogSizeTooLarge {
                log_n,
                max: Self::MAX_LOG_SIZE,
            });
        }
        let omega = Fr::root_of_unity_of_order(log_n).expect("log_n is within Fr's 2-adicity");
        let n = 1usize << log_n;
        let shift = Fr::multiplicative_generator();
        Ok(Self {
            log_n,
            n,
            omega,
            omega_inv: omega.inverse().expect("a root of unity is non-zero"),
            n_inv: Fr::from_u64(n as u64).inverse().expect("n < r is non-zero"),
            shift,
            shift_inv: shift.inverse().expect("7 is non-zero"),
            twiddles: Arc::new(OnceLock::new()),
        })
    }

    /// The smallest domain with at least `min_n` elements (size 1 for `min_n` ≤ 1).
    pub fn for_size(min_n: usize) -> Result<Self, NttError> {
        let n = min_n
            .max(1)
            .checked_next_power_of_two()
            .ok_or(NttError::SizeTooLarge { min_n })?;
        let log_n = n.trailing_zeros();
        if log_n > Self::MAX_LOG_SIZE {
            return Err(NttError::SizeTooLarge { min_n });
        }
        Self::new(log_n)
    }

    pub fn size(&self) -> usize {
        self.n
    }

    pub fn log_size(&self) -> u32 {
        self.log_n
    }

    /// ω, the primitive n-th root of unity generating the domain.
    pub fn generator(&self) -> Fr {
        self.omega
    }

    pub fn generator_inv(&self) -> Fr {
        self.omega_inv
    }

    /// 1/n.
    pub fn size_inv(&self) -> Fr {
        self.n_inv
    }

    /// The coset shift g (the multiplicative generator 7).
    pub fn coset_shift(&self) -> Fr {
        self.shift
    }

    pub fn coset_shift_inv(&self) -> Fr {
        self.shift_inv
    }

    /// ω^i (indices wrap modulo n).
    pub fn element(&self, i: usize) -> Fr {
        self.omega.pow(&[(i & (self.n - 1)) as u64])
    }

    /// Z(τ) = τ^n − 1, the polynomial vanishing on the domain.
    pub fn evaluate_vanishing_polynomial(&self, tau: Fr) -> Fr {
        pow_2k(tau, self.log_n) - Fr::ONE
    }

    /// 1/Z(g·ω^i) = 1/(g^n − 1): Z is constant on the coset, and non-zero there since g ∉ H.
    pub fn vanishing_on_coset_inverse(&self) -> Fr {
        self.evaluate_vanishing_polynomial(self.shift)
            .inverse()
            .expect("the coset shift is not in the domain")
    }

    /// L_i(τ) for every i: the Lagrange basis of the domain evaluated at τ. For τ in H this is
    /// the indicator vector of τ's index.
    pub fn evaluate_all_lagrange_coefficients(&self, tau: Fr) -> Vec<Fr> {
        let z = self.evaluate_vanishing_polynomial(tau);
        if z.is_zero() {
            // τ = ω^k: L_i(τ) = [i = k].
            let mut out = vec![Fr::ZERO; self.n];
            let mut w = Fr::ONE;
            for slot in out.iter_mut() {
                if w == tau {
                    *slot = Fr::ONE;
                    break;
                }
                w *= self.omega;
            }
            return out;
        }
        // L_i(τ) = Z(τ)·ω^i / (n·(τ − ω^i)).
        let scale = z * self.n_inv;
        let mut out = vec![Fr::ZERO; self.n];
        out.par_chunks_mut(cpu::CHUNK)
            .enumerate()
            .for_each(|(k, chunk)| {
                let start = k * cpu::CHUNK;
                let mut w = self.element(start);
                let mut omegas = Vec::with_capacity(chunk.len());
                for slot in chunk.iter_mut() {
                    omegas.push(w);
                    *slot = tau - w;
                    w *= self.omega;
                }
                Fr::batch_inverse(chunk);
                for (slot, w) in chunk.iter_mut().zip(omegas) {
                    *slot *= scale * w;
                }
            });
        out
    }

    /// The shared twiddle table, computed on first use.
    pub(crate) fn twiddles(&self) -> &cpu::Twiddles {
        self.twiddles
            .get_or_init(|| cpu::Twiddles::new(self.log_n, self.omega))
    }

    pub(crate) fn check_len(&self, len: usize) -> Result<(), NttError> {
        if len == self.n {
            Ok(())
        } else {
            Err(NttError::LengthMismatch {
                expected: self.n,
                got: len,
            })
        }
    }

    /// Evaluations on H from coefficients, in place, natural order in and out.
    pub fn fft_in_place(&self, values: &mut [Fr]) -> Result<(), NttError> {
        self.check_len(values.len())?;
        cpu::forward(self, values, None);
        Ok(())
    }

    /// Coefficients from evaluations on H, in place, natural order in and out.
    pub fn ifft_in_place(&self, values: &mut [Fr]) -> Result<(), NttError> {
        self.check_len(values.len())?;
        cpu::inverse(self, values, self.n_inv, Fr::ONE);
        Ok(())
    }

    /// Evaluations on the coset g·H from coefficients, in place, natural order in and out.
    pub fn coset_fft_in_place(&self, values: &mut [Fr]) -> Result<(), NttError> {
        self.check_len(values.len())?;
        cpu::forward(self, values, Some(self.shift));
        Ok(())
    }

    /// Coefficients from evaluations on the coset g·H, in place, natural order in and out.
    pub fn coset_ifft_in_place(&self, values: &mut [Fr]) -> Result<(), NttError> {
        self.check_len(values.len())?;
        cpu::inverse(self, values, self.n_inv, self.shift_inv);
        Ok(())
    }

    /// Transform `t` on the CPU, in place, natural order in and out (the reference of
    /// [`Domain::gpu_transform`]).
    pub fn transform_in_place(
        &self,
        values: &mut [Fr],
        t: crate::Transform,
    ) -> Result<(), NttError> {
        use crate::Transform::*;
        match t {
            Forward => self.fft_in_place(values),
            Inverse => self.ifft_in_place(values),
            CosetForward => self.coset_fft_in_place(values),
            CosetInverse => self.coset_ifft_in_place(values),
        }
    }

    /// Reorders `values` between natural and bit-reversed order (the permutation is its own
    /// inverse).
    pub fn bit_reverse_in_place(&self, values: &mut [Fr]) -> Result<(), NttError> {
        self.check_len(values.len())?;
        cpu::bit_reverse(values, self.log_n);
        Ok(())
    }

    /// The Groth16 quotient: given the evaluations of A·w, B·w and C·w on H, the coefficients of
    /// H = (A·B − C)/Z, computed as bellperson and arkworks do (iNTT, coset NTT, point-wise
    /// (a·b − c)·Z^-1 on g·H, coset iNTT). The result replaces `a`; `b` and `c` are clobbered.
    /// The GPU pipeline gives the same H for every satisfied witness (Z divides A·B − C); for
    /// other inputs its result is [`Self::gpu_coset_quotient`].
    pub fn quotient_in_place(
        &self,
        a: &mut [Fr],
        b: &mut [Fr],
        c: &mut [Fr],
    ) -> Result<(), NttError> {
        for v in [&*a, &*b, &*c] {
            self.check_len(v.len())?;
        }
        cpu::quotient(self, a, b, c, self.vanishing_on_coset_inverse());
        Ok(())
    }

    /// [`Self::quotient_in_place`] on copies of the inputs.
    pub fn quotient(&self, a: &[Fr], b: &[Fr], c: &[Fr]) -> Result<Vec<Fr>, NttError> {
        let (mut a, mut b, mut c) = (a.to_vec(), b.to_vec(), c.to_vec());
        self.quotient_in_place(&mut a, &mut b, &mut c)?;
        Ok(a)
    }

    /// The quotient on the coset the GPU pipeline uses, step by step on the CPU: s·H with
    /// s = w_2N up to 2^27, g·H ([`Self::quotient`]) at 2^28. Equal to [`Self::quotient`] when Z
    /// divides A·B − C; the tests' reference for other inputs.
    #[doc(hidden)]
    pub fn gpu_coset_quotient(&self, a: &[Fr], b: &[Fr], c: &[Fr]) -> Result<Vec<Fr>, NttError> {
        let lg_n = self.log_size();
        let Some(s) = (lg_n < Self::MAX_LOG_SIZE)
            .then(|| Fr::root_of_unity_of_order(lg_n + 1))
            .flatten()
        else {
            return self.quotient(a, b, c);
        };
        for v in [a, b, c] {
            self.check_len(v.len())?;
        }
        let scale = |v: &mut [Fr], f: Fr| {
            let mut p = Fr::ONE;
            for x in v.iter_mut() {
                *x *= p;
                p *= f;
            }
        };
        let to_coset = |v: &[Fr]| -> Result<Vec<Fr>, NttError> {
            let mut v = v.to_vec();
            self.ifft_in_place(&mut v)?;
            scale(&mut v, s);
            self.fft_in_place(&mut v)?;
            Ok(v)
        };
        let (ea, eb, ec) = (to_coset(a)?, to_coset(b)?, to_coset(c)?);
        let z_inv = (pow_2k(s, lg_n) - Fr::ONE).inverse().expect("s^N = -1");
        let mut q: Vec<Fr> = (0..self.size())
            .map(|i| (ea[i] * eb[i] - ec[i]) * z_inv)
            .collect();
        self.ifft_in_place(&mut q)?;
        scale(&mut q, s.inverse().expect("s != 0"));
        Ok(q)
    }
}

/// x^(2^k) by k squarings.
fn pow_2k(mut x: Fr, k: u32) -> Fr {
    for _ in 0..k {
        x = x.square();
    }
    x
}
