//! One error type for every reader and writer: each variant names the file and the field.

use std::path::PathBuf;

use cuzk_field::DecodeError;

use crate::cuzk::FileKind;

/// Why a file could not be read, written or used.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    #[error("{file}: {source}")]
    Io {
        file: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{file}: truncated at {field}: needs {needed} more bytes at offset {offset}, the file has {available}"
    )]
    Truncated {
        file: String,
        field: String,
        offset: usize,
        needed: usize,
        available: usize,
    },
    #[error("{file}: {extra} bytes after the last field ({field})")]
    TrailingBytes {
        file: String,
        field: String,
        extra: usize,
    },
    #[error("{file}: {field}[{index}]: {source}")]
    BadPoint {
        file: String,
        field: String,
        index: usize,
        #[source]
        source: DecodeError,
    },
    #[error("{file}: {field}[{index}] is the point at infinity, which this format never stores")]
    IdentityPoint {
        file: String,
        field: String,
        index: usize,
    },
    #[error("{file}: {field}[{index}] is not a canonical field element")]
    BadScalar {
        file: String,
        field: String,
        index: usize,
    },
    #[error("{file}: not a {expected} file (magic {found:?})")]
    WrongMagic {
        file: String,
        expected: &'static str,
        found: String,
    },
    #[error("{file}: holds a cuzk {}, expected a cuzk {expected}", kind_name(*.found))]
    WrongKind {
        file: String,
        expected: FileKind,
        found: u8,
    },
    #[error("{file}: version {found} of the {kind} format is not supported (max {max})")]
    UnsupportedVersion {
        file: String,
        kind: &'static str,
        found: u32,
        max: u32,
    },
    #[error("{file}: {field} is not BLS12-381's {which} (wrong curve: {found})")]
    WrongCurve {
        file: String,
        field: String,
        which: &'static str,
        found: String,
    },
    #[error("{file}: section {section} ({name}) is missing")]
    MissingSection {
        file: String,
        section: u32,
        name: &'static str,
    },
    #[error("{file}: section {section} ({name}) appears more than once")]
    DuplicateSection {
        file: String,
        section: u32,
        name: &'static str,
    },
    #[error("{file}: section {section} ({name}) has {found} bytes, expected {expected}")]
    SectionSize {
        file: String,
        section: u32,
        name: &'static str,
        expected: u64,
        found: u64,
    },
    #[error("{file}: {field}: {reason}")]
    Invalid {
        file: String,
        field: String,
        reason: String,
    },
    #[error("{file} does not match {other}: {field} is {found}, expected {expected}")]
    Mismatch {
        file: String,
        other: String,
        field: String,
        expected: String,
        found: String,
    },
    #[error(
        "{file}: {algorithm} digest is {found}, expected {expected}: the file is not the trusted one"
    )]
    DigestMismatch {
        file: String,
        algorithm: &'static str,
        expected: String,
        found: String,
    },
    #[error(
        "{file}: checksum mismatch: the file is corrupted (its BLAKE3 differs from the one it ends with)"
    )]
    ChecksumMismatch { file: String },
    #[error("{file}: JSON: {reason}")]
    Json { file: String, reason: String },
    #[error("{file}: {source}")]
    Circuit {
        file: String,
        #[source]
        source: cuzk_groth16::R1csError,
    },
    #[error("{file}: proving failed: {reason}")]
    Prove { file: String, reason: String },
}

fn kind_name(byte: u8) -> String {
    match FileKind::from_byte(byte) {
        Some(k) => k.to_string(),
        None => format!("file of unknown kind {byte}"),
    }
}

impl FormatError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            file: path.into().display().to_string(),
            source,
        }
    }

    pub(crate) fn invalid(file: &str, field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::Invalid {
            file: file.to_string(),
            field: field.into(),
            reason: reason.into(),
        }
    }

    pub(crate) fn mismatch(
        file: &str,
        other: &str,
        field: impl Into<String>,
        expected: impl ToString,
        found: impl ToString,
    ) -> Self {
        Self::Mismatch {
            file: file.to_string(),
            other: other.to_string(),
            field: field.into(),
            expected: expected.to_string(),
            found: found.to_string(),
        }
    }
}
