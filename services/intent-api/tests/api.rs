//! Every route through `Router` + oneshot over a store written by the stream processor from a
//! fixed input: answers, auth negatives (missing, wrong, insufficient token), SQL abuse, and
//! the OpenAPI document (every documented route is served; the checked-in docs/openapi.json is
//! current — `KPLANE_BLESS=1` rewrites it).

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use kplane_bus::PartitionEvent;
use kplane_bus::topics;
use kplane_intent_api::auth::{Role, TokenConfig, hash_token};
use kplane_intent_api::live::Live;
use kplane_intent_api::openapi::{ROUTES, document};
use kplane_intent_api::{Config, app, state};
use kplane_model::batch::{EventBatchBuilder, ReportBatchBuilder};
use kplane_model::{
    Detector, EventKind, EventRow, FlowKey, HopField, HopRecord, Metric, ReportRecord,
};
use kplane_stream_processor::metrics::ProcessorMetrics;
use kplane_stream_processor::processor::Processor;
use serde_json::Value;
use tower::ServiceExt;

const S: u64 = 1_000_000_000;

fn report(t: u64, sport: u16, path: &[u32], lat: u64, occ: u64) -> ReportRecord {
    let mut r = ReportRecord::default();
    r.envelope.received_ns = t;
    r.envelope.timestamp_ns = Some(t);
    r.envelope.node_id = path.last().copied();
    r.envelope.packet_length = Some(if sport == 1000 { 1_500 } else { 64 });
    r.flow = Some(FlowKey {
        src_ip: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
        dst_ip: IpAddr::V4(Ipv4Addr::new(10, 0, 1, 1)),
        src_port: sport,
        dst_port: 80,
        protocol: 6,
    });
    for (k, &n) in path.iter().enumerate() {
        let mut h = HopRecord::default();
        h.set(HopField::NodeId, n.into());
        h.set(HopField::L1EgressPort, 1 + k as u64);
        h.set(HopField::HopLatency, lat);
        h.set(HopField::QueueId, 0);
        h.set(HopField::QueueOccupancy, occ);
        h.set(HopField::TxUtilization, 500);
        r.hops.push(h);
    }
    r
}

/// A fresh store written by the real processor from `lanes` (reports per partition of
/// `int.reports`), made from `base`, a whole second 2 minutes ago.
fn write_store(name: &str, lanes: impl Fn(u64) -> Vec<Vec<ReportRecord>>) -> PathBuf {
    write_store_at(name, (kplane_model::unix_time_ns() / S - 120) * S, lanes)
}

/// A fresh store written by the real processor from `lanes`, made from `base`.
fn write_store_at(name: &str, base: u64, lanes: impl Fn(u64) -> Vec<Vec<ReportRecord>>) -> PathBuf {
    // One store per test: `cargo test` runs them as threads of one process.
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("kplane-{name}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let lanes = lanes(base);
    let cfg = kplane_stream_processor::Config {
        data_dir: dir.clone(),
        publish: false,
        ..kplane_stream_processor::Config::default()
    };
    let mut p = Processor::new(cfg, ProcessorMetrics::default(), None).unwrap();
    let keys: Vec<(String, u32)> = (0..lanes.len() as u32)
        .map(|i| (topics::REPORTS.to_string(), i))
        .collect();
    p.rebalance(vec![PartitionEvent::Assigned(keys.clone())])
        .unwrap();
    for (key, rows) in keys.iter().zip(lanes) {
        let mut b = ReportBatchBuilder::new(rows.len());
        rows.iter().for_each(|r| b.append(r).unwrap());
        p.offer_batches(key, 0, &[b.finish().unwrap()]);
    }
    p.flush().unwrap();
    dir
}

/// A store with two windows, 2 minutes ago.
fn store() -> PathBuf {
    write_store("api", |base| {
        vec![vec![
            report(base, 1000, &[1, 2, 3], 200, 10),
            report(base + 10, 1001, &[1, 4, 3], 900, 100),
            report(base + S, 1000, &[1, 4, 3], 300, 20),
        ]]
    })
}

/// A store where two lanes (partitions) each saw switch 3 through their own flows in the
/// same window: lane 0 three reports at queue occupancy 10, lane 1 one report at 100 (above
/// the 64 threshold).
fn two_lane_store() -> PathBuf {
    write_store("api-lanes", |base| {
        vec![
            vec![
                report(base, 1000, &[3], 200, 10),
                report(base + 10, 1000, &[3], 200, 10),
                report(base + 20, 1000, &[3], 200, 10),
            ],
            vec![report(base + 30, 2000, &[3], 200, 100)],
        ]
    })
}

/// A store where switch 3 sends out of two ports (port 1 as the first hop of `[3]`, port 2 as
/// the second of `[2, 3]`), stamping queue id 0 on both.
fn two_port_store() -> PathBuf {
    write_store("api-ports", |base| {
        vec![vec![
            report(base, 1000, &[3], 200, 10),
            report(base + 10, 2000, &[2, 3], 200, 90),
        ]]
    })
}

/// A store where switch 3's queue flaps around the threshold (64; clear level 57): 65, 60,
/// 70, 64, 65, 90, then 30 — one breach with hysteresis.
fn flapping_store() -> PathBuf {
    write_store("api-flap", |base| {
        let occ = [65, 60, 70, 64, 65, 90, 30];
        vec![
            occ.iter()
                .enumerate()
                .map(|(i, &o)| report(base + i as u64 * 10_000_000, 1000, &[3], 200, o))
                .collect(),
        ]
    })
}

/// A store with one report a second from 30 s before an hour three hours ago to 30 s after
/// it: the lane has passed the first hour's end, so that hour is rolled up.
fn rolled_store() -> PathBuf {
    const HOUR: u64 = 3_600 * S;
    let hour = (kplane_model::unix_time_ns() / HOUR - 3) * HOUR;
    write_store_at("api-rolled", hour - 30 * S, |base| {
        vec![
            (0..60)
                .map(|i| report(base + i * S, 1000, &[1, 2, 3], 200 + i, 10 + i))
                .collect(),
        ]
    })
}

struct Api {
    app: axum::Router,
    dir: PathBuf,
}

impl Drop for Api {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

const VIEWER: &str = "viewer-token";
const OPERATOR: &str = "operator-token";
const ADMIN: &str = "admin-token";

async fn api() -> Api {
    api_with(Live::new(10)).await
}

async fn api_with(live: Live) -> Api {
    api_on(live, store).await
}

async fn api_on(live: Live, store: fn() -> PathBuf) -> Api {
    // The processor runs its own runtime: not inside the test's.
    let dir = std::thread::spawn(store).join().unwrap();
    knowledge_files(&dir);
    let cfg = Config {
        store_dir: dir.clone(),
        knowledge_dir: dir.join("knowledge-state"),
        http: kplane_runtime::HttpConfig {
            tokens: vec![
                TokenConfig {
                    name: "v".into(),
                    role: Role::Viewer,
                    sha256: hash_token(VIEWER),
                },
                TokenConfig {
                    name: "o".into(),
                    role: Role::Operator,
                    sha256: hash_token(OPERATOR),
                },
                TokenConfig {
                    name: "a".into(),
                    role: Role::Admin,
                    sha256: hash_token(ADMIN),
                },
            ],
            ..Default::default()
        },
        query_worker: Some(env!("CARGO_BIN_EXE_kplane-intent-api").into()),
        query_timeout: Duration::from_secs(2),
        query_max_rows: 10,
        query_memory: 64 << 20,
        intents: kplane_control_plane::IntentsConfig {
            state_dir: dir.join("intent-api"),
            ..Default::default()
        },
        ..Config::default()
    };
    let auth = cfg.http.auth();
    let state = state::AppState::new(cfg, live, kplane_runtime::Shutdown::new())
        .await
        .unwrap();
    Api {
        app: app(state, auth),
        dir,
    }
}

/// A viewer's `GET uri`, which must answer 200: its body.
async fn viewed(a: &Api, uri: &str) -> Value {
    let (s, v) = call(a, "GET", uri, Some(VIEWER), None).await;
    assert_eq!(s, StatusCode::OK, "{uri}: {v}");
    v
}

async fn call(
    a: &Api,
    method: &str,
    uri: &str,
    token: Option<&str>,
    body: Option<&str>,
) -> (StatusCode, Value) {
    let mut req = Request::builder().method(method).uri(uri);
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    if body.is_some() {
        req = req.header("content-type", "application/json");
    }
    let req = req
        .body(body.map_or_else(Body::empty, |b| Body::from(b.to_string())))
        .unwrap();
    let res = a.app.clone().oneshot(req).await.unwrap();
    let status = res.status();
    // A live stream never ends: its headers are the answer.
    if res
        .headers()
        .get("content-type")
        .is_some_and(|v| v.to_str().unwrap_or("").starts_with("text/event-stream"))
    {
        return (status, Value::String("event-stream".into()));
    }
    let bytes = res.into_body().collect().await.unwrap().to_bytes();
    let v = serde_json::from_slice(&bytes)
        .unwrap_or(Value::String(String::from_utf8_lossy(&bytes).into()));
    (status, v)
}

#[tokio::test]
async fn every_route_answers_with_data_from_the_store() {
    let a = api().await;
    let (s, v) = call(&a, "GET", "/v1/flows?since=10m", Some(VIEWER), None).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let flows = v["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 2, "{v}");
    assert_eq!(flows[0]["src_port"], 1001, "sorted by latency: {v}");
    assert_eq!(flows[0]["src_ip"], "10.0.0.1");
    // Pagination: one per page.
    let (_, p1) = call(
        &a,
        "GET",
        "/v1/flows?since=10m&limit=1&sort=reports",
        Some(VIEWER),
        None,
    )
    .await;
    assert_eq!(p1["flows"][0]["src_port"], 1000, "{p1}");
    let cursor = p1["next_cursor"].as_str().unwrap().to_string();
    let (_, p2) = call(
        &a,
        "GET",
        &format!("/v1/flows?since=10m&limit=1&sort=reports&cursor={cursor}"),
        Some(VIEWER),
        None,
    )
    .await;
    assert_eq!(p2["flows"][0]["src_port"], 1001);
    assert!(p2["next_cursor"].is_null());
    let (_, by_bytes) = call(
        &a,
        "GET",
        "/v1/flows?since=10m&sort=bytes",
        Some(VIEWER),
        None,
    )
    .await;
    assert_eq!(by_bytes["flows"][0]["src_port"], 1000, "{by_bytes}");
    assert_eq!(by_bytes["flows"][0]["bytes"], 3_000);
    // Filters.
    let (_, f) = call(
        &a,
        "GET",
        "/v1/flows?since=10m&src=10.9.0.0/16",
        Some(VIEWER),
        None,
    )
    .await;
    assert_eq!(f["flows"].as_array().unwrap().len(), 0);
    let (_, f) = call(
        &a,
        "GET",
        "/v1/flows?since=10m&src=10.0.0.0/8&src_port=1000-1000&protocol=6",
        Some(VIEWER),
        None,
    )
    .await;
    assert_eq!(f["flows"].as_array().unwrap().len(), 1);
    let (s, _) = call(&a, "GET", "/v1/flows?src=not-a-prefix", Some(VIEWER), None).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);

    let (s, v) = call(
        &a,
        "GET",
        "/v1/flows/10.0.0.1,1000,10.0.1.1,80,6/path?since=10m",
        Some(VIEWER),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let w = v["windows"].as_array().unwrap();
    assert_eq!(w.len(), 2);
    assert_eq!(w[1]["path_changed"], true);
    let hops: Vec<u64> = w[1]["hops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["node_id"].as_u64().unwrap())
        .collect();
    assert_eq!(hops, vec![1, 4, 3], "per-hop latency in path order: {v}");
    let (s, v) = call(
        &a,
        "GET",
        "/v1/flows/10.0.0.9,1,10.0.1.1,80,6/path?since=10m",
        Some(VIEWER),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    assert!(v["error"].is_string());

    let (s, v) = call(&a, "GET", "/v1/switches?since=10m", Some(VIEWER), None).await;
    assert_eq!(s, StatusCode::OK);
    let ids: Vec<u64> = v["switches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["node_id"].as_u64().unwrap())
        .collect();
    assert_eq!(ids, vec![1, 2, 3, 4]);
    let (s, v) = call(
        &a,
        "GET",
        "/v1/switches/3/queues?since=10m",
        Some(VIEWER),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["queues"][0]["occupancy_max"], 100, "{v}");
    let (s, _) = call(
        &a,
        "GET",
        "/v1/switches/99/queues?since=10m",
        Some(VIEWER),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (s, _) = call(&a, "GET", "/v1/switches/x/queues", Some(VIEWER), None).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);

    let (s, v) = call(&a, "GET", "/v1/links?since=10m", Some(VIEWER), None).await;
    assert_eq!(s, StatusCode::OK);
    let link = v["links"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["node_id"] == 1 && l["egress_port"] == 1)
        .cloned()
        .unwrap();
    assert!(
        link["next_node_id"] == 2 || link["next_node_id"] == 4,
        "{link}"
    );

    let (s, v) = call(
        &a,
        "GET",
        "/v1/events?since=10m&kind=threshold",
        Some(VIEWER),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert!(
        !v["events"].as_array().unwrap().is_empty(),
        "queue threshold events: {v}"
    );
    let (s, _) = call(&a, "GET", "/v1/events?kind=nope", Some(VIEWER), None).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    let (s, v) = call(&a, "GET", "/v1/events?live=true", Some(VIEWER), None).await;
    assert_eq!(s, StatusCode::OK);
    assert!(v["events"].is_array());

    let (s, v) = call(&a, "GET", "/v1/live", Some(VIEWER), None).await;
    assert_eq!(s, StatusCode::OK);
    assert!(v["queues"].is_array() && v["windows_seen"].is_u64());

    let (s, v) = call(
        &a,
        "POST",
        "/v1/query",
        Some(VIEWER),
        Some(r#"{"sql":"SELECT sum(reports) AS n FROM flows"}"#),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["rows"][0]["n"], 3);
    assert_eq!(v["truncated"], false);

    let (s, v) = call(&a, "GET", "/v1/tokens", Some(ADMIN), None).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["tokens"].as_array().unwrap().len(), 3);
    assert!(
        !v.to_string().contains(&hash_token(ADMIN)),
        "hashes never leave"
    );

    let (s, v) = call(&a, "GET", "/v1/nothing", Some(VIEWER), None).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    assert!(v["error"].is_string());
}

/// The authorisation matrix: every route of the route table × no token, a wrong one, viewer,
/// operator and admin. Below the route's role: 401 or 403; at or above it: never those.
#[tokio::test]
async fn every_route_answers_each_role_as_the_route_table_says() {
    let a = api().await;
    let tokens = [
        (Role::Viewer, VIEWER),
        (Role::Operator, OPERATOR),
        (Role::Admin, ADMIN),
    ];
    for r in ROUTES {
        let uri = r
            .path
            .replace("{flow}", "10.0.0.1,1000,10.0.1.1,80,6")
            .replace("{id}", "3");
        let method = r.method.to_uppercase();
        let body = r.body.map(|_| r#"{"sql":"SELECT 1"}"#);
        let (s, v) = call(&a, &method, &uri, None, body).await;
        assert_eq!(
            s,
            StatusCode::UNAUTHORIZED,
            "{method} {uri} without a token"
        );
        assert_eq!(v["error"], "missing bearer token");
        let (s, v) = call(&a, &method, &uri, Some("wrong"), body).await;
        assert_eq!(
            s,
            StatusCode::UNAUTHORIZED,
            "{method} {uri} with a wrong token"
        );
        assert_eq!(v["error"], "unknown token");
        for (role, token) in tokens {
            let (s, v) = call(&a, &method, &uri, Some(token), body).await;
            if role < r.role {
                assert_eq!(s, StatusCode::FORBIDDEN, "{method} {uri} as {role:?}: {v}");
                assert!(
                    v["error"].as_str().unwrap().contains(r.role.as_str()),
                    "{v}"
                );
            } else {
                assert!(
                    s != StatusCode::UNAUTHORIZED && s != StatusCode::FORBIDDEN,
                    "{method} {uri} as {role:?}: {s} {v}"
                );
                assert!(!s.is_server_error(), "{method} {uri} as {role:?}: {s} {v}");
            }
        }
    }
    // The admin routes are not on the API port.
    for open in ["/metrics", "/healthz", "/readyz"] {
        let (s, _) = call(&a, "GET", open, None, None).await;
        assert_eq!(s, StatusCode::NOT_FOUND, "{open}");
    }
}

/// Bad parameters are a 4xx naming the parameter, never a 500.
#[tokio::test]
async fn bad_parameters_are_4xx_naming_them() {
    let a = api().await;
    for (uri, name) in [
        ("/v1/flows?cursor=18446744073709551615", "cursor"),
        ("/v1/flows?cursor=-1", "cursor"),
        ("/v1/flows?from=2026-13-45T00:00:00Z", "from"),
        ("/v1/flows?from=yesterday", "from"),
        ("/v1/flows?to=9999999-01-01T00:00:00Z", "to"),
        ("/v1/flows?since=forever", "since"),
        ("/v1/flows?src=10.0.0.0/33", "src"),
        ("/v1/flows?dst_port=70000", "dst_port"),
        ("/v1/flows?sort=random", "sort"),
        ("/v1/events?kind=nope", "kind"),
        ("/v1/switches/abc/queues", "switch id"),
        ("/v1/switches/abc/changes", "switch id"),
        ("/v1/switches/3/changes?metric=nope", "metric"),
        ("/v1/flows/garbage/path", "flow"),
    ] {
        let (s, v) = call(&a, "GET", uri, Some(VIEWER), None).await;
        assert!(s.is_client_error(), "{uri}: {s} {v}");
        assert!(
            v["error"].as_str().is_some_and(|e| e.contains(name))
                || v.as_str().is_some_and(|e| e.contains(name)),
            "{uri}: {v}"
        );
    }
}

/// The hostile-SQL suite: each query gets a clean 4xx or 504, and the API keeps answering.
/// Those that end their worker process (an allocation past its address space, a stack
/// overflow) are answered 422 and the next query gets a fresh worker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_sql_gets_a_clean_refusal_and_the_api_lives_on() {
    let a = api().await;
    let many = |n: usize| format!("SELECT 1{} AS n", "+1".repeat(n));
    let nested = |n: usize| format!("SELECT {}1{} AS n", "(".repeat(n), ")".repeat(n));
    let cases: Vec<(String, &[u16])> = vec![
        // Huge allocations.
        ("SELECT length(repeat(arrow_cast('x', 'LargeUtf8'), 1000000000000)) AS n".into(), &[422]),
        ("SELECT lpad('x', 1000000000000) AS n".into(), &[422]),
        ("SELECT array_repeat(1, 1000000000000) AS n".into(), &[422]),
        ("SELECT range(0, 1000000000000) AS n".into(), &[422]),
        ("SELECT string_agg(repeat('x', 1000000), ',') AS s FROM generate_series(1, 100000)".into(), &[422, 504]),
        // Deep nesting: too many tokens, too deep for the parser, or just deep.
        (many(300_000), &[400]),
        (nested(10_000), &[400]),
        (nested(200), &[400, 422]),
        (many(4_000), &[200, 400, 422, 504]),
        // Runaway work.
        ("WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) AS n FROM r".into(), &[422, 504]),
        // A product of 10^10 rows whose values are used (a bare count(*) of it needs no
        // columns and finishes within the timeout on a fast machine).
        ("SELECT sum(a.value * b.value) AS n FROM generate_series(1, 100000) a, generate_series(1, 100000) b".into(), &[422, 504]),
        ("SELECT v, count(*) FROM generate_series(1, 2000000000) t(v) GROUP BY v ORDER BY v DESC".into(), &[422, 504]),
        // Writes and files, also behind EXPLAIN.
        ("EXPLAIN COPY flows TO '/tmp/kplane-hostile.parquet'".into(), &[400]),
        ("EXPLAIN CREATE TABLE t AS SELECT 1".into(), &[400]),
        ("EXPLAIN INSERT INTO flows SELECT * FROM flows".into(), &[400]),
        ("EXPLAIN ANALYZE COPY flows TO '/tmp/kplane-hostile.parquet'".into(), &[400]),
        ("CREATE EXTERNAL TABLE p STORED AS CSV LOCATION '/etc/passwd'".into(), &[400]),
        ("SELECT * FROM '/etc/passwd'".into(), &[422]),
        ("SELECT * FROM read_csv('/etc/passwd')".into(), &[422]),
    ];
    for (sql, allowed) in &cases {
        let body = serde_json::json!({ "sql": sql }).to_string();
        let (s, v) = call(&a, "POST", "/v1/query", Some(ADMIN), Some(&body)).await;
        let shown = &sql[..sql.len().min(80)];
        assert!(allowed.contains(&s.as_u16()), "{shown}: {s} {v}");
        if s != StatusCode::OK {
            assert!(
                v["error"].as_str().is_some_and(|e| !e.is_empty()),
                "{shown}: {v}"
            );
        }
        // After each, the API still answers a plain query.
        let (s, v) = call(
            &a,
            "POST",
            "/v1/query",
            Some(ADMIN),
            Some(r#"{"sql":"SELECT 41 + 1 AS n"}"#),
        )
        .await;
        assert_eq!(
            (s, &v["rows"][0]["n"]),
            (StatusCode::OK, &Value::from(42)),
            "after {shown}: {v}"
        );
    }
    assert!(!std::path::Path::new("/tmp/kplane-hostile.parquet").exists());
}

/// A token may run `query-concurrency` queries at once; past it, 429 with Retry-After.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_runs_its_share_of_queries_at_once() {
    let a = api().await;
    let slow = r#"{"sql":"SELECT count(*) AS n FROM generate_series(1, 100000) a, generate_series(1, 100000) b"}"#;
    let (one, two, three) = tokio::join!(
        call(&a, "POST", "/v1/query", Some(VIEWER), Some(slow)),
        call(&a, "POST", "/v1/query", Some(VIEWER), Some(slow)),
        async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            call(&a, "POST", "/v1/query", Some(VIEWER), Some(slow)).await
        },
    );
    assert_eq!(one.0, StatusCode::GATEWAY_TIMEOUT, "{}", one.1);
    assert_eq!(two.0, StatusCode::GATEWAY_TIMEOUT, "{}", two.1);
    assert_eq!(three.0, StatusCode::TOO_MANY_REQUESTS, "{}", three.1);
    assert!(
        three.1["error"]
            .as_str()
            .unwrap()
            .contains("query-concurrency")
    );
    // Another token is not held up by the first one's share.
    let (s, _) = call(
        &a,
        "POST",
        "/v1/query",
        Some(ADMIN),
        Some(r#"{"sql":"SELECT 1 AS n"}"#),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
}

#[tokio::test]
async fn sql_abuse_is_refused_with_a_clear_error() {
    let a = api().await;
    for sql in [
        "DROP TABLE flows",
        "CREATE TABLE x AS SELECT 1",
        "CREATE EXTERNAL TABLE x STORED AS PARQUET LOCATION '/etc'",
        "INSERT INTO flows SELECT * FROM flows",
        "SELECT 1; DROP TABLE flows",
        "SET datafusion.execution.batch_size = 1",
        "COPY flows TO '/tmp/out.parquet'",
        "SELEC nonsense",
    ] {
        let body = serde_json::json!({ "sql": sql }).to_string();
        let (s, v) = call(&a, "POST", "/v1/query", Some(ADMIN), Some(&body)).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{sql}: {v}");
        assert!(v["error"].as_str().is_some_and(|e| !e.is_empty()), "{sql}");
    }
    // Unknown table: the caller's mistake, explained.
    let (s, v) = call(
        &a,
        "POST",
        "/v1/query",
        Some(VIEWER),
        Some(r#"{"sql":"SELECT * FROM nope"}"#),
    )
    .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(v["error"].as_str().unwrap().contains("nope"), "{v}");
    // Row limit: cut, and said so.
    let (s, v) = call(
        &a,
        "POST",
        "/v1/query",
        Some(VIEWER),
        Some(r#"{"sql":"SELECT * FROM generate_series(1, 1000)"}"#),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["rows"].as_array().unwrap().len(), 10);
    assert_eq!(v["truncated"], true);
    // A huge scan: stopped by the memory or the time limit, never answered.
    let (s, v) = call(
        &a,
        "POST",
        "/v1/query",
        Some(VIEWER),
        Some(r#"{"sql":"SELECT v, count(*) FROM generate_series(1, 2000000000) t(v) GROUP BY v ORDER BY v DESC"}"#),
    )
    .await;
    assert!(
        s == StatusCode::GATEWAY_TIMEOUT || s == StatusCode::UNPROCESSABLE_ENTITY,
        "{s} {v}"
    );
    assert!(v["error"].is_string());
}

#[tokio::test]
async fn the_openapi_document_covers_every_route_and_is_current() {
    let a = api().await;
    let (s, v) = call(&a, "GET", "/openapi.json", None, None).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v, document());
    assert_eq!(v["openapi"], "3.0.3");
    for r in ROUTES {
        assert!(
            v["paths"][r.path][r.method].is_object(),
            "{} {}",
            r.method,
            r.path
        );
        // Documented ⇒ served (with a token, nothing documented is a 404/405 route miss).
        let uri = r
            .path
            .replace("{flow}", "10.0.0.1,1000,10.0.1.1,80,6")
            .replace("{id}", "3");
        let method = r.method.to_uppercase();
        let body = r.body.map(|_| r#"{"sql":"SELECT 1"}"#);
        let (s, v) = call(&a, &method, &uri, Some(ADMIN), body).await;
        assert!(
            s != StatusCode::METHOD_NOT_ALLOWED
                && !(s == StatusCode::NOT_FOUND
                    && v["error"]
                        .as_str()
                        .is_some_and(|e| e.starts_with("no such route"))),
            "{method} {uri}: {s} {v}"
        );
    }
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/openapi.json");
    let text = serde_json::to_string_pretty(&document()).unwrap() + "\n";
    if std::env::var_os("KPLANE_BLESS").is_some() {
        std::fs::write(&path, &text).unwrap();
    }
    // Compared as JSON values: key order depends on serde_json's features in the build.
    let checked_in: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap_or_default())
            .unwrap_or_default();
    assert_eq!(
        checked_in,
        document(),
        "docs/openapi.json is stale: `make bless`"
    );
}

#[tokio::test]
async fn the_console_is_served_without_a_token() {
    let a = api().await;
    let (s, v) = call(&a, "GET", "/", None, None).await;
    assert_eq!(s, StatusCode::OK);
    assert!(
        v.as_str()
            .unwrap()
            .contains("<title>kplane console</title>")
    );
    let (s, _) = call(&a, "GET", "/console.js", None, None).await;
    assert_eq!(s, StatusCode::OK);
}

/// What the knowledge service leaves in the store and its state directory: two episodes of
/// one anomaly (start, end) and one still open, an undecodable row, and a model registry.
fn knowledge_files(dir: &std::path::Path) {
    let now = kplane_model::unix_time_ns() as i64;
    let episode = |id: &str, entity: &str, kind: &str, t: &str, end: Option<i64>| {
        let mut v = serde_json::json!({
            "id": id, "entity_kind": kind, "entity": entity, "type": t,
            "confidence": 0.9, "score": 11.0, "threshold": 4.0,
            "start_ns": now - 60 * S as i64, "last_ns": now, "windows": 3,
            "detected_ns": now - 60 * S as i64, "phase": if end.is_some() { "end" } else { "start" },
            "model_version": 2,
            "explanation": {"summary": format!("{t} at {entity}"),
                            "features": [{"name": "bytes", "value": 9e6, "normal": 1e5, "z": 40.0}],
                            "blast_radius": {"flows": [], "flows_total": 7, "nodes": [1, 3],
                                             "queues": [], "links": [], "other_flows": 2}},
            "recommendations": [{"kind": "block", "match": {"src": "10.0.9.9/32"}}],
        });
        if let Some(e) = end {
            v["end_ns"] = e.into();
        }
        serde_json::from_value::<kplane_model::results::Anomaly>(v).unwrap()
    };
    let rows = [
        episode(
            "destination:10.0.1.1:1",
            "10.0.1.1",
            "destination",
            "ddos",
            None,
        ),
        episode(
            "destination:10.0.1.1:1",
            "10.0.1.1",
            "destination",
            "ddos",
            Some(now),
        ),
        episode("queue:3/0:2", "3/0", "queue", "congestion", None),
        // Its record is overwritten with a torn one below.
        episode("torn", "3/1", "queue", "congestion", None),
    ];
    let b = kplane_model::knowledge_tables::anomalies_batch(&rows).unwrap();
    let i = b.schema().index_of("record").unwrap();
    let mut cols = b.columns().to_vec();
    let old = cols[i]
        .as_any()
        .downcast_ref::<arrow_array::StringArray>()
        .unwrap();
    let torn: Vec<&str> = (0..rows.len())
        .map(|r| if r == 3 { "{ torn" } else { old.value(r) })
        .collect();
    cols[i] = std::sync::Arc::new(arrow_array::StringArray::from(torn));
    let b = arrow_array::RecordBatch::try_new(b.schema(), cols).unwrap();
    let (date, hour) = kplane_store::layout::date_hour(now);
    let part = dir.join(format!("tables/anomalies/date={date}/hour={hour}"));
    std::fs::create_dir_all(&part).unwrap();
    let file = std::fs::File::create(part.join("knowledge-1.parquet")).unwrap();
    let mut w = datafusion::parquet::arrow::ArrowWriter::try_new(file, b.schema(), None).unwrap();
    w.write(&b).unwrap();
    w.close().unwrap();
    std::fs::create_dir_all(dir.join("knowledge-state")).unwrap();
    std::fs::write(
        dir.join("knowledge-state/models.json"),
        r#"{"version": 2, "status": "ready", "message": "", "models": [{"kind": "destination", "detector": "kmeans", "features": ["bytes"], "fitted": {"centroids": [[0.0]]}}], "typer": null, "forecasts": {}, "history": []}"#,
    )
    .unwrap();
}

#[tokio::test]
async fn the_knowledge_services_findings_are_served() {
    use kplane_bus::topics::FORECASTS;
    let live = Live::new(10);
    let a = api_with(live.clone()).await;
    // Anomalies from the store: one row per episode, the latest record of each.
    let (s, v) = call(&a, "GET", "/v1/anomalies", Some(VIEWER), None).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["anomalies"].as_array().unwrap().len(), 2, "{v}");
    assert_eq!(v["undecodable"], 1, "{v}");
    let (_, v) = call(&a, "GET", "/v1/anomalies?state=open", Some(VIEWER), None).await;
    assert_eq!(v["anomalies"][0]["entity"], "3/0", "{v}");
    let (_, v) = call(
        &a,
        "GET",
        "/v1/anomalies?type=ddos&since=1h",
        Some(VIEWER),
        None,
    )
    .await;
    let rows = v["anomalies"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{v}");
    assert_eq!(rows[0]["phase"], "end");
    assert_eq!(rows[0]["summary"], "ddos at 10.0.1.1");
    assert_eq!(rows[0]["flows_affected"], 7);
    // The whole record with the intents submitted for it (none here).
    let (s, v) = call(
        &a,
        "GET",
        "/v1/anomalies/destination:10.0.1.1:1",
        Some(VIEWER),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["explanation"]["features"][0]["name"], "bytes");
    assert_eq!(v["recommendations"][0]["kind"], "block");
    assert_eq!(v["intents"], serde_json::json!([]));
    let (s, _) = call(&a, "GET", "/v1/anomalies/nope", Some(VIEWER), None).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    // Bad filters are refused by name.
    for q in [
        "type=meteor",
        "entity_kind=planet",
        "state=ajar",
        "since=yesterday",
    ] {
        let (s, v) = call(&a, "GET", &format!("/v1/anomalies?{q}"), Some(VIEWER), None).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{q}: {v}");
        assert!(
            v["error"]
                .as_str()
                .unwrap()
                .starts_with(q.split('=').next().unwrap()),
            "{v}"
        );
    }
    let (s, v) = call(
        &a,
        "GET",
        "/v1/anomalies/stream?type=ddos",
        Some(VIEWER),
        None,
    )
    .await;
    assert_eq!(
        (s, v),
        (StatusCode::OK, Value::String("event-stream".into()))
    );
    let (s, _) = call(&a, "GET", "/v1/anomalies", None, None).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);

    // Forecasts from int.forecasts: each window's forecast beside what happened.
    let fc = |end: i64, observed: i64, predicted: f64, last: f64| {
        serde_json::json!({"series": "link_utilization", "entity": "3:1", "window_end_ns": end,
            "horizon_windows": 1, "predicted": predicted, "last_value": last,
            "observed_end_ns": observed, "ewma": last, "model_version": 2})
        .to_string()
    };
    let payload = [
        fc(2, 1, 500.0, 400.0),
        fc(3, 2, 520.0, 510.0),
        fc(4, 3, 530.0, 525.0),
    ]
    .join("\n");
    kplane_intent_api::live::apply(&live, FORECASTS, None, payload.as_bytes());
    let (s, v) = call(
        &a,
        "GET",
        "/v1/forecasts?series=link_utilization",
        Some(VIEWER),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let points = v["forecasts"][0]["points"].as_array().unwrap();
    assert_eq!(points.len(), 3, "{v}");
    assert_eq!(points[0]["predicted"], 500.0);
    assert_eq!(points[0]["actual"], 510.0, "window 2 turned out 510: {v}");
    assert_eq!(points[1]["actual"], 525.0);
    assert!(points[2]["actual"].is_null(), "window 4 is not over: {v}");
    let (s, _) = call(
        &a,
        "GET",
        "/v1/forecasts?series=weather",
        Some(VIEWER),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);

    // The model registry, fitted parameters only on request.
    let (s, v) = call(&a, "GET", "/v1/models", Some(VIEWER), None).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["status"], "ready");
    assert!(v["models"][0].get("fitted").is_none(), "{v}");
    let (_, v) = call(&a, "GET", "/v1/models?detail=true", Some(VIEWER), None).await;
    assert!(v["models"][0]["fitted"].is_object(), "{v}");
}

#[tokio::test]
async fn a_switch_seen_by_several_lanes_is_one_exact_answer() {
    let a = api_on(Live::new(10), two_lane_store).await;
    let v = viewed(&a, "/v1/switches/3/queues?since=10m").await;
    let q = v["queues"].as_array().unwrap();
    assert_eq!(
        q.len(),
        1,
        "one row for the window and queue, not one per lane: {v}"
    );
    assert_eq!(q[0]["samples"], 4);
    assert_eq!(q[0]["occupancy_max"], 100);
    // (3 × 10 + 1 × 100) / 4, not the lanes' unweighted (10 + 100) / 2.
    assert_eq!(q[0]["occupancy_mean"], 32.5, "{v}");
    // Lane 1 was above the threshold for all of its samples (the whole second), lane 0 for
    // none: a quarter of the samples, a quarter of the window.
    assert_eq!(q[0]["congested_ns"], 250_000_000, "{v}");

    let v = viewed(&a, "/v1/switches?since=10m").await;
    assert_eq!(v["switches"][0]["occupancy_mean"], 32.5, "{v}");
    assert_eq!(v["switches"][0]["congested_ns"], 250_000_000, "{v}");
}

/// A queue is a port's queue: the same queue id on two ports of a switch is two queues.
#[tokio::test]
async fn a_switchs_queue_is_its_ports_queue() {
    let a = api_on(Live::new(10), two_port_store).await;
    let v = viewed(&a, "/v1/switches/3/queues?since=10m").await;
    let q: Vec<_> = v["queues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| {
            (
                q["egress_port"].clone(),
                q["queue_id"].clone(),
                q["occupancy_max"].clone(),
            )
        })
        .collect();
    assert_eq!(
        q,
        [
            (1.into(), 0.into(), 10.into()),
            (2.into(), 0.into(), 90.into())
        ],
        "{v}"
    );
    let v = viewed(&a, "/v1/switches?since=10m").await;
    let three = v["switches"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["node_id"] == 3)
        .cloned();
    assert_eq!(three.unwrap()["queues"], 2, "{v}");
}

/// Ranges over 6 hours read the 1-minute rollups, over 7 days the 1-hour ones, and answer
/// as the windows do: the rolled-up hour plus the windows after it, each once.
#[tokio::test]
async fn long_ranges_read_rollups_and_answer_as_the_windows_do() {
    let a = api_on(Live::new(10), rolled_store).await;
    assert!(
        a.dir.join("tables/flows_1m").exists() && a.dir.join("tables/queues_1h").exists(),
        "the processor rolled the complete hour up"
    );
    for (since, resolution) in [("5h", "window"), ("2d", "1m"), ("30d", "1h")] {
        let v = viewed(&a, &format!("/v1/flows?since={since}")).await;
        assert_eq!(v["resolution"], resolution, "{since}");
        assert_eq!(v["flows"][0]["reports"], 60, "{since}: {v}");
        assert_eq!(v["flows"][0]["latency_max_ns"], 3 * 259, "{since}: {v}");
        let v = viewed(&a, &format!("/v1/switches?since={since}")).await;
        assert_eq!(v["resolution"], resolution);
        let sw = v["switches"].as_array().unwrap();
        let three = sw.iter().find(|s| s["node_id"] == 3).unwrap();
        assert_eq!(three["occupancy_max"], 69, "{since}: {v}");
        // The mean of 10..=69, weighted by samples, whatever the windows' length.
        assert_eq!(three["occupancy_mean"], 39.5, "{since}: {v}");
        let v = viewed(&a, &format!("/v1/links?since={since}")).await;
        let samples: u64 = v["links"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["samples"].as_u64().unwrap())
            .sum();
        assert_eq!(
            samples, 180,
            "{since}: three egress ports, 60 samples each: {v}"
        );
    }
    // A flow's trajectory over days: the rolled-up hour is one minute-long window.
    let v = viewed(&a, "/v1/flows/10.0.0.1,1000,10.0.1.1,80,6/path?since=2d").await;
    assert_eq!(v["resolution"], "1m");
    let w = v["windows"].as_array().unwrap();
    assert_eq!(w.len(), 31, "one minute, then 30 seconds: {v}");
    assert_eq!(w[0]["reports"], 30);
    let total: u64 = w.iter().map(|w| w["reports"].as_u64().unwrap()).sum();
    assert_eq!(total, 60);
}

/// Threshold crossings come back as one episode with its crossings, peak and end (the raw
/// events on request), from the store and from the live feed.
#[tokio::test]
async fn a_flapping_queue_is_one_episode() {
    let live = Live::new(100);
    let a = api_on(live.clone(), flapping_store).await;
    let (s, v) = call(&a, "GET", "/v1/events?since=10m", Some(VIEWER), None).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let episodes = v["events"].as_array().unwrap();
    assert_eq!(episodes.len(), 1, "{v}");
    let e = &episodes[0];
    assert_eq!(e["kind"], "threshold");
    assert_eq!(e["metric"], "queue_occupancy");
    assert_eq!(
        (e["node_id"].as_u64(), e["queue_id"].as_u64()),
        (Some(3), Some(0))
    );
    assert_eq!(e["crossings"], 3, "65, 70 and 65 crossed 64: {e}");
    assert_eq!(e["peak"], 90);
    assert_eq!(e["threshold"], 64);
    assert_eq!(e["severity"], "warning");
    assert!(e["end_ns"].as_i64().unwrap() > e["start_ns"].as_i64().unwrap());
    let (_, raw) = call(
        &a,
        "GET",
        "/v1/events?since=10m&raw=true",
        Some(VIEWER),
        None,
    )
    .await;
    let kinds: Vec<&str> = raw["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["threshold_cleared", "threshold", "threshold", "threshold"],
        "newest first"
    );

    // The live feed: the same grouping as alerts arrive.
    let alert = |kind, t, value| kplane_model::results::Alert {
        time_ns: t,
        kind: Some(kind),
        node_id: Some(7),
        queue_id: Some(1),
        metric: Some("queue_occupancy".into()),
        value: Some(value),
        threshold: Some(64),
        ..Default::default()
    };
    use kplane_model::results::AlertKind::{Threshold, ThresholdCleared};
    live.alert(alert(Threshold, 1, 70));
    live.alert(alert(Threshold, 2, 200));
    let (_, v) = call(&a, "GET", "/v1/events?live=true", Some(VIEWER), None).await;
    let e = &v["events"][0];
    assert_eq!(
        (e["crossings"].as_u64(), e["end_ns"].is_null()),
        (Some(2), true),
        "{v}"
    );
    assert_eq!(e["severity"], "critical", "peak 200 ≥ twice 64");
    live.alert(alert(ThresholdCleared, 3, 200));
    let (_, v) = call(&a, "GET", "/v1/events?live=true", Some(VIEWER), None).await;
    assert_eq!(v["events"][0]["end_ns"], 3, "{v}");
    let (_, v) = call(
        &a,
        "GET",
        "/v1/events?live=true&raw=true",
        Some(VIEWER),
        None,
    )
    .await;
    assert_eq!(v["events"].as_array().unwrap().len(), 3);
}

/// Flows slowed by one switch are one incident, an attacked destination claims its flows'
/// breaches, and every member is reachable from its incident: the list, the filters, one
/// incident's evidence, its resolution after the hold.
#[tokio::test]
async fn breaches_behind_one_root_are_one_incident() {
    use kplane_model::results::AlertKind::{Threshold, ThresholdCleared};
    use kplane_model::results::{Alert, Anomaly, AnomalyPhase, AnomalyType, EntityKind};
    let live = Live::new(1_000);
    let a = api_with(live.clone()).await;
    let slow = |kind, t: u64, node: u32, src: u8, dst: &str| Alert {
        time_ns: (t * S) as i64,
        kind: Some(kind),
        src_ip: Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, src))),
        dst_ip: Some(dst.parse().unwrap()),
        src_port: Some(1000),
        dst_port: Some(80),
        protocol: Some(6),
        node_id: Some(node),
        metric: Some("hop_latency_ns".into()),
        value: Some(3_000),
        threshold: Some(2_000),
        path: vec![1, node, 9],
        ..Alert::default()
    };
    for src in 1..=20 {
        live.alert(slow(Threshold, 1, 4, src, "10.0.1.1"));
    }
    for src in 1..=20 {
        live.alert(slow(ThresholdCleared, 2, 4, src, "10.0.1.1"));
    }
    live.alert(slow(Threshold, 3, 6, 1, "10.0.1.1"));

    let (s, v) = call(&a, "GET", "/v1/incidents", Some(VIEWER), None).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["incidents"].as_array().unwrap().len(), 2, "{v}");
    assert_eq!(
        (v["open"].as_u64(), v["opened"].as_u64()),
        (Some(2), Some(2))
    );
    let four = v["incidents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["root"]["entity"] == "4")
        .unwrap()
        .clone();
    assert_eq!(four["kind"], "congestion");
    assert_eq!(four["root"]["kind"], "switch");
    assert_eq!(
        (four["members"].as_u64(), four["flows"].as_u64()),
        (Some(20), Some(20))
    );
    assert_eq!(four["open_members"], 0, "every flow's breach cleared");
    assert_eq!(four["severity"], "warning", "1.5× the threshold");

    // Every episode is a member of an incident.
    let id = four["id"].as_str().unwrap();
    let (s, d) = call(
        &a,
        "GET",
        &format!("/v1/incidents/{id}"),
        Some(VIEWER),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{d}");
    let members: Vec<&str> = d["member_list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    let (_, ev) = call(
        &a,
        "GET",
        "/v1/events?live=true&limit=100",
        Some(VIEWER),
        None,
    )
    .await;
    let episodes = ev["events"].as_array().unwrap();
    assert_eq!(episodes.len(), 21);
    for e in episodes.iter().filter(|e| e["node_id"] == 4) {
        assert!(
            members.contains(&e["id"].as_str().unwrap()),
            "{e} not in {id}"
        );
    }
    assert_eq!(d["top_flows"].as_array().unwrap().len(), 10);
    assert_eq!(d["paths"], serde_json::json!([[1, 4, 9]]));
    assert_eq!(d["timeline"][0]["event"], "opened");

    // The knowledge service raises an attack on 10.0.1.2: flows to it that then slow at
    // switch 4 are its collateral, not a new congestion; the link on its flows' paths is
    // merged into it.
    let mut explanation = kplane_model::results::Explanation::default();
    explanation.blast_radius.nodes = vec![1, 4, 9];
    let attack = Anomaly {
        id: "destination:10.0.1.2:5".into(),
        entity_kind: EntityKind::Destination,
        entity: "10.0.1.2".into(),
        anomaly_type: AnomalyType::Ddos,
        confidence: 0.9,
        score: 40.0,
        threshold: 4.0,
        start_ns: (5 * S) as i64,
        end_ns: None,
        last_ns: (5 * S) as i64,
        windows: 1,
        detected_ns: 0,
        phase: AnomalyPhase::Start,
        model_version: 1,
        explanation,
        recommendations: vec![serde_json::json!({"action": "block"})],
        settled: false,
    };
    // In the attack's first window, before it is raised: a link on its path behaves oddly.
    let odd_link = Anomaly {
        id: "link:9:1:5".into(),
        entity_kind: EntityKind::Link,
        entity: "9:1".into(),
        anomaly_type: AnomalyType::Unknown,
        score: 9.0,
        explanation: Default::default(),
        recommendations: Vec::new(),
        ..attack.clone()
    };
    let line = serde_json::to_vec(&odd_link).unwrap();
    kplane_intent_api::live::apply(&live, topics::ANOMALIES, None, &line);
    let link_incidents = async || {
        call(
            &a,
            "GET",
            "/v1/incidents?root_kind=link",
            Some(VIEWER),
            None,
        )
        .await
        .1
    };
    let v = link_incidents().await;
    let link_id = v["incidents"][0]["id"].as_str().unwrap().to_string();

    // Then the attack is raised.
    let line = serde_json::to_vec(&attack).unwrap();
    kplane_intent_api::live::apply(&live, topics::ANOMALIES, None, &line);
    for src in 30..=39 {
        live.alert(slow(Threshold, 6, 4, src, "10.0.1.2"));
    }
    let (_, v) = call(&a, "GET", "/v1/incidents?kind=ddos", Some(VIEWER), None).await;
    let ddos = &v["incidents"][0];
    assert_eq!(ddos["root"]["entity"], "10.0.1.2", "{v}");
    assert_eq!(
        (ddos["members"].as_u64(), ddos["flows"].as_u64()),
        (Some(12), Some(10)),
        "the attack, its flows' 10 breaches and the merged link's anomaly"
    );
    assert_eq!(ddos["severity"], "critical");
    let id = ddos["id"].as_str().unwrap();
    let v = link_incidents().await;
    assert_eq!(v["incidents"], serde_json::json!([]), "merged away: {v}");
    // The merged incident's id leads to the attack's.
    let (s, d) = call(
        &a,
        "GET",
        &format!("/v1/incidents/{link_id}"),
        Some(VIEWER),
        None,
    )
    .await;
    assert_eq!((s, d["id"].as_str()), (StatusCode::OK, Some(id)), "{d}");
    assert!(
        d["timeline"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["event"] == "merged" && t["member"] == link_id.as_str()),
        "{d}"
    );
    let (_, d) = call(
        &a,
        "GET",
        &format!("/v1/incidents/{id}"),
        Some(VIEWER),
        None,
    )
    .await;
    let anomaly = d["member_list"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["source"] == "anomaly")
        .unwrap();
    assert_eq!(
        anomaly["recommendations"][0]["action"], "block",
        "{anomaly}"
    );

    // Event time moves on past switch 4's hold: it resolves at its last breach's end.
    live.alert(slow(Threshold, 60, 7, 1, "10.0.1.1"));
    let (_, v) = call(
        &a,
        "GET",
        "/v1/incidents?state=resolved",
        Some(VIEWER),
        None,
    )
    .await;
    let resolved = v["incidents"].as_array().unwrap();
    assert_eq!(resolved.len(), 1, "{v}");
    assert_eq!(resolved[0]["root"]["entity"], "4");
    assert_eq!(resolved[0]["end_ns"], (2 * S) as i64);
    let (_, v) = call(
        &a,
        "GET",
        "/v1/incidents?severity=critical",
        Some(VIEWER),
        None,
    )
    .await;
    assert_eq!(v["incidents"].as_array().unwrap().len(), 1, "{v}");

    for bad in [
        "state=bogus",
        "severity=loud",
        "root_kind=planet",
        "limit=x",
    ] {
        let (s, v) = call(
            &a,
            "GET",
            &format!("/v1/incidents?{bad}"),
            Some(VIEWER),
            None,
        )
        .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{bad}: {v}");
    }
    let (s, _) = call(&a, "GET", "/v1/incidents/nope", Some(VIEWER), None).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (s, v) = call(&a, "GET", "/v1/incidents/stream", Some(VIEWER), None).await;
    assert_eq!(
        (s, v),
        (StatusCode::OK, Value::String("event-stream".into()))
    );
}

/// A store whose `int.events` lane got two collectors' views of switch 3's queue 1 and port 2.
fn switch_views_store() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kplane-api-views-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let base = (kplane_model::unix_time_ns() / S - 120) * S;
    let cfg = kplane_stream_processor::Config {
        data_dir: dir.clone(),
        publish: false,
        ..kplane_stream_processor::Config::default()
    };
    let mut p = Processor::new(cfg, ProcessorMetrics::default(), None).unwrap();
    let lane = (topics::EVENTS.to_string(), 0);
    p.rebalance(vec![PartitionEvent::Assigned(vec![lane.clone()])])
        .unwrap();
    // (ms after base, kind, metric, value): collector A, then B, of one switch.
    let views: [(u64, EventKind, Metric, u64); 5] = [
        (0, EventKind::New, Metric::QueueOccupancy, 10),
        (5, EventKind::New, Metric::QueueOccupancy, 30),
        (10, EventKind::New, Metric::LinkUtilization, 200),
        (1_000, EventKind::Change, Metric::QueueOccupancy, 500),
        (1_002, EventKind::Change, Metric::QueueOccupancy, 480),
    ];
    let mut b = EventBatchBuilder::new(views.len());
    for (ms, kind, metric, value) in views {
        let link = metric == Metric::LinkUtilization;
        b.append(&EventRow {
            received_ns: base + ms * 1_000_000,
            kind,
            metric,
            detector: Detector::Threshold,
            flow: None,
            node_id: Some(3),
            queue_id: (!link).then_some(1),
            egress_port: link.then_some(2),
            hw_id: None,
            value: Some(value),
            previous: None,
            threshold: Some(64),
            path: &[],
            exporter: None,
        })
        .unwrap();
    }
    p.offer_batches(&lane, 0, &[b.finish().unwrap()]);
    p.flush().unwrap();
    dir
}

/// `GET /v1/switches/{id}/changes`: the merged change log, newest first, by metric.
#[tokio::test]
async fn a_switchs_change_log_is_one_whatever_the_collectors() {
    let a = api_on(Live::new(10), switch_views_store).await;
    let get = |uri: &'static str| call(&a, "GET", uri, Some(VIEWER), None);
    let (s, v) = get("/v1/switches/3/changes?since=10m").await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let rows: Vec<(String, String, u64, u64)> = v["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["kind"].as_str().unwrap().to_string(),
                r["metric"].as_str().unwrap().to_string(),
                r["value"].as_u64().unwrap(),
                r["views"].as_u64().unwrap(),
            )
        })
        .collect();
    let row = |k: &str, m: &str, v, n| (k.to_string(), m.to_string(), v, n);
    assert_eq!(
        rows,
        [
            row("change", "queue_occupancy", 500, 2),
            row("new", "link_utilization", 200, 1),
            row("new", "queue_occupancy", 10, 1),
        ],
        "{v}"
    );
    let (s, v) = get("/v1/switches/3/changes?since=10m&metric=link_utilization&limit=5").await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["changes"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v["changes"][0]["egress_port"], 2, "{v}");
    let (s, v) = get("/v1/switches/4/changes?since=10m").await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(
        v["changes"],
        serde_json::json!([]),
        "no changes: an empty log"
    );
}
