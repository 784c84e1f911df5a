//! Arrow schemas of the records, defined once for every service.
//!
//! * [`reports`]: one row per report, hops as a `List<Struct>` column — the bus encoding.
//! * [`hops`]: one row per (report, hop), flow key and envelope repeated — the shape the
//!   per-hop analytics (latency, queues, links) query.
//!
//! Addresses are `FixedSizeBinary(16)` (IPv4 as IPv4-mapped IPv6, see [`crate::ip_to_16`]).
//! Every hop field is nullable: null when the hop did not carry it or the device wrote
//! all-ones ("unavailable").

use std::sync::{Arc, LazyLock};

use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef, TimeUnit};

use crate::HopField;

/// Column names, so that producers and queries never spell them twice.
pub mod col {
    pub const RECEIVED: &str = "received";
    pub const FORMAT: &str = "format";
    pub const EMBEDDED: &str = "embedded";
    pub const EXPORTER_IP: &str = "exporter_ip";
    pub const EXPORTER_PORT: &str = "exporter_port";
    pub const HW_ID: &str = "hw_id";
    pub const NODE_ID: &str = "node_id";
    pub const SEQUENCE: &str = "sequence";
    pub const FLAGS: &str = "flags";
    pub const DROP_REASON: &str = "drop_reason";
    pub const TIMESTAMP_NS: &str = "timestamp_ns";
    pub const PACKET_LENGTH: &str = "packet_length";
    pub const SRC_IP: &str = "src_ip";
    pub const DST_IP: &str = "dst_ip";
    pub const SRC_PORT: &str = "src_port";
    pub const DST_PORT: &str = "dst_port";
    pub const PROTOCOL: &str = "protocol";
    pub const HOPS: &str = "hops";
    pub const HOP_INDEX: &str = "hop_index";
    pub const HOP_COUNT: &str = "hop_count";
    pub const REPORTING_NODE_ID: &str = "reporting_node_id";
    pub const REPORT_DROP_REASON: &str = "report_drop_reason";
    pub const KIND: &str = "kind";
    pub const METRIC: &str = "metric";
    pub const DETECTOR: &str = "detector";
    pub const QUEUE_ID: &str = "queue_id";
    pub const EGRESS_PORT: &str = "egress_port";
    pub const VALUE: &str = "value";
    pub const PREVIOUS: &str = "previous";
    pub const THRESHOLD: &str = "threshold";
    pub const PATH: &str = "path";
}

/// Arrow type of a hop field.
pub fn hop_field_type(field: HopField) -> DataType {
    match field.max_bits() {
        8 => DataType::UInt8,
        16 => DataType::UInt16,
        64 => DataType::UInt64,
        _ => DataType::UInt32,
    }
}

pub(crate) fn hop_fields() -> Fields {
    HopField::ALL
        .iter()
        .map(|f| Field::new(f.name(), hop_field_type(*f), true))
        .collect()
}

fn envelope_fields() -> Vec<Field> {
    vec![
        Field::new(
            col::RECEIVED,
            DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into())),
            false,
        ),
        Field::new(col::FORMAT, DataType::Utf8, false),
        Field::new(col::EMBEDDED, DataType::Utf8, true),
        Field::new(col::EXPORTER_IP, DataType::FixedSizeBinary(16), true),
        Field::new(col::EXPORTER_PORT, DataType::UInt16, true),
        Field::new(col::HW_ID, DataType::UInt8, false),
        Field::new(col::NODE_ID, DataType::UInt32, true),
        Field::new(col::SEQUENCE, DataType::UInt32, true),
        Field::new(col::FLAGS, DataType::UInt8, false),
        Field::new(col::DROP_REASON, DataType::UInt8, true),
        Field::new(col::TIMESTAMP_NS, DataType::UInt64, true),
        Field::new(col::PACKET_LENGTH, DataType::UInt32, true),
    ]
}

/// The flow 5-tuple columns, as every table that carries a flow names and types them.
pub fn flow_fields() -> Vec<Field> {
    vec![
        Field::new(col::SRC_IP, DataType::FixedSizeBinary(16), true),
        Field::new(col::DST_IP, DataType::FixedSizeBinary(16), true),
        Field::new(col::SRC_PORT, DataType::UInt16, true),
        Field::new(col::DST_PORT, DataType::UInt16, true),
        Field::new(col::PROTOCOL, DataType::UInt8, true),
    ]
}

static REPORTS: LazyLock<SchemaRef> = LazyLock::new(|| {
    let mut fields = envelope_fields();
    fields.extend(flow_fields());
    fields.push(Field::new(col::HOP_COUNT, DataType::UInt8, false));
    let hop = Field::new("item", DataType::Struct(hop_fields()), false);
    fields.push(Field::new(col::HOPS, DataType::List(Arc::new(hop)), false));
    Arc::new(Schema::new(fields))
});

static HOPS: LazyLock<SchemaRef> = LazyLock::new(|| {
    let mut fields = envelope_fields();
    // In the per-hop table the envelope's node and drop reason are the reporting node's,
    // named apart from the hop's own columns.
    for f in &mut fields {
        if f.name() == col::NODE_ID {
            *f = Field::new(col::REPORTING_NODE_ID, DataType::UInt32, true);
        } else if f.name() == col::DROP_REASON {
            *f = Field::new(col::REPORT_DROP_REASON, DataType::UInt8, true);
        }
    }
    fields.extend(flow_fields());
    fields.push(Field::new(col::HOP_INDEX, DataType::UInt8, false));
    fields.extend(hop_fields().iter().map(|f| f.as_ref().clone()));
    Arc::new(Schema::new(fields))
});

static EVENTS: LazyLock<SchemaRef> = LazyLock::new(|| {
    let mut fields = vec![
        Field::new(
            col::RECEIVED,
            DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into())),
            false,
        ),
        Field::new(col::KIND, DataType::Utf8, false),
        Field::new(col::METRIC, DataType::Utf8, false),
        Field::new(col::DETECTOR, DataType::Utf8, false),
    ];
    fields.extend(flow_fields());
    fields.extend([
        Field::new(col::NODE_ID, DataType::UInt32, true),
        Field::new(col::QUEUE_ID, DataType::UInt8, true),
        Field::new(col::EGRESS_PORT, DataType::UInt32, true),
        Field::new(col::HW_ID, DataType::UInt8, true),
        Field::new(col::VALUE, DataType::UInt64, true),
        Field::new(col::PREVIOUS, DataType::UInt64, true),
        Field::new(
            col::PATH,
            DataType::List(Arc::new(Field::new("item", DataType::UInt32, false))),
            false,
        ),
        Field::new(col::EXPORTER_IP, DataType::FixedSizeBinary(16), true),
        Field::new(col::EXPORTER_PORT, DataType::UInt16, true),
        Field::new(col::THRESHOLD, DataType::UInt64, true),
    ]);
    Arc::new(Schema::new(fields))
});

/// One row per event (topic `int.events`).
pub fn events() -> SchemaRef {
    EVENTS.clone()
}

/// One row per report.
pub fn reports() -> SchemaRef {
    REPORTS.clone()
}

/// One row per (report, hop).
pub fn hops() -> SchemaRef {
    HOPS.clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas_have_unique_names_and_every_hop_field() {
        for schema in [reports(), hops(), events()] {
            let mut names: Vec<_> = schema.fields().iter().map(|f| f.name().clone()).collect();
            let n = names.len();
            names.sort();
            names.dedup();
            assert_eq!(names.len(), n, "duplicate column in {schema:?}");
        }
        for f in HopField::ALL {
            assert!(hops().field_with_name(f.name()).is_ok(), "{}", f.name());
        }
        assert!(reports().field_with_name(col::HOPS).is_ok());
    }
}
