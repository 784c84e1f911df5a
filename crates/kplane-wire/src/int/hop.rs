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

/// Which record fields a bitmap fills, for INT generation `V` (the same for every hop): by
/// table for the eight baseline bits, since bitmaps not known at compile time are the rule
/// for the reporting node's own metadata.
#[inline(always)]
pub(crate) fn present_mask<const V: u8>(bitmap: u16) -> u16 {
    use HopField::*;
    let mut p = Present::<V>::HIGH[usize::from(bitmap >> 8)];
    if V == 2 && bitmap & 0x0080 != 0 {
        p |= BufferId.bit() | BufferOccupancy.bit();
    }
    if V != 0 && bitmap & 0x0001 != 0 {
        p |= ChecksumComplement.bit();
    }
    p
}

struct Present<const V: u8>;

impl<const V: u8> Present<V> {
    const HIGH: [u16; 256] = {
        let mut t = [0u16; 256];
        let mut i = 0;
        while i < 256 {
            t[i] = present_mask_by_bits::<V>((i as u16) << 8);
            i += 1;
        }
        t
    };
}

/// The fields instruction bits 0-7 (the high byte of `bitmap`) fill; the low bits are added
/// by [`present_mask`].
const fn present_mask_by_bits<const V: u8>(bitmap: u16) -> u16 {
    use HopField::*;
    let mut p = 0u16;
    if bitmap & 0x8000 != 0 {
        p |= NodeId.bit();
    }
    if bitmap & 0x4000 != 0 {
        p |= L1IngressPort.bit() | L1EgressPort.bit();
    }
    if bitmap & 0x2000 != 0 {
        p |= HopLatency.bit();
    }
    if bitmap & 0x1000 != 0 {
        p |= QueueId.bit() | QueueOccupancy.bit();
    }
    if bitmap & 0x0800 != 0 {
        p |= IngressTimestamp.bit();
    }
    if bitmap & 0x0400 != 0 {
        p |= EgressTimestamp.bit();
    }
    if bitmap & 0x0200 != 0 {
        p |= if V == 0 {
            QueueId.bit() | QueueCongestion.bit()
        } else {
            L2IngressPort.bit() | L2EgressPort.bit()
        };
    }
    if bitmap & 0x0100 != 0 {
        p |= TxUtilization.bit();
    }
    p
}

/// Decodes one hop of `hop.len()` bytes (the stride) for `bitmap`: raw values, with the
/// stack's presence mask (`present`); all-ones values read back as unavailable. The
/// checksum complement (bit 15) is the hop's last word.
#[inline(always)]
fn decode<const V: u8>(bitmap: u16, present: u16, hop: &[u8]) -> HopRecord {
    // Callers validated the hop against the bitmap: with the baseline split off exactly, a
    // constant bitmap's reads need no bounds checks at all.
    let base = super::baseline_len(IntVersion::from_generation(V), bitmap);
    fields::<V>(bitmap, present, hop.get(..base).unwrap_or(hop), hop)
}

/// Reads the fields of `bitmap` from `hop` (the baseline words); the checksum complement is
/// the last word of `whole`, after any domain-specific metadata.
#[inline(always)]
fn fields<const V: u8>(bitmap: u16, present: u16, hop: &[u8], whole: &[u8]) -> HopRecord {
    use HopField::*;
    let mut n = [0u32; NARROW];
    let mut w = [0u64; WIDE];
    let mut o = 0;
    if bitmap & 0x8000 != 0 {
        n[NodeId as usize] = rd32(hop, o);
        o += 4;
    }
    if bitmap & 0x4000 != 0 {
        let x = rd32(hop, o);
        n[L1IngressPort as usize] = x >> 16;
        n[L1EgressPort as usize] = x & 0xFFFF;
        o += 4;
    }
    if bitmap & 0x2000 != 0 {
        n[HopLatency as usize] = rd32(hop, o);
        o += 4;
    }
    if bitmap & 0x1000 != 0 {
        let x = rd32(hop, o);
        n[QueueId as usize] = x >> 24;
        n[QueueOccupancy as usize] = x & 0xFF_FFFF;
        o += 4;
    }
    // Timestamps: 8 bytes in v2.x; 4 bytes (all-ones widened to 64 bits) before.
    for (mask, slot) in [(0x0800, 0), (0x0400, 1)] {
        if bitmap & mask != 0 {
            if V == 2 {
                w[slot] = rd64(hop, o);
                o += 8;
            } else {
                let x = rd32(hop, o);
                w[slot] = if x == u32::MAX {
                    u64::MAX
                } else {
                    u64::from(x)
                };
                o += 4;
            }
        }
    }
    if bitmap & 0x0200 != 0 {
        if V == 0 {
            let x = rd32(hop, o);
            n[QueueId as usize] = x >> 24;
            n[QueueCongestion as usize] = x & 0xFF_FFFF;
            o += 4;
        } else {
            n[L2IngressPort as usize] = rd32(hop, o);
            n[L2EgressPort as usize] = rd32(hop, o + 4);
            o += 8;
        }
    }
    if bitmap & 0x0100 != 0 {
        n[TxUtilization as usize] = rd32(hop, o);
        o += 4;
    }
    if V == 2 && bitmap & 0x0080 != 0 {
        let x = rd32(hop, o);
        n[BufferId as usize] = x >> 24;
        n[BufferOccupancy as usize] = x & 0xFF_FFFF;
    }
    // Reserved bits (v2: 9-14, v1.0: 8-14) carry a word each, skipped; domain-specific
    // metadata follows the baseline; the checksum complement closes the hop.
    if V != 0 && bitmap & 0x0001 != 0 {
        n[ChecksumComplement as usize] = rd32(whole, whole.len().saturating_sub(4));
    }
    HopRecord::from_raw(present, n, w)
}

/// Decodes one hop for `version` and `bitmap`; `hop` is exactly one stride long.
#[inline]
pub fn decode_hop(version: IntVersion, bitmap: u16, hop: &[u8]) -> HopRecord {
    match version {
        IntVersion::V05 => decode::<0>(bitmap & 0xFF00, present_mask::<0>(bitmap & 0xFF00), hop),
        IntVersion::V10 => decode::<1>(bitmap, present_mask::<1>(bitmap), hop),
        IntVersion::V2 => decode::<2>(bitmap, present_mask::<2>(bitmap), hop),
    }
}

/// Decodes a Telemetry Report v2.0 node's own metadata for its RepMdBits baseline (bits 1-8
/// mirror the instruction bits; the node id is in the group header). The specialised
/// instruction sets of [`push_hops`] without the node id get constant-bitmap copies too.
#[inline(always)]
pub(crate) fn decode_report_metadata(bitmap: u16, md: &[u8]) -> HopRecord {
    #[inline(always)]
    fn one(bitmap: u16, md: &[u8]) -> HopRecord {
        decode::<2>(bitmap, present_mask::<2>(bitmap), md)
    }
    match bitmap {
        0x7F00 => one(0x7F00, md),
        0x7C00 => one(0x7C00, md),
        0x7000 => one(0x7000, md),
        0x4C00 => one(0x4C00, md),
        _ => one(bitmap, md),
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
    // The two loops are the same source on purpose: in the first the compiler knows every
    // hop covers the bitmap and drops the per-word bounds checks.
    #[expect(clippy::if_same_then_else)]
    #[inline(always)]
    fn each<const V: u8>(bitmap: u16, stride: usize, stack: &[u8], out: &mut Vec<HopRecord>) {
        if stride == 0 {
            return;
        }
        let present = present_mask::<V>(bitmap);
        // Whole hops only, newest first on the wire: walk from the end.
        let hops = super::exact_hops(stack.len(), stride).unwrap_or_else(|| stack.len() / stride);
        let mut rest = stack.get(..hops * stride).unwrap_or_default();
        // Stacks were validated (the stride covers the bitmap); stating it here lets a
        // constant bitmap's reads go without per-word bounds checks.
        if stride >= super::baseline_len(IntVersion::from_generation(V), bitmap) {
            while let Some((head, hop)) = rest.split_at_checked(rest.len().wrapping_sub(stride)) {
                out.push(decode::<V>(bitmap, present, hop));
                rest = head;
            }
        } else {
            while let Some((head, hop)) = rest.split_at_checked(rest.len().wrapping_sub(stride)) {
                out.push(decode::<V>(bitmap, present, hop));
                rest = head;
            }
        }
    }
    fn run<const V: u8>(bitmap: u16, stride: usize, stack: &[u8], out: &mut Vec<HopRecord>) {
        // The instruction sets fabrics deploy get a copy with the bitmap constant: offsets
        // fold, and one length check per hop replaces one per word. Any other bitmap takes
        // the same code with the bitmap tested at run time.
        match bitmap {
            0xFF00 => each::<V>(0xFF00, stride, stack, out),
            0xFC00 => each::<V>(0xFC00, stride, stack, out),
            0xF000 => each::<V>(0xF000, stride, stack, out),
            0xCC00 => each::<V>(0xCC00, stride, stack, out),
            _ => each::<V>(bitmap, stride, stack, out),
        }
    }
    // Every baseline field in v2.x: byte shuffles where the CPU has them, tested before
    // `run` (whose frame, for all its copies, costs more than the test).
    if version == IntVersion::V2
        && bitmap == 0xFF00
        && super::shuffle::push_ff00(present_mask::<2>(0xFF00), stride, stack, out)
    {
        return;
    }
    match version {
        IntVersion::V05 => run::<0>(bitmap & 0xFF00, stride, stack, out),
        IntVersion::V10 => run::<1>(bitmap, stride, stack, out),
        IntVersion::V2 => run::<2>(bitmap, stride, stack, out),
    }
}
