//! A bounds-checked, zero-copy view of a byte buffer that remembers its absolute offset, so
//! every error can name the byte where decoding stopped.

use crate::error::{ErrorKind, Result, WireError};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bytes<'a> {
    data: &'a [u8],
    offset: usize,
}

impl<'a> Bytes<'a> {
    pub const fn new(data: &'a [u8]) -> Self {
        Self { data, offset: 0 }
    }

    pub const fn at(data: &'a [u8], offset: usize) -> Self {
        Self { data, offset }
    }

    pub const fn data(&self) -> &'a [u8] {
        self.data
    }

    /// Absolute offset of the first byte.
    pub const fn offset(&self) -> usize {
        self.offset
    }

    pub const fn len(&self) -> usize {
        self.data.len()
    }

    pub const fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    fn truncated(&self, needed: usize, header: &'static str, field: &'static str) -> WireError {
        WireError::new(
            header,
            field,
            self.offset + self.data.len(),
            ErrorKind::Truncated {
                needed,
                available: self.data.len(),
            },
        )
    }

    /// The first `N` bytes as an array.
    #[inline]
    pub fn array<const N: usize>(
        &self,
        header: &'static str,
        field: &'static str,
    ) -> Result<&'a [u8; N]> {
        self.data
            .first_chunk::<N>()
            .ok_or_else(|| self.truncated(N, header, field))
    }

    /// Splits off the first `n` bytes.
    #[inline]
    pub fn split(
        &self,
        n: usize,
        header: &'static str,
        field: &'static str,
    ) -> Result<(Bytes<'a>, Bytes<'a>)> {
        if n > self.data.len() {
            return Err(self.truncated(n, header, field));
        }
        let (a, b) = self.data.split_at(n);
        Ok((Bytes::at(a, self.offset), Bytes::at(b, self.offset + n)))
    }

    /// Skips `n` bytes.
    #[inline]
    pub fn skip(&self, n: usize, header: &'static str, field: &'static str) -> Result<Bytes<'a>> {
        self.split(n, header, field).map(|(_, rest)| rest)
    }

    /// The first `n` bytes, or everything when shorter (for truncated inner packets).
    pub fn prefix(&self, n: usize) -> Bytes<'a> {
        Bytes::at(&self.data[..n.min(self.data.len())], self.offset)
    }
}

#[inline]
pub(crate) fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

#[inline]
pub(crate) fn be24(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([0, b[at], b[at + 1], b[at + 2]])
}

#[inline]
pub(crate) fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

#[inline]
pub(crate) fn be64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_carry_absolute_offsets() {
        let buf = [0u8; 10];
        let b = Bytes::new(&buf).skip(4, "h", "f").unwrap();
        assert_eq!(b.offset(), 4);
        let err = b.array::<8>("hdr", "field").unwrap_err();
        assert_eq!(err.offset, 10);
        assert_eq!(
            err.kind,
            ErrorKind::Truncated {
                needed: 8,
                available: 6
            }
        );
        assert_eq!(
            err.to_string(),
            "hdr.field at byte 10: truncated (need 8 bytes, 6 available)"
        );
    }
}
