//! Arrow `RecordBatch` builders for the records, matching [`crate::schema`] exactly.
//! (Feature `arrow`: only the crates that build batches pay for arrow-array.)

use std::net::SocketAddr;
use std::sync::Arc;

use arrow_array::builder::{
    ArrayBuilder, FixedSizeBinaryBuilder, ListBuilder, StringBuilder, TimestampNanosecondBuilder,
    UInt8Builder, UInt16Builder, UInt32Builder, UInt64Builder,
};
use arrow_array::{
    ArrayRef, ListArray, RecordBatch, StructArray, UInt8Array, UInt16Array, UInt32Array,
    UInt64Array, new_null_array,
};
use arrow_buffer::OffsetBuffer;
use arrow_schema::{ArrowError, DataType, Field};

use crate::schema::{self, hop_field_type, hop_fields};
use crate::{EventRow, FlowKey, HopField, HopRecord, ReportRecord, ip_to_16};

/// The flow 5-tuple columns, shared by both builders.
#[derive(Debug)]
struct FlowColumns {
    src_ip: FixedSizeBinaryBuilder,
    dst_ip: FixedSizeBinaryBuilder,
    src_port: UInt16Builder,
    dst_port: UInt16Builder,
    protocol: UInt8Builder,
}

impl FlowColumns {
    fn new(cap: usize) -> Self {
        Self {
            src_ip: FixedSizeBinaryBuilder::with_capacity(cap, 16),
            dst_ip: FixedSizeBinaryBuilder::with_capacity(cap, 16),
            src_port: UInt16Builder::with_capacity(cap),
            dst_port: UInt16Builder::with_capacity(cap),
            protocol: UInt8Builder::with_capacity(cap),
        }
    }

    fn append(&mut self, flow: Option<&FlowKey>) -> Result<(), ArrowError> {
        match flow {
            Some(f) => {
                self.src_ip.append_value(ip_to_16(f.src_ip))?;
                self.dst_ip.append_value(ip_to_16(f.dst_ip))?;
                self.src_port.append_value(f.src_port);
                self.dst_port.append_value(f.dst_port);
                self.protocol.append_value(f.protocol);
            }
            None => {
                self.src_ip.append_null();
                self.dst_ip.append_null();
                self.src_port.append_null();
                self.dst_port.append_null();
                self.protocol.append_null();
            }
        }
        Ok(())
    }

    fn finish(&mut self) -> [ArrayRef; 5] {
        [
            Arc::new(self.src_ip.finish()),
            Arc::new(self.dst_ip.finish()),
            Arc::new(self.src_port.finish()),
            Arc::new(self.dst_port.finish()),
            Arc::new(self.protocol.finish()),
        ]
    }
}

fn append_exporter(
    ip: &mut FixedSizeBinaryBuilder,
    port: &mut UInt16Builder,
    exporter: Option<SocketAddr>,
) -> Result<(), ArrowError> {
    match exporter {
        Some(a) => {
            ip.append_value(ip_to_16(a.ip()))?;
            port.append_value(a.port());
        }
        None => {
            ip.append_null();
            port.append_null();
        }
    }
    Ok(())
}

/// Builds `schema::events()` batches.
#[derive(Debug)]
pub struct EventBatchBuilder {
    received: TimestampNanosecondBuilder,
    kind: StringBuilder,
    metric: StringBuilder,
    detector: StringBuilder,
    flow: FlowColumns,
    node_id: UInt32Builder,
    queue_id: UInt8Builder,
    egress_port: UInt32Builder,
    hw_id: UInt8Builder,
    value: UInt64Builder,
    previous: UInt64Builder,
    path: ListBuilder<UInt32Builder>,
    exporter_ip: FixedSizeBinaryBuilder,
    exporter_port: UInt16Builder,
    threshold: UInt64Builder,
}

impl EventBatchBuilder {
    pub fn new(cap: usize) -> Self {
        Self {
            received: TimestampNanosecondBuilder::with_capacity(cap).with_timezone("UTC"),
            kind: StringBuilder::with_capacity(cap, cap * 6),
            metric: StringBuilder::with_capacity(cap, cap * 16),
            detector: StringBuilder::with_capacity(cap, cap * 9),
            flow: FlowColumns::new(cap),
            node_id: UInt32Builder::with_capacity(cap),
            queue_id: UInt8Builder::with_capacity(cap),
            egress_port: UInt32Builder::with_capacity(cap),
            hw_id: UInt8Builder::with_capacity(cap),
            value: UInt64Builder::with_capacity(cap),
            previous: UInt64Builder::with_capacity(cap),
            path: ListBuilder::new(UInt32Builder::new()).with_field(Field::new(
                "item",
                DataType::UInt32,
                false,
            )),
            exporter_ip: FixedSizeBinaryBuilder::with_capacity(cap, 16),
            exporter_port: UInt16Builder::with_capacity(cap),
            threshold: UInt64Builder::with_capacity(cap),
        }
    }

    pub fn len(&self) -> usize {
        self.received.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn append(&mut self, e: &EventRow<'_>) -> Result<(), ArrowError> {
        self.received.append_value(e.received_ns as i64);
        self.kind.append_value(e.kind.as_str());
        self.metric.append_value(e.metric.as_str());
        self.detector.append_value(e.detector.as_str());
        self.flow.append(e.flow.as_ref())?;
        self.node_id.append_option(e.node_id);
        self.queue_id.append_option(e.queue_id);
        self.egress_port.append_option(e.egress_port);
        self.hw_id.append_option(e.hw_id);
        self.value.append_option(e.value);
        self.previous.append_option(e.previous);
        self.path.values().append_slice(e.path);
        self.path.append(true);
        self.threshold.append_option(e.threshold);
        append_exporter(&mut self.exporter_ip, &mut self.exporter_port, e.exporter)
    }

    /// The batch so far; the builder starts empty again.
    pub fn finish(&mut self) -> Result<RecordBatch, ArrowError> {
        let [a, b, c, d, e] = self.flow.finish();
        RecordBatch::try_new(
            schema::events(),
            vec![
                Arc::new(self.received.finish()),
                Arc::new(self.kind.finish()),
                Arc::new(self.metric.finish()),
                Arc::new(self.detector.finish()),
                a,
                b,
                c,
                d,
                e,
                Arc::new(self.node_id.finish()),
                Arc::new(self.queue_id.finish()),
                Arc::new(self.egress_port.finish()),
                Arc::new(self.hw_id.finish()),
                Arc::new(self.value.finish()),
                Arc::new(self.previous.finish()),
                Arc::new(self.path.finish()),
                Arc::new(self.exporter_ip.finish()),
                Arc::new(self.exporter_port.finish()),
                Arc::new(self.threshold.finish()),
            ],
        )
    }
}

/// Builds `schema::reports()` batches (hops as `List<Struct>`).
#[derive(Debug)]
pub struct ReportBatchBuilder {
    received: TimestampNanosecondBuilder,
    format: StringBuilder,
    embedded: StringBuilder,
    exporter_ip: FixedSizeBinaryBuilder,
    exporter_port: UInt16Builder,
    hw_id: UInt8Builder,
    node_id: UInt32Builder,
    sequence: UInt32Builder,
    flags: UInt8Builder,
    drop_reason: UInt8Builder,
    timestamp_ns: UInt64Builder,
    packet_length: UInt32Builder,
    flow: FlowColumns,
    hop_count: UInt8Builder,
    /// Every hop of the batch, in order, turned into columns by `finish`, and the list's
    /// offsets.
    hops: Vec<HopRecord>,
    hop_offsets: Vec<i32>,
}

/// One hop field's column over the batch's hops, built column at a time (a tight loop per
/// field rather than sixteen builders touched per hop); a field no hop carries is one
/// all-null array.
fn hop_column(field: HopField, hops: &[HopRecord], carried: u16) -> ArrayRef {
    let n = hops.len();
    if carried & field.bit() == 0 {
        return new_null_array(&hop_field_type(field), n);
    }
    let values = hops.iter().map(|h| h.get(field));
    match hop_field_type(field) {
        DataType::UInt8 => Arc::new(values.map(|v| v.map(|v| v as u8)).collect::<UInt8Array>()),
        DataType::UInt16 => Arc::new(values.map(|v| v.map(|v| v as u16)).collect::<UInt16Array>()),
        DataType::UInt64 => Arc::new(values.collect::<UInt64Array>()),
        _ => Arc::new(values.map(|v| v.map(|v| v as u32)).collect::<UInt32Array>()),
    }
}

impl ReportBatchBuilder {
    pub fn new(cap: usize) -> Self {
        Self {
            received: TimestampNanosecondBuilder::with_capacity(cap).with_timezone("UTC"),
            format: StringBuilder::with_capacity(cap, cap * 21),
            embedded: StringBuilder::with_capacity(cap, cap * 9),
            exporter_ip: FixedSizeBinaryBuilder::with_capacity(cap, 16),
            exporter_port: UInt16Builder::with_capacity(cap),
            hw_id: UInt8Builder::with_capacity(cap),
            node_id: UInt32Builder::with_capacity(cap),
            sequence: UInt32Builder::with_capacity(cap),
            flags: UInt8Builder::with_capacity(cap),
            drop_reason: UInt8Builder::with_capacity(cap),
            timestamp_ns: UInt64Builder::with_capacity(cap),
            packet_length: UInt32Builder::with_capacity(cap),
            flow: FlowColumns::new(cap),
            hop_count: UInt8Builder::with_capacity(cap),
            hops: Vec::with_capacity(cap * 6),
            hop_offsets: {
                let mut v = Vec::with_capacity(cap + 1);
                v.push(0);
                v
            },
        }
    }

    pub fn len(&self) -> usize {
        self.received.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn append(&mut self, r: &ReportRecord) -> Result<(), ArrowError> {
        let e = &r.envelope;
        self.received.append_value(e.received_ns as i64);
        self.format.append_value(e.format.as_str());
        self.embedded.append_option(e.embedded.map(|f| f.as_str()));
        append_exporter(&mut self.exporter_ip, &mut self.exporter_port, e.exporter)?;
        self.hw_id.append_value(e.hw_id);
        self.node_id.append_option(e.node_id);
        self.sequence.append_option(e.sequence);
        self.flags.append_value(e.flags.0);
        self.drop_reason.append_option(e.drop_reason);
        self.timestamp_ns.append_option(e.timestamp_ns);
        self.packet_length.append_option(e.packet_length);
        self.flow.append(r.flow.as_ref())?;
        self.hop_count.append_value(r.hops.len().min(255) as u8);
        self.hops.extend_from_slice(&r.hops);
        let end = self.hop_offsets.last().copied().unwrap_or(0) + r.hops.len() as i32;
        self.hop_offsets.push(end);
        Ok(())
    }

    /// The batch so far; the builder starts empty again, with room for as many rows (so the
    /// next batch does not grow its buffers from nothing).
    pub fn finish(&mut self) -> Result<RecordBatch, ArrowError> {
        std::mem::replace(self, Self::new(self.len())).into_batch()
    }

    fn into_batch(mut self) -> Result<RecordBatch, ArrowError> {
        let [a, b, c, d, e] = self.flow.finish();
        let carried = self.hops.iter().fold(0u16, |m, h| m | h.valid_of(u16::MAX));
        let children = HopField::ALL
            .iter()
            .map(|f| hop_column(*f, &self.hops, carried))
            .collect();
        let hop_structs = StructArray::try_new(hop_fields(), children, None)?;
        let item = Field::new("item", DataType::Struct(hop_fields()), false);
        let hops = ListArray::try_new(
            Arc::new(item),
            OffsetBuffer::new(self.hop_offsets.into()),
            Arc::new(hop_structs),
            None,
        )?;
        RecordBatch::try_new(
            schema::reports(),
            vec![
                Arc::new(self.received.finish()),
                Arc::new(self.format.finish()),
                Arc::new(self.embedded.finish()),
                Arc::new(self.exporter_ip.finish()),
                Arc::new(self.exporter_port.finish()),
                Arc::new(self.hw_id.finish()),
                Arc::new(self.node_id.finish()),
                Arc::new(self.sequence.finish()),
                Arc::new(self.flags.finish()),
                Arc::new(self.drop_reason.finish()),
                Arc::new(self.timestamp_ns.finish()),
                Arc::new(self.packet_length.finish()),
                a,
                b,
                c,
                d,
                e,
                Arc::new(self.hop_count.finish()),
                Arc::new(hops),
            ],
        )
    }
}

#[cfg(test)]
mod tests {
    use arrow_array::Array;
    use arrow_array::cast::AsArray;
    use arrow_array::types::UInt32Type;

    use super::*;
    use crate::{Detector, EventKind, HopRecord, Metric};

    fn row(kind: EventKind, metric: Metric) -> EventRow<'static> {
        EventRow {
            received_ns: 5,
            kind,
            metric,
            detector: Detector::Threshold,
            flow: None,
            node_id: None,
            queue_id: None,
            egress_port: None,
            hw_id: None,
            value: None,
            previous: None,
            threshold: None,
            path: &[],
            exporter: None,
        }
    }

    #[test]
    fn event_batches_match_the_schema() {
        let mut b = EventBatchBuilder::new(4);
        let flow = FlowKey {
            src_ip: "10.0.0.1".parse().unwrap(),
            dst_ip: "2001:db8::2".parse().unwrap(),
            src_port: 1,
            dst_port: 2,
            protocol: 17,
        };
        b.append(&EventRow {
            flow: Some(flow),
            value: Some(9),
            path: &[1, 2, 3],
            exporter: Some("10.1.1.1:5000".parse().unwrap()),
            ..row(EventKind::New, Metric::FlowPath)
        })
        .unwrap();
        b.append(&EventRow {
            node_id: Some(3),
            queue_id: Some(1),
            value: Some(100),
            previous: Some(10),
            ..row(EventKind::Change, Metric::QueueOccupancy)
        })
        .unwrap();
        let batch = b.finish().unwrap();
        assert_eq!(batch.num_rows(), 2);
        assert_eq!(batch.schema(), schema::events());
        let path = batch.column_by_name("path").unwrap().as_list::<i32>();
        assert_eq!(
            path.value(0).as_primitive::<UInt32Type>().values(),
            &[1, 2, 3]
        );
        assert!(b.is_empty(), "finish resets");
        assert!(batch.column_by_name("src_ip").unwrap().is_null(1));
    }

    #[test]
    fn report_batches_match_the_schema() {
        let mut b = ReportBatchBuilder::new(2);
        let mut r = ReportRecord::default();
        let mut h = HopRecord::default();
        h.set(HopField::NodeId, 7);
        h.set(HopField::IngressTimestamp, 1 << 40);
        h.set_unavailable(HopField::HopLatency);
        r.hops.push(h);
        r.hops.push(HopRecord::default());
        b.append(&r).unwrap();
        b.append(&ReportRecord::default()).unwrap();
        let batch = b.finish().unwrap();
        assert_eq!(batch.num_rows(), 2);
        assert_eq!(batch.schema(), schema::reports());
        let hops = batch.column_by_name("hops").unwrap().as_list::<i32>();
        let first = hops.value(0);
        let s = first.as_struct();
        assert_eq!(s.len(), 2);
        let node = s
            .column_by_name("node_id")
            .unwrap()
            .as_primitive::<UInt32Type>();
        assert_eq!(node.value(0), 7);
        let lat = s.column_by_name("hop_latency_ns").unwrap();
        assert!(lat.is_null(0), "unavailable is null");
    }
}
