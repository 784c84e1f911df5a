//! `kplane bench processor`: stream-processor throughput through the window analytics (one
//! core, from decoded batches) and, with `--latency`, the latency from a report's arrival at
//! the collector to its window result and to the immediate events it raises, through the whole
//! in-process pipeline (emulator in real time → UDP → collector → embedded bus → processor).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::Args;
use kplane_bus::headers;
use kplane_bus::topics as result_topics;
use kplane_runtime::{BoxError, Shutdown};
use kplane_stream_processor::bench::{BenchConfig, run};
use kplane_stream_processor::detect::Alert;
use kplane_stream_processor::processor::LATEST_ARRIVAL;

#[derive(Debug, Args)]
pub struct ProcessorArgs {
    /// Reports to push through the analytics. The default, 13 one-second windows, measures
    /// the sustained rate: the first windows also grow the heap (page faults a long-running
    /// processor pays once), which a 5-window run (4 M) counts in.
    #[arg(long, default_value_t = 12_000_000)]
    records: u64,
    /// Reports per second of event time (what one 1 s window holds).
    #[arg(long, default_value_t = 1_000_000)]
    rate: u64,
    /// Distinct flows.
    #[arg(long, default_value_t = 10_000)]
    flows: u32,
    /// Reports per input batch (the collector's batch size).
    #[arg(long, default_value_t = 8_192)]
    batch: usize,
    /// Also measure arrival → window result / immediate event latency for this long (e.g.
    /// 20s) through the in-process pipeline.
    #[arg(long, value_parser = humantime::parse_duration)]
    latency: Option<Duration>,
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

pub fn run_cli(a: ProcessorArgs) -> Result<(), BoxError> {
    // As `kplane stream-processor` runs (see alloc.rs).
    let dir = std::env::temp_dir().join(format!("kplane-bench-sp-{}", std::process::id()));
    let b = BenchConfig {
        records: a.records,
        rate: a.rate,
        flows: a.flows,
        batch: a.batch,
        window: Duration::from_secs(1),
    };
    let r = run(&b, &dir)?;
    let _ = std::fs::remove_dir_all(&dir);
    println!(
        "kplane bench processor: {} reports (5 hops, {} flows, {} reports/s of event time, batches of {}), 1 s tumbling windows",
        r.records, b.flows, b.rate, b.batch
    );
    println!(
        "analytics   {:.2} M reports/s on one core ({:.2} s; {} windows, {} result rows; detectors + panes + 6 DataFusion queries + Parquet per window)",
        r.records_per_s() / 1e6,
        r.seconds,
        r.windows,
        r.result_rows
    );
    println!("stages      {}", r.stages);
    println!(
        "ipc decode  {:.1} M reports/s (reading the bus payloads, measured apart)",
        r.ipc_decode_records_per_s / 1e6
    );
    if let Some(d) = a.latency {
        latency(d)?;
    }
    Ok(())
}

/// Runs the in-process pipeline for `d` of wall time and prints the latency percentiles.
fn latency(d: Duration) -> Result<(), BoxError> {
    use kplane_emulator::run::{RunConfig, build, run};
    use kplane_emulator::sim::SimConfig;
    let data = std::env::temp_dir().join(format!("kplane-bench-lat-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&data);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let ccfg = kplane_collector::Config {
        admin: "127.0.0.1:0".parse()?,
        listen: vec!["127.0.0.1:0".parse()?],
        publish_reports: true,
        linger: Duration::from_millis(5),
        ..kplane_collector::Config::default()
    };
    let bus = kplane_collector::embedded_bus(&ccfg);
    let shutdown = Shutdown::new();
    let collector = rt.block_on(kplane_collector::start(
        ccfg,
        Arc::new(bus.clone()),
        shutdown.clone(),
    ))?;
    let pcfg = kplane_stream_processor::Config {
        admin: "127.0.0.1:0".parse()?,
        data_dir: data.clone(),
        lateness: Duration::from_millis(100),
        ..kplane_stream_processor::Config::default()
    };
    kplane_stream_processor::create_result_topics(&bus, &pcfg, 1 << 16);
    let mut windows = bus.consumer(result_topics::WINDOWS, "bench")?;
    let mut alerts = bus.consumer(result_topics::ALERTS, "bench")?;
    let sp = rt.spawn(kplane_stream_processor::run_embedded(
        pcfg,
        bus.clone(),
        shutdown.clone(),
    ));
    let rc = RunConfig {
        collectors: collector.udp.clone(),
        duration: d,
        scenario: "microburst".into(),
        realtime: true,
        flows_per_second: 1_000.0,
        sim: SimConfig {
            clock_base_ns: kplane_model::unix_time_ns(),
            ..SimConfig::default()
        },
        ..RunConfig::default()
    };
    let sim = Arc::new(Mutex::new(build(&rc)?));
    let (mut window_ms, mut alert_ms) = (Vec::new(), Vec::new());
    let mut drain = |window_ms: &mut Vec<f64>, alert_ms: &mut Vec<f64>| {
        for m in windows.drain(Duration::ZERO) {
            let arrival: i64 = m
                .message
                .header(LATEST_ARRIVAL)
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            // One sample per commit (its tables share the arrival time).
            if m.message.header(headers::SCHEMA) == Some("queues/v1") && arrival > 0 {
                window_ms.push((m.message.timestamp_ns as i64 - arrival) as f64 / 1e6);
            }
        }
        for m in alerts.drain(Duration::ZERO) {
            for line in String::from_utf8_lossy(&m.message.payload).lines() {
                if let Ok(a) = serde_json::from_str::<Alert>(line) {
                    alert_ms.push((a.detected_ns - a.received_ns) as f64 / 1e6);
                }
            }
        }
        windows.commit();
        alerts.commit();
    };
    let summary = std::thread::scope(|s| {
        let h = s.spawn(|| run(&rc, sim.clone(), || false));
        while !h.is_finished() {
            std::thread::sleep(Duration::from_millis(100));
            drain(&mut window_ms, &mut alert_ms);
        }
        h.join()
    })
    .map_err(|_| "the emulator panicked")??;
    std::thread::sleep(Duration::from_millis(1_500));
    drain(&mut window_ms, &mut alert_ms);
    shutdown.trigger();
    rt.block_on(async {
        let _ = sp.await;
        let _ = collector.wait().await;
    });
    let _ = std::fs::remove_dir_all(&data);
    window_ms.sort_by(f64::total_cmp);
    alert_ms.sort_by(f64::total_cmp);
    println!(
        "latency     {} reports over {:.0} s (emulator in real time, microburst): arrival → window result p50 {:.0} ms, p99 {:.0} ms ({} windows; 1 s windows + 100 ms lateness); arrival → immediate event p50 {:.2} ms, p99 {:.2} ms ({} events)",
        summary.reports_sent,
        d.as_secs_f64(),
        percentile(&window_ms, 0.5),
        percentile(&window_ms, 0.99),
        window_ms.len(),
        percentile(&alert_ms, 0.5),
        percentile(&alert_ms, 0.99),
        alert_ms.len(),
    );
    Ok(())
}
