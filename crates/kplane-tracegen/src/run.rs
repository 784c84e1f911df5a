//! The time loop: steps of virtual time from 0, of 1 ms up to 1 Gb/s links and shorter on
//! faster ones ([`step_ns`]). In each step the hosts' packets take their paths; each egress
//! port is a fluid queue (the bytes offered beyond its rate in a step wait, up to a buffer of
//! [`BUFFER_BYTES`], the rest is dropped), and a packet's hop latency and queue occupancy are
//! the queue's at the start of the step. The switch in front of the
//! destination is the sink: it sends one report per packet that reaches it. Reports go over
//! UDP, spread over the collectors by source address; `pace` is called after every step with
//! the count sent and the virtual time reached (a caller that waits there paces the run to
//! its consumer, or to the wall clock).

use std::collections::{HashMap, HashSet};
use std::net::{SocketAddr, UdpSocket};

use serde_json::{Value, json};

use crate::TracegenError;
use crate::encode::{HopMeta, Packet, sink_report};
use crate::fabric::Fabric;
use crate::traffic::{
    Event, FLOW_BPS, Flow, Rng, background_flow, parse_scenario, popularity, transfer, usual_pps,
};

/// The longest step, and the time over which a port's utilisation is averaged (an EWMA of
/// weight 0.1 per such span).
const STEP_NS: u64 = 1_000_000;
/// The most a port drains in one step: 1 ms at 1 Gb/s.
const STEP_BYTES: f64 = 125_000.0;

/// A step short enough that a port drains at most [`STEP_BYTES`] in it. A fluid queue only
/// holds what arrives faster than its port drains within a step: at 10 Gb/s a 1 ms step
/// drains 1.25 MB, more than the whole buffer, so an incast's answers arriving together
/// within a millisecond would queue nothing.
fn step_ns(link_bps: f64) -> u64 {
    ((STEP_BYTES * 8.0 / link_bps * 1e9) as u64).clamp(10_000, STEP_NS)
}

/// Egress buffer per port.
pub const BUFFER_BYTES: f64 = 512_000.0;
/// Hops a packet may cross (the metadata header's initial remaining hop count).
const MAX_HOPS: u8 = 8;

#[derive(Clone, Debug)]
pub struct Config {
    /// `three-tier:E,A,C,H` ([`Fabric::parse`]).
    pub fabric: String,
    pub link_mbps: f64,
    /// Background flow arrivals per second.
    pub flows: f64,
    /// Mean packets per background flow.
    pub mean_packets: f64,
    pub seconds: f64,
    pub seed: u64,
    /// [`crate::traffic`]'s scenarios.
    pub scenario: String,
    /// Virtual time's origin in the switches' timestamps and the ground truth, ns since the
    /// Unix epoch (0: time from 0, as the emulator's; the current time for a live run).
    pub start_ns: u64,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            fabric: "three-tier".into(),
            link_mbps: 1_000.0,
            flows: 400.0,
            mean_packets: 10.0,
            seconds: 60.0,
            seed: 1,
            scenario: "none".into(),
            start_ns: 0,
        }
    }
}

/// What a run did.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// Ground truth: `ddos_start`/`ddos_end` (`victim`; at the start `sources` and `pps`),
    /// `port_scan` (`scanner`, `victim`, `victims`), `link_down`/`link_up` (`link`: node ids,
    /// `ports`: each end's node id and port), `microburst` (an incast: `target`, `queue` — the
    /// victim's edge switch's `node` id and `port` —, `queues` — that one and every port where
    /// answers converge on their way — and `sources`), each with `t_ns` and, for the starts,
    /// `end_ns`.
    pub events: Vec<Value>,
    pub reports_sent: u64,
    pub send_errors: u64,
    /// Packets dropped at a full queue or with no path left.
    pub dropped: u64,
    pub virtual_seconds: f64,
    pub hosts: usize,
}

#[derive(Debug, Default, Clone, Copy)]
struct Queue {
    bytes: f64,
    offered: f64,
    /// Share of the link rate used (exponentially weighted over steps).
    utilization: f64,
}

fn ip_text(ip: [u8; 4]) -> String {
    format!("{}.{}.{}.{}", ip[0], ip[1], ip[2], ip[3])
}

fn hash_of(f: &Flow) -> u64 {
    // FNV-1a over the 5-tuple (the destination as its host index).
    f.src
        .iter()
        .copied()
        .chain(f.dst_host.to_be_bytes())
        .chain(f.src_port.to_be_bytes())
        .chain(f.dst_port.to_be_bytes())
        .chain([f.protocol])
        .fold(0xCBF2_9CE4_8422_2325, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01B3)
        })
}

/// `n` hosts spread over the fabric: every (hosts / (n + 1))-th after `from`, never `from`
/// (`n` is below the hosts' count).
fn spread(from: usize, n: usize, hosts: usize) -> Vec<usize> {
    let stride = (hosts / (n + 1)).max(1);
    (1..=n).map(|j| (from + j * stride) % hosts).collect()
}

/// An incast's ground truth: a `microburst` at the victim's edge port, with `queues` — every
/// egress port two or more of the `answers` cross on their way (where they converge; a single
/// answer at line rate queues little), the victim's edge port first.
fn incast_truth(
    fabric: &Fabric,
    victim: usize,
    answers: Vec<Flow>,
    down: &HashSet<(usize, usize)>,
    start: u64,
    end: u64,
) -> Value {
    let id = |sw: usize| fabric.switches[sw].id;
    let v = &fabric.hosts[victim];
    let mut crossing: HashMap<(usize, u16), usize> = HashMap::new();
    for a in &answers {
        for hop in fabric
            .path(a.src_host, victim, hash_of(a), down)
            .unwrap_or_default()
        {
            *crossing.entry((hop.switch, hop.egress)).or_default() += 1;
        }
    }
    let edge = (v.edge, v.port);
    let mut met: Vec<(usize, u16)> = crossing
        .into_iter()
        .filter(|(q, n)| *n >= 2 && *q != edge)
        .map(|(q, _)| q)
        .collect();
    met.sort_unstable();
    let queues: Vec<Value> = std::iter::once(edge)
        .chain(met)
        .map(|(sw, port)| json!({"node": id(sw), "port": port}))
        .collect();
    let sources: Vec<String> = answers.iter().map(|a| ip_text(a.src)).collect();
    json!({"t_ns": start, "kind": "microburst", "target": ip_text(v.ip),
        "queue": queues[0], "queues": queues, "sources": sources, "end_ns": end})
}

/// Runs `cfg`, sending reports to `collectors` (none: counted, not sent).
pub fn run(
    cfg: &Config,
    collectors: &[SocketAddr],
    mut pace: impl FnMut(u64, u64),
) -> Result<Outcome, TracegenError> {
    let fabric = Fabric::parse(&cfg.fabric)?;
    let hosts = fabric.hosts.len();
    let duration = (cfg.seconds * 1e9) as u64;
    let events = parse_scenario(&cfg.scenario, duration, hosts)?;
    let socket = if collectors.is_empty() {
        None
    } else {
        Some(UdpSocket::bind("0.0.0.0:0")?)
    };
    let rate_bps = cfg.link_mbps * 1e6;
    let step = step_ns(rate_bps);
    // The utilisation EWMA's weight per step, for a weight of 0.1 per millisecond.
    let weight = 1.0 - 0.9f64.powf(step as f64 / STEP_NS as f64);
    let cumulative = popularity(hosts);
    let usual = usual_pps(&cumulative, cfg.flows, cfg.mean_packets);
    let mut rng = Rng::new(cfg.seed);
    let mut out = Outcome {
        hosts,
        ..Outcome::default()
    };
    let mut down: HashSet<(usize, usize)> = HashSet::new();
    let mut queues: HashMap<(usize, u16), Queue> = HashMap::new();
    let mut seq = vec![0u32; fabric.switches.len()];
    let mut flows: Vec<Flow> = Vec::new();
    let mut next_arrival = 0.0f64;
    // Per DDoS: its spoofed sources (address, entry host) once started, and its fractional
    // packets carried between steps.
    let mut spoofed: Vec<Vec<([u8; 4], usize)>> = vec![Vec::new(); events.len()];
    let mut carry = vec![0.0f64; events.len()];
    // Per flash crowd: when its next fetch arrives, ns.
    let mut next_fetch: Vec<f64> = events
        .iter()
        .map(|e| match e {
            Event::FlashCrowd { start, .. } => *start as f64,
            _ => 0.0,
        })
        .collect();
    // Per event: the hosts taking part beside its own (an incast's senders, a crowd's
    // clients, a copy's peers), spread over the fabric.
    let taking_part: Vec<Vec<usize>> = events
        .iter()
        .map(|e| match *e {
            Event::Incast {
                victim, senders, ..
            } => spread(victim, senders, hosts),
            Event::FlashCrowd {
                target, clients, ..
            } => spread(target, clients, hosts),
            Event::HeavyHitter { source, peers, .. } => spread(source, peers, hosts),
            _ => Vec::new(),
        })
        .collect();
    let ips =
        |hs: &[usize]| -> Vec<String> { hs.iter().map(|h| ip_text(fabric.hosts[*h].ip)).collect() };
    let id = |sw: usize| fabric.switches[sw].id;

    let mut t = 0u64;
    while t < duration {
        let end = t + step;
        let mut emitted: Vec<Flow> = Vec::new();
        let mut replace: f64 = 0.0;
        for (i, e) in events.iter().enumerate() {
            match *e {
                Event::LinkFailure {
                    link,
                    start,
                    end: up,
                } => {
                    let (a, b) = fabric.links[(fabric.links.len() as f64 * link) as usize];
                    let ports = json!([[id(a), fabric.port(a, b)], [id(b), fabric.port(b, a)]]);
                    if (t..end).contains(&start) {
                        down.insert((a, b));
                        out.events.push(json!({"t_ns": start, "kind": "link_down",
                            "link": [id(a), id(b)], "ports": ports, "end_ns": up}));
                    }
                    if (t..end).contains(&up) {
                        down.remove(&(a, b));
                        out.events.push(json!({"t_ns": up, "kind": "link_up",
                            "link": [id(a), id(b)], "ports": ports}));
                    }
                }
                Event::Ddos {
                    victim,
                    sources,
                    rate,
                    start,
                    end: stop,
                    replace: r,
                } => {
                    let pps = rate.pps(usual[victim]);
                    if (t..end).contains(&start) {
                        spoofed[i] = (0..sources)
                            .map(|_| {
                                let x = rng.next_u64();
                                let ip = [198, 18 + (x & 1) as u8, (x >> 8) as u8, (x >> 16) as u8];
                                let mut entry = rng.below(hosts - 1);
                                if entry >= victim {
                                    entry += 1;
                                }
                                (ip, entry)
                            })
                            .collect();
                        let names: Vec<String> =
                            spoofed[i].iter().map(|(ip, _)| ip_text(*ip)).collect();
                        out.events.push(json!({"t_ns": start, "kind": "ddos_start",
                            "victim": ip_text(fabric.hosts[victim].ip), "sources": names,
                            "pps": pps, "end_ns": stop}));
                    }
                    if (t..end).contains(&stop) {
                        out.events.push(json!({"t_ns": stop, "kind": "ddos_end",
                            "victim": ip_text(fabric.hosts[victim].ip)}));
                    }
                    if start < end && t < stop {
                        replace = replace.max(r);
                        carry[i] += pps * step as f64 / 1e9;
                        while carry[i] >= 1.0 {
                            carry[i] -= 1.0;
                            let (src, entry) = spoofed[i][rng.below(spoofed[i].len())];
                            emitted.push(Flow {
                                src,
                                src_host: entry,
                                dst_host: victim,
                                protocol: 17,
                                src_port: 1_024 + rng.below(60_000) as u16,
                                dst_port: 80,
                                packet_bytes: 64,
                                tcp_flags: 0,
                                remaining: 1,
                                gap_ns: 0,
                                next_ns: t.max(start) + rng.below(step as usize) as u64,
                            });
                        }
                    }
                }
                Event::Incast {
                    victim,
                    senders,
                    bytes,
                    period_ns,
                    start,
                    end: stop,
                } => {
                    // Each answering over one connection (one 5-tuple, one path).
                    let answer = |j: usize| {
                        let s = taking_part[i][j];
                        Flow {
                            src: fabric.hosts[s].ip,
                            src_host: s,
                            dst_host: victim,
                            protocol: 6,
                            src_port: 40_000 + j as u16,
                            dst_port: 5_001,
                            packet_bytes: 1_500,
                            tcp_flags: 0x18,
                            remaining: bytes.div_ceil(1_500),
                            gap_ns: (1_500.0 * 8.0 / rate_bps * 1e9) as u64,
                            next_ns: 0,
                        }
                    };
                    if (t..end).contains(&start) {
                        out.events.push(incast_truth(
                            &fabric,
                            victim,
                            (0..senders).map(answer).collect(),
                            &down,
                            start,
                            stop,
                        ));
                    }
                    // Burst k begins at start + k · period: every answer at once, back to back
                    // at line rate.
                    let mut k = t.saturating_sub(start).div_ceil(period_ns);
                    while start + k * period_ns < end.min(stop) {
                        for j in 0..senders {
                            flows.push(Flow {
                                next_ns: start + k * period_ns,
                                ..answer(j)
                            });
                        }
                        k += 1;
                    }
                }
                Event::FlashCrowd {
                    target,
                    bps,
                    bytes,
                    start,
                    end: stop,
                    ..
                } => {
                    let who = &taking_part[i];
                    if (t..end).contains(&start) {
                        out.events.push(json!({"t_ns": start, "kind": "flash_crowd",
                            "target": ip_text(fabric.hosts[target].ip), "clients": ips(who),
                            "end_ns": stop}));
                    }
                    // Fetches arrive at random; each request is answered 100 µs later at the
                    // generator's flow rate.
                    let per_ns = bps / (bytes as f64 * 8.0) / 1e9;
                    while next_fetch[i] < end.min(stop) as f64 {
                        let at = next_fetch[i] as u64;
                        let client = who[rng.below(who.len())];
                        let port = 32_768 + rng.below(28_000) as u16;
                        emitted.push(Flow {
                            src: fabric.hosts[client].ip,
                            src_host: client,
                            dst_host: target,
                            protocol: 6,
                            src_port: port,
                            dst_port: 443,
                            packet_bytes: 576,
                            tcp_flags: 0x18,
                            remaining: 1,
                            gap_ns: 0,
                            next_ns: at,
                        });
                        let [mut answer, mut acks] = transfer(
                            target,
                            client,
                            (443, port),
                            bytes.div_ceil(1_500),
                            FLOW_BPS,
                            at + 100_000,
                        );
                        answer.src = fabric.hosts[target].ip;
                        acks.src = fabric.hosts[client].ip;
                        flows.extend([answer, acks]);
                        next_fetch[i] += rng.exponential(1.0 / per_ns);
                    }
                }
                Event::HeavyHitter {
                    source,
                    peers,
                    bps,
                    start,
                    end: stop,
                } => {
                    if (t..end).contains(&start) {
                        let to = &taking_part[i];
                        out.events
                            .push(json!({"t_ns": start, "kind": "heavy_hitter_start",
                            "source": ip_text(fabric.hosts[source].ip), "flows": peers,
                            "peers": ips(to), "end_ns": stop}));
                        let each = bps / peers as f64;
                        let packets = (each * (stop - start) as f64 / 1e9 / 12_000.0) as u64;
                        for (j, &peer) in to.iter().enumerate() {
                            let [mut copy, mut acks] = transfer(
                                source,
                                peer,
                                (50_000 + j as u16, 873),
                                packets,
                                each,
                                start,
                            );
                            copy.src = fabric.hosts[source].ip;
                            acks.src = fabric.hosts[peer].ip;
                            flows.extend([copy, acks]);
                        }
                    }
                }
                Event::PortScan {
                    scanner,
                    victim,
                    ports,
                    gap_ns,
                    start,
                } => {
                    let last = start + u64::from(ports) * gap_ns;
                    if (t..end).contains(&start) {
                        out.events.push(json!({"t_ns": start, "kind": "port_scan",
                            "scanner": ip_text(fabric.hosts[scanner].ip),
                            "victim": ip_text(fabric.hosts[victim].ip),
                            "victims": [ip_text(fabric.hosts[victim].ip)],
                            "ports": [1, ports], "end_ns": last}));
                    }
                    // Probe k goes at start + k · gap.
                    let first = t.saturating_sub(start).div_ceil(gap_ns).max(1);
                    let mut k = first;
                    while k <= u64::from(ports) && start + k * gap_ns < end {
                        emitted.push(Flow {
                            src: fabric.hosts[scanner].ip,
                            src_host: scanner,
                            dst_host: victim,
                            protocol: 6,
                            src_port: 51_000,
                            dst_port: k as u16,
                            packet_bytes: 64,
                            tcp_flags: 0x02,
                            remaining: 1,
                            gap_ns: 0,
                            next_ns: start + k * gap_ns,
                        });
                        k += 1;
                    }
                }
            }
        }
        // Background arrivals (fewer while a DDoS replaces part of it).
        let per_ns = cfg.flows * (1.0 - replace) / 1e9;
        if per_ns > 0.0 {
            next_arrival = next_arrival.max(t as f64);
            while next_arrival < end as f64 {
                let mut f =
                    background_flow(&mut rng, &cumulative, cfg.mean_packets, next_arrival as u64);
                f.src = fabric.hosts[f.src_host].ip;
                flows.push(f);
                next_arrival += rng.exponential(1.0 / per_ns);
            }
        } else {
            next_arrival = end as f64;
        }
        for f in &mut flows {
            while f.remaining > 0 && f.next_ns < end {
                let mut one = f.clone();
                one.remaining = 1;
                emitted.push(one);
                f.remaining -= 1;
                f.next_ns += f.gap_ns;
            }
        }
        flows.retain(|f| f.remaining > 0);

        for p in &emitted {
            let Some(path) = fabric.path(p.src_host, p.dst_host, hash_of(p), &down) else {
                out.dropped += 1;
                continue;
            };
            let bytes = f64::from(p.packet_bytes);
            let serialize = (bytes * 8.0 / rate_bps * 1e9) as u64;
            let mut at = cfg.start_ns + p.next_ns + 1_000;
            let mut metas = Vec::with_capacity(path.len());
            let mut lost = false;
            for hop in &path {
                let q = queues.entry((hop.switch, hop.egress)).or_default();
                if q.bytes + q.offered > BUFFER_BYTES {
                    lost = true;
                    break;
                }
                q.offered += bytes;
                let latency = 500 + rng.below(200) as u64 + (q.bytes * 8.0 / rate_bps * 1e9) as u64;
                metas.push(HopMeta {
                    node_id: id(hop.switch),
                    ingress_port: hop.ingress,
                    egress_port: hop.egress,
                    hop_latency_ns: latency.min(u64::from(u32::MAX)) as u32,
                    queue_id: 0,
                    queue_occupancy: (q.bytes / 1_500.0).ceil() as u32,
                    ingress_ts_ns: at,
                    egress_ts_ns: at + latency,
                    tx_utilization: (q.utilization * 1_000.0).round() as u32,
                });
                at += latency + serialize + 1_000;
            }
            if lost {
                out.dropped += 1;
                continue;
            }
            let Some((sink, upstream)) = metas.split_last() else {
                continue;
            };
            // The run ends at `duration` for every timestamp: a packet still in the fabric
            // then is not reported (a report past the end would open a window of its own).
            if sink.egress_ts_ns >= cfg.start_ns + duration {
                continue;
            }
            let s = &mut seq[path[path.len() - 1].switch];
            *s = s.wrapping_add(1);
            let packet = Packet {
                src: p.src,
                dst: fabric.hosts[p.dst_host].ip,
                protocol: p.protocol,
                src_port: p.src_port,
                dst_port: p.dst_port,
                length: p.packet_bytes,
                tcp_flags: p.tcp_flags,
            };
            let bytes = sink_report(*s, sink, upstream, &packet, MAX_HOPS - metas.len() as u8);
            match &socket {
                Some(sock) => {
                    let to = collectors[usize::from(p.src[3]) % collectors.len()];
                    match sock.send_to(&bytes, to) {
                        Ok(_) => out.reports_sent += 1,
                        Err(_) => out.send_errors += 1,
                    }
                }
                None => out.reports_sent += 1,
            }
        }
        let capacity = rate_bps / 8.0 * step as f64 / 1e9;
        for q in queues.values_mut() {
            q.utilization += weight * ((q.offered / capacity).min(1.0) - q.utilization);
            q.bytes = (q.bytes + q.offered - capacity).clamp(0.0, BUFFER_BYTES);
            q.offered = 0.0;
        }
        pace(out.reports_sent, end);
        t = end;
    }
    out.virtual_seconds = duration as f64 / 1e9;
    if cfg.start_ns > 0 {
        for e in &mut out.events {
            for k in ["t_ns", "end_ns"] {
                if let Some(v) = e[k].as_u64() {
                    e[k] = json!(v + cfg.start_ns);
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(scenario: &str) -> Config {
        Config {
            seconds: 2.0,
            scenario: scenario.into(),
            ..Config::default()
        }
    }

    #[test]
    fn a_clean_run_sends_about_the_configured_reports_and_an_attack_adds_them() {
        let clean = run(&cfg("none"), &[], |_, _| {}).unwrap();
        // 400 flows/s × 10 packets × 2 s, give or take the heavy tail.
        assert!((4_000..20_000).contains(&clean.reports_sent), "{clean:?}");
        assert!(clean.events.is_empty());
        let ddos = run(
            &cfg("ddos:victim=5,pps=5000,start=0.25,duration=0.5,sources=50"),
            &[],
            |_, _| {},
        )
        .unwrap();
        assert!(ddos.reports_sent > clean.reports_sent + 4_000, "{ddos:?}");
        let start = &ddos.events[0];
        assert_eq!(start["kind"], "ddos_start");
        assert_eq!(start["victim"], "172.16.1.15");
        assert_eq!(start["sources"].as_array().unwrap().len(), 50);
        assert_eq!(start["t_ns"], 500_000_000);
    }

    #[test]
    fn an_incast_fills_the_victims_edge_port_and_is_in_the_truth_as_a_microburst() {
        let clean = run(&cfg("none"), &[], |_, _| {}).unwrap();
        let incast = run(
            &cfg("incast:victim=5,senders=4,kb=300,period-ms=20,start=0.25,duration=0.5"),
            &[],
            |_, _| {},
        )
        .unwrap();
        // 50 bursts of 4 × 200 packets, less what the full queue dropped.
        let added = incast.reports_sent + incast.dropped - clean.reports_sent - clean.dropped;
        assert!((36_000..44_000).contains(&added), "{incast:?} vs {clean:?}");
        // Four senders at line rate into one port: the 512 kB buffer overflows.
        assert!(incast.dropped > clean.dropped + 1_000, "{incast:?}");
        let truth = &incast.events[0];
        assert_eq!(truth["kind"], "microburst");
        assert_eq!(truth["target"], "172.16.1.15");
        assert_eq!(truth["queue"], json!({"node": 1, "port": 6}));
        // The answers, from four other pods, meet before the victim's edge too: those ports
        // are the incast's as well.
        let queues = truth["queues"].as_array().unwrap();
        assert_eq!(queues[0], truth["queue"]);
        assert!(queues.len() >= 2, "{queues:?}");
        assert!(
            queues[1..].iter().all(|q| q["node"].as_u64() > Some(100)),
            "aggregation and core: {queues:?}"
        );
        assert_eq!(truth["sources"].as_array().unwrap().len(), 4);
        assert_eq!(
            (truth["t_ns"].as_u64(), truth["end_ns"].as_u64()),
            (Some(500_000_000), Some(1_500_000_000))
        );
    }

    #[test]
    fn steps_are_short_enough_for_a_fast_port_to_queue_an_incast() {
        assert_eq!(step_ns(100e6), 1_000_000);
        assert_eq!(step_ns(1e9), 1_000_000);
        assert_eq!(step_ns(10e9), 100_000);
        // Eight answers of 120 kB at once into a 10 Gb/s port: 960 kB in 96 µs, which its
        // 512 kB buffer cannot hold. A 1 ms step would drain them all (1.25 MB) and drop none.
        let mut fast = cfg("incast:victim=5,senders=8,kb=120,period-ms=20,start=0.25,duration=0.5");
        fast.link_mbps = 10_000.0;
        fast.flows = 50.0;
        let incast = run(&fast, &[], |_, _| {}).unwrap();
        fast.scenario = "none".into();
        let clean = run(&fast, &[], |_, _| {}).unwrap();
        // 50 bursts, each dropping what is over the buffer: about 300 of its 640 packets.
        assert!(
            incast.dropped > clean.dropped + 5_000,
            "{incast:?} vs {clean:?}"
        );
    }

    #[test]
    fn a_flash_crowd_is_fetches_answered_and_acknowledged_and_a_heavy_hitter_copies() {
        let clean = run(&cfg("none"), &[], |_, _| {}).unwrap();
        let added = |o: &Outcome| o.reports_sent + o.dropped - clean.reports_sent - clean.dropped;
        // 1 s of answers at 50 Mb/s in 64 kB fetches: 4 167 answer packets, half as many
        // acknowledgements, and about 98 requests.
        let crowd = run(
            &cfg("flash-crowd:target=5,clients=16,mbps=50,kb=64,start=0.25,duration=0.5"),
            &[],
            |_, _| {},
        )
        .unwrap();
        assert!((5_500..7_200).contains(&added(&crowd)), "{crowd:?}");
        let truth = &crowd.events[0];
        assert_eq!(truth["kind"], "flash_crowd");
        assert_eq!(truth["target"], "172.16.1.15");
        let clients = truth["clients"].as_array().unwrap();
        assert_eq!(clients.len(), 16);
        assert!(!clients.contains(&truth["target"]), "{clients:?}");
        // 1 s of copies at 200 Mb/s to 4 peers: 16 667 packets and 8 332 acknowledgements.
        let copy = run(
            &cfg("heavy-hitter:source=5,peers=4,mbps=200,start=0.25,duration=0.5"),
            &[],
            |_, _| {},
        )
        .unwrap();
        assert!((23_000..26_000).contains(&added(&copy)), "{copy:?}");
        let truth = &copy.events[0];
        assert_eq!(truth["kind"], "heavy_hitter_start");
        assert_eq!(truth["source"], "172.16.1.15");
        assert_eq!(truth["peers"].as_array().unwrap().len(), 4);
        assert_eq!(truth["end_ns"], 1_500_000_000);
    }

    #[test]
    fn a_failed_link_is_in_the_truth_with_its_ports_and_reports_reach_a_socket() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        let to = rx.local_addr().unwrap();
        let mut c = cfg("link-failure:link=0.5,start=0.1,duration=0.2");
        c.flows = 20.0;
        c.seconds = 0.5;
        let o = run(&c, &[to], |_, _| {}).unwrap();
        let down = &o.events[0];
        assert_eq!(down["kind"], "link_down");
        assert_eq!(down["ports"].as_array().unwrap().len(), 2);
        assert_eq!(o.events[1]["kind"], "link_up");
        assert!(o.reports_sent > 0);
        let mut buf = [0u8; 2048];
        let n = rx.recv(&mut buf).unwrap();
        assert_eq!(buf[0] >> 4, 2, "a Telemetry Report v2.0");
        assert!(n > 8 + 12 + 32 + 20);
    }
}
