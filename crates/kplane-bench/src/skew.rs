//! `kplane bench skew`: a skewed emulator workload (one heavy source among the background
//! flows) through the collector's pipeline with every report published, partitioned by
//! source only and then with hot sources spread by flow: the busiest partition's share,
//! side by side. Virtual time; deterministic.

use std::time::Duration;

use clap::Args;
use kplane_collector::bench::PartitionSpread;
use kplane_collector::config::HotSourceConfig;
use kplane_emulator::run::{RunConfig, build};

#[derive(Debug, Args)]
pub struct SkewArgs {
    /// Virtual seconds of traffic.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// The steady-state columns leave out the first seconds (a source is judged hot after a
    /// second of its traffic).
    #[arg(long, default_value_t = 2)]
    warmup: u64,
    /// Bus partitions.
    #[arg(long, default_value_t = 8)]
    partitions: u32,
    /// The emulator scenario: the heavy source (see docs/emulator.md).
    #[arg(long, default_value = "heavy-hitter")]
    scenario: String,
    /// Background Poisson flows per second.
    #[arg(long, default_value_t = 1000.0)]
    flows: f64,
    /// `hot-sources.share` of the spreading run.
    #[arg(long, default_value_t = HotSourceConfig::default().share)]
    share: f64,
}

/// The report datagrams of the run with their virtual receive times.
fn workload(a: &SkewArgs) -> anyhow::Result<Vec<(u64, Vec<u8>)>> {
    let cfg = RunConfig {
        duration: Duration::from_secs(a.seconds),
        scenario: a.scenario.clone(),
        flows_per_second: a.flows,
        ..RunConfig::default()
    };
    let mut sim = build(&cfg)?;
    let end = cfg.duration.as_nanos() as u64;
    let mut out = Vec::new();
    while sim.now() < end {
        sim.run_until((sim.now() + 1_000_000).min(end));
        let now = sim.now();
        out.extend(sim.take_reports().into_iter().map(|r| (now, r.bytes)));
    }
    Ok(out)
}

pub fn run(a: SkewArgs) -> anyhow::Result<()> {
    let reports = workload(&a)?;
    println!(
        "kplane bench skew: fat-tree:4, {} background flows/s + scenario {}, {} s virtual, {} reports, {} partitions keyed by the Kafka partitioner",
        a.flows,
        a.scenario,
        a.seconds,
        reports.len(),
        a.partitions
    );
    println!(
        "{:<36} {:>14} {:>14} {:>12} {:>22} {:>18}",
        "partitioning",
        "busiest share",
        "max / mean",
        "after warm-up",
        "after warm-up max/mean",
        "hot-source records"
    );
    // Busiest partition's share and its ratio to the mean.
    let busiest = |per: &[u64]| {
        let total = per.iter().sum::<u64>().max(1) as f64;
        let max = *per.iter().max().unwrap_or(&0) as f64;
        (100.0 * max / total, max * per.len() as f64 / total)
    };
    let warmup_ns = a.warmup * 1_000_000_000;
    let exporter = std::net::SocketAddr::from(([10, 255, 0, 9], 5000));
    for (name, share) in [
        ("by source only".to_string(), 0.0),
        (format!("hot sources by flow (share {})", a.share), a.share),
    ] {
        let mut spread = PartitionSpread::new(
            a.partitions,
            HotSourceConfig {
                share,
                ..HotSourceConfig::default()
            },
        );
        let mut at_warmup = None;
        for (t, bytes) in &reports {
            if *t >= warmup_ns && at_warmup.is_none() {
                at_warmup = Some(spread.published());
            }
            spread.datagram(bytes, exporter, *t);
        }
        let (per, hot) = spread.finish();
        anyhow::ensure!(per.iter().sum::<u64>() > 0, "no report was published");
        let steady: Vec<u64> = match &at_warmup {
            Some(w) => per.iter().zip(w).map(|(a, b)| a - b).collect(),
            None => per.clone(),
        };
        let (all, steady) = (busiest(&per), busiest(&steady));
        println!(
            "{:<36} {:>13.1}% {:>12.2} {:>13.1}% {:>22.2} {:>18}",
            name, all.0, all.1, steady.0, steady.1, hot
        );
    }
    Ok(())
}
