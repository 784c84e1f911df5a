//! The `af-xdp` input end to end: a veth pair with its far end in a network namespace, real
//! reports sent there, taken off the wire by the XDP program and AF_XDP socket, decoded and
//! published. Needs root (CI runs as root).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use arrow_array::Array;
use arrow_array::cast::AsArray;
use arrow_ipc::reader::StreamReader;
use kplane_bus::topics;
use kplane_collector::config::Input;
use kplane_collector::input::af_xdp::{AfXdpConfig, CopyMode};
use kplane_collector::{CollectorError, Config, embedded_bus, start};
use kplane_runtime::Shutdown;
use kplane_testkit::netns::VethPair;
use kplane_testkit::{free_port, http_get, metric_sum};

use kplane_testkit::reports::report;

fn config(veth: &VethPair, port: u16) -> Config {
    Config {
        admin: "127.0.0.1:0".parse().unwrap(),
        listen: vec![SocketAddr::from((veth.host_ip, port))],
        input: Input::AfXdp,
        af_xdp: AfXdpConfig {
            interface: veth.host.clone(),
            ..AfXdpConfig::default()
        },
        publish_reports: true,
        partitions: 2,
        linger: Duration::from_millis(5),
        ..Config::default()
    }
}

fn xdp_attached(interface: &str) -> bool {
    let out = std::process::Command::new("ip")
        .args(["link", "show", "dev", interface])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).contains("prog/xdp")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reports_sent_over_a_veth_are_taken_off_the_wire_by_af_xdp() {
    let veth = VethPair::create("ax").expect("a veth pair (run as root)");
    let port = free_port();
    let cfg = config(&veth, port);
    let bus = embedded_bus(&cfg);
    let shutdown = Shutdown::new();
    let collector = start(cfg, Arc::new(bus.clone()), shutdown.clone())
        .await
        .expect("the af-xdp input starts as root on a veth");
    assert!(xdp_attached(&veth.host), "the steering program is attached");
    let admin = collector.admin.port();
    let m = http_get(admin, "/metrics").unwrap();
    assert_eq!(
        metric_sum(
            &m,
            "kplane_collector_af_xdp_sockets",
            &["mode=\"copy\"", "queue=\"0\""]
        ),
        1.0,
        "veth has no zero-copy, so auto picks copy mode:\n{m}"
    );

    let sender = veth.peer_socket().unwrap();
    let target = SocketAddr::from((veth.host_ip, port));
    const N: u32 = 500;
    for seq in 0..N {
        sender
            .send_to(&report(3, seq, "10.1.0.2", 500), target)
            .unwrap();
    }
    // Larger than the veth's MTU: fragmented, so the program passes it to the kernel and the
    // collector's UDP socket on the same port receives it (a malformed report).
    sender.send_to(&[0xAB; 3000], target).unwrap();

    let mut m = String::new();
    for _ in 0..500 {
        m = http_get(admin, "/metrics").unwrap();
        if metric_sum(&m, "kplane_collector_datagrams_received_total", &[]) >= f64::from(N + 1) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        metric_sum(&m, "kplane_collector_datagrams_received_total", &[]),
        f64::from(N + 1),
        "{m}"
    );
    assert_eq!(
        metric_sum(&m, "kplane_collector_af_xdp_frames_total", &[]),
        f64::from(N),
        "every report through AF_XDP, the fragmented datagram through the kernel:\n{m}"
    );
    assert_eq!(
        metric_sum(&m, "kplane_collector_reports_decoded_total", &[]),
        f64::from(N)
    );
    assert_eq!(metric_sum(&m, "kplane_collector_malformed_total", &[]), 1.0);
    assert_eq!(metric_sum(&m, "kplane_collector_dropped_total", &[]), 0.0);
    assert_eq!(
        metric_sum(&m, "kplane_collector_reports_lost_total", &[]),
        0.0
    );

    shutdown.trigger();
    collector.wait().await.unwrap();
    assert!(
        !xdp_attached(&veth.host),
        "the program is detached when the collector stops"
    );
    // Every report published, with the exporter's address taken from the frame.
    let mut c = bus.consumer(topics::REPORTS, "test").unwrap();
    let mut rows = 0;
    for d in c.drain(Duration::from_millis(50)) {
        if d.message.payload.is_empty() {
            continue;
        }
        for b in
            StreamReader::try_new(std::io::Cursor::new(d.message.payload.to_vec()), None).unwrap()
        {
            let b = b.unwrap();
            let ip = b
                .column_by_name(kplane_model::schema::col::EXPORTER_IP)
                .unwrap()
                .as_fixed_size_binary();
            for i in 0..b.num_rows() {
                assert!(ip.is_valid(i));
                assert_eq!(
                    &ip.value(i)[12..],
                    &veth.peer_ip.octets(),
                    "exporter = the sender"
                );
            }
            rows += b.num_rows();
        }
    }
    assert_eq!(rows, N as usize);
}

#[tokio::test]
async fn refuses_to_start_and_says_what_is_missing() {
    let veth = VethPair::create("axe").expect("a veth pair (run as root)");
    let port = free_port();

    let mut cfg = config(&veth, port);
    cfg.af_xdp.interface = "kplane-none0".into();
    let err = start(cfg.clone(), Arc::new(embedded_bus(&cfg)), Shutdown::new())
        .await
        .unwrap_err();
    assert!(matches!(err, CollectorError::AfXdp { .. }), "{err}");
    assert!(err.to_string().contains("no such interface"), "{err}");

    // veth has no zero-copy: demanded, it is an error, not a silent copy mode.
    let mut cfg = config(&veth, port);
    cfg.af_xdp.copy_mode = CopyMode::ZeroCopy;
    let err = start(cfg.clone(), Arc::new(embedded_bus(&cfg)), Shutdown::new())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("queue 0: bind"), "{err}");
    assert!(!xdp_attached(&veth.host), "nothing left attached");

    let mut cfg = config(&veth, port);
    cfg.af_xdp.interface.clear();
    let err = start(cfg.clone(), Arc::new(embedded_bus(&cfg)), Shutdown::new())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("af-xdp.interface"), "{err}");
}
