//! `kplane`: one command for every service, plus tools (`decode`, `config`, `sample-capture`).

mod config;
mod decode;
mod emulate;
mod files;
mod intent;
mod lab;
mod probe;
mod query;
mod sample;
mod serve;
mod topics;
mod tracegen;
mod up;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "kplane",
    version,
    about = "kplane: a knowledge plane for In-band Network Telemetry"
)]
struct Cli {
    /// Configuration file (TOML). Values are layered: defaults < file < KPLANE__SECTION__KEY
    /// environment variables < command-line flags.
    #[arg(short, long, global = true, env = "KPLANE_CONFIG")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the collector service (UDP or pcap → events on the bus).
    Collector(serve::CollectorArgs),
    /// Run the stream-processor service.
    StreamProcessor(serve::ServeArgs),
    /// Run the knowledge service.
    Knowledge(serve::ServeArgs),
    /// Run the intent-api service.
    IntentApi(serve::ServeArgs),
    /// Intents through the intent API: apply, dry-run, list, show, delete, approve, audit.
    Intent(intent::IntentArgs),
    /// GPINT's monitoring module on real switches: probes per a `probe-plan` intent, data
    /// recovery, returned probes to the collector, findings back to the API (see docs/gpint.md).
    Probe(probe::ProbeArgs),
    /// Everything in one process: emulator, collector, stream processor, API and web console.
    Up(up::UpArgs),
    /// A fabric of BMv2 switches in network namespaces with hosts sending real traffic, run
    /// by the same services as `up` (see docs/lab.md). Needs root and the P4 toolchain.
    #[command(subcommand)]
    Lab(lab::LabCommand),
    /// Emulate a P4 INT fabric that sends real telemetry reports (see docs/emulator.md).
    Emulate(emulate::EmulateArgs),
    /// The independent report generator (no code shared with the emulator) sending to a
    /// collector (see docs/knowledge.md#the-independent-generator).
    Tracegen(tracegen::TracegenArgs),
    /// Decode a pcap/pcapng capture: one JSON object per telemetry report or INT packet.
    Decode(decode::DecodeArgs),
    /// Print the effective configuration (after every layer) and check it.
    Config,
    /// Kafka topics: `kplane topics create` makes every topic the services publish, with the
    /// partitions they check (a deployment's init step; see docs/deploy.md).
    #[command(subcommand)]
    Topics(topics::TopicsCommand),
    /// Write a capture with a sample of every supported format (built by the wire builders).
    SampleCapture(sample::SampleArgs),
    /// SQL over the stream processor's analytics store (Parquet), printed as a table.
    Query(query::QueryArgs),
    /// The current Parquet files of a store table, one per line: what Spark, Trino or DuckDB
    /// read to see every row once (see docs/stream-processor.md#other-engines).
    Files(files::FilesArgs),
    /// Benchmarks (printed figures: see docs/benchmarks.md).
    #[command(subcommand)]
    Bench(kplane_bench::Bench),
    /// Evaluations against a ground truth: the emulator's, the independent generator's, the BMv2
    /// lab's (see docs/knowledge.md, docs/lab.md).
    #[command(subcommand)]
    Eval(kplane_experiments::eval::Eval),
    /// The seed papers' evaluations re-run on kplane: `kplane experiment list` names them;
    /// each writes a CSV, SVG plots and a markdown table beside the paper's figures.
    Experiment(kplane_experiments::experiment::ExperimentArgs),
    /// The API's query worker (started by the API itself: user SQL runs in it).
    #[command(hide = true)]
    QueryWorker(QueryWorkerArgs),
}

#[derive(Debug, clap::Args)]
struct QueryWorkerArgs {
    store_dir: std::path::PathBuf,
    memory: usize,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let source = config::source(cli.config.as_deref());
    match cli.command {
        Command::Collector(a) => serve::collector(source, a),
        Command::StreamProcessor(a) => serve::run(source, kplane_stream_processor::NAME, a),
        Command::Knowledge(a) => serve::run(source, kplane_knowledge::NAME, a),
        Command::IntentApi(a) => serve::run(source, kplane_intent_api::NAME, a),
        Command::Intent(a) => intent::run(a),
        Command::Probe(a) => probe::run(a),
        Command::Decode(a) => decode::run(a),
        Command::Emulate(a) => emulate::run_cli(source, a),
        Command::Tracegen(a) => tracegen::run_cli(a),
        Command::Up(a) => up::run(source, a),
        Command::Lab(c) => lab::run(source, c),
        Command::Config => config::print(&source),
        Command::Topics(c) => topics::run(source, c),
        Command::SampleCapture(a) => sample::run(a),
        Command::Query(a) => query::run(source, a),
        Command::Files(a) => files::run(source, a),
        Command::Bench(b) => kplane_bench::run(b),
        Command::Eval(e) => kplane_experiments::eval::run(e),
        Command::Experiment(a) => kplane_experiments::experiment::run(a),
        Command::QueryWorker(a) => {
            kplane_intent_api::query_worker::worker_main(&a.store_dir, a.memory)
        }
    }
}
