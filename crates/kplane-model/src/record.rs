use serde::Serialize;

use crate::{FlowKey, HopRecord, ReportEnvelope};

/// Hops beyond this are not kept in one record (INT v2 Remaining Hop Count is 8 bits, but no
/// real path is this long; the decoder reports longer stacks as an error instead of truncating).
pub const MAX_HOPS: usize = 64;

/// One normalised telemetry record: one report (or one INT-carrying packet).
///
/// Reused across decodes on the hot path: [`ReportRecord::clear`] keeps the hop buffer's
/// capacity, so decoding allocates nothing once warmed up.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ReportRecord {
    #[serde(flatten)]
    pub envelope: ReportEnvelope,
    /// The monitored flow, when the report carries (part of) the packet.
    pub flow: Option<FlowKey>,
    /// Per-hop metadata in path order: the first hop (INT source) first, the sink last.
    pub hops: Vec<HopRecord>,
}

impl ReportRecord {
    pub fn clear(&mut self) {
        self.envelope = ReportEnvelope::default();
        self.flow = None;
        self.hops.clear();
    }

    /// Node ids along the path, in order (`None` where a hop did not carry one).
    pub fn path(&self) -> impl Iterator<Item = Option<u32>> + '_ {
        self.hops.iter().map(HopRecord::node_id)
    }
}
