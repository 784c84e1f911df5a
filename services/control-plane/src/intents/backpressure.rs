//! Telemetry backpressure: when a collector drops reports for lack of capacity (socket
//! buffer, queue or bus full) or a stream processor lags behind its topics, ask the sinks for
//! coarser detection thresholds — fewer reports — through a `tune` recommendation, one level
//! at a time, and relax a level after a calm period. The report rate adapts to what the
//! pipeline can take instead of reports being dropped.
//!
//! Load is read off the services' own `/metrics` (the admin listeners in `sources`), so it
//! works the same for `kplane up` and for services on other machines. Level `n` is one
//! intent owned by `backpressure` at priority `priority + n` whose threshold is
//! `detection.threshold × factor^(n-1)`; a change submits the new level before deleting the
//! old one, so the sinks are never left without thresholds in between.

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::{Duration, Instant};

use kplane_runtime::{Shutdown, probe};
use serde::{Deserialize, Serialize};

use super::Intents;
use super::model::{Algorithm, Detection, IntentKind, IntentSpec, Measurement, Origin};
use kplane_runtime::auth::{Identity, Role};

/// The owner and actor of backpressure intents.
pub const OWNER: &str = "backpressure";

/// `[intent-api.intents.backpressure]`.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct BackpressureConfig {
    /// Off: never (`kplane up` fills in its collector when on and `sources` is empty).
    pub enabled: bool,
    /// Admin listeners (`host:port`) of collectors and stream processors whose `/metrics`
    /// are read; none: backpressure is off.
    pub sources: Vec<String>,
    /// How often they are read.
    #[serde(with = "humantime_serde")]
    pub interval: Duration,
    /// Overloaded when the collectors drop more reports per second than this
    /// (`kplane_collector_dropped_total` of stages `socket`, `queue` and `publish`).
    pub max_drop_rate: f64,
    /// Overloaded when the processors' consumer lag (`kplane_bus_consumer_lag`, Kafka) is
    /// above this many messages.
    pub max_lag: f64,
    /// Least time between two steps up (the last step must have had time to show).
    #[serde(with = "humantime_serde")]
    pub hold: Duration,
    /// Calm this long → one level down.
    #[serde(with = "humantime_serde")]
    pub relax_after: Duration,
    /// Highest level.
    pub max_level: u32,
    /// Level 1's detection at the sinks; every further level multiplies its threshold.
    pub detection: Detection,
    pub factor: u32,
    /// Table priority of level 1 (level n: `priority + n - 1`): keep it below operators'
    /// `tune` intents so theirs win where they overlap.
    pub priority: u32,
}

impl Default for BackpressureConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            sources: Vec::new(),
            interval: Duration::from_secs(1),
            max_drop_rate: 100.0,
            max_lag: 100_000.0,
            hold: Duration::from_secs(3),
            relax_after: Duration::from_secs(30),
            max_level: 4,
            detection: Detection {
                algorithm: Algorithm::PerFlow,
                measurement: Measurement::HopLatency,
                threshold: 20_000,
                weight: None,
                when: Vec::new(),
            },
            factor: 2,
            priority: 10,
        }
    }
}

impl BackpressureConfig {
    pub fn check(&self, problems: &mut Vec<String>) {
        let at = "intent-api.intents.backpressure";
        if self.interval < Duration::from_millis(100) {
            problems.push(format!("{at}: interval must be >= 100ms"));
        }
        if !(self.max_drop_rate >= 0.0 && self.max_lag >= 0.0) {
            problems.push(format!("{at}: max-drop-rate and max-lag must be >= 0"));
        }
        if self.factor < 2 {
            problems.push(format!("{at}: factor must be >= 2"));
        }
        if self.max_level == 0 || self.priority == 0 || self.priority + self.max_level > 65_535 {
            problems.push(format!(
                "{at}: max-level >= 1 and priority >= 1 with priority + max-level <= 65535"
            ));
        }
        if self.detection.algorithm == Algorithm::Noop {
            problems.push(format!("{at}.detection: noop has no threshold to coarsen"));
        }
        for s in &self.sources {
            if !s.contains(':') {
                problems.push(format!("{at}.sources: {s:?} is not host:port"));
            }
        }
    }

    /// The `tune` intent of `level` (≥ 1).
    pub fn spec(&self, level: u32, why: &str) -> IntentSpec {
        let mut detection = self.detection.clone();
        let scale = u64::from(self.factor).saturating_pow(level - 1);
        detection.threshold = u64::from(detection.threshold)
            .saturating_mul(scale)
            .min(u64::from(u32::MAX)) as u32;
        IntentSpec {
            kind: IntentKind::Tune {
                flows: Default::default(),
                detection,
            },
            switches: None,
            priority: self.priority + level - 1,
            ttl: None,
            owner: OWNER.into(),
            reason: format!("telemetry backpressure level {level}: {why}"),
            origin: Origin::Recommendation,
            anomaly: None,
        }
    }
}

/// One reading of every source.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Load {
    /// Reports dropped for lack of capacity, summed over the sources (a counter).
    pub dropped: f64,
    /// Consumer lag, summed (a gauge).
    pub lag: f64,
}

impl Load {
    /// Reads one `/metrics` text.
    pub fn parse(text: &str) -> Self {
        let dropped = ["socket", "queue", "publish"]
            .iter()
            .map(|s| {
                probe::metric_sum(
                    text,
                    "kplane_collector_dropped_total",
                    &[&format!("stage=\"{s}\"")],
                )
            })
            .sum();
        Self {
            dropped,
            lag: probe::metric_sum(text, "kplane_bus_consumer_lag", &[]),
        }
    }
}

/// The level decision, apart from time and I/O.
#[derive(Debug)]
pub struct Governor {
    cfg: BackpressureConfig,
    pub level: u32,
    last: Option<(Instant, f64)>,
    changed_at: Option<Instant>,
    calm_since: Option<Instant>,
}

impl Governor {
    pub fn new(cfg: BackpressureConfig, level: u32) -> Self {
        Self {
            cfg,
            level,
            last: None,
            changed_at: None,
            calm_since: None,
        }
    }

    /// Feeds a reading taken at `now`; the new level and why when it changes.
    pub fn observe(&mut self, now: Instant, load: Load) -> Option<(u32, String)> {
        let rate = match self.last.replace((now, load.dropped)) {
            // A counter that went down is a restarted service: no rate this time.
            Some((t, d)) if load.dropped >= d && now > t => {
                (load.dropped - d) / (now - t).as_secs_f64()
            }
            _ => 0.0,
        };
        let overloaded = rate > self.cfg.max_drop_rate || load.lag > self.cfg.max_lag;
        let held = self
            .changed_at
            .is_some_and(|t| now.duration_since(t) < self.cfg.hold);
        if overloaded {
            self.calm_since = None;
            if self.level < self.cfg.max_level && !held {
                self.level += 1;
                self.changed_at = Some(now);
                return Some((
                    self.level,
                    format!(
                        "dropping {rate:.0} reports/s (max {}), lag {:.0} (max {})",
                        self.cfg.max_drop_rate, load.lag, self.cfg.max_lag
                    ),
                ));
            }
            return None;
        }
        let calm = *self.calm_since.get_or_insert(now);
        if self.level > 0 && now.duration_since(calm) >= self.cfg.relax_after {
            self.level -= 1;
            self.changed_at = Some(now);
            self.calm_since = Some(now);
            return Some((self.level, format!("calm for {:?}", self.cfg.relax_after)));
        }
        None
    }
}

async fn read(sources: &[String]) -> Result<Load, String> {
    let sources = sources.to_vec();
    tokio::task::spawn_blocking(move || {
        let mut total = Load::default();
        for s in &sources {
            let addr: SocketAddr = s
                .to_socket_addrs()
                .ok()
                .and_then(|mut a| a.next())
                .ok_or_else(|| format!("{s}: cannot resolve"))?;
            let r = probe::request(addr, "GET", "/metrics", &[], "", Duration::from_secs(2))
                .map_err(|e| format!("{s}: {e}"))?;
            let l = Load::parse(&r.body);
            total.dropped += l.dropped;
            total.lag += l.lag;
        }
        Ok(total)
    })
    .await
    .map_err(|e| e.to_string())?
}

/// Runs until `shutdown` (returns at once when off or without sources).
pub async fn run(intents: Intents, cfg: BackpressureConfig, shutdown: Shutdown) {
    if !cfg.enabled || cfg.sources.is_empty() {
        return;
    }
    let me = Identity {
        name: OWNER.into(),
        role: Role::Operator,
    };
    // Adopt what a previous run left: the highest level stays, the rest goes.
    let mut mine: Vec<(u32, String)> = intents
        .list(None)
        .await
        .into_iter()
        .filter(|i| i.spec.owner == OWNER && !i.state.ended())
        .map(|i| (i.spec.priority.saturating_sub(cfg.priority) + 1, i.id))
        .collect();
    mine.sort();
    let current = mine.pop();
    for (_, id) in mine {
        let _ = intents.delete(&id, &me).await;
    }
    let mut gov = Governor::new(cfg.clone(), current.as_ref().map_or(0, |c| c.0));
    let mut current = current.map(|c| c.1);
    tracing::info!(sources = ?cfg.sources, level = gov.level, "telemetry backpressure on");
    let mut unreadable = false;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(cfg.interval) => {}
            _ = shutdown.wait() => return,
        }
        let load = match read(&cfg.sources).await {
            Ok(l) => {
                unreadable = false;
                l
            }
            Err(e) => {
                // An unreadable source is no evidence either way: hold the level.
                if !unreadable {
                    tracing::warn!(error = %e, "backpressure: load unreadable; level held");
                }
                unreadable = true;
                continue;
            }
        };
        let before = gov.level;
        let Some((level, why)) = gov.observe(Instant::now(), load) else {
            continue;
        };
        tracing::info!(level, %why, "telemetry backpressure");
        let next = if level == 0 {
            None
        } else {
            match intents.submit(cfg.spec(level, &why), &me).await {
                Ok(v) => v["id"].as_str().map(String::from),
                Err(e) => {
                    tracing::warn!(error = ?e, level, "backpressure intent refused");
                    // Stay where the switches are; the next reading tries again.
                    gov.level = before;
                    continue;
                }
            }
        };
        if let Some(old) = current.take() {
            let _ = intents.delete(&old, &me).await;
        }
        current = next;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gov() -> Governor {
        Governor::new(
            BackpressureConfig {
                max_drop_rate: 10.0,
                hold: Duration::from_secs(2),
                relax_after: Duration::from_secs(5),
                max_level: 2,
                ..Default::default()
            },
            0,
        )
    }

    fn at(t0: Instant, s: u64) -> Instant {
        t0 + Duration::from_secs(s)
    }

    #[test]
    fn steps_up_under_drops_with_a_hold_and_down_after_calm() {
        let t0 = Instant::now();
        let mut g = gov();
        let l = |d: f64| Load {
            dropped: d,
            lag: 0.0,
        };
        assert_eq!(g.observe(at(t0, 0), l(0.0)), None);
        // 100 drops/s: up to 1.
        assert_eq!(g.observe(at(t0, 1), l(100.0)).map(|x| x.0), Some(1));
        // Still dropping, but within the hold.
        assert_eq!(g.observe(at(t0, 2), l(200.0)), None);
        assert_eq!(g.observe(at(t0, 3), l(300.0)).map(|x| x.0), Some(2));
        // At the top: stays.
        assert_eq!(g.observe(at(t0, 6), l(600.0)), None);
        // Calm (5 drops/s is under the limit) for relax-after: one level down at a time.
        assert_eq!(g.observe(at(t0, 7), l(605.0)), None);
        assert_eq!(g.observe(at(t0, 11), l(610.0)), None);
        assert_eq!(g.observe(at(t0, 12), l(610.0)).map(|x| x.0), Some(1));
        assert_eq!(g.observe(at(t0, 16), l(610.0)), None);
        assert_eq!(g.observe(at(t0, 17), l(610.0)).map(|x| x.0), Some(0));
        assert_eq!(g.observe(at(t0, 30), l(610.0)), None);
    }

    #[test]
    fn lag_overloads_and_a_counter_reset_is_no_rate() {
        let t0 = Instant::now();
        let mut g = gov();
        g.observe(at(t0, 0), Load::default());
        let up = g.observe(
            at(t0, 1),
            Load {
                dropped: 0.0,
                lag: 1e6,
            },
        );
        assert!(up.is_some_and(|(l, why)| l == 1 && why.contains("lag 1000000")));
        let mut g = gov();
        g.observe(
            at(t0, 0),
            Load {
                dropped: 1e6,
                lag: 0.0,
            },
        );
        assert_eq!(g.observe(at(t0, 1), Load::default()), None);
    }

    #[test]
    fn reads_collector_drops_by_stage_and_consumer_lag() {
        let text = "kplane_collector_dropped_total{stage=\"queue\",reason=\"full\"} 7\n\
                    kplane_collector_dropped_total{stage=\"socket\",reason=\"rcvbuf_overflow\"} 3\n\
                    kplane_collector_dropped_total{stage=\"decode\",reason=\"not_a_report\"} 100\n\
                    kplane_bus_consumer_lag{topic=\"int.reports\",partition=\"0\"} 40\n\
                    kplane_bus_consumer_lag{topic=\"int.reports\",partition=\"1\"} 2\n";
        assert_eq!(
            Load::parse(text),
            Load {
                dropped: 10.0,
                lag: 42.0
            }
        );
    }

    #[test]
    fn levels_scale_the_threshold_and_the_priority() {
        let cfg = BackpressureConfig::default();
        let s = cfg.spec(3, "x");
        let IntentKind::Tune { detection, .. } = &s.kind else {
            panic!("not a tune intent")
        };
        assert_eq!(detection.threshold, 80_000);
        assert_eq!(s.priority, 12);
        assert_eq!(s.origin, Origin::Recommendation);
        assert!(s.check().is_empty(), "{:?}", s.check());
    }
}
