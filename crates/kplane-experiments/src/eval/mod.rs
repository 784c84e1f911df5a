//! `kplane eval …`: components scored against the emulator's ground truth, printed as a table
//! with the parameters (docs/knowledge.md#evaluation).

mod family;
mod forecasts;
mod incidents;
mod knowledge;
mod lab;
mod pipeline;
mod replay;
mod score;

use std::process::ExitCode;

use clap::Subcommand;

#[derive(Debug, Subcommand)]
pub enum Eval {
    /// The knowledge service: learn clean traffic, label the training scenarios, then score
    /// detection, typing, delay, false alarms, forecasts, training and scoring cost on other
    /// seeds and attack parameters.
    Knowledge(knowledge::KnowledgeArgs),
    /// The knowledge service on real switches: a `kplane lab up` fabric of BMv2 switches learns
    /// clean traffic, then attacks drawn from the seed are scored as `knowledge` scores them
    /// (root and the P4 toolchain; docs/lab.md).
    Lab(lab::LabArgs),
    /// Back-testing: train the knowledge service on one store's windows, score another's,
    /// and print what it raised (per hour) and its forecast errors.
    Replay(replay::ReplayArgs),
}

pub fn run(e: Eval) -> ExitCode {
    // The services' warnings (RUST_LOG=info for everything they say).
    let _ = kplane_runtime::init_logging(&kplane_runtime::LogConfig {
        level: "warn".into(),
        ..Default::default()
    });
    let r = match e {
        Eval::Knowledge(a) => knowledge::run(a),
        Eval::Lab(a) => lab::run(a),
        Eval::Replay(a) => replay::run(a),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kplane eval: {e:#}");
            ExitCode::FAILURE
        }
    }
}
