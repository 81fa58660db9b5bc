//! The cuzk file format for proving keys, verifying keys, proofs, circuits and witnesses.
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
//! held twice; vectors are read in chunks and their points decoded and checked (canonical,
//! on curve, in the prime-order subgroup) in parallel with rayon, and memory grows only as
//! data actually arrives, so a lying size field cannot cause a huge allocation.

use std::io::{self, BufReader, BufWriter, Read, Write};
use std::sync::atomic::{AtomicUsize, Ordering};

use cuzk_field::{DecodeError, Fr, G1Affine, G2Affine};
use rayon::prelude::*;

use crate::keys::{Proof, ProvingKey, VerifyingKey};
use crate::r1cs::{R1cs, SparseMatrix, Witness};

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

/// How much of each point a proving-key reader checks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PointChecks {
    /// Canonical coordinates, on the curve, and in the prime-order subgroup.
    #[default]
    Full,
    /// Canonical and on the curve, no subgroup check (the dominant cost of loading: ~10× faster
    /// on 2 cores). For keys from a trusted source whose integrity the checksum covers: a bad
    /// proving key can only make the prover's own proofs fail or leak, never make the verifier
    /// accept a false statement.
    OnCurve,
}

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

/// Why a file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    #[error("I/O error: {0}")]
    Io(#[source] io::Error),
    #[error("file is truncated")]
    Truncated,
    #[error("not a cuzk file: magic {0:02x?}")]
    BadMagic([u8; 4]),
    #[error("file holds kind {found}, expected {expected:?}")]
    WrongKind { expected: FileKind, found: u8 },
    #[error("format version {found} is not supported (this build reads version {supported})")]
    UnsupportedVersion { found: u32, supported: u32 },
    #[error("checksum mismatch: the file is corrupted")]
    ChecksumMismatch,
    #[error("{section}[{index}]: invalid point: {error}")]
    InvalidPoint {
        section: &'static str,
        index: usize,
        error: DecodeError,
    },
    #[error("{section}[{index}]: field element is not canonical")]
    InvalidScalar { section: &'static str, index: usize },
    #[error("inconsistent contents: {0}")]
    Inconsistent(String),
}

impl From<io::Error> for FormatError {
    fn from(e: io::Error) -> Self {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            Self::Truncated
        } else {
            Self::Io(e)
        }
    }
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

/// A reader that hashes everything read through it.
struct HashingReader<R: Read> {
    inner: BufReader<R>,
    hasher: blake3::Hasher,
    checks: PointChecks,
}

impl<R: Read> HashingReader<R> {
    fn new(inner: R, kind: FileKind) -> Result<Self, FormatError> {
        let mut r = Self {
            inner: BufReader::with_capacity(1 << 20, inner),
            hasher: blake3::Hasher::new(),
            checks: PointChecks::Full,
        };
        let magic: [u8; 4] = r.array()?;
        if magic != MAGIC {
            return Err(FormatError::BadMagic(magic));
        }
        let [found] = r.array()?;
        if found != kind as u8 {
            return Err(FormatError::WrongKind {
                expected: kind,
                found,
            });
        }
        let version = u32::from_le_bytes(r.array()?);
        if version != FORMAT_VERSION {
            return Err(FormatError::UnsupportedVersion {
                found: version,
                supported: FORMAT_VERSION,
            });
        }
        Ok(r)
    }

    fn take(&mut self, buf: &mut [u8]) -> Result<(), FormatError> {
        self.inner.read_exact(buf)?;
        self.hasher.update(&*buf);
        Ok(())
    }

    fn array<const B: usize>(&mut self) -> Result<[u8; B], FormatError> {
        let mut b = [0u8; B];
        self.take(&mut b)?;
        Ok(b)
    }

    /// A length, bounded by [`MAX_LEN`].
    fn len(&mut self, what: &str) -> Result<usize, FormatError> {
        let v = u64::from_le_bytes(self.array()?);
        if v > MAX_LEN {
            return Err(FormatError::Inconsistent(format!(
                "{what} = {v} is out of range"
            )));
        }
        usize::try_from(v)
            .map_err(|_| FormatError::Inconsistent(format!("{what} = {v} is out of range")))
    }

    /// `count` items of `B` bytes each, decoded in parallel chunk by chunk; the first bad item
    /// (lowest index) is reported. Reading the next chunk, hashing this one and decoding it
    /// overlap, so a load runs at the speed of the slowest of the three, not of their sum.
    fn items<T: Send + Default, E: Send, const B: usize>(
        &mut self,
        count: usize,
        decode: impl Fn(&[u8; B]) -> Result<T, E> + Sync,
        error: impl Fn(usize, E) -> FormatError,
    ) -> Result<Vec<T>, FormatError> {
        let per = (CHUNK_BYTES / B).max(1);
        let mut out = Vec::new();
        let mut cur = vec![0u8; count.min(per) * B];
        let mut next = vec![0u8; (count - count.min(per)).min(per) * B];
        self.inner.read_exact(&mut cur)?;
        let mut done = 0;
        while done < count {
            let len = (count - done).min(per);
            let next_len = (count - done - len).min(per);
            let bytes = &cur[..len * B];
            // Memory grows only as data arrives: a lying count fails at its first short read.
            out.try_reserve(len)
                .map_err(|_| inconsistent(format!("cannot hold {count} items")))?;
            let first_bad = AtomicUsize::new(usize::MAX);
            let Self { inner, hasher, .. } = self;
            let decode_into = |out: &mut Vec<T>| {
                out.par_extend(bytes.par_chunks_exact(B).enumerate().map(|(i, b)| {
                    decode(b.try_into().expect("chunks of B bytes")).unwrap_or_else(|_| {
                        first_bad.fetch_min(i, Ordering::Relaxed);
                        T::default()
                    })
                }))
            };
            // The reader may not be `Send`, so it stays on this thread.
            let read = std::thread::scope(|s| {
                let work = s
                    .spawn(|| rayon::join(|| hasher.update_rayon(bytes), || decode_into(&mut out)));
                let read = inner.read_exact(&mut next[..next_len * B]);
                work.join().map(|_| read)
            })
            .map_err(|_| inconsistent("a decoding thread panicked"))?;
            let bad = first_bad.into_inner();
            if bad != usize::MAX {
                let b = bytes[bad * B..(bad + 1) * B].try_into().expect("B bytes");
                if let Err(e) = decode(b) {
                    return Err(error(done + bad, e));
                }
            }
            read?;
            std::mem::swap(&mut cur, &mut next);
            done += len;
        }
        Ok(out)
    }

    fn g1s(&mut self, section: &'static str, count: usize) -> Result<Vec<G1Affine>, FormatError> {
        let decode = match self.checks {
            PointChecks::Full => G1Affine::from_uncompressed,
            PointChecks::OnCurve => G1Affine::from_uncompressed_unchecked,
        };
        self.items(count, decode, |index, error| FormatError::InvalidPoint {
            section,
            index,
            error,
        })
    }

    fn g2s(&mut self, section: &'static str, count: usize) -> Result<Vec<G2Affine>, FormatError> {
        let decode = match self.checks {
            PointChecks::Full => G2Affine::from_uncompressed,
            PointChecks::OnCurve => G2Affine::from_uncompressed_unchecked,
        };
        self.items(count, decode, |index, error| FormatError::InvalidPoint {
            section,
            index,
            error,
        })
    }

    fn g1(&mut self, section: &'static str) -> Result<G1Affine, FormatError> {
        Ok(self.g1s(section, 1)?[0])
    }

    fn g2(&mut self, section: &'static str) -> Result<G2Affine, FormatError> {
        Ok(self.g2s(section, 1)?[0])
    }

    fn frs(&mut self, section: &'static str, count: usize) -> Result<Vec<Fr>, FormatError> {
        self.items(count, Fr::from_bytes_le, |index, _| {
            FormatError::InvalidScalar { section, index }
        })
    }

    /// Reads the stored digest and compares it with the hash of everything before it.
    fn finish(mut self) -> Result<(), FormatError> {
        let computed = self.hasher.finalize();
        let mut stored = [0u8; 32];
        self.inner.read_exact(&mut stored)?;
        if computed == stored {
            Ok(())
        } else {
            Err(FormatError::ChecksumMismatch)
        }
    }
}

fn inconsistent(msg: impl Into<String>) -> FormatError {
    FormatError::Inconsistent(msg.into())
}

/// Sizes: num_variables m, num_public, domain size n. Payload: α_g1, β_g2, γ_g2, δ_g2,
/// `ic[num_public + 1]`, β_g1, δ_g1, `a[m]`, `b_g1[m]`, `b_g2[m]`, `h[n − 1]`,
/// `l[m − num_public − 1]`.
pub fn write_proving_key(w: impl Write, pk: &ProvingKey) -> Result<(), FormatError> {
    if pk.held.is_some() {
        return Err(inconsistent(
            "the key's points are held by a GPU only; there is no host copy to write",
        ));
    }
    let m = pk.a_query.len();
    let n = pk.h_query.len() + 1;
    let np = pk
        .vk
        .ic
        .len()
        .checked_sub(1)
        .ok_or_else(|| inconsistent("empty ic"))?;
    if pk.b_g1_query.len() != m || pk.b_g2_query.len() != m || pk.l_query.len() + np + 1 != m {
        return Err(inconsistent("proving key queries have different lengths"));
    }
    let mut w = HashingWriter::new(w, FileKind::ProvingKey)?;
    w.u64(m)?;
    w.u64(np)?;
    w.u64(n)?;
    write_vk_points(&mut w, &pk.vk)?;
    w.g1s(&[pk.beta_g1, pk.delta_g1])?;
    w.g1s(&pk.a_query)?;
    w.g1s(&pk.b_g1_query)?;
    w.g2s(&pk.b_g2_query)?;
    w.g1s(&pk.h_query)?;
    w.g1s(&pk.l_query)?;
    Ok(w.finish()?)
}

/// Reads a proving key with full point checks.
pub fn read_proving_key(r: impl Read) -> Result<ProvingKey, FormatError> {
    read_proving_key_with(r, PointChecks::Full)
}

/// Reads a proving key with the given point checks (the verifying-key part is always fully
/// checked).
pub fn read_proving_key_with(r: impl Read, checks: PointChecks) -> Result<ProvingKey, FormatError> {
    let mut r = HashingReader::new(r, FileKind::ProvingKey)?;
    let m = r.len("num_variables")?;
    let np = r.len("num_public")?;
    let n = r.len("domain size")?;
    if np + 1 > m {
        return Err(inconsistent(format!(
            "{np} public inputs but {m} variables"
        )));
    }
    if !n.is_power_of_two() || n < 2 {
        return Err(inconsistent(format!(
            "domain size {n} is not a power of two ≥ 2"
        )));
    }
    let vk = read_vk_points(&mut r, np)?;
    r.checks = checks;
    let beta_g1 = r.g1("beta_g1")?;
    let delta_g1 = r.g1("delta_g1")?;
    let a_query = r.g1s("a_query", m)?;
    let b_g1_query = r.g1s("b_g1_query", m)?;
    let b_g2_query = r.g2s("b_g2_query", m)?;
    let h_query = r.g1s("h_query", n - 1)?;
    let l_query = r.g1s("l_query", m - np - 1)?;
    r.finish()?;
    Ok(ProvingKey {
        vk,
        beta_g1,
        delta_g1,
        a_query,
        b_g1_query,
        b_g2_query,
        h_query,
        l_query,
        held: None,
    })
}

fn write_vk_points<W: Write>(w: &mut HashingWriter<W>, vk: &VerifyingKey) -> io::Result<()> {
    w.g1s(&[vk.alpha_g1])?;
    w.g2s(&[vk.beta_g2, vk.gamma_g2, vk.delta_g2])?;
    w.g1s(&vk.ic)
}

fn read_vk_points<R: Read>(
    r: &mut HashingReader<R>,
    num_public: usize,
) -> Result<VerifyingKey, FormatError> {
    Ok(VerifyingKey {
        alpha_g1: r.g1("alpha_g1")?,
        beta_g2: r.g2("beta_g2")?,
        gamma_g2: r.g2("gamma_g2")?,
        delta_g2: r.g2("delta_g2")?,
        ic: r.g1s("ic", num_public + 1)?,
    })
}

/// Sizes: num_public. Payload: α_g1, β_g2, γ_g2, δ_g2, `ic[num_public + 1]`.
pub fn write_verifying_key(w: impl Write, vk: &VerifyingKey) -> Result<(), FormatError> {
    let np = vk
        .ic
        .len()
        .checked_sub(1)
        .ok_or_else(|| inconsistent("empty ic"))?;
    let mut w = HashingWriter::new(w, FileKind::VerifyingKey)?;
    w.u64(np)?;
    write_vk_points(&mut w, vk)?;
    Ok(w.finish()?)
}

pub fn read_verifying_key(r: impl Read) -> Result<VerifyingKey, FormatError> {
    let mut r = HashingReader::new(r, FileKind::VerifyingKey)?;
    let np = r.len("num_public")?;
    let vk = read_vk_points(&mut r, np)?;
    r.finish()?;
    Ok(vk)
}

/// Payload: A, B, C compressed ([`Proof::to_bytes`]).
pub fn write_proof(w: impl Write, proof: &Proof) -> Result<(), FormatError> {
    let mut w = HashingWriter::new(w, FileKind::Proof)?;
    w.put(&proof.to_bytes())?;
    Ok(w.finish()?)
}

pub fn read_proof(r: impl Read) -> Result<Proof, FormatError> {
    let mut r = HashingReader::new(r, FileKind::Proof)?;
    let bytes: [u8; Proof::BYTES] = r.array()?;
    r.finish()?;
    // Decode after the checksum so corruption reads as corruption, not as a bad point.
    let g1 = |b: &[u8], section| {
        G1Affine::from_compressed(b.try_into().expect("48 bytes")).map_err(|error| {
            FormatError::InvalidPoint {
                section,
                index: 0,
                error,
            }
        })
    };
    Ok(Proof {
        a: g1(&bytes[..48], "proof.a")?,
        b: G2Affine::from_compressed(bytes[48..144].try_into().expect("96 bytes")).map_err(
            |error| FormatError::InvalidPoint {
                section: "proof.b",
                index: 0,
                error,
            },
        )?,
        c: g1(&bytes[144..], "proof.c")?,
    })
}

/// Sizes: num_public, num_variables, rows, nnz(A), nnz(B), nnz(C). Payload per matrix:
/// `row_ptr[rows + 1]` (u64), `cols[nnz]` (u32), `vals[nnz]` (Fr).
pub fn write_r1cs(w: impl Write, r1cs: &R1cs) -> Result<(), FormatError> {
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
        w.frs(m.vals())?;
    }
    Ok(w.finish()?)
}

pub fn read_r1cs(r: impl Read) -> Result<R1cs, FormatError> {
    let mut r = HashingReader::new(r, FileKind::R1cs)?;
    let np = r.len("num_public")?;
    let m = r.len("num_variables")?;
    let rows = r.len("rows")?;
    let nnz = [r.len("nnz(A)")?, r.len("nnz(B)")?, r.len("nnz(C)")?];
    let mut mats = Vec::with_capacity(3);
    for (name, nnz) in ["A", "B", "C"].into_iter().zip(nnz) {
        let row_ptr: Vec<u64> = r.items(
            rows + 1,
            |b| Ok::<_, ()>(u64::from_le_bytes(*b)),
            |_, ()| inconsistent("unreachable"),
        )?;
        let row_ptr = row_ptr
            .into_iter()
            .map(|p| usize::try_from(p).map_err(|_| inconsistent("row pointer out of range")))
            .collect::<Result<Vec<usize>, _>>()?;
        let cols: Vec<u32> = r.items(
            nnz,
            |b| Ok::<_, ()>(u32::from_le_bytes(*b)),
            |_, ()| inconsistent("unreachable"),
        )?;
        let vals = r.frs("r1cs values", nnz)?;
        mats.push(
            SparseMatrix::from_csr(m, row_ptr, cols, vals)
                .map_err(|e| inconsistent(format!("matrix {name}: {e}")))?,
        );
    }
    r.finish()?;
    let c = mats.pop().expect("three matrices");
    let b = mats.pop().expect("three matrices");
    let a = mats.pop().expect("three matrices");
    R1cs::new(np, m, a, b, c).map_err(|e| inconsistent(e.to_string()))
}

/// Sizes: num_public, length (including the leading one). Payload: the assignment.
pub fn write_witness(w: impl Write, witness: &Witness) -> Result<(), FormatError> {
    let mut w = HashingWriter::new(w, FileKind::Witness)?;
    w.u64(witness.num_public())?;
    w.u64(witness.len())?;
    w.frs(witness.assignment())?;
    Ok(w.finish()?)
}

pub fn read_witness(r: impl Read) -> Result<Witness, FormatError> {
    let mut r = HashingReader::new(r, FileKind::Witness)?;
    let np = r.len("num_public")?;
    let len = r.len("witness length")?;
    let z = r.frs("witness", len)?;
    r.finish()?;
    Witness::from_assignment(np, z).map_err(|e| inconsistent(e.to_string()))
}
