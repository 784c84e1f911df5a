//! Measurements off the wire, shared by the CPU experiments: a collector process takes
//! reports off a veth pair (UDP or AF_XDP input) from a sender in a network namespace — the
//! wire of `kplane bench ingest` — and each point is the collector's CPU time, the reports it
//! received and the events it raised while one traffic shape was sent. Needs root.

use std::net::SocketAddr;
use std::process::Child;
use std::time::Duration;

use anyhow::Context;
use kplane_collector::bench::{ReportShape, shaped_reports};
use kplane_runtime::probe::{http_get, metric_sum, wait_ready};

use kplane_bench::free_port;
use kplane_bench::ingest::{Input, Sequences, Traffic, Wire, paced_send, softirq_seconds};

/// CPU seconds every thread of process `pid` has run, from the scheduler's nanosecond
/// accounting (`/proc/PID/task/*/schedstat`): points of a few seconds at a few % of a core
/// are below the resolution of `/proc/PID/stat`'s 10 ms ticks.
fn cpu_time(pid: u32) -> f64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0.0;
    };
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum::<u64>() as f64
        / 1e9
}

/// A point whose reports went missing — sent, but neither received nor counted dropped (1 %
/// slack for what was still in flight when it ended) — said as a shape problem.
pub fn missing_reports(label: &str, sent: f64, received: f64, dropped: f64) -> Option<String> {
    (received + dropped < 0.99 * sent)
        .then(|| format!("{label}: {sent} sent, {received} received, {dropped} counted dropped"))
}

/// Least-squares slope and intercept of `y` on `x`.
pub fn regression(pts: &[(f64, f64)]) -> Option<(f64, f64)> {
    let n = pts.len() as f64;
    if pts.len() < 2 {
        return None;
    }
    let (mx, my) = (
        pts.iter().map(|p| p.0).sum::<f64>() / n,
        pts.iter().map(|p| p.1).sum::<f64>() / n,
    );
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    (sxx > 0.0).then(|| (sxy / sxx, my - sxy / sxx * mx))
}

/// A collector on a veth wire, kept for several points.
pub struct Session {
    wire: Wire,
    child: Child,
    admin: SocketAddr,
    seq: Sequences,
    /// Flow sources used so far: each point's flows are new to the collector.
    next_source: u32,
    _config: ConfigFile,
}

/// What one point measured.
#[derive(Clone, Copy, Debug, Default)]
pub struct Point {
    pub sent: u64,
    pub received: f64,
    pub events: f64,
    /// Counted drops (socket, AF_XDP ring, pipeline queue).
    pub dropped: f64,
    /// The collector process's CPU time over the point (every thread; threads that ended
    /// during the point are not counted, and the collector's threads live as long as it).
    pub cpu: f64,
    /// Machine-wide softirq time (veth, XDP, the UDP stack), tick-sampled.
    pub softirq: f64,
    pub seconds: f64,
}

impl Point {
    /// Collector CPU per report received, ns.
    pub fn ns_per_report(&self) -> f64 {
        self.cpu * 1e9 / self.received.max(1.0)
    }
    /// Reports per second per 1 % of a core (the paper's kpps per 1 % CPU, ×1000).
    pub fn per_percent_core(&self) -> f64 {
        self.received / self.cpu.max(1e-9) / 100.0
    }
    /// The collector's CPU, % of one core, over the point.
    pub fn cpu_percent(&self) -> f64 {
        self.cpu * 100.0 / self.seconds.max(1e-9)
    }
}

/// The collector's configuration file, removed with the session.
struct ConfigFile(std::path::PathBuf);

impl Drop for ConfigFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

impl Session {
    /// A collector on a fresh veth wire; with `detection` false a `noop` watchlist rule on
    /// every flow makes every report an event (INTCollector with event detection disabled).
    pub fn start(input: Input, detection: bool, tag: &str) -> anyhow::Result<Self> {
        let wire = Wire::new(input, tag)?;
        let admin: SocketAddr = ([127, 0, 0, 1], free_port()?).into();
        let config = ConfigFile(std::env::temp_dir().join(format!(
            "kplane-experiment-{tag}-{}.toml",
            std::process::id()
        )));
        let rules = if detection {
            ""
        } else {
            "[[collector.watchlist]]\nname = \"all\"\nalgorithm = \"noop\"\n"
        };
        std::fs::write(&config.0, rules)?;
        let child = wire
            .collector(admin)?
            .env("KPLANE_CONFIG", &config.0)
            // Nothing consumes the embedded bus here: let it hold the run.
            .env("KPLANE__COLLECTOR__BUS_CAPACITY", "1000000")
            .spawn()
            .context("starting the collector")?;
        let mut s = Self {
            wire,
            child,
            admin,
            seq: [0; 21],
            next_source: 0,
            _config: config,
        };
        anyhow::ensure!(
            wait_ready(s.admin, Duration::from_secs(30)),
            "the collector never became ready"
        );
        // Warm up: sockets, rings and the first keys.
        let warm = ReportShape {
            flows: 64,
            hops: 1,
            fields: 1,
            first_source: 0,
            latency_step: 0,
        };
        let traffic = s.traffic(warm, 0);
        s.measure(&traffic, 10_000, 0.2)?;
        Ok(s)
    }

    /// `shape`'s reports from flows this collector has not seen, with a changed copy each
    /// (first hop's latency + 20 µs, above the default 10 µs threshold) flipped
    /// `changes_per_second`.
    pub fn traffic(&mut self, shape: ReportShape, changes_per_second: u64) -> Traffic {
        let shape = ReportShape {
            first_source: self.next_source,
            ..shape
        };
        self.next_source += shape.flows;
        Traffic {
            base: shaped_reports(&shape),
            changed: if changes_per_second > 0 {
                shaped_reports(&ReportShape {
                    latency_step: 20_000,
                    ..shape
                })
            } else {
                Vec::new()
            },
            changes_per_second,
        }
    }

    fn metrics(&self) -> (f64, f64, f64) {
        let m = http_get(self.admin, "/metrics").unwrap_or_default();
        (
            metric_sum(&m, "kplane_collector_datagrams_received_total", &[]),
            metric_sum(&m, "kplane_collector_events_total", &[]),
            metric_sum(&m, "kplane_collector_dropped_total", &[]),
        )
    }

    /// Sends `traffic` at `rate` reports/s for `seconds`, waits for the collector to drain,
    /// and returns what it took.
    pub fn measure(&mut self, traffic: &Traffic, rate: u64, seconds: f64) -> anyhow::Result<Point> {
        let (r0, e0, d0) = self.metrics();
        let cpu0 = cpu_time(self.child.id());
        let soft0 = softirq_seconds();
        let sent = paced_send(&self.wire.sender, traffic, &mut self.seq, rate, seconds, 64)?;
        // Drained when the received count stops moving.
        let mut last = (f64::NAN, 0.0, 0.0);
        for _ in 0..100 {
            std::thread::sleep(Duration::from_millis(50));
            let now = self.metrics();
            if now.0 == last.0 {
                break;
            }
            last = now;
        }
        let cpu = cpu_time(self.child.id()) - cpu0;
        let softirq = softirq_seconds() - soft0;
        let (r1, e1, d1) = self.metrics();
        Ok(Point {
            sent: sent.reports,
            received: r1 - r0,
            events: e1 - e0,
            dropped: d1 - d0,
            cpu,
            softirq,
            seconds: sent.seconds,
        })
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // SAFETY: signalling our own child.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
        }
        let _ = self.child.wait();
    }
}
