//! Fabric families for `kplane eval knowledge`: a topology, a link rate and a background. A
//! held-out evaluation labels on some families and scores on the one left out, so what the
//! type classifier learnt must hold on a fabric it never saw.

use std::time::Duration;

use anyhow::{Context, bail};
use kplane_emulator::topology::{LinkSpec, Topology};

/// The shipped families: (name, spec). `ft4-100m` is the fabric the shipped labels come from;
/// `indep-3tier` is the independent generator's (`kplane-tracegen`), which shares no code
/// with the emulator; `ls-4x8-10g` and `ft4-10g-sparse` are the ends of the range the
/// evaluation spans (10 Gb/s links; 5000 and 100 flows/s), which the shipped labels never saw.
pub const PRESETS: [(&str, &str); 7] = [
    (
        "ft4-100m",
        "topology=fat-tree:4;link-mbps=100;flows=1000;elephants=0.02;jobs=8;job-mbps=10",
    ),
    (
        "ls-2x4-1g",
        "topology=leaf-spine:2,4,4;link-mbps=1000;flows=1000;elephants=0.03;jobs=0",
    ),
    (
        "ft6-1g",
        "topology=fat-tree:6;link-mbps=1000;flows=1500;elephants=0.01;jobs=4;job-mbps=50",
    ),
    (
        "ws-20-100m",
        "topology=watts-strogatz:20,4,0.2,7;link-mbps=100;flows=400;elephants=0.02;jobs=4;job-mbps=10",
    ),
    (
        "ls-4x8-10g",
        "topology=leaf-spine:4,8,4;link-mbps=10000;flows=5000;elephants=0.05;jobs=4;job-mbps=500",
    ),
    (
        "ft4-10g-sparse",
        "topology=fat-tree:4;link-mbps=10000;flows=100;elephants=0.1;jobs=0",
    ),
    (
        "indep-3tier",
        "generator=independent;topology=three-tier:8,8,4,8;link-mbps=1000;flows=400",
    ),
];

/// Mean packets of the independent generator's flows.
const INDEPENDENT_PACKETS: f64 = 10.0;
/// Its mean packet size (most packets are in the heavy tail's 1500-byte flows).
const INDEPENDENT_PACKET_BYTES: f64 = 1_200.0;

/// Where a family's traffic comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Generator {
    /// kplane's emulator (`kplane-emulator`).
    Emulator,
    /// The independent generator (`kplane-tracegen`): its own fabric, flows and attacks.
    Independent,
}

/// Packets of a background elephant and of a mouse, and their size (docs/emulator.md).
const ELEPHANT_PACKETS: f64 = 1_000.0;
const MOUSE_PACKETS: f64 = 10.0;
const PACKET_BYTES: f64 = 1_000.0;

/// One fabric family.
#[derive(Clone, Debug, PartialEq)]
pub struct Family {
    pub name: String,
    pub generator: Generator,
    pub topology: String,
    pub link_mbps: f64,
    /// Background flow arrivals per second.
    pub flows: f64,
    /// Share of them that are elephants.
    pub elephants: f64,
    /// Periodic jobs and their rate (Mb/s).
    pub jobs: usize,
    pub job_mbps: f64,
    /// Hosts of the topology.
    pub hosts: usize,
}

impl Family {
    /// A preset's name, or a spec `topology=…;link-mbps=…;flows=…;elephants=…;jobs=…;job-mbps=…`
    /// (every key optional; defaults are `ft4-100m`'s), named after itself. With
    /// `generator=independent` the topology is the independent generator's
    /// (`three-tier:E,A,C,H`) and only `link-mbps` and `flows` apply.
    pub fn parse(s: &str) -> anyhow::Result<Self> {
        let (name, spec) = match PRESETS.iter().find(|(n, _)| *n == s) {
            Some((n, spec)) => (n.to_string(), *spec),
            None if s.contains('=') => (s.to_string(), s),
            None => bail!(
                "unknown family {s:?}: one of {} or a spec such as \
                 \"topology=leaf-spine:2,4,4;link-mbps=1000;flows=2000;elephants=0.05;jobs=0\"",
                PRESETS.map(|p| p.0).join(", ")
            ),
        };
        let mut f = Self {
            name,
            generator: Generator::Emulator,
            topology: "fat-tree:4".into(),
            link_mbps: 100.0,
            flows: 1_000.0,
            elephants: 0.02,
            jobs: 8,
            job_mbps: 10.0,
            hosts: 0,
        };
        for kv in spec.split(';').filter(|kv| !kv.trim().is_empty()) {
            let (k, v) = kv
                .split_once('=')
                .with_context(|| format!("family {s:?}: {kv:?} is not key=value"))?;
            let num = || -> anyhow::Result<f64> {
                let x: f64 = v
                    .trim()
                    .parse()
                    .with_context(|| format!("family {s:?}: {k} = {v:?} is not a number"))?;
                if !(x.is_finite() && x >= 0.0) {
                    bail!("family {s:?}: {k} must be a number ≥ 0");
                }
                Ok(x)
            };
            match k.trim() {
                "topology" => f.topology = v.trim().to_string(),
                "generator" => {
                    f.generator = match v.trim() {
                        "emulator" => Generator::Emulator,
                        "independent" => Generator::Independent,
                        other => {
                            bail!("family {s:?}: generator {other:?} (emulator or independent)")
                        }
                    }
                }
                "link-mbps" => f.link_mbps = num()?,
                "flows" => f.flows = num()?,
                "elephants" => f.elephants = num()?.min(1.0),
                "jobs" => f.jobs = num()? as usize,
                "job-mbps" => f.job_mbps = num()?,
                other => bail!(
                    "family {s:?}: no key {other:?} (generator, topology, link-mbps, flows, elephants, jobs, job-mbps)"
                ),
            }
        }
        if f.link_mbps < 1.0 {
            bail!("family {s:?}: link-mbps must be at least 1");
        }
        f.hosts = match f.generator {
            Generator::Emulator => Topology::parse(&f.topology, f.link())
                .map_err(|e| anyhow::anyhow!("family {s:?}: {e}"))?
                .host_indices()
                .len(),
            Generator::Independent => {
                if f.topology == "fat-tree:4" {
                    f.topology = "three-tier".into();
                }
                f.jobs = 0;
                kplane_tracegen::fabric::Fabric::parse(&f.topology)
                    .map_err(|e| anyhow::anyhow!("family {s:?}: {e}"))?
                    .hosts
                    .len()
            }
        };
        if f.hosts < 4 {
            bail!(
                "family {s:?}: {} hosts; the scenarios need at least 4",
                f.hosts
            );
        }
        Ok(f)
    }

    pub fn link(&self) -> LinkSpec {
        LinkSpec {
            rate_bps: (self.link_mbps * 1e6) as u64,
            ..LinkSpec::default()
        }
    }

    /// A host's usual incoming rate, bits/s: the background spread over the hosts.
    pub fn usual_host_bps(&self) -> f64 {
        let (packets, bytes) = match self.generator {
            Generator::Emulator => (
                self.elephants * ELEPHANT_PACKETS + (1.0 - self.elephants) * MOUSE_PACKETS,
                PACKET_BYTES,
            ),
            Generator::Independent => (INDEPENDENT_PACKETS, INDEPENDENT_PACKET_BYTES),
        };
        self.flows * packets * bytes * 8.0 / self.hosts as f64
    }

    /// `rate` × a host's usual traffic as a fraction of its link rate (what the emulator's
    /// `ddos` and `flash-crowd` keys read).
    pub fn of_link(&self, times_usual: f64) -> f64 {
        times_usual * self.usual_host_bps() / (self.link_mbps * 1e6)
    }

    /// The processor's hop-latency threshold: its default of 100 µs for 10 Gb/s links scaled
    /// to this rate (the same queue depth in packets).
    pub fn hop_latency_threshold(&self) -> Duration {
        Duration::from_nanos((100_000.0 * 10_000.0 / self.link_mbps) as u64)
    }

    /// How long a breach must last: longer than one background elephant keeps a queue full
    /// on its own at this rate (200 ms at 100 Mb/s, where an elephant lasts 80 ms).
    pub fn min_duration(&self) -> Duration {
        Duration::from_nanos((200e6 * 100.0 / self.link_mbps) as u64).max(Duration::from_millis(5))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_and_specs_parse_and_bad_ones_are_named() {
        for (name, _) in PRESETS {
            let f = Family::parse(name).unwrap();
            assert_eq!(f.name, name);
            assert!(f.hosts >= 16, "{name}: {} hosts", f.hosts);
        }
        let f = Family::parse("ft4-100m").unwrap();
        assert_eq!(f.hosts, 16);
        assert_eq!(f.hop_latency_threshold(), Duration::from_millis(10));
        assert_eq!(f.min_duration(), Duration::from_millis(200));
        // 1000 flows/s of 29.8 packets of 1000 B over 16 hosts ≈ 14.9 Mb/s each.
        assert!((f.usual_host_bps() - 14.9e6).abs() < 1e5);
        let custom = Family::parse("topology=leaf-spine:2,2,4;link-mbps=1000;jobs=0").unwrap();
        assert_eq!(custom.hosts, 8);
        assert_eq!(custom.hop_latency_threshold(), Duration::from_millis(1));
        assert!(Family::parse("ft5").is_err());
        assert!(Family::parse("topology=fat-tree:4;rate=3").is_err());
        assert!(Family::parse("flows=-1").is_err());
        assert!(Family::parse("topology=mesh:3").is_err());
        let indep = Family::parse("indep-3tier").unwrap();
        assert_eq!((indep.generator, indep.hosts), (Generator::Independent, 64));
        assert!(Family::parse("generator=independent;topology=fat-tree:6").is_err());
        assert!(Family::parse("generator=magic").is_err());
    }
}
