//! cuzk's own file format for proving keys, verifying keys, proofs, circuits and witnesses.
//!
//! Every file is, in little-endian:
//!
//! ```text
//! magic   b"CUZK"
//! kind    u8        1 proving key, 2 verifying key, 3 proof, 4 R1CS, 5 witness
//! version u32       FORMAT_VERSION
//! sizes   u64 …     per kind, all counts before any payload (a reader can plan memory)
//! payload …         points uncompressed (G1 96 B, G2 192 B, zcash encoding) except in
//!                   proofs (compressed, 48/96 B); Fr as 32 canonical little-endian bytes
//! blake3  [u8; 32]  BLAKE3 of every byte before it
//! ```
//!
//! Reading and writing stream through `Read`/`Write` with a running hash, so a large key is never
//! held twice. Vectors are read in chunks; reading the next chunk, hashing this one and decoding
//! it (points through the same parallel decoder and [`PointChecks`] as every other format)
//! overlap. Memory grows only as data actually arrives, so a lying size field cannot cause a huge
//! allocation. Readers take a name for their errors (`file`: a path, or what the bytes are).

use std::fmt;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::sync::atomic::{AtomicUsize, Ordering};

use cuzk_field::{Fr, G1Affine, G2Affine};
use cuzk_groth16::{KeyQueries, Proof, ProvingKey, R1cs, SparseMatrix, VerifyingKey, Witness};
use cuzk_msm::subgroup::Gpu;
use rayon::prelude::*;

use crate::digest::Hasher;
use crate::points::{
    ArraySpec, Encoding, Point, check_subgroup_after, decode_into, lowest_error, reindex,
    subgroup_gpu_for,
};
use crate::{Digest, FormatError, PointChecks};

pub const MAGIC: [u8; 4] = *b"CUZK";
/// 2: the checksum is BLAKE3 (1 had SHA-256, which capped a read at ~1.7 GB/s on one core).
pub const FORMAT_VERSION: u32 = 2;
/// Elements per write chunk: bounds the writer's staging buffer.
const CHUNK: usize = 1 << 14;
/// Bytes per read chunk: bounds the reader's two staging buffers and amortises the start of
/// each chunk's parallel decode.
const CHUNK_BYTES: usize = 8 << 20;
/// Largest vector length accepted (2^32 elements): anything bigger is a corrupted size.
const MAX_LEN: u64 = 1 << 32;

/// What a file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum FileKind {
    ProvingKey = 1,
    VerifyingKey = 2,
    Proof = 3,
    R1cs = 4,
    Witness = 5,
}

impl FileKind {
    const ALL: [FileKind; 5] = [
        FileKind::ProvingKey,
        FileKind::VerifyingKey,
        FileKind::Proof,
        FileKind::R1cs,
        FileKind::Witness,
    ];

    /// The kind stored as `byte`, if any.
    pub(crate) fn from_byte(byte: u8) -> Option<Self> {
        Self::ALL.into_iter().find(|k| *k as u8 == byte)
    }

    fn name(self) -> &'static str {
        match self {
            FileKind::ProvingKey => "proving key",
            FileKind::VerifyingKey => "verifying key",
            FileKind::Proof => "proof",
            FileKind::R1cs => "circuit (R1CS)",
            FileKind::Witness => "witness",
        }
    }
}

impl fmt::Display for FileKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

fn invalid_input(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg.into())
}

/// A writer that hashes everything written through it.
struct HashingWriter<W: Write> {
    inner: BufWriter<W>,
    hasher: blake3::Hasher,
}

impl<W: Write> HashingWriter<W> {
    fn new(inner: W, kind: FileKind) -> io::Result<Self> {
        let mut w = Self {
            inner: BufWriter::with_capacity(1 << 20, inner),
            hasher: blake3::Hasher::new(),
        };
        w.put(&MAGIC)?;
        w.put(&[kind as u8])?;
        w.put(&FORMAT_VERSION.to_le_bytes())?;
        Ok(w)
    }

    fn put(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.hasher.update(bytes);
        self.inner.write_all(bytes)
    }

    fn u64(&mut self, v: usize) -> io::Result<()> {
        self.put(&(v as u64).to_le_bytes())
    }

    /// Encodes in parallel chunks, writes sequentially.
    fn items<T: Sync, const B: usize>(
        &mut self,
        items: &[T],
        encode: impl Fn(&T) -> [u8; B] + Sync,
    ) -> io::Result<()> {
        let mut buf = vec![0u8; CHUNK.min(items.len()) * B];
        for chunk in items.chunks(CHUNK) {
            let bytes = &mut buf[..chunk.len() * B];
            bytes
                .par_chunks_mut(B)
                .zip(chunk)
                .for_each(|(out, item)| out.copy_from_slice(&encode(item)));
            self.put(bytes)?;
        }
        Ok(())
    }

    fn g1s(&mut self, points: &[G1Affine]) -> io::Result<()> {
        self.items(points, G1Affine::to_uncompressed)
    }

    fn g2s(&mut self, points: &[G2Affine]) -> io::Result<()> {
        self.items(points, G2Affine::to_uncompressed)
    }

    fn frs(&mut self, values: &[Fr]) -> io::Result<()> {
        self.items(values, Fr::to_bytes_le)
    }

    fn finish(mut self) -> io::Result<()> {
        let digest = self.hasher.finalize();
        self.inner.write_all(digest.as_bytes())?;
        self.inner.flush()
    }
}

/// Reads until `buf` is full or the input ends; the number of bytes read.
fn fill(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(k) => got += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// The checks a reader applies to the points it reads next.
#[derive(Clone, Copy)]
struct Checks {
    subgroup: bool,
    on_curve: bool,
}

impl Checks {
    const FULL: Checks = Checks {
        subgroup: true,
        on_curve: true,
    };

    fn of(checks: &PointChecks) -> Self {
        Checks {
            subgroup: checks.subgroup(),
            on_curve: checks.on_curve(),
        }
    }
}

/// A reader that hashes everything read through it.
struct HashingReader<'f, R: Read> {
    file: &'f str,
    inner: BufReader<R>,
    hasher: blake3::Hasher,
    /// The caller's digest of the whole file ([`PointChecks::TrustedDigest`]) and its hasher.
    trusted: Option<(Digest, Hasher)>,
    /// Bytes consumed so far (the offset of truncation errors).
    pos: usize,
    checks: Checks,
    /// Where the subgroup checks of large point arrays run, when there is a GPU.
    gpu: Option<Gpu>,
}

impl<'f, R: Read> HashingReader<'f, R> {
    fn new(
        file: &'f str,
        inner: R,
        kind: FileKind,
        trusted: Option<&Digest>,
    ) -> Result<Self, FormatError> {
        let mut r = Self {
            file,
            inner: BufReader::with_capacity(1 << 20, inner),
            hasher: blake3::Hasher::new(),
            trusted: trusted.map(|d| (d.clone(), d.hasher())),
            pos: 0,
            checks: Checks::FULL,
            gpu: None,
        };
        let magic: [u8; 4] = r.array("magic")?;
        if magic != MAGIC {
            return Err(FormatError::WrongMagic {
                file: file.into(),
                expected: "cuzk",
                found: String::from_utf8_lossy(&magic).into_owned(),
            });
        }
        let [found] = r.array("kind")?;
        if found != kind as u8 {
            return Err(FormatError::WrongKind {
                file: file.into(),
                expected: kind,
                found,
            });
        }
        let version = u32::from_le_bytes(r.array("version")?);
        if version != FORMAT_VERSION {
            return Err(FormatError::UnsupportedVersion {
                file: file.into(),
                kind: "cuzk",
                found: version,
                max: FORMAT_VERSION,
            });
        }
        Ok(r)
    }

    fn invalid(&self, field: &str, reason: impl Into<String>) -> FormatError {
        FormatError::invalid(self.file, field, reason)
    }

    /// The error of a read at `offset` that brought `got` of `want` bytes; `needed` is what
    /// `field` still lacks from `offset` on.
    fn check_read(
        &self,
        got: io::Result<usize>,
        want: usize,
        field: &str,
        offset: usize,
        needed: usize,
    ) -> Result<(), FormatError> {
        match got {
            Ok(n) if n == want => Ok(()),
            Ok(available) => Err(FormatError::Truncated {
                file: self.file.into(),
                field: field.into(),
                offset,
                needed,
                available,
            }),
            Err(source) => Err(FormatError::Io {
                file: self.file.into(),
                source,
            }),
        }
    }

    fn hash(&mut self, bytes: &[u8]) {
        self.hasher.update(bytes);
        if let Some((_, h)) = &mut self.trusted {
            h.update(bytes);
        }
        self.pos += bytes.len();
    }

    fn array<const B: usize>(&mut self, field: &str) -> Result<[u8; B], FormatError> {
        let mut b = [0u8; B];
        let got = fill(&mut self.inner, &mut b);
        self.check_read(got, B, field, self.pos, B)?;
        self.hash(&b);
        Ok(b)
    }

    /// A length, bounded by [`MAX_LEN`].
    fn len(&mut self, field: &str) -> Result<usize, FormatError> {
        let v = u64::from_le_bytes(self.array(field)?);
        match usize::try_from(v) {
            Ok(n) if v <= MAX_LEN => Ok(n),
            _ => Err(self.invalid(field, format!("{v} is out of range (at most 2^32)"))),
        }
    }

    /// `count` records of `size` bytes, read chunk by chunk; `decode` appends a chunk's
    /// records to the output. Reading the next chunk, hashing this one and decoding it
    /// overlap, so a load runs at the speed of the slowest of the three, not of their sum.
    fn records<T: Send>(
        &mut self,
        field: &str,
        count: usize,
        size: usize,
        mut decode: impl FnMut(&[u8], &mut Vec<T>) -> Result<(), FormatError> + Send,
    ) -> Result<Vec<T>, FormatError> {
        let per = (CHUNK_BYTES / size).max(1);
        let mut out = Vec::new();
        let mut cur = vec![0u8; count.min(per) * size];
        let mut next = vec![0u8; (count - count.min(per)).min(per) * size];
        let got = fill(&mut self.inner, &mut cur);
        self.check_read(got, cur.len(), field, self.pos, count * size)?;
        let mut done = 0;
        while done < count {
            let len = (count - done).min(per);
            let next_len = (count - done - len).min(per);
            let bytes = &cur[..len * size];
            // Memory grows only as data arrives: a lying count fails at its first short read.
            out.try_reserve(len)
                .map_err(|_| self.invalid(field, format!("cannot hold {count} records")))?;
            let Self {
                inner,
                hasher,
                trusted,
                ..
            } = &mut *self;
            // The reader may not be `Send`, so it stays on this thread.
            let joined = std::thread::scope(|s| {
                let work = s.spawn(|| {
                    let hash = || {
                        rayon::join(
                            || {
                                hasher.update_rayon(bytes);
                            },
                            || {
                                if let Some((_, h)) = trusted {
                                    h.update(bytes);
                                }
                            },
                        )
                    };
                    rayon::join(hash, || decode(bytes, &mut out)).1
                });
                let read = fill(inner, &mut next[..next_len * size]);
                work.join().map(|decoded| (decoded, read))
            });
            let (decoded, read) =
                joined.map_err(|_| self.invalid(field, "a decoding thread panicked"))?;
            decoded?;
            self.pos += len * size;
            let needed = (count - done - len) * size;
            self.check_read(read, next_len * size, field, self.pos, needed)?;
            std::mem::swap(&mut cur, &mut next);
            done += len;
        }
        Ok(out)
    }

    /// `count` values of `B` bytes, decoded in parallel; `decode` refuses a non-canonical
    /// field element (reported at the lowest such index).
    fn values<T: Send + Default, const B: usize>(
        &mut self,
        field: &str,
        count: usize,
        decode: impl Fn(&[u8; B]) -> Option<T> + Sync + Send,
    ) -> Result<Vec<T>, FormatError> {
        let file = self.file;
        self.records(field, count, B, |bytes, out| {
            let before = out.len();
            let first_bad = AtomicUsize::new(usize::MAX);
            out.par_extend(bytes.par_chunks_exact(B).enumerate().map(|(i, b)| {
                decode(b.try_into().expect("chunks of B bytes")).unwrap_or_else(|| {
                    first_bad.fetch_min(i, Ordering::Relaxed);
                    T::default()
                })
            }));
            match first_bad.into_inner() {
                usize::MAX => Ok(()),
                i => Err(FormatError::BadScalar {
                    file: file.into(),
                    field: field.into(),
                    index: before + i,
                }),
            }
        })
    }

    fn frs(&mut self, field: &str, count: usize) -> Result<Vec<Fr>, FormatError> {
        self.values(field, count, |b| Fr::from_bytes_le(b).ok())
    }

    /// `count` uncompressed points, checked as the reader's `checks` say.
    fn points<P: Point>(&mut self, field: &str, count: usize) -> Result<Vec<P>, FormatError> {
        let gpu = self.gpu.clone();
        let full = ArraySpec {
            file: self.file,
            field,
            encoding: Encoding::Uncompressed,
            // The identity stands for a variable absent from a matrix.
            reject_identity: false,
            subgroup: self.checks.subgroup,
            on_curve: self.checks.on_curve,
            gpu: gpu.as_ref(),
        };
        let spec = full.for_decode(count);
        let out = self.records(field, count, P::UNCOMPRESSED, |bytes, out| {
            let before = out.len();
            decode_into(bytes, spec, out)
                .map_err(|e| lowest_error(out, full, count, reindex(e, before)))
        })?;
        check_subgroup_after(&out, full)?;
        Ok(out)
    }

    fn point<P: Point>(&mut self, field: &str) -> Result<P, FormatError> {
        Ok(self.points(field, 1)?[0])
    }

    /// Reads the stored checksum and compares it (and the caller's digest, if any) with the
    /// hash of everything before it.
    fn finish(mut self) -> Result<(), FormatError> {
        let computed = self.hasher.finalize();
        let mut stored = [0u8; 32];
        let got = fill(&mut self.inner, &mut stored);
        self.check_read(got, 32, "checksum", self.pos, 32)?;
        if let Some((d, mut h)) = self.trusted.take() {
            h.update(&stored);
            d.check_computed(self.file, &h.finish())?;
        }
        if computed == stored {
            Ok(())
        } else {
            Err(FormatError::ChecksumMismatch {
                file: self.file.into(),
            })
        }
    }
}

/// Sizes: num_variables m, num_public, domain size n. Payload: α_g1, β_g2, γ_g2, δ_g2,
/// `ic[num_public + 1]`, β_g1, δ_g1, `a[m]`, `b_g1[m]`, `b_g2[m]`, `h[n − 1]`,
/// `l[m − num_public − 1]`.
pub fn write_proving_key(w: impl Write, pk: &ProvingKey) -> io::Result<()> {
    let m = pk.a_query().len();
    let n = pk.h_query().len() + 1;
    let np = pk
        .vk
        .ic
        .len()
        .checked_sub(1)
        .ok_or_else(|| invalid_input("empty ic"))?;
    if pk.b_g1_query().len() != m || pk.b_g2_query().len() != m || pk.l_query().len() + np + 1 != m
    {
        return Err(invalid_input("proving key queries have different lengths"));
    }
    let mut w = HashingWriter::new(w, FileKind::ProvingKey)?;
    w.u64(m)?;
    w.u64(np)?;
    w.u64(n)?;
    write_vk_points(&mut w, &pk.vk)?;
    w.g1s(&[pk.beta_g1, pk.delta_g1])?;
    w.g1s(pk.a_query())?;
    w.g1s(pk.b_g1_query())?;
    w.g2s(pk.b_g2_query())?;
    w.g1s(pk.h_query())?;
    w.g1s(pk.l_query())?;
    w.finish()
}

/// Reads a proving key, its points checked as `checks` says (the verifying-key part is always
/// fully checked); `file` names errors.
pub fn read_proving_key(
    file: &str,
    r: impl Read,
    checks: &PointChecks,
) -> Result<ProvingKey, FormatError> {
    let mut r = HashingReader::new(file, r, FileKind::ProvingKey, checks.digest())?;
    let m = r.len("num_variables")?;
    let np = r.len("num_public")?;
    let n = r.len("domain size")?;
    if np + 1 > m {
        return Err(r.invalid(
            "num_public",
            format!("{np} public inputs but {m} variables"),
        ));
    }
    if !n.is_power_of_two() || n < 2 {
        return Err(r.invalid("domain size", format!("{n} is not a power of two ≥ 2")));
    }
    let vk = read_vk_points(&mut r, np)?;
    r.checks = Checks::of(checks);
    r.gpu = subgroup_gpu_for(checks);
    let beta_g1 = r.point("beta_g1")?;
    let delta_g1 = r.point("delta_g1")?;
    let a_query = r.points("a_query", m)?;
    let b_g1_query = r.points("b_g1_query", m)?;
    let b_g2_query = r.points("b_g2_query", m)?;
    let h_query = r.points("h_query", n - 1)?;
    let l_query = r.points("l_query", m - np - 1)?;
    r.finish()?;
    let queries = KeyQueries {
        a_query,
        b_g1_query,
        b_g2_query,
        h_query,
        l_query,
    };
    Ok(ProvingKey::new(vk, beta_g1, delta_g1, queries))
}

fn write_vk_points<W: Write>(w: &mut HashingWriter<W>, vk: &VerifyingKey) -> io::Result<()> {
    w.g1s(&[vk.alpha_g1])?;
    w.g2s(&[vk.beta_g2, vk.gamma_g2, vk.delta_g2])?;
    w.g1s(&vk.ic)
}

fn read_vk_points<R: Read>(
    r: &mut HashingReader<'_, R>,
    num_public: usize,
) -> Result<VerifyingKey, FormatError> {
    Ok(VerifyingKey {
        alpha_g1: r.point("alpha_g1")?,
        beta_g2: r.point("beta_g2")?,
        gamma_g2: r.point("gamma_g2")?,
        delta_g2: r.point("delta_g2")?,
        ic: r.points("ic", num_public + 1)?,
    })
}

/// Sizes: num_public. Payload: α_g1, β_g2, γ_g2, δ_g2, `ic[num_public + 1]`.
pub fn write_verifying_key(w: impl Write, vk: &VerifyingKey) -> io::Result<()> {
    let np = vk
        .ic
        .len()
        .checked_sub(1)
        .ok_or_else(|| invalid_input("empty ic"))?;
    let mut w = HashingWriter::new(w, FileKind::VerifyingKey)?;
    w.u64(np)?;
    write_vk_points(&mut w, vk)?;
    w.finish()
}

/// Reads a verifying key, every point fully checked.
pub fn read_verifying_key(file: &str, r: impl Read) -> Result<VerifyingKey, FormatError> {
    let mut r = HashingReader::new(file, r, FileKind::VerifyingKey, None)?;
    let np = r.len("num_public")?;
    let vk = read_vk_points(&mut r, np)?;
    r.finish()?;
    Ok(vk)
}

/// Payload: A, B, C compressed ([`Proof::to_bytes`]).
pub fn write_proof(w: impl Write, proof: &Proof) -> io::Result<()> {
    let mut w = HashingWriter::new(w, FileKind::Proof)?;
    w.put(&proof.to_bytes())?;
    w.finish()
}

pub fn read_proof(file: &str, r: impl Read) -> Result<Proof, FormatError> {
    let mut r = HashingReader::new(file, r, FileKind::Proof, None)?;
    let bytes: [u8; Proof::BYTES] = r.array("proof")?;
    r.finish()?;
    // Decoded after the checksum so corruption reads as corruption, not as a bad point.
    let bad = |field: &str, source| FormatError::BadPoint {
        file: file.into(),
        field: field.into(),
        index: 0,
        source,
    };
    let g1 = |b: &[u8], field| {
        G1Affine::from_compressed(b.try_into().expect("48 bytes")).map_err(|e| bad(field, e))
    };
    Ok(Proof {
        a: g1(&bytes[..48], "proof.a")?,
        b: G2Affine::from_compressed(bytes[48..144].try_into().expect("96 bytes"))
            .map_err(|e| bad("proof.b", e))?,
        c: g1(&bytes[144..], "proof.c")?,
    })
}

/// Sizes: num_public, num_variables, rows, nnz(A), nnz(B), nnz(C). Payload per matrix:
/// `row_ptr[rows + 1]` (u64), `cols[nnz]` (u32), `vals[nnz]` (Fr).
pub fn write_r1cs(w: impl Write, r1cs: &R1cs) -> io::Result<()> {
    let mut w = HashingWriter::new(w, FileKind::R1cs)?;
    w.u64(r1cs.num_public())?;
    w.u64(r1cs.num_variables())?;
    w.u64(r1cs.num_constraints())?;
    let mats = [r1cs.a(), r1cs.b(), r1cs.c()];
    for m in mats {
        w.u64(m.nnz())?;
    }
    for m in mats {
        w.items(m.row_ptr(), |&p| (p as u64).to_le_bytes())?;
        w.items(m.cols(), |&c| c.to_le_bytes())?;
        let coeffs = m.coeffs();
        w.items(m.coeff_ids(), |&id| coeffs[id as usize].to_bytes_le())?;
    }
    w.finish()
}

pub fn read_r1cs(file: &str, r: impl Read) -> Result<R1cs, FormatError> {
    let mut r = HashingReader::new(file, r, FileKind::R1cs, None)?;
    let np = r.len("num_public")?;
    let m = r.len("num_variables")?;
    let rows = r.len("rows")?;
    let nnz = [r.len("nnz(A)")?, r.len("nnz(B)")?, r.len("nnz(C)")?];
    let mut mats = Vec::with_capacity(3);
    for (name, nnz) in ["A", "B", "C"].into_iter().zip(nnz) {
        let field = format!("{name}.row_ptr");
        let row_ptr = r
            .values(&field, rows + 1, |b| Some(u64::from_le_bytes(*b)))?
            .into_iter()
            .map(|p| usize::try_from(p).map_err(|_| r.invalid(&field, "out of range")))
            .collect::<Result<Vec<usize>, _>>()?;
        let cols = r.values(&format!("{name}.cols"), nnz, |b| {
            Some(u32::from_le_bytes(*b))
        })?;
        let vals = r.frs(&format!("{name}.vals"), nnz)?;
        mats.push(
            SparseMatrix::from_csr(m, row_ptr, cols, vals)
                .map_err(|e| r.invalid(&format!("matrix {name}"), e))?,
        );
    }
    r.finish()?;
    let c = mats.pop().expect("three matrices");
    let b = mats.pop().expect("three matrices");
    let a = mats.pop().expect("three matrices");
    R1cs::new(np, m, a, b, c).map_err(|source| FormatError::Circuit {
        file: file.into(),
        source,
    })
}

/// Sizes: num_public, length (including the leading one). Payload: the assignment.
pub fn write_witness(w: impl Write, witness: &Witness) -> io::Result<()> {
    let mut w = HashingWriter::new(w, FileKind::Witness)?;
    w.u64(witness.num_public())?;
    w.u64(witness.len())?;
    w.frs(witness.assignment())?;
    w.finish()
}

pub fn read_witness(file: &str, r: impl Read) -> Result<Witness, FormatError> {
    let mut r = HashingReader::new(file, r, FileKind::Witness, None)?;
    let np = r.len("num_public")?;
    let len = r.len("witness length")?;
    let z = r.frs("witness", len)?;
    r.finish()?;
    Witness::from_assignment(np, z)
        .map_err(|e| FormatError::invalid(file, "witness", e.to_string()))
}
