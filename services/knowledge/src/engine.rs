//! The knowledge engine, independent of the bus: window results and alerts in, anomalies and
//! forecasts out.
//!
//! * Window results arrive per (table, partition); a window is complete once a processor lane
//!   has said it published through it (`kplane-lane-through-ns`) and no other lane that kept
//!   pace is still on it, or a later window has been seen, or the input went idle; then it
//!   becomes entity-windows.
//! * Cold start: until `min-windows` windows of history exist (from the store or live), the
//!   engine is `learning` and raises nothing. Then it trains; every `retrain-every` windows it
//!   trains again on the last `training-windows`, in a thread of its own, and swaps the new
//!   models in between two windows (none is lost). A training that fails keeps the previous
//!   models and says why in the registry.
//! * Scoring: an entity-window above its model's threshold opens (or extends) an anomaly
//!   episode; `close-after` windows below close it.

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Instant;

use arrow_array::RecordBatch;
use kplane_model::results::{
    Alert, AlertKind, Anomaly, AnomalyPhase, AnomalyType, COLLATERAL_LISTED, Collateral,
    EntityKind, Explanation, Forecast,
};

use crate::baseline::Baselines;
use crate::collateral::{self, Raised};
use crate::explain;
use crate::features::{FastMap, FastSet, MODELLED, Sample, Window, window_end};
use crate::forecast::{self, Coefficients, Forecaster};
use crate::model::{EntityModel, TrainParams};
use crate::registry::{ForecastInfo, Registry, Settled, Status, Training, TyperInfo};
use crate::typer::Typer;

/// A switch-to-switch link is expected (an all-zero window when missing) while it was in at
/// least [`EXPECTED_AFTER`] more of the recent windows than it missed, counting at most this
/// many: a busy one stays expected through this many silent windows less `EXPECTED_AFTER`, so
/// that a failed link keeps scoring.
const PRESENCE_CAP: u8 = 40;
/// Windows a link is seen in before its absence is a sample: the windows its silence takes to
/// be judged ([`crate::baseline`]) — a link missing before then is a fabric still warming up,
/// not a failure.
const EXPECTED_AFTER: u8 = crate::baseline::JUDGE_AFTER as u8;

/// The engine's settings (from `[knowledge]`).
#[derive(Clone, Debug)]
pub struct EngineConfig {
    pub state_dir: PathBuf,
    pub min_windows: usize,
    pub training_windows: usize,
    pub retrain_every: usize,
    pub close_after: u32,
    /// Windows of an `unknown` episode over its threshold before it is raised.
    pub unknown_after: u32,
    /// An `unknown` episode this long settles (0: never).
    pub settle_after_ns: i64,
    pub train: TrainParams,
}

/// What one step produced.
#[derive(Debug, Default)]
pub struct Output {
    pub anomalies: Vec<Anomaly>,
    pub forecasts: Vec<Forecast>,
}

impl Output {
    fn extend(&mut self, o: Output) {
        self.anomalies.extend(o.anomalies);
        self.forecasts.extend(o.forecasts);
    }
}

/// One window kept for (re)training.
#[derive(Debug)]
struct Kept {
    samples: Vec<Sample>,
    series: Vec<KeptValue>,
    /// How the long flows of the window before went on in this one.
    continued: Vec<forecast::Continued>,
}

/// A series entity's window in a kept window: what its forecast model learns from
/// ([`forecast::Value::observed`]), `None` if the entity was in an anomaly then.
#[derive(Debug)]
struct KeptValue {
    series: &'static str,
    entity: String,
    observed: Option<forecast::Observed>,
}

impl KeptValue {
    fn of(v: &forecast::Value, frozen: Option<&Frozen>) -> Self {
        let in_anomaly = frozen.is_some_and(|f| f.contains(series_kind(v.series), &v.entity));
        Self {
            series: v.series,
            entity: v.entity.clone(),
            observed: (!in_anomaly).then(|| v.observed()),
        }
    }
}

/// The entity kind a forecast series is of.
fn series_kind(series: &str) -> EntityKind {
    if series == forecast::SERIES[0] {
        EntityKind::Link
    } else {
        EntityKind::Destination
    }
}

#[derive(Debug)]
struct Episode {
    anomaly: Anomaly,
    below: u32,
    touched: bool,
    /// Its start was published. An `unknown` episode is held until it has been over its
    /// threshold in `unknown_after` windows — an outlier no fault's definition explains is
    /// noise until it lasts — and its entity's usual has matured; one that ends before is never
    /// published; its entity learns nothing meanwhile all the same.
    raised: bool,
}

/// Models produced by a training.
#[derive(Debug)]
struct Trained {
    models: BTreeMap<EntityKind, EntityModel>,
    forecasts: BTreeMap<&'static str, Coefficients>,
    problems: Vec<String>,
    seconds: f64,
}

/// Counters for metrics.
#[derive(Clone, Debug, Default)]
pub struct Counts {
    pub windows: u64,
    /// Windows in which most expected links were missing (no link silence judged).
    pub telemetry_gaps: u64,
    pub late_results: u64,
    /// `unknown` episodes that ended before `unknown_after` windows over their threshold, or
    /// before their entity's usual matured: not raised.
    pub unknown_not_raised: u64,
    pub entity_windows: u64,
    pub trainings_ok: u64,
    pub trainings_failed: u64,
}

#[derive(Debug)]
pub struct Engine {
    cfg: EngineConfig,
    pending: BTreeMap<i64, Window>,
    /// Processor lanes that publish the tables read here → the end of the latest window each
    /// has published completely.
    lanes: FastMap<String, i64>,
    finalized_until: i64,
    window_ns: i64,
    kept: VecDeque<Kept>,
    since_training: usize,
    /// Switch-to-switch links seen in recent windows (+1 per window seen, −1 per window missed, at most `PRESENCE_CAP`).
    presence: FastMap<(EntityKind, String), u8>,
    baselines: Baselines,
    models: BTreeMap<EntityKind, EntityModel>,
    typer: Typer,
    forecaster: Forecaster,
    episodes: FastMap<(EntityKind, String), Episode>,
    /// Entities that were collateral of another's anomaly in the latest window: like an
    /// episode's, their habits do not learn from it and retraining leaves them out.
    collateral: FastSet<(EntityKind, String)>,
    /// Entities whose `unknown` episode settled → the model version from which they may be
    /// raised as `unknown` again: the second training after, which learnt a retraining
    /// period of their new usual.
    settled: FastMap<(EntityKind, String), u64>,
    training: Option<mpsc::Receiver<Trained>>,
    registry: Registry,
    pub counts: Counts,
}

impl Engine {
    /// Loads the registry of `cfg.state_dir` if there is one (a restart keeps its models).
    pub fn new(cfg: EngineConfig) -> Result<Self, crate::KnowledgeError> {
        let typer = Typer::measured(&crate::registry::labelled(&cfg.state_dir)?);
        let mut e = Self {
            window_ns: cfg.train.window_ns,
            cfg,
            pending: BTreeMap::new(),
            lanes: FastMap::default(),
            finalized_until: i64::MIN,
            kept: VecDeque::new(),
            since_training: 0,
            presence: FastMap::default(),
            baselines: Baselines::default(),
            models: BTreeMap::new(),
            typer,
            forecaster: Forecaster::default(),
            episodes: FastMap::default(),
            collateral: FastSet::default(),
            settled: FastMap::default(),
            training: None,
            registry: Registry::default(),
            counts: Counts::default(),
        };
        if let Some(r) = Registry::load(&e.cfg.state_dir)? {
            for s in &r.models {
                match EntityModel::load(s) {
                    Ok(m) => {
                        e.models.insert(m.kind, m);
                    }
                    // A kind this version extracts other features for, or weighs otherwise
                    // (an upgrade): trained again at the first window, not at the next
                    // periodic retraining.
                    Err(err) => {
                        tracing::warn!(error = %err, "stored model not loaded");
                        e.since_training = e.cfg.retrain_every;
                    }
                }
            }
            let forecasts = r
                .forecasts
                .iter()
                .filter_map(|(k, f)| {
                    forecast::SERIES
                        .iter()
                        .find(|s| **s == k)
                        .map(|s| (*s, f.model.clone()))
                })
                .collect();
            e.forecaster.set_models(forecasts);
            e.settled = r
                .settled
                .iter()
                .map(|s| ((s.kind, s.entity.clone()), s.from_version))
                .collect();
            e.registry = r;
        }
        Ok(e)
    }

    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    pub fn status(&self) -> Status {
        self.registry.status
    }

    /// One window result (any table, any partition), from processor lane `lane`.
    pub fn add_result(&mut self, table: &str, batch: &RecordBatch, lane: Option<&str>) {
        let Some(end) = window_end(batch) else {
            return;
        };
        if let Some(lane) = lane {
            // Published through the window before, until it says otherwise.
            let before = end - self.window_ns;
            self.lanes.entry(lane.to_string()).or_insert(before);
        }
        if let Some(start) = crate::features::f64s(batch, "window_start")
            .into_iter()
            .flatten()
            .next()
        {
            self.window_ns = (end - start as i64).max(1);
        }
        if end <= self.finalized_until {
            self.counts.late_results += 1;
            return;
        }
        self.pending
            .entry(end)
            .or_insert_with(|| Window::new(end))
            .add(table, batch);
    }

    /// Immediate events: loops and black holes become anomalies (facts, not learnt).
    pub fn add_alerts(&mut self, alerts: &[Alert]) -> Output {
        let mut out = Output::default();
        for a in alerts {
            let t = match a.kind {
                Some(AlertKind::Loop) => AnomalyType::RoutingLoop,
                Some(AlertKind::BlackHole) => AnomalyType::BlackHole,
                Some(AlertKind::BlackHoleCleared) => {
                    let key = (EntityKind::Flow, flow_entity(a));
                    if let Some(mut ep) = self.episodes.remove(&key) {
                        ep.anomaly.end_ns = Some(a.time_ns);
                        ep.anomaly.phase = AnomalyPhase::End;
                        out.anomalies.push(ep.anomaly);
                    }
                    continue;
                }
                _ => continue,
            };
            let key = (EntityKind::Flow, flow_entity(a));
            if let Some(ep) = self.episodes.get_mut(&key) {
                ep.touched = true;
                ep.below = 0;
                ep.anomaly.last_ns = a.time_ns;
                continue;
            }
            let id = format!("flow:{}:{}", key.1, a.time_ns);
            let mut nodes = a.path.clone();
            nodes.sort_unstable();
            nodes.dedup();
            let anomaly = Anomaly {
                id,
                entity_kind: EntityKind::Flow,
                entity: key.1.clone(),
                anomaly_type: t,
                confidence: 1.0,
                score: 0.0,
                threshold: 0.0,
                start_ns: a.time_ns,
                end_ns: None,
                last_ns: a.time_ns,
                windows: 1,
                detected_ns: kplane_model::unix_time_ns() as i64,
                phase: AnomalyPhase::Start,
                model_version: self.registry.version,
                explanation: Explanation {
                    summary: format!(
                        "{}: the stream processor saw {} (path {:?})",
                        t.as_str(),
                        a.kind.map_or("an alert", AlertKind::as_str),
                        a.path
                    ),
                    features: Vec::new(),
                    blast_radius: kplane_model::results::BlastRadius {
                        flows: vec![kplane_model::results::FlowRef {
                            src_ip: a.src_ip,
                            dst_ip: a.dst_ip,
                            src_port: a.src_port,
                            dst_port: a.dst_port,
                            protocol: a.protocol,
                            path: a.path.clone(),
                        }],
                        flows_total: 1,
                        nodes,
                        ..Default::default()
                    },
                },
                recommendations: Vec::new(),
                settled: false,
            };
            out.anomalies.extend(self.open_episode(key, anomaly));
        }
        out
    }

    /// A processor lane has published every result up to the window ending at `through_ns`.
    pub fn lane_published(&mut self, lane: &str, through_ns: i64) {
        let t = self.lanes.entry(lane.to_string()).or_insert(through_ns);
        *t = (*t).max(through_ns);
    }

    /// Completes, in order, the windows every processor lane has published through (all of
    /// them when `idle`; without lane marks, every window but the newest), and swaps in models
    /// a finished training produced.
    pub fn tick(&mut self, idle: bool) -> Output {
        self.collect_training();
        let mut out = Output::default();
        let newest = self.pending.keys().next_back().copied();
        // Lanes silent for 10 windows are forgotten until their next result.
        if let Some(n) = newest {
            let horizon = n - 10 * self.window_ns;
            self.lanes.retain(|_, t| *t >= horizon);
        }
        // Every lane says how far it is, windows without its rows included (the collector's
        // heartbeats move a quiet lane's watermark), so a window is complete once all are
        // through it. A lane that falls behind holds windows back until it catches up or
        // has been silent for 10 windows; what it publishes after that is counted
        // (`late_results`).
        let lanes = &self.lanes;
        let complete = |e: i64| {
            if lanes.is_empty() {
                Some(e) != newest
            } else {
                lanes.values().all(|t| *t >= e)
            }
        };
        let ready: Vec<i64> = self
            .pending
            .keys()
            .copied()
            .take_while(|e| idle || complete(*e))
            .collect();
        for end in ready {
            if let Some(w) = self.pending.remove(&end) {
                self.finalized_until = end;
                out.extend(self.window(&w));
            }
        }
        out
    }

    /// The window's entity-windows — a link or queue seen in most recent windows and missing
    /// from this one is there, silent — and whether it is a gap in the telemetry (most of
    /// the fabric silent at once: a collector or processor stall, a window cut short, not
    /// that many failed links; nothing is expected then). Presence moves on: +1 per window an
    /// entity is in (at most `PRESENCE_CAP`), −1 per window it is not.
    fn sample(&mut self, w: &Window) -> (Vec<Sample>, bool) {
        let mut expected: FastSet<(EntityKind, &str)> = self
            .presence
            .iter()
            .filter(|(_, n)| **n >= EXPECTED_AFTER)
            .map(|((k, e), _)| (*k, e.as_str()))
            .collect();
        let heard = w
            .inner_links()
            .filter(|e| expected.contains(&(EntityKind::Link, e.as_str())))
            .count();
        let gap = expected.len() >= 4 && heard * 2 < expected.len();
        if gap {
            expected.clear();
        }
        let samples = w.samples(&expected);
        drop(expected);
        let here: FastSet<(EntityKind, &str)> = samples
            .iter()
            .filter(|s| s.x.iter().any(|v| *v != 0.0))
            .map(|s| (s.kind, s.entity.as_str()))
            .collect();
        // Only switch-to-switch links are expected when missing (see `tracks_silence`).
        for e in w.inner_links() {
            if here.contains(&(EntityKind::Link, e.as_str())) {
                self.presence.entry((EntityKind::Link, e)).or_insert(0);
            }
        }
        self.presence.retain(|(k, e), n| {
            if here.contains(&(*k, e.as_str())) {
                *n = (*n + 1).min(PRESENCE_CAP);
            } else {
                *n -= 1;
            }
            *n > 0
        });
        (samples, gap)
    }

    /// Scores one complete window (what `tick` does with each): anomalies and forecasts.
    pub fn window(&mut self, w: &Window) -> Output {
        self.counts.windows += 1;
        let (mut samples, gap) = self.sample(w);
        self.counts.telemetry_gaps += u64::from(gap);
        self.counts.entity_windows += samples.len() as u64;
        let frozen = Frozen::of(&self.episodes, &self.collateral);
        self.baselines
            .augment(&mut samples, |k, e| frozen.contains(k, e));
        drop(frozen);
        let series = forecast::values(w);
        let mut out = Output {
            forecasts: self
                .forecaster
                .observe(w, &series, self.window_ns, self.registry.version),
            anomalies: Vec::new(),
        };
        if !self.models.is_empty() {
            out.anomalies = self.score(w, &samples);
        }
        // An entity-window in an anomaly teaches nothing: retraining learns what normal is,
        // so an attack does not move the thresholds it is judged by.
        let frozen = Frozen::of(&self.episodes, &self.collateral);
        samples.retain(|s| !frozen.contains(s.kind, &s.entity));
        let mut continued = self.forecaster.take_continued();
        continued.retain(|c| !frozen.contains(EntityKind::Destination, &c.destination.to_string()));
        let series = series
            .iter()
            .map(|v| KeptValue::of(v, Some(&frozen)))
            .collect();
        self.kept.push_back(Kept {
            samples,
            series,
            continued,
        });
        while self.kept.len() > self.cfg.training_windows {
            self.kept.pop_front();
        }
        self.since_training += 1;
        let due = if self.models.is_empty() {
            self.kept.len() >= self.cfg.min_windows
        } else {
            self.since_training >= self.cfg.retrain_every
        };
        if due && self.training.is_none() {
            self.start_training();
        }
        if self.models.is_empty() && self.training.is_none() {
            self.registry.status = Status::Learning;
            self.registry.message = format!(
                "learning: {} of {} windows of history",
                self.kept.len(),
                self.cfg.min_windows
            );
        }
        out
    }

    fn score(&mut self, w: &Window, samples: &[Sample]) -> Vec<Anomaly> {
        let mut out = Vec::new();
        for ep in self.episodes.values_mut() {
            ep.touched = ep.anomaly.entity_kind == EntityKind::Flow && ep.touched;
        }
        let version = self.registry.version;
        self.settled.retain(|_, from| *from > version);
        // Every entity-window over its model's threshold for its type by definition (a window
        // of an address that fits a definition has a lower one, see `model`); then which are
        // collateral of another (one anomaly per incident, see `collateral`).
        let over: Vec<(&Sample, &EntityModel, f64, (AnomalyType, f64))> = samples
            .iter()
            .filter_map(|s| {
                let m = self.models.get(&s.kind)?;
                let score = m.score(&s.x);
                if !(score.is_finite() && score > m.lowest_threshold()) {
                    return None;
                }
                let typed = self.typer.classify(s.kind, &s.x);
                // A settled change is not raised as unknown until a training has learnt it.
                let settling = typed.0 == AnomalyType::Unknown
                    && self.settled.contains_key(&(s.kind, s.entity.clone()));
                (score > m.threshold_for(&s.x, typed.0) && !settling)
                    .then_some((s, m, score, typed))
            })
            .collect();
        let raised: Vec<Raised> = over
            .iter()
            .map(|(s, _, score, (t, _))| Raised {
                kind: s.kind,
                entity: &s.entity,
                score: *score,
                typed: *t,
                open: self.episodes.contains_key(&(s.kind, s.entity.clone())),
            })
            .collect();
        let root_of = collateral::roots(w, &raised);
        self.collateral.clear();
        let mut members: Vec<Vec<Collateral>> = vec![Vec::new(); over.len()];
        for (i, r) in root_of.iter().enumerate() {
            if let Some(r) = r {
                members[*r].push(raised[i].collateral());
                self.collateral
                    .insert((raised[i].kind, raised[i].entity.to_string()));
            }
        }
        let mut opened = Vec::new();
        for (i, &(s, m, score, typed)) in over.iter().enumerate() {
            if root_of[i].is_some() {
                continue;
            }
            let key = (s.kind, s.entity.clone());
            if let Some(ep) = self.episodes.get_mut(&key) {
                ep.touched = true;
                ep.below = 0;
                let a = &mut ep.anomaly;
                a.last_ns = w.end_ns;
                a.windows += 1;
                // Attackers that join later are answered too: a typed episode's recommendations
                // grow with every window it lasts.
                let grew = a.anomaly_type != AnomalyType::Unknown && add_recommendations(a, s, w);
                let joined = add_collateral(a, &members[i]);
                // The window that opened an episode may have held only the incident's first
                // moments (or a concurrent transfer that hid it): the first later window with a
                // type gives an untyped episode its type, as it would a new episode.
                let typed_now = takes_type(a.anomaly_type, typed.0);
                if typed_now {
                    let kept = std::mem::take(&mut a.explanation.blast_radius.collateral);
                    set_type(a, typed, m, s, w);
                    a.explanation.blast_radius.collateral = kept;
                    a.explanation.blast_radius.reverse_link =
                        self.baselines.reverse_of(&s.entity).map(str::to_string);
                }
                let publish = if ep.raised {
                    typed_now || grew || joined || score > a.score * 1.2 || a.windows % 10 == 0
                } else {
                    raises(
                        a,
                        self.cfg.unknown_after,
                        self.baselines.mature(s.kind, &s.entity),
                    )
                };
                if publish {
                    a.phase = if ep.raised {
                        AnomalyPhase::Update
                    } else {
                        AnomalyPhase::Start
                    };
                    ep.raised = true;
                    a.score = a.score.max(score);
                    out.push(a.clone());
                }
                continue;
            }
            let mut anomaly = Anomaly {
                id: format!("{}:{}:{}", s.kind.as_str(), s.entity, w.end_ns),
                entity_kind: s.kind,
                entity: s.entity.clone(),
                anomaly_type: AnomalyType::Unknown,
                confidence: 0.0,
                score,
                threshold: m.threshold_for(&s.x, typed.0),
                start_ns: w.end_ns - self.window_ns,
                end_ns: None,
                last_ns: w.end_ns,
                windows: 1,
                detected_ns: kplane_model::unix_time_ns() as i64,
                phase: AnomalyPhase::Start,
                model_version: self.registry.version,
                explanation: Explanation::default(),
                recommendations: Vec::new(),
                settled: false,
            };
            set_type(&mut anomaly, typed, m, s, w);
            add_collateral(&mut anomaly, &members[i]);
            anomaly.explanation.blast_radius.reverse_link =
                self.baselines.reverse_of(&s.entity).map(str::to_string);
            opened.push((key, anomaly));
        }
        for (key, anomaly) in opened {
            out.extend(self.open_episode(key, anomaly));
        }
        let close_after = self.cfg.close_after;
        let mut closed = Vec::new();
        for (k, ep) in &mut self.episodes {
            if ep.touched || ep.anomaly.anomaly_type == AnomalyType::BlackHole {
                continue;
            }
            ep.below += 1;
            if ep.below >= close_after {
                closed.push(k.clone());
            }
        }
        for k in closed {
            let Some(mut ep) = self.episodes.remove(&k) else {
                continue;
            };
            if !ep.raised {
                self.counts.unknown_not_raised += 1;
                continue;
            }
            ep.anomaly.end_ns = Some(ep.anomaly.last_ns);
            ep.anomaly.phase = AnomalyPhase::End;
            out.push(ep.anomaly);
        }
        out.extend(self.settle(w.end_ns));
        out
    }

    /// Ends the `unknown` episodes that lasted `settle-after`: a change nothing explains and
    /// that does not go away is the entity's usual from now on — its habit takes what it
    /// learnt meanwhile, it teaches the next trainings, and it is not raised as `unknown` until
    /// a training has learnt it. Typed episodes never settle: an attack must not become a habit.
    fn settle(&mut self, now_ns: i64) -> Vec<Anomaly> {
        let after = self.cfg.settle_after_ns;
        let due: Vec<(EntityKind, String)> = self
            .episodes
            .iter()
            .filter(|(_, ep)| {
                after > 0
                    && ep.raised
                    && ep.anomaly.anomaly_type == AnomalyType::Unknown
                    && now_ns - ep.anomaly.start_ns >= after
            })
            .map(|(k, _)| k.clone())
            .collect();
        let mut out = Vec::new();
        for k in due {
            let Some(mut ep) = self.episodes.remove(&k) else {
                continue;
            };
            let a = &mut ep.anomaly;
            a.end_ns = Some(a.last_ns);
            a.phase = AnomalyPhase::End;
            a.settled = true;
            a.explanation.summary = format!(
                "{}; it lasted {} s without returning to its usual: its usual from now on",
                a.explanation.summary,
                (now_ns - a.start_ns) / 1_000_000_000
            );
            self.baselines.settle(k.0, &k.1);
            self.settled.insert(k, self.registry.version + 2);
            out.push(ep.anomaly);
        }
        if !out.is_empty() {
            self.save_registry();
        }
        out
    }

    /// Writes the registry with what is settled now (a restart reads both).
    fn save_registry(&mut self) {
        let mut settled: Vec<Settled> = self
            .settled
            .iter()
            .map(|((kind, entity), from)| Settled {
                kind: *kind,
                entity: entity.clone(),
                from_version: *from,
            })
            .collect();
        settled.sort_by(|a, b| (a.kind, &a.entity).cmp(&(b.kind, &b.entity)));
        self.registry.settled = settled;
        if let Err(e) = self.registry.save(&self.cfg.state_dir) {
            tracing::warn!(error = %e, "model registry not saved");
        }
    }

    /// Starts tracking a new episode; returns its `start` message if it is raised at once.
    fn open_episode(&mut self, key: (EntityKind, String), anomaly: Anomaly) -> Option<Anomaly> {
        let mature = self.baselines.mature(key.0, &key.1);
        let raised = raises(&anomaly, self.cfg.unknown_after, mature);
        let start = raised.then(|| anomaly.clone());
        self.episodes.insert(
            key,
            Episode {
                anomaly,
                below: 0,
                touched: true,
                raised,
            },
        );
        start
    }

    /// Open episodes (those raised).
    pub fn open(&self) -> Vec<&Anomaly> {
        self.episodes
            .values()
            .filter(|e| e.raised)
            .map(|e| &e.anomaly)
            .collect()
    }

    /// Learns from the history given (the store's windows at start), before any live window:
    /// the entities' habits, the forecasts' recent values and periods' lags, and the training
    /// history — trained on at once if there is no model yet, else at the next retraining.
    pub fn seed_history(&mut self, windows: Vec<Window>) {
        for w in windows {
            // Sampled as live windows are, silent links included: a model trained without
            // them would take any silence for a surprise.
            let (mut samples, _) = self.sample(&w);
            self.baselines.augment(&mut samples, |_, _| false);
            let series = forecast::values(&w);
            self.forecaster
                .observe(&w, &series, self.window_ns, self.registry.version);
            let continued = self.forecaster.take_continued();
            self.kept.push_back(Kept {
                samples,
                series: series.iter().map(|v| KeptValue::of(v, None)).collect(),
                continued,
            });
            self.finalized_until = self.finalized_until.max(w.end_ns);
        }
        while self.kept.len() > self.cfg.training_windows {
            self.kept.pop_front();
        }
        if self.models.is_empty() && self.kept.len() >= self.cfg.min_windows {
            self.start_training();
            self.wait_for_training();
        }
    }

    /// Blocks until a running training ends and its models are in use.
    pub fn wait_for_training(&mut self) {
        if let Some(Ok(t)) = self.training.take().map(|rx| rx.recv()) {
            self.install(t);
        }
    }

    fn start_training(&mut self) {
        self.since_training = 0;
        let samples: Vec<Sample> = self
            .kept
            .iter()
            .flat_map(|k| k.samples.iter().cloned())
            .collect();
        let mut series: BTreeMap<(&'static str, String), Vec<Option<forecast::Observed>>> =
            BTreeMap::new();
        for k in &self.kept {
            for v in &k.series {
                series
                    .entry((v.series, v.entity.clone()))
                    .or_default()
                    .push(v.observed);
            }
        }
        let continued: Vec<forecast::Continued> = self
            .kept
            .iter()
            .flat_map(|k| k.continued.iter().cloned())
            .collect();
        // Calibration converts alarms per hour with the window length the results showed.
        let params = TrainParams {
            window_ns: self.window_ns,
            ..self.cfg.train.clone()
        };
        let (tx, rx) = mpsc::channel();
        self.training = Some(rx);
        std::thread::spawn(move || {
            let _ = tx.send(train(&samples, &series, &continued, &params));
        });
    }

    fn collect_training(&mut self) {
        let Some(rx) = &self.training else {
            return;
        };
        match rx.try_recv() {
            Ok(t) => {
                self.training = None;
                self.install(t);
            }
            Err(mpsc::TryRecvError::Empty) => {}
            Err(mpsc::TryRecvError::Disconnected) => self.training = None,
        }
    }

    fn install(&mut self, t: Trained) {
        let ok = !t.models.is_empty();
        let version = self.registry.version + 1;
        let message = if t.problems.is_empty() {
            "trained".to_string()
        } else {
            t.problems.join("; ")
        };
        if ok {
            self.counts.trainings_ok += 1;
            // Kinds that failed this time keep their previous model.
            for (k, m) in t.models {
                self.models.insert(k, m);
            }
            let mut f = self.forecaster.models().clone();
            f.extend(t.forecasts);
            self.forecaster.set_models(f);
            self.registry.version = version;
            self.registry.status = Status::Ready;
            self.registry.message = message.clone();
        } else {
            self.counts.trainings_failed += 1;
            if self.models.is_empty() {
                self.registry.status = Status::Failed;
            }
            self.registry.message = format!("training failed, previous models kept: {message}");
            tracing::warn!(%message, "training failed; the previous models stay");
        }
        self.registry.models = self.models.values().map(EntityModel::save).collect();
        self.registry.typer = Some(TyperInfo {
            samples: self.typer.samples,
            precision: self
                .typer
                .precision()
                .iter()
                .map(|(k, p)| (k.as_str().to_string(), *p))
                .collect(),
        });
        self.registry.forecasts = self
            .forecaster
            .models()
            .iter()
            .map(|(s, c)| {
                (
                    s.to_string(),
                    ForecastInfo {
                        model: c.clone(),
                        evaluation: self
                            .forecaster
                            .evaluation
                            .get(s)
                            .cloned()
                            .unwrap_or_default(),
                    },
                )
            })
            .collect();
        self.registry.record(Training {
            version: self.registry.version,
            trained_ns: kplane_model::unix_time_ns() as i64,
            ok,
            message,
            seconds: t.seconds,
        });
        self.save_registry();
        tracing::info!(
            version = self.registry.version,
            seconds = t.seconds,
            "models trained"
        );
    }
}

/// The flow an alert is about (unspecified addresses when it names none).
fn flow_entity(a: &Alert) -> String {
    let ip = |i: Option<std::net::IpAddr>| i.unwrap_or(std::net::Ipv4Addr::UNSPECIFIED.into());
    kplane_model::results::flow_entity(
        ip(a.src_ip),
        a.src_port.unwrap_or(0),
        ip(a.dst_ip),
        a.dst_port.unwrap_or(0),
        a.protocol.unwrap_or(0),
    )
}

fn train(
    samples: &[Sample],
    series: &BTreeMap<(&'static str, String), Vec<Option<forecast::Observed>>>,
    continued: &[forecast::Continued],
    p: &TrainParams,
) -> Trained {
    let started = Instant::now();
    let mut models = BTreeMap::new();
    let mut problems = Vec::new();
    // The false-alarm budget is the service's: each kind's model gets its share.
    let per_kind = TrainParams {
        false_alarms_per_hour: p.false_alarms_per_hour / MODELLED.len() as f64,
        ..p.clone()
    };
    for kind in MODELLED {
        let of_kind: Vec<&Sample> = samples.iter().filter(|s| s.kind == kind).collect();
        match EntityModel::train(kind, &of_kind, &per_kind) {
            Ok(m) => {
                models.insert(kind, m);
            }
            Err(e) => problems.push(e.to_string()),
        }
    }
    let mut forecasts = BTreeMap::new();
    for s in forecast::SERIES {
        let data: Vec<(String, Vec<Option<forecast::Observed>>)> = series
            .iter()
            .filter(|((k, _), _)| *k == s)
            .map(|((_, e), v)| (e.clone(), v.clone()))
            .collect();
        match forecast::fit(&data, forecast::objective(s)) {
            Ok(mut c) => {
                // Long flows are a destination's (a link's utilisation is not split by flow).
                if s == forecast::SERIES[1] {
                    c.survival = Some(forecast::Survival::learn(continued));
                }
                forecasts.insert(s, c);
            }
            Err(e) => problems.push(format!("forecast {s}: {e}")),
        }
    }
    Trained {
        models,
        forecasts,
        problems,
        seconds: started.elapsed().as_secs_f64(),
    }
}

/// Whether episode `a` is raised by now: typed, or `unknown` for `unknown_after` windows of
/// an entity whose usual is `mature` ([`crate::baseline::MATURE_AFTER`] windows).
fn raises(a: &Anomaly, unknown_after: u32, mature: bool) -> bool {
    a.anomaly_type != AnomalyType::Unknown || (a.windows >= unknown_after && mature)
}

/// Whether an open episode of type `episode` takes the type a later window of it has: only
/// an untyped one, from the first window with a type (it keeps the type it has otherwise).
fn takes_type(episode: AnomalyType, window: AnomalyType) -> bool {
    episode == AnomalyType::Unknown && window != AnomalyType::Unknown
}

/// Gives `a` its type and what follows from it: the explanation of window `w` (the features
/// that drove the score, the blast radius) and the recommended intents.
fn set_type(
    a: &mut Anomaly,
    (t, confidence): (AnomalyType, f64),
    m: &EntityModel,
    s: &Sample,
    w: &Window,
) {
    let features = m.deviations(&s.x);
    a.anomaly_type = t;
    a.confidence = confidence;
    a.recommendations.clear();
    add_recommendations(a, s, w);
    a.explanation = Explanation {
        summary: explain::summary(
            t,
            s.kind,
            &s.entity,
            features.first().map(|f| f.name.as_str()),
        ),
        features,
        blast_radius: explain::blast_radius(w, s.kind, &s.entity, t),
    };
}

/// What learns nothing from a window: the entities in an anomaly (their own, or another's as
/// its collateral), and while a flood is open every address — a flood displaces other hosts'
/// traffic too, and a habit learnt meanwhile would make its end raise them all.
struct Frozen<'a> {
    open: FastSet<(EntityKind, &'a str)>,
    flood: bool,
}

impl<'a> Frozen<'a> {
    fn of(
        episodes: &'a FastMap<(EntityKind, String), Episode>,
        collateral: &'a FastSet<(EntityKind, String)>,
    ) -> Self {
        Self {
            open: episodes
                .keys()
                .chain(collateral)
                .map(|(k, e)| (*k, e.as_str()))
                .collect(),
            flood: episodes
                .values()
                .any(|ep| ep.anomaly.anomaly_type == AnomalyType::Ddos),
        }
    }

    fn contains(&self, k: EntityKind, e: &str) -> bool {
        self.open.contains(&(k, e))
            || (self.flood && matches!(k, EntityKind::Source | EntityKind::Destination))
    }
}

/// Adds to `a`'s collateral the `members` it does not list yet (at most
/// [`COLLATERAL_LISTED`]); whether any was added.
fn add_collateral(a: &mut Anomaly, members: &[Collateral]) -> bool {
    let listed = &mut a.explanation.blast_radius.collateral;
    let before = listed.len();
    for c in members {
        if listed.len() < COLLATERAL_LISTED && !listed.contains(c) {
            listed.push(c.clone());
        }
    }
    listed.len() > before
}

/// Adds to `a`'s recommendations what window `w` recommends that it does not hold yet (a source
/// of a DDoS that was not among the first window's); whether any was added.
fn add_recommendations(a: &mut Anomaly, s: &Sample, w: &Window) -> bool {
    let flows = explain::flows_of(w, s.kind, &s.entity);
    let before = a.recommendations.len();
    let spread = crate::typer::from_many_new_sources(s.kind, &s.x);
    for r in explain::recommend(a.anomaly_type, s.kind, &s.entity, w, &flows, spread, &a.id) {
        if a.recommendations.len() < explain::BLOCKED && !a.recommendations.contains(&r) {
            a.recommendations.push(r);
        }
    }
    a.recommendations.len() > before
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A window in which each link `(node, port)` (towards node 10 + port) had `samples`
    /// reports from `samples / 10` flows.
    fn window(i: i64, links: &[((u32, u16), f64)]) -> Window {
        busy_window(i, links, &[])
    }

    /// A window of `links` (node, port) with their samples, each towards a destination of its
    /// own; those in `busy` at 95 % of their capacity, the others about 62 %.
    fn busy_window(i: i64, links: &[((u32, u16), f64)], busy: &[(u32, u16)]) -> Window {
        let mut w = Window {
            end_ns: (i + 1) * 100_000_000,
            ..Window::default()
        };
        for &((node, port), samples) in links {
            let u = match busy.contains(&(node, port)) {
                true => 950.0,
                false => 600.0 + 20.0 * ((i * 7) % 5) as f64,
            };
            let next = 10 + u32::from(port);
            w.links.insert(
                (node, port),
                crate::features::LinkAcc {
                    samples,
                    sum: u * samples,
                    max: u + 50.0,
                    next: Some(next),
                    ..Default::default()
                },
            );
            for _ in 0..(samples / 10.0) as usize {
                w.flows.push(crate::features::FlowRow {
                    dst: Some(std::net::IpAddr::from([10, 0, node as u8, port as u8])),
                    path: vec![node, next],
                    ..Default::default()
                });
            }
        }
        w
    }

    /// The tests' engine settings: 100 ms windows, trained after 60.
    fn config(dir: &std::path::Path) -> EngineConfig {
        EngineConfig {
            state_dir: dir.to_path_buf(),
            min_windows: 60,
            training_windows: 1_000,
            retrain_every: 1_000_000,
            close_after: 2,
            unknown_after: 2,
            settle_after_ns: 0,
            train: TrainParams {
                detector: "kmeans".into(),
                clusters: 3,
                folds: 4,
                false_alarms_per_hour: 1.0,
                window_ns: 100_000_000,
            },
        }
    }

    fn engine(tag: &str) -> (Engine, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("kplane-engine-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        (Engine::new(config(&dir)).unwrap(), dir)
    }

    /// A result of `table` for the 100 ms window ending at `end_ns` (window columns only).
    fn result(end_ns: i64) -> RecordBatch {
        use arrow_array::{ArrayRef, TimestampNanosecondArray};
        let col = |v: i64| std::sync::Arc::new(TimestampNanosecondArray::from(vec![v])) as ArrayRef;
        RecordBatch::try_from_iter([
            ("window_start", col(end_ns - 100_000_000)),
            ("window_end", col(end_ns)),
        ])
        .unwrap()
    }

    #[test]
    fn a_window_is_complete_once_every_lane_published_through_it() {
        let (mut e, dir) = engine("lanes");
        let w = |i: i64| i * 100_000_000;
        let lanes = ["reports-p0", "reports-p1"];
        for l in lanes {
            e.add_result("event_counts", &result(w(1)), Some(l));
        }
        e.tick(false);
        assert_eq!(e.counts.windows, 0, "nothing published through it yet");
        e.lane_published(lanes[0], w(1));
        e.tick(false);
        assert_eq!(e.counts.windows, 0, "one lane of two");
        e.lane_published(lanes[1], w(1));
        e.tick(false);
        assert_eq!(e.counts.windows, 1, "both: complete without a later window");
        for l in lanes {
            e.add_result("event_counts", &result(w(2)), Some(l));
        }
        e.lane_published(lanes[0], w(2));
        e.tick(false);
        assert_eq!(
            e.counts.windows, 1,
            "p1 is not through window 2: waited for"
        );
        e.lane_published(lanes[1], w(2));
        e.tick(false);
        assert_eq!(e.counts.windows, 2);
        // p0 has results in windows 3 and 4; p1 none (its progress message says so).
        e.add_result("event_counts", &result(w(3)), Some(lanes[0]));
        e.add_result("event_counts", &result(w(4)), Some(lanes[0]));
        e.lane_published(lanes[0], w(4));
        e.tick(false);
        assert_eq!(
            e.counts.windows, 2,
            "p1 may still have rows of window 3: a later window does not complete it"
        );
        e.lane_published(lanes[1], w(4));
        e.tick(false);
        assert_eq!(e.counts.windows, 4, "in order, both");
        // A lane silent for 10 windows is forgotten: it holds nothing back any more.
        e.add_result("event_counts", &result(w(15)), Some(lanes[0]));
        e.lane_published(lanes[0], w(15));
        e.tick(false);
        assert_eq!(e.counts.windows, 5);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn without_lane_marks_a_later_window_completes_one() {
        let (mut e, dir) = engine("nolanes");
        let w = |i: i64| i * 100_000_000;
        e.add_result("event_counts", &result(w(1)), None);
        e.tick(false);
        assert_eq!(e.counts.windows, 0);
        e.add_result("event_counts", &result(w(2)), None);
        e.tick(false);
        assert_eq!(e.counts.windows, 1);
        e.tick(true);
        assert_eq!(e.counts.windows, 2);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_untyped_episode_takes_the_first_type_a_later_window_has_and_keeps_it() {
        use AnomalyType::*;
        assert!(takes_type(Unknown, Ddos));
        assert!(!takes_type(Unknown, Unknown));
        assert!(
            !takes_type(Ddos, PortScan),
            "a typed episode keeps its type"
        );
        assert!(!takes_type(Ddos, Unknown));
    }

    /// A destination's episode of type `t`, opened in the window ending at 0.
    fn episode(entity: &str, t: AnomalyType) -> Anomaly {
        Anomaly {
            id: format!("destination:{entity}:0"),
            entity_kind: EntityKind::Destination,
            entity: entity.into(),
            anomaly_type: t,
            confidence: 1.0,
            score: 10.0,
            threshold: 1.0,
            start_ns: 0,
            end_ns: None,
            last_ns: 0,
            windows: 1,
            detected_ns: 0,
            phase: AnomalyPhase::Start,
            model_version: 1,
            explanation: Explanation::default(),
            recommendations: Vec::new(),
            settled: false,
        }
    }

    #[test]
    fn a_ddos_episode_blocks_attackers_that_join_later() {
        let flow = |src: &str| crate::features::FlowRow {
            src: src.parse().ok(),
            dst: "10.0.0.1".parse().ok(),
            bytes: 5e6,
            ..Default::default()
        };
        let s = Sample {
            kind: EntityKind::Destination,
            entity: "10.0.0.1".into(),
            window_end_ns: 0,
            x: Vec::new(),
            exposure: Default::default(),
            reverse: None,
        };
        let w1 = Window {
            flows: vec![flow("10.0.1.1")],
            ..Window::default()
        };
        let mut a = episode("10.0.0.1", AnomalyType::Ddos);
        assert!(add_recommendations(&mut a, &s, &w1));
        assert!(!add_recommendations(&mut a, &s, &w1), "nothing new");
        let w2 = Window {
            flows: vec![flow("10.0.1.1"), flow("10.0.1.2")],
            ..Window::default()
        };
        assert!(add_recommendations(&mut a, &s, &w2));
        let srcs: Vec<&str> = a
            .recommendations
            .iter()
            .map(|r| r["match"]["src"].as_str().unwrap())
            .collect();
        assert_eq!(srcs, ["10.0.1.1/32", "10.0.1.2/32"]);
    }

    #[test]
    fn a_link_its_switch_stopped_using_is_raised_within_two_windows() {
        let (mut e, dir) = engine("silent");
        // Switch 1's flows split between its links 1:1 and 1:2, each towards eight or more
        // destinations of its own (10.0.<port>.<flow>); 2:1 is busy about two windows in three.
        let busy = |i: i64, port| ((1, port), 80.0 + (i % 4) as f64 * 10.0);
        let spread = |mut w: Window| {
            for port in [1u8, 2] {
                let next = 10 + u32::from(port);
                for (j, f) in w
                    .flows
                    .iter_mut()
                    .filter(|f| f.path == [1, next])
                    .enumerate()
                {
                    f.dst = Some(std::net::IpAddr::from([10, 0, port, j as u8]));
                }
            }
            w
        };
        for i in 0..90 {
            let mut l = vec![busy(i, 1), busy(i, 2)];
            if i % 3 != 0 {
                l.push(((2, 1), 30.0));
            }
            e.window(&spread(window(i, &l)));
            e.wait_for_training();
        }
        assert_eq!(e.registry().status, Status::Ready, "{:?}", e.registry());
        let mut raised_at = None;
        for i in 90..100 {
            // 1:1 fails: its destinations' flows take 1:2.
            let mut w = window(i, &[((1, 2), 180.0), ((2, 1), 30.0)]);
            for (j, f) in w
                .flows
                .iter_mut()
                .filter(|f| f.path[0] == 1)
                .step_by(2)
                .enumerate()
            {
                f.dst = Some(std::net::IpAddr::from([10, 0, 1, j as u8]));
            }
            let out = e.window(&w);
            if out
                .anomalies
                .iter()
                .any(|a| a.entity_kind == EntityKind::Link && a.entity == "1:1")
            {
                raised_at = Some(i - 89);
                break;
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
        let n = raised_at.expect("the silent busy link is raised");
        assert!(n <= 2, "raised after {n} silent windows");
        // The flagged entity-window is not kept for retraining; the others are.
        let kept = &e.kept.back().expect("a window kept").samples;
        let has = |entity: &str| {
            kept.iter()
                .any(|s| s.kind == EntityKind::Link && s.entity == entity)
        };
        assert!(!has("1:1") && has("1:2"));
    }

    /// Two busy links of switch 1.
    const LINKS: [((u32, u16), f64); 2] = [((1, 1), 80.0), ((1, 2), 90.0)];

    /// Feeds `e` 90 windows of `links` and waits for the training they start.
    fn learn(e: &mut Engine, links: &[((u32, u16), f64)]) {
        for i in 0..90 {
            e.window(&window(i, links));
            e.wait_for_training();
        }
    }

    /// The state directory of an engine trained on 90 windows of [`LINKS`], stopped, and those
    /// windows (the store's history).
    fn trained(tag: &str) -> (std::path::PathBuf, Vec<Window>) {
        let (mut e, dir) = engine(tag);
        let history: Vec<Window> = (0..90).map(|i| window(i, &LINKS)).collect();
        for w in &history {
            e.window(w);
            e.wait_for_training();
        }
        assert_eq!(e.registry().status, Status::Ready);
        (dir, history)
    }

    #[test]
    fn a_cold_start_on_the_stores_history_learns_the_silent_windows_live_training_learns() {
        // Link 1:2 is silent one window in five: live, each silent window is a sample of it
        // (expected, missing); trained on the same windows read back from the store, too.
        let history: Vec<Window> = (0..90)
            .map(|i| match i % 5 {
                4 => window(i, &LINKS[..1]),
                _ => window(i, &LINKS),
            })
            .collect();
        let link_samples = |e: &Engine| {
            e.kept
                .iter()
                .flat_map(|k| &k.samples)
                .filter(|s| s.kind == EntityKind::Link && s.entity == "1:2")
                .count()
        };
        let (mut live, live_dir) = engine("silent-live");
        for w in &history {
            live.window(w);
        }
        let (mut cold, cold_dir) = engine("silent-cold");
        cold.seed_history(history);
        let heard = 90 - 90 / 5;
        assert!(link_samples(&live) > heard, "{}", link_samples(&live));
        assert_eq!(link_samples(&cold), link_samples(&live));
        for dir in [live_dir, cold_dir] {
            let _ = std::fs::remove_dir_all(dir);
        }
    }

    #[test]
    fn a_restart_forecasts_from_its_first_window_with_the_stores_history() {
        let (dir, history) = trained("restart");
        // Without the history, the first live window has no lags to forecast from.
        let mut cold = Engine::new(config(&dir)).unwrap();
        assert!(cold.window(&window(90, &LINKS)).forecasts.is_empty());
        let mut warm = Engine::new(config(&dir)).unwrap();
        warm.seed_history(history);
        let out = warm.window(&window(90, &LINKS));
        assert_eq!(out.forecasts.len(), 2, "{:?}", out.forecasts);
        assert_eq!(
            warm.counts.trainings_ok, 0,
            "the saved models are kept, not retrained"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_stored_model_of_other_features_is_trained_again_at_the_first_window() {
        let (dir, history) = trained("upgrade");
        // The links' model as an earlier version saved it: one feature fewer.
        let file = dir.join(Registry::FILE);
        let mut saved: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        for m in saved["models"].as_array_mut().unwrap() {
            if m["kind"] == "link" {
                m["features"].as_array_mut().unwrap().pop();
            }
        }
        std::fs::write(&file, saved.to_string()).unwrap();
        let mut upgraded = Engine::new(config(&dir)).unwrap();
        assert!(!upgraded.models.contains_key(&EntityKind::Link));
        upgraded.seed_history(history);
        upgraded.window(&window(90, &LINKS));
        upgraded.wait_for_training();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(upgraded.counts.trainings_ok, 1);
        assert!(upgraded.models.contains_key(&EntityKind::Link));
    }

    #[test]
    fn a_change_nothing_explains_that_lasts_settles_and_becomes_the_usual() {
        let dir = std::env::temp_dir().join(format!("kplane-engine-settle-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut e = Engine::new(EngineConfig {
            retrain_every: 30,
            // 20 windows of 100 ms.
            settle_after_ns: 2_000_000_000,
            ..config(&dir)
        })
        .unwrap();
        learn(&mut e, &LINKS);
        // Link 1:2 runs at 95 % of its capacity from now on.
        let mut phases = Vec::new();
        for i in 90..300 {
            for a in e.window(&busy_window(i, &LINKS, &[(1, 2)])).anomalies {
                if a.entity == "1:2" {
                    phases.push((i, a.phase, a.anomaly_type, a.settled));
                }
            }
            e.wait_for_training();
        }
        let _ = std::fs::remove_dir_all(&dir);
        let (opened, _, typed, _) = phases[0];
        assert_eq!(
            (phases[0].1, typed),
            (AnomalyPhase::Start, AnomalyType::Unknown),
            "{phases:?}"
        );
        let ends: Vec<_> = phases.iter().filter(|p| p.1 == AnomalyPhase::End).collect();
        assert_eq!(ends.len(), 1, "{phases:?}");
        let (ended, _, _, settled) = *ends[0];
        // Raised from its second window (`unknown_after`), settled 2 s after its first (90).
        assert_eq!(opened, 91, "{phases:?}");
        assert!(settled && ended - 90 >= 19, "{phases:?}");
        assert_eq!(
            phases.last().unwrap().1,
            AnomalyPhase::End,
            "the new usual is not raised again, also once the models learnt it: {phases:?}"
        );
        assert!(
            e.settled.is_empty(),
            "two trainings since: it may be raised again"
        );
    }

    #[test]
    fn an_unexplained_outlier_is_raised_only_once_it_lasts() {
        let (mut e, dir) = engine("unknown-after");
        learn(&mut e, &LINKS);
        let raised = |e: &mut Engine, w: &Window| -> Vec<(AnomalyPhase, AnomalyType, u32)> {
            e.window(w)
                .anomalies
                .into_iter()
                .filter(|a| a.entity == "1:2")
                .map(|a| (a.phase, a.anomaly_type, a.windows))
                .collect()
        };
        // One window of link 1:2 at 95 % of its capacity, then its usual: nothing, not even an
        // end, though its habit did not learn the outlier.
        let mut seen = raised(&mut e, &busy_window(90, &LINKS, &[(1, 2)]));
        assert!(e.open().is_empty());
        for i in 91..96 {
            seen.extend(raised(&mut e, &window(i, &LINKS)));
        }
        assert!(seen.is_empty(), "{seen:?}");
        assert_eq!(e.counts.unknown_not_raised, 1);
        // Three windows of it: raised from the second, as begun in the first.
        assert!(raised(&mut e, &busy_window(96, &LINKS, &[(1, 2)])).is_empty());
        let second = raised(&mut e, &busy_window(97, &LINKS, &[(1, 2)]));
        assert_eq!(
            second,
            [(AnomalyPhase::Start, AnomalyType::Unknown, 2)],
            "{second:?}"
        );
        assert_eq!(
            e.open()[0].start_ns,
            window(96, &LINKS).end_ns - e.window_ns
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_unexplained_outlier_waits_for_its_entitys_usual_to_mature() {
        let (mut e, dir) = engine("young-usual");
        learn(&mut e, &LINKS);
        // Links 2:1 and 3:1 appear at window 90 (their first): their usual is judged from their
        // tenth window, an `unknown` on them is raised from their twentieth (window 109).
        let links = [LINKS[0], LINKS[1], ((2, 1), 80.0), ((3, 1), 80.0)];
        let raised = |e: &mut Engine, i: i64| -> Vec<(i64, String, u32, i64)> {
            let busy: Vec<(u32, u16)> =
                [((2, 1), 101..104), ((3, 1), 105..113), ((2, 1), 120..123)]
                    .into_iter()
                    .filter(|(_, at)| at.contains(&i))
                    .map(|(l, _)| l)
                    .collect();
            e.window(&busy_window(i, &links, &busy))
                .anomalies
                .into_iter()
                .filter(|a| a.phase == AnomalyPhase::Start)
                .map(|a| (i, a.entity, a.windows, a.start_ns))
                .collect()
        };
        let start = |i: i64| i * 100_000_000;
        let young: Vec<_> = (90..109).flat_map(|i| raised(&mut e, i)).collect();
        assert!(young.is_empty(), "2:1 busy in its windows 12–14: {young:?}");
        assert_eq!(e.counts.unknown_not_raised, 1, "2:1 was over its threshold");
        let lasting: Vec<_> = (109..120).flat_map(|i| raised(&mut e, i)).collect();
        assert_eq!(
            lasting,
            [(109, "3:1".into(), 5, start(105))],
            "3:1, busy since its 16th window, is raised at its 20th as begun then"
        );
        let mature: Vec<_> = (120..123).flat_map(|i| raised(&mut e, i)).collect();
        assert_eq!(
            mature,
            [(121, "2:1".into(), 2, start(120))],
            "raised at its second window, as any"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_restart_remembers_what_settled() {
        let dir =
            std::env::temp_dir().join(format!("kplane-engine-resettle-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let cfg = || EngineConfig {
            settle_after_ns: 2_000_000_000,
            ..config(&dir)
        };
        let mut e = Engine::new(cfg()).unwrap();
        learn(&mut e, &LINKS);
        let busier = |i| busy_window(i, &LINKS, &[(1, 2)]);
        let mut i = 90;
        while !e.window(&busier(i)).anomalies.iter().any(|a| a.settled) {
            i += 1;
            assert!(i < 150, "not settled");
        }
        drop(e);
        // The model that raised it is the restarted service's too; what settled stays settled.
        let mut restarted = Engine::new(cfg()).unwrap();
        let raised: Vec<_> = (i + 1..i + 60)
            .flat_map(|j| restarted.window(&busier(j)).anomalies)
            .filter(|a| a.entity == "1:2")
            .map(|a| (a.phase, a.anomaly_type))
            .collect();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(raised.is_empty(), "{raised:?}");
    }

    #[test]
    fn a_window_in_an_anomaly_is_kept_for_no_forecast_to_learn() {
        let (mut e, dir) = engine("forecast-frozen");
        let _ = std::fs::remove_dir_all(&dir);
        e.window(&window(0, &LINKS));
        e.open_episode(
            (EntityKind::Link, "1:2".into()),
            episode("1:2", AnomalyType::Unknown),
        );
        e.window(&window(1, &LINKS));
        let kept = |k: &Kept| -> Vec<(String, bool)> {
            k.series
                .iter()
                .map(|v| (v.entity.clone(), v.observed.is_some()))
                .collect()
        };
        let before = kept(&e.kept[0]);
        let during = kept(&e.kept[1]);
        assert!(before.iter().all(|(_, learnt)| *learnt), "{before:?}");
        assert!(during.contains(&("1:2".into(), false)), "{during:?}");
        assert_eq!(
            during.iter().filter(|(_, learnt)| !learnt).count(),
            1,
            "{during:?}"
        );
    }

    #[test]
    fn an_attack_that_lasts_does_not_settle() {
        let (mut e, dir) = engine("no-settle");
        e.cfg.settle_after_ns = 1;
        // Raised at their first window.
        e.cfg.unknown_after = 1;
        let _ = std::fs::remove_dir_all(&dir);
        for (entity, t) in [
            ("10.0.0.1", AnomalyType::Ddos),
            ("10.0.0.2", AnomalyType::Unknown),
        ] {
            let key = (EntityKind::Destination, entity.to_string());
            e.open_episode(key.clone(), episode(entity, t));
            // As raised on an entity of a mature usual (these have no history).
            e.episodes.get_mut(&key).unwrap().raised = true;
        }
        let ended: Vec<String> = e.settle(10).into_iter().map(|a| a.entity).collect();
        assert_eq!(ended, ["10.0.0.2"]);
        assert_eq!(e.episodes.len(), 1);
    }

    #[test]
    fn most_of_the_fabric_silent_at_once_is_a_telemetry_gap_not_failed_links() {
        let (mut e, dir) = engine("gap");
        let links: Vec<((u32, u16), f64)> = (1..=6).map(|n| ((n, 1), 80.0)).collect();
        learn(&mut e, &links);
        for i in 90..96 {
            let out = e.window(&window(i, &links[..1]));
            assert!(
                out.anomalies
                    .iter()
                    .all(|a| a.entity_kind != EntityKind::Link),
                "{:?}",
                out.anomalies
            );
        }
        assert_eq!(e.counts.telemetry_gaps, 6);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
