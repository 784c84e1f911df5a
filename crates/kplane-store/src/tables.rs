//! The store's tables and their schemas: the contract between the writers (the stream
//! processor, the knowledge service) and every reader (the API, `kplane query`, DuckDB).
//!
//! The window tables' schemas are what the processor's SQL produces. They are recorded here
//! as Arrow IPC schema files (`schemas/<table>.arrow`), so a reader needs no processor to
//! know them; the processor's test `planned_schemas_are_the_stores` fails when its queries
//! drift from them, and `make bless` records them anew.

use std::sync::{Arc, LazyLock};

use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use kplane_model::incidents::table::{INCIDENTS, incidents_schema};
use kplane_model::knowledge_tables;
use kplane_model::schema::col;

/// The immediate-events table (written by the processor as they are raised).
pub const ALERTS: &str = "alerts";

/// The switches' merged change log: every collector's view of a switch's queues and ports
/// folded into one state per key by the events lane that owns the switch (written by the
/// processor as the changes are decided).
pub const SWITCH_CHANGES: &str = "switch_changes";

/// The processor's window tables, in its query order, with their recorded schemas.
pub const WINDOW_TABLES: [(&str, &[u8]); 9] = [
    ("flows", include_bytes!("../schemas/flows.arrow")),
    (
        "hop_latency",
        include_bytes!("../schemas/hop_latency.arrow"),
    ),
    ("queues", include_bytes!("../schemas/queues.arrow")),
    ("links", include_bytes!("../schemas/links.arrow")),
    ("sources", include_bytes!("../schemas/sources.arrow")),
    (
        "destinations",
        include_bytes!("../schemas/destinations.arrow"),
    ),
    (
        "event_counts",
        include_bytes!("../schemas/event_counts.arrow"),
    ),
    ("int_label", include_bytes!("../schemas/int_label.arrow")),
    (
        "int_label_exports",
        include_bytes!("../schemas/int_label_exports.arrow"),
    ),
];

/// A schema as an Arrow IPC stream without batches (what `schemas/*.arrow` hold).
pub fn encode_schema(schema: &Schema) -> Result<Vec<u8>, arrow_schema::ArrowError> {
    let mut w = arrow_ipc::writer::StreamWriter::try_new(Vec::new(), schema)?;
    w.finish()?;
    w.into_inner()
}

fn decode_schema(bytes: &[u8]) -> Result<SchemaRef, arrow_schema::ArrowError> {
    Ok(arrow_ipc::reader::StreamReader::try_new(std::io::Cursor::new(bytes), None)?.schema())
}

static WINDOW_SCHEMAS: LazyLock<Vec<(&'static str, SchemaRef)>> = LazyLock::new(|| {
    WINDOW_TABLES
        .iter()
        .map(|(name, bytes)| {
            let schema = decode_schema(bytes).unwrap_or_else(|e| {
                panic!("schemas/{name}.arrow does not decode ({e}); run `make bless`")
            });
            (*name, schema)
        })
        .collect()
});

/// The window tables' schemas, in the processor's query order.
pub fn window_schemas() -> &'static [(&'static str, SchemaRef)] {
    &WINDOW_SCHEMAS
}

static ALERTS_SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
    let ts = DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into()));
    let list = DataType::List(Arc::new(Field::new("item", DataType::UInt32, true)));
    Arc::new(Schema::new(vec![
        Field::new("time", ts.clone(), false),
        Field::new("detected", ts, false),
        Field::new("partition", DataType::UInt32, false),
        Field::new("kind", DataType::Utf8, false),
        Field::new(col::SRC_IP, DataType::FixedSizeBinary(16), true),
        Field::new(col::DST_IP, DataType::FixedSizeBinary(16), true),
        Field::new(col::SRC_PORT, DataType::UInt16, true),
        Field::new(col::DST_PORT, DataType::UInt16, true),
        Field::new(col::PROTOCOL, DataType::UInt8, true),
        Field::new(col::NODE_ID, DataType::UInt32, true),
        Field::new(col::QUEUE_ID, DataType::UInt8, true),
        Field::new(col::EGRESS_PORT, DataType::UInt32, true),
        Field::new(col::METRIC, DataType::Utf8, true),
        Field::new(col::VALUE, DataType::UInt64, true),
        Field::new("threshold", DataType::UInt64, true),
        Field::new(col::PATH, list.clone(), false),
        Field::new("previous_path", list, false),
    ]))
});

/// The `alerts` table's schema.
pub fn alerts_schema() -> SchemaRef {
    ALERTS_SCHEMA.clone()
}

static SWITCH_CHANGES_SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
    let ts = DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into()));
    Arc::new(Schema::new(vec![
        Field::new("time", ts, false),
        Field::new("kind", DataType::Utf8, false),
        Field::new(col::METRIC, DataType::Utf8, false),
        Field::new(col::NODE_ID, DataType::UInt32, false),
        Field::new(col::QUEUE_ID, DataType::UInt8, true),
        Field::new(col::EGRESS_PORT, DataType::UInt32, true),
        Field::new(col::VALUE, DataType::UInt64, false),
        Field::new(col::PREVIOUS, DataType::UInt64, true),
        Field::new(col::THRESHOLD, DataType::UInt64, true),
        Field::new("views", DataType::UInt32, false),
    ]))
});

/// The `switch_changes` table's schema.
pub fn switch_changes_schema() -> SchemaRef {
    SWITCH_CHANGES_SCHEMA.clone()
}

/// Every table of the store with its schema: the window tables, `alerts`, `switch_changes`,
/// the knowledge service's `anomalies` and `forecasts`, and the API's `incidents`.
pub fn all() -> Vec<(&'static str, SchemaRef)> {
    let mut tables = window_schemas().to_vec();
    tables.push((ALERTS, alerts_schema()));
    tables.push((SWITCH_CHANGES, switch_changes_schema()));
    tables.push((
        knowledge_tables::ANOMALIES,
        knowledge_tables::anomalies_schema(),
    ));
    tables.push((
        knowledge_tables::FORECASTS,
        knowledge_tables::forecasts_schema(),
    ));
    tables.push((INCIDENTS, incidents_schema()));
    tables
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_recorded_schema_decodes_and_round_trips() {
        for (name, schema) in window_schemas() {
            assert!(!schema.fields().is_empty(), "{name}");
            let again = decode_schema(&encode_schema(schema).unwrap()).unwrap();
            assert_eq!(&again, schema, "{name}");
        }
        let names: Vec<&str> = all().iter().map(|(n, _)| *n).collect();
        assert_eq!(names.len(), 14);
        assert!(names.contains(&"flows") && names.contains(&"anomalies"));
    }
}
