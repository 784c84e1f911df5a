//! The `incidents` store table, defined once: every resolved incident, Parquet under
//! `<store-dir>/tables/incidents/date=…/hour=…/` beside the telemetry, so that `kplane query`
//! and `/v1/query` join incidents with the windows they explain. Each row carries the summary's
//! columns for SQL and the whole incident as JSON (`record`: members, top flows, paths,
//! timeline) to read it back.

use std::sync::{Arc, LazyLock};

use arrow_array::{ArrayRef, RecordBatch, StringArray, TimestampNanosecondArray, UInt64Array};
use arrow_schema::{ArrowError, DataType, Field, Schema, SchemaRef, TimeUnit};
use serde_json::Value;

pub const INCIDENTS: &str = "incidents";

static SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
    let ts = || DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into()));
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("root_kind", DataType::Utf8, false),
        Field::new("root", DataType::Utf8, false),
        Field::new("kind", DataType::Utf8, false),
        Field::new("severity", DataType::Utf8, false),
        Field::new("start", ts(), false),
        Field::new("end", ts(), true),
        Field::new("members", DataType::UInt64, false),
        Field::new("flows", DataType::UInt64, false),
        Field::new("summary", DataType::Utf8, false),
        Field::new("record", DataType::Utf8, false),
    ]))
});

pub fn incidents_schema() -> SchemaRef {
    SCHEMA.clone()
}

/// Rows of incidents given as [`super::Incident::detail`].
pub fn incidents_batch(rows: &[Value]) -> Result<RecordBatch, ArrowError> {
    let text = |k: &'static str| -> ArrayRef {
        Arc::new(StringArray::from_iter_values(
            rows.iter().map(|r| r[k].as_str().unwrap_or_default()),
        ))
    };
    let root = |k: &'static str| -> ArrayRef {
        Arc::new(StringArray::from_iter_values(
            rows.iter()
                .map(|r| r["root"][k].as_str().unwrap_or_default()),
        ))
    };
    let time = |k: &'static str| -> ArrayRef {
        Arc::new(
            TimestampNanosecondArray::from_iter(rows.iter().map(|r| r[k].as_i64()))
                .with_timezone("UTC"),
        )
    };
    let count = |k: &'static str| -> ArrayRef {
        Arc::new(UInt64Array::from_iter_values(
            rows.iter().map(|r| r[k].as_u64().unwrap_or(0)),
        ))
    };
    let records: Vec<String> = rows.iter().map(Value::to_string).collect();
    RecordBatch::try_new(
        incidents_schema(),
        vec![
            text("id"),
            root("kind"),
            root("entity"),
            text("kind"),
            text("severity"),
            time("start_ns"),
            time("end_ns"),
            count("members"),
            count("flows"),
            text("summary"),
            Arc::new(StringArray::from_iter_values(
                records.iter().map(String::as_str),
            )),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resolved_incident_is_one_row_with_its_record() {
        let detail = serde_json::json!({
            "id": "switch-1-00000001", "root": {"kind": "switch", "entity": "5"},
            "kind": "congestion", "severity": "warning", "start_ns": 1, "end_ns": 9,
            "members": 3, "flows": 2, "summary": "congestion at switch 5", "member_list": [],
        });
        let b = incidents_batch(std::slice::from_ref(&detail)).unwrap();
        assert_eq!(b.num_rows(), 1);
        assert_eq!(b.schema(), incidents_schema());
        use arrow_array::cast::AsArray;
        let record = b
            .column_by_name("record")
            .unwrap()
            .as_string::<i32>()
            .value(0);
        assert_eq!(serde_json::from_str::<Value>(record).unwrap(), detail);
    }
}
