use kplane_model::{HopField, HopRecord, MAX_HOPS};

use super::IntVersion;
use crate::bytes::Bytes;
use crate::error::{ErrorKind, Result, WireError};

/// Wire width in bytes of instruction bit `bit` (0 = MSB, mask 0x8000) for `version`.
pub const fn instruction_width(version: IntVersion, bit: u32) -> usize {
    match (version, bit) {
        (IntVersion::V2, 4..=6) => 8,
        (IntVersion::V10, 6) => 8,
        _ => 4,
    }
}

/// Bytes of baseline metadata per hop: every set bit except the checksum complement (bit 15)
/// is one word, plus a second word for each 8-byte item of the version (v2.x: timestamps and
/// L2 ids, bits 4-6; v1.0: L2 ids, bit 6).
#[inline]
pub fn baseline_len(version: IntVersion, bitmap: u16) -> usize {
    let wide = match version {
        IntVersion::V05 => 0,
        IntVersion::V10 => 0x0200,
        IntVersion::V2 => 0x0E00,
    };
    4 * (ones(bitmap & 0xFFFE) + ones(bitmap & wide))
}

/// `len / stride` when `stride` divides `len` exactly, else `None` — by multiplication for
/// the strides INT can have (whole words, Hop ML ≤ 31): a hardware divide costs more than
/// decoding a hop, and every report needs this.
#[inline(always)]
pub(crate) fn exact_hops(len: usize, stride: usize) -> Option<usize> {
    const RECIP: [u64; 32] = {
        let mut t = [0u64; 32];
        let mut d = 1;
        while d < 32 {
            t[d] = (1u64 << 32).div_ceil(d as u64);
            d += 1;
        }
        t
    };
    let (words, ml) = (len / 4, stride / 4);
    if len.is_multiple_of(4) && stride.is_multiple_of(4) && (1..32).contains(&ml) && words < 1 << 16
    {
        // Exact for words < 2^16: the reciprocal's error stays below 1/d.
        let q = ((words as u64 * RECIP[ml]) >> 32) as usize;
        return (q * ml == words).then_some(q);
    }
    if stride == 0 || !len.is_multiple_of(stride) {
        return None;
    }
    Some(len / stride)
}

/// Set bits of a bitmap by table: the portable x86-64 baseline has no POPCNT instruction,
/// and this runs for every report.
#[inline(always)]
fn ones(x: u16) -> usize {
    const POP8: [u8; 256] = {
        let mut t = [0u8; 256];
        let mut i = 0;
        while i < 256 {
            t[i] = (i as u8).count_ones() as u8;
            i += 1;
        }
        t
    };
    usize::from(POP8[usize::from(x >> 8)] + POP8[usize::from(x & 0xFF)])
}

/// The INT metadata stack: `count` hops of `stride` bytes, newest (closest to the sink) first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HopStack<'a> {
    pub version: IntVersion,
    pub bitmap: u16,
    /// Bytes per hop (Hop ML × 4, or InsCnt × 4 in v0.5).
    pub stride: usize,
    data: Bytes<'a>,
}

impl<'a> HopStack<'a> {
    pub const HEADER: &'static str = "int_stack";

    /// Validates the stack against the instruction bitmap and the per-hop length.
    pub fn new(version: IntVersion, bitmap: u16, stride: usize, data: Bytes<'a>) -> Result<Self> {
        let need = baseline_len(version, bitmap) + if bitmap & 1 != 0 { 4 } else { 0 };
        if !data.is_empty() && (stride == 0 || need > stride) {
            return Err(WireError::new(
                Self::HEADER,
                "hop_ml",
                data.offset(),
                ErrorKind::BadLength {
                    value: stride,
                    expected: "per-hop length covering the instruction bitmap",
                },
            ));
        }
        if stride != 0 && !data.len().is_multiple_of(stride) {
            return Err(WireError::new(
                Self::HEADER,
                "length",
                data.offset(),
                ErrorKind::BadLength {
                    value: data.len(),
                    expected: "a multiple of the per-hop length",
                },
            ));
        }
        let stack = Self {
            version,
            bitmap,
            stride,
            data,
        };
        if stack.len() > MAX_HOPS {
            return Err(WireError::new(
                Self::HEADER,
                "hops",
                data.offset(),
                ErrorKind::BadLength {
                    value: stack.len(),
                    expected: "at most 64 hops",
                },
            ));
        }
        Ok(stack)
    }

    pub fn empty(version: IntVersion, bitmap: u16) -> Self {
        Self {
            version,
            bitmap,
            stride: 0,
            data: Bytes::new(&[]),
        }
    }

    /// Number of hops on the stack.
    pub fn len(&self) -> usize {
        self.data.len().checked_div(self.stride).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn bytes(&self) -> Bytes<'a> {
        self.data
    }

    /// The `i`-th hop in wire order (0 = newest).
    pub fn hop(&self, i: usize) -> HopRecord {
        let start = i * self.stride;
        let data = self.data.data();
        super::hop::decode_hop(
            self.version,
            self.bitmap,
            data.get(start..start + self.stride).unwrap_or_default(),
        )
    }

    /// Hops in wire order (newest first).
    pub fn iter(&self) -> impl ExactSizeIterator<Item = HopRecord> + DoubleEndedIterator + '_ {
        (0..self.len()).map(|i| self.hop(i))
    }

    /// Appends the hops in path order (INT source first) without allocating beyond `out`.
    /// Appends the hops in path order (INT source first).
    #[inline]
    pub fn push_path_order(&self, out: &mut Vec<HopRecord>) {
        super::hop::push_hops(
            self.version,
            self.bitmap,
            self.stride,
            self.data.data(),
            out,
        );
    }
}

#[cfg(feature = "serde")]
impl serde::Serialize for HopStack<'_> {
    /// Hops in path order (INT source first), like the normalised records.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter().rev())
    }
}

fn put(out: &mut Vec<u8>, hop: &HopRecord, field: HopField, bytes: usize) {
    let all_ones = if bytes >= 8 {
        u64::MAX
    } else {
        (1u64 << (bytes * 8)) - 1
    };
    let v = hop.get(field).map_or(all_ones, |v| v & all_ones);
    out.extend_from_slice(&v.to_be_bytes()[8 - bytes..]);
}

/// Writes one hop for `bitmap` in `stride` bytes: absent or unavailable fields as all-ones,
/// reserved words as all-ones, domain-specific space as zeros, checksum complement last.
pub fn encode_hop(
    version: IntVersion,
    bitmap: u16,
    stride: usize,
    hop: &HopRecord,
    out: &mut Vec<u8>,
) {
    let start = out.len();
    let mut m = bitmap & 0xFFFE;
    while m != 0 {
        let bit = m.leading_zeros();
        m &= !(0x8000 >> bit);
        match bit {
            0 => put(out, hop, HopField::NodeId, 4),
            1 => {
                put(out, hop, HopField::L1IngressPort, 2);
                put(out, hop, HopField::L1EgressPort, 2);
            }
            2 => put(out, hop, HopField::HopLatency, 4),
            3 => {
                put(out, hop, HopField::QueueId, 1);
                put(out, hop, HopField::QueueOccupancy, 3);
            }
            4 | 5 => {
                let field = if bit == 4 {
                    HopField::IngressTimestamp
                } else {
                    HopField::EgressTimestamp
                };
                put(out, hop, field, instruction_width(version, bit));
            }
            6 if version == IntVersion::V05 => {
                put(out, hop, HopField::QueueId, 1);
                put(out, hop, HopField::QueueCongestion, 3);
            }
            6 => {
                put(out, hop, HopField::L2IngressPort, 4);
                put(out, hop, HopField::L2EgressPort, 4);
            }
            7 => put(out, hop, HopField::TxUtilization, 4),
            8 if version == IntVersion::V2 => {
                put(out, hop, HopField::BufferId, 1);
                put(out, hop, HopField::BufferOccupancy, 3);
            }
            _ => out.extend_from_slice(&[0xFF; 4]),
        }
    }
    let tail = if bitmap & 1 != 0 { 4 } else { 0 };
    out.resize(start + stride - tail, 0);
    if tail != 0 {
        put(out, hop, HopField::ChecksumComplement, 4);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_hops_agrees_with_division() {
        for stride in 0..200 {
            for len in 0..4200 {
                let want = (stride != 0 && len % stride == 0).then(|| len / stride);
                assert_eq!(exact_hops(len, stride), want, "{len} / {stride}");
            }
        }
        assert_eq!(exact_hops(4 * 65535, 4), Some(65535));
        assert_eq!(exact_hops(31 * 4 * 2000, 124), Some(2000));
    }

    #[test]
    fn widths_follow_the_spec_per_version() {
        // FORMATS.md §6.5: bitmap 0xFE00 = 40 bytes = Hop ML 10 in v2.x.
        assert_eq!(baseline_len(IntVersion::V2, 0xFE00), 40);
        // v1.0: timestamps 4 B, L2 ids 8 B.
        assert_eq!(baseline_len(IntVersion::V10, 0xFE00), 32);
        // v0.5: all 4 B.
        assert_eq!(baseline_len(IntVersion::V05, 0xFF00), 32);
        // Checksum complement is not baseline.
        assert_eq!(baseline_len(IntVersion::V2, 0x8001), 4);
        // Reserved bits count one word each.
        assert_eq!(baseline_len(IntVersion::V2, 0x0040), 4);
    }

    #[test]
    fn checksum_complement_sits_after_domain_specific_space() {
        let mut h = HopRecord::default();
        h.set(HopField::NodeId, 9);
        h.set(HopField::ChecksumComplement, 0xABCD);
        let mut buf = Vec::new();
        encode_hop(IntVersion::V2, 0x8001, 16, &h, &mut buf);
        assert_eq!(buf.len(), 16);
        assert_eq!(&buf[12..], &[0, 0, 0xAB, 0xCD]);
        let stack = HopStack::new(IntVersion::V2, 0x8001, 16, Bytes::new(&buf)).unwrap();
        assert_eq!(stack.hop(0), h);
    }

    #[test]
    fn stride_too_short_for_bitmap_is_an_error() {
        let buf = [0u8; 8];
        let err = HopStack::new(IntVersion::V2, 0xFF00, 8, Bytes::new(&buf)).unwrap_err();
        assert_eq!(err.reason(), "bad_length");
    }
}
