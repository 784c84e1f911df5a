//! The emulator against its ground truth, through the real wire decoder.

use std::collections::{BTreeMap, BTreeSet};

use kplane_emulator::scenario;
use kplane_emulator::sim::{Action, Sim, SimConfig};
use kplane_emulator::topology::{LinkSpec, NodeKind, Topology};
use kplane_emulator::traffic::Poisson;
use kplane_model::{ReportFlags, ReportRecord};
use kplane_p4::EntrySpec;
use kplane_wire::{DecodeOptions, Decoder, RecordMeta};

fn watch_all(sim: &mut Sim) {
    sim.insert(serde_json::from_str::<EntrySpec>(
        r#"{"table":"int_watchlist","priority":1,"action":"int_source","params":{"instruction_bitmap":65280,"max_hop":8}}"#,
    ).unwrap())
    .unwrap();
}

fn decode(sim: &mut Sim) -> Vec<ReportRecord> {
    let mut d = Decoder::new(DecodeOptions::default());
    let mut out = Vec::new();
    for r in sim.take_reports() {
        let o = d.decode_report(&r.bytes, RecordMeta::default(), |rec| out.push(rec.clone()));
        assert_eq!(o.error, None, "emulated reports decode");
    }
    out
}

/// h1 - s1 - s2 - s3 - h2, 10 Gb/s, 1 µs links.
fn line() -> Topology {
    let mut t = Topology::default();
    let s: Vec<_> = (1..=3)
        .map(|i| t.add(NodeKind::Switch, format!("s{i}")))
        .collect();
    let h1 = t.add(NodeKind::Host, "h1".into());
    let h2 = t.add(NodeKind::Host, "h2".into());
    let spec = LinkSpec::default();
    t.connect(h1, s[0], spec);
    t.connect(s[0], s[1], spec);
    t.connect(s[1], s[2], spec);
    t.connect(s[2], h2, spec);
    t
}

fn quiet() -> SimConfig {
    SimConfig {
        sample_ns: 0,
        ..SimConfig::default()
    }
}

#[test]
fn hop_latencies_equal_the_emulated_queueing_and_processing_delays() {
    let mut sim = Sim::new(line(), quiet());
    watch_all(&mut sim);
    let hosts = sim.topo.host_indices();
    // Two 1000-byte packets leave h1 together: the second waits one transmission time
    // (1000 B at 10 Gb/s = 800 ns) at s1, and nowhere else.
    let f = sim.flow(hosts[0], hosts[1], 17, (1000, 2000), 2, 1000, 0);
    sim.start_flow(f);
    sim.run_until(1_000_000);
    let recs = decode(&mut sim);
    assert_eq!(recs.len(), 2);
    for r in &recs {
        assert_eq!(
            r.path().collect::<Vec<_>>(),
            vec![Some(1), Some(2), Some(3)]
        );
        assert_eq!(r.envelope.node_id, Some(3), "the sink reports");
    }
    let lat = |r: &ReportRecord| {
        r.hops
            .iter()
            .map(|h| h.hop_latency_ns().unwrap())
            .collect::<Vec<_>>()
    };
    let processing = 500;
    assert_eq!(lat(&recs[0]), vec![processing; 3]);
    assert_eq!(
        lat(&recs[1]),
        vec![processing + 800, processing, processing]
    );
    assert_eq!(
        recs[1].hops[0].queue_occupancy(),
        Some(1),
        "one packet ahead in the queue"
    );
    let f = recs[0].flow.unwrap();
    assert_eq!((f.src_port, f.dst_port, f.protocol), (1000, 2000, 17));
}

#[test]
fn sink_thresholds_filter_reports() {
    let mut sim = Sim::new(line(), quiet());
    watch_all(&mut sim);
    sim.insert(serde_json::from_str::<EntrySpec>(
        r#"{"table":"int_sink_detection","priority":1,"action":"detect_per_hop","params":{"measurement":0,"threshold":1000}}"#,
    ).unwrap())
    .unwrap();
    let hosts = sim.topo.host_indices();
    // 10 packets 100 µs apart: no queueing, every hop latency equal: one report (the first).
    let f = sim.flow(hosts[0], hosts[1], 17, (1, 2), 10, 1000, 100_000);
    sim.start_flow(f);
    sim.run_until(10_000_000);
    assert_eq!(decode(&mut sim).len(), 1);
    assert_eq!(sim.stats.reports_suppressed, 9);
    // A queue build-up above the threshold reports again: 4 packets at once queue 3 × 800 ns.
    let f = sim.flow(hosts[0], hosts[1], 17, (1, 2), 4, 1000, 0);
    sim.start_flow(f);
    sim.run_until(20_000_000);
    let more = decode(&mut sim);
    assert!(!more.is_empty() && more.len() < 4, "{} reports", more.len());
}

#[test]
fn complex_detection_reports_the_packets_that_meet_its_conjunction() {
    let complex = |op1: u64, threshold1: u64| {
        serde_json::from_value::<EntrySpec>(serde_json::json!({
            "table": "int_sink_detection", "priority": 1, "action": "detect_complex",
            "params": {"measurement": 0, "op": 1, "threshold": 2000,
                       "measurement1": 1, "op1": op1, "threshold1": threshold1,
                       "measurement2": 0, "op2": 0, "threshold2": 0,
                       "measurement3": 0, "op3": 0, "threshold3": 0}
        }))
        .unwrap()
    };
    // 6 packets back to back: at the first switch packet k waits behind k packets (800 ns
    // each), so its hop latency is 500 + 800·k ns and its queue occupancy k.
    let burst = |sim: &mut Sim, port: u16| {
        let hosts = sim.topo.host_indices();
        let f = sim.flow(hosts[0], hosts[1], 17, (port, 2), 6, 1000, 0);
        sim.start_flow(f);
        let until = sim.now() + 10_000_000;
        sim.run_until(until);
        decode(sim)
    };
    // "Latency above 2000 ns and queue above 1": packets 2..=5, after the first (a new flow
    // is reported whatever the rule).
    let mut sim = Sim::new(line(), quiet());
    watch_all(&mut sim);
    sim.insert(complex(1, 1)).unwrap();
    let got = burst(&mut sim, 10);
    assert_eq!(got.len(), 5, "{got:?}");
    assert_eq!(got[0].hops[0].queue_occupancy(), Some(0), "the new flow");
    assert!(
        got[1..]
            .iter()
            .all(|r| r.hops[0].queue_occupancy() > Some(1))
    );
    assert_eq!(sim.stats.reports_suppressed, 1);
    // "Latency above 2000 ns and queue risen by more than R since the flow's previous
    // packet" (its register starts at 0): the queue grows by one packet per packet, so with
    // R = 0 packets 2..=5 again, with R = 1 none (the first packet only, as new).
    for (rise, want) in [(0, 5), (1, 1)] {
        let mut sim = Sim::new(line(), quiet());
        watch_all(&mut sim);
        sim.insert(complex(3, rise)).unwrap();
        assert_eq!(burst(&mut sim, 11).len(), want, "rises by more than {rise}");
    }
}

/// `set_labelling` on every port 0..=2 of every switch.
fn label_all(sim: &mut Sim, interval_ns: u64, algorithm: u64, function: u64) {
    for port in 0..=2 {
        sim.insert(
            serde_json::from_value::<EntrySpec>(serde_json::json!({
                "table": "label_config", "action": "set_labelling",
                "match": {"egress_port": port.to_string()},
                "params": {"interval_ns": interval_ns, "max_hop": 5, "algorithm": algorithm,
                           "function": function, "rest_ns": 0}
            }))
            .unwrap(),
        )
        .unwrap();
    }
}

#[test]
fn int_label_base_a_labels_each_port_once_per_interval_and_the_last_hop_exports() {
    let mut sim = Sim::new(line(), quiet());
    label_all(&mut sim, 1_000_000, 0, 0);
    let hosts = sim.topo.host_indices();
    // 10 packets 300 µs apart; T = 1 ms: every port labels packets 0, 4 and 8 (its first,
    // then the first after more than T), so each of those carries all three switches' items.
    let f = sim.flow(hosts[0], hosts[1], 17, (7, 8), 10, 1000, 300_000);
    sim.start_flow(f);
    sim.run_until(10_000_000);
    assert_eq!(sim.stats.packets_delivered, 10);
    assert_eq!((sim.stats.labels, sim.stats.label_exports), (9, 3));
    let recs = decode(&mut sim);
    assert_eq!(recs.len(), 3);
    for r in &recs {
        assert_eq!(r.path().collect::<Vec<_>>(), [Some(1), Some(2), Some(3)]);
        assert_eq!(r.envelope.node_id, Some(3), "the last hop exports");
        assert!(!r.envelope.flags.contains(ReportFlags::SPECIFIC_FLOW));
        // Label times advance along the path.
        let t: Vec<_> = r
            .hops
            .iter()
            .map(|h| h.get(kplane_model::HopField::IngressTimestamp).unwrap())
            .collect();
        assert!(t.windows(2).all(|w| w[0] < w[1]), "{t:?}");
    }
    // Ground truth: 3 egress ports active (one per switch) in the one 100 ms interval.
    assert_eq!(sim.truth.active_ports.len(), 3);
    assert_eq!(sim.truth.labels.len(), 9);
}

#[test]
fn int_label_specific_flows_carry_every_hop_and_are_told_apart() {
    let mut sim = Sim::new(line(), quiet());
    label_all(&mut sim, 1_000_000, 0, 0);
    // Selected at its first switch: INT_num starts at MAX_hop (5).
    sim.insert(
        serde_json::from_value::<EntrySpec>(serde_json::json!({
            "table": "int_watchlist", "priority": 1, "action": "int_label_specific",
            "match": {"src_port": "7"}, "params": {"max_hop": 5}
        }))
        .unwrap(),
    )
    .unwrap();
    let hosts = sim.topo.host_indices();
    // Within one labelling interval each port would label once; the specific flow's 10
    // packets are all labelled at all 3 switches.
    let f = sim.flow(hosts[0], hosts[1], 17, (7, 8), 10, 1000, 30_000);
    sim.start_flow(f);
    sim.run_until(10_000_000);
    assert_eq!((sim.stats.labels, sim.stats.label_exports), (30, 10));
    let recs = decode(&mut sim);
    assert_eq!(recs.len(), 10);
    for r in &recs {
        assert!(
            r.envelope.flags.contains(ReportFlags::SPECIFIC_FLOW),
            "{r:?}"
        );
        assert_eq!(r.path().collect::<Vec<_>>(), [Some(1), Some(2), Some(3)]);
    }
}

#[test]
fn int_label_base_b_gathers_items_in_fewer_packets() {
    // Two flows through the same ports, interleaved; T = 1 ms. Base A spreads the labels
    // over whichever packet comes first after T; Base B with F1 also labels every packet
    // that already carries an item, so fewer packets carry them (and some ports label more).
    let run = |algorithm| {
        let mut sim = Sim::new(line(), quiet());
        label_all(&mut sim, 1_000_000, algorithm, 1);
        let hosts = sim.topo.host_indices();
        for (port, start) in [(7, 0), (9, 150_000)] {
            let f = sim.flow(hosts[0], hosts[1], 17, (port, 8), 40, 1000, 300_000);
            sim.schedule(start, Action::StartFlow(Box::new(f)));
        }
        sim.run_until(30_000_000);
        (sim.stats.labels, sim.stats.label_exports, decode(&mut sim))
    };
    let (labels_a, exports_a, recs_a) = run(0);
    let (labels_b, exports_b, recs_b) = run(1);
    assert_eq!(recs_a.len() as u64, exports_a);
    assert_eq!(recs_b.len() as u64, exports_b);
    assert!(exports_b <= exports_a, "B {exports_b} vs A {exports_a}");
    assert!(
        labels_b >= labels_a,
        "B labels at least as often: {labels_b} vs {labels_a}"
    );
    let items = |r: &[ReportRecord]| r.iter().map(|r| r.hops.len()).sum::<usize>() as u64;
    assert_eq!(items(&recs_b), labels_b, "every item reaches the collector");
    assert!(
        recs_b.iter().all(|r| r.hops.len() <= 5),
        "at most MAX_hop items"
    );
}

#[test]
fn a_failed_link_moves_the_flow_to_another_path() {
    let mut sim = Sim::new(Topology::fat_tree(4, LinkSpec::default()).unwrap(), quiet());
    watch_all(&mut sim);
    let hosts = sim.topo.host_indices();
    let f = sim.flow(hosts[0], hosts[15], 17, (5, 6), 200, 1000, 10_000);
    sim.start_flow(f);
    sim.run_until(500_000);
    let before = decode(&mut sim);
    let path: Vec<u32> = before[0].path().map(|n| n.unwrap()).collect();
    assert_eq!(path.len(), 5, "inter-pod paths have 5 switches: {path:?}");
    // Fail the link between the path's 2nd and 3rd switch (aggregation - core).
    let (a, b) = (
        sim.topo.switch_by_id(path[1]).unwrap(),
        sim.topo.switch_by_id(path[2]).unwrap(),
    );
    let link = sim
        .topo
        .links
        .iter()
        .position(|l| (l.a.0 == a && l.b.0 == b) || (l.a.0 == b && l.b.0 == a))
        .unwrap();
    let now = sim.now();
    sim.schedule(now, Action::LinkDown(link));
    sim.run_until(5_000_000);
    let after = decode(&mut sim);
    assert!(!after.is_empty());
    let last: Vec<u32> = after.last().unwrap().path().map(|n| n.unwrap()).collect();
    assert_ne!(last, path, "rerouted");
    assert!(
        !last.windows(2).any(|w| (w[0], w[1]) == (path[1], path[2])),
        "avoids the failed link"
    );
    assert_eq!(
        before.len() + after.len() + sim.stats.dropped() as usize,
        200
    );
}

#[test]
fn sequence_numbers_are_per_node_and_gap_free() {
    let mut sim = Sim::new(Topology::fat_tree(4, LinkSpec::default()).unwrap(), quiet());
    watch_all(&mut sim);
    sim.add_generator(
        0,
        Box::new(Poisson {
            rate: 20_000.0,
            stop_ns: 20_000_000,
            ..Poisson::default()
        }),
    );
    sim.run_until(100_000_000);
    let recs = decode(&mut sim);
    assert!(recs.len() > 1000, "{} reports", recs.len());
    let mut per: BTreeMap<(u32, u8), Vec<u32>> = BTreeMap::new();
    for r in &recs {
        per.entry((r.envelope.node_id.unwrap(), r.envelope.hw_id))
            .or_default()
            .push(r.envelope.sequence.unwrap());
    }
    assert!(per.len() >= 4, "several sinks");
    for (k, seqs) in per {
        let expect: Vec<u32> = (0..seqs.len() as u32).collect();
        assert_eq!(seqs, expect, "sink {k:?}");
    }
    assert_eq!(sim.stats.dropped(), 0, "no loss without a scenario");
}

/// Flow slots are reused only once every packet of the old flow has left the network;
/// reusing earlier sent in-flight packets down the new flow's path.
#[test]
fn a_healthy_fat_tree_reports_every_packet_once_along_a_shortest_path() {
    let mut sim = Sim::new(Topology::fat_tree(4, LinkSpec::default()).unwrap(), quiet());
    watch_all(&mut sim);
    sim.add_generator(
        0,
        Box::new(Poisson {
            rate: 20_000.0,
            stop_ns: 20_000_000,
            ..Poisson::default()
        }),
    );
    sim.run_until(200_000_000);
    assert!(sim.idle(), "all traffic drained");
    let recs = decode(&mut sim);
    assert_eq!(recs.len() as u64, sim.stats.packets_delivered);
    assert_eq!(sim.stats.packets_delivered, sim.stats.packets_sent);
    for r in &recs {
        assert!(!r.envelope.flags.contains(ReportFlags::INTERMEDIATE));
        assert!((1..=5).contains(&r.hops.len()), "{} hops", r.hops.len());
    }
}

#[test]
fn a_routing_loop_shows_as_an_intermediate_report_with_repeated_nodes() {
    let mut sim = Sim::new(Topology::fat_tree(4, LinkSpec::default()).unwrap(), quiet());
    watch_all(&mut sim);
    scenario::apply(&mut sim, "routing-loop", 10_000_000).unwrap();
    sim.run_until(10_000_000);
    let recs = decode(&mut sim);
    let looped = recs
        .iter()
        .find(|r| r.envelope.flags.contains(ReportFlags::INTERMEDIATE))
        .expect("an intermediate report");
    let nodes: Vec<u32> = looped.path().map(|n| n.unwrap()).collect();
    let distinct: BTreeSet<_> = nodes.iter().collect();
    assert!(distinct.len() < nodes.len(), "a node twice: {nodes:?}");
    assert!(
        sim.stats.drops.values().sum::<u64>() > 0,
        "looping packets expire"
    );
    assert!(
        sim.truth
            .events
            .iter()
            .any(|e| e["kind"] == "routing_loop_start")
    );
}

#[test]
fn microbursts_fill_the_target_queue_and_are_in_the_ground_truth() {
    let mut sim = Sim::new(
        Topology::fat_tree(4, LinkSpec::default()).unwrap(),
        SimConfig::default(),
    );
    watch_all(&mut sim);
    scenario::apply(&mut sim, "microburst-hadoop", 50_000_000).unwrap();
    sim.run_until(50_000_000);
    let bursts: Vec<_> = sim
        .truth
        .events
        .iter()
        .filter(|e| e["kind"] == "microburst")
        .collect();
    assert!(!bursts.is_empty());
    let q = &bursts[0]["queue"];
    let (node, port) = (
        q["node"].as_u64().unwrap() as u32,
        q["port"].as_u64().unwrap() as u16,
    );
    let recs = decode(&mut sim);
    let max_occ = recs
        .iter()
        .flat_map(|r| r.hops.iter())
        .filter(|h| h.node_id() == Some(node) && h.egress_port() == Some(port.into()))
        .filter_map(|h| h.queue_occupancy())
        .max()
        .unwrap_or(0);
    assert!(
        max_occ >= 3,
        "the burst shows on the right queue: {max_occ}"
    );
    assert!(
        sim.truth
            .queues
            .iter()
            .any(|s| s.node == node && s.port == port),
        "sampled"
    );
}

/// The detection vocabulary, the emulator's sink and the P4 program name the same actions:
/// every algorithm is an action of `int_sink_detection`, and every action there is one.
#[test]
fn detection_algorithms_are_the_p4_programs_sink_actions() {
    use kplane_model::detection::Algorithm;
    let p4 = kplane_p4::kplane();
    let (_, table) = p4.table("int_sink_detection").unwrap();
    let mut actions: Vec<&str> = table
        .entry_actions
        .iter()
        .map(|&i| p4.actions[i].name.as_str())
        .collect();
    actions.sort_unstable();
    let mut algorithms: Vec<&str> = Algorithm::ALL.iter().map(|a| a.action()).collect();
    algorithms.sort_unstable();
    assert_eq!(actions, algorithms);
    for a in Algorithm::ALL {
        assert_eq!(Algorithm::from_action(a.action()), a);
    }
}
