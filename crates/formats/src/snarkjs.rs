//! snarkjs's JSON files for BLS12-381: `proof.json`, `public.json`, `verification_key.json`.
//!
//! Numbers are decimal strings of canonical values. A G1 point is `[x, y, "1"]` (`["0", "1",
//! "0"]` the identity), a G2 point `[[x.c0, x.c1], [y.c0, y.c1], ["1", "0"]]` (ffjavascript's
//! `toObject` after `toAffine`). `verification_key.json` is written without
//! `vk_alphabeta_12`: snarkjs's verifier does not read it, and it would need ffjavascript's
//! Fq12 tower coordinates of e(α, β).

use std::path::Path;

use cuzk_field::{Fp, Fp2, Fr, G1Affine, G2Affine};
use cuzk_groth16::{Proof, VerifyingKey};
use serde_json::{Value, json};

use crate::FormatError;

/// Decimal digits of little-endian u64 limbs.
pub fn limbs_to_decimal(limbs: &[u64]) -> String {
    let mut n: Vec<u64> = limbs.to_vec();
    let mut parts = Vec::new();
    const BASE: u64 = 10_000_000_000_000_000_000; // 10^19
    while n.iter().any(|&x| x != 0) {
        let mut rem: u128 = 0;
        for limb in n.iter_mut().rev() {
            let cur = (rem << 64) | *limb as u128;
            *limb = (cur / BASE as u128) as u64;
            rem = cur % BASE as u128;
        }
        parts.push(rem as u64);
    }
    match parts.split_last() {
        None => "0".into(),
        Some((top, rest)) => {
            let mut s = top.to_string();
            for p in rest.iter().rev() {
                s.push_str(&format!("{p:019}"));
            }
            s
        }
    }
}

/// Little-endian limbs of a decimal string; `None` on a non-digit or overflow of `N` limbs.
pub fn decimal_to_limbs<const N: usize>(s: &str) -> Option<[u64; N]> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut out = [0u64; N];
    for d in s.bytes() {
        let mut carry = (d - b'0') as u128;
        for limb in out.iter_mut() {
            let cur = *limb as u128 * 10 + carry;
            *limb = cur as u64;
            carry = cur >> 64;
        }
        if carry != 0 {
            return None;
        }
    }
    Some(out)
}

fn fp_dec(x: &Fp) -> Value {
    Value::String(limbs_to_decimal(&x.to_canonical()))
}

pub fn fr_to_decimal(x: &Fr) -> String {
    limbs_to_decimal(&x.to_canonical())
}

pub(crate) fn g1_json(p: &G1Affine) -> Value {
    if p.is_identity() {
        return json!(["0", "1", "0"]);
    }
    json!([fp_dec(&p.x()), fp_dec(&p.y()), "1"])
}

pub(crate) fn g2_json(p: &G2Affine) -> Value {
    if p.is_identity() {
        return json!([["0", "0"], ["1", "0"], ["0", "0"]]);
    }
    let (x, y) = (p.x(), p.y());
    json!([
        [fp_dec(&x.c0()), fp_dec(&x.c1())],
        [fp_dec(&y.c0()), fp_dec(&y.c1())],
        ["1", "0"]
    ])
}

/// Parsing context: which file and field a value came from.
struct Ctx<'a> {
    file: &'a str,
}

impl Ctx<'_> {
    fn err(&self, field: &str, reason: impl Into<String>) -> FormatError {
        FormatError::Invalid {
            file: self.file.into(),
            field: field.into(),
            reason: reason.into(),
        }
    }

    fn get<'v>(&self, v: &'v Value, key: &str) -> Result<&'v Value, FormatError> {
        v.get(key).ok_or_else(|| self.err(key, "missing"))
    }

    fn str<'v>(&self, v: &'v Value, field: &str) -> Result<&'v str, FormatError> {
        v.as_str()
            .ok_or_else(|| self.err(field, format!("expected a decimal string, found {v}")))
    }

    fn array<'v>(&self, v: &'v Value, field: &str, len: usize) -> Result<&'v [Value], FormatError> {
        match v.as_array() {
            Some(a) if a.len() == len => Ok(a),
            _ => Err(self.err(field, format!("expected an array of {len}, found {v}"))),
        }
    }

    fn fp(&self, v: &Value, field: &str) -> Result<Fp, FormatError> {
        let s = self.str(v, field)?;
        decimal_to_limbs::<6>(s)
            .and_then(Fp::from_canonical)
            .ok_or_else(|| {
                self.err(
                    field,
                    format!("{s} is not an element of BLS12-381's base field"),
                )
            })
    }

    fn fr(&self, v: &Value, field: &str) -> Result<Fr, FormatError> {
        let s = self.str(v, field)?;
        decimal_to_limbs::<4>(s)
            .and_then(Fr::from_canonical)
            .ok_or_else(|| {
                self.err(
                    field,
                    format!("{s} is not an element of BLS12-381's scalar field"),
                )
            })
    }

    fn bad_point(&self, field: &str, source: cuzk_field::DecodeError) -> FormatError {
        FormatError::BadPoint {
            file: self.file.into(),
            field: field.into(),
            index: 0,
            source,
        }
    }

    fn g1(&self, v: &Value, field: &str) -> Result<G1Affine, FormatError> {
        let a = self.array(v, field, 3)?;
        let z = self.str(&a[2], &format!("{field}[2]"))?;
        match z {
            "0" => Ok(G1Affine::identity()),
            "1" => G1Affine::from_xy(
                self.fp(&a[0], &format!("{field}[0]"))?,
                self.fp(&a[1], &format!("{field}[1]"))?,
            )
            .map_err(|e| self.bad_point(field, e)),
            other => Err(self.err(
                field,
                format!("z = {other}: only affine points (z = 1) are read"),
            )),
        }
    }

    fn fp2(&self, v: &Value, field: &str) -> Result<Fp2, FormatError> {
        let a = self.array(v, field, 2)?;
        Ok(Fp2::new(
            self.fp(&a[0], &format!("{field}[0]"))?,
            self.fp(&a[1], &format!("{field}[1]"))?,
        ))
    }

    fn g2(&self, v: &Value, field: &str) -> Result<G2Affine, FormatError> {
        let a = self.array(v, field, 3)?;
        let z = self.fp2(&a[2], &format!("{field}[2]"))?;
        if z.is_zero() {
            return Ok(G2Affine::identity());
        }
        if z != Fp2::ONE {
            return Err(self.err(field, "only affine points (z = [1, 0]) are read"));
        }
        G2Affine::from_xy(
            self.fp2(&a[0], &format!("{field}[0]"))?,
            self.fp2(&a[1], &format!("{field}[1]"))?,
        )
        .map_err(|e| self.bad_point(field, e))
    }

    fn curve(&self, v: &Value) -> Result<(), FormatError> {
        if let Some(c) = v.get("curve") {
            let c = self.str(c, "curve")?;
            if c != "bls12381" {
                return Err(FormatError::WrongCurve {
                    file: self.file.into(),
                    field: "curve".into(),
                    which: "curve",
                    found: c.into(),
                });
            }
        }
        if let Some(p) = v.get("protocol") {
            let p = self.str(p, "protocol")?;
            if p != "groth16" {
                return Err(self.err("protocol", format!("{p} is not groth16")));
            }
        }
        Ok(())
    }
}

fn parse_json(file: &str, text: &str) -> Result<Value, FormatError> {
    serde_json::from_str(text).map_err(|e| FormatError::Json {
        file: file.into(),
        reason: e.to_string(),
    })
}

fn read_text(path: &Path) -> Result<(String, String), FormatError> {
    let text = std::fs::read_to_string(path).map_err(|e| FormatError::io(path, e))?;
    Ok((path.display().to_string(), text))
}

fn write_json(path: &Path, v: &Value) -> Result<(), FormatError> {
    let text = serde_json::to_string_pretty(v).expect("a Value serializes");
    std::fs::write(path, text + "\n").map_err(|e| FormatError::io(path, e))
}

/// `proof.json` as snarkjs writes it.
pub fn proof_to_json(p: &Proof) -> Value {
    json!({
        "pi_a": g1_json(&p.a),
        "pi_b": g2_json(&p.b),
        "pi_c": g1_json(&p.c),
        "protocol": "groth16",
        "curve": "bls12381",
    })
}

pub fn proof_from_json(file: &str, text: &str) -> Result<Proof, FormatError> {
    let v = parse_json(file, text)?;
    let c = Ctx { file };
    c.curve(&v)?;
    Ok(Proof {
        a: c.g1(c.get(&v, "pi_a")?, "pi_a")?,
        b: c.g2(c.get(&v, "pi_b")?, "pi_b")?,
        c: c.g1(c.get(&v, "pi_c")?, "pi_c")?,
    })
}

/// `public.json`: the public signals as decimal strings.
pub fn public_to_json(inputs: &[Fr]) -> Value {
    Value::Array(
        inputs
            .iter()
            .map(|x| Value::String(fr_to_decimal(x)))
            .collect(),
    )
}

pub fn public_from_json(file: &str, text: &str) -> Result<Vec<Fr>, FormatError> {
    let v = parse_json(file, text)?;
    let c = Ctx { file };
    let a = v
        .as_array()
        .ok_or_else(|| c.err("public signals", "expected an array of decimal strings"))?;
    a.iter()
        .enumerate()
        .map(|(i, x)| c.fr(x, &format!("public signals[{i}]")))
        .collect()
}

/// `verification_key.json` (see the module docs for the one field left out).
pub fn vk_to_json(vk: &VerifyingKey) -> Value {
    json!({
        "protocol": "groth16",
        "curve": "bls12381",
        "nPublic": vk.num_public(),
        "vk_alpha_1": g1_json(&vk.alpha_g1),
        "vk_beta_2": g2_json(&vk.beta_g2),
        "vk_gamma_2": g2_json(&vk.gamma_g2),
        "vk_delta_2": g2_json(&vk.delta_g2),
        "IC": vk.ic.iter().map(g1_json).collect::<Vec<_>>(),
    })
}

pub fn vk_from_json(file: &str, text: &str) -> Result<VerifyingKey, FormatError> {
    let v = parse_json(file, text)?;
    let c = Ctx { file };
    c.curve(&v)?;
    let ic = c
        .get(&v, "IC")?
        .as_array()
        .ok_or_else(|| c.err("IC", "expected an array of points"))?
        .iter()
        .enumerate()
        .map(|(i, p)| c.g1(p, &format!("IC[{i}]")))
        .collect::<Result<Vec<_>, _>>()?;
    if ic.is_empty() {
        return Err(c.err("IC", "empty: IC[0] is needed"));
    }
    if let Some(n) = v.get("nPublic").and_then(Value::as_u64)
        && n as usize + 1 != ic.len()
    {
        return Err(c.err(
            "nPublic",
            format!("{n} public signals but {} IC points", ic.len()),
        ));
    }
    Ok(VerifyingKey {
        alpha_g1: c.g1(c.get(&v, "vk_alpha_1")?, "vk_alpha_1")?,
        beta_g2: c.g2(c.get(&v, "vk_beta_2")?, "vk_beta_2")?,
        gamma_g2: c.g2(c.get(&v, "vk_gamma_2")?, "vk_gamma_2")?,
        delta_g2: c.g2(c.get(&v, "vk_delta_2")?, "vk_delta_2")?,
        ic,
    })
}

pub fn read_proof(path: &Path) -> Result<Proof, FormatError> {
    let (f, t) = read_text(path)?;
    proof_from_json(&f, &t)
}

pub fn write_proof(path: &Path, p: &Proof) -> Result<(), FormatError> {
    write_json(path, &proof_to_json(p))
}

pub fn read_public(path: &Path) -> Result<Vec<Fr>, FormatError> {
    let (f, t) = read_text(path)?;
    public_from_json(&f, &t)
}

pub fn write_public(path: &Path, inputs: &[Fr]) -> Result<(), FormatError> {
    write_json(path, &public_to_json(inputs))
}

pub fn read_vk(path: &Path) -> Result<VerifyingKey, FormatError> {
    let (f, t) = read_text(path)?;
    vk_from_json(&f, &t)
}

pub fn write_vk(path: &Path, vk: &VerifyingKey) -> Result<(), FormatError> {
    write_json(path, &vk_to_json(vk))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_round_trips_and_rejects_overflow() {
        for v in [0u64, 1, 9, 10, 12345678901234567890, u64::MAX] {
            assert_eq!(limbs_to_decimal(&[v, 0]), v.to_string());
            assert_eq!(decimal_to_limbs::<2>(&v.to_string()), Some([v, 0]));
        }
        let big = [0x1234_5678_9abc_def0, 0xfedc_ba98_7654_3210, 7];
        let s = limbs_to_decimal(&big);
        assert_eq!(decimal_to_limbs::<3>(&s), Some(big));
        assert_eq!(decimal_to_limbs::<1>("18446744073709551616"), None);
        assert_eq!(decimal_to_limbs::<1>("12a"), None);
        assert_eq!(decimal_to_limbs::<1>(""), None);
        // r − 1 in decimal, as snarkjs prints it.
        let mut r1 = Fr::MODULUS;
        r1[0] -= 1;
        assert_eq!(
            limbs_to_decimal(&r1),
            "52435875175126190479447740508185965837690552500527637822603658699938581184512"
        );
    }
}
