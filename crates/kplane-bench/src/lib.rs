//! # kplane-bench
//!
//! `kplane bench …`: benchmarks the issues ask for, printed as plain text with the parameters,
//! so figures can be quoted and reproduced (docs/benchmarks.md). Tooling, not a service: the
//! `kplane` binary's subcommand in a crate of its own, which reports errors with `anyhow` as
//! the binary does.

pub mod child;
pub mod closed_loop;
pub mod history;
pub mod ingest;
pub mod intents;
pub mod kafka;
pub mod processor;
pub mod skew;
pub mod soak;
pub mod store;

use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use kplane_collector::bench::ReductionParams;

#[derive(Debug, Subcommand)]
pub enum Bench {
    /// Data reduction of event detection on INTCollector's example (fat-tree, 20 switches,
    /// 5000 flows, 5 hops, every field), in virtual time.
    Reduction(ReductionArgs),
    /// Memory per tracked metric key.
    Memory(MemoryArgs),
    /// Off the wire: a collector process takes reports off a veth pair (`--input udp` or
    /// `af-xdp`), sent from a network namespace; CPU per report, loss (needs root).
    Ingest(crate::ingest::IngestArgs),
    /// Emulator speed: virtual time on the default fat-tree, INT on every flow, a TR v2.0
    /// report built for every delivered packet (no collector).
    Emulator(EmulatorArgs),
    /// Collector → Kafka → consumer group on one machine: sustained reports/s, loss, and
    /// receive-to-consume latency p50/p99 (needs a broker: `make broker`).
    Kafka(crate::kafka::KafkaArgs),
    /// Stream processor: reports/s through the 1 s window analytics on one core; with
    /// `--latency 20s`, arrival → window result / immediate event latency p50/p99.
    Processor(crate::processor::ProcessorArgs),
    /// The analytics store: an hour of window files with and without compaction, and a
    /// query over the hour on each (files listed, time).
    Store(crate::store::StoreArgs),
    /// A week of store history: queries over an hour, a day and a week at the windows'
    /// resolution and at the rolled-up one the API chooses.
    History(crate::history::HistoryArgs),
    /// Partition skew: a heavy source through the collector, partitioned by source only and
    /// with hot sources spread by flow; the busiest partition's share of each.
    Skew(crate::skew::SkewArgs),
    /// Intents: check, compile and conflict-check many intents (in memory).
    Intents(crate::intents::IntentsArgs),
    /// Table entries pushed per second to a P4Runtime switch (BMv2 started if no --addr).
    P4runtime(crate::intents::P4runtimeArgs),
    /// Flow churn through the collector's pipeline and the processor's detectors (virtual
    /// time): resident memory and state-table sizes and evictions per virtual minute.
    Soak(crate::soak::SoakArgs),
    /// The closed loop in `kplane up`: a DDoS → anomaly → block intents written → verified,
    /// seconds from the attack's start, and the attack's traffic at the victim afterwards.
    Loop(crate::closed_loop::LoopArgs),
}

#[derive(Debug, Args)]
pub struct EmulatorArgs {
    /// Virtual seconds to emulate.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    #[arg(long, default_value = "fat-tree:4")]
    topology: String,
    /// Poisson flow arrivals per second.
    #[arg(long, default_value_t = 1000.0)]
    flows: f64,
}

#[derive(Debug, Args)]
pub struct ReductionArgs {
    #[arg(long, default_value_t = 5000)]
    flows: u32,
    /// Reports per second (virtual time).
    #[arg(long, default_value_t = 1_000_000)]
    rate: u64,
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Real changes per second.
    #[arg(long, default_value_t = 1000)]
    changes: u64,
}

#[derive(Debug, Args)]
pub struct MemoryArgs {
    #[arg(long, default_value_t = 1_000_000)]
    flows: u32,
}

pub fn run(b: Bench) -> ExitCode {
    match b {
        Bench::Reduction(a) => reduction(a),
        Bench::Intents(a) => crate::intents::intents(a),
        Bench::P4runtime(a) => crate::intents::p4runtime(a),
        Bench::Memory(a) => memory(a),
        Bench::Emulator(a) => emulator(a),
        Bench::Processor(a) => match crate::processor::run_cli(a) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("kplane bench processor: {e}");
                ExitCode::FAILURE
            }
        },
        Bench::Kafka(a) => match crate::kafka::run(a) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("kplane bench kafka: {e}");
                ExitCode::FAILURE
            }
        },
        Bench::Skew(a) => match crate::skew::run(a) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("kplane bench skew: {e:#}");
                ExitCode::FAILURE
            }
        },
        Bench::Store(a) => match crate::store::run(a) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("kplane bench store: {e:#}");
                ExitCode::FAILURE
            }
        },
        Bench::History(a) => match crate::history::run(a) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("kplane bench history: {e:#}");
                ExitCode::FAILURE
            }
        },
        Bench::Soak(a) => match crate::soak::run(a) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("kplane bench soak: {e:#}");
                ExitCode::FAILURE
            }
        },
        Bench::Loop(a) => match crate::closed_loop::run(a) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("kplane bench loop: {e:#}");
                ExitCode::FAILURE
            }
        },
        Bench::Ingest(a) => match crate::ingest::run(a) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("kplane bench ingest: {e:#}");
                ExitCode::FAILURE
            }
        },
    }
}

fn reduction(a: ReductionArgs) -> ExitCode {
    let p = ReductionParams {
        flows: a.flows,
        rate: a.rate,
        seconds: a.seconds,
        changes: a.changes,
        ..ReductionParams::default()
    };
    let t = Instant::now();
    let r = kplane_collector::bench::reduction(&p);
    let wall = t.elapsed().as_secs_f64();
    println!(
        "scenario: fat-tree k=4 (20 switches), {} flows, 5 hops, every field",
        p.flows
    );
    println!(
        "rate {} reports/s x {} s (virtual), {} real changes/s, refresh {:?}",
        p.rate, p.seconds, p.changes, p.events.refresh
    );
    println!("reports                 {}", r.reports);
    println!("metric values in (M_all) {}", r.metric_values);
    println!("events out (M_event)    {}", r.events);
    println!("metric keys (K)         {}", r.keys);
    println!("reduction M_all/M_event {:.0}x", r.ratio);
    println!(
        "paper formula R*k/(E+K/P) for these R, K, E, P: {:.0}x",
        r.paper_ratio
    );
    println!(
        "detection throughput    {:.2} M reports/s ({:.1} s wall)",
        r.reports as f64 / wall / 1e6,
        wall
    );
    ExitCode::SUCCESS
}

fn emulator(a: EmulatorArgs) -> ExitCode {
    use kplane_emulator::run::{RunConfig, build, run};
    let cfg = RunConfig {
        topology: a.topology,
        duration: Duration::from_secs(a.seconds),
        flows_per_second: a.flows,
        ..RunConfig::default()
    };
    let sim = match build(&cfg) {
        Ok(s) => std::sync::Arc::new(std::sync::Mutex::new(s)),
        Err(e) => {
            eprintln!("kplane bench emulator: {e}");
            return ExitCode::from(2);
        }
    };
    match run(&cfg, sim, || false) {
        Ok(s) => {
            println!(
                "{} ({} switches, {} hosts), {} s virtual, {} flows/s, INT on every flow",
                s.topology, s.switches, s.hosts, a.seconds, a.flows
            );
            println!(
                "packets {} ({} delivered), events {}, reports built {} ({:.0} MB)",
                s.stats.packets_sent,
                s.stats.packets_delivered,
                s.stats.events,
                s.stats.reports,
                s.stats.report_bytes as f64 / 1e6
            );
            println!(
                "wall {:.2} s: {:.3} M emulated packets/s, {:.2} M events/s, one core",
                s.wall_seconds,
                s.packets_per_second() / 1e6,
                s.stats.events as f64 / s.wall_seconds / 1e6
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("kplane bench emulator: {e}");
            ExitCode::FAILURE
        }
    }
}

fn memory(a: MemoryArgs) -> ExitCode {
    let (keys, rss, table) = kplane_collector::bench::memory(a.flows);
    println!(
        "flows {}: {keys} metric keys (path, latency, per-hop latency)",
        a.flows
    );
    println!(
        "resident memory added  {:.1} MiB = {:.1} B per key",
        rss as f64 / 1048576.0,
        rss as f64 / keys.max(1) as f64
    );
    println!(
        "key table (buckets)    {:.1} MiB = {:.1} B per key",
        table as f64 / 1048576.0,
        table as f64 / keys.max(1) as f64
    );
    ExitCode::SUCCESS
}

/// CPU seconds (user + system) a process has used, from /proc.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let (utime, stime): (f64, f64) = (f.get(11)?.parse().ok()?, f.get(12)?.parse().ok()?);
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Some((utime + stime) / hz)
}

pub fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}
