//! One entity kind's model of normal behaviour: a scaler, a detector from the registry, and a
//! threshold calibrated on held-out normal windows.
//!
//! Calibration is out of fold: the training windows are cut into spans of time, each span is
//! scored by a model fitted on the others. The threshold is where those scores' tail, fitted as
//! an exponential over their top 1 % (peaks over threshold), predicts the kind's share of the
//! false-alarm budget — and never below the largest held-out score. The rate is the kind's
//! false alarms per hour divided by its entity-windows per hour.
//!
//! An address's window that fits an attack's definition ([`crate::typer`]) is raised at a lower
//! bar. A flood that replaces half of its victim's traffic changes where the traffic comes from
//! more than how much: the model of all destinations scores it under the kind's threshold, but
//! over every clean destination-window it saw. The bar is calibrated too: windows that fit a
//! definition must pass it no more often than the kind's budget. Past the tail's start their
//! scores are taken to fall off as the kind's do, but how often they reach the tail is their
//! own, counted on the held-out windows (those windows are unusual in the very features the
//! model weighs); the bar is never below the largest held-out score. Each way of fitting a
//! definition ([`Fit`]: a destination's flood by more packets and smaller ones, by many new
//! sources in smaller packets, …) has its own bar, at an equal share of the budget: clean
//! windows fit some ways far more often than others. Where no clean window fits a way (the
//! emulator's fabrics; many new sources anywhere) that is the bar; where some often do — a
//! sparse fabric, a host's two usual flows become five small ones — it rises towards the
//! threshold.
//! A queue's or a link's definition is one measure at a fixed bar (a congested share, a
//! silence of 5 nats) that clean windows cross by chance, and a threshold keeps those apart
//! from congestion and failures. A queue's threshold is never below the score of the least
//! burst the definitions name: where queues were empty in every training window, every
//! held-out score is 0. A link window a silence counts in is judged by a silence as rare as
//! the budget allows by the link's own habit, unless a training window was silent past it
//! ([`EntityModel::judge_silences`]).

use std::collections::BTreeMap;

use kplane_model::results::{AnomalyType, EntityKind, FeatureDeviation};
use ndarray::Array2;
use serde::{Deserialize, Serialize};

use crate::KnowledgeError;
use crate::detectors::{self, Scorer};
use crate::features::{Sample, TYPING_ONLY, names};
use crate::typer::{self, Fit};

/// How a threshold was calibrated (kept in the registry).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    pub method: String,
    pub heldout_samples: usize,
    pub heldout_max: f64,
    /// The score the tail is fitted above.
    #[serde(default)]
    pub tail_start: f64,
    /// The tail's scale and shape (generalised Pareto; shape 0: exponential).
    pub tail_scale: f64,
    #[serde(default)]
    pub tail_shape: f64,
    /// Allowed false alarms per entity-window.
    pub rate: f64,
    pub threshold: f64,
    /// The share of the held-out scores the tail is fitted on (where its extrapolation starts).
    #[serde(default)]
    pub tail_share: f64,
    /// Of an address's kind: the bar of each way of fitting an attack's definition that some
    /// held-out window fitted (see the module docs). A way none fitted is judged by the largest
    /// held-out score, as is every way in a registry written before the bars were calibrated.
    #[serde(default)]
    pub definitions: Vec<DefinitionBar>,
    /// Of a link's kind: the threshold of a window a silence counts in (see
    /// [`EntityModel::judge_silences`]); 0 for other kinds, and in a registry written before it
    /// was kept (set when loaded).
    #[serde(default)]
    pub silence_threshold: f64,
}

/// How the held-out windows of an address's kind fitted one way of an attack's definition,
/// and the score a window that fits it must pass.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DefinitionBar {
    pub fit: Fit,
    /// The share of the held-out windows that fitted it.
    pub share: f64,
    /// How many of the tail's held-out windows did.
    pub in_tail: usize,
    pub bar: f64,
}

impl Calibration {
    /// Raises the threshold to `floor` where it is lower, saying so in the method.
    fn raise_to(&mut self, floor: f64, what: &str) {
        if floor > self.threshold {
            self.threshold = floor;
            self.method = format!("{}; raised to {what}", self.method);
        }
    }

    /// The score the fitted tail says `rate` of the scores exceed (below the held-out maximum
    /// too: callers bound it).
    fn tail_at(&self, rate: f64) -> f64 {
        // P(score > u + t) = share · (1 + ξ t / σ)^(−1/ξ)  ⇒  t = σ / ξ · ((share / rate)^ξ − 1).
        let ratio = (self.tail_share / rate.max(1e-12)).max(1.0);
        let t = if self.tail_shape > 1e-9 {
            self.tail_scale / self.tail_shape * (ratio.powf(self.tail_shape) - 1.0)
        } else {
            self.tail_scale * ratio.ln()
        };
        self.tail_start + t
    }

    /// Sets the bar of each way an address's window can fit an attack's definition from the
    /// held-out windows: `fitted` gives, per way some fitted, how many did and how many of
    /// those scored in the tail. The tail's shape is the kind's; how often a window that fits
    /// reaches the tail is its own — those windows are unusual in the very features the model
    /// weighs — counted, and at least what its share would give were fitting and scoring
    /// independent. Each way passes at an equal share of the kind's rate, so together they
    /// pass no more often than the kind's budget; a bar is never below the largest held-out
    /// score nor above the threshold.
    fn set_definition_bars(&mut self, fitted: &BTreeMap<Fit, (usize, usize)>) {
        let held = self.heldout_samples as f64;
        let tail = self.tail_share * held;
        let rate = self.rate / fitted.len().max(1) as f64;
        self.definitions = fitted
            .iter()
            .map(|(fit, (fitting, in_tail))| {
                let share = *fitting as f64 / held.max(1.0);
                let reaching = (*in_tail as f64).max(share * tail);
                let bar = if reaching > 0.0 {
                    // (reaching / held) · P(past b | in the tail) = rate, and tail_at(ρ)
                    // solves (tail / held) · P(past b | in the tail) = ρ.
                    self.tail_at(rate * tail / reaching)
                } else {
                    self.heldout_max
                };
                DefinitionBar {
                    fit: *fit,
                    share,
                    in_tail: *in_tail,
                    bar: bar.max(self.heldout_max).min(self.threshold),
                }
            })
            .collect();
    }

    /// The score a window that fits `fit` must pass.
    fn bar(&self, fit: Fit) -> f64 {
        if !self.threshold.is_finite() {
            return self.threshold;
        }
        let bar = self.definitions.iter().find(|d| d.fit == fit);
        bar.map_or(self.heldout_max, |d| d.bar)
            .max(self.heldout_max)
            .min(self.threshold)
    }
}

/// The training range of a model.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TrainingRange {
    pub start_ns: i64,
    pub end_ns: i64,
    pub windows: usize,
    pub samples: usize,
}

/// A fitted model of one entity kind.
#[derive(Debug)]
pub struct EntityModel {
    pub kind: EntityKind,
    pub detector: &'static str,
    pub mean: Vec<f64>,
    pub std: Vec<f64>,
    pub scorer: Box<dyn Scorer>,
    pub calibration: Calibration,
    pub training: TrainingRange,
}

/// What the registry stores of an [`EntityModel`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SavedModel {
    pub kind: EntityKind,
    pub detector: String,
    pub features: Vec<String>,
    pub mean: Vec<f64>,
    pub std: Vec<f64>,
    pub fitted: serde_json::Value,
    pub calibration: Calibration,
    pub training: TrainingRange,
    /// What [`weigh`] counted when the model was fitted ([`WEIGHING`]; 0 in a registry written
    /// before it was recorded).
    #[serde(default)]
    pub weighing: u32,
}

/// The version of what [`weigh`] counts, raised with each change: a detector fitted on windows
/// weighed otherwise scores this version's wrongly (its centroids hold coordinates now
/// counted as nothing), so it is not loaded and trained again. 1: a queue's samples count for
/// nothing.
pub(crate) const WEIGHING: u32 = 1;

/// Training parameters.
#[derive(Clone, Debug)]
pub struct TrainParams {
    pub detector: String,
    pub clusters: usize,
    /// Spans of time the training windows are cut into for calibration.
    pub folds: usize,
    /// The false alarms this kind's threshold allows per hour.
    pub false_alarms_per_hour: f64,
    pub window_ns: i64,
}

impl EntityModel {
    /// Standardised features.
    pub fn z(&self, x: &[f64]) -> Vec<f64> {
        x.iter()
            .zip(self.mean.iter().zip(&self.std))
            .map(|(v, (m, s))| (v - m) / s)
            .collect()
    }

    pub fn score(&self, x: &[f64]) -> f64 {
        let mut z = self.z(x);
        weigh(self.kind, x, &mut z);
        self.scorer.score(&z)
    }

    pub fn threshold(&self) -> f64 {
        self.calibration.threshold
    }

    /// The threshold of a window `x` typed `t`: an address's window that fits an attack's
    /// definition is judged by the lowest bar of the ways it fits, a link window a silence
    /// counts in by the [silence threshold](Self::judge_silences), any other by the
    /// extrapolated tail (see the module docs). Congestion at a destination is not judged
    /// lower: its queueing swings in clean windows too.
    pub fn threshold_for(&self, x: &[f64], t: AnomalyType) -> f64 {
        let c = &self.calibration;
        match t {
            AnomalyType::Ddos | AnomalyType::PortScan => typer::fits(self.kind, x)
                .into_iter()
                .map(|fit| c.bar(fit))
                .fold(self.threshold(), f64::min),
            _ if self.silence_counts(x) => c.silence_threshold,
            _ => self.threshold(),
        }
    }

    /// Whether a silence counts in a link window's score: its own, or its opposite direction's.
    fn silence_counts(&self, x: &[f64]) -> bool {
        self.kind == EntityKind::Link
            && (typer::feature(self.kind, x, "log_samples") == 0.0
                || typer::feature(self.kind, x, "reverse_silence_surprise") > 0.0)
    }

    /// The threshold of a link window a silence counts in, given the most surprising silence of
    /// a training window. The silence bar is the score of a silence whose surprise says it is
    /// as rare as the false-alarm budget's share of one link-window (−ln of the calibration's
    /// rate, in nats): the link's own habit of carrying its routes says how rare a silence is.
    /// It judges, unless a clean training window was already silent past it — there the habit
    /// underrates the fabric's chance silences, and the extrapolated tail judges too. A tail
    /// alone misjudges both ways: a dense fabric's links, never silent in training, score 0 held
    /// out and any chance silence would pass it; a sparse fabric's, silent by chance a few times
    /// among windows that all score alike, are extrapolated to a bar no failure reaches for
    /// windows.
    fn judge_silences(&self, loudest_chance: f64) -> f64 {
        let c = &self.calibration;
        if !(c.rate > 0.0 && c.threshold.is_finite()) {
            return c.threshold;
        }
        let bar = self.score(&silence_as_rare_as(&self.mean, c.rate));
        if loudest_chance < -c.rate.ln() {
            bar
        } else {
            bar.max(c.threshold)
        }
    }

    /// The lowest threshold any window is judged by: below it, no window is raised.
    pub fn lowest_threshold(&self) -> f64 {
        let c = &self.calibration;
        let lowest = Fit::of(self.kind)
            .iter()
            .map(|fit| c.bar(*fit))
            .fold(self.threshold(), f64::min);
        match self.kind {
            EntityKind::Link => lowest.min(c.silence_threshold),
            _ => lowest,
        }
    }

    /// The features, largest deviation as the detector weighs it first (those it does not
    /// weigh — [`TYPING_ONLY`], a silent link's utilisation — last), each with its plain one.
    pub fn deviations(&self, x: &[f64]) -> Vec<FeatureDeviation> {
        let z = self.z(x);
        let mut weighed = z.clone();
        weigh(self.kind, x, &mut weighed);
        let mut d: Vec<(f64, FeatureDeviation)> = names(self.kind)
            .iter()
            .zip(x.iter().zip(z))
            .enumerate()
            .map(|(i, (n, (v, z)))| {
                let f = FeatureDeviation {
                    name: n.to_string(),
                    value: *v,
                    normal: self.mean[i],
                    z,
                };
                (weighed[i].abs(), f)
            })
            .collect();
        d.sort_by(|a, b| {
            b.0.total_cmp(&a.0)
                .then(b.1.z.abs().total_cmp(&a.1.z.abs()))
        });
        d.into_iter().map(|(_, f)| f).collect()
    }

    pub fn save(&self) -> SavedModel {
        SavedModel {
            kind: self.kind,
            detector: self.detector.to_string(),
            features: names(self.kind).iter().map(|s| s.to_string()).collect(),
            mean: self.mean.clone(),
            std: self.std.clone(),
            fitted: self.scorer.save(),
            calibration: self.calibration.clone(),
            training: self.training.clone(),
            weighing: WEIGHING,
        }
    }

    pub fn load(s: &SavedModel) -> Result<Self, KnowledgeError> {
        let d = detectors::by_name(&s.detector)?;
        let incompatible = KnowledgeError::Incompatible;
        if s.features.len() != names(s.kind).len() {
            return Err(incompatible(format!(
                "{} model has features {:?}; this version extracts {:?}",
                s.kind.as_str(),
                s.features,
                names(s.kind)
            )));
        }
        if s.weighing != WEIGHING {
            return Err(incompatible(format!(
                "{} model fitted on windows weighed as by version {} of the weighing; this \
                 version weighs as by {WEIGHING}",
                s.kind.as_str(),
                s.weighing
            )));
        }
        let mut model = Self {
            kind: s.kind,
            detector: d.name,
            mean: s.mean.clone(),
            std: s.std.clone(),
            scorer: (d.load)(&s.fitted).map_err(incompatible)?,
            calibration: s.calibration.clone(),
            training: s.training.clone(),
        };
        if model.kind == EntityKind::Link && model.calibration.silence_threshold == 0.0 {
            // How silent the training windows were is not known: the tail judges too.
            model.calibration.silence_threshold = model.judge_silences(f64::INFINITY);
        }
        Ok(model)
    }

    /// Fits the model of `kind` on `samples` (entity-windows of normal traffic, any order) and
    /// calibrates its threshold on out-of-fold scores: the windows are cut into `folds` spans
    /// of time, each span is scored by a model fitted on the others, so every training window
    /// is also a held-out one.
    pub fn train(
        kind: EntityKind,
        samples: &[&Sample],
        p: &TrainParams,
    ) -> Result<Self, KnowledgeError> {
        let d = detectors::by_name(&p.detector)?;
        Self::train_with(kind, d, samples, p).map_err(KnowledgeError::Training)
    }

    fn train_with(
        kind: EntityKind,
        d: &'static detectors::DetectorKind,
        samples: &[&Sample],
        p: &TrainParams,
    ) -> Result<Self, String> {
        let mut ends: Vec<i64> = samples.iter().map(|s| s.window_end_ns).collect();
        ends.sort_unstable();
        ends.dedup();
        let folds = p.folds.max(2);
        if ends.len() < 2 * folds {
            return Err(format!(
                "{}: {} windows of history; at least {} are needed",
                kind.as_str(),
                ends.len(),
                2 * folds
            ));
        }
        let fold_of = |end: i64| ends.partition_point(|e| *e < end) * folds / ends.len();
        let mut held_scores = Vec::with_capacity(samples.len());
        // The ways the held-out windows fit an attack's definition (addresses), with scores.
        let mut fitting_scores: Vec<(Fit, f64)> = Vec::new();
        for f in 0..folds {
            let (held, fit_on): (Vec<&Sample>, Vec<&Sample>) =
                samples.iter().partition(|s| fold_of(s.window_end_ns) == f);
            let m = Self::fit(kind, d, &fit_on, p.clusters)?;
            for s in held {
                let score = m.score(&s.x);
                held_scores.push(score);
                let fits = typer::fits(kind, &s.x);
                fitting_scores.extend(fits.into_iter().map(|fit| (fit, score)));
            }
        }
        let mut model = Self::fit(kind, d, samples, p.clusters)?;
        model.training = TrainingRange {
            start_ns: ends[0],
            end_ns: ends[ends.len() - 1],
            windows: ends.len(),
            samples: samples.len(),
        };
        let hours = ends.len() as f64 * p.window_ns as f64 / 3.6e12;
        let rate = (p.false_alarms_per_hour * hours / held_scores.len() as f64).min(0.5);
        model.calibration = calibrate(held_scores, rate);
        if kind == EntityKind::Queue {
            // Queues empty in every training window (a sparse fabric's, the independent
            // generator's) score 0 held out, and a packet or two meeting would pass any bar
            // calibrated on them: nothing short of the least burst is raised at a queue.
            let least_burst = model.score(&typer::least_burst(&model.mean));
            model
                .calibration
                .raise_to(least_burst, "the least burst's score");
        }
        let c = &mut model.calibration;
        if c.threshold.is_finite() {
            let mut fitted: BTreeMap<Fit, (usize, usize)> = BTreeMap::new();
            for (fit, score) in fitting_scores {
                let (fitting, in_tail) = fitted.entry(fit).or_default();
                *fitting += 1;
                *in_tail += usize::from(score > c.tail_start);
            }
            c.set_definition_bars(&fitted);
        }
        if kind == EntityKind::Link {
            let loudest = samples
                .iter()
                .map(|s| typer::feature(kind, &s.x, "silence_surprise"))
                .fold(0.0, f64::max);
            model.calibration.silence_threshold = model.judge_silences(loudest);
        }
        Ok(model)
    }

    /// The scaler and the detector fitted on `samples` (not yet calibrated).
    fn fit(
        kind: EntityKind,
        d: &'static detectors::DetectorKind,
        samples: &[&Sample],
        clusters: usize,
    ) -> Result<Self, String> {
        let dims = names(kind).len();
        if samples.is_empty() {
            return Err(format!("{}: nothing to fit on", kind.as_str()));
        }
        let n = samples.len() as f64;
        let mut mean = vec![0.0; dims];
        for s in samples {
            for (m, v) in mean.iter_mut().zip(&s.x) {
                *m += v / n;
            }
        }
        let mut std = vec![0.0; dims];
        for s in samples {
            for ((sd, v), m) in std.iter_mut().zip(&s.x).zip(&mean) {
                *sd += (v - m) * (v - m) / n;
            }
        }
        let names = names(kind);
        let std: Vec<f64> = std
            .iter()
            .enumerate()
            .map(|(i, v)| {
                // A deviation from the usual is scaled like the measure it deviates.
                let base = names[i]
                    .strip_prefix("vs_usual_")
                    .and_then(|b| names.iter().position(|n| *n == b))
                    .unwrap_or(i);
                v.sqrt().max(std_floor(names[i], mean[base]))
            })
            .collect();
        let rows: Vec<f64> = samples
            .iter()
            .flat_map(|s| {
                let mut z: Vec<f64> =
                    s.x.iter()
                        .zip(mean.iter().zip(&std))
                        .map(|(v, (m, sd))| (v - m) / sd)
                        .collect();
                weigh(kind, &s.x, &mut z);
                z
            })
            .collect();
        let x = Array2::from_shape_vec((samples.len(), dims), rows).map_err(|e| e.to_string())?;
        Ok(Self {
            kind,
            detector: d.name,
            mean,
            std,
            scorer: (d.fit)(&x, clusters)?,
            calibration: Calibration::default(),
            training: TrainingRange::default(),
        })
    }
}

/// The smallest standard deviation a feature is scaled by. A feature nearly constant in
/// training (the ports a fabric's clients use, a link always saturated) must not turn the
/// first ordinary change into thousands of sigmas: a silence is measured in nats (one more
/// silent flow is not a sigma), an address's typical packet size a tenth e-fold away (≈ 10 %)
/// is at most one sigma (a mix of packet sizes is steadier than counts), a `log_` count a
/// quarter e-fold away (≈ 28 %), a link's utilisation 5 % of its capacity ([`UTILISATION_FLOOR`]),
/// a queue's occupancy [`OCCUPANCY_FLOOR`] packets, any other measure 5 % of its mean (a
/// deviation from the usual: of the measure's).
fn std_floor(name: &str, mean: f64) -> f64 {
    if name.ends_with("silence_surprise") {
        1.0
    } else if is_packet_size(name) {
        0.1
    } else if name.starts_with("log_") || name.starts_with("vs_usual_log_") {
        0.25
    } else if name.contains("utilization") {
        UTILISATION_FLOOR
    } else if name.contains("occupancy") {
        OCCUPANCY_FLOOR.max(0.05 * mean.abs())
    } else {
        (0.05 * mean.abs()).max(1e-2)
    }
}

/// A queue a few packets fuller than usual is at most one sigma: a port's queue that is
/// empty in training (most are, one queue per port) holds a packet or two whenever two
/// packets meet, in any fabric — not news; a burst of tens of packets is.
pub(crate) const OCCUPANCY_FLOOR: f64 = 4.0;

/// A link's utilisation (per mille of its capacity) moving by 5 % of the capacity is at most
/// one sigma: a link gone from 0.5 % to 4 % busy is not news in any fabric, however still it
/// was in training.
const UTILISATION_FLOOR: f64 = 50.0;

/// A link busier than usual counts only once it carries half its capacity (‰): below that its
/// rise harms nothing, in any fabric — a link gone from 2 % to 25 % busy under an incast's
/// answers is the incast's, which its queues and its host show. Quieter never counts: links
/// fall quieter all the time (an elephant done, an incast over), and the one type about a link
/// carrying less is a failure, judged by its silence.
const BUSY_LINK: f64 = 500.0;

fn is_packet_size(name: &str) -> bool {
    name.ends_with("log_packet_bytes")
}

/// How far below normal an address's counts count, in standard deviations. Hosts fall quiet
/// all the time (a client done, a server idle) and none of the anomaly types is a host sending
/// or receiving less: what the model sees of an address's counts is their excess. Its packets'
/// size counts both ways (a flood of small requests, of large responses).
const QUIETER_FLOOR: f64 = -2.0;

/// What the detector weighs of an entity's standardised features `z` (of its features `x`):
/// * an address's: how far below normal its counts reach is capped (see [`QUIETER_FLOOR`]),
///   and those it is only typed by ([`TYPING_ONLY`]) are nothing;
/// * a link's: its samples are nothing — how many of its packets the sinks reported is
///   neither a failure nor harm: its utilisation says whether it is busier, its silences
///   whether its routes went elsewhere (a sparse link's quiet window is not) —, its
///   utilisation counts only up, and only in a window in which it reached [`BUSY_LINK`]; a
///   silent link's utilisation is nothing: it only restates the silence, whose surprise is
///   `silence_surprise` (a sparse link's silence is ordinary however busy it was);
/// * a queue's: its samples are nothing, as a link's are — how many reports passed through it
///   is neither queueing nor harm (a heavy hitter across a sparse fabric sends a hundred times
///   a queue's usual reports through it, its occupancy unchanged): it is judged by its occupancy.
fn weigh(kind: EntityKind, x: &[f64], z: &mut [f64]) {
    let names = names(kind);
    if matches!(kind, EntityKind::Link | EntityKind::Queue) {
        for (v, name) in z.iter_mut().zip(names) {
            if name.ends_with("log_samples") {
                *v = 0.0;
            }
        }
    }
    match kind {
        EntityKind::Source | EntityKind::Destination => {
            for (v, name) in z.iter_mut().zip(names) {
                if TYPING_ONLY.contains(name) {
                    *v = 0.0;
                } else if is_packet_size(name) {
                    *v = v.abs();
                } else {
                    *v = v.max(QUIETER_FLOOR);
                }
            }
        }
        EntityKind::Link => {
            let silent = crate::typer::feature(kind, x, "log_samples") == 0.0;
            let busy = crate::typer::feature(kind, x, "utilization_max") >= BUSY_LINK;
            for (v, name) in z.iter_mut().zip(names) {
                if silent && !name.ends_with("silence_surprise") {
                    *v = 0.0;
                } else if name.contains("utilization") {
                    *v = if busy { v.max(0.0) } else { 0.0 };
                }
            }
        }
        EntityKind::Queue | EntityKind::Flow => {}
    }
}

/// Exceedances the tail is fitted on: the top 1 % of the held-out scores, at least
/// [`MIN_TAIL`] (or a tenth of the scores when there are fewer than ten times as many).
const MIN_TAIL: usize = 50;

/// The threshold that `rate` of normal scores exceed: a generalised Pareto distribution fitted
/// to the scores' tail (peaks over threshold) — the excesses of the top `k` scores over the
/// `k+1`-th, whose share of all scores is `k / n`, by the method of moments — extrapolated to
/// `rate`, and never below the largest score. The shape is kept between 0 (an exponential
/// tail) and [`MAX_SHAPE`]: a tail that looks lighter than exponential in a few dozen scores is
/// not trusted to stay so far beyond them; with fewer than [`MIN_TAIL`] excesses it is 0.
pub fn calibrate(mut scores: Vec<f64>, rate: f64) -> Calibration {
    scores.retain(|s| s.is_finite());
    scores.sort_by(f64::total_cmp);
    let n = scores.len();
    if n < 2 {
        return Calibration {
            method: "none: too few held-out scores".into(),
            threshold: f64::INFINITY,
            ..Calibration::default()
        };
    }
    let k = (n / 100).max(MIN_TAIL.min(n / 10)).max(1);
    let u = scores[n - 1 - k];
    let max = scores[n - 1];
    let excess: Vec<f64> = scores[n - k..].iter().map(|s| s - u).collect();
    let mean = excess.iter().sum::<f64>() / k as f64;
    let var = excess.iter().map(|e| (e - mean).powi(2)).sum::<f64>() / k as f64;
    // Method of moments: ξ = (1 − m²/s²) / 2, σ = m (1 − ξ); from fewer than MIN_TAIL
    // excesses the shape is too noisy to extrapolate with, and the tail is taken exponential.
    let shape = if var > 0.0 && k >= MIN_TAIL {
        (0.5 * (1.0 - mean * mean / var)).clamp(0.0, MAX_SHAPE)
    } else {
        0.0
    };
    let share = k as f64 / n as f64;
    let mut c = Calibration {
        method: format!(
            "generalised Pareto tail over the held-out top {:.2} % (peaks over threshold)",
            100.0 * share
        ),
        heldout_samples: n,
        heldout_max: max,
        tail_start: u,
        tail_scale: mean * (1.0 - shape),
        tail_shape: shape,
        tail_share: share,
        rate,
        ..Calibration::default()
    };
    // A small floor keeps an all-identical held-out set from flagging any change at all.
    c.threshold = c.tail_at(rate).max(max).max(u + 0.5);
    c
}

/// The link window `usual` (features in [`names`] order) gone silent with a surprise of
/// −ln `rate` nats: a silence whose chance, by the link's own habit of carrying its routes,
/// is the false-alarm budget's share of one link-window.
fn silence_as_rare_as(usual: &[f64], rate: f64) -> Vec<f64> {
    let mut x = usual.to_vec();
    for (v, name) in x.iter_mut().zip(names(EntityKind::Link)) {
        match *name {
            "log_samples" => *v = 0.0,
            "silence_surprise" => *v = -rate.ln(),
            _ => {}
        }
    }
    x
}

/// The heaviest tail calibration extrapolates (a generalised Pareto shape).
const MAX_SHAPE: f64 = 0.5;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::measured;
    use crate::typer;

    /// k-means with `clusters`, 4 folds, 1 false alarm an hour, 1 s windows.
    fn kmeans(clusters: usize) -> TrainParams {
        TrainParams {
            detector: "kmeans".into(),
            clusters,
            folds: 4,
            false_alarms_per_hour: 1.0,
            window_ns: 1_000_000_000,
        }
    }

    fn sample(end: i64, x: Vec<f64>) -> Sample {
        Sample {
            kind: EntityKind::Link,
            entity: "1:1".into(),
            window_end_ns: end,
            x,
            exposure: Default::default(),
            reverse: None,
        }
    }

    #[test]
    fn an_addresss_counts_count_above_normal_its_packet_size_both_ways_and_its_transit_not() {
        let kind = EntityKind::Destination;
        let at = |name: &str| names(kind).iter().position(|n| *n == name).unwrap();
        let mut z = vec![-5.0; names(kind).len()];
        z[at("vs_usual_log_packet_bytes")] = -4.0;
        z[at("vs_usual_log_transit_us")] = 9.0;
        let x = z.clone();
        weigh(kind, &x, &mut z);
        assert_eq!(z[at("vs_usual_log_reports")], QUIETER_FLOOR);
        assert_eq!(z[at("vs_usual_log_packet_bytes")], 4.0);
        assert_eq!(z[at("log_packet_bytes")], 5.0);
        assert_eq!(
            z[at("vs_usual_log_transit_us")],
            0.0,
            "typed by, not detected by"
        );
        assert_eq!(z[at("log_transit_us")], 0.0);
    }

    #[test]
    fn a_queue_is_judged_by_its_occupancy_not_by_the_reports_through_it() {
        let kind = EntityKind::Queue;
        let mut z = vec![-5.0; names(kind).len()];
        let x = z.clone();
        weigh(kind, &x, &mut z);
        for (v, name) in z.iter().zip(names(kind)) {
            let weighed = if name.ends_with("log_samples") {
                0.0
            } else {
                -5.0
            };
            assert_eq!(*v, weighed, "{name}");
        }
    }

    #[test]
    fn a_links_samples_count_for_nothing_and_a_silent_links_only_by_its_silence() {
        let kind = EntityKind::Link;
        let at = |name: &str| names(kind).iter().position(|n| *n == name).unwrap();
        // A link six sigmas busier than usual, at `peak` ‰ of its capacity.
        let busier = |samples: f64, peak: f64| {
            let mut x = vec![1.0; names(kind).len()];
            x[at("log_samples")] = samples;
            x[at("utilization_max")] = peak;
            let mut z = vec![6.0; x.len()];
            z[at("vs_usual_log_samples")] = -3.0;
            weigh(kind, &x, &mut z);
            z
        };
        let busy = |samples: f64| busier(samples, 600.0);
        let z = busy(4.0);
        assert_eq!(z[at("log_samples")], 0.0, "more reports: nothing");
        assert_eq!(z[at("vs_usual_log_samples")], 0.0, "fewer: nothing either");
        assert_eq!(z[at("utilization_max")], 6.0);
        assert_eq!(z[at("vs_usual_utilization_mean")], 6.0);
        // Under half its capacity, however much busier than usual: nothing.
        let z = busier(4.0, 250.0);
        for n in [
            "utilization_max",
            "vs_usual_utilization_max",
            "utilization_mean",
        ] {
            assert_eq!(z[at(n)], 0.0, "{n}: a quarter busy harms nothing");
        }
        for peak in [1.0, 600.0] {
            let mut quieter = vec![-7.0; names(kind).len()];
            let mut x = vec![1.0; quieter.len()];
            x[at("utilization_max")] = peak;
            weigh(kind, &x, &mut quieter);
            assert_eq!(
                quieter[at("vs_usual_utilization_mean")],
                0.0,
                "an elephant done, an incast over: quieter is nothing"
            );
        }
        let mut quieter = vec![-7.0; names(kind).len()];
        weigh(kind, &vec![1.0; quieter.len()], &mut quieter);
        assert_eq!(quieter[at("silence_surprise")], -7.0);
        let z = busy(0.0);
        assert_eq!(z[at("silence_surprise")], 6.0);
        assert_eq!(z[at("reverse_silence_surprise")], 6.0);
        for n in [
            "utilization_mean",
            "vs_usual_utilization_max",
            "vs_usual_log_samples",
        ] {
            assert_eq!(z[at(n)], 0.0, "{n}: a silence's restatement");
        }
    }

    #[test]
    fn calibration_extrapolates_the_tail_and_stays_above_the_heldout_maximum() {
        let scores: Vec<f64> = (0..1000).map(|i| (i as f64) / 100.0).collect();
        let c = calibrate(scores.clone(), 1e-4);
        assert!(c.threshold > c.heldout_max, "{c:?}");
        let looser = calibrate(scores, 1e-2);
        assert!(looser.threshold < c.threshold);
        assert!(calibrate(vec![], 0.1).threshold.is_infinite());
        assert!(calibrate(vec![1.0], 0.1).threshold.is_infinite());
    }

    #[test]
    fn a_heavier_tail_is_extrapolated_further() {
        let mut rng = kplane_model::rng::Rng::new(3);
        let exponential: Vec<f64> = (0..20_000).map(|_| rng.exponential(1.0)).collect();
        // Pareto with index 3 (shape 1/3), scaled to the same mean.
        let pareto: Vec<f64> = (0..20_000)
            .map(|_| 2.0 * ((1.0 - rng.uniform()).powf(-1.0 / 3.0) - 1.0))
            .collect();
        let (e, p) = (calibrate(exponential, 1e-6), calibrate(pareto, 1e-6));
        assert!(e.tail_shape < 0.1, "{e:?}");
        assert!(p.tail_shape > 0.2, "{p:?}");
        // The exponential's 1e-6 quantile is ln(1e6) ≈ 13.8.
        assert!((e.threshold - 13.8).abs() < 2.5, "{e:?}");
        assert!(p.threshold > 2.0 * e.threshold, "{p:?}");
    }

    #[test]
    fn a_window_fitting_a_definition_is_raised_above_every_clean_window() {
        let kind = EntityKind::Destination;
        let at = |name: &str| names(kind).iter().position(|n| *n == name).unwrap();
        let mut rng = kplane_model::rng::Rng::new(7);
        let p = kmeans(2);
        // 20 destinations over 100 windows, their counts and deviations noisy; their bytes go
        // with their reports (packets of their usual size), so a clean window rarely fits a
        // definition.
        let usual = |rng: &mut kplane_model::rng::Rng| {
            let mut x: Vec<f64> = (0..names(kind).len()).map(|_| 0.3 * rng.normal()).collect();
            for m in measured(kind) {
                x[at(m)] += 4.0;
            }
            x[at("vs_usual_log_bytes")] = x[at("vs_usual_log_reports")] + 0.05 * rng.normal();
            x
        };
        let samples = destination_windows(2000, |_| usual(&mut rng));
        let refs: Vec<&Sample> = samples.iter().collect();
        let m = EntityModel::train(kind, &refs, &p).unwrap();
        let c = &m.calibration;
        assert!(c.heldout_max < c.threshold, "{c:?}");
        assert!(c.definitions.iter().all(|d| d.share < 0.005), "{c:?}");
        assert_eq!(m.lowest_threshold(), c.heldout_max);
        // Spoofed sources replacing half of a victim's traffic: 6× its usual sources in
        // packets a third smaller, no more of them. Under the kind's threshold, over every
        // clean window: raised, as what it is by definition.
        let mut flood = vec![0.0; names(kind).len()];
        for m in measured(kind) {
            flood[at(m)] = 4.0;
        }
        flood[at("vs_usual_log_sources")] = 6f64.ln();
        flood[at("vs_usual_log_bytes")] = -0.5;
        // A share, not a count: a tenth of its flows begun in the window's last quarter.
        flood[at("late_flow_share")] = 0.1;
        let score = m.score(&flood);
        assert_eq!(typer::define_vector(kind, &flood), AnomalyType::Ddos);
        assert_eq!(m.threshold_for(&flood, AnomalyType::Ddos), c.heldout_max);
        assert_eq!(m.threshold_for(&flood, AnomalyType::Unknown), c.threshold);
        assert!(
            score > c.heldout_max && score < c.threshold,
            "{score} {c:?}"
        );
        // The same window at a host whose own sending grew 20× meanwhile is the return half
        // of its transfers, not a flood: judged by the kind's threshold, not raised.
        let mut answered = flood.clone();
        answered[at("vs_usual_log_bytes_other_way")] = 3.0;
        answered[at("answered_share")] = 0.9;
        assert_eq!(typer::define_vector(kind, &answered), AnomalyType::Unknown);
        assert_eq!(m.score(&answered), score);
        assert!(score < m.threshold_for(&answered, AnomalyType::Unknown));
        // The same change with packets of the usual size fits no definition: not raised.
        let mut crowd = flood.clone();
        crowd[at("vs_usual_log_bytes")] = 0.0;
        assert_eq!(typer::define_vector(kind, &crowd), AnomalyType::Unknown);
        assert!(m.score(&crowd) < m.threshold_for(&crowd, AnomalyType::Unknown));
        // Queueing 8× its usual on the way to it is congestion by definition, but the detector
        // does not weigh it and its threshold is the kind's: still not raised.
        let mut queued = crowd.clone();
        queued[at("vs_usual_log_transit_us")] = 8f64.ln();
        assert_eq!(typer::define_vector(kind, &queued), AnomalyType::Congestion);
        assert_eq!(m.score(&queued), m.score(&crowd));
        assert_eq!(
            m.threshold_for(&queued, AnomalyType::Congestion),
            c.threshold
        );
        // A model whose threshold could not be calibrated raises nothing.
        let none = calibrate(vec![], 0.1);
        let mut uncalibrated = EntityModel::load(&m.save()).unwrap();
        uncalibrated.calibration = none;
        assert!(
            uncalibrated
                .threshold_for(&flood, AnomalyType::Ddos)
                .is_infinite()
        );
        assert!(uncalibrated.lowest_threshold().is_infinite());
    }

    /// `n` windows of 20 destinations, the `i`th one's features `x(i)`.
    fn destination_windows(n: i64, mut x: impl FnMut(i64) -> Vec<f64>) -> Vec<Sample> {
        (0..n)
            .map(|i| Sample {
                kind: EntityKind::Destination,
                entity: format!("10.0.0.{}", i % 20),
                window_end_ns: i / 20,
                x: x(i),
                exposure: Default::default(),
                reverse: None,
            })
            .collect()
    }

    #[test]
    fn where_clean_windows_often_fit_a_definition_that_ways_bar_rises_towards_the_threshold() {
        // A sparse fabric: a host's few flows swing, and one window in twenty of each host has
        // 1.8× its usual packets, two fifths smaller — two of a flood's signs, by chance; none
        // comes from 4× its usual sources.
        let kind = EntityKind::Destination;
        let at = |name: &str| names(kind).iter().position(|n| *n == name).unwrap();
        let mut rng = kplane_model::rng::Rng::new(11);
        let samples = destination_windows(4000, |i| {
            let mut x: Vec<f64> = (0..names(kind).len()).map(|_| 0.3 * rng.normal()).collect();
            for m in measured(kind) {
                x[at(m)] += 4.0;
            }
            let swing = if i % 20 == i / 20 % 20 { 0.6 } else { 0.0 };
            x[at("vs_usual_log_reports")] = swing + 0.05 * rng.normal();
            x[at("vs_usual_log_bytes")] = 0.2 * swing + 0.05 * rng.normal();
            x
        });
        let fitting = samples
            .iter()
            .filter(|s| typer::define_vector(kind, &s.x) == AnomalyType::Ddos)
            .count();
        assert!((150..=250).contains(&fitting), "{fitting}");
        let refs: Vec<&Sample> = samples.iter().collect();
        let m = EntityModel::train(kind, &refs, &kmeans(2)).unwrap();
        let c = &m.calibration;
        let [d] = c.definitions.as_slice() else {
            panic!("one way fitted: {c:?}")
        };
        assert_eq!(d.fit, Fit::FloodMorePacketsSmaller);
        assert_eq!(d.share, fitting as f64 / 4000.0);
        // They score high: more of them reach the tail than their share would put there.
        let tail = c.tail_share * 4000.0;
        assert!(d.in_tail as f64 > 2.0 * d.share * tail, "{c:?}");
        // Such windows pass the bar at the kind's rate (the only way any window fitted): the
        // tail's at the rate times the tail's windows over those of them that fit.
        let bar = c.tail_at(c.rate * tail / d.in_tail as f64);
        assert!(c.heldout_max < bar && bar < c.threshold, "{bar} {c:?}");
        // Taking fitting and scoring as independent would have set it lower.
        assert!(c.tail_at(c.rate / d.share) < bar);
        assert_eq!(d.bar, bar);
        let at_usual = |reports: f64, bytes: f64, sources: f64| {
            let mut x = vec![0.0; names(kind).len()];
            for m in measured(kind) {
                x[at(m)] = 4.0;
            }
            x[at("vs_usual_log_reports")] = reports;
            x[at("vs_usual_log_bytes")] = bytes;
            x[at("vs_usual_log_sources")] = sources;
            x
        };
        let swing = at_usual(0.6, 0.12, 0.0);
        assert_eq!(m.threshold_for(&swing, AnomalyType::Ddos), bar);
        assert_eq!(m.threshold_for(&swing, AnomalyType::Unknown), c.threshold);
        // A flood from 7× the usual sources in smaller packets fits a way no clean window
        // did: it is judged by the largest held-out score, as is a registry's window written
        // before the bars were calibrated.
        let spoofed = at_usual(0.0, -0.5, 7f64.ln());
        assert_eq!(typer::fits(kind, &spoofed), [Fit::FloodNewSourcesSmaller]);
        assert_eq!(m.threshold_for(&spoofed, AnomalyType::Ddos), c.heldout_max);
        assert_eq!(m.lowest_threshold(), c.heldout_max);
        let mut old = EntityModel::load(&m.save()).unwrap();
        old.calibration.definitions.clear();
        assert_eq!(old.threshold_for(&swing, AnomalyType::Ddos), c.heldout_max);
    }

    #[test]
    fn a_link_never_silent_in_training_raises_only_a_silence_rarer_than_the_budget() {
        let kind = EntityKind::Link;
        let at = |name: &str| names(kind).iter().position(|n| *n == name).unwrap();
        // A dense fabric's link: some of its routes cross it in every training window.
        let samples: Vec<Sample> = (0..400)
            .map(|i| {
                let mut x = vec![0.0; names(kind).len()];
                x[at("utilization_mean")] = 40.0 + (i % 7) as f64;
                x[at("utilization_max")] = 90.0 + (i % 5) as f64;
                x[at("log_samples")] = (30.0 + (i % 11) as f64).ln_1p();
                sample(i, x)
            })
            .collect();
        let refs: Vec<&Sample> = samples.iter().collect();
        let m = EntityModel::train(kind, &refs, &kmeans(2)).unwrap();
        let c = &m.calibration;
        assert_eq!(c.heldout_max, 0.0);
        let silent = |nats: f64| {
            let mut x = samples[0].x.clone();
            x[at("log_samples")] = 0.0;
            x[at("silence_surprise")] = nats;
            x
        };
        // One link, 400 windows of 1 s, 1 false alarm an hour: the budget allows a chance of
        // 1/3600 a window, −ln of which is 8.2 nats.
        assert!((c.rate - 1.0 / 3600.0).abs() < 1e-12, "{c:?}");
        let bar = |x: &[f64]| m.threshold_for(x, typer::define_vector(kind, x));
        assert!(m.score(&silent(6.0)) < bar(&silent(6.0)));
        assert!(m.score(&silent(9.0)) > bar(&silent(9.0)));
        // The tail alone, calibrated on windows that never fell silent, would have raised both.
        assert!(m.score(&silent(6.0)) > m.threshold());
        // So is one whose opposite direction fell silent.
        let mut reverse_silent = samples[0].x.clone();
        reverse_silent[at("reverse_silence_surprise")] = 3.0;
        assert!(m.score(&reverse_silent) < bar(&reverse_silent));
        assert!(m.score(&reverse_silent) > m.threshold());
        // A link busier than usual is judged by the tail as before.
        let mut busy = samples[0].x.clone();
        busy[at("utilization_max")] = 900.0;
        assert_eq!(bar(&busy), m.threshold());
    }

    #[test]
    fn a_sparse_link_silent_by_chance_is_judged_by_its_habit_not_by_a_tail_of_ties() {
        let kind = EntityKind::Link;
        let at = |name: &str| names(kind).iter().position(|n| *n == name).unwrap();
        // A sparse fabric's link, alike in every window but two it fell silent in by chance
        // (in one span of time, so the spans fitted without them score them held out): the
        // held-out tail is ties at 0 and two silences.
        let link = |chance_nats: f64| {
            let samples: Vec<Sample> = (0..4000)
                .map(|i| {
                    let mut x = vec![0.0; names(kind).len()];
                    x[at("utilization_mean")] = 3.0;
                    x[at("utilization_max")] = 9.0;
                    x[at("log_samples")] = 4.0_f64.ln_1p();
                    if i == 100 || i == 300 {
                        x[at("log_samples")] = 0.0;
                        x[at("silence_surprise")] = chance_nats;
                    }
                    sample(i, x)
                })
                .collect();
            let refs: Vec<&Sample> = samples.iter().collect();
            let p = TrainParams {
                false_alarms_per_hour: 0.01,
                ..kmeans(2)
            };
            (
                EntityModel::train(kind, &refs, &p).unwrap(),
                samples[0].x.clone(),
            )
        };
        let silent = |usual: &[f64], nats: f64| {
            let mut x = usual.to_vec();
            x[at("log_samples")] = 0.0;
            x[at("silence_surprise")] = nats;
            x
        };
        // 0.01 false alarms an hour on one link: a chance of 1/360,000 a window, 12.8 nats.
        let (m, usual) = link(7.0);
        let bar = |x: &[f64]| m.threshold_for(x, typer::define_vector(kind, x));
        assert!(m.calibration.heldout_max > 6.0, "{:?}", m.calibration);
        assert!(m.score(&silent(&usual, 11.0)) < bar(&silent(&usual, 11.0)));
        assert!(m.score(&silent(&usual, 14.0)) > bar(&silent(&usual, 14.0)));
        // The tail, fitted to 48 ties and two silences, is extrapolated past that failure.
        assert!(
            m.score(&silent(&usual, 14.0)) < m.threshold(),
            "{:?}",
            m.calibration
        );
        assert_eq!(m.lowest_threshold(), bar(&silent(&usual, 14.0)));
        // Chance silences past the bar: the habit underrates them, and the tail judges.
        let (m, usual) = link(14.0);
        assert!(m.calibration.heldout_max > 13.0, "{:?}", m.calibration);
        let dead = silent(&usual, 20.0);
        assert_eq!(
            m.threshold_for(&dead, AnomalyType::LinkFailure),
            m.threshold()
        );
        // Kept in the registry, and set when loading one written before it was.
        let mut saved = m.save();
        assert_eq!(
            EntityModel::load(&saved).unwrap().calibration,
            m.calibration
        );
        saved.calibration.silence_threshold = 0.0;
        assert_eq!(
            EntityModel::load(&saved).unwrap().calibration,
            m.calibration
        );
    }

    #[test]
    fn a_link_model_flags_a_dead_link_and_not_a_normal_one() {
        let p = kmeans(3);
        let samples: Vec<Sample> = (0..200)
            .map(|i| {
                let u = 0.4 + 0.05 * ((i * 7 % 11) as f64 / 11.0);
                let d = 0.01 * ((i % 5) as f64 - 2.0);
                // Measured, silence surprises (own, reverse), deviations from the usual.
                sample(
                    i,
                    vec![u, u + 0.1, 5.0 + (i % 3) as f64 * 0.1, 0.0, 0.0, d, d, d],
                )
            })
            .collect();
        let refs: Vec<&Sample> = samples.iter().collect();
        let m = EntityModel::train(EntityKind::Link, &refs, &p).unwrap();
        let dead = [0.0, 0.0, 0.0, 9.2, 9.2, -0.42, -0.52, -5.1];
        assert!(m.score(&[0.42, 0.52, 5.1, 0.0, 0.0, 0.0, 0.0, 0.0]) < m.threshold());
        assert!(m.score(&dead) > m.threshold());
        // A surprising silence is one measure clean windows cross by chance: a silent link is
        // judged by the extrapolated threshold, or the silence bar where that is higher,
        // whatever its type.
        let bar = m.threshold_for(&dead, AnomalyType::LinkFailure);
        assert!(bar >= m.threshold() && m.score(&dead) > bar, "{bar}");
        assert_eq!(m.threshold_for(&dead, AnomalyType::Unknown), bar);
        assert_eq!(m.lowest_threshold(), m.threshold());
        assert!(
            m.deviations(&dead)
                .iter()
                .any(|d| d.name == "silence_surprise" && d.z > 5.0)
        );
        let again = EntityModel::load(&m.save()).unwrap();
        assert_eq!(again.score(&dead), m.score(&dead));
        // Fitted when the weighing counted other features: trained again, not loaded.
        let mut before = m.save();
        before.weighing = WEIGHING - 1;
        assert!(EntityModel::load(&before).is_err());
        assert!(EntityModel::train(EntityKind::Link, &refs[..2], &p).is_err());
    }

    #[test]
    fn a_port_queue_empty_in_training_is_raised_for_a_burst_not_for_a_packet_or_two() {
        let kind = EntityKind::Queue;
        let at = |name: &str| names(kind).iter().position(|n| *n == name).unwrap();
        let p = kmeans(2);
        // A port's queue that held at most a packet in training (sampled ~1000 times a
        // window): its occupancy's own deviation is a fraction of a packet.
        let samples: Vec<Sample> = (0..200)
            .map(|i| {
                let mut x = vec![0.0; names(kind).len()];
                x[at("log_samples")] = (1000.0 + (i % 7) as f64 * 10.0).ln_1p();
                x[at("occupancy_max")] = (i % 2) as f64;
                x[at("vs_usual_occupancy_max")] = (i % 2) as f64 - 0.5;
                sample(i, x)
            })
            .collect();
        let refs: Vec<&Sample> = samples.iter().collect();
        let m = EntityModel::train(kind, &refs, &p).unwrap();
        let deeper = |packets: f64| {
            let mut x = samples[0].x.clone();
            for name in ["occupancy_max", "vs_usual_occupancy_max"] {
                x[at(name)] = packets;
            }
            x
        };
        let z = |x: &[f64]| {
            m.deviations(x)
                .iter()
                .find(|d| d.name == "occupancy_max")
                .map(|d| d.z)
                .unwrap()
        };
        // Two packets meeting at the port: half a sigma (not four), not raised.
        assert!(z(&deeper(2.0)) <= 0.5, "{}", z(&deeper(2.0)));
        assert!(m.score(&deeper(2.0)) < m.threshold());
        // A burst of 80 packets: twenty sigmas, raised.
        assert!(z(&deeper(80.0)) >= 19.0);
        assert!(m.score(&deeper(80.0)) > m.threshold());
    }

    #[test]
    fn a_queue_empty_in_every_training_window_is_raised_no_shallower_than_the_least_burst() {
        let kind = EntityKind::Queue;
        let at = |name: &str| names(kind).iter().position(|n| *n == name).unwrap();
        // A sparse fabric's queue: never a packet queued in training, its reports many or few.
        let samples: Vec<Sample> = (0..200)
            .map(|i| {
                let mut x = vec![0.0; names(kind).len()];
                x[at("log_samples")] = (20.0 * (1 + i % 9) as f64).ln_1p();
                sample(i, x)
            })
            .collect();
        let refs: Vec<&Sample> = samples.iter().collect();
        let m = EntityModel::train(kind, &refs, &kmeans(2)).unwrap();
        let window = |packets: f64, reports: f64| {
            let mut x = samples[0].x.clone();
            for name in ["occupancy_max", "vs_usual_occupancy_max"] {
                x[at(name)] = packets;
            }
            x[at("log_samples")] = reports.ln_1p();
            x
        };
        // Every held-out score is 0: the bar is the least burst's, not a hair above 0.
        assert_eq!(m.calibration.heldout_max, 0.0);
        assert!(m.threshold() >= m.score(&crate::typer::least_burst(&m.mean)));
        assert!(
            m.calibration.method.contains("least burst"),
            "{}",
            m.calibration.method
        );
        // Eight packets meeting, or a hundred times the reports: not raised.
        assert!(m.score(&window(8.0, 20.0)) < m.threshold());
        assert!(m.score(&window(0.0, 20_000.0)) < m.threshold());
        // A burst of 24 packets: raised.
        assert!(m.score(&window(24.0, 20.0)) > m.threshold());
    }
}
