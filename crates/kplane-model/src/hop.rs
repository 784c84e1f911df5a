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
}
