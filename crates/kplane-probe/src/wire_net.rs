//! The monitoring module's network on real switches: GPINT probes as Ethernet frames on the
//! monitor's links (one `AF_PACKET` socket per switch it is attached to), and what comes
//! back on them decoded by kplane's wire decoder into what the monitor hears. Every probe
//! that returns with measurements — complete (0x17) or a failure notification (0x21) — is
//! forwarded to the collector as a Telemetry Report v2.0 whose inner packet is the probe,
//! so probes feed the same pipeline as any other telemetry (the decoder turns each DLV into
//! a hop).

use std::collections::{BTreeMap, HashMap};
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::Plan;
use crate::monitor::{Heard, ProbeNet};
use kplane_wire::build::{ip_packet, report_v20_ipv4};
use kplane_wire::packet::Telemetry;
use kplane_wire::papers::{DlvHeader, GpintProbe, ProbeKind, SrHeader};
use kplane_wire::{DecodeOptions, Decoded, Start, decode_frame};
use serde::Serialize;
use serde_json::Value;

use crate::packet_socket::PacketSocket;

/// IP protocol of GPINT probes (the decoder's and the P4 program's default).
const PROBE_PROTOCOL: u8 = 254;

/// The monitor's link to a switch: its interface there, and the switch's port facing it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MonitorLink {
    pub switch: u32,
    pub interface: String,
    pub port: u8,
}

impl std::str::FromStr for MonitorLink {
    type Err = String;

    /// `SWITCH=INTERFACE:PORT`, e.g. `1=veth-m1:3`.
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("{s:?} is not SWITCH=INTERFACE:PORT (e.g. 1=eth1:3)");
        let (switch, rest) = s.split_once('=').ok_or_else(bad)?;
        let (interface, port) = rest.rsplit_once(':').ok_or_else(bad)?;
        if interface.is_empty() {
            return Err(bad());
        }
        Ok(Self {
            switch: switch.trim().parse().map_err(|_| bad())?,
            interface: interface.to_string(),
            port: port.trim().parse().map_err(|_| bad())?,
        })
    }
}

/// A probe plan as `GET /v1/probe-plans` gives it, over switch indices.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LivePlan {
    /// The intent that asked for it.
    pub intent: String,
    /// Switch ids by index.
    pub ids: Vec<u32>,
    /// (a, b) → a's port towards b.
    pub ports: HashMap<(usize, usize), u8>,
    /// Req META's request type: 0 rule hits, 1 port counters.
    pub request_type: u8,
    /// Per switch, its SR header's MEA range: port counters from the high byte's port to
    /// the low byte's (rule hits: 1).
    pub mea: HashMap<usize, u16>,
    pub plan: Plan,
}

impl LivePlan {
    /// One entry of `GET /v1/probe-plans`' `plans`.
    pub fn from_json(v: &Value) -> Result<Self, crate::ProbeError> {
        Self::parse(v).map_err(crate::ProbeError::Plan)
    }

    fn parse(v: &Value) -> Result<Self, String> {
        if let Some(e) = v["error"].as_str() {
            return Err(format!("plan {}: {e}", v["intent"]));
        }
        let ports = v["measure"] == "port-packets";
        let mut out = Self {
            intent: v["intent"].as_str().unwrap_or_default().to_string(),
            request_type: u8::from(ports),
            ..Self::default()
        };
        let probes = v["probes"]
            .as_array()
            .ok_or_else(|| format!("plan {}: no probes", v["intent"]))?;
        for probe in probes {
            let switches = probe["switches"]
                .as_array()
                .ok_or("a probe without switches")?
                .iter()
                .map(|s| s.as_u64().map(|s| s as u32).ok_or("a switch id"))
                .collect::<Result<Vec<u32>, _>>()?;
            let path: Vec<usize> = switches.iter().map(|&s| out.index(s)).collect();
            let sr = probe["sr"].as_array().ok_or("a probe without sr")?;
            if sr.len() + 1 != path.len() {
                return Err(format!(
                    "a probe's sr has {} hops for {:?}",
                    sr.len(),
                    switches
                ));
            }
            let mea = probe["mea"].as_array().ok_or("a probe without mea")?;
            if mea.len() != path.len() {
                return Err(format!(
                    "a probe's mea has {} ranges for {switches:?}",
                    mea.len()
                ));
            }
            for (&at, range) in path.iter().zip(mea) {
                let range = if ports {
                    let port = |i: usize| {
                        range[i]
                            .as_u64()
                            .and_then(|p| u8::try_from(p).ok())
                            .ok_or_else(|| format!("mea: {range} is not two ports ≤ 255"))
                    };
                    (u16::from(port(0)?) << 8) | u16::from(port(1)?)
                } else {
                    1
                };
                out.mea.insert(at, range);
            }
            for (w, hop) in path.windows(2).zip(sr) {
                let port = hop["next_port"].as_u64().ok_or("sr: next_port")?;
                let port = u8::try_from(port).map_err(|_| format!("port {port} > 255"))?;
                out.ports.insert((w[0], w[1]), port);
            }
            out.plan.paths.push(path);
        }
        Ok(out)
    }

    fn index(&mut self, id: u32) -> usize {
        match self.ids.iter().position(|&s| s == id) {
            Some(i) => i,
            None => {
                self.ids.push(id);
                self.ids.len() - 1
            }
        }
    }

    /// The switch index whose DLV carries `sid` (a DLV holds the id's low 8 bits).
    fn by_sid(&self, sid: u8) -> Option<usize> {
        self.ids.iter().position(|&id| id as u8 == sid)
    }
}

/// What the network did, for the session lines and the operator.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct WireCounts {
    pub probes_sent: u64,
    /// Probes that could not be sent: no link to the first switch, no port to the next.
    pub probes_unroutable: u64,
    pub send_errors: u64,
    pub complete: u64,
    pub feedback: u64,
    pub failure_notices: u64,
    /// Frames on the monitor's links that are not probes for the monitor (ARP, IPv6, …).
    pub ignored_frames: u64,
    /// Probes whose request the monitor did not send (or has forgotten).
    pub unknown_requests: u64,
    pub reports_sent: u64,
    pub report_errors: u64,
}

impl WireCounts {
    /// What was counted since `before`.
    pub fn since(&self, before: &Self) -> Self {
        Self {
            probes_sent: self.probes_sent - before.probes_sent,
            probes_unroutable: self.probes_unroutable - before.probes_unroutable,
            send_errors: self.send_errors - before.send_errors,
            complete: self.complete - before.complete,
            feedback: self.feedback - before.feedback,
            failure_notices: self.failure_notices - before.failure_notices,
            ignored_frames: self.ignored_frames - before.ignored_frames,
            unknown_requests: self.unknown_requests - before.unknown_requests,
            reports_sent: self.reports_sent - before.reports_sent,
            report_errors: self.report_errors - before.report_errors,
        }
    }
}

/// Telemetry Reports to the collector.
#[derive(Debug)]
struct Reporter {
    socket: UdpSocket,
    collector: SocketAddr,
    sequence: u32,
}

impl Reporter {
    /// The probe's IP packet as the inner packet of a v2.0 report from the switch that sent
    /// it to the monitor.
    fn send(&mut self, node: u32, ip: &[u8]) -> std::io::Result<()> {
        self.sequence = (self.sequence + 1) & 0x3F_FFFF;
        let report = report_v20_ipv4(node, self.sequence, ip);
        self.socket.send_to(&report, self.collector).map(|_| ())
    }
}

/// The switches as the monitor reaches them.
#[derive(Debug)]
pub struct WireNet {
    started: Instant,
    links: HashMap<u32, (Arc<PacketSocket>, u8)>,
    heard: mpsc::Receiver<Vec<u8>>,
    stop: Arc<AtomicBool>,
    readers: Vec<JoinHandle<()>>,
    plan: LivePlan,
    /// Request → (start index, route) of the probes this session sent.
    sent: HashMap<u16, (usize, Vec<usize>)>,
    reporter: Option<Reporter>,
    source: Ipv4Addr,
    options: DecodeOptions,
    pub counts: WireCounts,
    /// Per switch id, the measurements the latest probe through it brought back (rule hits,
    /// or packets per port of its range in port order).
    pub measurements: BTreeMap<u32, Vec<u32>>,
    /// Per link (switch id, the next switch id on the probe's route), the deepest queue a
    /// probe found there this session: the DLV's queue depth is that of the port the probe
    /// left by.
    pub queue_depths: BTreeMap<(u32, u32), u8>,
}

impl WireNet {
    /// Opens a socket per link (a reader thread each); with `collector`, returned probes
    /// are reported there.
    pub fn open(
        links: &[MonitorLink],
        collector: Option<SocketAddr>,
        source: Ipv4Addr,
    ) -> std::io::Result<Self> {
        let (tx, heard) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let mut sockets = HashMap::new();
        let mut readers = Vec::new();
        for l in links {
            let socket = Arc::new(
                PacketSocket::open(&l.interface, Duration::from_millis(100))
                    .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", l.interface)))?,
            );
            sockets.insert(l.switch, (socket.clone(), l.port));
            let (tx, stop) = (tx.clone(), stop.clone());
            readers.push(std::thread::spawn(move || {
                let mut buf = vec![0u8; 9216];
                while !stop.load(Ordering::Relaxed) {
                    match socket.recv(&mut buf) {
                        Ok(Some(n)) => {
                            if tx.send(buf[..n].to_vec()).is_err() {
                                return;
                            }
                        }
                        Ok(None) => {}
                        Err(e) => {
                            tracing::warn!(interface = %socket.interface, error = %e, "probe receive");
                            std::thread::sleep(Duration::from_millis(100));
                        }
                    }
                }
            }));
        }
        let reporter = match collector {
            Some(collector) => Some(Reporter {
                socket: UdpSocket::bind(if collector.is_ipv4() {
                    "0.0.0.0:0"
                } else {
                    "[::]:0"
                })?,
                collector,
                sequence: 0,
            }),
            None => None,
        };
        let options = DecodeOptions {
            gpint_protocol: PROBE_PROTOCOL,
            ..DecodeOptions::default()
        };
        Ok(Self {
            started: Instant::now(),
            links: sockets,
            heard,
            stop,
            readers,
            plan: LivePlan::default(),
            sent: HashMap::new(),
            reporter,
            source,
            options,
            counts: WireCounts::default(),
            measurements: BTreeMap::new(),
            queue_depths: BTreeMap::new(),
        })
    }

    /// The plan the next session's routes index into.
    pub fn set_plan(&mut self, plan: LivePlan) {
        self.plan = plan;
        self.sent.clear();
    }

    /// Switches of the plan the monitor has no link to (a probe cannot start there).
    pub fn unattached(&self) -> Vec<u32> {
        let mut starts: Vec<u32> = self
            .plan
            .plan
            .paths
            .iter()
            .flatten()
            .map(|&i| self.plan.ids[i])
            .filter(|id| !self.links.contains_key(id))
            .collect();
        starts.sort_unstable();
        starts.dedup();
        starts
    }

    /// The probe frame for `route` from `start`: its SR stack is the next port at each
    /// switch, then the last switch's port towards the monitor.
    fn frame(&self, request: u16, route: &[usize], start: usize) -> Option<(u32, Vec<u8>)> {
        let ids = &self.plan.ids;
        let mut sr = Vec::with_capacity(route.len() - start);
        for w in route[start..].windows(2) {
            sr.push(*self.plan.ports.get(&(w[0], w[1]))?);
        }
        let (_, to_monitor) = self.links.get(&ids[*route.last()?])?;
        sr.push(*to_monitor);
        let sr: Vec<SrHeader> = sr
            .into_iter()
            .zip(&route[start..])
            .map(|(next_port, at)| SrHeader {
                next_port,
                measurement_range: self.plan.mea.get(at).copied().unwrap_or(1),
            })
            .collect();
        let mut body = Vec::new();
        GpintProbe::write(request, self.plan.request_type, &sr, &[], &mut body);
        let ip = ip_packet(
            self.source.into(),
            self.source.into(),
            PROBE_PROTOCOL,
            ProbeKind::DSCP_MEASUREMENT,
            &body,
        );
        let mut frame = Vec::with_capacity(14 + ip.len());
        frame.extend_from_slice(&[0xFF; 6]);
        frame.extend_from_slice(&[0x02, 0x6B, 0x70, 0, 0, 0x01]);
        frame.extend_from_slice(&0x0800u16.to_be_bytes());
        frame.extend_from_slice(&ip);
        Some((ids[route[start]], frame))
    }

    /// What a frame off a monitor link tells the monitor.
    fn hear(&mut self, frame: &[u8]) -> Option<Heard> {
        // (kind, request, SR headers left, DLV switch ids newest first)
        let decoded = match decode_frame(frame, Start::Ethernet, &self.options) {
            Ok(Decoded::Packet(p)) => match p.telemetry {
                Telemetry::Gpint(g) => Some((
                    g.kind,
                    g.request_id,
                    g.source_route().next().is_some(),
                    g.devices().collect::<Vec<DlvHeader>>(),
                    g.measurements().collect::<Vec<u32>>(),
                )),
                _ => None,
            },
            _ => None,
        };
        let Some((kind, request, in_transit, devices, values)) = decoded else {
            self.counts.ignored_frames += 1;
            return None;
        };
        let Some((start, route)) = self.sent.get(&request).cloned() else {
            self.counts.unknown_requests += 1;
            return None;
        };
        if kind == ProbeKind::Feedback {
            self.counts.feedback += 1;
            return Some(Heard::Feedback { request });
        }
        if in_transit && kind == ProbeKind::Measurement {
            // Still on its way (a misconfigured SR stack looped it back here). A failure
            // notice keeps the route it did not finish.
            self.counts.ignored_frames += 1;
            return None;
        }
        // DLV i (newest first) owns the next #MEA_i measurements.
        let mut values = values.into_iter();
        for d in &devices {
            let mine: Vec<u32> = values
                .by_ref()
                .take(usize::from(d.measurement_count))
                .collect();
            if let Some(i) = self.plan.by_sid(d.switch_id) {
                self.measurements.insert(self.plan.ids[i], mine);
                if let Some(next) = route
                    .iter()
                    .position(|&v| v == i)
                    .and_then(|p| route.get(p + 1))
                {
                    let depth = self
                        .queue_depths
                        .entry((self.plan.ids[i], self.plan.ids[*next]))
                        .or_default();
                    *depth = (*depth).max(d.queue_depth);
                }
            }
        }
        let dlvs: Vec<u8> = devices.iter().map(|d| d.switch_id).collect();
        let measured: Vec<usize> = dlvs.iter().filter_map(|&s| self.plan.by_sid(s)).collect();
        // The switch that sent it to the monitor pushed the newest DLV.
        let node = dlvs
            .first()
            .and_then(|&s| self.plan.by_sid(s))
            .map_or(0, |i| self.plan.ids[i]);
        self.report(node, &frame[14..]);
        Some(match kind {
            ProbeKind::FailureNotification => {
                self.counts.failure_notices += 1;
                Heard::Failure {
                    request,
                    // Each switch from `start` pushed one DLV; the last of them held it.
                    index: (start + dlvs.len()).saturating_sub(1).min(route.len() - 1),
                    measured,
                }
            }
            _ => {
                self.counts.complete += 1;
                Heard::Complete { request, measured }
            }
        })
    }

    fn report(&mut self, node: u32, ip: &[u8]) {
        if let Some(r) = &mut self.reporter {
            match r.send(node, ip) {
                Ok(()) => self.counts.reports_sent += 1,
                Err(e) => {
                    self.counts.report_errors += 1;
                    tracing::warn!(error = %e, "probe report to the collector");
                }
            }
        }
    }
}

impl ProbeNet for WireNet {
    fn now(&self) -> u64 {
        self.started.elapsed().as_nanos() as u64
    }

    fn send_probe(&mut self, request: u16, route: &[usize], start: usize) {
        self.sent.insert(request, (start, route.to_vec()));
        let Some((first, frame)) = self.frame(request, route, start) else {
            self.counts.probes_unroutable += 1;
            return;
        };
        let (socket, _) = &self.links[&first];
        match socket.send(&frame) {
            Ok(()) => self.counts.probes_sent += 1,
            Err(e) => {
                self.counts.send_errors += 1;
                tracing::warn!(interface = %socket.interface, error = %e, "probe send");
            }
        }
    }

    /// Live switches answer probes, not SNMP: the polling baseline runs in the experiments.
    fn send_snmp(&mut self, _request: u16, _switch: usize) {}

    fn next(&mut self, until_ns: u64) -> Option<Heard> {
        loop {
            let now = self.now();
            if now >= until_ns {
                return None;
            }
            match self
                .heard
                .recv_timeout(Duration::from_nanos(until_ns - now))
            {
                Ok(frame) => {
                    if let Some(h) = self.hear(&frame) {
                        return Some(h);
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => return None,
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    std::thread::sleep(Duration::from_nanos(until_ns - now));
                    return None;
                }
            }
        }
    }
}

impl Drop for WireNet {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for r in self.readers.drain(..) {
            let _ = r.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn plan() -> LivePlan {
        LivePlan::from_json(&json!({
            "intent": "i-1",
            "measure": "port-packets",
            "probes": [
                { "switches": [1, 2, 3], "mea": [[1, 2], [1, 3], [1, 2]], "sr": [
                    { "switch": 1, "next_port": 2 }, { "switch": 2, "next_port": 3 } ] },
                { "switches": [4], "mea": [[1, 4]], "sr": [] },
            ]
        }))
        .unwrap()
    }

    #[test]
    fn a_plan_from_the_api_indexes_its_switches_and_ports() {
        let p = plan();
        assert_eq!(p.ids, [1, 2, 3, 4]);
        assert_eq!(p.plan.paths, [vec![0, 1, 2], vec![3]]);
        assert_eq!(p.ports[&(0, 1)], 2);
        assert_eq!(p.ports[&(1, 2)], 3);
        assert_eq!((p.request_type, p.mea[&1], p.mea[&3]), (1, 0x0103, 0x0104));
        let bad =
            json!({ "probes": [ { "switches": [1, 2], "mea": [[0, 1], [0, 1]], "sr": [] } ] });
        assert!(
            LivePlan::from_json(&bad)
                .unwrap_err()
                .to_string()
                .contains("sr has 0 hops")
        );
        let err = json!({ "intent": "i-2", "error": "no such planner" });
        assert!(
            LivePlan::from_json(&err)
                .unwrap_err()
                .to_string()
                .contains("no such planner")
        );
    }

    #[test]
    fn monitor_links_parse_and_bad_ones_are_refused() {
        let l: MonitorLink = "7=veth-m7:3".parse().unwrap();
        assert_eq!((l.switch, l.interface.as_str(), l.port), (7, "veth-m7", 3));
        for bad in ["7", "7=veth", "x=veth:3", "7=:3", "7=veth:300"] {
            assert!(bad.parse::<MonitorLink>().is_err(), "{bad}");
        }
    }

    /// The frame a probe leaves in, decoded by kplane's decoder; a returned probe reported
    /// to the collector decodes as a GPINT probe inside a v2.0 report.
    #[test]
    fn probes_are_source_routed_to_the_monitor_and_reported_as_telemetry() {
        let collector = UdpSocket::bind("127.0.0.1:0").unwrap();
        collector
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        let (tx, heard) = mpsc::channel();
        let mut net = WireNet {
            started: Instant::now(),
            links: HashMap::new(),
            heard,
            stop: Arc::new(AtomicBool::new(false)),
            readers: Vec::new(),
            plan: plan(),
            sent: HashMap::new(),
            reporter: Some(Reporter {
                socket: UdpSocket::bind("127.0.0.1:0").unwrap(),
                collector: collector.local_addr().unwrap(),
                sequence: 0,
            }),
            source: Ipv4Addr::new(10, 255, 0, 1),
            options: DecodeOptions::default(),
            counts: WireCounts::default(),
            measurements: BTreeMap::new(),
            queue_depths: BTreeMap::new(),
        };
        // Without a link to the last switch there is no way back: unroutable.
        net.send_probe(9, &[0, 1, 2], 1);
        assert_eq!(net.counts.probes_unroutable, 1);

        let (_, frame) = {
            let sock = Arc::new(PacketSocket::open("lo", Duration::from_millis(10)).unwrap());
            net.links.insert(3, (sock, 5));
            net.frame(9, &[0, 1, 2], 1).unwrap()
        };
        let opts = DecodeOptions::default();
        let p = match decode_frame(&frame, Start::Ethernet, &opts) {
            Ok(Decoded::Packet(p)) => p,
            other => panic!("{other:?}"),
        };
        let Telemetry::Gpint(g) = p.telemetry else {
            panic!("not a probe")
        };
        assert_eq!(g.kind, ProbeKind::Measurement);
        let sr: Vec<(u8, u16)> = g
            .source_route()
            .map(|s| (s.next_port, s.measurement_range))
            .collect();
        assert_eq!(
            sr,
            [(3, 0x0103), (5, 0x0102)],
            "switch 2 → 3, then switch 3 → the monitor, each with its ports"
        );
        assert_eq!(g.request_type, 1);

        // Switch 3 sends it back with two DLVs: complete, measured 2 and 3, reported.
        net.sent.insert(9, (1, vec![0, 1, 2]));
        let mut body = Vec::new();
        let dlv = |s| kplane_wire::papers::DlvHeader {
            switch_id: s,
            queue_depth: 4,
            measurement_count: 1,
        };
        let two = kplane_wire::papers::DlvHeader {
            measurement_count: 2,
            ..dlv(3)
        };
        GpintProbe::write(
            9,
            1,
            &[],
            &[(two, vec![11, 12]), (dlv(2), vec![10])],
            &mut body,
        );
        let mut back = frame[..14].to_vec();
        back.extend(ip_packet(
            "10.0.0.3".parse().unwrap(),
            "10.255.0.1".parse().unwrap(),
            254,
            0x17,
            &body,
        ));
        tx.send(back).unwrap();
        let now = net.now();
        match net.next(now + 1_000_000_000) {
            Some(Heard::Complete { request, measured }) => {
                assert_eq!(request, 9);
                let ids: Vec<u32> = measured.iter().map(|&i| net.plan.ids[i]).collect();
                assert_eq!(ids, [3, 2]);
            }
            other => panic!("{other:?}"),
        }
        let mut buf = [0u8; 2048];
        let n = collector.recv(&mut buf).unwrap();
        let mut hops = Vec::new();
        let outcome = kplane_wire::Decoder::default().decode_report(
            &buf[..n],
            kplane_wire::RecordMeta::default(),
            |r| hops.extend(r.hops.iter().cloned()),
        );
        assert_eq!((outcome.records, outcome.error), (1, None));
        let nodes: Vec<u32> = hops.iter().filter_map(|h| h.node_id()).collect();
        assert_eq!(nodes, [2, 3], "hops in path order");
        assert_eq!(net.measurements[&3], [11, 12]);
        assert_eq!(net.measurements[&2], [10]);
        // Switch 2's queue towards 3 (the next on the route); 3's was towards the monitor.
        assert_eq!(net.queue_depths.get(&(2, 3)), Some(&4));
        assert_eq!(net.queue_depths.len(), 1);
        assert_eq!(net.counts.reports_sent, 1);

        // An unknown request and a non-probe frame are counted, not heard.
        tx.send(frame[..14].iter().chain(&[0u8; 20]).copied().collect())
            .unwrap();
        let now = net.now();
        assert_eq!(net.next(now + 50_000_000), None);
        assert_eq!(net.counts.ignored_frames, 1);
    }
}
