//! A bounds-checked cursor over a byte slice (a memory-mapped file or a buffer) whose errors
//! name the file, the field and the offset.

use crate::FormatError;

#[derive(Debug, Clone)]
pub(crate) struct Cursor<'a> {
    pub(crate) file: &'a str,
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(file: &'a str, bytes: &'a [u8]) -> Self {
        Self {
            file,
            bytes,
            pos: 0,
        }
    }

    pub(crate) fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    /// The next `n` bytes, or a truncation error naming `field`.
    pub(crate) fn take(&mut self, n: usize, field: &str) -> Result<&'a [u8], FormatError> {
        if self.remaining() < n {
            return Err(FormatError::Truncated {
                file: self.file.to_string(),
                field: field.to_string(),
                offset: self.pos,
                needed: n,
                available: self.remaining(),
            });
        }
        let out = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    /// `count` records of `size` bytes each, checked for overflow and truncation.
    pub(crate) fn take_records(
        &mut self,
        count: usize,
        size: usize,
        field: &str,
    ) -> Result<&'a [u8], FormatError> {
        let n = count.checked_mul(size).ok_or_else(|| {
            FormatError::invalid(self.file, field, format!("{count} records overflow"))
        })?;
        self.take(n, field)
    }

    pub(crate) fn array<const N: usize>(&mut self, field: &str) -> Result<[u8; N], FormatError> {
        let b = self.take(N, field)?;
        Ok(b.try_into().expect("take returned N bytes"))
    }

    pub(crate) fn u32_be(&mut self, field: &str) -> Result<u32, FormatError> {
        Ok(u32::from_be_bytes(self.array(field)?))
    }

    pub(crate) fn u32_le(&mut self, field: &str) -> Result<u32, FormatError> {
        Ok(u32::from_le_bytes(self.array(field)?))
    }

    pub(crate) fn u64_le(&mut self, field: &str) -> Result<u64, FormatError> {
        Ok(u64::from_le_bytes(self.array(field)?))
    }

    /// Fails unless every byte was consumed.
    pub(crate) fn finish(&self, last_field: &str) -> Result<(), FormatError> {
        if self.remaining() == 0 {
            Ok(())
        } else {
            Err(FormatError::TrailingBytes {
                file: self.file.to_string(),
                field: last_field.to_string(),
                extra: self.remaining(),
            })
        }
    }
}
