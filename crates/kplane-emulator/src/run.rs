//! Running an emulation: build, inject the scenario, advance (virtual or real time), send the
//! reports over UDP, write the ground truth, summarise.

use crate::EmulatorError;
use std::net::{SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::scenario;
use crate::sim::{Sim, SimConfig, Stats};
use crate::topology::{LinkSpec, Topology};
use crate::traffic::{Periodic, Poisson};
use kplane_p4::EntrySpec;

#[derive(Clone, Debug)]
pub struct RunConfig {
    pub topology: String,
    pub link: LinkSpec,
    pub collectors: Vec<SocketAddr>,
    pub duration: Duration,
    pub scenario: String,
    /// Pace virtual time to the wall clock (× `speed`).
    pub realtime: bool,
    pub speed: f64,
    pub truth: Option<PathBuf>,
    pub sim: SimConfig,
    /// Background Poisson flows per second (0: none).
    pub flows_per_second: f64,
    /// Share of the background flows that are elephants (1000 packets; the rest are mice of
    /// 10 packets).
    pub elephant_share: f64,
    /// Sending rate of one background flow, bits/s (an elephant lasts 1000 packets at it).
    pub flow_rate_bps: u64,
    /// Periodic jobs in the background ([`crate::traffic::jobs`]; 0: none).
    pub jobs: usize,
    /// Sending rate of each job's transfer, bits/s.
    pub job_rate_bps: u64,
    /// INT instruction bitmap of the default watchlist entry (every flow).
    pub bitmap: u16,
    /// Extra table entries installed at start.
    pub entries: Vec<EntrySpec>,
}

impl Default for RunConfig {
    fn default() -> Self {
        Self {
            topology: "fat-tree:4".into(),
            link: LinkSpec::default(),
            collectors: Vec::new(),
            duration: Duration::from_secs(10),
            scenario: "none".into(),
            realtime: false,
            speed: 1.0,
            truth: None,
            sim: SimConfig::default(),
            flows_per_second: 1_000.0,
            elephant_share: 0.2,
            flow_rate_bps: 1_000_000_000,
            jobs: 0,
            job_rate_bps: 10_000_000,
            bitmap: 0xFF00,
            entries: Vec::new(),
        }
    }
}

/// What a run did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Summary {
    pub topology: String,
    pub switches: usize,
    pub hosts: usize,
    pub virtual_seconds: f64,
    pub wall_seconds: f64,
    pub stats: Stats,
    pub reports_sent: u64,
    pub report_send_errors: u64,
    /// Ground-truth events by kind.
    pub injected: std::collections::BTreeMap<String, u64>,
}

impl Summary {
    pub fn packets_per_second(&self) -> f64 {
        self.stats.packets_sent as f64 / self.wall_seconds.max(1e-9)
    }
}

/// Builds the simulation a run starts from.
pub fn build(cfg: &RunConfig) -> Result<Sim, EmulatorError> {
    let topo = Topology::parse(&cfg.topology, cfg.link)?;
    let mut sim_cfg = cfg.sim.clone();
    sim_cfg.collectors = cfg.collectors.len().max(1);
    let mut sim = Sim::new(topo, sim_cfg);
    sim.insert(EntrySpec::int_source_everywhere(cfg.bitmap, 8))?;
    for e in &cfg.entries {
        sim.insert(e.clone())?;
    }
    let duration = cfg.duration.as_nanos() as u64;
    scenario::apply(&mut sim, &cfg.scenario, duration)?;
    if cfg.flows_per_second > 0.0 {
        sim.add_generator(
            0,
            Box::new(Poisson {
                rate: cfg.flows_per_second,
                mice_fraction: 1.0 - cfg.elephant_share.clamp(0.0, 1.0),
                flow_rate_bps: cfg.flow_rate_bps,
                stop_ns: duration,
                ..Poisson::default()
            }),
        );
    }
    let hosts = sim.topo.host_indices();
    for job in crate::traffic::jobs(&hosts, cfg.jobs, cfg.job_rate_bps) {
        let phase = job.phase_ns;
        sim.add_generator(
            phase,
            Box::new(Periodic {
                job,
                packet_bytes: 1_000,
                stop_ns: duration,
            }),
        );
    }
    Ok(sim)
}

/// Runs `sim` (shared with the control channel) for the configured duration, or until
/// `stop()` says so.
pub fn run(
    cfg: &RunConfig,
    sim: Arc<Mutex<Sim>>,
    stop: impl Fn() -> bool,
) -> Result<Summary, EmulatorError> {
    run_paced(cfg, sim, stop, |_| {})
}

/// [`run`], calling `pace(reports sent so far)` after each step's reports are sent: a consumer
/// that must not be outrun (an evaluation in virtual time) blocks there until it has caught up.
pub fn run_paced(
    cfg: &RunConfig,
    sim: Arc<Mutex<Sim>>,
    stop: impl Fn() -> bool,
    mut pace: impl FnMut(u64),
) -> Result<Summary, EmulatorError> {
    let socket = if cfg.collectors.is_empty() {
        None
    } else {
        Some(UdpSocket::bind("0.0.0.0:0").map_err(EmulatorError::Socket)?)
    };
    let duration = cfg.duration.as_nanos() as u64;
    let started = Instant::now();
    let mut sent = 0u64;
    let mut errors = 0u64;
    // 1 ms of virtual time per step: the lock is held for one step, so the control channel
    // waits for a step, never for a realtime run's catch-up after it fell behind.
    let step = 1_000_000u64;
    loop {
        let (now, behind, reports) = {
            let mut s = sim.lock().unwrap_or_else(PoisonError::into_inner);
            let due = if cfg.realtime {
                ((started.elapsed().as_nanos() as f64 * cfg.speed) as u64).min(duration)
            } else {
                duration
            };
            let until = due.min(s.now() + step);
            s.run_until(until);
            (s.now(), s.now() < due, s.take_reports())
        };
        if let Some(sock) = &socket {
            for r in reports {
                let dest = cfg.collectors[r.collector % cfg.collectors.len()];
                match sock.send_to(&r.bytes, dest) {
                    Ok(_) => sent += 1,
                    Err(_) => errors += 1,
                }
            }
        }
        pace(sent);
        if now >= duration || stop() {
            break;
        }
        if cfg.realtime && !behind {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let s = sim.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(path) = &cfg.truth {
        let truth = |source| EmulatorError::Truth {
            path: path.display().to_string(),
            source,
        };
        let text = serde_json::to_string_pretty(&s.truth).map_err(|e| truth(e.into()))?;
        std::fs::write(path, text).map_err(truth)?;
    }
    let mut injected = std::collections::BTreeMap::new();
    for e in &s.truth.events {
        if let Some(k) = e["kind"].as_str() {
            *injected.entry(k.to_string()).or_default() += 1;
        }
    }
    Ok(Summary {
        topology: s.topo.name.clone(),
        switches: s.topo.switches().count(),
        hosts: s.topo.hosts().count(),
        virtual_seconds: s.now() as f64 / 1e9,
        wall_seconds: started.elapsed().as_secs_f64(),
        stats: s.stats.clone(),
        reports_sent: sent,
        report_send_errors: errors,
        injected,
    })
}
