//! The analytics store on S3-compatible object storage (moto's server, PyPI): the demo
//! emulator → a collector → Kafka → two stream processors in one group writing one bucket
//! (`data-dir = "s3://…"`), the knowledge service storing its results there, the intent API
//! and `kplane query` reading it — every process configured as a deployment is, by `AWS_*`
//! environment variables. Passes once both processors have written, merged and checkpointed
//! in the bucket, the knowledge service's forecasts are there, and, with the traffic
//! stopped, `kplane query` and the API's `POST /v1/query` count the same rows.

use crate::common::{Broker, compose_kplane, configure_api, demo_emulator_args, start_service};

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kplane_testkit::s3::S3;
use kplane_testkit::{ChildGuard, free_port, http, run_id};

/// `kplane <args>` as compose runs it, with the object store's settings.
fn kplane(args: &[&str], brokers: &str, s3: &S3) -> Command {
    let mut c = compose_kplane(args, brokers);
    for (k, v) in s3.env() {
        c.env(k, v);
    }
    c
}

fn service(c: Command) -> ChildGuard {
    start_service(c).0
}

/// What `kplane <args>` printed, once it succeeded.
fn kplane_prints(args: &[&str], brokers: &str, s3: &S3) -> String {
    let out = kplane(args, brokers, s3)
        .stdout(Stdio::piped())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "kplane {args:?}: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// `SELECT count(*) …` through `kplane query`.
fn kplane_query(brokers: &str, s3: &S3, location: &str, sql: &str) -> u64 {
    let text = kplane_prints(&["query", "--data-dir", location, sql], brokers, s3);
    // The pretty table's one value: `| 1234 |`.
    text.lines()
        .filter_map(|l| l.trim().trim_matches('|').trim().parse().ok())
        .next()
        .unwrap_or_else(|| panic!("no count in {text}"))
}

/// The same through the API.
fn api_query(api: SocketAddr, sql: &str) -> u64 {
    let body = serde_json::json!({ "sql": sql }).to_string();
    let a = http(api, "POST", "/v1/query", None, Some(&body)).unwrap();
    assert_eq!(a.status, 200, "{}", a.body);
    a.json()["rows"][0]["n"].as_u64().unwrap_or(0)
}

#[test]
fn processors_write_one_bucket_and_the_api_and_kplane_query_read_it() {
    let Some(s3) = S3::start() else {
        return;
    };
    let broker = Broker::start();
    let b = broker.addr.as_str();
    let location = s3.bucket("kplane-e2e");
    let data = std::env::temp_dir().join(format!("kplane-s3-{}", run_id()));

    kplane_prints(&["topics", "create", "--wait", "30s"], b, &s3);
    let udp = free_port();
    let mut c = kplane(
        &["collector", "--listen", &format!("127.0.0.1:{udp}")],
        b,
        &s3,
    );
    c.env("KPLANE__COLLECTOR__PUBLISH_REPORTS", "true");
    let _collector = service(c);
    // Small merges, so that compaction runs within the test.
    let processor = || {
        let mut c = kplane(&["stream-processor"], b, &s3);
        c.env("KPLANE__BUS__KAFKA__GROUP_ID", "kplane-stream-processor")
            .env("KPLANE__STREAM_PROCESSOR__DATA_DIR", &location)
            .env("KPLANE__STREAM_PROCESSOR__COMPACT_FILES", "2")
            .env("KPLANE__STREAM_PROCESSOR__IDLE_CLOSE", "1s");
        service(c)
    };
    let (mut p1, mut p2) = (processor(), processor());
    let mut c = kplane(&["knowledge"], b, &s3);
    c.env("KPLANE__KNOWLEDGE__STORE_DIR", &location)
        .env("KPLANE__KNOWLEDGE__STORE_EVERY", "2s")
        // Forecasts (and so their table) from 20 windows on.
        .env("KPLANE__KNOWLEDGE__MIN_WINDOWS", "20")
        .env("KPLANE__KNOWLEDGE__STATE_DIR", data.join("knowledge"));
    let _knowledge = service(c);
    let api = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let mut c = kplane(&["intent-api"], b, &s3);
    configure_api(&mut c, api, &location, &data);
    let _api = service(c);

    // A fifth of the demo's background flows: seven processes share two cores in real time,
    // and the store's path is the same at any rate.
    let mut args = demo_emulator_args(udp);
    args.extend(["--flows".into(), "200".into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut emulator = ChildGuard::from(kplane(&args, b, &s3).spawn().unwrap());

    // Both processors' lanes write window files, merge them and checkpoint, in the bucket.
    let started = Instant::now();
    // The knowledge service's forecasts need 20 windows finalised by every processor lane
    // and a training (12 s in a debug build).
    let deadline = started + Duration::from_secs(300);
    loop {
        let keys = s3.keys("kplane-e2e");
        let lanes: BTreeSet<&str> = keys
            .iter()
            .filter_map(|k| k.strip_prefix("kplane/checkpoints/"))
            .filter_map(|k| k.strip_suffix(".jsonl"))
            .collect();
        let merged = keys
            .iter()
            .any(|k| k.starts_with("kplane/tables/flows/") && k.contains("-c"));
        let forecasts = keys
            .iter()
            .any(|k| k.starts_with("kplane/tables/forecasts/"));
        let key_file = keys.iter().any(|k| k == "kplane/flow-hash.key");
        let flows = http(api, "GET", "/v1/flows?since=10m", None, None).unwrap();
        let answered = flows.status == 200
            && flows.json()["flows"]
                .as_array()
                .is_some_and(|f| !f.is_empty());
        if lanes.len() >= 2 && merged && forecasts && key_file && answered {
            eprintln!("written, merged and answered after {:?}", started.elapsed());
            break;
        }
        assert!(
            Instant::now() < deadline,
            "lanes {lanes:?}, merged {merged}, forecasts {forecasts}, flow-hash key {key_file}, \
             /v1/flows {} {}; keys: {keys:#?}",
            flows.status,
            flows.body
        );
        std::thread::sleep(Duration::from_secs(1));
    }
    // Nothing is staged in the bucket: objects appear whole under their final names.
    let keys = s3.keys("kplane-e2e");
    assert!(keys.iter().all(|k| !k.contains("_staging")), "{keys:#?}");
    for (name, p) in [("processor 1", &mut p1), ("processor 2", &mut p2)] {
        assert!(p.try_wait().unwrap().is_none(), "{name} exited");
    }

    // With the traffic stopped and the processors' backlog written (the count holds still),
    // both readers see the same store.
    emulator.kill().unwrap();
    let sql = "SELECT count(*) AS n FROM flows";
    let deadline = Instant::now() + Duration::from_secs(240);
    let mut last = (0, 0);
    loop {
        let (cli, via_api) = (kplane_query(b, &s3, &location, sql), api_query(api, sql));
        if cli > 0 && cli == via_api && (cli, via_api) == last {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "kplane query counted {cli}, the API {via_api}"
        );
        last = (cli, via_api);
        std::thread::sleep(Duration::from_secs(3));
    }
    assert!(api_query(api, "SELECT count(*) AS n FROM forecasts") > 0);

    // `kplane files` lists objects of the bucket whose rows are the table's: another engine
    // reading exactly these counts what kplane does.
    let listed = kplane_prints(&["files", "flows", "--data-dir", &location], b, &s3);
    let files: Vec<&str> = listed.lines().collect();
    let store =
        kplane_store::Store::open_with(std::path::Path::new(&location), &s3.options()).unwrap();
    let prefix = format!("{location}/");
    let keys = s3.keys("kplane-e2e");
    let mut rows = 0;
    for f in &files {
        let key = f.strip_prefix(&prefix).unwrap_or_else(|| panic!("{f}"));
        assert!(
            keys.contains(&format!("kplane/{key}")),
            "{f} is not in the bucket"
        );
        rows += store
            .parquet(key)
            .unwrap()
            .metadata()
            .file_metadata()
            .num_rows() as u64;
    }
    assert!(!files.is_empty());
    assert_eq!(
        rows, last.0,
        "rows of the listed files, then kplane query's count"
    );
    let _ = std::fs::remove_dir_all(&data);
}
