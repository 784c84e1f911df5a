//! Traffic: Poisson flow arrivals with a mice/elephant mix, periodic jobs, and the
//! data-centre microburst model (web / cache / hadoop profiles).

use serde_json::json;

use crate::sim::{Generator, Sim};
use crate::topology::NodeIdx;

/// Poisson flow arrivals between random hosts.
#[derive(Clone, Debug)]
pub struct Poisson {
    /// Flows per second.
    pub rate: f64,
    /// Share of flows that are mice.
    pub mice_fraction: f64,
    pub mice_packets: u64,
    pub elephant_packets: u64,
    pub packet_bytes: u32,
    /// Sending rate of one flow, bits/s.
    pub flow_rate_bps: u64,
    pub stop_ns: u64,
}

impl Default for Poisson {
    fn default() -> Self {
        Self {
            rate: 1_000.0,
            mice_fraction: 0.8,
            mice_packets: 10,
            elephant_packets: 1_000,
            packet_bytes: 1_000,
            flow_rate_bps: 1_000_000_000,
            stop_ns: u64::MAX,
        }
    }
}

impl Generator for Poisson {
    fn fire(&mut self, sim: &mut Sim, now: u64) -> Option<u64> {
        let hosts = sim.topo.host_indices();
        if hosts.len() >= 2 {
            let src = hosts[sim.rng.below(hosts.len() as u64) as usize];
            let mut dst = hosts[sim.rng.below(hosts.len() as u64) as usize];
            if dst == src {
                dst = hosts[(hosts.iter().position(|h| *h == src).unwrap_or(0) + 1) % hosts.len()];
            }
            let proto = if sim.rng.below(2) == 0 { 6 } else { 17 };
            let ports = (
                1024 + sim.rng.below(60_000) as u16,
                [80, 443, 9000, 53][sim.rng.below(4) as usize],
            );
            let packets = if sim.rng.uniform() < self.mice_fraction {
                self.mice_packets
            } else {
                self.elephant_packets
            };
            let gap = u64::from(self.packet_bytes) * 8 * 1_000_000_000 / self.flow_rate_bps.max(1);
            let flow = sim.flow(src, dst, proto, ports, packets, self.packet_bytes, gap);
            sim.start_flow(flow);
        }
        let next = now + (sim.rng.exponential(1e9 / self.rate.max(1e-9)) as u64).max(1);
        (next < self.stop_ns).then_some(next)
    }
}

/// A periodic job (a replication, a backup, a metrics scrape, a training iteration's
/// exchange): every `period_ns`, from `phase_ns` on, `src` sends `dst` one transfer of
/// `active_ns` at `rate_bps`.
#[derive(Clone, Debug, PartialEq)]
pub struct Job {
    pub src: NodeIdx,
    pub dst: NodeIdx,
    pub period_ns: u64,
    pub phase_ns: u64,
    pub active_ns: u64,
    pub rate_bps: u64,
    /// The job's source port (its flow is the same every period).
    pub port: u16,
}

/// Periods of the jobs [`jobs`] draws, in seconds (scrape and flush intervals).
pub const JOB_PERIODS_S: std::ops::RangeInclusive<u64> = 8..=20;
/// The share of its period a job transfers.
pub const JOB_DUTY: f64 = 0.25;

/// `n` periodic jobs between the topology's hosts at `rate_bps` each. They are a property of
/// the network, not of a run: drawn from a generator of their own with a fixed seed, the same
/// jobs (pairs, periods, phases) for every run on the same topology.
pub fn jobs(hosts: &[NodeIdx], n: usize, rate_bps: u64) -> Vec<Job> {
    let mut rng = kplane_model::rng::Rng::new(0x6a6f_6273);
    if hosts.len() < 2 {
        return Vec::new();
    }
    (0..n)
        .map(|i| {
            let src = hosts[rng.below(hosts.len() as u64) as usize];
            let mut dst = hosts[rng.below(hosts.len() as u64) as usize];
            if dst == src {
                dst = hosts[(hosts.iter().position(|h| *h == src).unwrap_or(0) + 1) % hosts.len()];
            }
            let period_ns =
                rng.int(*JOB_PERIODS_S.start(), *JOB_PERIODS_S.end() + 1) * 1_000_000_000;
            Job {
                src,
                dst,
                period_ns,
                phase_ns: rng.below(period_ns),
                active_ns: (period_ns as f64 * JOB_DUTY) as u64,
                rate_bps,
                port: 50_000 + i as u16,
            }
        })
        .collect()
}

/// Runs one [`Job`].
#[derive(Clone, Debug)]
pub struct Periodic {
    pub job: Job,
    pub packet_bytes: u32,
    pub stop_ns: u64,
}

impl Generator for Periodic {
    fn fire(&mut self, sim: &mut Sim, now: u64) -> Option<u64> {
        let j = &self.job;
        let gap = u64::from(self.packet_bytes) * 8 * 1_000_000_000 / j.rate_bps.max(1);
        let packets = (j.active_ns / gap.max(1)).max(1);
        let flow = sim.flow(
            j.src,
            j.dst,
            6,
            (j.port, 873),
            packets,
            self.packet_bytes,
            gap,
        );
        sim.start_flow(flow);
        let next = now + j.period_ns.max(1);
        (next < self.stop_ns).then_some(next)
    }
}

/// Burst profiles. IMC'17 (Zhang et al., "High-Resolution Measurement of Data Center
/// Microbursts") reports that over 70 % of bursts last at most tens of microseconds, that
/// cache racks burst longer than web racks and that Hadoop racks are the most intense; the
/// numbers below are kplane's parameters chosen to reproduce that shape (log-normal durations,
/// exponential inter-burst gaps), not the paper's CDFs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BurstProfile {
    pub name: &'static str,
    /// Median burst duration, ns.
    pub duration_median_ns: f64,
    /// Log-normal shape.
    pub duration_sigma: f64,
    /// Mean gap between bursts, ns.
    pub inter_burst_mean_ns: f64,
    /// Senders converging on the target during a burst, each at line rate.
    pub fan_in: usize,
}

pub const WEB: BurstProfile = BurstProfile {
    name: "web",
    duration_median_ns: 25_000.0,
    duration_sigma: 0.8,
    inter_burst_mean_ns: 2_000_000.0,
    fan_in: 2,
};
pub const CACHE: BurstProfile = BurstProfile {
    name: "cache",
    duration_median_ns: 50_000.0,
    duration_sigma: 1.0,
    inter_burst_mean_ns: 1_000_000.0,
    fan_in: 3,
};
pub const HADOOP: BurstProfile = BurstProfile {
    name: "hadoop",
    duration_median_ns: 100_000.0,
    duration_sigma: 1.2,
    inter_burst_mean_ns: 500_000.0,
    fan_in: 4,
};

impl BurstProfile {
    pub fn by_name(s: &str) -> Option<Self> {
        [WEB, CACHE, HADOOP].into_iter().find(|p| p.name == s)
    }
}

/// Microbursts into one host: during a burst, `fan_in` other hosts send back to back at line
/// rate, filling the target's egress queue on its edge switch.
#[derive(Clone, Debug)]
pub struct Microbursts {
    pub profile: BurstProfile,
    pub target: NodeIdx,
    pub packet_bytes: u32,
    pub stop_ns: u64,
}

impl Generator for Microbursts {
    fn fire(&mut self, sim: &mut Sim, now: u64) -> Option<u64> {
        let p = self.profile;
        let d = sim
            .rng
            .lognormal(p.duration_median_ns, p.duration_sigma)
            .clamp(2_000.0, 5e6) as u64;
        let hosts: Vec<_> = sim
            .topo
            .host_indices()
            .into_iter()
            .filter(|h| *h != self.target)
            .collect();
        let &(li, edge, edge_port) = &sim.topo.nodes[self.target].ports[0];
        let rate = sim.topo.links[li].rate_bps.max(1);
        let gap = u64::from(self.packet_bytes) * 8 * 1_000_000_000 / rate;
        let packets = (d / gap.max(1)).max(1);
        let mut sources = Vec::new();
        for i in 0..p.fan_in.min(hosts.len()) {
            let src = hosts[(sim.rng.below(hosts.len() as u64) as usize + i) % hosts.len()];
            sources.push(sim.topo.nodes[src].name.clone());
            let f = sim.flow(
                src,
                self.target,
                17,
                (40_000 + i as u16, 7_000),
                packets,
                self.packet_bytes,
                gap,
            );
            sim.start_flow(f);
        }
        let queue_node = sim.topo.nodes[edge].id;
        sim.note(json!({
            "kind": "microburst",
            "profile": p.name,
            "duration_ns": d,
            "end_ns": now + d,
            "target": sim.topo.nodes[self.target].ip,
            "queue": { "node": queue_node, "port": edge_port },
            "sources": sources,
        }));
        let next = now + d + sim.rng.exponential(p.inter_burst_mean_ns) as u64;
        (next < self.stop_ns).then_some(next)
    }
}
