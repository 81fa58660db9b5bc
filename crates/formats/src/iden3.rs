//! iden3's binary container (`@iden3/binfileutils`) and the `.r1cs` and `.wtns` files in it.
//!
//! Container: 4-byte magic, u32 version, u32 section count, then sections of `u32 type,
//! u64 size, bytes`, in any order (all integers little-endian). Field elements are
//! little-endian, `n8` bytes each, canonical (not Montgomery) in `.r1cs` and `.wtns`.
//!
//! `.r1cs` (r1csfile's `doc/r1cs_bin_format.md`), version 1: section 1 header (n8, prime,
//! nWires, nPubOut, nPubIn, nPrvIn, u64 nLabels, mConstraints), section 2 constraints (for each:
//! A, B, C as `u32 nTerms, (u32 wire, coeff)*`), section 3 wire → label map (u64 per wire).
//! Wire 0 is the constant one, then the public outputs, the public inputs, the rest: the
//! column layout of cuzk's [`R1cs`], to which cuzk appends its instance rows (snarkjs adds the
//! same `x_i · 0 = 0` rows for i = 0..=nPublic when it makes a zkey).
//!
//! `.wtns` (snarkjs's `wtns_utils.js`), version 2: section 1 (n8, prime, nWitness), section 2
//! the values.

use std::collections::BTreeMap;
use std::path::Path;

use cuzk_field::{Fp, Fr};
use cuzk_groth16::{R1cs, SparseMatrix, Witness};
use rayon::prelude::*;

use crate::FormatError;
use crate::cursor::Cursor;

/// A parsed container: where each section's bytes lie.
#[derive(Debug)]
pub(crate) struct BinFile<'a> {
    pub(crate) file: &'a str,
    sections: BTreeMap<u32, Vec<&'a [u8]>>,
}

impl<'a> BinFile<'a> {
    pub(crate) fn parse(
        file: &'a str,
        bytes: &'a [u8],
        magic: &'static str,
        max_version: u32,
    ) -> Result<Self, FormatError> {
        let mut c = Cursor::new(file, bytes);
        let m = c.take(4, "magic")?;
        if m != magic.as_bytes() {
            return Err(FormatError::WrongMagic {
                file: file.into(),
                expected: magic,
                found: String::from_utf8_lossy(m).into_owned(),
            });
        }
        let version = c.u32_le("version")?;
        if version == 0 || version > max_version {
            return Err(FormatError::UnsupportedVersion {
                file: file.into(),
                kind: magic,
                found: version,
                max: max_version,
            });
        }
        let n = c.u32_le("number of sections")?;
        let mut sections: BTreeMap<u32, Vec<&'a [u8]>> = BTreeMap::new();
        for i in 0..n {
            let id = c.u32_le(&format!("section header {i} type"))?;
            let size = c.u64_le(&format!("section {id} size"))?;
            let size = usize::try_from(size).unwrap_or(usize::MAX);
            let body = c.take(size, &format!("section {id} body"))?;
            sections.entry(id).or_default().push(body);
        }
        c.finish("the last section")?;
        Ok(Self { file, sections })
    }

    /// The one section of this type.
    pub(crate) fn section(&self, id: u32, name: &'static str) -> Result<&'a [u8], FormatError> {
        match self.sections.get(&id).map(Vec::as_slice) {
            None | Some([]) => Err(FormatError::MissingSection {
                file: self.file.into(),
                section: id,
                name,
            }),
            Some([one]) => Ok(one),
            Some(_) => Err(FormatError::DuplicateSection {
                file: self.file.into(),
                section: id,
                name,
            }),
        }
    }

    pub(crate) fn optional_section(
        &self,
        id: u32,
        name: &'static str,
    ) -> Result<Option<&'a [u8]>, FormatError> {
        if self.sections.contains_key(&id) {
            self.section(id, name).map(Some)
        } else {
            Ok(None)
        }
    }

    /// Checks a section's exact size.
    pub(crate) fn sized_section(
        &self,
        id: u32,
        name: &'static str,
        expected: u64,
    ) -> Result<&'a [u8], FormatError> {
        let s = self.section(id, name)?;
        if s.len() as u64 != expected {
            return Err(FormatError::SectionSize {
                file: self.file.into(),
                section: id,
                name,
                expected,
                found: s.len() as u64,
            });
        }
        Ok(s)
    }
}

/// Builds a container: sections are appended in the order given.
#[derive(Debug)]
pub(crate) struct BinWriter {
    pub(crate) out: Vec<u8>,
}

impl BinWriter {
    pub(crate) fn new(magic: &str, version: u32, sections: u32) -> Self {
        let mut out = Vec::new();
        out.extend_from_slice(magic.as_bytes());
        out.extend_from_slice(&version.to_le_bytes());
        out.extend_from_slice(&sections.to_le_bytes());
        Self { out }
    }

    pub(crate) fn section(&mut self, id: u32, body: &[u8]) {
        self.out.extend_from_slice(&id.to_le_bytes());
        self.out
            .extend_from_slice(&(body.len() as u64).to_le_bytes());
        self.out.extend_from_slice(body);
    }
}

/// Checks an `n8, prime` pair against BLS12-381's scalar field r.
pub(crate) fn check_fr_prime(c: &mut Cursor<'_>, field: &str) -> Result<(), FormatError> {
    check_prime(c, field, &Fr::MODULUS, "scalar field r")
}

/// Checks an `n8, prime` pair against BLS12-381's base field q.
pub(crate) fn check_fp_prime(c: &mut Cursor<'_>, field: &str) -> Result<(), FormatError> {
    check_prime(c, field, &Fp::MODULUS, "base field q")
}

fn check_prime(
    c: &mut Cursor<'_>,
    field: &str,
    modulus: &[u64],
    which: &'static str,
) -> Result<(), FormatError> {
    let n8 = c.u32_le(&format!("{field} size"))?;
    let found = c.take(n8 as usize, field)?;
    if n8 as usize != modulus.len() * 8 || found != modulus_le(modulus) {
        return Err(FormatError::WrongCurve {
            file: c.file.into(),
            field: field.into(),
            which,
            found: format!("{n8}-byte prime 0x{}", hex_be(found)),
        });
    }
    Ok(())
}

pub(crate) fn modulus_le(limbs: &[u64]) -> Vec<u8> {
    limbs.iter().flat_map(|l| l.to_le_bytes()).collect()
}

pub(crate) fn put_prime(out: &mut Vec<u8>, limbs: &[u64]) {
    out.extend_from_slice(&((limbs.len() * 8) as u32).to_le_bytes());
    out.extend_from_slice(&modulus_le(limbs));
}

fn hex_be(le: &[u8]) -> String {
    le.iter().rev().map(|b| format!("{b:02x}")).collect()
}

/// A canonical little-endian Fr.
pub(crate) fn fr_le(b: &[u8], file: &str, field: &str, index: usize) -> Result<Fr, FormatError> {
    Fr::from_bytes_le(b.try_into().expect("32 bytes")).map_err(|_| FormatError::BadScalar {
        file: file.into(),
        field: field.into(),
        index,
    })
}

pub(crate) fn read_file(path: &Path) -> Result<(String, Vec<u8>), FormatError> {
    let bytes = std::fs::read(path).map_err(|e| FormatError::io(path, e))?;
    Ok((path.display().to_string(), bytes))
}

pub(crate) fn write_file(path: &Path, bytes: &[u8]) -> Result<(), FormatError> {
    std::fs::write(path, bytes).map_err(|e| FormatError::io(path, e))
}

/// Most public signals taken from an iden3 r1cs. Each becomes an instance row of cuzk's
/// circuit, and the header's counts are not paid for by the file's bytes; 2^20 is far beyond
/// any Groth16 statement (verifying is linear in them).
pub const MAX_PUBLIC: usize = 1 << 20;

fn check_public(file: &str, out: u32, inp: u32) -> Result<usize, FormatError> {
    let n = out as usize + inp as usize;
    if n > MAX_PUBLIC {
        return Err(FormatError::invalid(
            file,
            "header.nPubOut + nPubIn",
            format!("{n} public signals (cuzk takes at most {MAX_PUBLIC})"),
        ));
    }
    Ok(n)
}

/// One linear combination: (wire, coefficient) terms as stored.
pub type Terms = Vec<(u32, Fr)>;

/// An iden3 `.r1cs` file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CircomR1cs {
    pub num_wires: u32,
    pub num_pub_out: u32,
    pub num_pub_in: u32,
    pub num_prv_in: u32,
    pub num_labels: u64,
    /// `[A, B, C]` of each constraint.
    pub constraints: Vec<[Terms; 3]>,
    /// Section 3, when present.
    pub wire_to_label: Option<Vec<u64>>,
}

impl CircomR1cs {
    /// Public signals (outputs then public inputs): cuzk's `num_public`.
    pub fn num_public(&self) -> usize {
        self.num_pub_out as usize + self.num_pub_in as usize
    }

    pub fn read(path: &Path) -> Result<Self, FormatError> {
        let (name, bytes) = read_file(path)?;
        Self::from_bytes(&name, &bytes)
    }

    pub fn from_bytes(file: &str, bytes: &[u8]) -> Result<Self, FormatError> {
        let bin = BinFile::parse(file, bytes, "r1cs", 1)?;
        let mut h = Cursor::new(file, bin.section(1, "header")?);
        check_fr_prime(&mut h, "header.prime")?;
        let num_wires = h.u32_le("header.nWires")?;
        let num_pub_out = h.u32_le("header.nPubOut")?;
        let num_pub_in = h.u32_le("header.nPubIn")?;
        let num_prv_in = h.u32_le("header.nPrvIn")?;
        let num_labels = h.u64_le("header.nLabels")?;
        let m = h.u32_le("header.mConstraints")?;
        h.finish("header.mConstraints")?;
        check_public(file, num_pub_out, num_pub_in)?;
        if (num_pub_out as u64 + num_pub_in as u64 + 1) > num_wires as u64 {
            return Err(FormatError::invalid(
                file,
                "header.nWires",
                format!(
                    "{num_wires} wires cannot hold the one and {num_pub_out} + {num_pub_in} public signals"
                ),
            ));
        }
        let mut c = Cursor::new(file, bin.section(2, "constraints")?);
        let mut constraints = Vec::with_capacity((m as usize).min(c.remaining() / 12));
        for i in 0..m as usize {
            let mut lcs: [Terms; 3] = Default::default();
            for (lc, name) in lcs.iter_mut().zip(["A", "B", "C"]) {
                let field = format!("constraints[{i}].{name}");
                let n = c.u32_le(&field)? as usize;
                let body = c.take_records(n, 36, &field)?;
                lc.reserve(n);
                for (k, t) in body.chunks_exact(36).enumerate() {
                    let wire = u32::from_le_bytes(t[..4].try_into().expect("4 bytes"));
                    if wire >= num_wires {
                        return Err(FormatError::invalid(
                            file,
                            format!("{field}[{k}].wire"),
                            format!("wire {wire} is not below nWires = {num_wires}"),
                        ));
                    }
                    lc.push((
                        wire,
                        fr_le(&t[4..], file, &format!("{field} coefficient"), k)?,
                    ));
                }
            }
            constraints.push(lcs);
        }
        c.finish("constraints")?;
        let wire_to_label = match bin.optional_section(3, "wire to label map")? {
            None => None,
            Some(s) => {
                if s.len() != num_wires as usize * 8 {
                    return Err(FormatError::SectionSize {
                        file: file.into(),
                        section: 3,
                        name: "wire to label map",
                        expected: num_wires as u64 * 8,
                        found: s.len() as u64,
                    });
                }
                Some(
                    s.chunks_exact(8)
                        .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
                        .collect(),
                )
            }
        };
        Ok(Self {
            num_wires,
            num_pub_out,
            num_pub_in,
            num_prv_in,
            num_labels,
            constraints,
            wire_to_label,
        })
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let sections = 2 + u32::from(self.wire_to_label.is_some());
        let mut w = BinWriter::new("r1cs", 1, sections);
        let mut h = Vec::new();
        put_prime(&mut h, &Fr::MODULUS);
        for v in [
            self.num_wires,
            self.num_pub_out,
            self.num_pub_in,
            self.num_prv_in,
        ] {
            h.extend_from_slice(&v.to_le_bytes());
        }
        h.extend_from_slice(&self.num_labels.to_le_bytes());
        h.extend_from_slice(&(self.constraints.len() as u32).to_le_bytes());
        w.section(1, &h);
        let mut c = Vec::new();
        for lcs in &self.constraints {
            for lc in lcs {
                c.extend_from_slice(&(lc.len() as u32).to_le_bytes());
                for (wire, v) in lc {
                    c.extend_from_slice(&wire.to_le_bytes());
                    c.extend_from_slice(&v.to_bytes_le());
                }
            }
        }
        w.section(2, &c);
        if let Some(map) = &self.wire_to_label {
            let b: Vec<u8> = map.iter().flat_map(|l| l.to_le_bytes()).collect();
            w.section(3, &b);
        }
        w.out
    }

    pub fn write(&self, path: &Path) -> Result<(), FormatError> {
        write_file(path, &self.to_bytes())
    }

    /// cuzk's constraint system: the same rows (terms of a wire merged, zeros dropped), then
    /// the instance rows `x_i · 0 = 0`.
    pub fn to_r1cs(&self, file: &str) -> Result<R1cs, FormatError> {
        let num_public = check_public(file, self.num_pub_out, self.num_pub_in)?;
        let m = self.num_wires as usize;
        let build = |k: usize, name: char| -> Result<SparseMatrix, FormatError> {
            let rows: Vec<Vec<(u32, Fr)>> = self
                .constraints
                .par_iter()
                .map(|lcs| canonical_row(&lcs[k]))
                .collect();
            let mut row_ptr = Vec::with_capacity(rows.len() + num_public + 2);
            let mut cols = Vec::new();
            let mut vals = Vec::new();
            row_ptr.push(0);
            for r in rows {
                for (c, v) in r {
                    cols.push(c);
                    vals.push(v);
                }
                row_ptr.push(cols.len());
            }
            for v in 0..=num_public {
                if k == 0 {
                    cols.push(v as u32);
                    vals.push(Fr::ONE);
                }
                row_ptr.push(cols.len());
            }
            SparseMatrix::from_csr(m, row_ptr, cols, vals).map_err(|reason| {
                FormatError::invalid(file, format!("constraints ({name})"), reason)
            })
        };
        let (a, b, c) = (build(0, 'A')?, build(1, 'B')?, build(2, 'C')?);
        R1cs::new(num_public, m, a, b, c).map_err(|source| FormatError::Circuit {
            file: file.into(),
            source,
        })
    }

    /// The iden3 form of a cuzk constraint system (its instance rows dropped again); the
    /// public variables are all counted as outputs, as cuzk does not tell them apart.
    pub fn from_r1cs(r1cs: &R1cs) -> Self {
        let rows = r1cs.num_circuit_constraints();
        let lc = |m: &SparseMatrix, i: usize| -> Terms {
            m.row(i).expect("row in range").terms().collect()
        };
        let constraints = (0..rows)
            .map(|i| [lc(r1cs.a(), i), lc(r1cs.b(), i), lc(r1cs.c(), i)])
            .collect();
        Self {
            num_wires: r1cs.num_variables() as u32,
            num_pub_out: r1cs.num_public() as u32,
            num_pub_in: 0,
            num_prv_in: 0,
            num_labels: r1cs.num_variables() as u64,
            constraints,
            wire_to_label: None,
        }
    }
}

/// Sorted by wire, repeated wires summed, zero coefficients dropped.
fn canonical_row(lc: &[(u32, Fr)]) -> Vec<(u32, Fr)> {
    let mut t = lc.to_vec();
    t.sort_unstable_by_key(|x| x.0);
    let mut out: Vec<(u32, Fr)> = Vec::with_capacity(t.len());
    for (c, v) in t {
        match out.last_mut() {
            Some(last) if last.0 == c => last.1 += v,
            _ => out.push((c, v)),
        }
    }
    out.retain(|x| !x.1.is_zero());
    out
}

/// A `.wtns` witness: every wire's value, wire 0 the one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wtns {
    pub values: Vec<Fr>,
}

impl Wtns {
    pub fn read(path: &Path) -> Result<Self, FormatError> {
        let (name, bytes) = read_file(path)?;
        Self::from_bytes(&name, &bytes)
    }

    pub fn from_bytes(file: &str, bytes: &[u8]) -> Result<Self, FormatError> {
        let bin = BinFile::parse(file, bytes, "wtns", 2)?;
        let mut h = Cursor::new(file, bin.section(1, "header")?);
        check_fr_prime(&mut h, "header.prime")?;
        let n = h.u32_le("header.nWitness")? as usize;
        h.finish("header.nWitness")?;
        let body = bin.sized_section(2, "values", n as u64 * 32)?;
        let values = body
            .par_chunks_exact(32)
            .enumerate()
            .map(|(i, b)| fr_le(b, file, "values", i))
            .collect::<Result<Vec<_>, _>>()?;
        if values.first() != Some(&Fr::ONE) {
            return Err(FormatError::invalid(
                file,
                "values[0]",
                "wire 0 must be the constant one",
            ));
        }
        Ok(Self { values })
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = BinWriter::new("wtns", 2, 2);
        let mut h = Vec::new();
        put_prime(&mut h, &Fr::MODULUS);
        h.extend_from_slice(&(self.values.len() as u32).to_le_bytes());
        w.section(1, &h);
        let body: Vec<u8> = self.values.iter().flat_map(|v| v.to_bytes_le()).collect();
        w.section(2, &body);
        w.out
    }

    pub fn write(&self, path: &Path) -> Result<(), FormatError> {
        write_file(path, &self.to_bytes())
    }

    /// cuzk's witness for a circuit with `num_public` public signals.
    pub fn to_witness(&self, num_public: usize, file: &str) -> Result<Witness, FormatError> {
        Witness::from_assignment(num_public, self.values.clone())
            .map_err(|e| FormatError::invalid(file, "values", e.to_string()))
    }
}
