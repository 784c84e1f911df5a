//! The monitoring module (gpint-reliable-int-monitoring §III-A, §IV-C): one measurement
//! session at a time — the orchestrator's probes over a [`Plan`]'s paths, at most
//! `concurrent` in flight, with or without the data recovery of Algorithms 1–2
//! ([`recovery`]) — and the SNMP-style polling baseline. It talks to the network through
//! [`ProbeNet`], so the same code drives the emulator's probe data plane in virtual time or
//! real switches.

pub mod recovery;

use std::collections::{HashMap, VecDeque};

use crate::Plan;
pub use recovery::{Recovery, RecoveryConfig, Unavailable};

/// What the monitor hears from the switches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Heard {
    /// DSCP 0x17: the probe's route is done; the switches it measured.
    Complete { request: u16, measured: Vec<usize> },
    /// DSCP 0x19: the route's first switch has the probe.
    Feedback { request: u16 },
    /// DSCP 0x21: the switch at `index` of the route had no feedback from the next one; the
    /// switches measured up to it.
    Failure {
        request: u16,
        index: usize,
        measured: Vec<usize>,
    },
    /// An SNMP response from `switch`.
    Snmp { request: u16, switch: usize },
}

/// The network as the monitor sees it. Times are ns on the network's clock.
pub trait ProbeNet {
    fn now(&self) -> u64;
    /// A probe for `request` along `route`, entering it at index `start`.
    fn send_probe(&mut self, request: u16, route: &[usize], start: usize);
    fn send_snmp(&mut self, request: u16, switch: usize);
    /// The next message at or before `until_ns` (the clock then at it), or `None` with the
    /// clock at `until_ns`.
    fn next(&mut self, until_ns: u64) -> Option<Heard>;
}

#[derive(Clone, Debug, PartialEq)]
pub struct MonitorConfig {
    /// Probes (or SNMP requests) in flight at most (the paper's orchestrator: 12).
    pub concurrent: usize,
    /// Algorithms 1–2 on; `None`: each probe is sent once.
    pub recovery: Option<RecoveryConfig>,
    /// Without recovery: a probe (request) not back after this is lost, its slot freed.
    pub timeout_ns: u64,
    /// A session not done after this has failed.
    pub session_limit_ns: u64,
}

impl Default for MonitorConfig {
    fn default() -> Self {
        Self {
            concurrent: 12,
            recovery: None,
            timeout_ns: 20_000_000_000,
            session_limit_ns: 120_000_000_000,
        }
    }
}

/// One measurement session's outcome.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Session {
    /// Every switch of every path measured.
    pub complete: bool,
    /// From the first probe sent to the last message the session needed (to the give-up
    /// when incomplete).
    pub latency_ns: u64,
    /// The plan's probes (SNMP: requests).
    pub probes: u64,
    /// Probes sent again by the recovery (SNMP: requests repeated).
    pub recovery_probes: u64,
    /// Paths that needed a recovery probe, and the longest of their first send → done.
    pub recovered_paths: u64,
    pub longest_recovery_ns: u64,
    /// Components Algorithm 1 found unavailable.
    pub unavailable: Vec<Unavailable>,
}

/// 15-bit request ids (Req META), fresh per probe sent and across sessions (a switch's loop
/// check remembers the ids it saw), with the path or switch each was for in this session.
#[derive(Debug, Default)]
struct Requests {
    next: u16,
    owner: HashMap<u16, usize>,
}

impl Requests {
    fn from(next: u16) -> Self {
        Self {
            next,
            owner: HashMap::new(),
        }
    }

    fn issue(&mut self, path: usize) -> u16 {
        let r = self.next;
        self.next = (self.next + 1) & 0x7FFF;
        self.owner.insert(r, path);
        r
    }
    fn owner(&self, request: u16) -> Option<usize> {
        self.owner.get(&request).copied()
    }
}

/// The monitoring module: sessions one after another.
#[derive(Debug)]
pub struct Monitor {
    cfg: MonitorConfig,
    next_request: u16,
}

impl Monitor {
    pub fn new(cfg: MonitorConfig) -> Self {
        Self::starting_at(cfg, 0)
    }

    /// Request ids from `first` on: a monitor restarted against live switches starts
    /// elsewhere than its last run so their loop checks do not take its probes for loops.
    pub fn starting_at(cfg: MonitorConfig, first: u16) -> Self {
        Self {
            cfg,
            next_request: first & 0x7FFF,
        }
    }

    /// One session over `plan`'s paths.
    pub fn collect(&mut self, net: &mut impl ProbeNet, plan: &Plan) -> Session {
        let mut ids = Requests::from(self.next_request);
        let s = match &self.cfg.recovery {
            Some(r) => collect_recovering(net, plan, &self.cfg, r, &mut ids),
            None => collect_once(net, plan, &self.cfg, &mut ids),
        };
        self.next_request = ids.next;
        s
    }

    /// One SNMP-style session over switches `0..switches`.
    pub fn poll(&mut self, net: &mut impl ProbeNet, switches: usize) -> Session {
        let mut ids = Requests::from(self.next_request);
        let s = poll(net, switches, &self.cfg, &mut ids);
        self.next_request = ids.next;
        s
    }
}

/// Each probe sent once; the session fails if one does not come back.
fn collect_once(
    net: &mut impl ProbeNet,
    plan: &Plan,
    cfg: &MonitorConfig,
    ids: &mut Requests,
) -> Session {
    let started = net.now();
    let mut waiting: VecDeque<usize> = (0..plan.paths.len()).collect();
    let mut in_flight: HashMap<u16, (usize, u64)> = HashMap::new();
    let (mut done, mut lost, mut last) = (0usize, 0usize, started);
    let mut s = Session::default();
    loop {
        while in_flight.len() < cfg.concurrent.max(1)
            && let Some(p) = waiting.pop_front()
        {
            let r = ids.issue(p);
            net.send_probe(r, &plan.paths[p], 0);
            s.probes += 1;
            in_flight.insert(r, (p, net.now()));
        }
        if in_flight.is_empty() {
            break;
        }
        let oldest = in_flight.values().map(|(_, t)| *t).min().unwrap_or(started);
        match net.next(oldest + cfg.timeout_ns) {
            Some(Heard::Complete { request, .. }) => {
                if in_flight.remove(&request).is_some() {
                    done += 1;
                    last = net.now();
                }
            }
            Some(_) => {}
            None => {
                let now = net.now();
                let before = in_flight.len();
                in_flight.retain(|_, (_, t)| now - *t < cfg.timeout_ns);
                lost += before - in_flight.len();
            }
        }
    }
    s.complete = lost == 0 && done == plan.paths.len();
    s.latency_ns = if s.complete {
        last - started
    } else {
        net.now() - started
    };
    s
}

/// Algorithms 1–2 around the sends: at most `concurrent` paths unfinished at once.
fn collect_recovering<N: ProbeNet>(
    net: &mut N,
    plan: &Plan,
    cfg: &MonitorConfig,
    rc: &RecoveryConfig,
    ids: &mut Requests,
) -> Session {
    let started = net.now();
    let mut rec = Recovery::new(rc.clone());
    let mut waiting: VecDeque<usize> = (0..plan.paths.len()).collect();
    let mut active = 0usize;
    let mut next_tick = started + rc.resolution_ns;
    let mut s = Session::default();
    let send = |net: &mut N, rec: &mut Recovery, ids: &mut Requests, p: usize| {
        let (route, start) = rec.route_from(p);
        net.send_probe(ids.issue(p), route, start);
        rec.sent(p, net.now());
    };
    loop {
        while active < cfg.concurrent.max(1)
            && let Some(p) = waiting.pop_front()
        {
            let id = rec.add(plan.paths[p].clone(), net.now());
            debug_assert_eq!(id, p);
            send(net, &mut rec, ids, p);
            active += 1;
        }
        if active == 0 && waiting.is_empty() {
            break;
        }
        if net.now() - started > cfg.session_limit_ns {
            break;
        }
        match net.next(next_tick) {
            Some(heard) => {
                let now = net.now();
                let finished = match heard {
                    Heard::Complete { request, measured } => ids
                        .owner(request)
                        .and_then(|p| rec.complete(p, &measured, now).then_some(p)),
                    Heard::Feedback { request } => {
                        if let Some(p) = ids.owner(request) {
                            rec.feedback(p, now);
                        }
                        None
                    }
                    Heard::Failure {
                        request,
                        index,
                        measured,
                    } => {
                        if let Some(p) = ids.owner(request) {
                            rec.failure(p, index, &measured, now);
                        }
                        None
                    }
                    Heard::Snmp { .. } => None,
                };
                if let Some(p) = finished {
                    active -= 1;
                    let (first, recovered) = rec.times(p);
                    if recovered {
                        s.recovered_paths += 1;
                        s.longest_recovery_ns = s.longest_recovery_ns.max(now - first);
                    }
                }
            }
            None => {
                let now = net.now();
                next_tick = now + rc.resolution_ns;
                for p in rec.timeout(now) {
                    if rec.given_up(p) {
                        active -= 1;
                    } else {
                        send(net, &mut rec, ids, p);
                    }
                }
            }
        }
    }
    s.complete = rec.all_measured() && waiting.is_empty();
    s.latency_ns = rec.last_done().unwrap_or(net.now()).saturating_sub(started);
    if !s.complete {
        s.latency_ns = net.now() - started;
    }
    (s.probes, s.recovery_probes) = rec.sends();
    s.unavailable = rec.unavailable().to_vec();
    s
}

/// The SNMP-style baseline: one request per switch, `concurrent` at a time; with recovery,
/// a request unanswered after `t_f` is repeated, up to `r_a` times.
fn poll(
    net: &mut impl ProbeNet,
    switches: usize,
    cfg: &MonitorConfig,
    ids: &mut Requests,
) -> Session {
    let started = net.now();
    let (timeout, attempts) = match &cfg.recovery {
        Some(r) => (r.feedback_timeout_ns, r.attempts + 1),
        None => (cfg.timeout_ns, 1),
    };
    let mut waiting: VecDeque<(usize, u32)> = (0..switches).map(|s| (s, 0)).collect();
    let mut in_flight: HashMap<u16, (usize, u32, u64)> = HashMap::new();
    let (mut answered, mut last) = (vec![false; switches], started);
    let mut s = Session::default();
    loop {
        while in_flight.len() < cfg.concurrent.max(1)
            && let Some((sw, tried)) = waiting.pop_front()
        {
            let r = ids.issue(sw);
            net.send_snmp(r, sw);
            if tried == 0 {
                s.probes += 1;
            } else {
                s.recovery_probes += 1;
            }
            in_flight.insert(r, (sw, tried + 1, net.now()));
        }
        if in_flight.is_empty() {
            break;
        }
        let oldest = in_flight
            .values()
            .map(|(_, _, t)| *t)
            .min()
            .unwrap_or(started);
        match net.next(oldest + timeout) {
            Some(Heard::Snmp { request, switch }) => {
                if in_flight.remove(&request).is_some() && !answered[switch] {
                    answered[switch] = true;
                    last = net.now();
                }
            }
            Some(_) => {}
            None => {
                let now = net.now();
                let expired: Vec<u16> = in_flight
                    .iter()
                    .filter(|(_, (_, _, t))| now - t >= timeout)
                    .map(|(r, _)| *r)
                    .collect();
                for r in expired {
                    let (sw, tried, _) = in_flight.remove(&r).expect("listed");
                    if tried < attempts {
                        waiting.push_front((sw, tried));
                    }
                }
            }
        }
    }
    s.complete = answered.iter().all(|a| *a);
    s.latency_ns = if s.complete {
        last - started
    } else {
        net.now() - started
    };
    s
}
