use serde::ser::{Serialize, SerializeMap, Serializer};

/// One per-hop metadata item. The order is kplane's own; wire order is per instruction bitmap.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum HopField {
    NodeId = 0,
    L1IngressPort,
    L1EgressPort,
    HopLatency,
    QueueId,
    QueueOccupancy,
    L2IngressPort,
    L2EgressPort,
    TxUtilization,
    BufferId,
    BufferOccupancy,
    QueueCongestion,
    DropReason,
    ChecksumComplement,
    // The two 64-bit fields come last: they live in `HopRecord::wide`.
    IngressTimestamp,
    EgressTimestamp,
}

impl HopField {
    pub const COUNT: usize = 16;
    /// Fields below this index are at most 32 bits wide.
    pub const NARROW: usize = 14;

    pub const ALL: [HopField; Self::COUNT] = [
        Self::NodeId,
        Self::L1IngressPort,
        Self::L1EgressPort,
        Self::HopLatency,
        Self::QueueId,
        Self::QueueOccupancy,
        Self::L2IngressPort,
        Self::L2EgressPort,
        Self::TxUtilization,
        Self::BufferId,
        Self::BufferOccupancy,
        Self::QueueCongestion,
        Self::DropReason,
        Self::ChecksumComplement,
        Self::IngressTimestamp,
        Self::EgressTimestamp,
    ];

    /// The name used in JSON, Arrow columns and docs.
    pub const fn name(self) -> &'static str {
        match self {
            Self::NodeId => "node_id",
            Self::L1IngressPort => "l1_ingress_port",
            Self::L1EgressPort => "l1_egress_port",
            Self::HopLatency => "hop_latency_ns",
            Self::QueueId => "queue_id",
            Self::QueueOccupancy => "queue_occupancy",
            Self::IngressTimestamp => "ingress_timestamp_ns",
            Self::EgressTimestamp => "egress_timestamp_ns",
            Self::L2IngressPort => "l2_ingress_port",
            Self::L2EgressPort => "l2_egress_port",
            Self::TxUtilization => "tx_utilization",
            Self::BufferId => "buffer_id",
            Self::BufferOccupancy => "buffer_occupancy",
            Self::QueueCongestion => "queue_congestion",
            Self::DropReason => "drop_reason",
            Self::ChecksumComplement => "checksum_complement",
        }
    }

    /// Widest wire width of the field in bits (timestamps are 64 from INT v2.0 on).
    pub const fn max_bits(self) -> u32 {
        match self {
            Self::QueueId | Self::BufferId | Self::DropReason => 8,
            Self::L1IngressPort | Self::L1EgressPort => 16,
            Self::QueueOccupancy | Self::BufferOccupancy | Self::QueueCongestion => 24,
            Self::IngressTimestamp | Self::EgressTimestamp => 64,
            _ => 32,
        }
    }

    /// The field's all-ones value, which means "unavailable".
    pub const fn ones(self) -> u64 {
        match self.max_bits() {
            64 => u64::MAX,
            bits => (1u64 << bits) - 1,
        }
    }

    /// This field's bit in a presence mask.
    pub const fn bit(self) -> u16 {
        1 << (self as u8)
    }
}

/// Metadata one node added for one packet. Each field is either absent (not requested),
/// unavailable (the device wrote all-ones: "cannot provide") or a value.
///
/// Values are kept as written; "unavailable" *is* the field's all-ones value
/// ([`HopField::ones`]), so `get` returns `None` for it — the spec reserves all-ones for
/// exactly this. 80 bytes: 32-bit fields paired in `narrow` (field 2i in the low half of word
/// i, 2i + 1 in the high half — the decoder writes a hop with half the stores), the two
/// 64-bit timestamps in `wide`.
#[derive(Clone, Copy, Default)]
pub struct HopRecord {
    present: u16,
    narrow: [u64; HopField::NARROW / 2],
    wide: [u64; HopField::COUNT - HopField::NARROW],
}

impl HopRecord {
    /// The decoder's fast path: a hop from its presence mask and raw values (narrow fields
    /// by index below [`HopField::NARROW`], then the two wide ones). Fields outside `present`
    /// must be zero so that equality and hashing stay meaningful.
    #[inline]
    pub fn from_raw(
        present: u16,
        narrow: [u32; HopField::NARROW],
        wide: [u64; HopField::COUNT - HopField::NARROW],
    ) -> Self {
        let pair = |i: usize| u64::from(narrow[2 * i]) | (u64::from(narrow[2 * i + 1]) << 32);
        Self {
            present,
            narrow: std::array::from_fn(pair),
            wide,
        }
    }

    /// A hop from its presence mask and storage words: `narrow[i]` holds field 2i in its low
    /// and field 2i + 1 in its high 32 bits, `wide` the two timestamps — for decoders that
    /// assemble whole words (e.g. by byte shuffle). Fields outside `present` must be zero.
    #[inline(always)]
    pub fn from_words(
        present: u16,
        narrow: [u64; HopField::NARROW / 2],
        wide: [u64; HopField::COUNT - HopField::NARROW],
    ) -> Self {
        Self {
            present,
            narrow,
            wide,
        }
    }

    #[inline]
    fn store(&mut self, index: usize, value: u64) {
        match index.checked_sub(HopField::NARROW) {
            None => {
                let shift = (index & 1) * 32;
                let word = &mut self.narrow[(index / 2) % (HopField::NARROW / 2)];
                *word = (*word & !(0xFFFF_FFFF << shift)) | (u64::from(value as u32) << shift);
            }
            Some(i) => self.wide[i & 1] = value,
        }
    }

    #[inline]
    fn load(&self, index: usize) -> u64 {
        match index.checked_sub(HopField::NARROW) {
            None => {
                let word = self.narrow[(index / 2) % (HopField::NARROW / 2)];
                (word >> ((index & 1) * 32)) & 0xFFFF_FFFF
            }
            Some(i) => self.wide[i & 1],
        }
    }

    /// Sets a field to a value (its all-ones value reads back as unavailable).
    #[inline]
    pub fn set(&mut self, field: HopField, value: u64) {
        self.present |= field.bit();
        self.store(field as usize, value);
    }

    /// Marks a field present but unavailable.
    #[inline]
    pub fn set_unavailable(&mut self, field: HopField) {
        self.set(field, field.ones());
    }

    /// Sets a field from its raw wire value of `bits` width: all-ones at that width (which
    /// may be narrower than the field, e.g. 32-bit v1.0 timestamps) is unavailable.
    #[inline]
    pub fn set_raw(&mut self, field: HopField, raw: u64, bits: u32) {
        let all_ones = if bits >= 64 {
            u64::MAX
        } else {
            (1u64 << bits) - 1
        };
        if raw == all_ones {
            self.set_unavailable(field);
        } else {
            self.set(field, raw);
        }
    }

    /// The value, or `None` when absent or unavailable.
    #[inline]
    pub fn get(&self, field: HopField) -> Option<u64> {
        let v = self.load(field as usize);
        (self.present & field.bit() != 0 && v != field.ones()).then_some(v)
    }

    /// Which of `fields` (a mask of [`HopField::bit`]s) hold a value — present and not
    /// unavailable: every field's [`HopRecord::get`] test at once, for readers of many fields
    /// (read the values with [`HopRecord::raw`]). With a constant mask of fields below
    /// [`HopField::DropReason`] (the twelve a 16-byte compare covers at once) the test of the
    /// others is left out.
    #[inline(always)]
    pub fn valid_of(&self, fields: u16) -> u16 {
        fields & self.present & !self.all_ones(fields & Self::TAIL != 0)
    }

    /// Fields [`HopRecord::all_ones`] tests one by one.
    const TAIL: u16 = !((1 << 12) - 1);

    /// The stored value of a field, whatever its presence: meaningful for a field
    /// [`HopRecord::valid_of`] reports (an absent field reads 0, an unavailable one all-ones).
    #[inline(always)]
    pub fn raw(&self, field: HopField) -> u64 {
        self.load(field as usize)
    }

    /// Fields whose stored value is their all-ones ("unavailable") value. x86-64: three
    /// 4-lane compares (SSE2 is part of the base instruction set) for the 32-bit fields.
    #[inline(always)]
    fn all_ones(&self, tail: bool) -> u16 {
        /// All-ones of the narrow fields, by index.
        const ONES: [u32; HopField::NARROW] = {
            let mut ones = [0; HopField::NARROW];
            let mut i = 0;
            while i < HopField::NARROW {
                ones[i] = HopField::ALL[i].ones() as u32;
                i += 1;
            }
            ones
        };
        let mut mask = 0u16;
        #[cfg(target_arch = "x86_64")]
        let scalar_from = {
            use std::arch::x86_64::{
                _mm_castsi128_ps, _mm_cmpeq_epi32, _mm_movemask_ps, _mm_set_epi64x, _mm_setr_epi32,
            };
            for chunk in 0..3 {
                let (w, o) = (&self.narrow[2 * chunk..2 * chunk + 2], 4 * chunk);
                // SAFETY: SSE and SSE2 are part of every x86-64 CPU (the target's baseline);
                // the intrinsics touch no memory.
                let eq = unsafe {
                    let values = _mm_set_epi64x(w[1] as i64, w[0] as i64);
                    let ones = _mm_setr_epi32(
                        ONES[o] as i32,
                        ONES[o + 1] as i32,
                        ONES[o + 2] as i32,
                        ONES[o + 3] as i32,
                    );
                    _mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(values, ones)))
                };
                mask |= (eq as u16) << o;
            }
            12
        };
        #[cfg(not(target_arch = "x86_64"))]
        let scalar_from = 0;
        for (i, ones) in ONES.iter().enumerate().skip(scalar_from) {
            if (i < 12 || tail) && self.load(i) as u32 == *ones {
                mask |= 1 << i;
            }
        }
        if !tail {
            return mask;
        }
        for (i, w) in self.wide.iter().enumerate() {
            if *w == u64::MAX {
                mask |= 1 << (HopField::NARROW + i);
            }
        }
        mask
    }

    #[inline]
    pub fn is_present(&self, field: HopField) -> bool {
        self.present & field.bit() != 0
    }

    #[inline]
    pub fn is_unavailable(&self, field: HopField) -> bool {
        self.is_present(field) && self.load(field as usize) == field.ones()
    }

    /// Copies every field `other` has and `self` lacks (used when a report's own node is
    /// also the last hop of the INT stack it carries).
    #[inline]
    pub fn merge_missing(&mut self, other: &HopRecord) {
        let add = other.present & !self.present;
        // Visit only the fields to add.
        let mut rest = add;
        while rest != 0 {
            let index = rest.trailing_zeros() as usize;
            rest &= rest - 1;
            self.store(index, other.load(index));
        }
        self.present |= add;
    }

    #[inline]
    pub fn node_id(&self) -> Option<u32> {
        self.get(HopField::NodeId).map(|v| v as u32)
    }
    #[inline]
    pub fn hop_latency_ns(&self) -> Option<u32> {
        self.get(HopField::HopLatency).map(|v| v as u32)
    }
    #[inline]
    pub fn queue_id(&self) -> Option<u8> {
        self.get(HopField::QueueId).map(|v| v as u8)
    }
    #[inline]
    pub fn queue_occupancy(&self) -> Option<u32> {
        self.get(HopField::QueueOccupancy).map(|v| v as u32)
    }
    #[inline]
    pub fn egress_port(&self) -> Option<u32> {
        self.get(HopField::L1EgressPort).map(|v| v as u32)
    }
    #[inline]
    pub fn tx_utilization(&self) -> Option<u32> {
        self.get(HopField::TxUtilization).map(|v| v as u32)
    }
}

/// Equal when the same fields are present with the same values (or both unavailable).
impl PartialEq for HopRecord {
    fn eq(&self, other: &Self) -> bool {
        self.present == other.present
            && HopField::ALL
                .iter()
                .all(|f| !self.is_present(*f) || self.load(*f as usize) == other.load(*f as usize))
    }
}

impl Eq for HopRecord {}

impl std::hash::Hash for HopRecord {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.present.hash(state);
        for f in HopField::ALL {
            if self.is_present(f) {
                self.load(f as usize).hash(state);
            }
        }
    }
}

impl std::fmt::Debug for HopRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut m = f.debug_map();
        for field in HopField::ALL {
            if self.is_unavailable(field) {
                m.entry(&field.name(), &"unavailable");
            } else if let Some(v) = self.get(field) {
                m.entry(&field.name(), &v);
            }
        }
        m.finish()
    }
}

/// JSON: present fields only; unavailable ones as the string `"unavailable"`.
impl Serialize for HopRecord {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.present.count_ones() as usize))?;
        for field in HopField::ALL {
            if self.is_unavailable(field) {
                m.serialize_entry(field.name(), "unavailable")?;
            } else if let Some(v) = self.get(field) {
                m.serialize_entry(field.name(), &v)?;
            }
        }
        m.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_ones_is_unavailable_not_a_number() {
        let mut h = HopRecord::default();
        h.set_raw(HopField::HopLatency, 0xFFFF_FFFF, 32);
        h.set_raw(HopField::QueueOccupancy, 0xFF_FFFF, 24);
        h.set_raw(HopField::NodeId, 7, 32);
        assert_eq!(h.get(HopField::HopLatency), None);
        assert!(h.is_unavailable(HopField::HopLatency));
        assert!(h.is_present(HopField::QueueOccupancy));
        assert_eq!(h.node_id(), Some(7));
        assert!(!h.is_present(HopField::TxUtilization));
        let json = serde_json::to_string(&h).unwrap();
        assert_eq!(
            json,
            r#"{"node_id":7,"hop_latency_ns":"unavailable","queue_occupancy":"unavailable"}"#
        );
    }

    #[test]
    fn set_after_unavailable_clears_it() {
        let mut h = HopRecord::default();
        h.set_unavailable(HopField::QueueId);
        h.set(HopField::QueueId, 3);
        assert_eq!(h.queue_id(), Some(3));
    }

    #[test]
    fn valid_is_every_fields_get_at_once() {
        let mut rng = crate::rng::Rng::new(1);
        for _ in 0..2000 {
            let mut h = HopRecord::default();
            for f in HopField::ALL {
                let x = rng.next_u64();
                match x % 4 {
                    0 => {}
                    1 => h.set_unavailable(f),
                    _ => h.set(f, (x >> 8) & f.ones()),
                }
            }
            let valid = h.valid_of(u16::MAX);
            let head = HopField::ALL[..12].iter().fold(0, |m, f| m | f.bit());
            assert_eq!(h.valid_of(head), valid & head);
            for f in HopField::ALL {
                assert_eq!(valid & f.bit() != 0, h.get(f).is_some(), "{f:?}");
                if let Some(v) = h.get(f) {
                    assert_eq!(h.raw(f), v, "{f:?}");
                }
            }
        }
    }
}
