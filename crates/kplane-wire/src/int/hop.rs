//! Straight-line decoding of one hop: the instruction bits are tested in spec order, each set
//! bit reads its words at the running offset. One predictable branch per bit, no tables; the
//! three INT generations are monomorphised (`V` = 0, 1, 2 for v0.5, v1.0, v2.x).

use kplane_model::{HopField, HopRecord};

use super::IntVersion;

#[inline(always)]
fn rd32(h: &[u8], o: usize) -> u32 {
    match h.get(o..o + 4) {
        Some(w) => u32::from_be_bytes([w[0], w[1], w[2], w[3]]),
        // Callers validated the hop length against the bitmap; this is unreachable in
        // practice and decodes as "unavailable" rather than panicking.
        None => u32::MAX,
    }
}

#[inline(always)]
fn rd64(h: &[u8], o: usize) -> u64 {
    (u64::from(rd32(h, o)) << 32) | u64::from(rd32(h, o + 4))
}

const NARROW: usize = HopField::NARROW;
const WIDE: usize = HopField::COUNT - HopField::NARROW;

struct Out {
    narrow: [u32; NARROW],
    wide: [u64; WIDE],
    present: u16,
    unavailable: u16,
}

impl Out {
    #[inline(always)]
    fn narrow(&mut self, f: HopField, v: u32, ones: u32) {
        let i = f as usize;
        if let Some(slot) = self.narrow.get_mut(i) {
            *slot = v;
        }
        self.present |= 1 << i;
        self.unavailable = (self.unavailable & !(1 << i)) | (u16::from(v == ones) << i);
    }

    #[inline(always)]
    fn wide(&mut self, f: HopField, v: u64, ones: u64) {
        let i = f as usize;
        if let Some(slot) = self.wide.get_mut(i - NARROW) {
            *slot = v;
        }
        self.present |= 1 << i;
        self.unavailable |= u16::from(v == ones) << i;
    }
}

/// Decodes one hop of `hop.len()` bytes (the stride) for `bitmap`; the checksum complement
/// (bit 15, v1.0 and v2.x) is the hop's last word.
#[inline(always)]
fn decode<const V: u8>(bitmap: u16, hop: &[u8]) -> HopRecord {
    use HopField::*;
    let mut out = Out {
        narrow: [0; NARROW],
        wide: [0; WIDE],
        present: 0,
        unavailable: 0,
    };
    let mut o = 0;
    if bitmap & 0x8000 != 0 {
        out.narrow(NodeId, rd32(hop, o), u32::MAX);
        o += 4;
    }
    if bitmap & 0x4000 != 0 {
        let w = rd32(hop, o);
        out.narrow(L1IngressPort, w >> 16, 0xFFFF);
        out.narrow(L1EgressPort, w & 0xFFFF, 0xFFFF);
        o += 4;
    }
    if bitmap & 0x2000 != 0 {
        out.narrow(HopLatency, rd32(hop, o), u32::MAX);
        o += 4;
    }
    if bitmap & 0x1000 != 0 {
        let w = rd32(hop, o);
        out.narrow(QueueId, w >> 24, 0xFF);
        out.narrow(QueueOccupancy, w & 0xFF_FFFF, 0xFF_FFFF);
        o += 4;
    }
    for (mask, field) in [(0x0800, IngressTimestamp), (0x0400, EgressTimestamp)] {
        if bitmap & mask != 0 {
            if V == 2 {
                out.wide(field, rd64(hop, o), u64::MAX);
                o += 8;
            } else {
                out.wide(field, u64::from(rd32(hop, o)), u64::from(u32::MAX));
                o += 4;
            }
        }
    }
    if bitmap & 0x0200 != 0 {
        if V == 0 {
            let w = rd32(hop, o);
            out.narrow(QueueId, w >> 24, 0xFF);
            out.narrow(QueueCongestion, w & 0xFF_FFFF, 0xFF_FFFF);
            o += 4;
        } else {
            out.narrow(L2IngressPort, rd32(hop, o), u32::MAX);
            out.narrow(L2EgressPort, rd32(hop, o + 4), u32::MAX);
            o += 8;
        }
    }
    if bitmap & 0x0100 != 0 {
        out.narrow(TxUtilization, rd32(hop, o), u32::MAX);
        o += 4;
    }
    if V == 2 && bitmap & 0x0080 != 0 {
        let w = rd32(hop, o);
        out.narrow(BufferId, w >> 24, 0xFF);
        out.narrow(BufferOccupancy, w & 0xFF_FFFF, 0xFF_FFFF);
    }
    // Reserved bits (v2: 9-14, v1.0: 8-14) carry a word each, skipped; domain-specific
    // metadata follows the baseline; the checksum complement closes the hop.
    if V != 0 && bitmap & 0x0001 != 0 {
        out.narrow(
            ChecksumComplement,
            rd32(hop, hop.len().saturating_sub(4)),
            u32::MAX,
        );
    }
    HopRecord::from_raw(out.present, out.unavailable, out.narrow, out.wide)
}

/// Decodes one hop for `version` and `bitmap`; `hop` is exactly one stride long.
#[inline]
pub fn decode_hop(version: IntVersion, bitmap: u16, hop: &[u8]) -> HopRecord {
    match version {
        IntVersion::V05 => decode::<0>(bitmap & 0xFF00, hop),
        IntVersion::V10 => decode::<1>(bitmap, hop),
        IntVersion::V2 => decode::<2>(bitmap, hop),
    }
}

/// Appends every hop of a stack in path order (the stack is newest first).
#[inline]
pub fn push_hops(
    version: IntVersion,
    bitmap: u16,
    stride: usize,
    stack: &[u8],
    out: &mut Vec<HopRecord>,
) {
    fn run<const V: u8>(bitmap: u16, stride: usize, stack: &[u8], out: &mut Vec<HopRecord>) {
        for hop in stack.chunks_exact(stride).rev() {
            out.push(decode::<V>(bitmap, hop));
        }
    }
    if stride == 0 {
        return;
    }
    match version {
        IntVersion::V05 => run::<0>(bitmap & 0xFF00, stride, stack, out),
        IntVersion::V10 => run::<1>(bitmap, stride, stack, out),
        IntVersion::V2 => run::<2>(bitmap, stride, stack, out),
    }
}
