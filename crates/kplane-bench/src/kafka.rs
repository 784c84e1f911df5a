//! `kplane bench kafka`: the whole path on one machine. Reports go over a veth wire (see
//! `bench_ingest`) to a collector process at a fixed rate; the collector publishes events and
//! (by default) every report to Kafka; a stream processor process windows them all; a
//! consumer in this process reads the events back (receive → read latency). Every report is
//! looked for in the processor's written windows, and each process's CPU time is reported.

use anyhow::Context;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use arrow_array::cast::AsArray;
use arrow_array::types::TimestampNanosecondType;
use clap::Args;
use kplane_bus::PartitionEvent;
use kplane_bus::kafka::{KafkaConsumer, KafkaMetrics};
use kplane_bus::{KafkaConfig, headers, topics};
use kplane_runtime::probe::{http_get, metric_sum, wait_ready};

use crate::ingest::{Input, Traffic, Wire, paced_send, softirq_seconds};
use crate::{cpu_seconds, free_port};

#[derive(Debug, Args)]
pub struct KafkaArgs {
    /// Bootstrap servers (`make broker` starts one on 127.0.0.1:19092).
    #[arg(long, env = "KPLANE_KAFKA_BROKERS", default_value = "127.0.0.1:19092")]
    brokers: String,
    /// Reports per second sent to the collector.
    #[arg(long, default_value_t = 100_000)]
    rate: u64,
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    /// Distinct flows in the reports.
    #[arg(long, default_value_t = 5000)]
    flows: u32,
    /// Only events on Kafka (the collector's default), not every report.
    #[arg(long)]
    events_only: bool,
    /// How the collector takes reports off the veth wire.
    #[arg(long, value_enum, default_value = "af-xdp")]
    input: Input,
}

fn now_ns() -> i64 {
    kplane_model::unix_time_ns() as i64
}

/// What the consumer read of one collector's batches.
#[derive(Debug, Default)]
struct Consumed {
    events: u64,
    /// Receive → read, ns, one per row.
    latencies: Vec<i64>,
}

/// Reads until `stop` and then nothing new for a while; `ready` once partitions are assigned.
fn consume(
    cfg: KafkaConfig,
    prefix: String,
    ready: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<Consumed> {
    let group = format!("kplane-bench-{}", std::process::id());
    let c = KafkaConsumer::subscribe(&cfg, &group, &[topics::EVENTS], KafkaMetrics::default())?;
    let mut out = Consumed::default();
    let mut idle_since = Instant::now();
    loop {
        match c.poll(Duration::from_millis(100))? {
            Some(m) => {
                idle_since = Instant::now();
                // Batches of earlier runs on the same broker are skipped.
                if !m
                    .header(headers::BATCH_ID)
                    .is_some_and(|id| id.starts_with(&prefix))
                {
                    continue;
                }
                // Heartbeats carry no records.
                if m.payload.is_empty() {
                    continue;
                }
                let read = now_ns();
                let reader = arrow_ipc::reader::StreamReader::try_new(
                    std::io::Cursor::new(&m.payload[..]),
                    None,
                )?;
                for batch in reader {
                    let batch = batch?;
                    let received = batch
                        .column_by_name(kplane_model::schema::col::RECEIVED)
                        .context("no received column")?
                        .as_primitive::<TimestampNanosecondType>();
                    out.latencies
                        .extend(received.values().iter().map(|&r| read - r));
                    out.events += batch.num_rows() as u64;
                }
            }
            None if stop.load(Ordering::Acquire)
                && idle_since.elapsed() > Duration::from_secs(3) =>
            {
                break;
            }
            None => {}
        }
        if c.partition_events()
            .iter()
            .any(|e| matches!(e, PartitionEvent::Assigned(_)))
        {
            ready.store(true, Ordering::Release);
        }
    }
    c.close();
    Ok(out)
}

fn percentile(sorted: &[i64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i] as f64 / 1e6
}

/// CPU seconds of every process named `comm` (the broker, when it runs on this machine).
fn cpu_of_named(comm: &str) -> f64 {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0.0;
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == comm)
        })
        .filter_map(cpu_seconds)
        .sum()
}

/// CPU seconds of each part of the path, sampled before and after the run.
#[derive(Debug, Clone, Copy, Default)]
struct Cpu {
    collector: f64,
    processor: f64,
    broker: f64,
    bench: f64,
    softirq: f64,
}

impl Cpu {
    fn sample(collector: u32, processor: u32) -> Self {
        Self {
            collector: cpu_seconds(collector).unwrap_or(0.0),
            processor: cpu_seconds(processor).unwrap_or(0.0),
            broker: cpu_of_named("tansu"),
            bench: cpu_seconds(std::process::id()).unwrap_or(0.0),
            softirq: softirq_seconds(),
        }
    }
    fn since(self, before: Self) -> Self {
        Self {
            collector: self.collector - before.collector,
            processor: self.processor - before.processor,
            broker: self.broker - before.broker,
            bench: self.bench - before.bench,
            softirq: self.softirq - before.softirq,
        }
    }
}

pub fn run(a: KafkaArgs) -> anyhow::Result<()> {
    let wire = Wire::new(a.input, "bk")?;
    let admin: SocketAddr = ([127, 0, 0, 1], free_port()?).into();
    let mut child = wire
        .collector(admin)?
        .env("KPLANE__BUS__KIND", "kafka")
        .env("KPLANE__BUS__KAFKA__BOOTSTRAP_SERVERS", &a.brokers)
        .env(
            "KPLANE__COLLECTOR__PUBLISH_REPORTS",
            (!a.events_only).to_string(),
        )
        // Every process shares two cores here, so the receive thread can wait its turn for
        // longer than 8192 frames last at 500 k/s: a deeper ring (64 MiB) absorbs that.
        .env("KPLANE__COLLECTOR__AF_XDP__FRAMES", "16384")
        .spawn()?;
    let (sp_port, run_ns) = (free_port()?, now_ns());
    let sp_admin: SocketAddr = ([127, 0, 0, 1], sp_port).into();
    let data = std::env::temp_dir().join(format!("kplane-bench-sp-{}", std::process::id()));
    let mut processor = Command::new(std::env::current_exe()?)
        .args(["stream-processor", "--admin", &sp_admin.to_string()])
        .env("KPLANE__BUS__KIND", "kafka")
        .env("KPLANE__BUS__KAFKA__BOOTSTRAP_SERVERS", &a.brokers)
        .env(
            "KPLANE__BUS__KAFKA__GROUP_ID",
            format!("kplane-bench-sp-{}", std::process::id()),
        )
        .env("KPLANE__STREAM_PROCESSOR__DATA_DIR", &data)
        .env("KPLANE__STREAM_PROCESSOR__IDLE_CLOSE", "2s")
        // The bench's reports carry fixed switch timestamps: window them by receive time.
        .env("KPLANE__STREAM_PROCESSOR__EVENT_TIME", "received")
        .env(
            "KPLANE__STREAM_PROCESSOR__CONSUME_REPORTS",
            (!a.events_only).to_string(),
        )
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .spawn()?;
    let result = (|| -> anyhow::Result<()> {
        if !wait_ready(admin, Duration::from_secs(60))
            || !wait_ready(sp_admin, Duration::from_secs(60))
        {
            anyhow::bail!("the collector or processor never became ready (is the broker up?)");
        }
        let cfg = KafkaConfig {
            bootstrap_servers: a.brokers.clone(),
            ..KafkaConfig::default()
        };
        let prefix = format!("collector-{}-", child.id());
        let (ready, stop) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicBool::new(false)),
        );
        let consumer = {
            let (ready, stop) = (ready.clone(), stop.clone());
            std::thread::spawn(move || consume(cfg, prefix, ready, stop))
        };
        let wait = Instant::now();
        while !ready.load(Ordering::Acquire) && wait.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(50));
        }
        let cpu0 = Cpu::sample(child.id(), processor.id());
        let sent = paced_send(
            &wire.sender,
            &Traffic::fat_tree(a.flows),
            &mut [0; 21],
            a.rate,
            a.seconds as f64,
            64,
        )?;
        let cpu_send = Cpu::sample(child.id(), processor.id()).since(cpu0);
        // Until the collector has published and Kafka acknowledged everything.
        let mut m = String::new();
        let mut last = (-1.0, -1.0);
        for _ in 0..600 {
            std::thread::sleep(Duration::from_millis(200));
            m = http_get(admin, "/metrics").unwrap_or_default();
            let now = (
                metric_sum(&m, "kplane_collector_datagrams_received_total", &[]),
                metric_sum(&m, "kplane_bus_delivered_messages_total", &[]),
            );
            let produced = metric_sum(&m, "kplane_bus_produced_messages_total", &[]);
            if now == last && now.1 == produced {
                break;
            }
            last = now;
        }
        let published_events = metric_sum(
            &m,
            "kplane_collector_partition_records_total",
            &["topic=\"int.events\""],
        );
        let pub_reports = metric_sum(
            &m,
            "kplane_collector_partition_records_total",
            &["topic=\"int.reports\""],
        );
        let windowed = processed(&data, run_ns, published_events, pub_reports);
        let cpu = Cpu::sample(child.id(), processor.id()).since(cpu0);
        stop.store(true, Ordering::Release);
        let consumed = consumer
            .join()
            .map_err(|_| anyhow::anyhow!("consumer panicked"))??;

        let received = metric_sum(&m, "kplane_collector_datagrams_received_total", &[]);
        let dropped = metric_sum(&m, "kplane_collector_dropped_total", &[]);
        let messages = metric_sum(&m, "kplane_bus_delivered_messages_total", &[]);
        let bytes = metric_sum(&m, "kplane_bus_produced_bytes_total", &[]);
        let errors = metric_sum(&m, "kplane_bus_delivery_errors_total", &[]);
        let sp = http_get(sp_admin, "/metrics").unwrap_or_default();
        let late = metric_sum(&sp, "kplane_stream_processor_records_total", &["late"]);
        let mut lat = consumed.latencies;
        lat.sort_unstable();
        // Every report the collector dropped is counted (kernel, queue); what is neither
        // counted nor in the processor's windows is lost.
        let reports_out = if a.events_only {
            received
        } else {
            windowed.reports as f64 + late
        };
        let unaccounted = (sent.reports as f64 - dropped - reports_out).max(0.0)
            + (published_events - consumed.events as f64).abs()
            + (published_events - windowed.events as f64).abs();
        println!(
            "broker      {} ; {} flows, 5-hop TR v2.0, {} s at {} reports/s, input {:?} over a veth",
            a.brokers, a.flows, a.seconds, a.rate, a.input
        );
        println!(
            "sent        {} reports in {:.2} s = {:.0} reports/s",
            sent.reports,
            sent.seconds,
            sent.reports as f64 / sent.seconds
        );
        let by_stage: Vec<String> = m
            .lines()
            .filter(|l| l.starts_with("kplane_collector_dropped_total{"))
            .filter_map(|l| {
                let (labels, v) = l.rsplit_once(' ')?;
                let labels = labels.trim_start_matches("kplane_collector_dropped_total");
                (v.parse::<f64>().ok()? > 0.0).then(|| format!("{v} {labels}"))
            })
            .collect();
        println!(
            "collector   received {received:.0}, dropped {dropped:.0} (counted{}{})",
            if by_stage.is_empty() { "" } else { ": " },
            by_stage.join(", ")
        );
        println!(
            "kafka       {messages:.0} messages acknowledged, {:.1} MB payload ({:.0} B per report), delivery errors {errors:.0}",
            bytes / 1e6,
            bytes / pub_reports.max(1.0)
        );
        println!("published   {pub_reports:.0} report rows, {published_events:.0} event rows");
        println!(
            "processor   {} report rows and {} of {published_events:.0} event rows in written windows, late {late:.0}",
            windowed.reports, windowed.events
        );
        println!(
            "consumed    {} event rows (this process, a second consumer group)",
            consumed.events
        );
        println!(
            "unaccounted {unaccounted:.0} (sent - counted drops - in the processor's windows)"
        );
        println!(
            "latency     events, receive → consumed: p50 {:.1} ms, p99 {:.1} ms over {} rows; \
             window results durable after the window's end: p50 {:.0} ms, p99 {:.0} ms",
            percentile(&lat, 0.50),
            percentile(&lat, 0.99),
            lat.len(),
            percentile(&windowed.durable, 0.50),
            percentile(&windowed.durable, 0.99),
        );
        let per = |s: f64| s * 1e9 / sent.reports.max(1) as f64;
        let bench_other = cpu.bench - sent.cpu;
        println!(
            "cpu         during the send ({:.1} s) / whole run, CPU-s; ns per report sent",
            sent.seconds
        );
        for (what, during, total) in [
            ("sender (thread)", sent.cpu, sent.cpu),
            ("softirq (all)", cpu_send.softirq, cpu.softirq),
            ("collector", cpu_send.collector, cpu.collector),
            ("broker (tansu)", cpu_send.broker, cpu.broker),
            ("processor", cpu_send.processor, cpu.processor),
            ("bench consumer", cpu_send.bench - sent.cpu, bench_other),
        ] {
            println!(
                "  {what:<16} {during:6.2} / {total:6.2}  {:5.0} ns",
                per(total)
            );
        }
        Ok(())
    })();
    for pid in [child.id(), processor.id()] {
        // SAFETY: signalling our own children.
        unsafe {
            libc::kill(pid as libc::pid_t, libc::SIGTERM);
        }
    }
    let _ = child.wait();
    let _ = processor.wait();
    let _ = std::fs::remove_dir_all(&data);
    result
}

/// What the processor's written windows hold of this run.
#[derive(Debug, Default)]
struct Windowed {
    events: u64,
    reports: u64,
    /// Per event, how long after its window's end the window was durable (ns, sorted).
    durable: Vec<i64>,
}

/// Waits (up to 60 s) until the processor's written windows since `run_ns` hold `events`
/// events and `reports` reports; per event, how long after its window's end the window was
/// durable: the first checkpoint of its lane at or past the window's end was written then.
fn processed(data: &std::path::Path, run_ns: i64, events: f64, reports: f64) -> Windowed {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Int64Type, TimestampNanosecondType, UInt32Type};
    let deadline = Instant::now() + Duration::from_secs(60);
    let since = format!("window_end > to_timestamp_nanos({run_ns})");
    let event_sql = format!(
        "SELECT partition, window_end, sum(count) AS n FROM event_counts \
         WHERE {since} GROUP BY partition, window_end"
    );
    let report_sql = format!("SELECT CAST(sum(reports) AS BIGINT) FROM flows WHERE {since}");
    let store = kplane_store::Store::local(data);
    loop {
        let sql = |q: &str| kplane_store::query::sql_blocking(&store, q);
        let mut out = Windowed::default();
        for b in sql(&event_sql).unwrap_or_default() {
            let (p, end, count) = (
                b.column(0).as_primitive::<UInt32Type>(),
                b.column(1).as_primitive::<TimestampNanosecondType>(),
                b.column(2).as_primitive::<Int64Type>(),
            );
            for i in 0..b.num_rows() {
                let lane = kplane_stream_processor::processor::lane_name(
                    kplane_bus::topics::EVENTS,
                    p.value(i),
                );
                let commits = kplane_stream_processor::store::lane_log(&store, &lane)
                    .map(|l| l.commits)
                    .unwrap_or_default();
                let written = commits
                    .iter()
                    .find(|c| c.checkpoint.emitted_until_ns >= end.value(i))
                    .map_or(0, |c| c.written_ns);
                let c = count.value(i).max(0) as u64;
                out.events += c;
                out.durable
                    .extend(std::iter::repeat_n(written - end.value(i), c as usize));
            }
        }
        if reports > 0.0 {
            for b in sql(&report_sql).unwrap_or_default() {
                let n = b.column(0).as_primitive::<Int64Type>();
                out.reports += (0..n.len()).map(|i| n.value(i).max(0) as u64).sum::<u64>();
            }
        }
        let done = out.events as f64 >= events && out.reports as f64 >= reports;
        if done || Instant::now() >= deadline {
            out.durable.sort_unstable();
            return out;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}
