//! The processing loop: messages → (per lane) detectors and panes → closed windows →
//! DataFusion analytics → the store (then the checkpoint) → result topics → offset commits.
//!
//! A lane is one partition of one input topic: `int.reports` lanes feed the window analytics
//! and the flow/queue detectors, `int.events` lanes the event counts and report-loss bursts.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use arrow_array::RecordBatch;
use bytes::Bytes;
use kplane_bus::{
    Consumer, Message, PartitionEvent, Producer, Received, content_types, headers, topics,
};
use kplane_model::FlowHashKey;
use kplane_model::id_table::Evictions;

use crate::analytics::{Analytics, Table, WindowInput, paths_of};
use crate::config::{Config, EventTime};
use crate::detect::{Alert, Detector, alerts_batch};
use crate::error::ProcessorError;
use crate::frame::{event_frame, report_frame};
use crate::metrics::ProcessorMetrics;
use crate::panes::{ClosedWindow, Offered, Panes};
use crate::snapshot::{Reader, Writer};
use crate::stages::StageTimes;
use crate::store::{DetectorState, Immediate, LaneStore, WindowRows};
use crate::switch_view::{SwitchChange, ViewTally, changes_batch};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LaneKind {
    Reports,
    Events,
}

struct Lane {
    kind: LaneKind,
    topic: String,
    partition: u32,
    panes: Panes,
    store: LaneStore,
    detector: Detector,
    last_data: Instant,
    previous_paths: Vec<RecordBatch>,
    /// `previous_paths` as of the last commit, and that commit's window end: what a restart
    /// from it compares against, even if the state saved with a later, unfinished commit
    /// already holds newer paths.
    committed_paths: (i64, Vec<RecordBatch>),
    /// The last message the restored detector state includes: not checked again.
    detectors_through: i64,
    /// The detector's evictions per table as last counted in metrics.
    counted_evictions: [Evictions; 4],
    /// Alerts raised since the last commit (stored with it).
    pending_alerts: Vec<Alert>,
    /// Merged switch changes decided since the last commit (stored with it).
    pending_changes: Vec<SwitchChange>,
    /// The first message that raised either since the last commit: names their files.
    first_immediate_offset: i64,
    /// The window end the lane last told `int.windows` it is through (`kplane-lane-through-ns`).
    told_through: i64,
}

/// `reports-p3`, `events-p0`: the lane's file prefix and checkpoint log name.
pub fn lane_name(topic: &str, partition: u32) -> String {
    let short = topic.rsplit('.').next().unwrap_or(topic);
    format!("{short}-p{partition}")
}

/// Everything the loop needs besides its input.
pub struct Processor {
    cfg: Config,
    /// Where lanes write (`data-dir`: a directory or `s3://bucket/prefix`).
    store: kplane_store::Store,
    analytics: Analytics,
    rt: tokio::runtime::Runtime,
    metrics: ProcessorMetrics,
    results: Option<Arc<dyn Producer>>,
    lanes: HashMap<(String, u32), Lane>,
    /// Keys `flow_id` (kept in the store: see [`crate::store::flow_hash_key`]).
    flow_key: FlowHashKey,
    alert_sink: Option<AlertSink>,
    window_sink: Option<WindowSink>,
    /// Time per stage outside the queries (see [`Self::stage_times`]).
    stages: StageTimes,
}

/// Observes alerts as they are raised.
pub type AlertSink = Box<dyn Fn(&[Alert]) + Send>;
/// Observes each commit: (windows, latest arrival among their rows (ns), rows per table).
pub type WindowSink = Box<dyn Fn(usize, i64, &[(&'static str, RecordBatch)]) + Send>;

impl std::fmt::Debug for Processor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Processor").finish_non_exhaustive()
    }
}

impl Processor {
    /// `results`: where window results and alerts are published (none: store only).
    pub fn new(
        cfg: Config,
        metrics: ProcessorMetrics,
        results: Option<Arc<dyn Producer>>,
    ) -> Result<Self, ProcessorError> {
        crate::alloc::keep_freed_memory();
        let store = kplane_store::Store::open(&cfg.data_dir)?;
        let rt = tokio::runtime::Builder::new_current_thread().build()?;
        let analytics = rt.block_on(Analytics::new(crate::analytics::Params {
            congestion_threshold: cfg.thresholds.queue_occupancy,
            window_ns: cfg.window_ns(),
            label_interval_ns: cfg.int_label_interval.as_nanos() as i64,
        }))?;
        Ok(Self {
            flow_key: crate::store::flow_hash_key(&store)?,
            store,
            cfg,
            analytics,
            rt,
            metrics,
            results,
            lanes: HashMap::new(),
            alert_sink: None,
            window_sink: None,
            stages: StageTimes::default(),
        })
    }

    /// Sets the state-table metrics: entries across lanes, evictions since the last call.
    fn report_state(&mut self) {
        let mut entries: Vec<(&'static str, usize)> = Vec::new();
        for lane in self.lanes.values_mut() {
            let tables = lane.detector.tables();
            for ((table, n, evicted), last) in tables.into_iter().zip(&mut lane.counted_evictions) {
                match entries.iter_mut().find(|e| e.0 == table) {
                    Some(e) => e.1 += n,
                    None => entries.push((table, n)),
                }
                let before = std::mem::replace(last, evicted);
                self.metrics.state.evicted(table, before, evicted);
            }
        }
        for (table, n) in entries {
            self.metrics.state.entries(table, n);
        }
    }

    /// Cumulative time per stage since start.
    pub fn stage_times(&self) -> StageTimes {
        StageTimes {
            queries: self.analytics.query_times(),
            ..self.stages.clone()
        }
    }

    /// Calls `f` with every batch of alerts raised (benchmarks and tests observe with it).
    pub fn on_alerts(&mut self, f: AlertSink) {
        self.alert_sink = Some(f);
    }

    /// Calls `f` after every commit of window results.
    pub fn on_windows(&mut self, f: WindowSink) {
        self.window_sink = Some(f);
    }

    /// Consumes `source` until `stop`. On stop, open windows of a replayable source (Kafka)
    /// are not written — their messages are read again by whoever owns the partition next; an
    /// in-process bus is drained and every open window written, since nothing could replay it.
    pub fn run(
        &mut self,
        mut source: Box<dyn Consumer>,
        stop: &AtomicBool,
    ) -> Result<(), ProcessorError> {
        let mut last_lag = Instant::now();
        let mut last_commit = Instant::now();
        let mut last_any = Instant::now();
        let mut last_warned: Option<Instant> = None;
        while !stop.load(Ordering::Acquire) {
            let msg = match source.poll(Duration::from_millis(50)) {
                Ok(m) => m,
                // E.g. the topic does not exist yet because no collector has started:
                // counted, logged at most every 10 s, retried.
                Err(e) if e.is_retryable() => {
                    self.metrics.consume_errors.inc();
                    if last_warned.is_none_or(|t| t.elapsed() >= Duration::from_secs(10)) {
                        tracing::warn!(error = %e, "consume error; retrying");
                        last_warned = Some(Instant::now());
                    }
                    None
                }
                Err(e) => return Err(e.into()),
            };
            self.rebalance(source.partition_events())?;
            if let Some(m) = msg {
                last_any = Instant::now();
                self.handle(m);
            }
            let mut committed = false;
            let keys: Vec<(String, u32)> = self.lanes.keys().cloned().collect();
            for key in keys {
                let Some(lane) = self.lanes.get(&key) else {
                    continue;
                };
                // Idle only when nothing at all arrived for a while: a lane that merely looks
                // quiet while the consumer works through other lanes' backlog may still have
                // rows queued for the window it would close.
                let idle = last_any.elapsed() >= self.cfg.idle_close
                    && lane.last_data.elapsed() >= self.cfg.idle_close;
                if let Some((topic, partition, through)) = self.close_lane(&key, idle)? {
                    source.mark_durable(&topic, partition, through);
                    committed = true;
                }
            }
            if committed || last_commit.elapsed() >= Duration::from_millis(200) {
                commit(source.as_mut());
                last_commit = Instant::now();
            }
            self.metrics.open_panes.set(
                self.lanes
                    .values()
                    .map(|l| l.panes.held_panes() as i64)
                    .sum(),
            );
            self.report_state();
            if last_lag.elapsed() >= Duration::from_secs(5) {
                source.update_lag();
                last_lag = Instant::now();
            }
        }
        if !source.replayable() {
            loop {
                match source.poll(Duration::from_millis(100)) {
                    Ok(Some(m)) => self.handle(m),
                    Ok(None) => break,
                    Err(e) if e.is_retryable() => {
                        self.metrics.consume_errors.inc();
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            self.flush()?;
            commit(source.as_mut());
        }
        source.close();
        Ok(())
    }

    /// Closes every open window of every lane (the end of a finite input, e.g. a benchmark).
    pub fn flush(&mut self) -> Result<(), ProcessorError> {
        let keys: Vec<(String, u32)> = self.lanes.keys().cloned().collect();
        for key in keys {
            self.close_lane(&key, true)?;
        }
        Ok(())
    }

    /// Builds lanes for assigned partitions from their checkpoints; drops revoked ones.
    pub fn rebalance(&mut self, events: Vec<PartitionEvent>) -> Result<(), ProcessorError> {
        for event in events {
            match event {
                PartitionEvent::Assigned(ps) => {
                    for (topic, partition) in ps {
                        let kind = if topic == topics::EVENTS {
                            LaneKind::Events
                        } else {
                            LaneKind::Reports
                        };
                        let name = lane_name(&topic, partition);
                        let (store, resume) =
                            LaneStore::open(&self.store, &name, self.cfg.compaction())?;
                        let store = store.with_retention(self.cfg.retention());
                        let checkpoint = resume.checkpoint;
                        tracing::info!(lane = %name, ?checkpoint, "partition assigned");
                        self.metrics.torn_checkpoint_lines.inc_by(store.torn_lines);
                        let mut detector = Detector::new(
                            partition,
                            self.cfg.thresholds.clone(),
                            &self.cfg.state,
                            self.flow_key,
                        );
                        let (detectors_through, previous_paths) = match &resume.detectors {
                            Some(saved) => {
                                let paths = restore_lane_state(
                                    &mut detector,
                                    &saved.bytes,
                                    checkpoint.emitted_until_ns,
                                )
                                .map_err(|reason| ProcessorError::Corrupt {
                                        path: store.detectors_path(),
                                        reason: format!(
                                            "{reason}; remove the file to start the lane's detectors empty"
                                        ),
                                    })?;
                                (saved.through_offset, paths)
                            }
                            None => (-1, Vec::new()),
                        };
                        self.lanes.insert(
                            (topic.clone(), partition),
                            Lane {
                                kind,
                                topic,
                                partition,
                                panes: Panes::new(
                                    self.cfg.window_ns(),
                                    self.cfg.slide_ns(),
                                    self.cfg.lateness.as_nanos() as i64,
                                    checkpoint,
                                ),
                                store,
                                detector,
                                detectors_through,
                                last_data: Instant::now(),
                                committed_paths: (
                                    checkpoint.emitted_until_ns,
                                    previous_paths.clone(),
                                ),
                                previous_paths,
                                told_through: i64::MIN,
                                counted_evictions: Default::default(),
                                pending_alerts: Vec::new(),
                                pending_changes: Vec::new(),
                                first_immediate_offset: -1,
                            },
                        );
                    }
                }
                PartitionEvent::Revoked(ps) => {
                    for key in ps {
                        tracing::info!(topic = %key.0, partition = key.1, "partition revoked");
                        self.lanes.remove(&key);
                    }
                }
            }
        }
        self.metrics.partitions.set(self.lanes.len() as i64);
        Ok(())
    }

    /// Offers one message to its lane: detectors first (alerts go out at once), then panes.
    pub fn handle(&mut self, m: Received) {
        let key = (m.topic.clone(), m.partition);
        let Some(lane) = self.lanes.get(&key) else {
            // Not ours (a message delivered across a revocation): its owner reads it; counted.
            tracing::warn!(topic = %m.topic, partition = m.partition, offset = m.offset, "message of an unowned partition skipped");
            self.metrics.unowned.inc();
            return;
        };
        // How far the producer had got on the lane's clock: a quiet lane's windows close on it.
        let clock = match (lane.kind, self.cfg.event_time) {
            (LaneKind::Reports, EventTime::Report) => headers::REPORT_TIME_THROUGH,
            _ => headers::RECEIVED_THROUGH,
        };
        let through = m.header(clock).and_then(|v| v.parse::<i64>().ok());
        if m.payload.is_empty() {
            // A heartbeat (or an empty batch): nothing to decode, its offset is accounted for.
            if let Some(lane) = self.lanes.get_mut(&key) {
                let _ = lane.panes.offer(m.offset, &[]);
            }
        } else {
            let decoded = crate::input::batches(
                m.header(headers::CONTENT_TYPE),
                &m.payload,
                lane.kind == LaneKind::Reports,
            );
            match decoded {
                Ok(batches) => self.offer_batches(&key, m.offset, &batches),
                Err(e) => self.undecodable(&key, m.offset, &e.to_string()),
            }
        }
        if let (Some(t), Some(lane)) = (through, self.lanes.get_mut(&key)) {
            lane.panes.advance(t);
        }
    }

    fn undecodable(&mut self, key: &(String, u32), offset: i64, e: &str) {
        tracing::warn!(topic = %key.0, partition = key.1, offset, error = %e, "undecodable message skipped");
        self.metrics.undecodable.inc();
        if let Some(lane) = self.lanes.get_mut(key) {
            // Accounted for: the offset may be committed past it.
            let _ = lane.panes.offer(offset, &[]);
        }
    }

    /// Offers one message's decoded batches to the lane of `key` (see [`Self::handle`]).
    pub fn offer_batches(&mut self, key: &(String, u32), offset: i64, batches: &[RecordBatch]) {
        let Some(lane) = self.lanes.get_mut(key) else {
            self.metrics.unowned.inc();
            return;
        };
        lane.last_data = Instant::now();
        let report_clock = self.cfg.event_time == EventTime::Report;
        // A message the restored detector state already includes is not checked again. Without
        // saved state, a message read before the last checkpoint already raised its alerts
        // then: the detectors see it again (to rebuild state) but stay quiet.
        let detect = offset > lane.detectors_through;
        let replay = offset <= lane.panes.checkpoint().read_until;
        let mut alerts = Vec::new();
        let mut changes = Vec::new();
        let mut tally = ViewTally::default();
        let st = &mut self.stages;
        let outcome = (|| -> Result<Offered, String> {
            let mut offered = Offered::default();
            for b in batches {
                let t = Instant::now();
                let o = match lane.kind {
                    LaneKind::Reports => {
                        let f = report_frame(b, report_clock, &self.flow_key)
                            .map_err(|e| e.to_string())?;
                        let t = StageTimes::lap(&mut st.frame, t);
                        if detect {
                            lane.detector
                                .reports(&f.reports, &f.hops, &f.hop_offsets, &mut alerts)
                                .map_err(|e| e.to_string())?;
                        }
                        let t = StageTimes::lap(&mut st.detect, t);
                        let o = lane
                            .panes
                            .offer(
                                offset,
                                &[(&f.reports, f.event_ns()), (&f.hops, f.hop_event_ns())],
                            )
                            .map_err(|e| e.to_string())?;
                        StageTimes::lap(&mut st.panes, t);
                        o
                    }
                    LaneKind::Events => {
                        let (events, event_ns) = event_frame(b).map_err(|e| e.to_string())?;
                        let t = StageTimes::lap(&mut st.frame, t);
                        if detect {
                            lane.detector
                                .events(b, &mut alerts, &mut changes, &mut tally)
                                .map_err(|e| e.to_string())?;
                        }
                        let t = StageTimes::lap(&mut st.detect, t);
                        let o = lane
                            .panes
                            .offer(offset, &[(&events, &event_ns)])
                            .map_err(|e| e.to_string())?;
                        StageTimes::lap(&mut st.panes, t);
                        o
                    }
                };
                offered.merge(o);
            }
            Ok(offered)
        })();
        match outcome {
            Ok(o) => self.metrics.offered(o),
            Err(e) => return self.undecodable(key, offset, &e),
        }
        if !replay {
            self.metrics.switch_views(&tally);
        }
        if !replay && !changes.is_empty() {
            if lane.pending_alerts.is_empty() && lane.pending_changes.is_empty() {
                lane.first_immediate_offset = offset;
            }
            lane.pending_changes.extend(changes);
        }
        if replay || alerts.is_empty() {
            return;
        }
        let now = kplane_model::unix_time_ns() as i64;
        for a in &alerts {
            self.metrics.alert(a, now);
        }
        if let Some(sink) = &self.alert_sink {
            sink(&alerts);
        }
        if let Some(p) = &self.results {
            let mut payload = Vec::new();
            for a in &alerts {
                if serde_json::to_writer(&mut payload, a).is_ok() {
                    payload.push(b'\n');
                }
            }
            let msg = Message {
                topic: topics::ALERTS,
                partition: result_partition(p.as_ref(), topics::ALERTS, lane.partition),
                key: None,
                headers: vec![
                    (headers::CONTENT_TYPE, content_types::JSON_LINES.to_string()),
                    (headers::SCHEMA, "alerts/v1".to_string()),
                    (headers::RECORDS, alerts.len().to_string()),
                ],
                payload: Bytes::from(payload),
                timestamp_ns: now as u64,
            };
            if let Err(e) = p.send(msg) {
                self.metrics.publish_failures.inc();
                tracing::warn!(error = %e, "alerts not published (they are still stored)");
            }
        }
        if lane.pending_alerts.is_empty() && lane.pending_changes.is_empty() {
            lane.first_immediate_offset = offset;
        }
        lane.pending_alerts.extend(alerts);
    }

    /// Closes what the lane's watermark allows, runs the analytics, stores and publishes the
    /// results; returns (topic, partition, durable offset) when a checkpoint was written.
    pub fn close_lane(
        &mut self,
        key: &(String, u32),
        all: bool,
    ) -> Result<Option<(String, u32, i64)>, ProcessorError> {
        let Some(lane) = self.lanes.get_mut(key) else {
            return Ok(None);
        };
        let started = Instant::now();
        let closed = lane.panes.close(all);
        StageTimes::lap(&mut self.stages.panes, started);
        let Some((windows, checkpoint)) = closed else {
            self.tell_progress(key);
            return Ok(None);
        };
        let mut rows: Vec<WindowRows> = Vec::new();
        let n_windows = windows.len();
        let mut last_arrival = 0i64;
        for w in windows {
            last_arrival = last_arrival.max(latest_arrival(&w));
            let results = self.rt.block_on(run_window(&self.analytics, lane, w))?;
            rows.extend(results);
        }
        // What the detectors raised since the last commit, per table (none: no file).
        let alerts = std::mem::take(&mut lane.pending_alerts);
        let changes = std::mem::take(&mut lane.pending_changes);
        let immediate: Vec<Immediate> = [
            (
                kplane_store::tables::ALERTS,
                alerts.iter().map(|a| a.time_ns).min(),
                alerts_batch(&alerts)?,
            ),
            (
                kplane_store::tables::SWITCH_CHANGES,
                changes.iter().map(|c| c.time_ns).min(),
                changes_batch(&changes)?,
            ),
        ]
        .into_iter()
        .filter_map(|(table, time_ns, batch)| {
            Some(Immediate {
                table,
                time_ns: time_ns?,
                first_offset: lane.first_immediate_offset,
                batch,
            })
        })
        .collect();
        let published: Vec<(&'static str, RecordBatch)> =
            rows.iter().map(|(t, _, _, b)| (*t, b.clone())).collect();
        // Through every window the watermark passed, those without rows too.
        let through_ns = rows
            .iter()
            .map(|(_, _, end, _)| *end)
            .chain(lane.panes.watermark_window_end())
            .max()
            .unwrap_or(0);
        if !published.is_empty() {
            lane.told_through = lane.told_through.max(through_ns);
        }
        let store_before = lane.store.counts;
        let started = Instant::now();
        let latest = (checkpoint.emitted_until_ns, lane.previous_paths.clone());
        let detectors = DetectorState {
            through_offset: checkpoint.read_until,
            bytes: save_lane_state(&lane.detector, &latest, &lane.committed_paths)?,
        };
        lane.store
            .commit(rows, immediate, n_windows, checkpoint, Some(&detectors))?;
        lane.committed_paths = latest;
        StageTimes::lap(&mut self.stages.store, started);
        self.metrics.windows_written.inc_by(n_windows as u64);
        // Counted across lanes: what this commit added.
        self.metrics.add_store(&store_before, &lane.store.counts);
        let now = kplane_model::unix_time_ns() as i64;
        if n_windows > 0 && last_arrival > 0 {
            self.metrics
                .window_latency
                .observe((now - last_arrival).max(0) as f64 / 1e9);
        }
        for (table, batch) in &published {
            self.metrics.window_rows(table, batch);
        }
        if let Some(sink) = &self.window_sink {
            sink(n_windows, last_arrival, &published);
        }
        let partition = lane.partition;
        let (topic, through) = (lane.topic.clone(), checkpoint.through_offset);
        if let Some(p) = &self.results {
            publish_windows(
                p.as_ref(),
                (&topic, partition),
                through_ns,
                last_arrival,
                &published,
                &self.metrics,
            );
        }
        tracing::debug!(lane = %lane_name(&topic, partition), windows = n_windows, ?checkpoint, "committed");
        // Without results the lane says how far it is in a message of its own.
        self.tell_progress(key);
        Ok(Some((topic, partition, through)))
    }

    /// A lane whose watermark passed the end of windows it holds no rows for says so on
    /// `int.windows` (an empty message with `kplane-lane-through-ns`): its consumers complete
    /// those windows without waiting for it.
    fn tell_progress(&mut self, key: &(String, u32)) {
        let (Some(p), Some(lane)) = (&self.results, self.lanes.get_mut(key)) else {
            return;
        };
        let Some(end) = lane.panes.watermark_window_end() else {
            return;
        };
        if end <= lane.told_through {
            return;
        }
        lane.told_through = end;
        let msg = Message {
            topic: topics::WINDOWS,
            partition: result_partition(p.as_ref(), topics::WINDOWS, lane.partition),
            key: None,
            headers: vec![
                (headers::SCHEMA, LANE_PROGRESS_SCHEMA.to_string()),
                (headers::RECORDS, "0".to_string()),
                (headers::LANE, lane_name(&lane.topic, lane.partition)),
                (headers::LANE_THROUGH, end.to_string()),
            ],
            payload: Bytes::new(),
            timestamp_ns: kplane_model::unix_time_ns(),
        };
        if let Err(e) = p.send(msg) {
            self.metrics.publish_failures.inc();
            tracing::debug!(error = %e, "lane progress not published");
        }
    }
}

/// What a lane saves with each commit besides its windows: its detectors' state and the
/// paths of its last flows window (what `path_changed` compares against) as of this commit
/// and as of the commit before, each with its window end. The state is renamed into place
/// before the commit's checkpoint line is written; a process killed between the two restarts
/// from the previous line and recomputes this commit's windows, which must compare against
/// the paths of that line's last window, not this one's.
fn save_lane_state(
    detector: &Detector,
    latest: &(i64, Vec<RecordBatch>),
    before: &(i64, Vec<RecordBatch>),
) -> Result<Vec<u8>, ProcessorError> {
    let mut w = Writer::default();
    w.bytes(&detector.snapshot());
    w.bytes(&paths_ipc(&latest.1)?);
    w.i64(latest.0);
    w.i64(before.0);
    w.bytes(&paths_ipc(&before.1)?);
    Ok(w.0)
}

fn paths_ipc(paths: &[RecordBatch]) -> Result<Vec<u8>, ProcessorError> {
    let mut out = Vec::new();
    if let Some(first) = paths.first() {
        let mut ipc = arrow_ipc::writer::StreamWriter::try_new(&mut out, &first.schema())?;
        for b in paths {
            ipc.write(b)?;
        }
        ipc.finish()?;
    }
    Ok(out)
}

fn paths_from_ipc(bytes: &[u8]) -> Result<Vec<RecordBatch>, String> {
    if bytes.is_empty() {
        return Ok(Vec::new());
    }
    arrow_ipc::reader::StreamReader::try_new(std::io::Cursor::new(bytes), None)
        .and_then(|r| r.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("previous paths: {e}"))
}

/// Reads [`save_lane_state`]'s bytes back: restores the detector, returns the paths that
/// belong with the checkpoint the lane restarts from (its windows end at `emitted_until_ns`).
/// State saved before the paths carried their window end has the latest paths only.
fn restore_lane_state(
    detector: &mut Detector,
    bytes: &[u8],
    emitted_until_ns: i64,
) -> Result<Vec<RecordBatch>, String> {
    let mut r = Reader(bytes);
    detector
        .restore(r.bytes("the detectors")?)
        .map_err(|e| e.to_string())?;
    let latest = r.bytes("the previous paths")?;
    if r.is_empty() {
        return paths_from_ipc(latest);
    }
    let latest_through = r.i64("the previous paths' window end")?;
    let before_through = r.i64("the earlier paths' window end")?;
    let before = r.bytes("the earlier paths")?;
    if emitted_until_ns == before_through && emitted_until_ns != latest_through {
        paths_from_ipc(before)
    } else {
        paths_from_ipc(latest)
    }
}

/// The partition of a result topic a lane's messages go to: its input partition modulo the
/// topic's partitions (`result-partitions`).
fn result_partition(p: &dyn Producer, topic: &str, lane_partition: u32) -> u32 {
    lane_partition % p.partitions(topic).unwrap_or(1).max(1)
}

/// The schema of a lane's progress message on `int.windows` (no payload).
pub const LANE_PROGRESS_SCHEMA: &str = "lane-progress/v1";

/// The latest collector receive time in a window (for the arrival → result latency).
fn latest_arrival(w: &ClosedWindow) -> i64 {
    use arrow_array::cast::AsArray;
    use arrow_array::types::TimestampNanosecondType;
    w.tables
        .first()
        .into_iter()
        .flatten()
        .filter_map(|b| {
            let c = b.column_by_name(kplane_model::schema::col::RECEIVED)?;
            c.as_primitive_opt::<TimestampNanosecondType>()?
                .values()
                .iter()
                .copied()
                .max()
        })
        .max()
        .unwrap_or(0)
}

async fn run_window(
    analytics: &Analytics,
    lane: &mut Lane,
    w: ClosedWindow,
) -> Result<Vec<WindowRows>, ProcessorError> {
    let (start, end) = (w.start_ns, w.end_ns);
    let mut tables = w.tables.into_iter();
    let mut input = WindowInput {
        start_ns: start,
        end_ns: end,
        partition: lane.partition,
        ..WindowInput::default()
    };
    let which: &[Table] = match lane.kind {
        LaneKind::Reports => {
            input.reports = tables.next().unwrap_or_default();
            input.hops = tables.next().unwrap_or_default();
            input.previous_paths = std::mem::take(&mut lane.previous_paths);
            Table::REPORT_TABLES
        }
        LaneKind::Events => {
            input.events = tables.next().unwrap_or_default();
            Table::EVENT_TABLES
        }
    };
    let results = analytics.run(which, &input).await?;
    let mut out = Vec::with_capacity(results.len());
    let mut have_flows = false;
    for (table, batch) in results {
        if table == Table::Flows {
            lane.previous_paths = vec![paths_of(&batch)?];
            have_flows = true;
        }
        out.push((table.name(), start, end, batch));
    }
    if lane.kind == LaneKind::Reports && !have_flows {
        // No flow in this window: the next window compares against the last one seen.
        lane.previous_paths = input.previous_paths;
    }
    Ok(out)
}

/// Header of `int.windows` messages: the latest collector receive time (ns) among the rows of
/// the windows committed with this result — its freshness.
pub const LATEST_ARRIVAL: &str = "kplane-latest-arrival-ns";

/// Publishes a lane's commit: one message per result table; the last one also says through
/// which window end the lane is complete (`headers::LANE_THROUGH`).
fn publish_windows(
    p: &dyn Producer,
    lane: (&str, u32),
    through_ns: i64,
    last_arrival: i64,
    results: &[(&'static str, RecordBatch)],
    metrics: &ProcessorMetrics,
) {
    let (topic, partition) = lane;
    let out_partition = result_partition(p, topics::WINDOWS, partition);
    for (i, (table, batch)) in results.iter().enumerate() {
        let mut payload = Vec::new();
        let encoded = arrow_ipc::writer::StreamWriter::try_new(&mut payload, &batch.schema())
            .and_then(|mut w| {
                w.write(batch)?;
                w.finish()
            });
        if let Err(e) = encoded {
            tracing::warn!(error = %e, "window result not encoded");
            metrics.publish_failures.inc();
            continue;
        }
        let mut msg = Message {
            topic: topics::WINDOWS,
            partition: out_partition,
            key: None,
            headers: vec![
                (headers::CONTENT_TYPE, content_types::ARROW.to_string()),
                (headers::SCHEMA, format!("{table}/v1")),
                (headers::RECORDS, batch.num_rows().to_string()),
                (LATEST_ARRIVAL, last_arrival.to_string()),
                (headers::LANE, lane_name(topic, partition)),
            ],
            payload: Bytes::from(payload),
            timestamp_ns: kplane_model::unix_time_ns(),
        };
        if i + 1 == results.len() {
            msg.headers
                .push((headers::LANE_THROUGH, through_ns.to_string()));
        }
        if let Err(e) = p.send(msg) {
            metrics.publish_failures.inc();
            tracing::warn!(error = %e, table, "window result not published (it is stored)");
        }
    }
}

fn commit(source: &mut dyn Consumer) {
    if let Err(e) = source.commit() {
        tracing::warn!(error = %e, "offset commit failed; results stay exact, the next owner re-reads more");
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{Int64Array, RecordBatch};

    use super::*;

    fn paths(v: i64) -> Vec<RecordBatch> {
        vec![RecordBatch::try_from_iter([("p", Arc::new(Int64Array::from(vec![v])) as _)]).unwrap()]
    }

    fn detector() -> Detector {
        let cfg = Config::default();
        Detector::new(0, cfg.thresholds.clone(), &cfg.state, FlowHashKey::random())
    }

    #[test]
    fn a_restart_compares_against_the_paths_of_the_checkpoint_it_resumes_from() {
        // Saved with the commit whose windows end at 20; the commit before ended at 10.
        let bytes = save_lane_state(&detector(), &(20, paths(2)), &(10, paths(1))).unwrap();
        let restore = |emitted| restore_lane_state(&mut detector(), &bytes, emitted).unwrap();
        assert_eq!(restore(20), paths(2), "the commit's line was written");
        assert_eq!(
            restore(10),
            paths(1),
            "killed before the line: the commit's windows are recomputed against 10's paths"
        );
        // State of an older version (detectors, then the latest paths only).
        let mut w = Writer::default();
        w.bytes(&detector().snapshot());
        w.bytes(&paths_ipc(&paths(3)).unwrap());
        assert_eq!(
            restore_lane_state(&mut detector(), &w.0, 10).unwrap(),
            paths(3)
        );
    }
}
