//! Groth16 files: cuzk's own, and those made by other tools, for cuzk to prove with and to
//! verify, and the same files written back so that those tools accept what cuzk makes.
//!
//! - [`cuzk`]: cuzk's own versioned, BLAKE3-sealed format for proving and verifying keys,
//!   proofs, circuits and witnesses (streamed, point checks selectable: [`PointChecks`]).
//! - [`bellperson`]: `Parameters` (streamed, point checks selectable: [`PointChecks`]),
//!   `VerifyingKey`, the 192-byte `Proof`; density-filtered queries scattered to cuzk's
//!   one-entry-per-variable [`cuzk_groth16::ProvingKey`].
//! - [`iden3`]: circom's `.r1cs` and the `.wtns` witness (iden3's section container).
//! - [`zkey`]: snarkjs's Groth16 `.zkey` and a prover for it over snarkjs's own domain
//!   ([`ntt::SnarkjsDomain`]).
//! - [`snarkjs`]: `proof.json`, `public.json`, `verification_key.json`.
//!
//! Every error is a [`FormatError`] naming the file and the field; every reader of keys takes
//! the one [`PointChecks`].

#![forbid(unsafe_code)]

pub mod bellperson;
mod cursor;
pub mod cuzk;
mod digest;
mod error;
pub mod iden3;
pub mod ntt;
mod points;
pub mod snarkjs;
mod stream;
pub mod zkey;

pub use bellperson::{BpParameters, BpVerifyingKey};
pub use digest::{Digest, to_hex};
pub use error::FormatError;
pub use iden3::{CircomR1cs, Wtns};
pub use points::PointChecks;
pub use zkey::Zkey;

/// What a key file is, from its first bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyKind {
    /// cuzk's own format ([`cuzk`]).
    Cuzk,
    /// snarkjs's zkey.
    Zkey,
    /// Anything else: taken for bellperson parameters, which have no magic.
    Bellperson,
}

/// Detects the format of a proving key file from its first bytes.
pub fn detect_key(path: &std::path::Path) -> Result<KeyKind, FormatError> {
    use std::io::Read;
    let mut f = std::fs::File::open(path).map_err(|e| FormatError::io(path, e))?;
    let mut head = [0u8; 8];
    let mut got = 0;
    while got < head.len() {
        match f.read(&mut head[got..]) {
            Ok(0) => break,
            Ok(k) => got += k,
            Err(e) => return Err(FormatError::io(path, e)),
        }
    }
    Ok(if head[..got].starts_with(b"zkey") {
        KeyKind::Zkey
    } else if head[..got].starts_with(&cuzk::MAGIC) {
        KeyKind::Cuzk
    } else {
        KeyKind::Bellperson
    })
}
