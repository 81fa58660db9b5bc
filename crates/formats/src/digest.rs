//! File digests for trusted-by-digest loading.

use blake2::{Blake2b512, Digest as _};
use sha2::Sha256;

use crate::FormatError;

/// A caller-given digest of a whole file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Digest {
    Sha256([u8; 32]),
    /// BLAKE2b-512, or a prefix of it of at least 16 bytes: Filecoin's `parameters.json`
    /// publishes the first 16 bytes (32 hex digits) of each file's BLAKE2b-512.
    Blake2b(Vec<u8>),
    /// BLAKE3-256: the one digest whose single-threaded hash (SIMD across its chunks, several
    /// GB/s) keeps up with a many-core decode; SHA-256 (~1.5-2 GB/s with SHA extensions) and
    /// BLAKE2b (~1 GB/s) bound a trusted load to one core's hash speed.
    Blake3([u8; 32]),
}

impl Digest {
    /// Parses `sha256:HEX`, `blake2b:HEX` or `blake3:HEX` (hex of 32 bytes for SHA-256 and
    /// BLAKE3, 16..=64 bytes for BLAKE2b).
    pub fn parse(s: &str) -> Result<Self, String> {
        let (alg, hex) = s.split_once(':').ok_or_else(|| {
            format!("digest {s:?} is not ALGORITHM:HEX (sha256, blake2b or blake3)")
        })?;
        let bytes = from_hex(hex).ok_or_else(|| format!("digest {hex:?} is not hex"))?;
        match alg {
            "sha256" => bytes
                .try_into()
                .map(Digest::Sha256)
                .map_err(|b: Vec<u8>| format!("a SHA-256 digest has 32 bytes, got {}", b.len())),
            "blake3" => bytes
                .try_into()
                .map(Digest::Blake3)
                .map_err(|b: Vec<u8>| format!("a BLAKE3 digest has 32 bytes, got {}", b.len())),
            "blake2b" if (16..=64).contains(&bytes.len()) => Ok(Digest::Blake2b(bytes)),
            "blake2b" => Err(format!(
                "a BLAKE2b digest (or prefix) has 16 to 64 bytes, got {}",
                bytes.len()
            )),
            other => Err(format!(
                "unknown digest algorithm {other:?} (sha256, blake2b, blake3)"
            )),
        }
    }

    pub fn algorithm(&self) -> &'static str {
        match self {
            Digest::Sha256(_) => "SHA-256",
            Digest::Blake2b(_) => "BLAKE2b-512",
            Digest::Blake3(_) => "BLAKE3",
        }
    }

    /// The digest of `bytes` by the same algorithm (full length).
    pub fn compute_like(&self, bytes: &[u8]) -> Vec<u8> {
        match self {
            Digest::Sha256(_) => sha256_chunked(bytes).to_vec(),
            Digest::Blake2b(_) => {
                let mut h = Blake2b512::new();
                for c in bytes.chunks(1 << 20) {
                    h.update(c);
                }
                h.finalize().to_vec()
            }
            Digest::Blake3(_) => blake3::hash(bytes).as_bytes().to_vec(),
        }
    }

    /// An incremental hasher of this digest's algorithm.
    pub(crate) fn hasher(&self) -> Hasher {
        match self {
            Digest::Sha256(_) => Hasher::Sha256(Sha256::new()),
            Digest::Blake2b(_) => Hasher::Blake2b(Blake2b512::new()),
            Digest::Blake3(_) => Hasher::Blake3(Box::new(blake3::Hasher::new())),
        }
    }

    /// Checks `bytes` against this digest.
    pub fn check(&self, file: &str, bytes: &[u8]) -> Result<(), FormatError> {
        self.check_computed(file, &self.compute_like(bytes))
    }

    /// Checks an already computed full digest against this one.
    pub(crate) fn check_computed(&self, file: &str, found: &[u8]) -> Result<(), FormatError> {
        let expected: &[u8] = match self {
            Digest::Sha256(d) => d,
            Digest::Blake2b(d) => d,
            Digest::Blake3(d) => d,
        };
        if found.starts_with(expected) {
            Ok(())
        } else {
            Err(FormatError::DigestMismatch {
                file: file.to_string(),
                algorithm: self.algorithm(),
                expected: to_hex(expected),
                found: to_hex(&found[..expected.len()]),
            })
        }
    }
}

pub(crate) enum Hasher {
    Sha256(Sha256),
    Blake2b(Blake2b512),
    Blake3(Box<blake3::Hasher>),
}

impl Hasher {
    pub(crate) fn update(&mut self, b: &[u8]) {
        match self {
            Hasher::Sha256(h) => h.update(b),
            Hasher::Blake2b(h) => h.update(b),
            Hasher::Blake3(h) => {
                h.update(b);
            }
        }
    }

    pub(crate) fn finish(self) -> Vec<u8> {
        match self {
            Hasher::Sha256(h) => h.finalize().to_vec(),
            Hasher::Blake2b(h) => h.finalize().to_vec(),
            Hasher::Blake3(h) => h.finalize().as_bytes().to_vec(),
        }
    }
}

fn sha256_chunked(bytes: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    for c in bytes.chunks(1 << 20) {
        h.update(c);
    }
    h.finalize().into()
}

pub fn to_hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn from_hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) || !s.is_ascii() {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok())
        .collect()
}
