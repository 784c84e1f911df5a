//! What the hosts send: background flows and the scripted events.
//!
//! * **Background**: Poisson flow arrivals; each host has a popularity drawn once per fabric
//!   (log-normal, σ = 1: a few hosts are much busier than most), sources and destinations are
//!   drawn by it; flow sizes are Pareto (α = 1.5, a mean of `mean-packets`, at most 20 000
//!   packets); flows above 20 packets send 1500-byte packets, the rest 128, 576 or 1500 bytes;
//!   every flow sends at 20 Mb/s; 80 % TCP to 80, 443, 8080 or 3306, 20 % UDP to 53 or 123.
//! * **Scenarios** (`name:key=value,…`, several joined by `+`; times are fractions of the run):
//!   `ddos` (`victim`, `sources` spoofed addresses in 198.18.0.0/15, `pps` packets/s together
//!   or `times-usual`: that many times the packets the background is expected to bring the
//!   victim ([`usual_pps`]), 64-byte UDP to port 80, `start`, `duration`, `replace`: the share
//!   of the background that stops meanwhile), `port-scan` (`scanner`, `victim`, `ports`,
//!   `gap-us`, `start`: TCP SYNs to ports 1…), `link-failure` (`link`: position along the
//!   switch-to-switch links, `start`, `duration`), `incast` (`victim`, `senders` hosts spread
//!   over the fabric, each sending `kb` kilobytes back to back at line rate in 1500-byte TCP
//!   packets to port 5001, all at once,
//!   every `period-ms`, from `start` for `duration`: a partition/aggregate job's answers
//!   converging on the victim's edge port), `flash-crowd` (`target`, `clients` hosts spread over
//!   the fabric fetching from it over HTTPS: fetches arrive at random, each a 576-byte request
//!   to port 443 answered by `kb` kilobytes in 1500-byte packets, which the client
//!   acknowledges in 64-byte packets, one per two; the answers together `mbps`, from `start`
//!   for `duration`: legitimate load), `heavy-hitter` (`source` copying to `peers` hosts spread
//!   over the fabric, one long TCP transfer to port 873 each, together `mbps`, acknowledged
//!   as above, from `start` for `duration`: a backup), `none`.

use crate::TracegenError;

/// splitmix64: this crate's own pseudo-random numbers.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed ^ 0x5DEE_CE66_D1CE_4E5B)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in (0, 1].
    pub fn unit(&mut self) -> f64 {
        ((self.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    pub fn exponential(&mut self, mean: f64) -> f64 {
        -mean * self.unit().ln()
    }

    pub fn normal(&mut self) -> f64 {
        (-2.0 * self.unit().ln()).sqrt() * (std::f64::consts::TAU * self.unit()).cos()
    }
}

/// A flow's packets: `remaining` more, one every `gap_ns` from `next_ns`.
#[derive(Clone, Debug)]
pub struct Flow {
    pub src: [u8; 4],
    /// The host it leaves from (its edge is where the path starts).
    pub src_host: usize,
    pub dst_host: usize,
    pub protocol: u8,
    pub src_port: u16,
    pub dst_port: u16,
    pub packet_bytes: u16,
    pub tcp_flags: u8,
    pub remaining: u64,
    pub gap_ns: u64,
    pub next_ns: u64,
}

/// The rate every background flow sends at.
pub const FLOW_BPS: f64 = 20e6;
/// A TCP receiver acknowledges every second data packet (delayed ACKs).
const PACKETS_PER_ACK: u64 = 2;
const ACK_BYTES: u16 = 64;
const ALPHA: f64 = 1.5;
const MAX_PACKETS: f64 = 20_000.0;

/// Each host's popularity, cumulative over the hosts: a property of the fabric, not of a run
/// (drawn from a fixed seed).
pub fn popularity(hosts: usize) -> Vec<f64> {
    let mut rng = Rng::new(0xFAB);
    let mut total = 0.0;
    (0..hosts)
        .map(|_| {
            total += rng.normal().exp();
            total
        })
        .collect()
}

/// The packets per second the background is expected to bring each host: `flows` arrivals a
/// second of `mean_packets` each, to a destination drawn by its popularity (`cumulative`,
/// redrawn uniformly among the others when it is the source) — what [`background_flow`] draws.
pub fn usual_pps(cumulative: &[f64], flows: f64, mean_packets: f64) -> Vec<f64> {
    let total = cumulative.last().copied().unwrap_or(1.0);
    let share: Vec<f64> = cumulative
        .iter()
        .scan(0.0, |prev, c| {
            let p = (c - *prev) / total;
            *prev = *c;
            Some(p)
        })
        .collect();
    let others = (share.len().max(2) - 1) as f64;
    let same: f64 = share.iter().map(|p| p * p).sum();
    share
        .iter()
        .map(|p| flows * mean_packets * (p * (1.0 - p) + (same - p * p) / others))
        .collect()
}

/// Draws one background flow starting at `t_ns` between hosts chosen by `weights`
/// (cumulative).
pub fn background_flow(rng: &mut Rng, cumulative: &[f64], mean_packets: f64, t_ns: u64) -> Flow {
    let pick = |rng: &mut Rng| {
        let x = rng.unit() * cumulative.last().copied().unwrap_or(1.0);
        cumulative
            .partition_point(|c| *c < x)
            .min(cumulative.len() - 1)
    };
    let src = pick(rng);
    let mut dst = pick(rng);
    if dst == src {
        dst = (src + 1 + rng.below(cumulative.len() - 1)) % cumulative.len();
    }
    let xm = mean_packets * (ALPHA - 1.0) / ALPHA;
    let packets = (xm / rng.unit().powf(1.0 / ALPHA)).min(MAX_PACKETS).ceil() as u64;
    let packet_bytes = if packets > 20 {
        1_500
    } else {
        [128, 576, 1_500][rng.below(3)]
    };
    let tcp = rng.unit() < 0.8;
    let (protocol, dst_port) = if tcp {
        (6, [80, 443, 8080, 3306][rng.below(4)])
    } else {
        (17, [53, 123][rng.below(2)])
    };
    Flow {
        src: [0; 4],
        src_host: src,
        dst_host: dst,
        protocol,
        src_port: 32_768 + rng.below(28_000) as u16,
        dst_port,
        packet_bytes,
        tcp_flags: 0x18,
        remaining: packets,
        gap_ns: (f64::from(packet_bytes) * 8.0 / FLOW_BPS * 1e9) as u64,
        next_ns: t_ns,
    }
}

/// A TCP transfer of `packets` 1500-byte packets from `src` to `dst` at `bps` from `at_ns`,
/// and its acknowledgements (`dst` back to `src`, one per [`PACKETS_PER_ACK`], each sent as
/// the packet it acknowledges arrives): `[data, acks]`. Addresses are the caller's to set.
pub fn transfer(
    src: usize,
    dst: usize,
    ports: (u16, u16),
    packets: u64,
    bps: f64,
    at_ns: u64,
) -> [Flow; 2] {
    let gap_ns = (1_500.0 * 8.0 / bps * 1e9).max(1.0) as u64;
    let data = Flow {
        src: [0; 4],
        src_host: src,
        dst_host: dst,
        protocol: 6,
        src_port: ports.0,
        dst_port: ports.1,
        packet_bytes: 1_500,
        tcp_flags: 0x18,
        remaining: packets,
        gap_ns,
        next_ns: at_ns,
    };
    let acks = Flow {
        src_host: dst,
        dst_host: src,
        src_port: ports.1,
        dst_port: ports.0,
        packet_bytes: ACK_BYTES,
        tcp_flags: 0x10,
        remaining: packets / PACKETS_PER_ACK,
        gap_ns: gap_ns * PACKETS_PER_ACK,
        next_ns: at_ns + gap_ns * PACKETS_PER_ACK,
        ..data.clone()
    };
    [data, acks]
}

/// How hard a DDoS floods its victim.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FloodRate {
    /// Packets per second, all sources together.
    Pps(f64),
    /// Times the packets the background is expected to bring the victim ([`usual_pps`]).
    TimesUsual(f64),
}

impl FloodRate {
    /// Packets per second for a victim whose usual is `usual_pps`.
    pub fn pps(self, usual_pps: f64) -> f64 {
        match self {
            Self::Pps(pps) => pps,
            Self::TimesUsual(times) => times * usual_pps,
        }
        .max(1.0)
    }
}

/// One scripted event, with times in ns of the run.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    Ddos {
        victim: usize,
        sources: usize,
        rate: FloodRate,
        start: u64,
        end: u64,
        replace: f64,
    },
    PortScan {
        scanner: usize,
        victim: usize,
        ports: u16,
        gap_ns: u64,
        start: u64,
    },
    LinkFailure {
        link: f64,
        start: u64,
        end: u64,
    },
    Incast {
        victim: usize,
        senders: usize,
        bytes: u64,
        period_ns: u64,
        start: u64,
        end: u64,
    },
    FlashCrowd {
        target: usize,
        clients: usize,
        /// The answers together, bits/s.
        bps: f64,
        /// Bytes per answer.
        bytes: u64,
        start: u64,
        end: u64,
    },
    HeavyHitter {
        source: usize,
        peers: usize,
        /// The transfers together, bits/s.
        bps: f64,
        start: u64,
        end: u64,
    },
}

/// Parses a scenario for a run of `duration_ns` on a fabric of `hosts` hosts.
pub fn parse_scenario(
    spec: &str,
    duration_ns: u64,
    hosts: usize,
) -> Result<Vec<Event>, TracegenError> {
    let mut out = Vec::new();
    for one in spec.split('+') {
        let (name, params) = one.split_once(':').unwrap_or((one, ""));
        let bad = |why: String| TracegenError::Scenario(one.to_string(), why);
        let mut kv = Vec::new();
        for p in params.split(',').filter(|p| !p.is_empty()) {
            let (k, v) = p
                .split_once('=')
                .ok_or_else(|| bad(format!("{p:?} is not key=value")))?;
            let v: f64 = v
                .parse()
                .map_err(|_| bad(format!("{k} = {v:?} is not a number")))?;
            kv.push((k.to_string(), v));
        }
        let allowed: &[&str] = match name {
            "none" => &[],
            "ddos" => &[
                "victim",
                "sources",
                "pps",
                "times-usual",
                "start",
                "duration",
                "replace",
            ],
            "port-scan" => &["scanner", "victim", "ports", "gap-us", "start"],
            "link-failure" => &["link", "start", "duration"],
            "incast" => &["victim", "senders", "kb", "period-ms", "start", "duration"],
            "flash-crowd" => &["target", "clients", "mbps", "kb", "start", "duration"],
            "heavy-hitter" => &["source", "peers", "mbps", "start", "duration"],
            other => {
                return Err(bad(format!(
                    "unknown scenario {other:?} (ddos, port-scan, link-failure, incast, \
                     flash-crowd, heavy-hitter, none)"
                )));
            }
        };
        if let Some((k, _)) = kv.iter().find(|(k, _)| !allowed.contains(&k.as_str())) {
            return Err(bad(format!(
                "no parameter {k:?} (it reads {})",
                allowed.join(", ")
            )));
        }
        let given = |k: &str| kv.iter().find(|(x, _)| x == k).map(|(_, v)| *v);
        let get = |k: &str, d: f64| given(k).unwrap_or(d);
        let at = |f: f64| (duration_ns as f64 * f.clamp(0.0, 1.0)) as u64;
        let host = |k: &str, d: usize| (get(k, d as f64).max(0.0) as usize) % hosts.max(1);
        match name {
            "ddos" => {
                let start = at(get("start", 0.4));
                let rate = match (given("pps"), given("times-usual")) {
                    (Some(_), Some(_)) => {
                        return Err(bad("pps or times-usual, not both".into()));
                    }
                    (None, Some(times)) => FloodRate::TimesUsual(times),
                    (pps, None) => FloodRate::Pps(pps.unwrap_or(20_000.0)),
                };
                out.push(Event::Ddos {
                    victim: host("victim", 0),
                    sources: get("sources", 500.0).max(1.0) as usize,
                    rate,
                    start,
                    end: start + at(get("duration", 0.2)),
                    replace: get("replace", 0.0).clamp(0.0, 1.0),
                });
            }
            "port-scan" => out.push(Event::PortScan {
                scanner: host("scanner", hosts.saturating_sub(1)),
                victim: host("victim", 0),
                ports: get("ports", 1_024.0).clamp(1.0, 65_535.0) as u16,
                gap_ns: (get("gap-us", 100.0) * 1_000.0).max(1.0) as u64,
                start: at(get("start", 0.4)),
            }),
            "link-failure" => {
                let start = at(get("start", 0.4));
                out.push(Event::LinkFailure {
                    link: get("link", 0.5).clamp(0.0, 0.999),
                    start,
                    end: start + at(get("duration", 0.3)),
                });
            }
            "incast" => {
                let start = at(get("start", 0.4));
                out.push(Event::Incast {
                    victim: host("victim", 0),
                    senders: (get("senders", 4.0).max(1.0) as usize).min(hosts.saturating_sub(1)),
                    bytes: (get("kb", 256.0).max(1.5) * 1_000.0) as u64,
                    period_ns: (get("period-ms", 50.0) * 1e6).max(1e5) as u64,
                    start,
                    end: start + at(get("duration", 0.3)),
                });
            }
            "flash-crowd" => {
                let start = at(get("start", 0.4));
                out.push(Event::FlashCrowd {
                    target: host("target", 0),
                    clients: (get("clients", 16.0).max(1.0) as usize).min(hosts.saturating_sub(1)),
                    bps: get("mbps", 100.0).max(0.001) * 1e6,
                    bytes: (get("kb", 64.0).max(1.5) * 1_000.0) as u64,
                    start,
                    end: start + at(get("duration", 0.2)),
                });
            }
            "heavy-hitter" => {
                let start = at(get("start", 0.4));
                out.push(Event::HeavyHitter {
                    source: host("source", 0),
                    peers: (get("peers", 8.0).max(1.0) as usize).min(hosts.saturating_sub(1)),
                    bps: get("mbps", 500.0).max(0.001) * 1e6,
                    start,
                    end: start + at(get("duration", 0.3)),
                });
            }
            _ => {}
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flow_sizes_are_heavy_tailed_with_the_mean_asked_for() {
        let mut rng = Rng::new(1);
        let cumulative: Vec<f64> = (1..=16).map(f64::from).collect();
        let sizes: Vec<u64> = (0..50_000)
            .map(|_| background_flow(&mut rng, &cumulative, 10.0, 0).remaining)
            .collect();
        let mean = sizes.iter().sum::<u64>() as f64 / sizes.len() as f64;
        assert!((8.0..14.0).contains(&mean), "mean {mean}");
        let big = sizes.iter().filter(|s| **s > 100).count();
        assert!(big > 100, "{big} flows over 100 packets");
    }

    #[test]
    fn a_transfer_is_acknowledged_every_second_packet_the_other_way() {
        let [data, acks] = transfer(3, 7, (443, 40_000), 101, 12e6, 5_000);
        assert_eq!(
            (data.src_host, data.dst_host, data.dst_port),
            (3, 7, 40_000)
        );
        assert_eq!(
            (data.gap_ns, data.remaining, data.packet_bytes),
            (1_000_000, 101, 1_500)
        );
        assert_eq!((acks.src_host, acks.dst_host, acks.dst_port), (7, 3, 443));
        assert_eq!(
            (acks.gap_ns, acks.remaining, acks.packet_bytes),
            (2_000_000, 50, 64)
        );
        assert_eq!(acks.next_ns, 2_005_000);
    }

    #[test]
    fn a_hosts_usual_packets_are_what_the_background_draws_bring_it() {
        let cumulative = popularity(16);
        let usual = usual_pps(&cumulative, 100.0, 10.0);
        // Every flow goes somewhere: the hosts' shares add up to all the packets.
        assert!(
            (usual.iter().sum::<f64>() - 1_000.0).abs() < 1e-9,
            "{usual:?}"
        );
        // Each host's share of 200 000 drawn flows' destinations is its expected one.
        let mut rng = Rng::new(7);
        let n = 200_000;
        let mut to = [0u32; 16];
        for _ in 0..n {
            to[background_flow(&mut rng, &cumulative, 10.0, 0).dst_host] += 1;
        }
        for (host, count) in to.iter().enumerate() {
            let share = f64::from(*count) / f64::from(n);
            assert!(
                (share - usual[host] / 1_000.0).abs() < 0.005,
                "{host}: {share} {usual:?}"
            );
        }
        // Popularity is unequal: the busiest host gets several times the quietest's.
        let (lo, hi) = usual
            .iter()
            .fold((f64::MAX, 0.0f64), |(l, h), u| (l.min(*u), h.max(*u)));
        assert!(hi > 3.0 * lo, "{usual:?}");
    }

    #[test]
    fn scenarios_parse_and_bad_keys_are_named() {
        let e = parse_scenario(
            "ddos:victim=3,pps=1000,start=0.5,duration=0.1+link-failure",
            1_000,
            64,
        )
        .unwrap();
        assert_eq!(
            e[0],
            Event::Ddos {
                victim: 3,
                sources: 500,
                rate: FloodRate::Pps(1_000.0),
                start: 500,
                end: 600,
                replace: 0.0
            }
        );
        assert!(matches!(e[1], Event::LinkFailure { .. }));
        let err = parse_scenario("ddos:victum=3", 1_000, 64)
            .unwrap_err()
            .to_string();
        assert!(err.contains("victum"), "{err}");
        let ddos = |spec| parse_scenario(spec, 1_000, 64);
        assert!(ddos("ddos:pps=10,times-usual=2").is_err());
        assert!(matches!(
            ddos("ddos:times-usual=2").unwrap()[0],
            Event::Ddos {
                rate: FloodRate::TimesUsual(2.0),
                ..
            }
        ));
        assert!(parse_scenario("flood", 1_000, 64).is_err());
        let benign =
            parse_scenario("flash-crowd:clients=99+heavy-hitter:peers=2", 1_000, 64).unwrap();
        assert!(
            matches!(benign[0], Event::FlashCrowd { clients: 63, .. }),
            "{benign:?}"
        );
        assert!(
            matches!(benign[1], Event::HeavyHitter { peers: 2, .. }),
            "{benign:?}"
        );
        assert!(parse_scenario("none", 1_000, 64).unwrap().is_empty());
    }
}
