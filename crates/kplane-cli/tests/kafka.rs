//! `kplane collector` with `bus.kind = "kafka"` against a real broker (`KPLANE_KAFKA_BROKERS`;
//! CI starts one): emulated reports over UDP → collector → Kafka → a consumer group reads
//! every record the collector published, each batch on the partition it was meant for.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kplane_bus::{KafkaConfig, headers, topics};
use kplane_kafka::{KafkaConsumer, KafkaMetrics};
use kplane_testkit::{free_port, http_get, kafka_brokers, metric_sum, sigterm, wait_ready};

fn kplane() -> Command {
    Command::new(env!("CARGO_BIN_EXE_kplane"))
}

fn metrics(admin: u16) -> String {
    http_get(admin, "/metrics").unwrap_or_default()
}

#[test]
fn the_collector_publishes_every_record_to_kafka_on_its_partition() {
    let Some(brokers) = kafka_brokers() else {
        return;
    };
    let (udp, admin) = (free_port(), free_port());
    let mut collector = kplane()
        .args(["collector", "--listen", &format!("127.0.0.1:{udp}")])
        .args(["--admin", &format!("127.0.0.1:{admin}")])
        .env("KPLANE__BUS__KIND", "kafka")
        .env("KPLANE__BUS__KAFKA__BOOTSTRAP_SERVERS", &brokers)
        .env("KPLANE__COLLECTOR__QUEUE_CAPACITY", "65536")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    wait_ready(admin, Duration::from_secs(60));
    let out = kplane()
        .args(["emulate", "--duration", "300ms", "--flows", "300"])
        .args(["--scenario", "microburst", "--realtime"])
        .args(["--collector", &format!("127.0.0.1:{udp}")])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");

    // Wait until every batch is handed over and acknowledged.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut m = metrics(admin);
    while Instant::now() < deadline {
        m = metrics(admin);
        let produced = metric_sum(&m, "kplane_bus_produced_messages_total", &[]);
        let delivered = metric_sum(&m, "kplane_bus_delivered_messages_total", &[]);
        if produced > 0.0 && produced == delivered {
            std::thread::sleep(Duration::from_millis(300));
            let again = metrics(admin);
            if metric_sum(&again, "kplane_bus_produced_messages_total", &[]) == produced {
                m = again;
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let published = metric_sum(&m, "kplane_collector_partition_records_total", &["event"]);
    assert!(published > 0.0, "{m}");
    assert_eq!(metric_sum(&m, "kplane_bus_delivery_errors_total", &[]), 0.0);
    assert_eq!(
        metric_sum(&m, "kplane_collector_dropped_total", &[]),
        0.0,
        "{m}"
    );
    let prefix = format!("collector-{}-", collector.id());
    sigterm(&collector);
    assert!(
        collector.wait().unwrap().success(),
        "clean stop after a full flush"
    );

    let cfg = KafkaConfig {
        bootstrap_servers: brokers,
        ..KafkaConfig::default()
    };
    let group = format!("kplane-cli-test-{}", std::process::id());
    let consumer =
        KafkaConsumer::subscribe(&cfg, &group, &[topics::EVENTS], KafkaMetrics::default()).unwrap();
    let (mut records, mut rows) = (0.0, 0usize);
    let deadline = Instant::now() + Duration::from_secs(60);
    while records < published && Instant::now() < deadline {
        let Some(msg) = consumer.poll(Duration::from_millis(200)).unwrap() else {
            continue;
        };
        // Earlier runs against the same broker: only this collector's batches count.
        let Some(id) = msg
            .header(headers::BATCH_ID)
            .filter(|id| id.starts_with(&prefix))
        else {
            continue;
        };
        let partition: u32 = id[prefix.len()..]
            .split('-')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(msg.partition, partition, "batch {id} on its partition");
        assert_eq!(msg.header(headers::SCHEMA), Some("events/v1"));
        let n: f64 = msg.header(headers::RECORDS).unwrap().parse().unwrap();
        let reader =
            arrow_ipc::reader::StreamReader::try_new(std::io::Cursor::new(&msg.payload[..]), None)
                .unwrap();
        let batch_rows: usize = reader.map(|b| b.unwrap().num_rows()).sum();
        assert_eq!(batch_rows as f64, n, "header and payload agree");
        records += n;
        rows += batch_rows;
    }
    assert_eq!(records, published, "every published record is in Kafka");
    assert_eq!(rows as f64, published);
    consumer.close();
}
