//! Crash safety against a real broker (`KPLANE_KAFKA_BROKERS`; CI starts one): a stream
//! processor is killed with SIGKILL at random points, 50 times, while reports keep arriving
//! on `int.reports`; then it runs to the end. Its store must hold what one processor that was
//! never killed writes from the same topic — every window table and every alert exactly once
//! — including path changes and black holes that span a kill.

use crate::common::written_through;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use arrow_array::RecordBatch;
use bytes::Bytes;
use datafusion::arrow::util::pretty::pretty_format_batches;
use kplane_bus::kafka::{KafkaMetrics, KafkaProducer};
use kplane_bus::{KafkaConfig, Message, Producer, content_types, headers, topics};
use kplane_model::batch::ReportBatchBuilder;
use kplane_model::rng::Rng;
use kplane_model::{FlowKey, HopField, HopRecord, ReportFlags, ReportRecord};
use kplane_store::query::sql_blocking;
use kplane_testkit::{
    ChildGuard, free_port, http_get, kafka_brokers, metric_sum, run_id, sigterm, wait_ready,
};

const S: u64 = 1_000_000_000;
const PARTITIONS: u32 = 4;
const KILLS: u64 = 50;

/// Reports of `partition`'s flows for second `i` of the run (from `t0`): a path change every
/// 7 s for flow 0, hop latency above the threshold every 5 s for flow 1, flow 2's sink silent
/// from second 20 to 34 while upstream still reports it (a black hole, then cleared), and a
/// queue above its threshold every 9 s.
fn second(t0: u64, partition: u32, i: u64) -> Vec<ReportRecord> {
    let mut out = Vec::new();
    for k in 0..40u64 {
        let flow = (k % 4) as u8;
        let t = t0 + i * S + k * (S / 40);
        let middle = if flow == 0 && (i / 7) % 2 == 1 {
            11
        } else {
            10
        };
        let path = [1 + partition, middle, 20 + partition];
        let silent_sink = flow == 2 && (20..35).contains(&i);
        let hops = if silent_sink { &path[..2] } else { &path[..] };
        let latency = if flow == 1 && i.is_multiple_of(5) {
            200_000
        } else {
            5_000
        };
        let occupancy = if i.is_multiple_of(9) { 90 } else { 10 };
        let mut r = ReportRecord::default();
        r.envelope.received_ns = t + 1_000;
        r.envelope.timestamp_ns = Some(t);
        r.envelope.node_id = hops.last().copied();
        r.envelope.flags.set(ReportFlags::INTERMEDIATE, silent_sink);
        r.envelope.packet_length = Some(1_000);
        r.flow = Some(FlowKey {
            src_ip: format!("10.{partition}.0.{flow}").parse().unwrap(),
            dst_ip: "10.9.0.1".parse().unwrap(),
            src_port: 1000 + u16::from(flow),
            dst_port: 80,
            protocol: 17,
        });
        for (h, &n) in hops.iter().enumerate() {
            let mut hop = HopRecord::default();
            hop.set(HopField::NodeId, n.into());
            hop.set(HopField::L1EgressPort, 1 + h as u64);
            hop.set(HopField::HopLatency, latency);
            hop.set(HopField::QueueId, 0);
            hop.set(HopField::QueueOccupancy, occupancy);
            hop.set(HopField::TxUtilization, 100);
            hop.set(HopField::IngressTimestamp, t + h as u64 * 1_000);
            hop.set(HopField::EgressTimestamp, t + h as u64 * 1_000 + 500);
            r.hops.push(hop);
        }
        out.push(r);
    }
    out
}

/// One `reports/v1` message, as the collector publishes it.
fn message(partition: u32, rows: &[ReportRecord]) -> Message {
    let mut b = ReportBatchBuilder::new(rows.len());
    rows.iter().for_each(|r| b.append(r).unwrap());
    let batch: RecordBatch = b.finish().unwrap();
    let mut payload = Vec::new();
    let mut w = arrow_ipc::writer::StreamWriter::try_new(&mut payload, &batch.schema()).unwrap();
    w.write(&batch).unwrap();
    w.finish().unwrap();
    drop(w);
    let through = rows
        .iter()
        .filter_map(|r| r.envelope.timestamp_ns)
        .max()
        .unwrap();
    let received = rows.iter().map(|r| r.envelope.received_ns).max().unwrap();
    Message {
        topic: topics::REPORTS,
        partition,
        key: None,
        headers: vec![
            (headers::CONTENT_TYPE, content_types::ARROW.to_string()),
            (headers::SCHEMA, "reports/v1".to_string()),
            (headers::RECORDS, rows.len().to_string()),
            (headers::REPORT_TIME_THROUGH, through.to_string()),
            (headers::RECEIVED_THROUGH, received.to_string()),
        ],
        payload: Bytes::from(payload),
        timestamp_ns: received,
    }
}

fn processor(brokers: &str, group: &str, data: &Path, idle_close: &str) -> (ChildGuard, u16) {
    let admin = free_port();
    let child = ChildGuard::from(
        Command::new(env!("CARGO_BIN_EXE_kplane"))
            .args(["stream-processor", "--admin", &format!("127.0.0.1:{admin}")])
            .env("KPLANE__BUS__KIND", "kafka")
            .env("KPLANE__BUS__KAFKA__BOOTSTRAP_SERVERS", brokers)
            .env("KPLANE__BUS__KAFKA__GROUP_ID", group)
            .env("KPLANE__STREAM_PROCESSOR__DATA_DIR", data)
            .env("KPLANE__STREAM_PROCESSOR__IDLE_CLOSE", idle_close)
            .env("KPLANE__STREAM_PROCESSOR__LATENESS", "1s")
            .env("KPLANE__STREAM_PROCESSOR__CONSUME_EVENTS", "false")
            .env("KPLANE__STREAM_PROCESSOR__PUBLISH", "false")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_ready(admin, Duration::from_secs(60));
    (child, admin)
}

/// Input partitions the processor at `admin` owns.
fn owned(admin: u16) -> f64 {
    metric_sum(
        &http_get(admin, "/metrics").unwrap_or_default(),
        "kplane_stream_processor_assigned_partitions",
        &[],
    )
}

/// Runs a processor until every lane has written the window ending at `end_ns`.
fn run_to_end(brokers: &str, group: &str, data: &Path, end_ns: i64) {
    let (child, _) = processor(brokers, group, data, "2s");
    let deadline = Instant::now() + Duration::from_secs(240);
    while written_through(data, PARTITIONS).is_none_or(|t| t < end_ns) {
        assert!(
            Instant::now() < deadline,
            "{} did not finish",
            data.display()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    sigterm(&child);
    assert!(child.into_inner().wait().unwrap().success());
}

/// The store's content through `end` (ns): the stream goes on past it, and a processor
/// stopped once it has written through `end` may or may not have written a window after it.
/// Without what differs between stores by design (`flow_id`, keyed per store; detection
/// wall-clock times).
fn content(data: &Path, end: i64) -> String {
    let upto = format!("CAST(window_end AS BIGINT) <= {end}");
    let queries = [
        format!(
            "SELECT window_start, ip_text(src_ip) s, src_port, reports, bytes, path, path_changed, \
               e2e_latency_max_ns FROM flows WHERE {upto} ORDER BY 1, 2, 3"
        ),
        format!(
            "SELECT window_start, ip_text(src_ip) s, src_port, node_id, samples, max_ns \
               FROM hop_latency WHERE {upto} ORDER BY 1, 2, 3, 4"
        ),
        format!(
            "SELECT window_start, node_id, queue_id, samples, occupancy_max FROM queues \
               WHERE {upto} ORDER BY 1, 2, 3"
        ),
        format!(
            "SELECT window_start, node_id, egress_port, samples FROM links WHERE {upto} \
               ORDER BY 1, 2, 3"
        ),
        format!(
            "SELECT time, kind, ip_text(src_ip) s, src_port, node_id, queue_id, value FROM alerts \
               WHERE CAST(time AS BIGINT) < {end} ORDER BY 1, 2, 3, 4, 5, 6"
        ),
    ];
    queries
        .iter()
        .map(|q| {
            let b = sql_blocking(&kplane_store::Store::local(data), q)
                .unwrap_or_else(|e| panic!("{q}: {e}"));
            pretty_format_batches(&b).unwrap().to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Where two stores' contents part: the first differing line with a few lines around it on
/// each side (the whole contents are thousands of lines).
fn first_difference(got: &str, want: &str) -> String {
    let (g, w): (Vec<&str>, Vec<&str>) = (got.lines().collect(), want.lines().collect());
    let at = g
        .iter()
        .zip(&w)
        .position(|(a, b)| a != b)
        .unwrap_or(g.len().min(w.len()));
    let around = |v: &[&str]| v[at.saturating_sub(8)..(at + 8).min(v.len())].join("\n");
    format!(
        "line {at} of {} (killed) / {} (reference)\n--- killed:\n{}\n--- reference:\n{}",
        g.len(),
        w.len(),
        around(&g),
        around(&w)
    )
}

#[test]
fn a_processor_killed_50_times_writes_every_window_and_alert_exactly_once() {
    let Some(brokers) = kafka_brokers() else {
        return;
    };
    let run = run_id();
    let cfg = KafkaConfig {
        bootstrap_servers: brokers.clone(),
        ..KafkaConfig::default()
    };
    let producer = KafkaProducer::new(
        &cfg,
        &[(topics::REPORTS, PARTITIONS)],
        KafkaMetrics::default(),
    )
    .unwrap();
    // Event time starts at a whole minute, so the seconds are windows.
    let t0 = kplane_model::unix_time_ns() / (60 * S) * (60 * S);
    let crashed = std::env::temp_dir().join(format!("kplane-crash-{run}"));
    let mut rng = Rng::new(0xC2A5);
    let mut progressed = 0;
    let mut sent = 0u64;
    // Kills land at a random point within this window after the processor joins. A loaded
    // machine replays more slowly, so the window widens after each run that was killed before
    // it wrote anything and narrows after one that wrote: kills keep landing everywhere from
    // the replay to mid-commit, on an idle machine and on a busy one.
    let mut window_ms = 1_500;
    for kill in 0..KILLS {
        // New reports keep arriving: two seconds of them per partition per run.
        for i in sent..sent + 2 {
            for p in 0..PARTITIONS {
                producer.send(message(p, &second(t0, p, i))).unwrap();
            }
        }
        sent += 2;
        assert_eq!(producer.flush(Duration::from_secs(30)), 0);
        let before = written_through(&crashed, PARTITIONS);
        // A fresh consumer group every time: the processor resumes from its store alone
        // (reading the topic from its start).
        let (mut child, admin) = processor(
            &brokers,
            &format!("kplane-crash-{run}-{kill}"),
            &crashed,
            "120s",
        );
        let joined = Instant::now() + Duration::from_secs(60);
        while owned(admin) == 0.0 && Instant::now() < joined {
            std::thread::sleep(Duration::from_millis(20));
        }
        // Killed anywhere from its replay of what is stored to the middle of a commit.
        std::thread::sleep(Duration::from_millis(rng.below(window_ms)));
        child.kill().unwrap();
        child.wait().unwrap();
        if written_through(&crashed, PARTITIONS) > before {
            progressed += 1;
            window_ms = (window_ms * 4 / 5).max(1_000);
        } else {
            window_ms = (window_ms * 3 / 2).min(10_000);
        }
    }
    // The stream goes on past the last window, so every window closes by watermark.
    for p in 0..PARTITIONS {
        for i in sent..sent + 3 {
            producer.send(message(p, &second(t0, p, i))).unwrap();
        }
    }
    assert_eq!(producer.flush(Duration::from_secs(30)), 0);
    let end = (t0 + sent * S) as i64;
    run_to_end(&brokers, &format!("kplane-crash-{run}-end"), &crashed, end);

    let reference = std::env::temp_dir().join(format!("kplane-crash-ref-{run}"));
    run_to_end(
        &brokers,
        &format!("kplane-crash-{run}-ref"),
        &reference,
        end,
    );

    eprintln!(
        "{progressed} of {KILLS} runs wrote windows before they were killed (kill window {window_ms} ms)"
    );
    assert!(
        progressed >= 5,
        "too few kills landed mid-stream: {progressed}"
    );
    let (got, want) = (content(&crashed, end), content(&reference, end));
    assert!(
        want.contains("path_change") && want.contains("black_hole"),
        "{want}"
    );
    assert!(
        got == want,
        "the killed processor's store differs from the reference:\n{}",
        first_difference(&got, &want)
    );
    std::fs::remove_dir_all(&crashed).unwrap();
    std::fs::remove_dir_all(&reference).unwrap();
}
