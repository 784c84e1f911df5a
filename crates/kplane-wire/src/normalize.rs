//! Decoded headers → normalised [`ReportRecord`]s (path order, unavailable values as None).

pub use crate::meta::RecordMeta;

use kplane_model::{HopField, HopRecord, ReportFlags, ReportFormat, ReportRecord};

use crate::Bytes;
use crate::error::WireError;
use crate::frame::Decoded;
use crate::opts::DecodeOptions;
use crate::packet::{Ip, Packet, Telemetry};
use crate::report::{ReportV05, ReportV10, ReportV20, TelemetryReport};

/// How a decode went: records emitted, and the error that stopped it, if any. A v2.0 report
/// whose third individual report is malformed still yields the first two.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DecodeOutcome {
    pub records: usize,
    pub error: Option<WireError>,
}

/// Fills `rec` from a packet's telemetry and flow; returns whether it carried any.
#[inline]
fn fill_from_packet(p: &Packet<'_>, rec: &mut ReportRecord) -> Option<ReportFormat> {
    rec.flow = p.flow;
    // The monitored packet's IP header: the tunnelled one when there is a tunnel.
    let ip = p
        .inner
        .as_ref()
        .and_then(|i| i.ip.as_ref())
        .or(p.ip.as_ref());
    rec.envelope.packet_length = ip.map(|ip| match ip {
        Ip::Ipv4(h) => u32::from(h.total_length),
        Ip::Ipv6(h) => u32::from(h.payload_length) + 40,
    });
    let format = p.telemetry.format();
    match &p.telemetry {
        Telemetry::None => {}
        Telemetry::Int(int) => {
            if let Some(hops) = int.hops() {
                hops.push_path_order(&mut rec.hops);
            }
        }
        Telemetry::Kdn(kdn) => {
            kdn.hops.push_path_order(&mut rec.hops);
            rec.envelope
                .flags
                .set(ReportFlags::TO_CONTROLLER, kdn.kdn.to_controller);
        }
        Telemetry::Gpint(probe) => probe.push_hops(&mut rec.hops),
        Telemetry::IntLabel(label) => {
            label.push_hops(&mut rec.hops);
            rec.envelope
                .flags
                .set(ReportFlags::SPECIFIC_FLOW, label.specific_flow);
        }
    }
    format
}

/// The reporting node's own metadata becomes the last hop, merged into the stack's last hop
/// when that is the same node (a sink that also pushed its metadata on the stack).
#[inline]
fn push_reporting_node(rec: &mut ReportRecord, hop: HopRecord) {
    match rec.hops.last_mut() {
        Some(last) if last.node_id().is_some() && last.node_id() == hop.node_id() => {
            last.merge_missing(&hop);
        }
        _ => rec.hops.push(hop),
    }
}

#[inline]
fn flags(rec: &mut ReportRecord, dropped: bool, congested: bool, tracked: bool) {
    let f = &mut rec.envelope.flags;
    f.set(ReportFlags::DROPPED, dropped);
    f.set(ReportFlags::CONGESTED, congested);
    f.set(ReportFlags::TRACKED, tracked);
}

/// Resets `rec` for a new report of `format`.
#[inline]
fn start(rec: &mut ReportRecord, format: ReportFormat, meta: RecordMeta) {
    rec.clear();
    rec.envelope.format = format;
    rec.envelope.exporter = meta.exporter;
    rec.envelope.received_ns = meta.received_ns;
}

impl TelemetryReport<'_> {
    /// Emits one record per report (v2.0: per individual report) through `emit`, reusing `rec`.
    #[inline]
    pub fn for_each_record(
        &self,
        meta: RecordMeta,
        rec: &mut ReportRecord,
        emit: impl FnMut(&ReportRecord),
    ) -> DecodeOutcome {
        match self {
            Self::V05(r) => r.emit_record(meta, rec, emit),
            Self::V10(r) => r.emit_record(meta, rec, emit),
            Self::V20(r) => r.for_each_record(meta, rec, emit),
        }
    }
}

impl ReportV05<'_> {
    fn emit_record(
        &self,
        meta: RecordMeta,
        rec: &mut ReportRecord,
        mut emit: impl FnMut(&ReportRecord),
    ) -> DecodeOutcome {
        start(rec, ReportFormat::TelemetryReportV05, meta);
        let f = &self.fixed;
        rec.envelope.hw_id = f.hw_id;
        rec.envelope.sequence = Some(f.sequence);
        rec.envelope.timestamp_ns = Some(f.ingress_timestamp.into());
        flags(rec, f.dropped, f.congested_queue, f.tracked_flow);
        rec.envelope.embedded = fill_from_packet(&self.inner, rec);
        let mut hop = HopRecord::default();
        if let Some(d) = self.drop {
            rec.envelope.node_id = Some(d.switch_id);
            rec.envelope.drop_reason = Some(d.drop_reason);
            hop.set(HopField::NodeId, d.switch_id.into());
            hop.set_raw(HopField::L1IngressPort, d.ingress_port.into(), 16);
            hop.set_raw(HopField::L1EgressPort, d.egress_port.into(), 16);
            hop.set_raw(HopField::QueueId, d.queue_id.into(), 8);
            hop.set(HopField::DropReason, d.drop_reason.into());
            push_reporting_node(rec, hop);
        } else if let Some(l) = self.local {
            rec.envelope.node_id = Some(l.switch_id);
            hop.set(HopField::NodeId, l.switch_id.into());
            hop.set_raw(HopField::L1IngressPort, l.ingress_port.into(), 16);
            hop.set_raw(HopField::L1EgressPort, l.egress_port.into(), 16);
            hop.set_raw(HopField::QueueId, l.queue_id.into(), 8);
            hop.set_raw(HopField::QueueOccupancy, l.queue_occupancy.into(), 24);
            hop.set_raw(HopField::IngressTimestamp, f.ingress_timestamp.into(), 32);
            hop.set_raw(HopField::EgressTimestamp, l.egress_timestamp.into(), 32);
            hop.set(
                HopField::HopLatency,
                l.egress_timestamp.wrapping_sub(f.ingress_timestamp).into(),
            );
            push_reporting_node(rec, hop);
        }
        emit(rec);
        DecodeOutcome {
            records: 1,
            error: None,
        }
    }
}

impl ReportV10<'_> {
    fn emit_record(
        &self,
        meta: RecordMeta,
        rec: &mut ReportRecord,
        mut emit: impl FnMut(&ReportRecord),
    ) -> DecodeOutcome {
        start(rec, ReportFormat::TelemetryReportV10, meta);
        let h = &self.header;
        rec.envelope.hw_id = h.hw_id;
        rec.envelope.node_id = Some(h.switch_id);
        rec.envelope.sequence = Some(h.sequence);
        rec.envelope.timestamp_ns = Some(h.ingress_timestamp.into());
        rec.envelope.drop_reason = self.metadata.get(HopField::DropReason).map(|v| v as u8);
        flags(rec, h.dropped, h.congested_queue, h.tracked_flow);
        rec.envelope.embedded = fill_from_packet(&self.inner, rec);
        let mut hop = self.metadata;
        hop.set(HopField::NodeId, h.switch_id.into());
        hop.set_raw(HopField::IngressTimestamp, h.ingress_timestamp.into(), 32);
        push_reporting_node(rec, hop);
        emit(rec);
        DecodeOutcome {
            records: 1,
            error: None,
        }
    }
}

impl ReportV20<'_> {
    /// One record per individual report; a malformed one ends the walk, keeping the earlier.
    #[inline]
    pub fn for_each_record(
        &self,
        meta: RecordMeta,
        rec: &mut ReportRecord,
        mut emit: impl FnMut(&ReportRecord),
    ) -> DecodeOutcome {
        let mut records = 0;
        let walked = self.for_each_report(|ind| {
            start(rec, ReportFormat::TelemetryReportV20, meta);
            rec.envelope.hw_id = self.group.hw_id;
            rec.envelope.node_id = Some(self.group.node_id);
            rec.envelope.sequence = Some(self.group.sequence);
            let h = &ind.header;
            flags(rec, h.dropped, h.congested_queue, h.tracked_flow);
            rec.envelope
                .flags
                .set(ReportFlags::INTERMEDIATE, h.intermediate);
            if let Some(p) = ind.inner.packet() {
                rec.envelope.embedded = fill_from_packet(p, rec);
            }
            if let Some(main) = &ind.main {
                let mut hop = main.metadata();
                hop.set(HopField::NodeId, self.group.node_id.into());
                rec.envelope.drop_reason = hop.get(HopField::DropReason).map(|v| v as u8);
                rec.envelope.timestamp_ns = hop.get(HopField::IngressTimestamp);
                push_reporting_node(rec, hop);
            }
            emit(rec);
            records += 1;
        });
        DecodeOutcome {
            records,
            error: walked.err(),
        }
    }
}

impl Packet<'_> {
    /// Fills `rec` from a packet carrying INT seen on a link; false when it carries none.
    pub fn fill_record(&self, meta: RecordMeta, rec: &mut ReportRecord) -> bool {
        rec.clear();
        rec.envelope.exporter = meta.exporter;
        rec.envelope.received_ns = meta.received_ns;
        match fill_from_packet(self, rec) {
            Some(format) => {
                rec.envelope.format = format;
                true
            }
            None => false,
        }
    }
}

impl Decoded<'_> {
    /// Emits the records of a decoded frame.
    #[inline]
    pub fn for_each_record(
        &self,
        meta: RecordMeta,
        rec: &mut ReportRecord,
        mut emit: impl FnMut(&ReportRecord),
    ) -> DecodeOutcome {
        match self {
            Self::Report { report, .. } => report.for_each_record(meta, rec, emit),
            Self::Packet(p) => {
                let records = usize::from(p.fill_record(meta, rec));
                if records == 1 {
                    emit(rec);
                }
                DecodeOutcome {
                    records,
                    error: None,
                }
            }
        }
    }
}

/// Where [`Decoder::decode_report_to`] puts what it decodes.
pub trait RecordSink {
    /// A record's flow, as soon as it is known and before its hops are decoded: a hint for
    /// sinks that look up per-flow state and can start loading it early. When given, the
    /// very next [`RecordSink::record`] call is that flow's record. Only the fast path (one
    /// v2.0 INT report per datagram) gives it; a record may come without it.
    #[inline]
    fn flow(&mut self, flow: &kplane_model::FlowKey) {
        let _ = flow;
    }

    /// One decoded record.
    fn record(&mut self, rec: &ReportRecord);
}

/// The hot-path decoder for report datagrams: owns its options and a reusable record, so
/// decoding allocates nothing once the record's hop buffer has grown.
#[derive(Debug)]
pub struct Decoder {
    opts: DecodeOptions,
    record: ReportRecord,
    /// Whether the common v2.0 shape takes [`crate::fast`] (always, except to compare).
    fast_path: bool,
    fast_records: u64,
}

impl Default for Decoder {
    fn default() -> Self {
        Self::new(DecodeOptions::default())
    }
}

impl Decoder {
    pub fn new(opts: DecodeOptions) -> Self {
        Self {
            opts,
            record: ReportRecord::default(),
            fast_path: true,
            fast_records: 0,
        }
    }

    /// A decoder that sends every report through the general parser: the reference the
    /// fast path is tested and benchmarked against.
    pub fn general_only(opts: DecodeOptions) -> Self {
        Self {
            fast_path: false,
            ..Self::new(opts)
        }
    }

    /// Records decoded by the fast path so far (the rest went through the general parser).
    pub fn fast_path_records(&self) -> u64 {
        self.fast_records
    }

    pub fn options(&self) -> &DecodeOptions {
        &self.opts
    }

    /// Decodes one UDP payload (a Telemetry Report) into records.
    pub fn decode_report(
        &mut self,
        payload: &[u8],
        meta: RecordMeta,
        emit: impl FnMut(&ReportRecord),
    ) -> DecodeOutcome {
        /// A closure as a sink without the flow hint.
        struct Emit<F>(F);
        impl<F: FnMut(&ReportRecord)> RecordSink for Emit<F> {
            fn record(&mut self, rec: &ReportRecord) {
                (self.0)(rec);
            }
        }
        self.decode_report_to(payload, meta, &mut Emit(emit))
    }

    /// [`Decoder::decode_report`] into a [`RecordSink`], which also hears each record's
    /// flow before its hops are decoded.
    pub fn decode_report_to(
        &mut self,
        payload: &[u8],
        meta: RecordMeta,
        sink: &mut impl RecordSink,
    ) -> DecodeOutcome {
        // v2.0, the common case, goes straight to its small view: the `TelemetryReport`
        // enum is sized for v0.5/v1.0, which embed a whole inner `Packet`.
        let v20 = payload.first().is_some_and(|b| b >> 4 == 2);
        if v20
            && self.fast_path
            && crate::fast::v20_record(payload, &self.opts, meta, &mut self.record, &mut |f| {
                sink.flow(f)
            })
        {
            self.fast_records += 1;
            sink.record(&self.record);
            return DecodeOutcome {
                records: 1,
                error: None,
            };
        }
        let emit = |r: &ReportRecord| sink.record(r);
        let result = if v20 {
            ReportV20::parse(Bytes::new(payload), &self.opts)
                .map(|r| r.for_each_record(meta, &mut self.record, emit))
        } else {
            TelemetryReport::parse(payload, &self.opts)
                .map(|r| r.for_each_record(meta, &mut self.record, emit))
        };
        result.unwrap_or_else(|e| DecodeOutcome {
            records: 0,
            error: Some(e),
        })
    }
}
