//! One hop's metadata as an emulated switch stamps it.

use kplane_model::{HopField, HopRecord};

/// One hop's metadata as the emulated switch produced it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Hop {
    pub node: u32,
    pub in_port: u16,
    pub out_port: u16,
    /// Queueing + processing, ns.
    pub latency_ns: u32,
    pub queue_id: u8,
    pub queue_occupancy: u32,
    pub ingress_ns: u64,
    pub egress_ns: u64,
    /// Egress tx utilisation, per mille of the link rate.
    pub tx_utilization: u32,
}

impl Hop {
    pub fn record(&self) -> HopRecord {
        let mut h = HopRecord::default();
        h.set(HopField::NodeId, self.node.into());
        h.set(HopField::L1IngressPort, self.in_port.into());
        h.set(HopField::L1EgressPort, self.out_port.into());
        h.set(HopField::HopLatency, self.latency_ns.into());
        h.set(HopField::QueueId, self.queue_id.into());
        h.set(
            HopField::QueueOccupancy,
            self.queue_occupancy.min(0xFF_FFFE).into(),
        );
        h.set(HopField::IngressTimestamp, self.ingress_ns);
        h.set(HopField::EgressTimestamp, self.egress_ns);
        h.set(HopField::TxUtilization, self.tx_utilization.into());
        h
    }
}
