//! INT-label (../shared/seeds/int-label-distributed-labeling.txt §6) in virtual time: the
//! paper's topology and traffic in the emulator, labelling in its egress ports (`label_config`
//! entries, `crate::label` of the emulator), the last hops' exports decoded by the collector's
//! decoder into the collector's Algorithm 4 database (`kplane_collector::label_db`), and the
//! coverage rate per telemetry interval against the emulator's ground truth of active ports.
//! Pro's controller (Algo. 3) runs here, between telemetry intervals, writing the ports'
//! `shift` (Reg2) as table modifications.

pub mod base_b;
pub mod coverage;
pub mod packets;
pub mod pro;
pub mod timeline;
pub mod traffic;

use kplane_collector::label_db::LabelDb;
use kplane_control_plane::label_pro::pro::{Pro, ProConfig};
use kplane_emulator::sim::{Generator, Sim, SimConfig};
use kplane_emulator::tables::Update;
use kplane_emulator::topology::{LinkSpec, NodeIdx, NodeKind, Topology};
use kplane_p4::EntrySpec;
use kplane_wire::{DecodeOptions, Decoder, RecordMeta};

const MS: u64 = 1_000_000;

/// The paper's prototype (§6.1, HULA's topology): 4 spine, 4 leaf and 4 ToR switches, two
/// servers under each ToR; ToRs 1–2 under leaves 1–2, ToRs 3–4 under leaves 3–4, every leaf
/// under every spine. `loss` on every link.
pub fn topology(loss: f64) -> Topology {
    let mut t = Topology::default();
    let spec = LinkSpec {
        loss,
        ..LinkSpec::default()
    };
    let layer = |t: &mut Topology, name: &str| -> Vec<NodeIdx> {
        (1..=4)
            .map(|i| t.add(NodeKind::Switch, format!("{name}{i}")))
            .collect()
    };
    let spines = layer(&mut t, "spine");
    let leaves = layer(&mut t, "leaf");
    let tors = layer(&mut t, "tor");
    for (i, &tor) in tors.iter().enumerate() {
        let pod = i / 2;
        for &leaf in &leaves[2 * pod..2 * pod + 2] {
            t.connect(tor, leaf, spec);
        }
        for s in 0..2 {
            let h = t.add(NodeKind::Host, format!("server{}", 2 * i + s + 1));
            t.connect(h, tor, spec);
        }
    }
    for &leaf in &leaves {
        for &spine in &spines {
            t.connect(leaf, spine, spec);
        }
    }
    t
}

/// Servers 1 and 8 send 1 kB packets to random other servers (§6.1), `rate_pps` in all;
/// each packet is its own flow (a random source port), so ECMP spreads them.
struct Background {
    rate_pps: f64,
    stop_ns: u64,
}

impl Generator for Background {
    fn fire(&mut self, sim: &mut Sim, now: u64) -> Option<u64> {
        let hosts = sim.topo.host_indices();
        let senders = [hosts[0], hosts[hosts.len() - 1]];
        let src = senders[sim.rng.below(2) as usize];
        let others: Vec<_> = hosts.iter().copied().filter(|h| *h != src).collect();
        let dst = others[sim.rng.below(others.len() as u64) as usize];
        let port = 1024 + sim.rng.below(60_000) as u16;
        let f = sim.flow(src, dst, 17, (port, 5001), 1, 1000, 0);
        sim.start_flow(f);
        let next = now + (sim.rng.exponential(1e9 / self.rate_pps.max(1e-9)) as u64).max(1);
        (next < self.stop_ns).then_some(next)
    }
}

/// One run's parameters.
#[derive(Clone, Copy, Debug)]
pub struct Setup {
    pub seconds: f64,
    /// Background packets per second (the paper's ≈ 5 Mb/s of 1 kB packets: 625).
    pub rate_pps: f64,
    /// Labelling interval T.
    pub interval_ns: u64,
    /// 0 Base A, 1 Base B.
    pub algorithm: u64,
    /// Base B's f: 1 F1 (the paper's default), 2 F2, 3 F3.
    pub function: u64,
    /// Base B's rest time T1.
    pub rest_ns: u64,
    /// Telemetry interval (the paper's resolution: 100 ms).
    pub telemetry_ns: u64,
    pub loss: f64,
    /// Pro: k (the controller raises S for ports not updated for k telemetry intervals), or
    /// None.
    pub pro_k: Option<u64>,
}

impl Default for Setup {
    fn default() -> Self {
        Self {
            seconds: 10.0,
            rate_pps: 625.0,
            interval_ns: 50 * MS,
            algorithm: 0,
            function: 1,
            rest_ns: 0,
            telemetry_ns: 100 * MS,
            loss: 0.0,
            pro_k: None,
        }
    }
}

/// What a run measured.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    pub packets_sent: u64,
    pub packets_delivered: u64,
    /// Packets whose items reached the collector (the paper's "labelled packets").
    pub labelled_packets: u64,
    /// Labelling times in the data plane.
    pub labels: u64,
    /// Option bytes over every link crossed / packet bytes over every link crossed.
    pub bandwidth_share: f64,
    /// Coverage rate per telemetry interval (from the second interval on).
    pub coverage: Vec<f64>,
    /// Items the database applied, and stale ones.
    pub items_applied: u64,
    /// Exported packets by the items they carried (index = items, 0..=5).
    pub items_per_packet: [u64; 6],
}

impl Outcome {
    pub fn mean_coverage(&self) -> f64 {
        self.coverage.iter().sum::<f64>() / self.coverage.len().max(1) as f64
    }
}

/// `set_labelling` for one switch's egress port.
fn label_entry(s: &Setup, switch: u32, port: u16) -> EntrySpec {
    port_entry(
        switch,
        port,
        "label_config",
        "set_labelling",
        &[
            ("interval_ns", s.interval_ns),
            ("max_hop", 5),
            ("algorithm", s.algorithm),
            ("function", s.function),
            ("rest_ns", s.rest_ns),
        ],
    )
}

fn port_entry(
    switch: u32,
    port: u16,
    table: &str,
    action: &str,
    params: &[(&str, u64)],
) -> EntrySpec {
    EntrySpec {
        switch: Some(switch),
        table: table.into(),
        priority: 0,
        matches: [("egress_port".to_string(), port.to_string())].into(),
        action: action.into(),
        params: params.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
    }
}

pub fn run(s: &Setup, seed: u64) -> anyhow::Result<Outcome> {
    let topo = topology(s.loss);
    let mut sim = Sim::new(
        topo,
        SimConfig {
            seed,
            sample_ns: 0,
            label_interval_ns: s.telemetry_ns,
            ..SimConfig::default()
        },
    );
    let ports: Vec<(u32, u16)> = sim
        .topo
        .switches()
        .flat_map(|(_, n)| (0..n.ports.len() as u16).map(move |p| (n.id, p)))
        .collect();
    for &(sw, p) in &ports {
        sim.insert(label_entry(s, sw, p))?;
    }
    let end = (s.seconds * 1e9) as u64;
    sim.add_generator(
        0,
        Box::new(Background {
            rate_pps: s.rate_pps,
            stop_ns: end,
        }),
    );
    let mut db = LabelDb::default();
    let mut decoder = Decoder::new(DecodeOptions::default());
    let mut out = Outcome::default();
    // Pro's S per port (4 fresh intervals in a row age it by one; at most 4).
    let mut pro = Pro::new(ProConfig::default());
    let mut active_from = 0;
    let mut t = s.telemetry_ns;
    while t <= end {
        sim.run_until(t);
        // What reached the collector by the interval's end, in the order it was sent.
        let mut reports = sim.take_reports();
        reports.sort_by_key(|r| r.sent_ns);
        for r in &reports {
            decoder.decode_report(&r.bytes, RecordMeta::default(), |rec| {
                out.items_applied += db.apply(rec, |_| {}) as u64;
                if kplane_collector::label_db::is_label_export(rec) {
                    out.items_per_packet[rec.hops.len().min(5)] += 1;
                }
            });
        }
        let start = t - s.telemetry_ns;
        let truth = &sim.truth.active_ports;
        let active: Vec<(u32, u32)> = truth[active_from..]
            .iter()
            .filter(|(iv, _, _)| *iv == start)
            .map(|&(_, n, p)| (n, u32::from(p)))
            .collect();
        active_from = truth.len();
        // The first interval has no steady state yet (every port labels its first packet).
        if start > 0 && !active.is_empty() {
            out.coverage.push(db.coverage(&active, start));
        }
        if let Some(k) = s.pro_k {
            // Algo. 3 against the database, once per telemetry interval: a port not updated
            // for k intervals gets S + 1; one updated in each of the last RELAX intervals
            // ages back by S − 1.
            let stale_after = k * s.telemetry_ns;
            let mut updates = Vec::new();
            for &(sw, p) in &ports {
                let Some(state) = db.get(sw, u32::from(p)) else {
                    continue;
                };
                let before = pro.get((sw, u32::from(p))).map_or(0, |f| f.shift);
                let stale = t.saturating_sub(state.label_ns) > stale_after;
                if let Some(next) = pro.observe((sw, u32::from(p)), stale) {
                    let shift = port_entry(
                        sw,
                        p,
                        "label_frequency",
                        "set_label_shift",
                        &[("shift", u64::from(next))],
                    );
                    updates.push(match (before, next) {
                        (0, _) => Update::Insert(shift),
                        (_, 0) => Update::Delete(shift),
                        _ => Update::Modify(shift),
                    });
                }
            }
            if !updates.is_empty() {
                sim.write(&updates).map_err(|(_, e)| e)?;
            }
        }
        t += s.telemetry_ns;
    }
    let st = &sim.stats;
    out.packets_sent = st.packets_sent;
    out.packets_delivered = st.packets_delivered;
    out.labelled_packets = st.label_exports;
    out.labels = st.labels;
    // The paper's bandwidth occupation: INT bytes / traffic bytes, over the switches' links.
    out.bandwidth_share =
        st.label_bytes as f64 / st.egress_bytes.saturating_sub(st.label_bytes).max(1) as f64;
    anyhow::ensure!(
        out.labelled_packets == 0 || out.items_applied > 0,
        "the collector's database took no item from {} exports",
        out.labelled_packets
    );
    Ok(out)
}
