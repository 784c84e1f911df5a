//! `kplane topics create`: every topic the services publish, created on the configured Kafka
//! cluster with the partitions the services check at start (the collector's `partitions`,
//! the processor's `result-partitions`, one for the knowledge service's) — what a deployment's
//! init step runs, so its topic list cannot drift from the services'.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use kplane_bus::BusKind;
use kplane_runtime::{ConfigSource, EXIT_CONFIG};

#[derive(Debug, Subcommand)]
pub enum TopicsCommand {
    /// Create every topic that is missing (whatever `bus.kafka.create-topics` says), then
    /// check that each has the partitions the services expect.
    Create(CreateArgs),
}

#[derive(Debug, Args)]
pub struct CreateArgs {
    /// Keep trying this long while the cluster does not answer (an init step started with
    /// its broker), e.g. 2m.
    #[arg(long, default_value = "0s", value_parser = humantime::parse_duration)]
    wait: Duration,
}

pub fn run(source: ConfigSource, command: TopicsCommand) -> ExitCode {
    let TopicsCommand::Create(args) = command;
    let mut cfg = match crate::config::load(&source) {
        Ok(c) => c,
        Err(e) => {
            eprint!("kplane: {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    if cfg.bus.kind != BusKind::Kafka {
        eprintln!("kplane topics: bus.kind is not \"kafka\"; the in-process bus needs no topics");
        return ExitCode::from(EXIT_CONFIG);
    }
    cfg.bus.kafka.create_topics = true;
    let mut wanted: Vec<(&str, u32)> = Vec::new();
    wanted.extend(kplane_collector::output_topics(&cfg.collector));
    wanted.extend(kplane_stream_processor::output_topics(
        &cfg.stream_processor,
    ));
    wanted.extend(kplane_knowledge::OUTPUT_TOPICS);
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("kplane topics: {e}");
            return ExitCode::FAILURE;
        }
    };
    let deadline = Instant::now() + args.wait;
    loop {
        let result = kplane_bus::open(&cfg.bus)
            .map_err(|e| e.to_string())
            .and_then(|bus| {
                rt.block_on(bus.ensure_topics(&wanted, 1))
                    .map_err(|e| e.to_string())
            });
        match result {
            Ok(()) => {
                for (topic, partitions) in &wanted {
                    println!("{topic}\t{partitions} partitions");
                }
                return ExitCode::SUCCESS;
            }
            Err(e) if Instant::now() < deadline => {
                eprintln!("kplane topics: {e}; trying again");
                std::thread::sleep(Duration::from_secs(2));
            }
            Err(e) => {
                eprintln!("kplane topics: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
}
