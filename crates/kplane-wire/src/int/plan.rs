//! A hop layout compiled once per (version, bitmap, stride): which record field sits at which
//! offset with which width. Decoding a hop then runs a short straight list instead of walking
//! the bitmap again, and fills the record's presence mask in one store.

use kplane_model::{HopField, HopRecord};

use super::{IntVersion, instruction_width};

/// Read 8 bytes big-endian at `offset`, shift right by `shift`, keep `mask`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Op {
    field: u8,
    offset: u8,
    shift: u8,
    mask: u64,
}

/// Longest hop: Hop ML is 5 bits (31 words).
const MAX_HOP: usize = 128;

/// An 8-byte big-endian load at `o` where fewer than 8 bytes remain (zero-padded).
#[cold]
fn load_tail(data: &[u8], o: usize) -> u64 {
    let mut a = [0u8; 8];
    if let Some(rest) = data.get(o..) {
        let n = rest.len().min(8);
        a[..n].copy_from_slice(&rest[..n]);
    }
    u64::from_be_bytes(a)
}

/// The compiled layout of one hop.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HopPlan {
    present: u16,
    ops: [Op; 20],
    len: u8,
}

impl HopPlan {
    /// Compiles the layout; `stride` places the checksum complement (bit 15) last.
    pub fn new(version: IntVersion, bitmap: u16, stride: usize) -> Self {
        let mut plan = Self {
            present: 0,
            ops: [Op::default(); 20],
            len: 0,
        };
        let mut off = 0usize;
        let mut m = bitmap & 0xFFFE;
        while m != 0 {
            let bit = m.leading_zeros();
            m &= !(0x8000 >> bit);
            use HopField::*;
            match bit {
                0 => plan.push(NodeId, off, 4),
                1 => {
                    plan.push(L1IngressPort, off, 2);
                    plan.push(L1EgressPort, off + 2, 2);
                }
                2 => plan.push(HopLatency, off, 4),
                3 => {
                    plan.push(QueueId, off, 1);
                    plan.push(QueueOccupancy, off + 1, 3);
                }
                4 | 5 => {
                    let f = if bit == 4 {
                        IngressTimestamp
                    } else {
                        EgressTimestamp
                    };
                    plan.push(f, off, instruction_width(version, bit) as u8);
                }
                6 if version == IntVersion::V05 => {
                    plan.push(QueueId, off, 1);
                    plan.push(QueueCongestion, off + 1, 3);
                }
                6 => {
                    plan.push(L2IngressPort, off, 4);
                    plan.push(L2EgressPort, off + 4, 4);
                }
                7 => plan.push(TxUtilization, off, 4),
                8 if version == IntVersion::V2 => {
                    plan.push(BufferId, off, 1);
                    plan.push(BufferOccupancy, off + 1, 3);
                }
                _ => {}
            }
            off += instruction_width(version, bit);
        }
        if bitmap & 1 != 0 && stride >= 4 {
            plan.push(HopField::ChecksumComplement, stride - 4, 4);
        }
        plan
    }

    /// Adds a field read (used for the v2.0 report's drop word).
    pub(crate) fn push(&mut self, field: HopField, offset: usize, width: u8) {
        // A later op for the same field overrides an earlier one, as decoding in order would.
        self.present |= field.bit();
        if offset + usize::from(width) > MAX_HOP {
            return;
        }
        if let Some(op) = self.ops.get_mut(usize::from(self.len)) {
            *op = Op {
                field: field as u8,
                offset: offset as u8,
                shift: 64 - 8 * width,
                mask: if width >= 8 {
                    u64::MAX
                } else {
                    (1u64 << (8 * width)) - 1
                },
            };
            self.len += 1;
        }
    }

    /// Decodes the hop at the start of `data` (which may run past the hop: reads near the end
    /// of a hop then need no bounds fallback). Reads are an 8-byte load, a shift and a mask.
    #[inline]
    pub fn decode_at(&self, data: &[u8]) -> HopRecord {
        let mut narrow = [0u32; HopField::NARROW];
        let mut wide = [0u64; HopField::COUNT - HopField::NARROW];
        let mut unavailable = 0u16;
        for op in &self.ops[..usize::from(self.len)] {
            let o = usize::from(op.offset);
            let raw = match data.get(o..o + 8) {
                Some(w) => {
                    let mut a = [0u8; 8];
                    a.copy_from_slice(w);
                    u64::from_be_bytes(a)
                }
                None => load_tail(data, o),
            };
            let v = (raw >> op.shift) & op.mask;
            let field = usize::from(op.field);
            // A later read of the same field (v0.5 queue id) overrides an earlier one.
            unavailable = (unavailable & !(1 << field)) | (u16::from(v == op.mask) << field);
            match field.checked_sub(HopField::NARROW) {
                None => narrow[field] = v as u32,
                Some(i) => wide[i & 1] = v,
            }
        }
        HopRecord::from_raw(self.present, unavailable, narrow, wide)
    }

    /// Decodes a hop into a fresh record.
    pub fn decode(&self, hop: &[u8]) -> HopRecord {
        self.decode_at(hop)
    }
}

/// A few compiled plans, keyed by (version, bitmap, stride): a report stream uses a handful
/// of instruction sets, so this hits almost always.
#[derive(Clone, Debug, Default)]
pub struct PlanCache {
    keys: [Option<(IntVersion, u16, usize)>; 4],
    plans: [HopPlan; 4],
    next: usize,
}

impl PlanCache {
    #[inline]
    pub fn get(&mut self, version: IntVersion, bitmap: u16, stride: usize) -> &HopPlan {
        self.get_or(version, bitmap, stride, || {
            HopPlan::new(version, bitmap, stride)
        })
    }

    /// The plan under a key, compiled by `make` on a miss.
    #[inline]
    pub fn get_or(
        &mut self,
        version: IntVersion,
        bitmap: u16,
        stride: usize,
        make: impl FnOnce() -> HopPlan,
    ) -> &HopPlan {
        let key = Some((version, bitmap, stride));
        let idx = match self.keys.iter().position(|k| *k == key) {
            Some(i) => i,
            None => {
                let i = self.next;
                self.next = (self.next + 1) % self.keys.len();
                self.keys[i] = key;
                self.plans[i] = make();
                i
            }
        };
        &self.plans[idx]
    }
}
