//! KDN's first use of the knowledge plane, traffic engineering from forecasts, measured on
//! the whole system: `kplane up` over the emulator's `elephants` scenario (long flows across
//! the fabric that grow and swing, some hashed onto one link), once with traffic engineering
//! off and once on, per seed; congestion and flow latency read from the store afterwards.

use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use arrow_array::Array;
use arrow_array::cast::AsArray;
use arrow_array::types::Float64Type;
use kplane_bench::child::Up;
use serde_json::json;

use super::table::Cell;
use super::{Comparison, Ctx, Experiment, Plot, Summary, Table};

pub struct Te;

/// The utilisation (‰) traffic engineering relieves links at, and "hot" means here.
const HOT: f64 = 800.0;

struct Setup {
    /// The run's length (s).
    seconds: u64,
    /// Background only until then (s): what the forecasts learn from.
    learn: u64,
    /// The buckets the tables and plots are cut into (s).
    bucket: u64,
}

const FULL: Setup = Setup {
    seconds: 300,
    learn: 60,
    bucket: 30,
};

const FAST: Setup = Setup {
    seconds: 120,
    learn: 45,
    bucket: 25,
};

/// The elephants: four flows from the first hosts to the last (fat-tree k = 4: pod 0 to pod
/// 3), each growing from 20 % to 55 % of a link, swung ±25 % over 40 s.
fn scenario(s: &Setup) -> String {
    format!(
        "elephants:flows=4,start={:.3},from=0.2,to=0.55,period=40,swing=0.25",
        s.learn as f64 / s.seconds as f64
    )
}

/// One number of a one-row, one-column query (NaN when empty).
fn scalar(store: &Path, sql: &str) -> anyhow::Result<f64> {
    let batches = kplane_store::query::sql_blocking(&kplane_store::Store::local(store), sql)
        .with_context(|| sql.to_string())?;
    let Some(b) = batches.iter().find(|b| b.num_rows() > 0) else {
        return Ok(f64::NAN);
    };
    let c = b
        .column(0)
        .as_primitive_opt::<Float64Type>()
        .with_context(|| format!("{sql}: not a DOUBLE"))?;
    Ok(if c.is_null(0) { f64::NAN } else { c.value(0) })
}

/// One run of `kplane up`, traffic engineering `on` or off: its buckets and its total.
fn measure(s: &Setup, seed: u64, on: bool, out: &Path) -> anyhow::Result<Vec<Vec<Cell>>> {
    let mode = if on { "on" } else { "off" };
    let data = out.join(format!("te-{mode}-{seed}"));
    let args: Vec<String> = [
        "up",
        "--link-gbps",
        "0.1",
        "--flows",
        "40",
        "--flow-mbps",
        "5",
        "--scenario",
        &scenario(s),
        "--seed",
        &seed.to_string(),
        "--duration",
        &format!("{}s", s.seconds),
    ]
    .map(String::from)
    .to_vec();
    let min_windows = (s.learn * 3 / 4).to_string();
    let enabled = on.to_string();
    let up = Up::spawn(
        &args,
        &[
            ("KPLANE__KNOWLEDGE__MIN_WINDOWS", min_windows.as_str()),
            (
                "KPLANE__INTENT_API__INTENTS__TRAFFIC_ENGINEERING__ENABLED",
                enabled.as_str(),
            ),
            ("KPLANE__LOG__LEVEL", "warn"),
        ],
        data.clone(),
    )?;
    // Traffic engineering's reroutes apply without waiting for an admin.
    up.api(
        "PUT",
        "/v1/intents/policy",
        &json!({"auto-apply": ["monitor", "tune", "reroute"]}),
    )?;
    let started = kplane_model::unix_time_ns() as i64;
    up.finish(Duration::from_secs(s.seconds + 120))?;
    let store = data.join("stream-processor");
    let from = started + s.learn as i64 * 1_000_000_000;
    let end = started + s.seconds as i64 * 1_000_000_000;
    let span = |a: i64, b: i64| {
        format!(
            "window_start >= to_timestamp_nanos({a}) AND window_start < to_timestamp_nanos({b})"
        )
    };
    let one = |a: i64, b: i64| -> anyhow::Result<[f64; 3]> {
        let w = span(a, b);
        Ok([
            // Link-seconds of 1 s windows at or above HOT, switch-to-switch links only.
            scalar(
                &store,
                &format!(
                    "SELECT CAST(count(*) AS DOUBLE) AS n FROM links WHERE next_node_id IS NOT NULL \
                     AND tx_utilization_mean >= {HOT} AND {w}"
                ),
            )?,
            scalar(
                &store,
                &format!(
                    "SELECT CAST(sum(congested_ns) AS DOUBLE) / 1e9 AS s FROM queues WHERE {w}"
                ),
            )?,
            scalar(
                &store,
                &format!(
                    "SELECT CAST(approx_percentile_cont(e2e_latency_max_ns, 0.99) AS DOUBLE) / 1e6 AS ms \
                     FROM flows WHERE {w}"
                ),
            )?,
        ])
    };
    // Traffic engineering's own records in the audit log: its submissions and rollbacks.
    let audit = std::fs::read_to_string(data.join("intent-api/audit.jsonl")).unwrap_or_default();
    let records = |what: &str| {
        audit
            .lines()
            .filter(|l| l.contains("\"actor\":\"traffic-engineering\"") && l.contains(what))
            .count()
    };
    let (moves, rolled_back) = (records("\"submit\""), records("\"rolled-back\""));
    let mut rows = Vec::new();
    let mut t = from;
    while t < end {
        let b = (t + s.bucket as i64 * 1_000_000_000).min(end);
        let [hot, congested, p99] = one(t, b)?;
        rows.push(vec![
            mode.into(),
            (((t - from) / 1_000_000_000) as u64).into(),
            hot.into(),
            congested.into(),
            p99.into(),
            Cell::Num(f64::NAN),
            Cell::Num(f64::NAN),
        ]);
        t = b;
    }
    let [hot, congested, p99] = one(from, end)?;
    rows.push(vec![
        mode.into(),
        "all".into(),
        hot.into(),
        congested.into(),
        p99.into(),
        moves.into(),
        rolled_back.into(),
    ]);
    std::fs::remove_dir_all(&data).ok();
    Ok(rows)
}

impl Experiment for Te {
    fn name(&self) -> &'static str {
        "te"
    }
    fn about(&self) -> &'static str {
        "KDN §III use case: traffic engineering from link forecasts, with and without, on growing and periodic load"
    }
    fn source(&self) -> &'static str {
        "KDN architecture (../shared/seeds/kdn-architecture-int-onos.txt) §II–III; the issue's evaluation"
    }
    fn setup(&self, fast: bool) -> String {
        let s = if fast { FAST } else { FULL };
        format!(
            "The whole system: `kplane up --link-gbps 0.1 --flows 40 --flow-mbps 5 --scenario \
             {} --seed SEED --duration {}s`, once with \
             `[intent-api.intents.traffic-engineering] enabled = false` and once with `true` \
             (the policy auto-applies reroutes), per seed. The first {} s carry the \
             background only (the knowledge service trains on {} windows); then four \
             elephants from pod 0 to pod 3 grow from 20 % to 55 % of a link's rate, swung \
             ±25 % over 40 s; ECMP hashes some of them onto one link (which ones depends on \
             the seed). Read from the store afterwards, per {} s bucket from the elephants' \
             start and over all of it (`all`): **hot_link_s**, switch-to-switch link-seconds \
             with `tx_utilization_mean` ≥ {HOT}‰ (1 s windows); **congested_s**, the queues' \
             `congested_ns` summed, s; **latency_p99_ms**, the 99th percentile of the flows' \
             `e2e_latency_max_ns` per window, ms; **moves** and **rolled_back**, traffic \
             engineering's reroutes submitted and rolled back (audit log).",
            scenario(&s),
            s.seconds,
            s.learn,
            s.learn * 3 / 4,
            s.bucket
        )
    }

    fn run(&self, ctx: &Ctx) -> anyhow::Result<Table> {
        let s = if ctx.fast { FAST } else { FULL };
        let mut t = Table::new(
            &["te", "from_s"],
            &[
                "hot_link_s",
                "congested_s",
                "latency_p99_ms",
                "moves",
                "rolled_back",
            ],
        );
        let out = std::env::temp_dir().join(format!("kplane-te-{}", std::process::id()));
        for on in [false, true] {
            for r in measure(&s, ctx.seed, on, &out)? {
                t.push(r);
            }
        }
        std::fs::remove_dir_all(&out).ok();
        Ok(t)
    }

    fn plots(&self) -> Vec<Plot> {
        vec![
            Plot {
                suffix: "",
                title: "Hot link-seconds per bucket, traffic engineering off / on",
                x: "from_s",
                y: "hot_link_s",
                series: &["te"],
                filter: &[],
                x_label: "s since the elephants started",
                y_label: "link-seconds at ≥ 800‰",
                log_x: false,
                log_y: false,
            },
            Plot {
                suffix: "-latency",
                title: "Flow latency p99 per bucket, traffic engineering off / on",
                x: "from_s",
                y: "latency_p99_ms",
                series: &["te"],
                filter: &[],
                x_label: "s since the elephants started",
                y_label: "p99 of flows' end-to-end latency (ms)",
                log_x: false,
                log_y: false,
            },
        ]
    }

    fn compare(&self, s: &Summary) -> Vec<Comparison> {
        let t = &s.means;
        let all = |te: &str, col: &str| t.value(&[te, "all"], col);
        let change = |col: &str| {
            let (off, on) = (all("off", col), all("on", col));
            format!(
                "{} off → {} on ({:+.0} %)",
                super::table::fmt_num(off),
                super::table::fmt_num(on),
                100.0 * (on - off) / off.max(1e-9)
            )
        };
        vec![
            Comparison::new(
                "minutes of congestion (hot link-seconds / 60)",
                "KDN: TE from the knowledge plane's forecasts avoids congestion (no figure)",
                format!(
                    "{:.1} off → {:.1} on",
                    all("off", "hot_link_s") / 60.0,
                    all("on", "hot_link_s") / 60.0
                ),
            ),
            Comparison::new("queue congestion (s)", "–", change("congested_s")),
            Comparison::new("flow latency p99 (ms)", "–", change("latency_p99_ms")),
            Comparison::new(
                "moves (rolled back)",
                "–",
                format!(
                    "{} ({})",
                    super::table::fmt_num(all("on", "moves")),
                    super::table::fmt_num(all("on", "rolled_back"))
                ),
            ),
        ]
    }

    fn shape(&self, s: &Summary) -> Vec<String> {
        let t = &s.means;
        let (off, on) = (
            t.value(&["off", "all"], "hot_link_s"),
            t.value(&["on", "all"], "hot_link_s"),
        );
        let mut problems = Vec::new();
        if t.value(&["off", "all"], "moves") > 0.0 {
            problems.push("traffic engineering moved flows while it was off".into());
        }
        if off.is_finite() && on.is_finite() && on > off {
            problems.push(format!(
                "more hot link-seconds with traffic engineering ({on}) than without ({off})"
            ));
        }
        problems
    }
}
