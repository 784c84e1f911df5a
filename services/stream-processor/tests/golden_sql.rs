//! Golden SQL results: a fixed set of reports and events through the window analytics (every
//! result table, two consecutive windows so that path changes show) and through the store's
//! query context; GPINT probe reports through the same analytics. `KPLANE_BLESS=1` (or `make bless`) rewrites `tests/golden/*.txt`.

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;

use arrow_array::RecordBatch;
use datafusion::arrow::util::pretty::pretty_format_batches;
use kplane_bus::PartitionEvent;
use kplane_bus::topics;
use kplane_model::batch::{EventBatchBuilder, ReportBatchBuilder};
use kplane_model::{
    Detector, EventKind, EventRow, FlowKey, HopField, HopRecord, Metric, ReportFlags, ReportRecord,
};
use kplane_store::Store;
use kplane_store::query::sql_blocking;
use kplane_stream_processor::Config;
use kplane_stream_processor::metrics::ProcessorMetrics;
use kplane_stream_processor::processor::Processor;
use kplane_wire::build::{ip_packet, report_v20_ipv4};
use kplane_wire::papers::{DlvHeader, GpintProbe, ProbeKind};
use kplane_wire::{DecodeOptions, Decoder, RecordMeta};

const S: u64 = 1_000_000_000;

fn flow(src: u8, dst: u8, sport: u16) -> FlowKey {
    FlowKey {
        src_ip: IpAddr::V4(Ipv4Addr::new(10, 0, 0, src)),
        dst_ip: IpAddr::V4(Ipv4Addr::new(10, 0, 1, dst)),
        src_port: sport,
        dst_port: 80,
        protocol: 6,
    }
}

/// A sink report at `t` along `path`; hop `k` has latency `lat + k`, queue occupancy `occ * k`.
fn report(
    t: u64,
    f: FlowKey,
    path: &[u32],
    lat: u64,
    occ: u64,
    intermediate: bool,
) -> ReportRecord {
    let mut r = ReportRecord::default();
    r.envelope.received_ns = t + 1_000;
    r.envelope.timestamp_ns = Some(t);
    r.envelope.node_id = path.last().copied();
    r.envelope
        .flags
        .set(ReportFlags::INTERMEDIATE, intermediate);
    r.envelope.packet_length = Some(1_000 + u32::from(f.src_port % 10));
    r.flow = Some(f);
    for (k, &n) in path.iter().enumerate() {
        let k = k as u64;
        let mut h = HopRecord::default();
        h.set(HopField::NodeId, n.into());
        h.set(HopField::L1EgressPort, 1 + k);
        h.set(HopField::HopLatency, lat + k);
        h.set(HopField::QueueId, 0);
        h.set(HopField::QueueOccupancy, occ * k);
        h.set(HopField::TxUtilization, 100 * (k + 1));
        h.set(HopField::IngressTimestamp, t + k * 1_000);
        h.set(HopField::EgressTimestamp, t + k * 1_000 + 400);
        r.hops.push(h);
    }
    r
}

fn reports() -> RecordBatch {
    let (a, b, c) = (flow(1, 1, 1000), flow(1, 2, 1001), flow(2, 1, 2000));
    let mut builder = ReportBatchBuilder::new(16);
    let rows = [
        // Window [10 s, 11 s).
        report(10 * S, a, &[1, 2, 3], 100, 10, false),
        report(10 * S + 100, a, &[1, 2, 3], 300, 20, false),
        report(10 * S + 200, b, &[1, 4, 3], 1_000, 80, false),
        report(10 * S + 300, c, &[5, 2, 3], 50, 1, false),
        // An intermediate report: counts for sources and hops, not for trajectories.
        report(10 * S + 400, c, &[5, 2], 60, 1, true),
        // Window [11 s, 12 s): flow a moves to 1-4-3.
        report(11 * S, a, &[1, 4, 3], 200, 30, false),
        report(11 * S + 100, b, &[1, 4, 3], 900, 100, false),
        // Switch 3's other port (2, not 3), its queue id 0 as well: another queue.
        report(11 * S + 200, c, &[2, 3], 70, 40, false),
    ];
    // Window [10 s, 11 s): switches 6 and 7 busier in the window's last tenth (links:
    // `end_samples`, `tx_utilization_end_mean`).
    let d = flow(3, 3, 3000);
    let mut late = report(10 * S + 950_000_000, d, &[6, 7], 100, 1, false);
    for h in &mut late.hops {
        h.set(HopField::TxUtilization, 900);
    }
    let rows = [
        rows.as_slice(),
        &[report(10 * S + 100, d, &[6, 7], 100, 1, false), late],
    ]
    .concat();
    for r in &rows {
        builder.append(r).unwrap();
    }
    builder.finish().unwrap()
}

fn events() -> RecordBatch {
    let mut b = EventBatchBuilder::new(4);
    for (t, metric, kind) in [
        (10 * S, Metric::FlowPath, EventKind::New),
        (10 * S + 1, Metric::FlowLatency, EventKind::New),
        (10 * S + 2, Metric::FlowLatency, EventKind::Change),
        (11 * S, Metric::ReportLoss, EventKind::Loss),
    ] {
        b.append(&EventRow {
            received_ns: t,
            kind,
            metric,
            detector: Detector::Threshold,
            flow: None,
            node_id: Some(1),
            queue_id: None,
            egress_port: None,
            hw_id: None,
            value: Some(3),
            previous: None,
            threshold: None,
            path: &[],
            exporter: None,
        })
        .unwrap();
    }
    b.finish().unwrap()
}

fn golden(name: &str, got: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(format!("{name}.txt"));
    if std::env::var_os("KPLANE_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run `make bless`)", path.display()));
    assert_eq!(
        got,
        want,
        "{name} differs from {} (review, then `make bless`)",
        path.display()
    );
}

/// A processor over a fresh store `kplane-sp-{name}-{pid}` (not publishing) with `lanes`
/// assigned; the store's directory.
fn processor(
    name: &str,
    metrics: ProcessorMetrics,
    lanes: &[(String, u32)],
) -> (PathBuf, Processor) {
    let data = std::env::temp_dir().join(format!("kplane-sp-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&data);
    let cfg = Config {
        data_dir: data.clone(),
        publish: false,
        ..Config::default()
    };
    let mut p = Processor::new(cfg, metrics, None).unwrap();
    p.rebalance(vec![PartitionEvent::Assigned(lanes.to_vec())])
        .unwrap();
    (data, p)
}

#[test]
fn window_results_match_the_golden_tables() {
    let (r, e) = (
        (topics::REPORTS.to_string(), 0u32),
        (topics::EVENTS.to_string(), 0u32),
    );
    let (data, mut p) = processor(
        "golden",
        ProcessorMetrics::default(),
        &[r.clone(), e.clone()],
    );
    p.offer_batches(&r, 0, &[reports()]);
    p.offer_batches(&e, 0, &[events()]);
    p.flush().unwrap();

    let tables = [
        (
            "flows",
            "SELECT window_start, ip_text(src_ip) AS src, ip_text(dst_ip) AS dst, src_port, reports, bytes, path, previous_path, \
                   path_changed, e2e_latency_mean_ns, e2e_latency_max_ns, transit_max_ns FROM flows \
                   ORDER BY window_start, src_ip, dst_ip, src_port",
        ),
        (
            "hop_latency",
            "SELECT window_start, src_port, node_id, samples, p50_ns, p99_ns, max_ns \
                   FROM hop_latency ORDER BY window_start, src_port, node_id",
        ),
        (
            "queues",
            "SELECT window_start, node_id, egress_port, queue_id, samples, occupancy_mean, \
                   occupancy_max, congested_samples, congested_ns FROM queues \
                   ORDER BY window_start, node_id, egress_port",
        ),
        (
            "links",
            "SELECT window_start, node_id, egress_port, samples, tx_utilization_mean, \
                   tx_utilization_max, end_samples, tx_utilization_end_mean FROM links \
                   ORDER BY window_start, node_id, egress_port",
        ),
        (
            "sources",
            "SELECT window_start, ip_text(src_ip) AS src, flows, reports, bytes, destinations, dst_ports \
                   FROM sources ORDER BY window_start, src_ip",
        ),
        (
            "destinations",
            "SELECT window_start, ip_text(dst_ip) AS dst, flows, reports, sources, dst_ports \
                   FROM destinations ORDER BY window_start, dst_ip",
        ),
        (
            "event_counts",
            "SELECT window_start, metric, kind, count FROM event_counts \
                   ORDER BY window_start, metric, kind",
        ),
        (
            "alerts",
            "SELECT time, kind, src_port, node_id, egress_port, queue_id, metric, value, path, \
                   previous_path FROM alerts ORDER BY time, kind, node_id",
        ),
    ];
    for (name, sql) in tables {
        let batches = sql_blocking(&Store::local(&data), sql).unwrap();
        let text = pretty_format_batches(&batches).unwrap().to_string() + "\n";
        golden(name, &text);
    }
    std::fs::remove_dir_all(&data).unwrap();
}

#[test]
fn an_undecodable_message_is_counted_skipped_and_committed_past() {
    let metrics = ProcessorMetrics::default();
    let r = (topics::REPORTS.to_string(), 0u32);
    let (data, mut p) = processor("bad", metrics.clone(), std::slice::from_ref(&r));
    p.handle(kplane_bus::Received {
        topic: r.0.clone(),
        partition: 0,
        offset: 0,
        key: None,
        headers: vec![],
        payload: bytes::Bytes::from_static(b"not arrow"),
        timestamp_ms: None,
    });
    p.offer_batches(&r, 1, &[reports()]);
    assert_eq!(metrics.undecodable.get(), 1);
    p.flush().unwrap();
    let last =
        kplane_stream_processor::store::lane_log(&Store::local(&data), "reports-p0").unwrap();
    assert_eq!(
        last.commits.last().unwrap().checkpoint.through_offset,
        1,
        "the bad message is accounted for"
    );
    std::fs::remove_dir_all(&data).unwrap();
}

/// A heartbeat on `lane` at `offset`: the collector had processed reports up to `through_ns`.
fn heartbeat(lane: &(String, u32), offset: i64, through_ns: u64) -> kplane_bus::Received {
    use kplane_bus::headers;
    kplane_bus::Received {
        topic: lane.0.clone(),
        partition: lane.1,
        offset,
        key: None,
        headers: vec![
            (headers::RECORDS.to_string(), "0".to_string()),
            (
                headers::REPORT_TIME_THROUGH.to_string(),
                through_ns.to_string(),
            ),
            (
                headers::RECEIVED_THROUGH.to_string(),
                through_ns.to_string(),
            ),
        ],
        payload: bytes::Bytes::new(),
        timestamp_ms: None,
    }
}

#[test]
fn a_heartbeat_closes_a_quiet_lanes_windows() {
    let data = std::env::temp_dir().join(format!("kplane-sp-beat-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&data);
    let cfg = Config {
        data_dir: data.clone(),
        publish: false,
        lateness: std::time::Duration::from_millis(200),
        ..Config::default()
    };
    let metrics = ProcessorMetrics::default();
    let bus = std::sync::Arc::new(kplane_bus::EmbeddedBus::new());
    bus.create_topic(topics::WINDOWS, 1, 1 << 10);
    let mut windows = bus.consumer(topics::WINDOWS, "t").unwrap();
    let mut p = Processor::new(cfg, metrics.clone(), Some(bus.clone())).unwrap();
    let r = (topics::REPORTS.to_string(), 0u32);
    p.rebalance(vec![PartitionEvent::Assigned(vec![r.clone()])])
        .unwrap();
    // What the lane told `int.windows` it is through, and in how many messages without rows.
    let mut marks = || {
        let got = windows.drain(std::time::Duration::ZERO);
        let through = got
            .iter()
            .filter_map(|d| d.message.header(kplane_bus::headers::LANE_THROUGH))
            .map(|t| t.parse::<u64>().unwrap())
            .max();
        let empty = got.iter().filter(|d| d.message.payload.is_empty()).count();
        (through, empty)
    };
    // Rows of [10 s, 11 s) and [11 s, 12 s); the lane's own rows close neither (lateness).
    p.offer_batches(&r, 0, &[reports()]);
    assert_eq!(p.close_lane(&r, false).unwrap(), None);
    assert_eq!(
        marks(),
        (Some(10 * S), 1),
        "through every window before its first"
    );
    // The collector got to 11.1 s elsewhere: not past [10 s, 11 s) by the lateness yet.
    p.handle(heartbeat(&r, 1, 11 * S + 100_000_000));
    assert_eq!(p.close_lane(&r, false).unwrap(), None);
    // 11.2 s: the first window closes (message 0 still holds rows of the second).
    p.handle(heartbeat(&r, 2, 11 * S + 200_000_000));
    let (_, _, through) = p.close_lane(&r, false).unwrap().expect("a window closed");
    assert_eq!((through, metrics.windows_written.get()), (-1, 1));
    // 12.2 s: the second closes, and every message, heartbeats too, is accounted for.
    p.handle(heartbeat(&r, 3, 12 * S + 200_000_000));
    let (_, _, through) = p.close_lane(&r, false).unwrap().expect("a window closed");
    assert_eq!((through, metrics.windows_written.get()), (3, 2));
    assert_eq!(
        marks(),
        (Some(12 * S), 0),
        "results, through the second window"
    );
    // 14.2 s: no rows in [12 s, 13 s) and [13 s, 14 s): an empty progress message says so.
    p.handle(heartbeat(&r, 4, 14 * S + 200_000_000));
    p.close_lane(&r, false).unwrap();
    assert_eq!(marks(), (Some(14 * S), 1));
    p.handle(heartbeat(&r, 5, 14 * S + 300_000_000));
    p.close_lane(&r, false).unwrap();
    assert_eq!(marks(), (None, 0), "told once per window");
    assert_eq!(
        metrics.windows_written.get(),
        2,
        "no window without rows is written"
    );
    assert_eq!(
        metrics.undecodable.get(),
        0,
        "a heartbeat is not a bad message"
    );
    let flows = sql_blocking(&Store::local(&data), "SELECT count(*) AS n FROM flows").unwrap();
    let text = pretty_format_batches(&flows).unwrap().to_string();
    assert!(
        text.contains("| 7 |"),
        "4 flows in [10 s, 11 s), 3 in [11 s, 12 s): {text}"
    );
    std::fs::remove_dir_all(&data).unwrap();
}

#[test]
fn detector_state_survives_a_restart_so_changes_spanning_it_are_raised_once() {
    use kplane_stream_processor::detect::{Alert, AlertKind};
    use std::sync::{Arc, Mutex};
    let data = std::env::temp_dir().join(format!("kplane-sp-restart-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&data);
    let lane = (topics::REPORTS.to_string(), 0u32);
    let start = |seen: &Arc<Mutex<Vec<Alert>>>| {
        let cfg = Config {
            data_dir: data.clone(),
            publish: false,
            ..Config::default()
        };
        let mut p = Processor::new(cfg, ProcessorMetrics::default(), None).unwrap();
        let seen = seen.clone();
        p.on_alerts(Box::new(move |a| seen.lock().unwrap().extend_from_slice(a)));
        p.rebalance(vec![PartitionEvent::Assigned(vec![lane.clone()])])
            .unwrap();
        p
    };
    let batch = |rows: &[ReportRecord]| {
        let mut b = ReportBatchBuilder::new(rows.len());
        rows.iter().for_each(|r| b.append(r).unwrap());
        b.finish().unwrap()
    };
    let (a, c) = (flow(1, 1, 1000), flow(2, 1, 2000));
    let before = batch(&[
        report(10 * S, a, &[1, 2, 3], 100, 1, false),
        report(10 * S, c, &[5, 2, 3], 100, 1, false),
    ]);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut p = start(&seen);
    p.offer_batches(&lane, 0, std::slice::from_ref(&before));
    p.flush().unwrap();
    drop(p);
    assert!(seen.lock().unwrap().is_empty(), "first paths raise nothing");

    // Restarted: the message before the checkpoint comes again (a Kafka replay), then new
    // ones: `a` moved to another path, `c`'s sink went silent while upstream still reports it.
    let mut p = start(&seen);
    p.offer_batches(&lane, 0, &[before]);
    p.offer_batches(
        &lane,
        1,
        &[batch(&[
            report(12 * S, a, &[1, 4, 3], 100, 1, false),
            report(12 * S, c, &[5, 2], 100, 1, true),
        ])],
    );
    p.flush().unwrap();
    let kinds: Vec<AlertKind> = seen.lock().unwrap().iter().filter_map(|a| a.kind).collect();
    assert_eq!(kinds, [AlertKind::PathChange, AlertKind::BlackHole]);
    // Stored once each, with the commit.
    let stored = sql_blocking(
        &Store::local(&data),
        "SELECT kind FROM alerts ORDER BY kind",
    )
    .unwrap();
    let text = pretty_format_batches(&stored).unwrap().to_string();
    assert_eq!(text.matches("path_change").count(), 1, "{text}");
    assert_eq!(text.matches("black_hole").count(), 1, "{text}");
    std::fs::remove_dir_all(&data).unwrap();
}

/// A probe back from switches 3, 2, 1 (1 first on the path, 3 sent it to the monitor) with
/// the queue depths `depths` (path order), reported at `t`.
fn probe_report(t: u64, request: u16, depths: [u8; 3]) -> (Vec<u8>, RecordMeta) {
    let dlv = |switch_id, queue_depth| {
        (
            DlvHeader {
                switch_id,
                queue_depth,
                measurement_count: 1,
            },
            vec![u32::from(request)],
        )
    };
    let mut body = Vec::new();
    // Newest first on the wire.
    let devices = [dlv(3, depths[2]), dlv(2, depths[1]), dlv(1, depths[0])];
    GpintProbe::write(request, 0, &[], &devices, &mut body);
    let monitor = "10.255.0.1".parse().unwrap();
    let ip = ip_packet(monitor, monitor, 254, ProbeKind::DSCP_MEASUREMENT, &body);
    let meta = RecordMeta {
        exporter: Some("127.0.0.1:40000".parse().unwrap()),
        received_ns: t,
    };
    (report_v20_ipv4(3, u32::from(request), &ip), meta)
}

fn probe_reports() -> RecordBatch {
    let mut decoder = Decoder::new(DecodeOptions::default());
    let mut builder = ReportBatchBuilder::new(4);
    for (t, request, depths) in [
        (10 * S, 1, [0, 40, 2]),
        (10 * S + S / 2, 2, [0, 60, 4]),
        (11 * S + S / 2, 3, [0, 10, 0]),
    ] {
        let (payload, meta) = probe_report(t, request, depths);
        let outcome = decoder.decode_report(&payload, meta, |r| builder.append(r).unwrap());
        assert_eq!((outcome.records, outcome.error), (1, None));
    }
    builder.finish().unwrap()
}

fn column_u64(batches: &[RecordBatch], sql_col: usize) -> Vec<u64> {
    use arrow_array::cast::AsArray;
    use arrow_array::types::UInt64Type;
    batches
        .iter()
        .flat_map(|b| {
            let c = datafusion::arrow::compute::cast(
                b.column(sql_col),
                &datafusion::arrow::datatypes::DataType::UInt64,
            )
            .unwrap();
            c.as_primitive::<UInt64Type>().values().to_vec()
        })
        .collect()
}

/// GPINT probes feed the same analytics as INT: returned probes as `kplane probe` reports them
/// to the collector (an Inner-Only Telemetry Report v2.0 carrying the probe), decoded by the
/// collector's decoder, through the window analytics — the probe's switches are a trajectory
/// in `flows` and each switch's DLV queue depth a sample in `queues`.
#[test]
fn probes_become_trajectories_and_queue_samples() {
    let r = (topics::REPORTS.to_string(), 0u32);
    let (data, mut p) = processor(
        "probes",
        ProcessorMetrics::default(),
        std::slice::from_ref(&r),
    );
    p.offer_batches(&r, 0, &[probe_reports()]);
    p.flush().unwrap();

    let flows = sql_blocking(
        &Store::local(&data),
        "SELECT CAST(CAST(window_start AS BIGINT) / 1000000000 AS BIGINT UNSIGNED), reports, \
           array_to_string(path, '-') FROM flows WHERE protocol = 254 ORDER BY window_start",
    )
    .unwrap();
    let text = datafusion::arrow::util::pretty::pretty_format_batches(&flows)
        .unwrap()
        .to_string();
    assert_eq!(column_u64(&flows, 0), [10, 11], "{text}");
    assert_eq!(column_u64(&flows, 1), [2, 1], "{text}");
    assert!(
        text.contains("1-2-3"),
        "the probe's switches in path order: {text}"
    );

    let queues = sql_blocking(
        &Store::local(&data),
        "SELECT node_id, samples, occupancy_max FROM queues \
         WHERE CAST(window_start AS BIGINT) = 10000000000 ORDER BY node_id",
    )
    .unwrap();
    assert_eq!(column_u64(&queues, 0), [1, 2, 3]);
    assert_eq!(column_u64(&queues, 1), [2, 2, 2]);
    assert_eq!(
        column_u64(&queues, 2),
        [0, 60, 4],
        "each switch's deepest DLV queue"
    );
    std::fs::remove_dir_all(&data).unwrap();
}

/// Two collectors' events of one switch (both in the switch's `int.events` partition): one
/// change log in `switch_changes`, stored once across a restart that reads a message again.
#[test]
fn two_collectors_views_of_a_switch_make_one_change_log_across_a_restart() {
    use kplane_stream_processor::metrics::Outcome;
    let lane = (topics::EVENTS.to_string(), 0u32);
    // (s, ms, kind, metric, port-or-queue, value)
    let views = |rows: &[(u64, u64, EventKind, Metric, u32, u64)]| {
        let mut b = EventBatchBuilder::new(rows.len());
        for &(s, ms, kind, metric, id, value) in rows {
            let link = metric == Metric::LinkUtilization;
            b.append(&EventRow {
                received_ns: s * S + ms * 1_000_000,
                kind,
                metric,
                detector: Detector::Threshold,
                flow: None,
                node_id: Some(7),
                queue_id: (!link).then_some(id as u8),
                egress_port: link.then_some(id),
                hw_id: None,
                value: Some(value),
                previous: None,
                threshold: Some(if link { 100 } else { 64 }),
                path: &[],
                exporter: None,
            })
            .unwrap();
        }
        b.finish().unwrap()
    };
    let (occ, link) = (Metric::QueueOccupancy, Metric::LinkUtilization);
    let metrics = ProcessorMetrics::default();
    let (data, mut p) = processor("switch-views", metrics.clone(), std::slice::from_ref(&lane));
    // Collector A, then collector B: the same queue seen by both, and A's link.
    p.offer_batches(
        &lane,
        0,
        &[views(&[
            (10, 0, EventKind::New, occ, 1, 100),
            (10, 0, EventKind::New, link, 2, 50),
        ])],
    );
    let b = views(&[
        (10, 5, EventKind::New, occ, 1, 110),
        (11, 0, EventKind::Change, occ, 1, 900),
    ]);
    p.offer_batches(&lane, 1, std::slice::from_ref(&b));
    p.flush().unwrap();
    drop(p);

    // Restarted: B's message comes again (a Kafka replay), then A's view of the rise and a
    // batch of A's from before it.
    let cfg = Config {
        data_dir: data.clone(),
        publish: false,
        ..Config::default()
    };
    let mut p = Processor::new(cfg, metrics.clone(), None).unwrap();
    p.rebalance(vec![PartitionEvent::Assigned(vec![lane.clone()])])
        .unwrap();
    p.offer_batches(&lane, 1, &[b]);
    p.offer_batches(
        &lane,
        2,
        &[views(&[
            (11, 2, EventKind::Change, occ, 1, 880),
            (10, 900, EventKind::Refresh, occ, 1, 100),
        ])],
    );
    p.flush().unwrap();
    let stored = sql_blocking(
        &Store::local(&data),
        "SELECT kind, metric, node_id, queue_id, egress_port, value, previous, threshold, views \
         FROM switch_changes ORDER BY time, metric",
    )
    .unwrap();
    let text = pretty_format_batches(&stored).unwrap().to_string();
    let want = "\
+--------+------------------+---------+----------+-------------+-------+----------+-----------+-------+
| kind   | metric           | node_id | queue_id | egress_port | value | previous | threshold | views |
+--------+------------------+---------+----------+-------------+-------+----------+-----------+-------+
| new    | link_utilization | 7       |          | 2           | 50    |          | 100       | 1     |
| new    | queue_occupancy  | 7       | 1        |             | 100   |          | 64        | 1     |
| change | queue_occupancy  | 7       | 1        |             | 900   | 100      | 64        | 2     |
+--------+------------------+---------+----------+-------------+-------+----------+-----------+-------+";
    assert_eq!(text, want);
    let count = |outcome| {
        metrics
            .switch_views
            .get_or_create(&Outcome { outcome })
            .get()
    };
    assert_eq!(
        [
            count("new"),
            count("change"),
            count("absorbed"),
            count("stale")
        ],
        [2, 1, 2, 1],
        "the replayed message is not counted twice"
    );
    // `event_counts` counts the collectors' events as they came, the replayed ones once (the
    // last message's fall in windows the first run closed: late, not counted).
    let counted = sql_blocking(
        &Store::local(&data),
        "SELECT CAST(sum(count) AS BIGINT) FROM event_counts",
    )
    .unwrap();
    let text = pretty_format_batches(&counted).unwrap().to_string();
    assert!(text.contains("| 4 "), "{text}");
    std::fs::remove_dir_all(&data).unwrap();
}
