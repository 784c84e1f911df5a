//! `kplane_stream_processor_*`.

use arrow_array::RecordBatch;
use arrow_array::cast::AsArray;
use arrow_array::types::Float64Type;
use arrow_schema::DataType;
use datafusion::arrow::compute::cast;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use kplane_runtime::metrics::StateMetrics;

use crate::detect::{Alert, AlertKind};
use crate::panes::Offered;
use crate::store::StoreCounts;
use crate::switch_view::ViewTally;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Outcome {
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TableLabel {
    pub table: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabel {
    pub kind: &'static str,
}

fn latency_histogram() -> Histogram {
    // 1 ms … ~65 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

#[derive(Clone, Debug)]
pub struct ProcessorMetrics {
    pub records: Family<Outcome, Counter>,
    pub undecodable: Counter,
    pub unowned: Counter,
    pub consume_errors: Counter,
    pub windows_written: Counter,
    pub result_rows: Family<TableLabel, Counter>,
    pub alerts: Family<KindLabel, Counter>,
    /// The collectors' switch-metric events, by what the merged switch views made of them.
    pub switch_views: Family<Outcome, Counter>,
    pub publish_failures: Counter,
    pub open_panes: Gauge,
    pub partitions: Gauge,
    pub state: StateMetrics,
    pub store_files: Counter,
    pub torn_checkpoint_lines: Counter,
    pub compactions: Counter,
    pub merged_bytes: Counter,
    pub compaction_failures: Counter,
    pub files_expired: Counter,
    pub expiry_failures: Counter,
    pub rollups: Counter,
    pub rollup_failures: Counter,
    pub window_latency: Histogram,
    pub alert_latency: Histogram,
    /// Each (switch, egress port, queue)'s largest occupancy in each window.
    pub queue_occupancy: Histogram,
    /// Each flow's mean end-to-end latency (sum of hop latencies) in each window.
    pub flow_latency: Histogram,
}

impl Default for ProcessorMetrics {
    fn default() -> Self {
        Self {
            records: Family::default(),
            undecodable: Counter::default(),
            unowned: Counter::default(),
            consume_errors: Counter::default(),
            windows_written: Counter::default(),
            result_rows: Family::default(),
            alerts: Family::default(),
            switch_views: Family::default(),
            publish_failures: Counter::default(),
            open_panes: Gauge::default(),
            partitions: Gauge::default(),
            state: StateMetrics::default(),
            store_files: Counter::default(),
            torn_checkpoint_lines: Counter::default(),
            compactions: Counter::default(),
            merged_bytes: Counter::default(),
            compaction_failures: Counter::default(),
            files_expired: Counter::default(),
            expiry_failures: Counter::default(),
            rollups: Counter::default(),
            rollup_failures: Counter::default(),
            window_latency: latency_histogram(),
            alert_latency: latency_histogram(),
            // 1 … 65,536 (cells or packets, as the switch counts).
            queue_occupancy: Histogram::new(exponential_buckets(1.0, 2.0, 17)),
            // 1 µs … ~0.5 s.
            flow_latency: Histogram::new(exponential_buckets(1e-6, 2.0, 20)),
        }
    }
}

impl ProcessorMetrics {
    /// Adds what a lane's store did between two of its counts (all lanes share the counters).
    pub fn add_store(&self, before: &StoreCounts, after: &StoreCounts) {
        self.store_files
            .inc_by(after.files_written - before.files_written);
        self.compactions
            .inc_by(after.compactions - before.compactions);
        self.merged_bytes
            .inc_by(after.merged_bytes - before.merged_bytes);
        self.compaction_failures
            .inc_by(after.compaction_failures - before.compaction_failures);
        self.files_expired
            .inc_by(after.files_expired - before.files_expired);
        self.expiry_failures
            .inc_by(after.expiry_failures - before.expiry_failures);
        self.rollups.inc_by(after.rollups - before.rollups);
        self.rollup_failures
            .inc_by(after.rollup_failures - before.rollup_failures);
    }

    pub fn register(&self, root: &mut Registry) {
        let r = root.sub_registry_with_prefix("stream_processor");
        // Every outcome's and kind's series from the start: a dashboard shows 0, not "no data".
        for outcome in ["added", "late", "replayed"] {
            let _ = self.records.get_or_create(&Outcome { outcome });
        }
        for kind in AlertKind::ALL {
            let _ = self.alerts.get_or_create(&KindLabel {
                kind: kind.as_str(),
            });
        }
        r.register(
            "records",
            "Input rows (reports, events) read, by outcome: added to a window, late (misses a \
             window already written; counted, not added to it), replayed (already in written \
             results after a restart)",
            self.records.clone(),
        );
        r.register(
            "undecodable_messages",
            "Bus messages whose payload could not be decoded (counted, skipped, committed)",
            self.undecodable.clone(),
        );
        r.register(
            "unowned_messages",
            "Messages of a partition this member does not own (left to its owner)",
            self.unowned.clone(),
        );
        r.register(
            "consume_errors",
            "Transient consume errors (e.g. unknown topic before the collector created it), retried",
            self.consume_errors.clone(),
        );
        r.register(
            "windows_written",
            "Windows whose results were written durably (per lane)",
            self.windows_written.clone(),
        );
        r.register(
            "result_rows",
            "Rows of window results written, by table",
            self.result_rows.clone(),
        );
        r.register(
            "alerts",
            "Immediate events raised, by kind",
            self.alerts.clone(),
        );
        r.register(
            "switch_views",
            "Collectors' switch-metric events merged into one view per switch key, by outcome \
             (new, change: a row of switch_changes; absorbed: within the threshold of the \
             merged value; stale: older than the key's newest view)",
            self.switch_views.clone(),
        );
        r.register(
            "publish_failures",
            "Results or alerts that could not be published on the bus (they are stored)",
            self.publish_failures.clone(),
        );
        r.register(
            "open_panes",
            "Panes (window slices) held across lanes",
            self.open_panes.clone(),
        );
        r.register(
            "assigned_partitions",
            "Input partitions (of every input topic) this member owns",
            self.partitions.clone(),
        );
        self.state.register(r);
        r.register(
            "torn_checkpoint_lines",
            "Torn last lines (a crash mid-write) found and cut off checkpoint logs on opening",
            self.torn_checkpoint_lines.clone(),
        );
        r.register(
            "store_files_written",
            "Parquet files written (window tables and alerts, all lanes)",
            self.store_files.clone(),
        );
        r.register(
            "compactions",
            "Merges of store files done (all lanes)",
            self.compactions.clone(),
        );
        r.register(
            "store_merged_bytes",
            "Bytes of the files merges wrote (compaction's write amplification, all lanes)",
            self.merged_bytes.clone(),
        );
        r.register(
            "compaction_failures",
            "Merges that failed (logged; their files stay readable and are merged later)",
            self.compaction_failures.clone(),
        );
        r.register(
            "store_files_expired",
            "Store files removed past their table's retention (all lanes)",
            self.files_expired.clone(),
        );
        r.register(
            "retention_failures",
            "Retention sweeps that failed (logged; the next sweep retries)",
            self.expiry_failures.clone(),
        );
        r.register(
            "store_rollups",
            "Hours of a table rolled up into 1-minute and 1-hour windows (all lanes)",
            self.rollups.clone(),
        );
        r.register(
            "rollup_failures",
            "Rollups that failed (logged; retried at the lane's next commit)",
            self.rollup_failures.clone(),
        );
        r.register(
            "window_result_latency_seconds",
            "From the collector's receipt of a window's last row to its results being stored",
            self.window_latency.clone(),
        );
        r.register(
            "queue_occupancy",
            "Largest occupancy of each (switch, egress port, queue) in each window",
            self.queue_occupancy.clone(),
        );
        r.register(
            "flow_latency_seconds",
            "Mean end-to-end latency (sum of hop latencies) of each flow in each window",
            self.flow_latency.clone(),
        );
        r.register(
            "alert_latency_seconds",
            "From the collector's receipt of a row to the immediate event it raised",
            self.alert_latency.clone(),
        );
    }

    /// Rows that came after their window was written (counted, in no window).
    pub fn late_rows(&self) -> u64 {
        self.records
            .get_or_create(&Outcome { outcome: "late" })
            .get()
    }

    pub fn offered(&self, o: Offered) {
        for (outcome, n) in [
            ("added", o.added),
            ("late", o.late),
            ("replayed", o.replayed),
        ] {
            if n > 0 {
                self.records.get_or_create(&Outcome { outcome }).inc_by(n);
            }
        }
    }

    /// Counts a window table's rows and adds the queue and flow-latency rows to their
    /// distributions (what the dashboards draw as heatmaps).
    pub fn window_rows(&self, table: &'static str, batch: &RecordBatch) {
        self.result_rows
            .get_or_create(&TableLabel { table })
            .inc_by(batch.num_rows() as u64);
        let (column, histogram, scale) = match table {
            "queues" => ("occupancy_max", &self.queue_occupancy, 1.0),
            "flows" => ("e2e_latency_mean_ns", &self.flow_latency, 1e-9),
            _ => return,
        };
        let Some(values) = batch
            .column_by_name(column)
            .and_then(|c| cast(c, &DataType::Float64).ok())
        else {
            return;
        };
        for v in values.as_primitive::<Float64Type>().iter().flatten() {
            histogram.observe(v * scale);
        }
    }

    pub fn switch_views(&self, tally: &ViewTally) {
        for (outcome, n) in tally.outcomes() {
            if n > 0 {
                self.switch_views
                    .get_or_create(&Outcome { outcome })
                    .inc_by(n);
            }
        }
    }

    pub fn alert(&self, a: &Alert, now_ns: i64) {
        let kind = a.kind.map_or("unknown", AlertKind::as_str);
        self.alerts.get_or_create(&KindLabel { kind }).inc();
        if a.received_ns > 0 {
            self.alert_latency
                .observe((now_ns - a.received_ns).max(0) as f64 / 1e9);
        }
    }
}
