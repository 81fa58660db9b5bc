//! snarkjs's Groth16 `.zkey` and a prover for it.
//!
//! Layout (snarkjs `zkey_utils.js`, container version 1): section 1 the protocol (u32, 1 =
//! Groth16); section 2 the header (n8q, q, n8r, r, nVars, nPublic, domainSize, then alpha1,
//! beta1, beta2, gamma2, delta1, delta2); 3 IC (nPublic + 1 G1); 4 the A and B coefficients
//! (u32 count, then `u32 matrix, u32 constraint, u32 signal, Fr`); 5 A (nVars G1); 6 B1 (nVars
//! G1); 7 B2 (nVars G2); 8 C (nVars − nPublic − 1 G1); 9 H (domainSize G1); 10 contributions.
//! Points are (x, y) with each Fp coordinate little-endian in Montgomery form (x·2^384 mod q),
//! the identity all zeros. A coefficient is stored as coef·R² mod r with R = 2^256: snarkjs
//! multiplies it by a witness value that is *not* in Montgomery form, and the product must be.
//!
//! The prover is snarkjs's `groth16_prove.js`: a = A·w, b = B·w over the coefficient rows
//! (which include snarkjs's rows A[nConstraints + i][i] = 1), c = a∘b; each goes to
//! coefficients on snarkjs's domain and is evaluated on the odd powers of the 2n-th root
//! (ω_2n·ω_n^j), where the H points are Lagrange points already divided by Z (which is the
//! constant −2 there): the quotient needs no division. The roots are snarkjs's own, from its
//! smallest quadratic non-residue (5 for BLS12-381's r; blst and cuzk use 7): see
//! [`SnarkjsDomain`].

use std::path::Path;

use cuzk_field::{Fr, G1Affine, G1Projective, G2Affine, G2Projective};
use cuzk_groth16::{Proof, VerifyingKey};
use rayon::prelude::*;

use crate::cursor::Cursor;
use crate::iden3::{BinFile, BinWriter, CircomR1cs, check_fp_prime, check_fr_prime, put_prime};
use crate::ntt::SnarkjsDomain;
use crate::points::{
    ArraySpec, Encoding, Point, PointChecks, decode_array, decode_one, write_array,
};
use crate::{BpVerifyingKey, FormatError};

/// One entry of section 4: `matrix` 0 is A, 1 is B.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZkeyCoef {
    pub matrix: u32,
    pub constraint: u32,
    pub signal: u32,
    pub value: Fr,
}

/// A Groth16 zkey.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Zkey {
    pub n_vars: usize,
    pub n_public: usize,
    pub domain_size: usize,
    /// alpha1, beta1, beta2, gamma2, delta1, delta2 and IC: the seven elements of bellperson's
    /// `VerifyingKey`, in the same order.
    pub vk: BpVerifyingKey,
    pub coefs: Vec<ZkeyCoef>,
    pub a: Vec<G1Affine>,
    pub b1: Vec<G1Affine>,
    pub b2: Vec<G2Affine>,
    pub c: Vec<G1Affine>,
    pub h: Vec<G1Affine>,
    /// Section 10 as stored (the ceremony transcript; cuzk only carries it).
    pub contributions: Option<Vec<u8>>,
}

/// R² mod r, R = 2^256, as an element: the factor on stored coefficients.
fn r_squared() -> Fr {
    // One's Montgomery limbs are 1·R mod r; read as a canonical value, that is the element R.
    let r_elem = Fr::from_canonical(Fr::ONE.to_montgomery()).expect("R mod r is below r");
    r_elem * r_elem
}

impl Zkey {
    pub fn read(path: &Path, checks: &PointChecks) -> Result<Self, FormatError> {
        let (name, bytes) = crate::iden3::read_file(path)?;
        Self::from_bytes(&name, &bytes, checks)
    }

    /// Parses a zkey. With [`PointChecks::Full`] every point is checked for the subgroup too
    /// (snarkjs itself checks none).
    pub fn from_bytes(file: &str, bytes: &[u8], checks: &PointChecks) -> Result<Self, FormatError> {
        if let Some(d) = checks.digest() {
            d.check(file, bytes)?;
        }
        let subgroup = checks.subgroup();
        let gpu = crate::points::subgroup_gpu_for(checks);
        let bin = BinFile::parse(file, bytes, "zkey", 1)?;
        let mut p = Cursor::new(file, bin.section(1, "protocol")?);
        let protocol = p.u32_le("protocol")?;
        if protocol != 1 {
            return Err(FormatError::invalid(
                file,
                "protocol",
                format!(
                    "protocol {protocol} is not Groth16 (1); PLONK and FFLONK keys are not supported"
                ),
            ));
        }
        let mut h = Cursor::new(file, bin.section(2, "groth16 header")?);
        check_fp_prime(&mut h, "header.q")?;
        check_fr_prime(&mut h, "header.r")?;
        let n_vars = h.u32_le("header.nVars")? as usize;
        let n_public = h.u32_le("header.nPublic")? as usize;
        let domain_size = h.u32_le("header.domainSize")? as usize;
        if !domain_size.is_power_of_two() || domain_size < 2 {
            return Err(FormatError::invalid(
                file,
                "header.domainSize",
                format!("{domain_size} is not a power of two of at least 2"),
            ));
        }
        if n_public + 1 > n_vars {
            return Err(FormatError::invalid(
                file,
                "header.nPublic",
                format!("{n_public} public signals do not fit {n_vars} variables"),
            ));
        }
        let g1 = |c: &mut Cursor<'_>, f: &str| -> Result<G1Affine, FormatError> {
            decode_one(c.take(96, f)?, file, f, Encoding::Lem)
        };
        let alpha_g1 = g1(&mut h, "header.alpha1")?;
        let beta_g1 = g1(&mut h, "header.beta1")?;
        let g2 = |c: &mut Cursor<'_>, f: &str| -> Result<G2Affine, FormatError> {
            decode_one(c.take(192, f)?, file, f, Encoding::Lem)
        };
        let beta_g2 = g2(&mut h, "header.beta2")?;
        let gamma_g2 = g2(&mut h, "header.gamma2")?;
        let delta_g1 = g1(&mut h, "header.delta1")?;
        let delta_g2 = g2(&mut h, "header.delta2")?;
        h.finish("header.delta2")?;

        let spec = |field: &'static str| ArraySpec {
            file,
            field,
            encoding: Encoding::Lem,
            reject_identity: false,
            subgroup,
            on_curve: true,
            gpu: gpu.as_ref(),
        };
        let arr = |id: u32, name: &'static str, count: usize, size: usize| {
            bin.sized_section(id, name, (count * size) as u64)
        };
        let ic = decode_array(arr(3, "IC", n_public + 1, 96)?, spec("IC"))?;
        let a = decode_array(arr(5, "A points", n_vars, 96)?, spec("A"))?;
        let b1 = decode_array(arr(6, "B1 points", n_vars, 96)?, spec("B1"))?;
        let b2 = decode_array(arr(7, "B2 points", n_vars, 192)?, spec("B2"))?;
        let c = decode_array(arr(8, "C points", n_vars - n_public - 1, 96)?, spec("C"))?;
        let hq = decode_array(arr(9, "H points", domain_size, 96)?, spec("H"))?;

        let mut s = Cursor::new(file, bin.section(4, "coefficients")?);
        let n = s.u32_le("coefficients count")? as usize;
        let body = s.take_records(n, 44, "coefficients")?;
        s.finish("coefficients")?;
        let r2_inv = r_squared().inverse().expect("R² is non-zero");
        let coefs = body
            .par_chunks_exact(44)
            .enumerate()
            .map(|(i, b)| {
                let u = |k: usize| u32::from_le_bytes(b[k..k + 4].try_into().expect("4 bytes"));
                let (matrix, constraint, signal) = (u(0), u(4), u(8));
                let bad = |what: &str| {
                    FormatError::invalid(file, format!("coefficients[{i}].{what}"), format!(
                        "out of range (matrix {matrix}, constraint {constraint}, signal {signal}; nVars {n_vars}, domainSize {domain_size})"
                    ))
                };
                if matrix > 1 {
                    return Err(bad("matrix"));
                }
                if constraint as usize >= domain_size {
                    return Err(bad("constraint"));
                }
                if signal as usize >= n_vars {
                    return Err(bad("signal"));
                }
                let stored = crate::iden3::fr_le(&b[12..44], file, "coefficients", i)?;
                Ok(ZkeyCoef {
                    matrix,
                    constraint,
                    signal,
                    value: stored * r2_inv,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let contributions = bin
            .optional_section(10, "contributions")?
            .map(<[u8]>::to_vec);
        Ok(Self {
            n_vars,
            n_public,
            domain_size,
            vk: BpVerifyingKey {
                alpha_g1,
                beta_g1,
                beta_g2,
                gamma_g2,
                delta_g1,
                delta_g2,
                ic,
            },
            coefs,
            a,
            b1,
            b2,
            c,
            h: hq,
            contributions,
        })
    }

    /// The zkey bytes, as snarkjs lays them out (sections 1, 2, 4, 3, 5..9, then 10 if kept).
    pub fn to_bytes(&self) -> Vec<u8> {
        let sections = 9 + u32::from(self.contributions.is_some());
        let mut w = BinWriter::new("zkey", 1, sections);
        w.section(1, &1u32.to_le_bytes());
        let mut h = Vec::new();
        put_prime(&mut h, &cuzk_field::Fp::MODULUS);
        put_prime(&mut h, &Fr::MODULUS);
        for v in [self.n_vars, self.n_public, self.domain_size] {
            h.extend_from_slice(&(v as u32).to_le_bytes());
        }
        let vk = &self.vk;
        vk.alpha_g1.encode_lem(&mut h);
        vk.beta_g1.encode_lem(&mut h);
        vk.beta_g2.encode_lem(&mut h);
        vk.gamma_g2.encode_lem(&mut h);
        vk.delta_g1.encode_lem(&mut h);
        vk.delta_g2.encode_lem(&mut h);
        w.section(2, &h);
        let r2 = r_squared();
        let mut c = Vec::with_capacity(4 + self.coefs.len() * 44);
        c.extend_from_slice(&(self.coefs.len() as u32).to_le_bytes());
        for k in &self.coefs {
            for v in [k.matrix, k.constraint, k.signal] {
                c.extend_from_slice(&v.to_le_bytes());
            }
            c.extend_from_slice(&(k.value * r2).to_bytes_le());
        }
        w.section(4, &c);
        let lem = |pts: &[G1Affine]| {
            let mut v = Vec::with_capacity(pts.len() * 96);
            write_array(pts, Encoding::Lem, &mut v).expect("writing to a Vec cannot fail");
            v
        };
        w.section(3, &lem(&self.vk.ic));
        w.section(5, &lem(&self.a));
        w.section(6, &lem(&self.b1));
        let mut b2 = Vec::with_capacity(self.b2.len() * 192);
        write_array(&self.b2, Encoding::Lem, &mut b2).expect("writing to a Vec cannot fail");
        w.section(7, &b2);
        w.section(8, &lem(&self.c));
        w.section(9, &lem(&self.h));
        if let Some(t) = &self.contributions {
            w.section(10, t);
        }
        w.out
    }

    pub fn write(&self, path: &Path) -> Result<(), FormatError> {
        crate::iden3::write_file(path, &self.to_bytes())
    }

    /// cuzk's verifying key (the same pairing equation as snarkjs's verifier).
    pub fn verifying_key(&self) -> VerifyingKey {
        self.vk.to_cuzk()
    }

    /// Checks that this key was made for `r1cs` (what `snarkjs zkey new` derives from it).
    pub fn check_circuit(
        &self,
        file: &str,
        r1cs: &CircomR1cs,
        r1cs_file: &str,
    ) -> Result<(), FormatError> {
        let rows = r1cs.constraints.len() + r1cs.num_public() + 1;
        let checks = [
            ("nVars", r1cs.num_wires as usize, self.n_vars),
            ("nPublic", r1cs.num_public(), self.n_public),
            ("domainSize", rows.next_power_of_two(), self.domain_size),
        ];
        for (field, expected, found) in checks {
            if expected != found {
                return Err(FormatError::mismatch(
                    file, r1cs_file, field, expected, found,
                ));
            }
        }
        Ok(())
    }

    /// Checks that the fields agree with each other (a parsed key always does; one built by
    /// hand may not), so that proving cannot index out of range.
    pub fn check_shape(&self, file: &str) -> Result<(), FormatError> {
        let key = "the zkey";
        let private = self.n_vars.checked_sub(self.n_public + 1).ok_or_else(|| {
            FormatError::invalid(key, "nPublic", "more public signals than variables")
        })?;
        let sizes = [
            ("IC", self.n_public + 1, self.vk.ic.len()),
            ("A", self.n_vars, self.a.len()),
            ("B1", self.n_vars, self.b1.len()),
            ("B2", self.n_vars, self.b2.len()),
            ("C", private, self.c.len()),
            ("H", self.domain_size, self.h.len()),
        ];
        for (field, expected, found) in sizes {
            if expected != found {
                return Err(FormatError::mismatch(key, file, field, expected, found));
            }
        }
        if let Some((i, _)) = self.coefs.iter().enumerate().find(|(_, k)| {
            k.matrix > 1
                || k.constraint as usize >= self.domain_size
                || k.signal as usize >= self.n_vars
        }) {
            return Err(FormatError::invalid(
                key,
                format!("coefficients[{i}]"),
                "out of range",
            ));
        }
        Ok(())
    }

    /// A proof for `witness` (all nVars wire values, the one first) with blinding r, s.
    /// The witness is not checked against the constraints here (snarkjs does not either): an
    /// unsatisfying witness gives a proof that does not verify. `file` names the witness.
    pub fn prove(&self, witness: &[Fr], r: Fr, s: Fr, file: &str) -> Result<Proof, FormatError> {
        if witness.len() != self.n_vars {
            return Err(FormatError::mismatch(
                file,
                "the zkey",
                "number of witness values (nVars)",
                self.n_vars,
                witness.len(),
            ));
        }
        if witness[0] != Fr::ONE {
            return Err(FormatError::invalid(
                file,
                "values[0]",
                "wire 0 must be the constant one",
            ));
        }
        self.check_shape(file)?;
        let n = self.domain_size;
        let domain =
            SnarkjsDomain::new(n.trailing_zeros()).map_err(|reason| FormatError::Prove {
                file: file.into(),
                reason,
            })?;
        let (mut a, mut b) = (vec![Fr::ZERO; n], vec![Fr::ZERO; n]);
        for k in &self.coefs {
            let w = witness[k.signal as usize];
            if w.is_zero() {
                continue;
            }
            let t = if k.matrix == 0 { &mut a } else { &mut b };
            t[k.constraint as usize] += k.value * w;
        }
        let mut c: Vec<Fr> = a.par_iter().zip(&b).map(|(x, y)| *x * *y).collect();
        let odd = |v: &mut Vec<Fr>| domain.to_odd_coset(v);
        rayon::join(
            || odd(&mut a),
            || rayon::join(|| odd(&mut b), || odd(&mut c)),
        );
        let p: Vec<Fr> = a
            .par_iter()
            .zip(&b)
            .zip(&c)
            .map(|((x, y), z)| *x * *y - *z)
            .collect();

        let priv_w = &witness[self.n_public + 1..];
        let ((ma, mb1), (mb2, (mc, mh))) = rayon::join(
            || {
                rayon::join(
                    || cuzk_msm::cpu::msm(&self.a, witness),
                    || cuzk_msm::cpu::msm(&self.b1, witness),
                )
            },
            || {
                rayon::join(
                    || cuzk_msm::cpu::msm(&self.b2, witness),
                    || {
                        rayon::join(
                            || cuzk_msm::cpu::msm(&self.c, priv_w),
                            || cuzk_msm::cpu::msm(&self.h, &p),
                        )
                    },
                )
            },
        );
        let msm = |what: &str, r: Result<_, cuzk_msm::MsmError>| {
            r.map_err(|e| FormatError::Prove {
                file: file.into(),
                reason: format!("MSM {what}: {e}"),
            })
        };
        let (ma, mb1, mc, mh) = (msm("A", ma)?, msm("B1", mb1)?, msm("C", mc)?, msm("H", mh)?);
        let mb2: G2Projective = mb2.map_err(|e| FormatError::Prove {
            file: file.into(),
            reason: format!("MSM B2: {e}"),
        })?;
        let vk = &self.vk;
        let delta1: G1Projective = vk.delta_g1.to_projective();
        let pi_a = ma + vk.alpha_g1.to_projective() + delta1 * r;
        let pi_b: G2Projective = mb2 + vk.beta_g2.to_projective() + vk.delta_g2.to_projective() * s;
        let pib1 = mb1 + vk.beta_g1.to_projective() + delta1 * s;
        let pi_c = mc + mh + pi_a * s + pib1 * r - delta1 * (r * s);
        Ok(Proof {
            a: pi_a.to_affine(),
            b: pi_b.to_affine(),
            c: pi_c.to_affine(),
        })
    }
}
