//! Where incidents are sent: one delivery thread per configured sink, each behind a bounded
//! queue (a full queue drops the news and counts it), with retries and backoff. A sink is a
//! module here registered in [`SINKS`].

mod alertmanager;
mod webhook;

use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::time::{Duration, Instant};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use super::News;
use super::config::{IncidentsConfig, Url};

/// A notification target.
pub trait Sink: Send + std::fmt::Debug {
    /// The request bodies (JSON, POSTed to the sink's URL) that deliver `news`, each with how
    /// many of the news it carries.
    fn bodies(&mut self, news: &[Arc<News>]) -> Vec<(String, u64)>;
    /// What to send again when nothing new came for a while (Alertmanager forgets an alert
    /// it has not heard of within its `resolve_timeout`).
    fn refresh(&mut self) -> Option<String> {
        None
    }
}

/// A sink's name, how it reads its URL from the configuration, and how it is made.
pub struct SinkKind {
    pub name: &'static str,
    pub url: fn(&IncidentsConfig) -> &str,
    /// Appended to the configured URL.
    pub path: &'static str,
    pub make: fn(&IncidentsConfig) -> Box<dyn Sink>,
}

/// Every sink kplane can send incidents to.
pub const SINKS: &[SinkKind] = &[
    SinkKind {
        name: "alertmanager",
        url: |c| &c.alertmanager,
        path: "/api/v2/alerts",
        make: alertmanager::make,
    },
    SinkKind {
        name: "webhook",
        url: |c| &c.webhook,
        path: "",
        make: webhook::make,
    },
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Outcome {
    pub sink: String,
    /// `sent`, `failed` (after every attempt) or `dropped` (queue full).
    pub outcome: String,
}

/// `kplane_intent_api_incident_notifications_total{sink, outcome}`: what became of each
/// incident change handed to a sink (Alertmanager's periodic re-sends are not changes).
pub type Notifications = Family<Outcome, Counter>;

/// The queue into one sink's delivery thread.
#[derive(Clone, Debug)]
pub struct Queue {
    name: &'static str,
    tx: SyncSender<Arc<News>>,
    counts: Notifications,
}

impl Queue {
    /// Hands `news` to the sink; when its queue is full the news is dropped and counted.
    pub fn push(&self, news: Arc<News>) {
        if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) = self.tx.try_send(news) {
            count(&self.counts, self.name, "dropped", 1);
        }
    }
}

fn count(c: &Notifications, sink: &str, outcome: &str, news: u64) {
    c.get_or_create(&Outcome {
        sink: sink.into(),
        outcome: outcome.into(),
    })
    .inc_by(news);
}

/// Starts a delivery thread for every sink whose URL is set; they end when the queues are
/// dropped.
pub fn start(cfg: &IncidentsConfig, counts: &Notifications) -> Vec<Queue> {
    let mut queues = Vec::new();
    for kind in SINKS {
        let Ok(Some(url)) = Url::parse((kind.url)(cfg)) else {
            continue;
        };
        let (tx, rx) = std::sync::mpsc::sync_channel(cfg.queue.max(1));
        let sink = (kind.make)(cfg);
        let delivery = Delivery {
            name: kind.name,
            url: url.join(kind.path),
            attempts: cfg.attempts.max(1),
            timeout: cfg.timeout,
            refresh: cfg.resend,
            counts: counts.clone(),
        };
        std::thread::Builder::new()
            .name(format!("incidents-{}", kind.name))
            .spawn(move || delivery.run(sink, rx))
            .expect("spawn a notification thread");
        tracing::info!(
            sink = kind.name,
            url = (kind.url)(cfg),
            "incidents are sent"
        );
        queues.push(Queue {
            name: kind.name,
            tx,
            counts: counts.clone(),
        });
    }
    queues
}

struct Delivery {
    name: &'static str,
    url: Url,
    attempts: u32,
    timeout: Duration,
    refresh: Duration,
    counts: Notifications,
}

impl Delivery {
    fn run(self, mut sink: Box<dyn Sink>, rx: Receiver<Arc<News>>) {
        let mut refreshed = Instant::now();
        loop {
            let first = match rx.recv_timeout(self.refresh) {
                Ok(n) => n,
                Err(RecvTimeoutError::Timeout) => {
                    if let Some(body) = sink.refresh() {
                        self.post(&body, 0);
                    }
                    refreshed = Instant::now();
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => return,
            };
            // What else is waiting goes in the same requests.
            let mut batch = vec![first];
            batch.extend(rx.try_iter().take(255));
            for (body, news) in sink.bodies(&batch) {
                self.post(&body, news);
            }
            if refreshed.elapsed() >= self.refresh {
                if let Some(body) = sink.refresh() {
                    self.post(&body, 0);
                }
                refreshed = Instant::now();
            }
        }
    }

    /// POSTs `body`, which carries `news` changes, retrying with backoff (0.5 s, 1 s, 2 s, …)
    /// on errors, 5xx and 429 answers.
    fn post(&self, body: &str, news: u64) {
        let mut wait = Duration::from_millis(500);
        for attempt in 1..=self.attempts {
            match self.url.post(body, self.timeout) {
                Ok(status) if (200..300).contains(&status) => {
                    count(&self.counts, self.name, "sent", news);
                    return;
                }
                // The sink refused the content: sending it again would not help.
                Ok(status) if (400..500).contains(&status) && status != 429 => {
                    tracing::warn!(sink = self.name, status, "notification refused");
                    break;
                }
                outcome => {
                    if attempt < self.attempts {
                        tracing::debug!(
                            sink = self.name,
                            ?outcome,
                            attempt,
                            "notification retried"
                        );
                        std::thread::sleep(wait);
                        wait *= 2;
                    } else {
                        tracing::warn!(sink = self.name, ?outcome, "notification failed");
                    }
                }
            }
        }
        count(&self.counts, self.name, "failed", news);
    }
}
