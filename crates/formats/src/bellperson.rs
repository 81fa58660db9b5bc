//! bellperson's Groth16 files: `Parameters`, `VerifyingKey` and the 192-byte `Proof`.
//!
//! Layout (bellperson 0.27, `groth16/{params,verifying_key,proof}.rs`), every point in the zcash
//! uncompressed encoding, every length a big-endian u32:
//! - VerifyingKey: alpha_g1, beta_g1, beta_g2, gamma_g2, delta_g1, delta_g2, len, ic[len].
//! - Parameters: VerifyingKey, then h, l, a, b_g1, b_g2, each `len, points[len]`.
//! - Proof: A (G1), B (G2), C (G1), compressed: 48 + 96 + 48 bytes.
//!
//! **Densities.** bellperson's a, b_g1 and b_g2 queries are density-filtered: its generator
//! drops every point at infinity, i.e. every variable whose polynomial is zero at τ — a
//! variable that never occurs in that matrix. `a` holds every input (the `x_i · 0 = 0` rows put
//! each input in A) and then the aux variables that occur in A; `b_g1`/`b_g2` the inputs, then
//! the aux variables, that occur in B. cuzk's [`ProvingKey`] indexes every variable instead (the
//! identity where a variable does not occur), so its MSMs read the witness directly. The
//! densities are a property of the circuit: [`BpParameters::into_proving_key`] takes them from
//! the [`R1cs`] (column i of A or B is non-empty), which is exactly bellperson's density
//! tracker on a circuit synthesized in bellperson's variable order (cuzk-bellpepper does), and
//! scatters the queries in place, checking that the counts match.

use std::io::Write;
use std::path::Path;

use cuzk_field::{G1Affine, G2Affine};
use cuzk_groth16::{KeyQueries, Proof, ProvingKey, R1cs, VerifyingKey};
use cuzk_msm::subgroup::Gpu;

use crate::FormatError;
use crate::cursor::Cursor;
use crate::points::{ArraySpec, Encoding, Point, PointChecks, decode_one, write_array};
use crate::stream::{BlockStream, Source};

/// bellperson's `VerifyingKey` (it keeps beta_g1 and delta_g1, which cuzk's proving key holds).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BpVerifyingKey {
    pub alpha_g1: G1Affine,
    pub beta_g1: G1Affine,
    pub beta_g2: G2Affine,
    pub gamma_g2: G2Affine,
    pub delta_g1: G1Affine,
    pub delta_g2: G2Affine,
    pub ic: Vec<G1Affine>,
}

/// bellperson's `Parameters`, queries as stored (density-filtered).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BpParameters {
    pub vk: BpVerifyingKey,
    pub h: Vec<G1Affine>,
    pub l: Vec<G1Affine>,
    pub a: Vec<G1Affine>,
    pub b_g1: Vec<G1Affine>,
    pub b_g2: Vec<G2Affine>,
}

impl BpVerifyingKey {
    /// cuzk's verifying key (the pairing equation uses alpha_g1, beta_g2, gamma_g2, delta_g2, ic).
    pub fn to_cuzk(&self) -> VerifyingKey {
        VerifyingKey {
            alpha_g1: self.alpha_g1,
            beta_g2: self.beta_g2,
            gamma_g2: self.gamma_g2,
            delta_g2: self.delta_g2,
            ic: self.ic.clone(),
        }
    }

    pub fn from_proving_key(pk: &ProvingKey) -> Self {
        Self::from_parts(&pk.vk, pk.beta_g1, pk.delta_g1)
    }

    /// cuzk's verifying key with the two G1 points bellperson keeps beside it (a key held on
    /// a device has them too).
    pub fn from_parts(vk: &VerifyingKey, beta_g1: G1Affine, delta_g1: G1Affine) -> Self {
        Self {
            alpha_g1: vk.alpha_g1,
            beta_g1,
            beta_g2: vk.beta_g2,
            gamma_g2: vk.gamma_g2,
            delta_g1,
            delta_g2: vk.delta_g2,
            ic: vk.ic.clone(),
        }
    }

    pub fn write(&self, w: &mut impl Write) -> std::io::Result<()> {
        for p in [&self.alpha_g1, &self.beta_g1] {
            w.write_all(&p.to_uncompressed())?;
        }
        for p in [&self.beta_g2, &self.gamma_g2] {
            w.write_all(&p.to_uncompressed())?;
        }
        w.write_all(&self.delta_g1.to_uncompressed())?;
        w.write_all(&self.delta_g2.to_uncompressed())?;
        w.write_all(&len_u32(self.ic.len())?.to_be_bytes())?;
        write_array(&self.ic, Encoding::Uncompressed, w)
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = Vec::new();
        self.write(&mut v).expect("writing to a Vec cannot fail");
        v
    }

    /// Parses a verifying key file's bytes (every point fully checked; `file` names errors).
    pub fn from_bytes(file: &str, bytes: &[u8]) -> Result<Self, FormatError> {
        let mut c = Cursor::new(file, bytes);
        let vk = read_vk(&mut c)?;
        c.finish("ic")?;
        Ok(vk)
    }

    pub fn read(path: &Path) -> Result<Self, FormatError> {
        let bytes = std::fs::read(path).map_err(|e| FormatError::io(path, e))?;
        Self::from_bytes(&path.display().to_string(), &bytes)
    }
}

fn len_u32(n: usize) -> std::io::Result<u32> {
    u32::try_from(n).map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{n} points do not fit bellperson's u32 length"),
        )
    })
}

/// The point checks of a read: the subgroup and curve checks or not, and where the subgroup
/// checks run.
#[derive(Clone, Copy)]
struct Checks<'a> {
    subgroup: bool,
    on_curve: bool,
    gpu: Option<&'a Gpu>,
}

fn one<P: Point>(src: &mut impl Source, field: &str) -> Result<P, FormatError> {
    let b = src.take_small(P::UNCOMPRESSED, field)?;
    decode_one(&b, src.file(), field, Encoding::Uncompressed)
}

fn read_vk(src: &mut impl Source) -> Result<BpVerifyingKey, FormatError> {
    let alpha_g1 = one(src, "vk.alpha_g1")?;
    let beta_g1 = one(src, "vk.beta_g1")?;
    let beta_g2 = one(src, "vk.beta_g2")?;
    let gamma_g2 = one(src, "vk.gamma_g2")?;
    let delta_g1 = one(src, "vk.delta_g1")?;
    let delta_g2 = one(src, "vk.delta_g2")?;
    let n = src.u32_be("vk.ic length")? as usize;
    let file = src.file().to_string();
    let always = Checks {
        subgroup: true,
        on_curve: true,
        gpu: None,
    };
    let ic = src.points(n, 96, spec(&file, "vk.ic", always))?;
    Ok(BpVerifyingKey {
        alpha_g1,
        beta_g1,
        beta_g2,
        gamma_g2,
        delta_g1,
        delta_g2,
        ic,
    })
}

fn spec<'a>(file: &'a str, field: &'a str, checks: Checks<'a>) -> ArraySpec<'a> {
    ArraySpec {
        file,
        field,
        encoding: Encoding::Uncompressed,
        // bellperson's reader refuses the identity in every query and in ic.
        reject_identity: true,
        subgroup: checks.subgroup,
        on_curve: checks.on_curve,
        gpu: checks.gpu,
    }
}

fn read_queries(src: &mut impl Source, checks: Checks<'_>) -> Result<BpParameters, FormatError> {
    let vk = read_vk(src)?;
    let file = src.file().to_string();
    let n = src.u32_be("h length")? as usize;
    let h = src.points(n, 96, spec(&file, "h", checks))?;
    let n = src.u32_be("l length")? as usize;
    let l = src.points(n, 96, spec(&file, "l", checks))?;
    let n = src.u32_be("a length")? as usize;
    let a = src.points(n, 96, spec(&file, "a", checks))?;
    let n = src.u32_be("b_g1 length")? as usize;
    let b_g1 = src.points(n, 96, spec(&file, "b_g1", checks))?;
    let n = src.u32_be("b_g2 length")? as usize;
    let b_g2 = src.points(n, 192, spec(&file, "b_g2", checks))?;
    Ok(BpParameters {
        vk,
        h,
        l,
        a,
        b_g1,
        b_g2,
    })
}

fn point_checks<'a>(checks: &PointChecks, gpu: Option<&'a Gpu>) -> Checks<'a> {
    Checks {
        subgroup: checks.subgroup(),
        on_curve: checks.on_curve(),
        gpu,
    }
}

impl BpParameters {
    /// Streams a parameters file (any size: blocks are decoded in parallel as they are read,
    /// and only the decoded points are kept). With [`PointChecks::TrustedDigest`] the file is
    /// hashed beside the decoding and only the coordinates are checked (canonical): the digest
    /// vouches for the rest, and the curve and subgroup checks are skipped. With
    /// [`PointChecks::OnCurve`] the subgroup checks alone are skipped.
    pub fn read(path: &Path, checks: &PointChecks) -> Result<Self, FormatError> {
        Self::read_blocks(path, checks, None)
    }

    /// [`Self::read`] with a chosen block size (tests make records straddle blocks).
    #[doc(hidden)]
    pub fn read_blocks(
        path: &Path,
        checks: &PointChecks,
        block: Option<usize>,
    ) -> Result<Self, FormatError> {
        let digest = checks.digest().cloned();
        let mut s = match block {
            Some(b) => BlockStream::open_with_block(path, digest, b)?,
            None => BlockStream::open(path, digest)?,
        };
        let gpu = crate::points::subgroup_gpu_for(checks);
        let parsed = read_queries(&mut s, point_checks(checks, gpu.as_ref()));
        match parsed {
            Ok(p) => {
                s.finish("b_g2")?;
                Ok(p)
            }
            Err(e) => Err(e),
        }
    }

    /// Parses parameters held in memory.
    pub fn from_bytes(file: &str, bytes: &[u8], checks: &PointChecks) -> Result<Self, FormatError> {
        if let Some(d) = checks.digest() {
            d.check(file, bytes)?;
        }
        let mut c = Cursor::new(file, bytes);
        let gpu = crate::points::subgroup_gpu_for(checks);
        let p = read_queries(&mut c, point_checks(checks, gpu.as_ref()))?;
        c.finish("b_g2")?;
        Ok(p)
    }

    /// Writes bellperson's layout (streamed through `w`; wrap files in a `BufWriter`).
    pub fn write(&self, w: &mut impl Write) -> std::io::Result<()> {
        self.vk.write(w)?;
        for q in [&self.h, &self.l, &self.a, &self.b_g1] {
            w.write_all(&len_u32(q.len())?.to_be_bytes())?;
            write_array(q, Encoding::Uncompressed, w)?;
        }
        w.write_all(&len_u32(self.b_g2.len())?.to_be_bytes())?;
        write_array(&self.b_g2, Encoding::Uncompressed, w)
    }

    pub fn write_file(&self, path: &Path) -> Result<(), FormatError> {
        let f = std::fs::File::create(path).map_err(|e| FormatError::io(path, e))?;
        let mut w = std::io::BufWriter::with_capacity(8 << 20, f);
        self.write(&mut w)
            .and_then(|()| w.flush())
            .map_err(|e| FormatError::io(path, e))
    }

    /// bellperson's parameters for a cuzk key: the a and b queries lose their identity points,
    /// as bellperson's generator drops them. bellperson refuses the identity in h and l (an
    /// unconstrained private variable), so such a key is an error naming the entry.
    pub fn from_proving_key(pk: &ProvingKey) -> Result<Self, FormatError> {
        let name = "cuzk proving key";
        for (field, q) in [("h", pk.h_query()), ("l", pk.l_query()), ("ic", &pk.vk.ic)] {
            if let Some(i) = q.iter().position(G1Affine::is_identity) {
                return Err(FormatError::IdentityPoint {
                    file: name.into(),
                    field: field.into(),
                    index: i,
                });
            }
        }
        let keep_g1 = |q: &[G1Affine]| q.iter().copied().filter(|p| !p.is_identity()).collect();
        Ok(Self {
            vk: BpVerifyingKey::from_proving_key(pk),
            h: pk.h_query().to_vec(),
            l: pk.l_query().to_vec(),
            a: keep_g1(pk.a_query()),
            b_g1: keep_g1(pk.b_g1_query()),
            b_g2: pk
                .b_g2_query()
                .iter()
                .copied()
                .filter(|p| !p.is_identity())
                .collect(),
        })
    }

    /// cuzk's proving key for `r1cs` (the circuit these parameters were made for): the filtered
    /// queries are scattered, in place, to one entry per variable by the densities of A and B
    /// (see the module docs). `file` names the parameters in errors; a key of another circuit
    /// is a [`FormatError::Mismatch`] naming the first query whose size differs.
    pub fn into_proving_key(self, r1cs: &R1cs, file: &str) -> Result<ProvingKey, FormatError> {
        let m = r1cs.num_variables();
        let n = r1cs.domain_size();
        let used_a = column_used(r1cs.a().cols(), m);
        let used_b = column_used(r1cs.b().cols(), m);
        let count = |u: &[bool]| u.iter().filter(|&&x| x).count();
        let circuit = "the circuit";
        let checks = [
            (
                "ic (public inputs + 1)",
                r1cs.num_public() + 1,
                self.vk.ic.len(),
            ),
            ("h (domain size - 1)", n - 1, self.h.len()),
            ("l (private variables)", r1cs.num_private(), self.l.len()),
            ("a (variables in A)", count(&used_a), self.a.len()),
            ("b_g1 (variables in B)", count(&used_b), self.b_g1.len()),
            ("b_g2 (variables in B)", count(&used_b), self.b_g2.len()),
        ];
        for (field, expected, found) in checks {
            if expected != found {
                return Err(FormatError::mismatch(file, circuit, field, expected, found));
            }
        }
        let queries = KeyQueries {
            a_query: scatter(self.a, &used_a),
            b_g1_query: scatter(self.b_g1, &used_b),
            b_g2_query: scatter(self.b_g2, &used_b),
            h_query: self.h,
            l_query: self.l,
        };
        Ok(ProvingKey::new(
            self.vk.to_cuzk(),
            self.vk.beta_g1,
            self.vk.delta_g1,
            queries,
        ))
    }
}

/// `used[i]`: column i has an entry.
fn column_used(cols: &[u32], m: usize) -> Vec<bool> {
    let mut used = vec![false; m];
    for &c in cols {
        used[c as usize] = true;
    }
    used
}

/// Spreads `v` (one entry per set flag, in order) to one entry per flag, identities elsewhere,
/// in place: walking down from the end, the source index never passes the target.
fn scatter<P: Copy + Default>(mut v: Vec<P>, used: &[bool]) -> Vec<P> {
    let mut k = v.len();
    v.resize(used.len(), P::default());
    for j in (0..used.len()).rev() {
        if used[j] {
            k -= 1;
            v[j] = v[k];
        } else {
            v[j] = P::default();
        }
    }
    v
}

/// bellperson's proof encoding: A, B, C compressed (192 bytes).
pub fn proof_to_bytes(p: &Proof) -> [u8; 192] {
    p.to_bytes()
}

/// Parses a 192-byte bellperson proof (points fully checked; the identity refused, as
/// bellperson's reader does).
pub fn proof_from_bytes(file: &str, bytes: &[u8]) -> Result<Proof, FormatError> {
    if bytes.len() != Proof::BYTES {
        return Err(FormatError::Invalid {
            file: file.into(),
            field: "proof".into(),
            reason: format!("a bellperson proof has 192 bytes, this one {}", bytes.len()),
        });
    }
    let g1 = |field: &str, b: &[u8]| -> Result<G1Affine, FormatError> {
        let p = G1Affine::from_compressed(b.try_into().expect("48 bytes")).map_err(|source| {
            FormatError::BadPoint {
                file: file.into(),
                field: field.into(),
                index: 0,
                source,
            }
        })?;
        not_identity(file, field, p.is_identity()).map(|()| p)
    };
    let a = g1("proof.a", &bytes[..48])?;
    let b = G2Affine::from_compressed(bytes[48..144].try_into().expect("96 bytes")).map_err(
        |source| FormatError::BadPoint {
            file: file.into(),
            field: "proof.b".into(),
            index: 0,
            source,
        },
    )?;
    not_identity(file, "proof.b", b.is_identity())?;
    let c = g1("proof.c", &bytes[144..])?;
    Ok(Proof { a, b, c })
}

fn not_identity(file: &str, field: &str, is: bool) -> Result<(), FormatError> {
    if is {
        Err(FormatError::IdentityPoint {
            file: file.into(),
            field: field.into(),
            index: 0,
        })
    } else {
        Ok(())
    }
}
