//! One pipeline per worker thread: datagram → records → loss accounting → event detection →
//! partition → batches. Counters are kept locally and added to Prometheus after each receive
//! batch (`flush_counts`), the gauges and tables at each tick (`flush_metrics`).

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, RwLock};

use kplane_model::{Detector, EventKind, EventRow, FlowKey, Metric, ReportFormat, ReportRecord};
use kplane_wire::{
    DecodeOptions, Decoded, Decoder, RecordMeta, RecordSink, Start, WireError, decode_frame,
};

use crate::config::Config;
use kplane_model::id_table::Evictions;

use crate::detect::{Detection, TableState};
use crate::label_db::{Coverage, IntervalCoverage, LabelDb, is_label_export};
use crate::loss::{LossTracker, Lost, SeqOutcome};
use crate::metrics::{
    CollectorMetrics, EventLabels, FormatLabel, NodeLabel, ReasonLabel, ResultLabel, StateLabel,
};
use crate::partition::{Partitioner, partition_of, partition_of_switch};
use crate::publish::Publisher;
use crate::watchlist::{Rule, Watchlist};

/// The watchlist shared with the admin API: a version and the current table.
#[derive(Clone, Debug, Default)]
pub struct SharedWatchlist(Arc<RwLock<(u64, Arc<Watchlist>)>>);

impl SharedWatchlist {
    pub fn new(rules: Vec<Rule>) -> Self {
        Self(Arc::new(RwLock::new((0, Arc::new(Watchlist::new(rules))))))
    }

    /// Replaces the table (the pipeline picks it up at its next batch).
    pub fn replace(&self, rules: Vec<Rule>) {
        let mut g = self
            .0
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        g.0 += 1;
        g.1 = Arc::new(Watchlist::new(rules));
    }

    pub fn current(&self) -> (u64, Arc<Watchlist>) {
        let g = self
            .0
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        (g.0, g.1.clone())
    }
}

/// Counts since the last `flush_metrics`.
#[derive(Debug, Default)]
struct Local {
    datagrams: u64,
    bytes: u64,
    truncated: u64,
    decoded: [u64; ReportFormat::ALL.len() + 1],
    malformed: [u64; WireError::REASONS.len()],
    events: [u64; EventKind::ALL.len()],
    lost: Vec<(u32, u64)>,
}

fn format_index(f: ReportFormat) -> usize {
    ReportFormat::ALL
        .iter()
        .position(|x| *x == f)
        .unwrap_or(ReportFormat::ALL.len())
}

/// What happens to records once decoded.
#[derive(Debug)]
struct Core {
    loss: LossTracker,
    detect: Detection,
    shared: SharedWatchlist,
    watchlist: (u64, Arc<Watchlist>),
    publisher: Publisher,
    partitions: u32,
    partitioner: Partitioner,
    publish_reports: bool,
    metrics: CollectorMetrics,
    node_labels: HashSet<u32>,
    node_label_limit: usize,
    local: Local,
    last_loss: crate::loss::LossCounters,
    /// The partitioner's hot sources and spread records at the last metrics flush.
    last_hot: (usize, u64),
    /// Evictions per [`Core::state_tables`] entry at the last metrics flush.
    last_evictions: Vec<Evictions>,
    /// Newest receive time seen (the clock of loss expiry in replays).
    pub now_ns: u64,
    /// The flow hash of the record the decoder is decoding, from its hint
    /// ([`RecordSink::flow`]: the next record is that flow's).
    early: Option<u64>,
    /// INT-label's database and coverage rate.
    labels: LabelDb,
    coverage: Coverage,
}

impl Core {
    fn state_tables(&self) -> Vec<TableState> {
        let mut tables = self.detect.tables().to_vec();
        tables.push(TableState {
            table: "loss-nodes",
            entries: self.loss.nodes(),
            evicted: self.loss.evictions(),
        });
        tables
    }
}

/// A closed telemetry interval into the coverage metrics.
fn closed_interval(m: &CollectorMetrics, i: IntervalCoverage) {
    m.int_label_intervals.inc();
    m.int_label_coverage.set(i.ratio());
    for (state, n) in [("updated", i.updated), ("known", i.known)] {
        m.int_label_port_intervals
            .get_or_create(&StateLabel { state })
            .inc_by(n as u64);
    }
}

fn source_of(rec: &ReportRecord) -> IpAddr {
    rec.flow
        .map(|f| f.src_ip)
        .or(rec.envelope.exporter.map(|e| e.ip()))
        .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED))
}

impl RecordSink for Core {
    #[inline]
    fn flow(&mut self, flow: &FlowKey) {
        let hash = self.detect.flow_key_hash(flow);
        self.detect.prefetch(Some(hash));
        self.early = Some(hash);
    }

    #[inline]
    fn record(&mut self, rec: &ReportRecord) {
        Core::record(self, rec);
    }
}

impl Core {
    /// An INT-label export: Algo. 4's database takes its items; each that updated a port is
    /// an `int_label_port` event (partitioned by its switch) and counts in the coverage of
    /// the telemetry interval it arrived in.
    fn label_export(&mut self, rec: &ReportRecord) {
        let m = &self.metrics;
        let bytes = 2 + 32 * rec.hops.len() as u64;
        m.int_label_exports.inc();
        m.int_label_bytes.inc_by(bytes);
        let received = rec.envelope.received_ns;
        // The export itself: its bytes, by the exporting switch (INT-label's bandwidth).
        if let Some(node) = rec.envelope.node_id {
            self.local.events[EventKind::Report as usize] += 1;
            self.publisher.event(
                partition_of_switch(node, self.partitions),
                &EventRow {
                    received_ns: received,
                    kind: EventKind::Report,
                    metric: Metric::IntLabelExport,
                    detector: Detector::IntLabel,
                    flow: rec.flow,
                    node_id: Some(node),
                    queue_id: None,
                    egress_port: None,
                    hw_id: Some(rec.envelope.hw_id),
                    value: Some(bytes),
                    previous: None,
                    threshold: None,
                    path: &[],
                    exporter: rec.envelope.exporter,
                },
            );
        }
        let (publisher, local, coverage, partitions) = (
            &mut self.publisher,
            &mut self.local,
            &mut self.coverage,
            self.partitions,
        );
        let applied = self.labels.apply(rec, |u| {
            let kind = if u.previous_ns.is_some() {
                EventKind::Change
            } else {
                EventKind::New
            };
            local.events[kind as usize] += 1;
            publisher.event(
                partition_of_switch(u.node, partitions),
                &EventRow {
                    received_ns: received,
                    kind,
                    metric: Metric::IntLabelPort,
                    detector: Detector::IntLabel,
                    flow: rec.flow,
                    node_id: Some(u.node),
                    queue_id: None,
                    egress_port: Some(u.port),
                    hw_id: None,
                    value: Some(u.label_ns),
                    previous: u.previous_ns,
                    threshold: None,
                    path: &[],
                    exporter: rec.envelope.exporter,
                },
            );
            coverage.updated((u.node, u.port), received, |i| {
                closed_interval(&self.metrics, i)
            });
        });
        let stale = rec.hops.len() - applied;
        for (result, n) in [("applied", applied), ("stale", stale)] {
            if n > 0 {
                m.int_label_items
                    .get_or_create(&ResultLabel { result })
                    .inc_by(n as u64);
            }
        }
    }

    fn lost_event(&mut self, l: Lost, kind: EventKind, exporter: Option<SocketAddr>) {
        let partition = partition_of(
            exporter.map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |e| e.ip()),
            self.partitions,
        );
        self.local.events[kind as usize] += 1;
        if kind == EventKind::Loss {
            self.local.lost.push((l.node_id, l.count));
        }
        self.publisher.event(
            partition,
            &EventRow {
                received_ns: self.now_ns,
                kind,
                metric: Metric::ReportLoss,
                detector: Detector::Sequence,
                flow: None,
                node_id: Some(l.node_id),
                queue_id: None,
                egress_port: None,
                hw_id: Some(l.hw_id),
                value: Some(l.count),
                previous: None,
                threshold: None,
                path: &[],
                exporter,
            },
        );
    }

    fn record(&mut self, rec: &ReportRecord) {
        // The decoder's flow hint started loading the flow's state before the hops were
        // decoded; without it (other formats) the load starts here, under loss accounting.
        let flow_hash = match self.early.take() {
            Some(hash) => {
                debug_assert_eq!(
                    self.detect.flow_hash(rec),
                    Some(hash),
                    "hint of another record"
                );
                Some(hash)
            }
            None => {
                let hash = self.detect.flow_hash(rec);
                self.detect.prefetch(hash);
                hash
            }
        };
        self.local.decoded[format_index(rec.envelope.format)] += 1;
        self.now_ns = self.now_ns.max(rec.envelope.received_ns);
        if is_label_export(rec) {
            self.label_export(rec);
        }
        self.publisher
            .processed(rec.envelope.timestamp_ns, rec.envelope.received_ns);
        let env = &rec.envelope;
        if let (Some(node), Some(seq)) = (env.node_id, env.sequence) {
            let bits = if env.format == ReportFormat::TelemetryReportV20 {
                22
            } else {
                32
            };
            let mut lost = Vec::new();
            let outcome = self
                .loss
                .observe(node, env.hw_id, seq, bits, env.received_ns, |l| {
                    lost.push(l)
                });
            for l in lost {
                self.lost_event(l, EventKind::Loss, env.exporter);
            }
            if outcome == SeqOutcome::Reset {
                let l = Lost {
                    node_id: node,
                    hw_id: env.hw_id,
                    count: 0,
                };
                self.lost_event(l, EventKind::Reset, env.exporter);
            }
        }
        // The partition is needed only for what is published: most reports publish nothing.
        let source = source_of(rec);
        let partitions = self.partitions;
        self.partitioner.observe(source, env.received_ns);
        let partitioner = &mut self.partitioner;
        let mut partition = None;
        let mut partition_of_rec =
            || *partition.get_or_insert_with(|| partitioner.partition(source, rec.flow.as_ref()));
        let (publisher, local) = (&mut self.publisher, &mut self.local);
        self.detect
            .process_hashed(rec, flow_hash, &self.watchlist.1, |e| {
                local.events[e.kind as usize] += 1;
                let partition = match e.node_id {
                    Some(node) if e.metric.of_switch() => partition_of_switch(node, partitions),
                    _ => partition_of_rec(),
                };
                publisher.event(partition, e);
            });
        if self.publish_reports {
            self.publisher.report(partition_of_rec(), rec);
        }
    }

    fn refresh_watchlist(&mut self) {
        let current = self.shared.current();
        if current.0 != self.watchlist.0 {
            self.watchlist = current;
            self.detect.reset_algorithms();
            tracing::info!(
                version = self.watchlist.0,
                "watchlist replaced; per-flow algorithm state reset"
            );
        }
    }
}

/// Decoder plus everything after it.
#[derive(Debug)]
pub struct Pipeline {
    decoder: Decoder,
    frame_opts: DecodeOptions,
    record: ReportRecord,
    core: Core,
}

impl Pipeline {
    pub fn new(
        cfg: &Config,
        publisher: Publisher,
        metrics: CollectorMetrics,
        watchlist: SharedWatchlist,
    ) -> Self {
        let opts = cfg.decode.options();
        let current = watchlist.current();
        Self {
            decoder: Decoder::new(opts.clone()),
            frame_opts: opts,
            record: ReportRecord::default(),
            core: Core {
                loss: LossTracker::new(
                    cfg.loss.reorder_window,
                    cfg.loss.reset_distance,
                    cfg.loss.max_wait.as_nanos() as u64,
                    cfg.state.nodes,
                ),
                detect: Detection::new(cfg.events.clone(), &cfg.state),
                shared: watchlist,
                watchlist: current,
                publisher,
                partitions: cfg.partitions.max(1),
                partitioner: Partitioner::new(cfg.partitions, &cfg.hot_sources),
                publish_reports: cfg.publish_reports,
                metrics,
                node_labels: HashSet::new(),
                node_label_limit: cfg.loss.node_label_limit,
                local: Local::default(),
                last_loss: Default::default(),
                last_hot: (0, 0),
                last_evictions: Vec::new(),
                now_ns: 0,
                early: None,
                labels: LabelDb::default(),
                coverage: Coverage::new(
                    cfg.int_label.interval.as_nanos() as u64,
                    cfg.int_label.known_for.as_nanos() as u64,
                ),
            },
        }
    }

    /// One UDP datagram carrying a Telemetry Report.
    pub fn datagram(
        &mut self,
        payload: &[u8],
        exporter: SocketAddr,
        received_ns: u64,
        truncated: bool,
    ) {
        let local = &mut self.core.local;
        local.datagrams += 1;
        local.bytes += payload.len() as u64;
        if truncated {
            // Cut by max-datagram: decoding it would misread lengths. Counted as malformed
            // with reason "truncated" (REASONS[0]) and on its own counter.
            local.truncated += 1;
            local.malformed[0] += 1;
            return;
        }
        let meta = RecordMeta {
            exporter: Some(exporter),
            received_ns,
        };
        // A hint never outlives its datagram.
        self.core.early = None;
        let outcome = self.decoder.decode_report_to(payload, meta, &mut self.core);
        if let Some(e) = outcome.error {
            let i = WireError::REASONS
                .iter()
                .position(|r| *r == e.reason())
                .unwrap_or(0);
            self.core.local.malformed[i] += 1;
            tracing::trace!(%exporter, error = %e, "malformed report");
        }
    }

    /// One captured frame (pcap replay): reports in it are processed like datagrams.
    pub fn frame(&mut self, data: &[u8], start: Start, ts_ns: u64) {
        let local = &mut self.core.local;
        local.datagrams += 1;
        local.bytes += data.len() as u64;
        match decode_frame(data, start, &self.frame_opts) {
            Ok(d @ Decoded::Report { .. }) => {
                let exporter = match &d {
                    Decoded::Report { outer, .. } => outer
                        .ip
                        .zip(outer.l4)
                        .map(|(ip, l4)| SocketAddr::new(ip.src(), l4.ports().0)),
                    Decoded::Packet(_) => None,
                };
                let meta = RecordMeta {
                    exporter,
                    received_ns: ts_ns,
                };
                let core = &mut self.core;
                let o = d.for_each_record(meta, &mut self.record, |r| core.record(r));
                if let Some(e) = o.error {
                    let i = WireError::REASONS
                        .iter()
                        .position(|r| *r == e.reason())
                        .unwrap_or(0);
                    self.core.local.malformed[i] += 1;
                }
            }
            Ok(Decoded::Packet(_)) => self.core.metrics.drop("decode", "not_a_report", 1),
            Err(e) => {
                let i = WireError::REASONS
                    .iter()
                    .position(|r| *r == e.reason())
                    .unwrap_or(0);
                self.core.local.malformed[i] += 1;
            }
        }
    }

    /// A capture frame of a link type the decoder does not read.
    pub fn unsupported_link(&mut self) {
        self.core.local.datagrams += 1;
        self.core.metrics.drop("decode", "unsupported_link_type", 1);
    }

    /// Periodic work: watchlist updates, gaps that waited too long, lingering batches.
    pub fn tick(&mut self, now_ns: u64) {
        self.core.refresh_watchlist();
        let now = now_ns.max(self.core.now_ns);
        let mut lost = Vec::new();
        self.core.loss.flush(now, false, |l| lost.push(l));
        for l in lost {
            self.core.lost_event(l, EventKind::Loss, None);
        }
        let metrics = &self.core.metrics;
        self.core
            .coverage
            .tick(now, |i| closed_interval(metrics, i));
        metrics
            .int_label_ports_known
            .set(self.core.coverage.known() as i64);
        self.core.publisher.flush_due(false);
        self.flush_metrics();
    }

    /// Shutdown: every open gap is lost, every batch is published.
    pub fn finish(&mut self) {
        let mut lost = Vec::new();
        let now = self.core.now_ns;
        self.core.loss.flush(now, true, |l| lost.push(l));
        for l in lost {
            self.core.lost_event(l, EventKind::Loss, None);
        }
        self.core.publisher.flush_due(true);
        self.flush_metrics();
    }

    /// Adds what the datagrams taken since the last flush came to — received, decoded,
    /// malformed, events, losses — to Prometheus, together: called after each receive batch,
    /// so that a sender pacing itself by what the collector has taken (`kplane eval`'s
    /// emulator) waits for a batch, not for the next tick, and a reader who sees a datagram
    /// counted sees its outcome too. The gauges and tables follow at the tick
    /// ([`Self::flush_metrics`]).
    pub fn flush_counts(&mut self) {
        let c = &mut self.core;
        let m = &c.metrics;
        let l = std::mem::take(&mut c.local);
        m.datagrams.inc_by(l.datagrams);
        m.received_bytes.inc_by(l.bytes);
        m.truncated.inc_by(l.truncated);
        for (i, n) in l.decoded.iter().enumerate().filter(|(_, n)| **n > 0) {
            let format = ReportFormat::ALL.get(i).map_or("unknown", |f| f.as_str());
            m.reports_decoded
                .get_or_create(&FormatLabel { format })
                .inc_by(*n);
        }
        for (i, n) in l.malformed.iter().enumerate().filter(|(_, n)| **n > 0) {
            let reason = WireError::REASONS[i];
            m.malformed
                .get_or_create(&ReasonLabel { reason })
                .inc_by(*n);
        }
        for (i, n) in l.events.iter().enumerate().filter(|(_, n)| **n > 0) {
            let kind = EventKind::ALL[i].as_str();
            m.events.get_or_create(&EventLabels { kind }).inc_by(*n);
        }
        for (node, n) in l.lost {
            let label = if c.node_labels.contains(&node) || c.node_labels.len() < c.node_label_limit
            {
                c.node_labels.insert(node);
                node.to_string()
            } else {
                "other".to_string()
            };
            m.reports_lost
                .get_or_create(&NodeLabel { node: label })
                .inc_by(n);
        }
        let now = c.loss.counters;
        m.reports_late.inc_by(now.late - c.last_loss.late);
        m.reports_too_late
            .inc_by(now.too_late - c.last_loss.too_late);
        m.reports_duplicate
            .inc_by(now.duplicates - c.last_loss.duplicates);
        m.sequence_resets.inc_by(now.resets - c.last_loss.resets);
        c.last_loss = now;
    }

    /// Adds the local counts ([`Self::flush_counts`]) and the gauges and tables to Prometheus.
    pub fn flush_metrics(&mut self) {
        self.flush_counts();
        let c = &mut self.core;
        let m = &c.metrics;
        m.metric_keys.set(c.detect.keys() as i64);
        // Each pipeline adds its own change: the gauge is the sum over pipelines.
        let hot = (c.partitioner.hot_sources(), c.partitioner.spread_records);
        m.hot_sources.inc_by(hot.0 as i64 - c.last_hot.0 as i64);
        m.hot_source_records.inc_by(hot.1 - c.last_hot.1);
        c.last_hot = hot;
        m.sequence_streams.set(c.loss.streams() as i64);
        let tables = c.state_tables();
        c.last_evictions.resize(tables.len(), Evictions::default());
        for (t, last) in tables.into_iter().zip(&mut c.last_evictions) {
            m.state.entries(t.table, t.entries);
            m.state
                .evicted(t.table, std::mem::replace(last, t.evicted), t.evicted);
        }
    }

    /// Entries and evictions of every table of detection state.
    pub fn state_tables(&self) -> Vec<TableState> {
        self.core.state_tables()
    }

    /// Records published so far.
    pub fn published_records(&self) -> u64 {
        self.core.publisher.published_records
    }

    /// Tracked metric keys and the bytes their table holds.
    pub fn key_footprint(&self) -> (usize, usize) {
        (self.core.detect.keys(), self.core.detect.key_table_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batchs_datagrams_and_what_they_came_to_are_counted_before_the_tick_and_only_once() {
        let cfg = Config::default();
        let metrics = CollectorMetrics::default();
        let publisher = Publisher::new(
            Arc::new(crate::embedded_bus(&cfg)),
            metrics.clone(),
            1,
            cfg.encoding,
            cfg.batch_size,
            cfg.linger,
            false,
            "test".into(),
        );
        let mut p = Pipeline::new(&cfg, publisher, metrics.clone(), SharedWatchlist::default());
        let exporter: SocketAddr = "127.0.0.1:9".parse().expect("an address");
        let malformed = || -> u64 {
            WireError::REASONS
                .iter()
                .map(|&reason| {
                    metrics
                        .malformed
                        .get_or_create(&ReasonLabel { reason })
                        .get()
                })
                .sum()
        };
        for _ in 0..3 {
            p.datagram(b"not a report", exporter, 1, false);
        }
        assert_eq!(metrics.datagrams.get(), 0, "nothing flushed yet");
        p.flush_counts();
        assert_eq!((metrics.datagrams.get(), malformed()), (3, 3));
        p.datagram(b"not a report", exporter, 2, false);
        p.flush_metrics();
        assert_eq!((metrics.datagrams.get(), malformed()), (4, 4));
        assert_eq!(metrics.received_bytes.get(), 4 * 12);
    }
}
