//! Bus payloads → Arrow batches: Arrow IPC streams as they are, JSON lines (the collector's
//! `encoding = "json"`) through the shared record model's batch builders.

use std::net::IpAddr;

use arrow_array::RecordBatch;
use kplane_bus::content_types;
use kplane_model::batch::{EventBatchBuilder, ReportBatchBuilder};
use kplane_model::{
    Detector, EventKind, EventRow, FlowKey, HopField, HopRecord, Metric, ReportFlags, ReportRecord,
};
use serde_json::Value;

use crate::error::ProcessorError;

/// Every batch of a payload; an error names what was wrong (the whole message is rejected).
pub fn batches(
    content_type: Option<&str>,
    payload: &[u8],
    reports: bool,
) -> Result<Vec<RecordBatch>, ProcessorError> {
    decode(content_type, payload, reports).map_err(ProcessorError::Undecodable)
}

fn decode(
    content_type: Option<&str>,
    payload: &[u8],
    reports: bool,
) -> Result<Vec<RecordBatch>, String> {
    if content_type == Some(content_types::JSON_LINES) {
        let lines = payload
            .split(|&b| b == b'\n')
            .filter(|l| !l.iter().all(u8::is_ascii_whitespace));
        let values = lines
            .map(|l| serde_json::from_slice::<Value>(l).map_err(|e| e.to_string()))
            .collect::<Result<Vec<_>, _>>()?;
        return if reports {
            json_reports(&values)
        } else {
            json_events(&values)
        }
        .map(|b| vec![b]);
    }
    arrow_ipc::reader::StreamReader::try_new(std::io::Cursor::new(payload), None)
        .and_then(|r| r.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("not an Arrow IPC stream: {e}"))
}

fn u64_of(v: &Value, k: &str) -> Option<u64> {
    v.get(k).and_then(Value::as_u64)
}

fn flow_of(v: &Value) -> Result<Option<FlowKey>, String> {
    let Some(f) = v.get("flow").filter(|f| !f.is_null()) else {
        return Ok(None);
    };
    let ip = |k: &str| -> Result<IpAddr, String> {
        f.get(k)
            .and_then(Value::as_str)
            .ok_or(format!("flow.{k} missing"))?
            .parse()
            .map_err(|e| format!("flow.{k}: {e}"))
    };
    Ok(Some(FlowKey {
        src_ip: ip("src_ip")?,
        dst_ip: ip("dst_ip")?,
        src_port: u64_of(f, "src_port").unwrap_or(0) as u16,
        dst_port: u64_of(f, "dst_port").unwrap_or(0) as u16,
        protocol: u64_of(f, "protocol").unwrap_or(0) as u8,
    }))
}

fn json_reports(values: &[Value]) -> Result<RecordBatch, String> {
    let mut b = ReportBatchBuilder::new(values.len());
    let mut rec = ReportRecord::default();
    for v in values {
        rec.clear();
        let e = &mut rec.envelope;
        e.received_ns = u64_of(v, "received_ns").ok_or("received_ns missing")?;
        e.hw_id = u64_of(v, "hw_id").unwrap_or(0) as u8;
        e.node_id = u64_of(v, "node_id").map(|n| n as u32);
        e.sequence = u64_of(v, "sequence").map(|n| n as u32);
        e.flags = ReportFlags(u64_of(v, "flags").unwrap_or(0) as u8);
        e.timestamp_ns = u64_of(v, "timestamp_ns");
        e.packet_length = u64_of(v, "packet_length").map(|n| n as u32);
        rec.flow = flow_of(v)?;
        for h in v
            .get("hops")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let mut hop = HopRecord::default();
            for field in HopField::ALL {
                match h.get(field.name()) {
                    Some(Value::String(s)) if s == "unavailable" => hop.set_unavailable(field),
                    Some(x) => hop.set(
                        field,
                        x.as_u64()
                            .ok_or(format!("hop field {} is not a number", field.name()))?,
                    ),
                    None => {}
                }
            }
            rec.hops.push(hop);
        }
        b.append(&rec).map_err(|e| e.to_string())?;
    }
    b.finish().map_err(|e| e.to_string())
}

fn json_events(values: &[Value]) -> Result<RecordBatch, String> {
    let mut b = EventBatchBuilder::new(values.len());
    for v in values {
        let name = |k: &str| {
            v.get(k)
                .and_then(Value::as_str)
                .ok_or(format!("{k} missing"))
        };
        let metric = name("metric")?;
        let kind = name("kind")?;
        let metric = Metric::ALL
            .into_iter()
            .find(|m| m.as_str() == metric)
            .ok_or(format!("unknown metric {metric:?}"))?;
        let kind = EventKind::ALL
            .into_iter()
            .find(|k| k.as_str() == kind)
            .ok_or(format!("unknown kind {kind:?}"))?;
        let row = EventRow {
            received_ns: u64_of(v, "received_ns").ok_or("received_ns missing")?,
            kind,
            metric,
            detector: Detector::Threshold,
            flow: flow_of(v)?,
            node_id: u64_of(v, "node_id").map(|n| n as u32),
            queue_id: u64_of(v, "queue_id").map(|n| n as u8),
            egress_port: u64_of(v, "egress_port").map(|n| n as u32),
            hw_id: u64_of(v, "hw_id").map(|n| n as u8),
            value: u64_of(v, "value"),
            previous: u64_of(v, "previous"),
            threshold: u64_of(v, "threshold"),
            path: &[],
            exporter: None,
        };
        b.append(&row).map_err(|e| e.to_string())?;
    }
    b.finish().map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    fn record() -> ReportRecord {
        let mut r = ReportRecord::default();
        r.envelope.received_ns = 1_000;
        r.envelope.timestamp_ns = Some(900);
        r.envelope.node_id = Some(3);
        r.envelope.sequence = Some(7);
        r.envelope.flags.set(ReportFlags::INTERMEDIATE, true);
        r.envelope.packet_length = Some(1_500);
        r.flow = Some(FlowKey {
            src_ip: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
            dst_ip: "2001:db8::1".parse().unwrap(),
            src_port: 1,
            dst_port: 2,
            protocol: 17,
        });
        for n in [1u64, 3] {
            let mut h = HopRecord::default();
            h.set(HopField::NodeId, n);
            h.set(HopField::HopLatency, 100 * n);
            h.set_unavailable(HopField::QueueOccupancy);
            r.hops.push(h);
        }
        r
    }

    #[test]
    fn json_lines_give_the_same_batch_as_arrow() {
        let r = record();
        let mut direct = ReportBatchBuilder::new(1);
        direct.append(&r).unwrap();
        let direct = direct.finish().unwrap();
        let line = serde_json::to_string(&r).unwrap() + "\n";
        let parsed = batches(Some(content_types::JSON_LINES), line.as_bytes(), true).unwrap();
        assert_eq!(parsed.len(), 1);
        // Everything the analytics read is equal (the format name is not carried over).
        for c in [
            "received",
            "node_id",
            "sequence",
            "flags",
            "timestamp_ns",
            "src_ip",
            "dst_ip",
            "src_port",
            "dst_port",
            "protocol",
            "hop_count",
            "hops",
        ] {
            assert_eq!(
                parsed[0].column_by_name(c).unwrap().to_data(),
                direct.column_by_name(c).unwrap().to_data(),
                "{c}"
            );
        }
    }

    #[test]
    fn bad_payloads_are_errors_not_panics() {
        assert!(batches(Some(content_types::JSON_LINES), b"{not json}\n", true).is_err());
        assert!(
            batches(
                Some(content_types::JSON_LINES),
                b"{\"kind\":\"new\"}\n",
                false
            )
            .is_err()
        );
        assert!(batches(Some(content_types::ARROW), b"garbage", true).is_err());
        let ev = br#"{"received_ns":5,"kind":"loss","metric":"report_loss","node_id":4,"value":9}"#;
        let b = batches(Some(content_types::JSON_LINES), ev, false).unwrap();
        assert_eq!(b[0].num_rows(), 1);
    }
}
