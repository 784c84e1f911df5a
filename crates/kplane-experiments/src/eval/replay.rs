//! `kplane eval replay`: back-testing from the store. A fresh knowledge service is trained on
//! one store's windows (as a cold start from history is) and then scores another store's
//! windows in order (the live path: features, models, episodes, forecasts), with no retraining
//! in between. It prints what was raised — per entity kind and type, and per hour — and the
//! forecast errors (MAPE and RMSE) against the last-value, EWMA and seasonal-naive baselines.
//! On a store of clean traffic, everything raised is a false alarm.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use kplane_model::results::{AnomalyPhase, EntityKind};

use super::forecasts::{ForecastScore, forecast_table, periods_of, score_forecasts};
use super::knowledge::Csv;
use super::pipeline::knowledge_config;

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// The store the models learn from (a stream processor's `data-dir`).
    #[arg(long)]
    train: PathBuf,
    /// The store whose windows are scored.
    #[arg(long)]
    score: PathBuf,
    /// Windows of `--train` trained on (the latest).
    #[arg(long, default_value_t = 3_600)]
    training_windows: usize,
    /// The models' registry (a temporary directory when not given).
    #[arg(long)]
    state: Option<PathBuf>,
    /// The false-alarm budget the thresholds are calibrated for (`[knowledge]
    /// false-alarms-per-hour`, whose default is this one's): what a looser or stricter
    /// calibration would have raised.
    #[arg(long, default_value_t = kplane_knowledge::Config::default().false_alarms_per_hour)]
    false_alarms_per_hour: f64,
    /// Every anomaly record the service published, as a JSON line: each episode's `start`,
    /// its `update`s (a type that changed, a peak) and its `end`, as on `int.anomalies`.
    #[arg(long)]
    anomalies: Option<PathBuf>,
    /// Every forecast as a JSON line (`forecasts/v1`: what the window turned out to be is the
    /// `last_value` of the forecast made at its end).
    #[arg(long)]
    forecasts: Option<PathBuf>,
}

pub fn run(a: ReplayArgs) -> anyhow::Result<()> {
    let open = |location: &std::path::Path| kplane_store::Store::open(location);
    let (train, unreadable) =
        kplane_knowledge::history::windows(&open(&a.train)?, a.training_windows);
    let (mut scored, unreadable_scored) =
        kplane_knowledge::history::windows(&open(&a.score)?, usize::MAX);
    if unreadable + unreadable_scored > 0 {
        eprintln!(
            "kplane eval replay: {} unreadable store files skipped",
            unreadable + unreadable_scored
        );
    }
    if train.len() < 4 || scored.is_empty() {
        bail!(
            "{} windows to train on in {}, {} to score in {}",
            train.len(),
            a.train.display(),
            scored.len(),
            a.score.display()
        );
    }
    let window_ns = train[1].end_ns - train[0].end_ns;
    kplane_knowledge::history::follow(&train, &mut scored, window_ns);
    let state = match &a.state {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!("kplane-eval-replay-{}", std::process::id())),
    };
    let _ = std::fs::remove_file(state.join(kplane_knowledge::registry::Registry::FILE));
    let window = Duration::from_nanos(window_ns as u64);
    let mut cfg = knowledge_config(&state, window, train.len());
    cfg.training_windows = train.len();
    cfg.false_alarms_per_hour = a.false_alarms_per_hour;
    let trained = train.len();
    let (mut engine, training_seconds) = kplane_knowledge::bench::train(cfg.engine(), train)
        .map_err(anyhow::Error::msg)
        .context("training")?;

    let started = Instant::now();
    let mut anomalies = Vec::new();
    let mut forecasts = Vec::new();
    for w in &scored {
        let out = engine.window(w);
        anomalies.extend(out.anomalies);
        forecasts.extend(out.forecasts);
    }
    let secs = started.elapsed().as_secs_f64();
    let hours = scored.len() as f64 * window_ns as f64 / 3.6e12;

    let started_ones: Vec<_> = anomalies
        .iter()
        .filter(|x| x.phase == AnomalyPhase::Start)
        .collect();
    let mut by: BTreeMap<(EntityKind, String), u64> = BTreeMap::new();
    for x in &started_ones {
        *by.entry((x.entity_kind, x.anomaly_type.as_str().to_string()))
            .or_default() += 1;
    }
    println!(
        "Trained on {trained} windows of {} in {training_seconds:.2} s; scored {} windows ({:.2} h) of {}: {} entity-windows in {secs:.2} s.",
        a.train.display(),
        scored.len(),
        hours,
        a.score.display(),
        engine.counts.entity_windows,
    );
    println!();
    println!("| entity | type | raised | per hour |");
    println!("|---|---|---|---|");
    for ((k, t), n) in &by {
        println!("| {} | {t} | {n} | {:.2} |", k.as_str(), *n as f64 / hours);
    }
    println!(
        "| all | all | {} | {:.2} |",
        started_ones.len(),
        started_ones.len() as f64 / hours
    );
    let mut errors = ForecastScore::new();
    score_forecasts(&forecasts, &periods_of(engine.registry()), &mut errors);
    print!(
        "{}",
        forecast_table(&[("all", "", &errors)], "replay", &mut Csv::default())
    );
    if let Some(p) = &a.anomalies {
        write_lines(p, &anomalies)?;
    }
    if let Some(p) = &a.forecasts {
        write_lines(p, &forecasts)?;
    }
    Ok(())
}

/// Writes `items` to `path` as JSON lines.
fn write_lines<T: serde::Serialize>(path: &std::path::Path, items: &[T]) -> anyhow::Result<()> {
    let mut text = String::new();
    for x in items {
        text.push_str(&serde_json::to_string(x)?);
        text.push('\n');
    }
    std::fs::write(path, text).with_context(|| format!("{}", path.display()))
}
