//! `kplane experiment NAME [--runs N] [--out DIR] [--seed S] [--fast]`: the seed papers'
//! evaluations re-run on kplane. Each experiment is a module here and a line in
//! `EXPERIMENTS`; it measures one run into a [`Table`], and the harness repeats it `--runs`
//! times (seeds `S`, `S+1`, …), averages per point with 95 % intervals, draws its plots, sets
//! its figures beside the paper's and checks the paper's qualitative shape (exit 1 if it does
//! not hold). docs/experiments.md collects the tables.

mod accuracy;
mod capacity;
mod complex;
mod cpu;
mod gpint;
mod int_label;
mod kdn;
mod offwire;
mod output;
mod rate;
mod table;
mod te;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

pub use table::{Summary, Table};

/// Every experiment. Adding one: a module in this folder and a line here.
const EXPERIMENTS: &[&dyn Experiment] = &[
    &accuracy::Accuracy,
    &cpu::Cpu,
    &rate::Rate,
    &capacity::Capacity,
    &complex::Complex,
    &int_label::traffic::Traffic,
    &int_label::packets::Packets,
    &int_label::coverage::Coverage,
    &int_label::timeline::Timeline,
    &int_label::pro::Pro,
    &int_label::base_b::BaseB,
    &gpint::congestion::Congestion,
    &gpint::degradation::Degradation,
    &gpint::recovery::Recovery,
    &kdn::Kdn,
    &te::Te,
];

/// What one run is given.
#[derive(Clone, Copy, Debug)]
pub struct Ctx {
    pub seed: u64,
    /// The few-second variant CI runs: fewer points, shorter runs, same shape.
    pub fast: bool,
}

/// One claim of the paper beside kplane's figure for it.
#[derive(Clone, Debug)]
pub struct Comparison {
    pub what: String,
    pub paper: String,
    pub kplane: String,
}

impl Comparison {
    pub fn new(
        what: impl Into<String>,
        paper: impl Into<String>,
        kplane: impl Into<String>,
    ) -> Self {
        Self {
            what: what.into(),
            paper: paper.into(),
            kplane: kplane.into(),
        }
    }
}

/// A plot of the means: `y` against `x`, a line per distinct value of `series`, over the
/// rows matching `filter`. Log axes are drawn as log10 with the values as labels.
#[derive(Clone, Debug)]
pub struct Plot {
    /// Appended to the experiment's name for the file (`""`: `NAME.svg`).
    pub suffix: &'static str,
    pub title: &'static str,
    pub x: &'static str,
    pub y: &'static str,
    pub series: &'static [&'static str],
    pub filter: &'static [(&'static str, &'static str)],
    pub x_label: &'static str,
    pub y_label: &'static str,
    pub log_x: bool,
    pub log_y: bool,
}

pub trait Experiment: Sync {
    fn name(&self) -> &'static str;
    /// One line: which figure, what it shows.
    fn about(&self) -> &'static str;
    /// Paper and section.
    fn source(&self) -> &'static str;
    /// The workload and how it was measured (markdown).
    fn setup(&self, fast: bool) -> String;
    /// One run.
    fn run(&self, ctx: &Ctx) -> anyhow::Result<Table>;
    fn plots(&self) -> Vec<Plot>;
    /// kplane's figures beside the paper's, from the means.
    fn compare(&self, s: &Summary) -> Vec<Comparison>;
    /// Why kplane's figures differ from the paper's, where they do (markdown).
    fn notes(&self) -> &'static str {
        ""
    }
    /// Where the means break the paper's qualitative shape (empty: it holds).
    fn shape(&self, s: &Summary) -> Vec<String>;
}

#[derive(Debug, Args)]
pub struct ExperimentArgs {
    /// An experiment's name, or `list`.
    name: String,
    /// Runs (seeds `seed`, `seed+1`, …), averaged with 95 % confidence intervals.
    #[arg(long, default_value_t = 1)]
    runs: u32,
    /// Where the CSV, the plots and the markdown table go (`DIR/NAME.*`).
    #[arg(long, default_value = "experiments")]
    out: PathBuf,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The few-second variant (what CI runs): fewer points, shorter runs.
    #[arg(long)]
    fast: bool,
}

pub fn run(a: ExperimentArgs) -> ExitCode {
    if a.name == "list" {
        for e in EXPERIMENTS {
            println!("{:<22} {} ({})", e.name(), e.about(), e.source());
        }
        return ExitCode::SUCCESS;
    }
    let Some(e) = EXPERIMENTS.iter().find(|e| e.name() == a.name) else {
        let names: Vec<_> = EXPERIMENTS.iter().map(|e| e.name()).collect();
        eprintln!(
            "kplane experiment: no experiment {:?}; there are: {}",
            a.name,
            names.join(", ")
        );
        return ExitCode::from(2);
    };
    match run_one(*e, &a) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(err) => {
            eprintln!("kplane experiment {}: {err:#}", a.name);
            ExitCode::from(2)
        }
    }
}

/// Runs, summarises and writes one experiment; whether the paper's shape held.
fn run_one(e: &dyn Experiment, a: &ExperimentArgs) -> anyhow::Result<bool> {
    std::fs::create_dir_all(&a.out)?;
    let mut runs = Vec::new();
    for i in 0..u64::from(a.runs.max(1)) {
        let seed = a.seed + i;
        let started = std::time::Instant::now();
        let t = e.run(&Ctx { seed, fast: a.fast })?;
        eprintln!(
            "{}: run {} (seed {seed}) took {:.1} s",
            e.name(),
            i + 1,
            started.elapsed().as_secs_f64()
        );
        runs.push((seed, t));
    }
    let tables: Vec<Table> = runs.iter().map(|(_, t)| t.clone()).collect();
    let s = table::summarise(&tables);
    let base = a.out.join(e.name());
    output::write_csv(&base.with_extension("csv"), &runs)?;
    let mut plots = Vec::new();
    for p in e.plots() {
        let path = a.out.join(format!("{}{}.svg", e.name(), p.suffix));
        output::draw(&path, &p, &s.means)?;
        plots.push(path);
    }
    let cmp = e.compare(&s);
    let md = output::markdown(e, &s, &cmp, &plots, a.fast, a.seed);
    std::fs::write(base.with_extension("md"), &md)?;
    println!("{md}");
    let problems = e.shape(&s);
    for p in &problems {
        println!("shape: {p}");
    }
    if problems.is_empty() {
        println!("shape: as the paper's");
    }
    println!(
        "written: {}.{{csv,md}} and {} plot(s)",
        base.display(),
        plots.len()
    );
    Ok(problems.is_empty())
}
