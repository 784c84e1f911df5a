//! The knowledge service's store tables, defined once: `anomalies` (every phase of every
//! episode) and `forecasts`, Parquet under `<store-dir>/tables/<table>/date=…/hour=…/` beside
//! the stream processor's tables, so that `kplane query` and `/v1/query` join them with the
//! telemetry. Each row carries the record's columns for SQL and, for anomalies, the whole
//! record as JSON (`record`: explanation, blast radius, recommendations) to read it back.

use std::sync::{Arc, LazyLock};

use arrow_array::cast::AsArray;
use arrow_array::{
    ArrayRef, Float64Array, RecordBatch, StringArray, TimestampNanosecondArray, UInt32Array,
    UInt64Array,
};
use arrow_schema::{ArrowError, DataType, Field, Schema, SchemaRef, TimeUnit};

use crate::results::{Anomaly, Forecast};

pub const ANOMALIES: &str = "anomalies";
pub const FORECASTS: &str = "forecasts";

fn ts() -> DataType {
    DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into()))
}

static ANOMALIES_SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("entity_kind", DataType::Utf8, false),
        Field::new("entity", DataType::Utf8, false),
        Field::new("type", DataType::Utf8, false),
        Field::new("phase", DataType::Utf8, false),
        Field::new("confidence", DataType::Float64, false),
        Field::new("score", DataType::Float64, false),
        Field::new("threshold", DataType::Float64, false),
        Field::new("start", ts(), false),
        Field::new("end", ts(), true),
        Field::new("last", ts(), false),
        Field::new("windows", DataType::UInt32, false),
        Field::new("detected", ts(), false),
        Field::new("model_version", DataType::UInt64, false),
        Field::new("summary", DataType::Utf8, false),
        Field::new("record", DataType::Utf8, false),
    ]))
});

static FORECASTS_SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
    Arc::new(Schema::new(vec![
        Field::new("series", DataType::Utf8, false),
        Field::new("entity", DataType::Utf8, false),
        Field::new("window_end", ts(), false),
        Field::new("horizon_windows", DataType::UInt32, false),
        Field::new("predicted", DataType::Float64, false),
        Field::new("last_value", DataType::Float64, false),
        Field::new("observed_end", ts(), false),
        Field::new("ewma", DataType::Float64, false),
        Field::new("model_version", DataType::UInt64, false),
    ]))
});

pub fn anomalies_schema() -> SchemaRef {
    ANOMALIES_SCHEMA.clone()
}

pub fn forecasts_schema() -> SchemaRef {
    FORECASTS_SCHEMA.clone()
}

fn strings<'a>(v: impl Iterator<Item = &'a str>) -> ArrayRef {
    Arc::new(StringArray::from_iter_values(v))
}

fn times(v: impl Iterator<Item = Option<i64>>) -> ArrayRef {
    Arc::new(TimestampNanosecondArray::from_iter(v).with_timezone("UTC"))
}

fn floats(v: impl Iterator<Item = f64>) -> ArrayRef {
    Arc::new(Float64Array::from_iter_values(v))
}

pub fn anomalies_batch(rows: &[Anomaly]) -> Result<RecordBatch, ArrowError> {
    let records: Vec<String> = rows
        .iter()
        .map(|a| serde_json::to_string(a).unwrap_or_default())
        .collect();
    RecordBatch::try_new(
        anomalies_schema(),
        vec![
            strings(rows.iter().map(|a| a.id.as_str())),
            strings(rows.iter().map(|a| a.entity_kind.as_str())),
            strings(rows.iter().map(|a| a.entity.as_str())),
            strings(rows.iter().map(|a| a.anomaly_type.as_str())),
            strings(rows.iter().map(|a| a.phase.as_str())),
            floats(rows.iter().map(|a| a.confidence)),
            floats(rows.iter().map(|a| a.score)),
            floats(rows.iter().map(|a| a.threshold)),
            times(rows.iter().map(|a| Some(a.start_ns))),
            times(rows.iter().map(|a| a.end_ns)),
            times(rows.iter().map(|a| Some(a.last_ns))),
            Arc::new(UInt32Array::from_iter_values(
                rows.iter().map(|a| a.windows),
            )),
            times(rows.iter().map(|a| Some(a.detected_ns))),
            Arc::new(UInt64Array::from_iter_values(
                rows.iter().map(|a| a.model_version),
            )),
            strings(rows.iter().map(|a| a.explanation.summary.as_str())),
            strings(records.iter().map(String::as_str)),
        ],
    )
}

pub fn forecasts_batch(rows: &[Forecast]) -> Result<RecordBatch, ArrowError> {
    RecordBatch::try_new(
        forecasts_schema(),
        vec![
            strings(rows.iter().map(|f| f.series.as_str())),
            strings(rows.iter().map(|f| f.entity.as_str())),
            times(rows.iter().map(|f| Some(f.window_end_ns))),
            Arc::new(UInt32Array::from_iter_values(
                rows.iter().map(|f| f.horizon_windows),
            )),
            floats(rows.iter().map(|f| f.predicted)),
            floats(rows.iter().map(|f| f.last_value)),
            times(rows.iter().map(|f| Some(f.observed_end_ns))),
            floats(rows.iter().map(|f| f.ewma)),
            Arc::new(UInt64Array::from_iter_values(
                rows.iter().map(|f| f.model_version),
            )),
        ],
    )
}

/// The anomaly records of a batch of the `anomalies` table, and how many rows did not decode.
pub fn anomalies_from_batch(b: &RecordBatch) -> (Vec<Anomaly>, usize) {
    let Some(col) = b.column_by_name("record") else {
        return (Vec::new(), b.num_rows());
    };
    let Some(col) = col.as_string_opt::<i32>() else {
        return (Vec::new(), b.num_rows());
    };
    let mut bad = 0;
    let out = col
        .iter()
        .filter_map(|r| {
            let a = r.and_then(|r| serde_json::from_str(r).ok());
            bad += usize::from(a.is_none());
            a
        })
        .collect();
    (out, bad)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{AnomalyPhase, AnomalyType, EntityKind, Explanation};

    #[test]
    fn an_anomaly_row_carries_its_record_and_reads_back() {
        let a = Anomaly {
            id: "destination:10.0.0.2:1".into(),
            entity_kind: EntityKind::Destination,
            entity: "10.0.0.2".into(),
            anomaly_type: AnomalyType::Ddos,
            confidence: 0.9,
            score: 12.0,
            threshold: 5.0,
            start_ns: 1,
            end_ns: None,
            last_ns: 2,
            windows: 1,
            detected_ns: 3,
            phase: AnomalyPhase::Start,
            model_version: 4,
            explanation: Explanation::default(),
            recommendations: vec![serde_json::json!({"kind": "block"})],
            settled: false,
        };
        let b = anomalies_batch(std::slice::from_ref(&a)).unwrap();
        assert_eq!(b.schema(), anomalies_schema());
        assert_eq!(
            b.column_by_name("type")
                .unwrap()
                .as_string::<i32>()
                .value(0),
            "ddos"
        );
        assert!(b.column_by_name("end").unwrap().is_null(0));
        assert_eq!(anomalies_from_batch(&b), (vec![a], 0));
        let f = Forecast {
            series: "link_utilization".into(),
            entity: "1:2".into(),
            window_end_ns: 2,
            horizon_windows: 1,
            predicted: 0.5,
            last_value: 0.4,
            observed_end_ns: 1,
            ewma: 0.45,
            model_version: 1,
        };
        assert_eq!(forecasts_batch(&[f]).unwrap().num_rows(), 1);
    }
}
