//! Hosts' traffic: real Ethernet/IPv4 frames sent from the hosts' namespaces. Background
//! flows arrive as a Poisson process between random host pairs, each a mouse (10 packets of
//! 200 bytes) or an elephant (100 packets of 1000 bytes) paced at a fixed rate; scripted
//! attacks (a DDoS from several hosts, a port scan) run at given times, and each writes its
//! ground truth. Every host counts what it receives by source, so an attack's packets can be
//! counted at the victim.

use std::collections::{BTreeMap, BinaryHeap};
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use kplane_probe::packet_socket::PacketSocket;
use serde::Serialize;

use crate::{LabError, Result};

/// The background: flow arrivals and their make-up.
#[derive(Clone, Debug)]
pub struct Background {
    pub flows_per_second: f64,
    pub elephant_share: f64,
    /// Packets per second within one flow.
    pub flow_pps: f64,
}

impl Default for Background {
    fn default() -> Self {
        Self {
            flows_per_second: 5.0,
            elephant_share: 0.2,
            flow_pps: 50.0,
        }
    }
}

/// A scripted attack: `ddos:start=30s,duration=30s,victim=10.0.2.1,sources=3,pps=300` (from
/// the first `sources` other hosts, UDP to port 80, 64-byte packets) or
/// `port-scan:start=30s,duration=20s,scanner=10.0.1.1,target=10.0.2.1,pps=100` (TCP SYNs to
/// ports from 1 up).
#[derive(Clone, Debug, PartialEq)]
pub struct Attack {
    pub kind: AttackKind,
    pub start: Duration,
    pub duration: Duration,
    pub pps: f64,
}

#[derive(Clone, Debug, PartialEq)]
pub enum AttackKind {
    Ddos { victim: Ipv4Addr, sources: usize },
    PortScan { scanner: Ipv4Addr, target: Ipv4Addr },
}

impl Attack {
    pub fn parse(spec: &str) -> Result<Self> {
        let bad = |m: String| LabError::Topology(format!("--attack {spec:?}: {m}"));
        let (kind, rest) = spec
            .split_once(':')
            .ok_or_else(|| bad("expected KIND:key=value,…".into()))?;
        let mut kv: BTreeMap<&str, &str> = BTreeMap::new();
        for part in rest.split(',') {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| bad(format!("{part:?} is not key=value")))?;
            kv.insert(k.trim(), v.trim());
        }
        let mut take = |k: &str| kv.remove(k).ok_or_else(|| bad(format!("{k} is missing")));
        let duration = |v: &str| humantime::parse_duration(v).map_err(|e| bad(format!("{v}: {e}")));
        let addr = |v: &str| {
            v.parse::<Ipv4Addr>()
                .map_err(|_| bad(format!("{v} is not an IPv4 address")))
        };
        let start = duration(take("start")?)?;
        let length = duration(take("duration")?)?;
        let pps: f64 = take("pps")?
            .parse()
            .map_err(|_| bad("pps is not a number".into()))?;
        let kind = match kind {
            "ddos" => AttackKind::Ddos {
                victim: addr(take("victim")?)?,
                sources: take("sources")?
                    .parse()
                    .map_err(|_| bad("sources is not a number".into()))?,
            },
            "port-scan" => AttackKind::PortScan {
                scanner: addr(take("scanner")?)?,
                target: addr(take("target")?)?,
            },
            other => return Err(bad(format!("unknown kind {other} (ddos, port-scan)"))),
        };
        if let Some(k) = kv.keys().next() {
            return Err(bad(format!("unknown key {k}")));
        }
        if !(pps > 0.0 && pps <= 100_000.0) {
            return Err(bad("pps must be in (0, 100000]".into()));
        }
        Ok(Self {
            kind,
            start,
            duration: length,
            pps,
        })
    }
}

impl Attack {
    /// The hosts (indices into `ips`) that send it: a DDoS's first `sources` hosts other than
    /// the victim (at least one), a scan's scanner (the first host if it is not one of them).
    fn senders(&self, ips: &[Ipv4Addr]) -> Vec<usize> {
        match &self.kind {
            AttackKind::Ddos { victim, sources } => {
                let others: Vec<usize> = (0..ips.len()).filter(|h| ips[*h] != *victim).collect();
                let k = (*sources).clamp(1, others.len());
                others[..k].to_vec()
            }
            AttackKind::PortScan { scanner, .. } => {
                vec![ips.iter().position(|h| h == scanner).unwrap_or(0)]
            }
        }
    }
}

/// One attack as it ran: what `kplane lab` writes to its truth file, a JSON line each.
#[derive(Clone, Debug, Serialize)]
pub struct Truth {
    pub kind: &'static str,
    pub start_ns: u64,
    pub end_ns: u64,
    pub victim: Ipv4Addr,
    pub attackers: Vec<Ipv4Addr>,
}

/// Packets each host received, by source address.
pub type Received = Arc<Mutex<BTreeMap<Ipv4Addr, BTreeMap<Ipv4Addr, u64>>>>;

/// An Ethernet/IPv4 frame of `bytes` bytes from `src` to `dst`: UDP, or a TCP SYN when `syn`.
pub fn frame(
    src: Ipv4Addr,
    dst: Ipv4Addr,
    sport: u16,
    dport: u16,
    bytes: usize,
    syn: bool,
) -> Vec<u8> {
    let l4 = if syn { 20 } else { 8 };
    let total = bytes.max(14 + 20 + l4);
    let mut f = vec![0u8; total];
    // The switches forward by IPv4 address: any MAC does (the hosts' kernels ignore it).
    f[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x02]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip = &mut f[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&((total - 14) as u16).to_be_bytes());
    ip[8] = 64;
    ip[9] = if syn { 6 } else { 17 };
    ip[12..16].copy_from_slice(&src.octets());
    ip[16..20].copy_from_slice(&dst.octets());
    let sum = ip
        .chunks(2)
        .fold(0u32, |s, w| s + u32::from(u16::from_be_bytes([w[0], w[1]])));
    let sum = (sum & 0xffff) + (sum >> 16);
    let sum = !((sum & 0xffff) + (sum >> 16)) as u16;
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    let l = &mut f[34..34 + l4];
    l[0..2].copy_from_slice(&sport.to_be_bytes());
    l[2..4].copy_from_slice(&dport.to_be_bytes());
    if syn {
        l[12] = 0x50;
        l[13] = 0x02;
        l[14..16].copy_from_slice(&1024u16.to_be_bytes());
    } else {
        l[4..6].copy_from_slice(&((total - 34) as u16).to_be_bytes());
    }
    f
}

/// Source and destination of an IPv4 frame.
fn addresses(f: &[u8]) -> Option<(Ipv4Addr, Ipv4Addr)> {
    if f.len() < 34 || f[12..14] != [0x08, 0x00] {
        return None;
    }
    let a = |i: usize| Ipv4Addr::new(f[i], f[i + 1], f[i + 2], f[i + 3]);
    Some((a(26), a(30)))
}

/// A small deterministic generator (xorshift64*): runs with a seed repeat.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    /// An exponential gap with this rate, seconds.
    fn gap(&mut self, rate: f64) -> f64 {
        -(1.0 - self.unit()).ln() / rate
    }
}

/// Something that sends packets at its own pace.
#[derive(Debug, PartialEq, Eq)]
enum Sender {
    /// The next background flow arrives.
    Arrivals,
    Flow {
        src: usize,
        dst: usize,
        sport: u16,
        left: u32,
        bytes: usize,
    },
    Attack(usize),
}

/// A frame and the host that sends it.
type Packet = (usize, Vec<u8>);

/// The hosts: address and sending socket (opened in its namespace).
#[derive(Debug)]
pub struct Hosts {
    pub ips: Vec<Ipv4Addr>,
    pub sockets: Vec<PacketSocket>,
}

/// Sends the background and the attacks from `hosts` until `stop`; each attack's truth is
/// appended to `truth` (a JSON line) as it starts. Returns the packets sent.
pub fn send(
    hosts: Hosts,
    background: Background,
    attacks: Vec<Attack>,
    seed: u64,
    truth: Option<std::path::PathBuf>,
    stop: Arc<AtomicBool>,
) -> Result<u64> {
    let n = hosts.ips.len();
    if n < 2 {
        return Err(LabError::Topology("traffic needs two hosts or more".into()));
    }
    let mut rng = Rng(seed | 1);
    let begin = Instant::now();
    let wall0 = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    // (next time in ns since begin, tie-breaker, sender), soonest first.
    let mut queue: BinaryHeap<std::cmp::Reverse<(u64, u64, usize)>> = BinaryHeap::new();
    let mut senders: Vec<Option<Sender>> = Vec::new();
    let push =
        |queue: &mut BinaryHeap<_>, senders: &mut Vec<Option<Sender>>, at: f64, s: Sender| {
            senders.push(Some(s));
            let i = senders.len() - 1;
            queue.push(std::cmp::Reverse(((at * 1e9) as u64, i as u64, i)));
        };
    if background.flows_per_second > 0.0 {
        push(&mut queue, &mut senders, 0.0, Sender::Arrivals);
    }
    for (i, a) in attacks.iter().enumerate() {
        push(
            &mut queue,
            &mut senders,
            a.start.as_secs_f64(),
            Sender::Attack(i),
        );
    }
    // Each attack's sending hosts, by index, chosen once: what it sends from and its truth.
    let sources: Vec<Vec<usize>> = attacks.iter().map(|a| a.senders(&hosts.ips)).collect();
    let mut attack_sent = vec![0u64; attacks.len()];
    let mut sent = 0u64;
    let mut errors = 0u64;
    while let Some(std::cmp::Reverse((at, _, i))) = queue.pop() {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let due = Duration::from_nanos(at);
        let now = begin.elapsed();
        if due > now {
            std::thread::sleep((due - now).min(Duration::from_millis(100)));
            if begin.elapsed() < due {
                queue.push(std::cmp::Reverse((at, i as u64, i)));
                continue;
            }
        }
        let t = at as f64 / 1e9;
        let Some(sender) = senders[i].take() else {
            continue;
        };
        let (packet, next): (Option<Packet>, Option<(f64, Sender)>) = match sender {
            Sender::Arrivals => {
                let src = rng.below(n);
                let dst = (src + 1 + rng.below(n - 1)) % n;
                let elephant = rng.unit() < background.elephant_share;
                let flow = Sender::Flow {
                    src,
                    dst,
                    sport: 10_000 + rng.below(50_000) as u16,
                    left: if elephant { 100 } else { 10 },
                    bytes: if elephant { 1000 } else { 200 },
                };
                push(&mut queue, &mut senders, t, flow);
                (
                    None,
                    Some((t + rng.gap(background.flows_per_second), Sender::Arrivals)),
                )
            }
            Sender::Flow {
                src,
                dst,
                sport,
                left,
                bytes,
            } => {
                let f = frame(hosts.ips[src], hosts.ips[dst], sport, 5001, bytes, false);
                let next = (left > 1).then(|| {
                    (
                        t + 1.0 / background.flow_pps,
                        Sender::Flow {
                            src,
                            dst,
                            sport,
                            left: left - 1,
                            bytes,
                        },
                    )
                });
                (Some((src, f)), next)
            }
            Sender::Attack(k) => {
                let a = &attacks[k];
                let end = (a.start + a.duration).as_secs_f64();
                let nth = attack_sent[k];
                attack_sent[k] += 1;
                let from = sources[k][nth as usize % sources[k].len()];
                let (src, f) = match &a.kind {
                    AttackKind::Ddos { victim, .. } => (
                        from,
                        frame(
                            hosts.ips[from],
                            *victim,
                            40_000 + (nth % 1000) as u16,
                            80,
                            64,
                            false,
                        ),
                    ),
                    AttackKind::PortScan { scanner, target } => (
                        from,
                        frame(
                            *scanner,
                            *target,
                            55_555,
                            1 + (nth % 65_535) as u16,
                            64,
                            true,
                        ),
                    ),
                };
                if nth == 0
                    && let Some(path) = &truth
                {
                    let attackers = sources[k].iter().map(|h| hosts.ips[*h]).collect();
                    record(path, a, attackers, wall0)?;
                }
                let next = (t + 1.0 / a.pps < end).then(|| (t + 1.0 / a.pps, Sender::Attack(k)));
                (Some((src, f)), next)
            }
        };
        if let Some((src, f)) = packet {
            match hosts.sockets[src].send(&f) {
                Ok(()) => sent += 1,
                Err(e) => {
                    errors += 1;
                    if errors == 1 {
                        tracing::warn!(host = %hosts.ips[src], error = %e, "lab traffic: a send failed");
                    }
                }
            }
        }
        if let Some((at, s)) = next {
            senders[i] = Some(s);
            queue.push(std::cmp::Reverse(((at * 1e9) as u64, i as u64, i)));
        }
    }
    if errors > 0 {
        tracing::warn!(errors, "lab traffic: sends failed");
    }
    Ok(sent)
}

/// Appends an attack's ground truth as it starts.
fn record(
    path: &std::path::Path,
    a: &Attack,
    attackers: Vec<Ipv4Addr>,
    wall0: Duration,
) -> Result<()> {
    use std::io::Write;
    let start_ns = (wall0 + a.start).as_nanos() as u64;
    let (kind, victim) = match &a.kind {
        AttackKind::Ddos { victim, .. } => ("ddos", *victim),
        AttackKind::PortScan { target, .. } => ("port_scan", *target),
    };
    let truth = Truth {
        kind,
        start_ns,
        end_ns: start_ns + a.duration.as_nanos() as u64,
        victim,
        attackers,
    };
    let line = serde_json::to_string(&truth).unwrap_or_default();
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(LabError::io(format!("opening {}", path.display())))?;
    writeln!(f, "{line}").map_err(LabError::io(format!("writing {}", path.display())))
}

/// Counts, until `stop`, what host `ip` receives on `socket`, by source, into `received`.
pub fn count(ip: Ipv4Addr, socket: PacketSocket, received: Received, stop: Arc<AtomicBool>) {
    let mut buf = vec![0u8; 2048];
    while !stop.load(Ordering::Relaxed) {
        if let Ok(Some(n)) = socket.recv(&mut buf)
            && let Some((src, dst)) = addresses(&buf[..n])
            && dst == ip
            && let Ok(mut r) = received.lock()
        {
            *r.entry(ip).or_default().entry(src).or_default() += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attacks_parse_and_bad_ones_say_why() {
        let a =
            Attack::parse("ddos:start=30s,duration=20s,victim=10.0.2.1,sources=3,pps=300").unwrap();
        assert_eq!(a.start, Duration::from_secs(30));
        assert_eq!(
            a.kind,
            AttackKind::Ddos {
                victim: "10.0.2.1".parse().unwrap(),
                sources: 3
            }
        );
        let s =
            Attack::parse("port-scan:start=1s,duration=5s,scanner=10.0.1.1,target=10.0.2.1,pps=50")
                .unwrap();
        assert!(matches!(s.kind, AttackKind::PortScan { .. }));
        for (spec, why) in [
            ("ddos:start=1s", "duration is missing"),
            ("flood:start=1s,duration=1s,pps=1", "unknown kind"),
            (
                "ddos:start=1s,duration=1s,pps=1,victim=10.0.0.1,sources=1,colour=red",
                "unknown key colour",
            ),
            (
                "ddos:start=1s,duration=1s,pps=0,victim=10.0.0.1,sources=1",
                "pps must be",
            ),
        ] {
            let e = Attack::parse(spec).unwrap_err().to_string();
            assert!(e.contains(why), "{spec}: {e}");
        }
    }

    #[test]
    fn a_frame_is_well_formed_ipv4() {
        let f = frame(
            "10.0.1.1".parse().unwrap(),
            "10.0.2.1".parse().unwrap(),
            1234,
            80,
            200,
            false,
        );
        assert_eq!(f.len(), 200);
        assert_eq!(
            addresses(&f),
            Some(("10.0.1.1".parse().unwrap(), "10.0.2.1".parse().unwrap()))
        );
        // The header checksum sums to 0xffff.
        let sum = f[14..34]
            .chunks(2)
            .fold(0u32, |s, w| s + u32::from(u16::from_be_bytes([w[0], w[1]])));
        assert_eq!((sum & 0xffff) + (sum >> 16), 0xffff);
        assert_eq!(u16::from_be_bytes([f[38], f[39]]), 200 - 34, "UDP length");
        let syn = frame(
            "10.0.1.1".parse().unwrap(),
            "10.0.2.1".parse().unwrap(),
            1,
            22,
            64,
            true,
        );
        assert_eq!((syn[23], syn[47]), (6, 0x02), "TCP, SYN");
    }
}
