//! Incidents live: the live views' episodes and anomalies correlated as they arrive
//! ([`kplane_model::incidents`]: the rules), served by the routes and sent to Alertmanager
//! and webhooks ([`notify`]). See `docs/incidents.md`.

pub mod config;
mod notify;
mod store;

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use kplane_model::results::Anomaly;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::sync::broadcast;

pub use config::IncidentsConfig;
pub use kplane_model::incidents::{Change, Incident, IncidentBook, News, RootKind};

use kplane_model::incidents::Episode;

/// Resolves quiet incidents every second, and writes the resolved ones to the store every
/// [`STORE_EVERY`], until `shutdown` (then writes what is left).
pub async fn tick_until(incidents: Incidents, shutdown: kplane_runtime::Shutdown) {
    let mut every = tokio::time::interval(std::time::Duration::from_secs(1));
    let mut ticks = 0u64;
    loop {
        tokio::select! {
            _ = every.tick() => {
                incidents.tick();
                ticks += 1;
                if ticks.is_multiple_of(STORE_EVERY.as_secs()) {
                    let i = incidents.clone();
                    let _ = tokio::task::spawn_blocking(move || i.flush_store()).await;
                }
            }
            () = shutdown.wait() => break,
        }
    }
    let _ = tokio::task::spawn_blocking(move || incidents.flush_store()).await;
}

/// How often resolved incidents are written to the store.
pub const STORE_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// The incidents, shared by the topic reader, the handlers and the sinks.
#[derive(Clone, Debug)]
pub struct Incidents {
    inner: Arc<Mutex<Inner>>,
    tx: broadcast::Sender<Arc<News>>,
    metrics: IncidentMetrics,
}

#[derive(Debug)]
struct Inner {
    book: IncidentBook,
    /// When the latest breach came (wall clock), and the hold.
    last_arrival: Instant,
    hold: std::time::Duration,
    sinks: Vec<notify::Queue>,
    /// Resolved incidents on their way to the store's `incidents` table.
    store: Option<store::IncidentStore>,
}

#[derive(Clone, Debug, Default)]
struct IncidentMetrics {
    opened: Counter,
    resolved: Counter,
    merged: Counter,
    open: Gauge,
    breaches: Counter,
    notifications: notify::Notifications,
    stored: Counter,
    store_errors: Counter,
    store_dropped: Counter,
}

impl Default for Incidents {
    fn default() -> Self {
        let cfg = IncidentsConfig::default();
        let (tx, _) = broadcast::channel(1_024);
        Self {
            inner: Arc::new(Mutex::new(Inner {
                book: IncidentBook::new(cfg.keep, cfg.hold),
                last_arrival: Instant::now(),
                hold: cfg.hold,
                sinks: Vec::new(),
                store: None,
            })),
            tx,
            metrics: IncidentMetrics::default(),
        }
    }
}

impl Incidents {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Applies the configuration's rules, starts its sinks and, with `store`, writes resolved
    /// incidents to the store at that root (the API's start).
    pub fn configure(&self, cfg: &IncidentsConfig, store: Option<kplane_store::Store>) {
        let sinks = notify::start(cfg, &self.metrics.notifications);
        let mut g = self.lock();
        g.book.set_rules(cfg.keep, cfg.hold);
        g.hold = cfg.hold;
        g.sinks = sinks;
        g.store = store.map(store::IncidentStore::new);
    }

    /// Writes the resolved incidents buffered for the store (every few seconds, and at
    /// shutdown).
    pub fn flush_store(&self) {
        let Some(mut store) = self.lock().store.take() else {
            return;
        };
        match store.flush() {
            Ok(n) => {
                self.metrics.stored.inc_by(n as u64);
            }
            Err(e) => {
                self.metrics.store_errors.inc();
                tracing::warn!(error = %e, "incidents not written to the store; will retry");
            }
        }
        self.lock().store = Some(store);
    }

    /// An alert episode started, changed or ended.
    pub fn episode(&self, e: &Episode) {
        self.record(|b| b.episode(e), true);
    }

    /// A knowledge anomaly started, changed or ended.
    pub fn anomaly(&self, a: &Anomaly) {
        self.record(|b| b.anomaly(a), true);
    }

    /// Resolves the quiet incidents once no breach has come for a whole hold of wall time
    /// (called every second): event time stands still when nothing comes, so the hold would
    /// never pass on it.
    pub fn tick(&self) {
        self.record(|b| b.resolve_quiet(), false);
    }

    /// Applies `f` to the book (`arrival`: a breach came) and hands its news on.
    fn record(&self, f: impl FnOnce(&mut IncidentBook) -> Vec<News>, arrival: bool) {
        let mut g = self.lock();
        if !arrival && g.last_arrival.elapsed() < g.hold {
            return;
        }
        if arrival {
            g.last_arrival = Instant::now();
        }
        let breaches = g.book.counts.breaches;
        let news = f(&mut g.book);
        self.metrics
            .breaches
            .inc_by(g.book.counts.breaches - breaches);
        self.metrics.open.set(g.book.open_count() as i64);
        let news: Vec<Arc<News>> = news.into_iter().map(Arc::new).collect();
        for n in &news {
            match n.change {
                Change::Open => self.metrics.opened.inc(),
                Change::Resolve => self.metrics.resolved.inc(),
                Change::Merge => self.metrics.merged.inc(),
                Change::Update => 0,
            };
            if n.change == Change::Resolve {
                let id = n.incident["id"].as_str().unwrap_or_default();
                let detail = g.book.get(id).map(Incident::detail);
                if let (Some(store), Some(detail)) = (g.store.as_mut(), detail) {
                    self.metrics.store_dropped.inc_by(store.add(detail) as u64);
                }
            }
            for s in &g.sinks {
                s.push(n.clone());
            }
        }
        drop(g);
        for n in news {
            // No subscriber is fine.
            let _ = self.tx.send(n);
        }
    }

    /// Reads the book.
    pub fn read<T>(&self, f: impl FnOnce(&IncidentBook) -> T) -> T {
        f(&self.lock().book)
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Arc<News>> {
        self.tx.subscribe()
    }

    /// `kplane_intent_api_incidents_*` and `kplane_intent_api_incident_notifications_total`.
    pub fn register(&self, r: &mut Registry) {
        let r = r.sub_registry_with_prefix("intent_api");
        let m = &self.metrics;
        r.register("incidents_opened", "Incidents opened", m.opened.clone());
        r.register(
            "incidents_resolved",
            "Incidents resolved",
            m.resolved.clone(),
        );
        r.register(
            "incidents_merged",
            "Incidents merged into another (an address incident reaching their root)",
            m.merged.clone(),
        );
        r.register("incidents_open", "Incidents open now", m.open.clone());
        r.register(
            "incident_breaches",
            "Breaches (episode and anomaly changes) correlated into incidents",
            m.breaches.clone(),
        );
        r.register(
            "incidents_stored",
            "Resolved incidents written to the store's incidents table",
            m.stored.clone(),
        );
        r.register(
            "incidents_store_errors",
            "Writes of the incidents table that failed (retried at the next)",
            m.store_errors.clone(),
        );
        r.register(
            "incidents_store_dropped",
            "Resolved incidents dropped unwritten while the store kept failing",
            m.store_dropped.clone(),
        );
        r.register(
            "incident_notifications",
            "Incident notifications by sink and outcome (sent, failed after every attempt, \
             dropped at a full queue)",
            m.notifications.clone(),
        );
    }
}
