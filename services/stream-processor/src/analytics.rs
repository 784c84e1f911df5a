//! The window analytics: one DataFusion SQL query per result table, planned once and run over
//! each closed window's input tables (`reports`, `hops`, `events`, see `frame.rs`).
//!
//! Every result row is prefixed with `window_start`, `window_end` and the bus `partition` it
//! was computed from. Percentiles are exact (`distribution`, equal to `percentile_cont`).

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use arrow_array::{ArrayRef, RecordBatch, TimestampNanosecondArray, UInt32Array};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::catalog::streaming::StreamingTable;
use datafusion::error::Result;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::execution_plan::reset_plan_states;
use datafusion::physical_plan::memory::MemoryStream;
use datafusion::physical_plan::streaming::PartitionStream;
use datafusion::physical_plan::{ExecutionPlan, collect};
use datafusion::prelude::SessionContext;

use crate::frame::{events_schema, hops_schema, reports_schema};
use crate::stages::StageTimes;

/// A result table of the window analytics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Table {
    /// Per flow: reports, bytes, trajectory, path change against the previous window, end-to-end
    /// latency (sum of hop latencies) and transit time (timestamp difference).
    Flows,
    /// Per (flow, node): hop latency p50 / p99 / max.
    HopLatency,
    /// Per (node, queue): occupancy mean / max, time above the congestion threshold.
    Queues,
    /// Per (node, egress port): the neighbour it leads to, tx utilisation mean / max, and the
    /// mean of the samples in the window's last tenth (where it stood as the window closed).
    Links,
    /// Per source address: flows, reports, distinct destinations and destination ports.
    Sources,
    /// Per destination address: flows, reports, distinct sources and destination ports.
    Destinations,
    /// Per (metric, kind): the collector's events.
    EventCounts,
    /// Per INT-label (switch, egress port): the updates of the collector's database, the
    /// telemetry intervals they fell in, the newest label time and the longest gap.
    IntLabel,
    /// Per INT-label exporting switch: exports and their option bytes (INT-label's
    /// bandwidth at the last hops).
    IntLabelExports,
}

impl Table {
    /// In query order: `flows` first (sources and destinations read its result).
    pub const ALL: [Table; 9] = [
        Self::Flows,
        Self::HopLatency,
        Self::Queues,
        Self::Links,
        Self::Sources,
        Self::Destinations,
        Self::EventCounts,
        Self::IntLabel,
        Self::IntLabelExports,
    ];
    /// Computed from `int.reports`.
    pub const REPORT_TABLES: &'static [Table] = Self::ALL.as_slice().split_at(6).0;
    /// Computed from `int.events`.
    pub const EVENT_TABLES: &'static [Table] = Self::ALL.as_slice().split_at(6).1;

    pub const fn name(self) -> &'static str {
        match self {
            Self::Flows => "flows",
            Self::HopLatency => "hop_latency",
            Self::Queues => "queues",
            Self::Links => "links",
            Self::Sources => "sources",
            Self::Destinations => "destinations",
            Self::EventCounts => "event_counts",
            Self::IntLabel => "int_label",
            Self::IntLabelExports => "int_label_exports",
        }
    }

    fn sql(self, p: &Params) -> String {
        let (congestion_threshold, window_ns) = (p.congestion_threshold, p.window_ns);
        const FLOW: &str = "src_ip, dst_ip, src_port, dst_port, protocol";
        match self {
            // Sink reports only: an intermediate report's path is a prefix.
            // The trajectory is the path of the flow's latest report: chosen by its hash
            // (`path_id`, a fast accumulator), the list looked up among the window's few
            // distinct paths (`any_value`: kplane's grouped one, see any_value.rs).
            Self::Flows => format!(
                "WITH sink AS (SELECT * FROM reports \
                   WHERE src_ip IS NOT NULL AND NOT intermediate AND hop_count > 0), \
                 f AS (SELECT {FLOW}, flow_id, count(*) AS reports, \
                   sum(packet_length) AS bytes, \
                   last_value(path_id ORDER BY event_time) AS path_id, \
                   avg(e2e_latency_ns) AS e2e_latency_mean_ns, \
                   max(e2e_latency_ns) AS e2e_latency_max_ns, \
                   avg(transit_ns) AS transit_mean_ns, max(transit_ns) AS transit_max_ns, \
                   min(event_time) AS first_seen, max(event_time) AS last_seen \
                   FROM sink GROUP BY flow_id, {FLOW}), \
                 paths AS (SELECT path_id, any_value(path) AS path FROM sink GROUP BY path_id) \
                 SELECT f.src_ip, f.dst_ip, f.src_port, f.dst_port, f.protocol, f.reports, f.bytes, \
                   paths.path, f.path_id, f.flow_id, \
                   f.e2e_latency_mean_ns, f.e2e_latency_max_ns, f.transit_mean_ns, \
                   f.transit_max_ns, f.first_seen, f.last_seen, \
                   p.path AS previous_path, \
                   CASE WHEN p.path_id IS NULL THEN NULL ELSE f.path_id <> p.path_id END \
                     AS path_changed \
                 FROM f JOIN paths ON f.path_id = paths.path_id \
                 LEFT JOIN previous_paths p ON f.src_ip = p.src_ip AND f.dst_ip = p.dst_ip \
                   AND f.src_port = p.src_port AND f.dst_port = p.dst_port \
                   AND f.protocol = p.protocol \
                 ORDER BY f.src_ip, f.dst_ip, f.src_port, f.dst_port, f.protocol"
            ),
            // Grouped by one key, `flow_node_id` (a primitive column; the pair would take the
            // slower multi-column path), the 5-tuple joined back from the window's flows.
            // Hops without a flow or node share the null key: that group has no node and is
            // left out after aggregation (cheaper than filtering every row before it).
            // `distribution` (distribution.rs) gives samples, p50, p99 and max in one pass.
            Self::HopLatency => format!(
                "WITH h AS (SELECT max(flow_id) AS flow_id, max(node_id) AS node_id, \
                   distribution(hop_latency_ns) AS d \
                   FROM hops GROUP BY flow_node_id) \
                 SELECT f.src_ip, f.dst_ip, f.src_port, f.dst_port, f.protocol, h.node_id, \
                   CAST(h.d['samples'] AS BIGINT) AS samples, h.d['p50'] AS p50_ns, \
                   h.d['p99'] AS p99_ns, CAST(h.d['max'] AS INT UNSIGNED) AS max_ns \
                 FROM h JOIN window_flows f ON h.flow_id = f.flow_id \
                 WHERE h.node_id IS NOT NULL AND h.d['samples'] > 0 \
                 ORDER BY {FLOW}, node_id"
            ),
            // A queue is a (switch, egress port, queue id): queue ids number the queues of
            // one port (a switch with one queue per port stamps 0 on every port). Grouped by
            // one primitive key, `node_id << 32 | port << 8 | queue_id`, with the port's 17
            // bits holding 65536 for a hop that stamps no port (two or three key columns would
            // take DataFusion's slower multi-column path), split again on the few result rows.
            Self::Queues => format!(
                "SELECT CAST(k >> 32 AS INT UNSIGNED) AS node_id, \
                   CAST(NULLIF((k >> 8) & 131071, 65536) AS SMALLINT UNSIGNED) AS egress_port, \
                   CAST(k & 255 AS TINYINT UNSIGNED) AS queue_id, samples, occupancy_mean, \
                   occupancy_max, congested_samples, \
                   CAST(CAST(congested_samples AS DOUBLE) / samples * {window_ns} AS BIGINT) \
                     AS congested_ns \
                 FROM (SELECT CAST(node_id AS BIGINT UNSIGNED) << 32 \
                     | COALESCE(CAST(l1_egress_port AS BIGINT UNSIGNED), 65536) << 8 \
                     | CAST(queue_id AS BIGINT UNSIGNED) AS k, \
                   count(*) AS samples, \
                   avg(queue_occupancy) AS occupancy_mean, max(queue_occupancy) AS occupancy_max, \
                   count(*) FILTER (WHERE queue_occupancy > {congestion_threshold}) \
                     AS congested_samples \
                   FROM hops \
                   WHERE node_id IS NOT NULL AND queue_id IS NOT NULL AND queue_occupancy IS NOT NULL \
                   GROUP BY k) \
                 ORDER BY node_id, egress_port, queue_id"
            ),
            // One key again: `node_id << 16 | l1_egress_port` (a 16-bit field). The samples
            // of the window's last tenth say where the link stood as it closed (a transfer
            // begun or ended inside the window moves the mean only part of the way).
            Self::Links => "SELECT CAST(k >> 16 AS INT UNSIGNED) AS node_id, \
                   CAST(k & 65535 AS SMALLINT UNSIGNED) AS egress_port, next_node_id, samples, \
                   tx_utilization_mean, tx_utilization_max, end_samples, \
                   tx_utilization_end_mean \
                 FROM (SELECT CAST(node_id AS BIGINT UNSIGNED) << 16 | CAST(l1_egress_port AS BIGINT UNSIGNED) AS k, \
                   max(next_node_id) AS next_node_id, count(*) AS samples, \
                   avg(tx_utilization) AS tx_utilization_mean, \
                   max(tx_utilization) AS tx_utilization_max, \
                   count(*) FILTER (WHERE event_time >= end_part.since) AS end_samples, \
                   avg(tx_utilization) FILTER (WHERE event_time >= end_part.since) \
                     AS tx_utilization_end_mean \
                   FROM end_part CROSS JOIN hops \
                   WHERE node_id IS NOT NULL AND l1_egress_port IS NOT NULL \
                     AND tx_utilization IS NOT NULL \
                   GROUP BY k) \
                 ORDER BY node_id, egress_port"
                .to_string(),
            // From the window's flows (sink reports), not the raw reports again.
            Self::Sources => "SELECT src_ip, count(*) AS flows, sum(reports) AS reports, \
                   sum(bytes) AS bytes, \
                   count(DISTINCT dst_ip) AS destinations, count(DISTINCT dst_port) AS dst_ports \
                 FROM window_flows GROUP BY src_ip ORDER BY src_ip"
                .to_string(),
            Self::Destinations => "SELECT dst_ip, count(*) AS flows, sum(reports) AS reports, \
                   sum(bytes) AS bytes, \
                   count(DISTINCT src_ip) AS sources, count(DISTINCT dst_port) AS dst_ports \
                 FROM window_flows GROUP BY dst_ip ORDER BY dst_ip"
                .to_string(),
            Self::EventCounts => "SELECT metric, kind, count(*) AS count FROM events \
                 GROUP BY metric, kind ORDER BY metric, kind"
                .to_string(),
            // The collector's `int_label_port` events: one per item that updated a port.
            // `intervals_updated` counts the telemetry intervals with an update: over a
            // window's known ports, the coverage rate. Intervals are on the port's own switch
            // clock (the label time): a batch of exports the transport delayed is still the
            // intervals the port was labelled in, and switches' clocks need not agree.
            Self::IntLabel => format!(
                "SELECT node_id, egress_port, count(*) AS updates, \
                   count(DISTINCT CAST(value AS BIGINT) / {interval}) AS intervals_updated, \
                   CAST({interval} AS BIGINT) AS interval_ns, \
                   max(value) AS last_label_ns, max(value - previous) AS max_gap_ns, \
                   max(received) AS last_received \
                 FROM events \
                 WHERE metric = 'int_label_port' AND node_id IS NOT NULL \
                   AND egress_port IS NOT NULL \
                 GROUP BY node_id, egress_port ORDER BY node_id, egress_port",
                interval = p.label_interval_ns.max(1)
            ),
            Self::IntLabelExports => "SELECT node_id, count(*) AS exports, \
                   sum(value) AS bytes FROM events \
                 WHERE metric = 'int_label_export' AND node_id IS NOT NULL \
                 GROUP BY node_id ORDER BY node_id"
                .to_string(),
        }
    }
}

fn ts() -> DataType {
    DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into()))
}

fn previous_paths_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("src_ip", DataType::FixedSizeBinary(16), true),
        Field::new("dst_ip", DataType::FixedSizeBinary(16), true),
        Field::new("src_port", DataType::UInt16, true),
        Field::new("dst_port", DataType::UInt16, true),
        Field::new("protocol", DataType::UInt8, true),
        Field::new(
            "path",
            DataType::List(Arc::new(Field::new("item", DataType::UInt32, true))),
            true,
        ),
        Field::new("path_id", DataType::UInt64, true),
    ]))
}

/// What the queries are planned with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    /// Queue occupancy above which a sample counts as congested.
    pub congestion_threshold: u64,
    pub window_ns: i64,
    /// INT-label's telemetry interval.
    pub label_interval_ns: i64,
}

/// One window's input.
#[derive(Debug, Default)]
pub struct WindowInput {
    pub start_ns: i64,
    pub end_ns: i64,
    pub partition: u32,
    pub reports: Vec<RecordBatch>,
    pub hops: Vec<RecordBatch>,
    pub events: Vec<RecordBatch>,
    /// The previous window's flows (5-tuple + path) of this partition, for path changes.
    pub previous_paths: Vec<RecordBatch>,
}

/// A table the queries read whose rows are swapped in per window: the physical plans are
/// built once over these and run again on every window (planning the seven queries took
/// 15 ms a window).
#[derive(Debug)]
struct WindowSlot {
    schema: SchemaRef,
    batches: RwLock<Vec<RecordBatch>>,
}

impl WindowSlot {
    fn new(schema: SchemaRef) -> Arc<Self> {
        Arc::new(Self {
            schema,
            batches: RwLock::default(),
        })
    }

    fn set(&self, batches: &[RecordBatch]) {
        if let Ok(mut b) = self.batches.write() {
            *b = batches.to_vec();
        }
    }

    fn register(self: &Arc<Self>, ctx: &SessionContext, name: &str) -> Result<()> {
        let part: Arc<dyn PartitionStream> = self.clone();
        let table = StreamingTable::try_new(self.schema.clone(), vec![part])?;
        ctx.register_table(name, Arc::new(table))?;
        Ok(())
    }
}

impl PartitionStream for WindowSlot {
    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    fn execute(&self, _ctx: Arc<TaskContext>) -> SendableRecordBatchStream {
        let batches = self.batches.read().map(|b| b.clone()).unwrap_or_default();
        // Without a projection this cannot fail (DataFusion 55 returns `Ok` always).
        match MemoryStream::try_new(batches, self.schema.clone(), None) {
            Ok(s) => Box::pin(s),
            Err(e) => unreachable!("an unprojected memory stream: {e}"),
        }
    }
}

/// The window-input tables, by the name the queries use.
#[derive(Debug)]
struct Inputs {
    reports: Arc<WindowSlot>,
    hops: Arc<WindowSlot>,
    events: Arc<WindowSlot>,
    previous_paths: Arc<WindowSlot>,
    /// The `flows` result of the same window (sources and destinations read it).
    window_flows: Arc<WindowSlot>,
    /// One row: `since`, the start of the window's last tenth ([`end_part`]).
    end_part: Arc<WindowSlot>,
}

/// The part of a window, at its end, whose samples say where a link stood as it closed.
const END_PART: i64 = 10;

fn end_part_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![Field::new("since", ts(), false)]))
}

/// The `end_part` table of window `w`: the time its last tenth begins.
fn end_part(w: &WindowInput) -> std::result::Result<RecordBatch, arrow_schema::ArrowError> {
    let since = w.end_ns - (w.end_ns - w.start_ns) / END_PART;
    RecordBatch::try_new(
        end_part_schema(),
        vec![Arc::new(
            TimestampNanosecondArray::from(vec![since]).with_timezone("UTC"),
        )],
    )
}

/// Runs the window queries. One per processing thread: the window-input tables are slots
/// filled for one window at a time.
pub struct Analytics {
    ctx: SessionContext,
    inputs: Inputs,
    /// Physical plans in [`Table::ALL`] order, built once.
    plans: Vec<Arc<dyn ExecutionPlan>>,
    schemas: Vec<(Table, SchemaRef)>,
    /// Cumulative time per query, in [`Table::ALL`] order (see [`crate::stages`]).
    times: std::sync::Mutex<[Duration; Table::ALL.len()]>,
}

impl std::fmt::Debug for Analytics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Analytics").finish_non_exhaustive()
    }
}

impl Analytics {
    /// Plans every query once, then runs them over empty input, which yields the result
    /// schemas.
    pub async fn new(params: Params) -> Result<Self> {
        // One partition: a window is one core's work (no repartitioning copies); lanes run
        // side by side instead. Operators work on 64 k-row batches (default 8 k): the
        // filtered hop rows reach the aggregates in fewer, larger batches, and the exact
        // percentile accumulators are sized once per batch over all their groups
        // (`kplane bench processor`: 0.96 → 1.15 M reports/s; 256 k rows: 1.12 M).
        let config = datafusion::prelude::SessionConfig::new()
            .with_target_partitions(1)
            .with_batch_size(65_536);
        let ctx = SessionContext::new_with_config(config);
        kplane_store::query::register_udfs(&ctx);
        let slot = |name: &str, schema: SchemaRef| -> Result<Arc<WindowSlot>> {
            let s = WindowSlot::new(schema);
            s.register(&ctx, name)?;
            Ok(s)
        };
        let reports = slot("reports", reports_schema())?;
        let hops = slot("hops", hops_schema())?;
        let events = slot("events", events_schema())?;
        let previous_paths = slot("previous_paths", previous_paths_schema())?;
        let end_part = slot("end_part", end_part_schema())?;
        let plan = |table: Table| {
            let sql = table.sql(&params);
            let ctx = &ctx;
            async move { ctx.sql(&sql).await?.create_physical_plan().await }
        };
        // `flows` first: its result, as stored, is what the next queries read as
        // `window_flows`.
        let mut plans = vec![plan(Table::Flows).await?];
        let inputs = Inputs {
            reports,
            hops,
            events,
            previous_paths,
            window_flows: slot("window_flows", window_schema(&plans[0].schema()))?,
            end_part,
        };
        for &table in &Table::ALL[1..] {
            plans.push(plan(table).await?);
        }
        let mut a = Self {
            ctx,
            inputs,
            plans,
            schemas: Vec::new(),
            times: Default::default(),
        };
        a.schemas = a
            .compute(&Table::ALL, &WindowInput::default())
            .await?
            .into_iter()
            .map(|(t, b)| (t, b.schema()))
            .collect();
        Ok(a)
    }

    /// Time spent in each query so far, in [`Table::ALL`] order.
    pub fn query_times(&self) -> [Duration; Table::ALL.len()] {
        self.times.lock().map(|t| *t).unwrap_or_default()
    }

    /// The result tables' schemas (the store records them: see `kplane_store::tables`).
    #[cfg(test)]
    fn schemas(&self) -> &[(Table, SchemaRef)] {
        &self.schemas
    }

    /// The results of `tables` for one window (tables with no rows are left out).
    pub async fn run(
        &self,
        tables: &[Table],
        w: &WindowInput,
    ) -> Result<Vec<(Table, RecordBatch)>> {
        let mut out = self.compute(tables, w).await?;
        out.retain(|(_, b)| b.num_rows() > 0);
        Ok(out)
    }

    /// Every one of `tables` for one window, empty results included.
    async fn compute(
        &self,
        tables: &[Table],
        w: &WindowInput,
    ) -> Result<Vec<(Table, RecordBatch)>> {
        self.inputs.reports.set(&w.reports);
        self.inputs.hops.set(&w.hops);
        self.inputs.events.set(&w.events);
        self.inputs.previous_paths.set(&w.previous_paths);
        self.inputs.window_flows.set(&[]);
        self.inputs.end_part.set(&[end_part(w)?]);
        // The slots keep this window's input until the next one replaces it (as the tables
        // registered per window did; releasing it at once measured 10 % slower: the
        // allocator returned the memory and faulted it in again).
        let mut out = Vec::with_capacity(tables.len());
        for &table in tables {
            let started = Instant::now();
            let b = self.query(table, w).await?;
            if let Ok(mut t) = self.times.lock() {
                StageTimes::lap(&mut t[table as usize], started);
            }
            if table == Table::Flows {
                self.inputs.window_flows.set(std::slice::from_ref(&b));
            }
            out.push((table, b));
        }
        Ok(out)
    }

    async fn query(&self, table: Table, w: &WindowInput) -> Result<RecordBatch> {
        // A plan keeps state from its last run (a hash join's build side, dynamic filters):
        // reset, it runs again on the slots' current rows.
        let plan = reset_plan_states(self.plans[table as usize].clone())?;
        let schema = plan.schema();
        let batches = collect(plan, self.ctx.task_ctx()).await?;
        let body = arrow_select::concat::concat_batches(&schema, &batches)?;
        Ok(with_window_columns(
            &body,
            w.start_ns,
            w.end_ns,
            w.partition,
        )?)
    }
}

/// The schema of a result whose query yields `body`: the window columns, then its own.
fn window_schema(body: &Schema) -> SchemaRef {
    let mut fields = vec![
        Field::new("window_start", ts(), false),
        Field::new("window_end", ts(), false),
        Field::new("partition", DataType::UInt32, false),
    ];
    fields.extend(body.fields().iter().map(|f| f.as_ref().clone()));
    Arc::new(Schema::new(fields))
}

/// `window_start`, `window_end`, `partition`, then `body`'s columns.
fn with_window_columns(
    body: &RecordBatch,
    start: i64,
    end: i64,
    partition: u32,
) -> std::result::Result<RecordBatch, arrow_schema::ArrowError> {
    let n = body.num_rows();
    let mut cols: Vec<ArrayRef> = vec![
        Arc::new(TimestampNanosecondArray::from(vec![start; n]).with_timezone("UTC")),
        Arc::new(TimestampNanosecondArray::from(vec![end; n]).with_timezone("UTC")),
        Arc::new(UInt32Array::from(vec![partition; n])),
    ];
    cols.extend(body.columns().iter().cloned());
    RecordBatch::try_new(window_schema(&body.schema()), cols)
}

/// The (5-tuple, path) columns of a `flows` result: the next window's `previous_paths`.
pub fn paths_of(flows: &RecordBatch) -> std::result::Result<RecordBatch, arrow_schema::ArrowError> {
    let cols = previous_paths_schema()
        .fields()
        .iter()
        .map(|f| {
            flows.column_by_name(f.name()).cloned().ok_or_else(|| {
                arrow_schema::ArrowError::SchemaError(format!("flows has no {}", f.name()))
            })
        })
        .collect::<std::result::Result<Vec<_>, _>>()?;
    RecordBatch::try_new(previous_paths_schema(), cols)
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn analytics() -> Analytics {
        Analytics::new(Params {
            congestion_threshold: 10,
            window_ns: 1_000_000_000,
            label_interval_ns: 100_000_000,
        })
        .await
        .unwrap()
    }

    /// The store records the window tables' schemas for its readers (`kplane-store`'s
    /// `schemas/`); the queries must produce exactly them. `KPLANE_BLESS=1` records them anew.
    #[tokio::test]
    async fn planned_schemas_are_the_stores() {
        let a = analytics().await;
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../crates/kplane-store/schemas");
        let recorded = kplane_store::tables::WINDOW_TABLES;
        assert_eq!(
            a.schemas().len(),
            recorded.len(),
            "one recorded schema per table"
        );
        if std::env::var_os("KPLANE_BLESS").is_some() {
            for (t, schema) in a.schemas() {
                let bytes = kplane_store::tables::encode_schema(schema).unwrap();
                std::fs::write(dir.join(format!("{}.arrow", t.name())), bytes).unwrap();
            }
            return;
        }
        for ((t, planned), (name, stored)) in a
            .schemas()
            .iter()
            .zip(kplane_store::tables::window_schemas())
        {
            assert_eq!(t.name(), *name, "tables in query order");
            assert_eq!(
                planned, stored,
                "{name}: the query's schema is not the store's; run `make bless` and review the change"
            );
        }
    }

    /// Single-key grouping packs and unpacks the keys: the result columns keep the input
    /// types (stored Parquet files of earlier windows must still merge).
    #[tokio::test]
    async fn result_key_columns_keep_their_input_types() {
        let a = analytics().await;
        let ty = |t: Table, c: &str| {
            let (_, s) = a.schemas().iter().find(|(x, _)| *x == t).unwrap();
            s.field_with_name(c).unwrap().data_type().clone()
        };
        assert_eq!(ty(Table::Queues, "node_id"), DataType::UInt32);
        assert_eq!(ty(Table::Queues, "egress_port"), DataType::UInt16);
        assert_eq!(ty(Table::Queues, "queue_id"), DataType::UInt8);
        assert_eq!(ty(Table::Queues, "congested_ns"), DataType::Int64);
        assert_eq!(ty(Table::Links, "node_id"), DataType::UInt32);
        assert_eq!(ty(Table::Links, "egress_port"), DataType::UInt16);
        assert_eq!(ty(Table::HopLatency, "node_id"), DataType::UInt32);
        assert_eq!(ty(Table::HopLatency, "p50_ns"), DataType::Float64);
        assert_eq!(ty(Table::HopLatency, "p99_ns"), DataType::Float64);
        assert_eq!(ty(Table::HopLatency, "samples"), DataType::Int64);
        assert_eq!(ty(Table::HopLatency, "max_ns"), DataType::UInt32);
    }

    /// `int_label` from the collector's `int_label_port` events: per port, its updates, the
    /// 100 ms intervals its labels fell in (by label time: node 1's arrive in one batch),
    /// the newest label time and the longest gap.
    #[tokio::test]
    async fn int_label_counts_each_ports_updates_intervals_and_gaps() {
        use arrow_array::{StringArray, UInt64Array};
        let a = analytics().await;
        const MS: i64 = 1_000_000;
        // (received, metric, node, port, label time, previous label time)
        type Row = (i64, &'static str, u32, u32, u64, Option<u64>);
        let rows: [Row; 6] = [
            (250 * MS, "int_label_port", 1, 2, 5 * MS as u64, None),
            (
                251 * MS,
                "int_label_port",
                1,
                2,
                60 * MS as u64,
                Some(5 * MS as u64),
            ),
            (
                252 * MS,
                "int_label_port",
                1,
                2,
                240 * MS as u64,
                Some(60 * MS as u64),
            ),
            (30 * MS, "int_label_port", 2, 1, 70, Some(40)),
            (40 * MS, "queue_occupancy", 3, 1, 9, None),
            (45 * MS, "int_label_export", 2, 0, 66, None),
        ];
        let events = RecordBatch::try_new(
            events_schema(),
            vec![
                Arc::new(
                    TimestampNanosecondArray::from(rows.map(|r| r.0).to_vec()).with_timezone("UTC"),
                ),
                Arc::new(StringArray::from(vec!["change"; 6])),
                Arc::new(StringArray::from(rows.map(|r| r.1).to_vec())),
                Arc::new(UInt32Array::from(rows.map(|r| r.2).to_vec())),
                Arc::new(UInt32Array::from(rows.map(|r| r.3).to_vec())),
                Arc::new(UInt64Array::from(rows.map(|r| r.4).to_vec())),
                Arc::new(UInt64Array::from(rows.map(|r| r.5).to_vec())),
            ],
        )
        .unwrap();
        let input = WindowInput {
            start_ns: 0,
            end_ns: 1_000 * MS,
            events: vec![events],
            ..WindowInput::default()
        };
        let out = a
            .run(&[Table::IntLabel, Table::IntLabelExports], &input)
            .await
            .unwrap();
        let b = &out[0].1;
        let col = |name: &str| -> Vec<Option<u64>> {
            let c = datafusion::arrow::compute::cast(
                b.column_by_name(name).unwrap(),
                &DataType::UInt64,
            )
            .unwrap();
            c.as_any()
                .downcast_ref::<UInt64Array>()
                .unwrap()
                .iter()
                .collect()
        };
        assert_eq!(col("node_id"), [Some(1), Some(2)]);
        assert_eq!(col("updates"), [Some(3), Some(1)]);
        assert_eq!(
            col("intervals_updated"),
            [Some(2), Some(1)],
            "0-100 ms and 200-300 ms"
        );
        assert_eq!(col("last_label_ns"), [Some(240 * MS as u64), Some(70)]);
        assert_eq!(col("max_gap_ns"), [Some(180 * MS as u64), Some(30)]);
        assert_eq!(col("interval_ns"), [Some(100_000_000); 2]);
        let exports = &out[1].1;
        assert_eq!(exports.num_rows(), 1);
        let bytes = datafusion::arrow::compute::cast(
            exports.column_by_name("bytes").unwrap(),
            &DataType::UInt64,
        )
        .unwrap();
        assert_eq!(
            bytes
                .as_any()
                .downcast_ref::<UInt64Array>()
                .unwrap()
                .value(0),
            66
        );
    }
}
