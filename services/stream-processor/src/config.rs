//! `[stream-processor]`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use kplane_model::id_table::Limits;
use kplane_runtime::Validate;
use serde::{Deserialize, Serialize};

/// Which clock windows the reports: the switches' or the collector's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum EventTime {
    /// The report's own timestamp (the reporting switch's ingress timestamp); the collector's
    /// receive time when the report carries none.
    #[default]
    Report,
    /// The collector's receive time.
    Received,
}

#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct Config {
    /// Admin listener for /metrics, /healthz and /readyz.
    pub admin: SocketAddr,
    /// The document's `[http]` section (tokens, limits) for the admin listener.
    #[serde(skip)]
    pub http: kplane_runtime::HttpConfig,
    /// Root of the analytics store (`tables/…` Parquet) and of the per-partition checkpoints
    /// (`checkpoints/…`).
    pub data_dir: PathBuf,
    /// Window length, on event time.
    #[serde(with = "humantime_serde")]
    pub window: Duration,
    /// How far consecutive windows start apart: `window` (the default) gives tumbling
    /// windows; less gives sliding windows (`window` must be a multiple of it).
    #[serde(with = "humantime_serde", default)]
    pub slide: Option<Duration>,
    /// Bounded lateness: a window closes once the partition's event time passes its end by
    /// this much; rows for a closed window are late (counted, not added).
    #[serde(with = "humantime_serde")]
    pub lateness: Duration,
    /// When no partition has delivered anything for this long (wall clock), every partition
    /// closes its open windows (the end of a stream). Keep it longer than a consumer-group
    /// rebalance, during which nothing arrives either.
    #[serde(with = "humantime_serde")]
    pub idle_close: Duration,
    pub event_time: EventTime,
    /// Consume `int.reports` (every analytics table but `event_counts` and `int_label`, the
    /// flow and queue detectors).
    pub consume_reports: bool,
    /// Consume `int.events` (event counts per window, INT-label updates, report-loss bursts).
    pub consume_events: bool,
    /// INT-label's telemetry interval: `int_label`'s `intervals_updated` counts these (keep
    /// it equal to `collector.int-label.interval`).
    #[serde(with = "humantime_serde")]
    pub int_label_interval: Duration,
    pub thresholds: Thresholds,
    pub state: StateConfig,
    /// Compaction's fan-in: files of one level (per table, hour and partition) merged into
    /// one file of the next level.
    pub compact_files: usize,
    /// Compaction's target file size: a merge stops adding files at this size, and files
    /// this large are not merged again.
    pub compact_target_bytes: u64,
    /// How long a merge's source files stay after the merged file is published, for queries
    /// that listed them before (readers leave them out from then on).
    #[serde(with = "humantime_serde")]
    pub compact_grace: Duration,
    /// How long each table's hour partitions are kept, on event time (`flows = "7d"`); tables
    /// not named are kept for ever. At least 2 h.
    pub retention: BTreeMap<String, humantime_serde::Serde<Duration>>,
    /// Publish window results and immediate events on `int.windows` / `int.alerts`.
    pub publish: bool,
    /// Partitions of `int.windows` and `int.alerts` when the processor creates them (Kafka).
    pub result_partitions: u32,
}

/// `[stream-processor.thresholds]`: what makes an immediate event and what counts as congested.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct Thresholds {
    /// A hop latency above this (ns) is a `threshold` event (on crossing, per flow and node).
    pub hop_latency_ns: u64,
    /// A hop-latency breach ends (`threshold_cleared`) once the latency is below this (ns);
    /// between the two it holds. Default: 90 % of `hop-latency-ns`.
    pub hop_latency_clear_ns: Option<u64>,
    /// A queue occupancy above this is congested (window `congested_ns`) and a `threshold`
    /// event on crossing (per node and queue).
    pub queue_occupancy: u64,
    /// A queue breach ends once the occupancy is below this. Default: 90 % of
    /// `queue-occupancy`.
    pub queue_occupancy_clear: Option<u64>,
    /// A breach is raised only once the value has stayed above the threshold this long
    /// (event time; 0: at the first sample above).
    #[serde(with = "humantime_serde")]
    pub min_duration: Duration,
    /// A flow whose sink reports stop for this long (event time) while upstream reports
    /// continue is a `black_hole`.
    #[serde(with = "humantime_serde")]
    pub black_hole_after: Duration,
    /// Reports lost (collector `report_loss` events) from one node within `loss-burst-interval`
    /// that make a `report_loss_burst` event.
    pub loss_burst_reports: u64,
    #[serde(with = "humantime_serde")]
    pub loss_burst_interval: Duration,
}

/// `[stream-processor.state]`: bounds of the immediate detectors' state, per partition (see
/// `kplane_model::id_table`): entries idle for longer than `idle` (event time) are
/// forgotten, and at `max` the least recently seen make room; evictions are counted.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct StateConfig {
    /// Per-flow state: path, loop, black hole, hop latencies above the threshold.
    pub flows: Limits,
    /// Per-switch state: queues above the threshold, report-loss windows.
    pub nodes: Limits,
}

impl Default for StateConfig {
    fn default() -> Self {
        Self {
            flows: Limits {
                idle: Duration::from_secs(60),
                max: 250_000,
            },
            nodes: Limits {
                idle: Duration::from_secs(3600),
                max: 65_536,
            },
        }
    }
}

/// Where a breach is raised and where it clears.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Band {
    /// Raised above this.
    pub raise: u64,
    /// Cleared below this (at most `raise`).
    pub clear: u64,
    /// Raised once above for this long (ns).
    pub min_ns: i64,
}

impl Thresholds {
    fn band(&self, raise: u64, clear: Option<u64>) -> Band {
        Band {
            raise,
            clear: clear.unwrap_or(raise - raise / 10).min(raise),
            min_ns: self.min_duration.as_nanos() as i64,
        }
    }

    pub fn hop_latency(&self) -> Band {
        self.band(self.hop_latency_ns, self.hop_latency_clear_ns)
    }

    pub fn queue(&self) -> Band {
        self.band(self.queue_occupancy, self.queue_occupancy_clear)
    }
}

impl Default for Thresholds {
    fn default() -> Self {
        Self {
            hop_latency_ns: 100_000,
            hop_latency_clear_ns: None,
            queue_occupancy: 64,
            queue_occupancy_clear: None,
            min_duration: Duration::ZERO,
            black_hole_after: Duration::from_secs(1),
            loss_burst_reports: 100,
            loss_burst_interval: Duration::from_secs(1),
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            admin: SocketAddr::from(([127, 0, 0, 1], 9102)),
            http: kplane_runtime::HttpConfig::default(),
            data_dir: PathBuf::from("kplane-data/stream-processor"),
            window: Duration::from_secs(1),
            slide: None,
            lateness: Duration::from_secs(2),
            idle_close: Duration::from_secs(10),
            event_time: EventTime::Report,
            consume_reports: true,
            consume_events: true,
            thresholds: Thresholds::default(),
            state: StateConfig::default(),
            int_label_interval: Duration::from_millis(100),
            compact_files: 10,
            compact_target_bytes: 128 << 20,
            compact_grace: Duration::from_secs(30),
            retention: BTreeMap::new(),
            publish: true,
            result_partitions: 4,
        }
    }
}

impl Config {
    pub fn window_ns(&self) -> i64 {
        self.window.as_nanos() as i64
    }

    /// How the store merges each lane's files.
    pub fn compaction(&self) -> kplane_store::compaction::Compaction {
        kplane_store::compaction::Compaction {
            fan_in: self.compact_files,
            target_bytes: self.compact_target_bytes,
            window_ns: self.window_ns(),
            grace: self.compact_grace,
        }
    }

    /// How long the store keeps each table.
    pub fn retention(&self) -> kplane_store::retention::Retention {
        kplane_store::retention::Retention {
            keep: self
                .retention
                .iter()
                .map(|(t, d)| (t.clone(), d.into_inner()))
                .collect(),
        }
    }

    pub fn slide_ns(&self) -> i64 {
        self.slide.unwrap_or(self.window).as_nanos() as i64
    }
}

impl Validate for Config {
    fn validate(&self, problems: &mut Vec<String>) {
        let mut need = |ok: bool, what: &str| {
            if !ok {
                problems.push(format!("stream-processor: {what}"));
            }
        };
        need(
            self.window >= Duration::from_millis(1),
            "window must be >= 1ms",
        );
        need(
            self.int_label_interval >= Duration::from_millis(1),
            "int-label-interval must be >= 1ms",
        );
        let slide = self.slide.unwrap_or(self.window);
        need(
            slide >= Duration::from_millis(1)
                && slide <= self.window
                && self
                    .window
                    .as_nanos()
                    .is_multiple_of(slide.as_nanos().max(1)),
            "slide must be >= 1ms, at most window, and divide window",
        );
        need(
            !self.data_dir.as_os_str().is_empty(),
            "data-dir must not be empty",
        );
        need(
            self.idle_close >= Duration::from_millis(10),
            "idle-close must be >= 10ms",
        );
        need(self.compact_files >= 2, "compact-files must be >= 2");
        for (table, keep) in &self.retention {
            let written = kplane_store::tables::window_schemas()
                .iter()
                .any(|(t, _)| t == table)
                || [
                    kplane_store::tables::ALERTS,
                    kplane_store::tables::SWITCH_CHANGES,
                ]
                .contains(&table.as_str())
                || kplane_store::rollup::rollup_tables()
                    .iter()
                    .any(|(t, _)| t == table);
            need(
                written,
                &format!("retention names {table:?}, which is no table the processor writes"),
            );
            // An hour is merged down one window past its end; keep it past that.
            need(
                **keep >= Duration::from_secs(2 * 3_600),
                &format!("retention of {table:?} must be >= 2h"),
            );
        }
        need(
            self.compact_target_bytes >= 1 << 20,
            "compact-target-bytes must be >= 1 MiB",
        );
        need(
            self.consume_reports || self.consume_events,
            "consume-reports and consume-events are both off: nothing to read",
        );
        need(
            self.result_partitions >= 1,
            "result-partitions must be >= 1",
        );
        for (name, raise, clear) in [
            (
                "hop-latency",
                self.thresholds.hop_latency_ns,
                self.thresholds.hop_latency_clear_ns,
            ),
            (
                "queue-occupancy",
                self.thresholds.queue_occupancy,
                self.thresholds.queue_occupancy_clear,
            ),
        ] {
            need(
                clear.is_none_or(|c| c <= raise),
                &format!("thresholds.{name}-clear must be at most the threshold"),
            );
        }
        need(
            self.thresholds.loss_burst_interval >= Duration::from_millis(1),
            "thresholds.loss-burst-interval must be >= 1ms",
        );
        for (name, l) in [("flows", self.state.flows), ("nodes", self.state.nodes)] {
            if let Some(problem) = l.problem() {
                need(false, &format!("state.{name}: {problem}"));
            }
        }
    }
}

impl kplane_runtime::Listeners for Config {
    fn set_http(&mut self, http: kplane_runtime::HttpConfig) {
        self.http = http;
    }

    fn validate_listeners(&self, problems: &mut Vec<String>) {
        self.http
            .check_listener("stream-processor.admin", self.admin, problems);
    }
}
