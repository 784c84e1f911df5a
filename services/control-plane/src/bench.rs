//! Figures of the intent path for `kplane bench intents` and `kplane bench p4runtime`
//! (docs/benchmarks.md#intents-issue-16): compiling and conflict-checking many intents, and
//! table entries pushed to a P4Runtime switch per second. Here so that only this crate links
//! the P4Runtime client.

use std::time::{Duration, Instant};

use kplane_p4::{Entry, EntrySpec, KPLANE_BMV2_JSON, KPLANE_P4INFO_BIN};
use kplane_p4runtime::{Pipeline, Session, SessionConfig, UpdateKind};
use serde_json::json;

use crate::intents::compile::{Index, compile};
use crate::intents::model::IntentSpec;
use kplane_southbound::p4runtime::PIPELINE_COOKIE;
use kplane_southbound::{SwitchNode, Topology};

/// The `i`-th intent: monitor, block and tune in turn on one switch each, with overlapping
/// port ranges (different priorities) so the conflict check compares real overlaps.
pub fn intent(i: usize, switches: u32) -> IntentSpec {
    let sw = 1 + (i as u32 % switches);
    let n = i / switches as usize;
    let src = format!("10.{}.{}.0/24", (n / 3) % 256, sw);
    let lo = (n * 97) % 60_000;
    let m = json!({"src": src, "protocol": "udp", "dst-port": format!("{lo}-{}", lo + 500)});
    let mut v = match n % 3 {
        0 => json!({"kind": "monitor", "match": m, "max-hops": 6}),
        1 => json!({"kind": "block", "match": m}),
        _ => json!({"kind": "tune", "match": m,
                    "detection": {"algorithm": "per-flow", "threshold": 1000 + n}}),
    };
    v["switches"] = json!([sw]);
    v["priority"] = json!(100 + n);
    serde_json::from_value(v).expect("a valid intent")
}

/// What [`compile_intents`] measured.
#[derive(Clone, Debug)]
pub struct CompileFigures {
    pub accepted: usize,
    pub refused: usize,
    pub entries: usize,
    /// Field checks, compilation, conflict and size checks of every intent (generation not
    /// included).
    pub took: Duration,
}

/// Checks, compiles and conflict-checks `n` intents spread over `switches` edge switches,
/// each accepted one joining the index the next are checked against.
pub fn compile_intents(n: usize, switches: u32) -> CompileFigures {
    let topo = Topology {
        switches: (1..=switches)
            .map(|id| SwitchNode {
                id,
                name: format!("edge{id}"),
                hosts: vec![(0x0a00_0000 | (id << 8), 24, 1)],
            })
            .collect(),
        links: Vec::new(),
    };
    let info = kplane_p4::kplane();
    let specs: Vec<IntentSpec> = (0..n).map(|i| intent(i, switches)).collect();
    let mut index = Index::default();
    let mut f = CompileFigures {
        accepted: 0,
        refused: 0,
        entries: 0,
        took: Duration::ZERO,
    };
    let started = Instant::now();
    for (i, spec) in specs.iter().enumerate() {
        let id = format!("i-{i:06}");
        let compiled = match compile(info, spec, &topo) {
            Ok(c) if spec.check().is_empty() => c,
            _ => {
                f.refused += 1;
                continue;
            }
        };
        match index.check(info, &id, &compiled) {
            Ok(()) => {
                f.entries += compiled.len();
                index.add(&id, &compiled);
                f.accepted += 1;
            }
            Err(_) => f.refused += 1,
        }
    }
    f.took = started.elapsed();
    f
}

/// What [`push_entries`] measured.
#[derive(Clone, Debug, Default)]
pub struct PushFigures {
    pub inserted: usize,
    pub deleted: usize,
    pub insert_time: Duration,
    pub delete_time: Duration,
}

/// Pushes kplane's pipeline to the switch at `addr`, then writes at least `entries` entries
/// of `ipv4_forward` in Write requests of `batch` updates: 1,000 prefixes inserted, deleted,
/// inserted again… (the table holds 1,024). Each Write is timed until the switch answers.
pub async fn push_entries(
    addr: &str,
    device_id: u64,
    entries: usize,
    batch: usize,
) -> Result<PushFigures, kplane_p4runtime::P4rtError> {
    let info = kplane_p4::kplane();
    let mut s = Session::open(SessionConfig {
        addr: addr.to_string(),
        device_id,
        election_id: 1,
        timeout: Duration::from_secs(30),
    })
    .await?;
    s.set_pipeline(&Pipeline {
        p4info: KPLANE_P4INFO_BIN,
        device_config: KPLANE_BMV2_JSON,
        cookie: PIPELINE_COOKIE,
    })
    .await?;
    let table: Vec<Entry> = (0..1000usize)
        .map(|i| {
            let spec: EntrySpec = serde_json::from_value(json!({
                "table": "ipv4_forward",
                "match": {"dst_addr": format!("10.{}.{}.0/24", i / 256, i % 256)},
                "action": "set_egress",
                "params": {"port": 1 + i % 4},
            }))
            .expect("entry");
            Entry::new(info, &spec).expect("typed entry")
        })
        .collect();
    let mut f = PushFigures::default();
    while f.inserted + f.deleted < entries {
        for kind in [UpdateKind::Insert, UpdateKind::Delete] {
            for chunk in table.chunks(batch.max(1)) {
                let updates: Vec<(UpdateKind, &Entry)> = chunk.iter().map(|e| (kind, e)).collect();
                let t = Instant::now();
                s.write(info, &updates).await?;
                let (n, time) = match kind {
                    UpdateKind::Insert => (&mut f.inserted, &mut f.insert_time),
                    _ => (&mut f.deleted, &mut f.delete_time),
                };
                *time += t.elapsed();
                *n += chunk.len();
            }
        }
    }
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generated_intents_are_valid_and_mostly_accepted() {
        let f = compile_intents(3_000, 16);
        assert_eq!(f.accepted + f.refused, 3_000);
        assert!(f.accepted > 2_500, "{f:?}");
        assert!(f.entries >= f.accepted, "{f:?}");
    }
}
