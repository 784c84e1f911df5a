//! The client against a real P4Runtime server: BMv2 `simple_switch_grpc` running
//! `p4/kplane_int.p4` as p4c compiled it. Skipped without BMv2 or root unless
//! `KPLANE_REQUIRE_P4=1` (CI).

use std::time::Duration;

use kplane_p4::{Entry, EntrySpec, KPLANE_BMV2_JSON, KPLANE_P4INFO_BIN};
use kplane_p4runtime::{P4rtError, Pipeline, Session, SessionConfig, UpdateKind};
use kplane_testkit::bmv2::{self, Bmv2};

fn entry(json: &str) -> Entry {
    let spec: EntrySpec = serde_json::from_str(json).unwrap();
    Entry::new(kplane_p4::kplane(), &spec).unwrap()
}

fn config(sw: &Bmv2, election_id: u64) -> SessionConfig {
    SessionConfig {
        addr: sw.grpc.clone(),
        device_id: sw.device_id,
        election_id,
        timeout: Duration::from_secs(10),
    }
}

#[tokio::test]
async fn pipeline_writes_reads_and_per_update_errors_on_bmv2() {
    if !bmv2::available() {
        return;
    }
    let sw = Bmv2::start(1, &[]);
    let info = kplane_p4::kplane();
    let mut s = Session::open(config(&sw, 10)).await.unwrap();
    assert!(s.is_alive());
    assert_eq!(
        s.pipeline_cookie().await.unwrap(),
        None,
        "--no-p4: no pipeline"
    );
    let pipeline = Pipeline {
        p4info: KPLANE_P4INFO_BIN,
        device_config: KPLANE_BMV2_JSON,
        cookie: 0x6b70_6c61_6e65,
    };
    s.set_pipeline(&pipeline).await.unwrap();
    assert_eq!(s.pipeline_cookie().await.unwrap(), Some(0x6b70_6c61_6e65));

    let a = entry(
        r#"{"switch":1,"table":"drop_acl","priority":7,"action":"acl_drop","match":{"src_addr":"10.0.0.0/8","dst_port":"80-443","protocol":"6"}}"#,
    );
    let b = entry(
        r#"{"switch":1,"table":"ipv4_forward","action":"set_egress","params":{"port":2},"match":{"dst_addr":"10.1.0.0/16"}}"#,
    );
    let c = entry(
        r#"{"switch":1,"table":"int_watchlist","priority":3,"action":"int_source","params":{"instruction_bitmap":65280,"max_hop":8},"match":{"dst_addr":"10.1.0.0/16"}}"#,
    );
    s.write(
        info,
        &[
            (UpdateKind::Insert, &a),
            (UpdateKind::Insert, &b),
            (UpdateKind::Insert, &c),
        ],
    )
    .await
    .unwrap();
    let mut read = s.read_entries(info, 1).await.unwrap();
    read.sort();
    let mut want = vec![a.clone(), b.clone(), c.clone()];
    want.sort();
    assert_eq!(read, want, "what was written reads back, canonical");

    // Inserting `a` again fails and only it: the error names update #1 of 2.
    let d = entry(
        r#"{"switch":1,"table":"drop_acl","priority":8,"action":"acl_drop","match":{"src_addr":"10.9.0.0/16"}}"#,
    );
    let e = s
        .write(info, &[(UpdateKind::Insert, &d), (UpdateKind::Insert, &a)])
        .await
        .unwrap_err();
    match &e {
        P4rtError::Write { total, failed, .. } => {
            assert_eq!(*total, 2);
            assert_eq!(failed.len(), 1, "{e}");
            assert_eq!(failed[0].0, 1, "{e}");
        }
        other => panic!("expected per-update errors, got {other}"),
    }
    assert!(!e.is_retryable());

    // Modify, then delete everything.
    let b2 = entry(
        r#"{"switch":1,"table":"ipv4_forward","action":"set_egress","params":{"port":3},"match":{"dst_addr":"10.1.0.0/16"}}"#,
    );
    s.write(info, &[(UpdateKind::Modify, &b2)]).await.unwrap();
    let read = s.read_entries(info, 1).await.unwrap();
    assert!(read.contains(&b2) && !read.contains(&b));
    s.write(
        info,
        &[
            (UpdateKind::Delete, &a),
            (UpdateKind::Delete, &b2),
            (UpdateKind::Delete, &c),
            (UpdateKind::Delete, &d),
        ],
    )
    .await
    .unwrap();
    assert!(s.read_entries(info, 1).await.unwrap().is_empty());
    s.clone_session(500, 3).await.unwrap();
    s.clone_session(500, 4).await.unwrap();

    // A controller with a lower election id is not primary.
    let e = Session::open(config(&sw, 5)).await.unwrap_err();
    assert!(matches!(e, P4rtError::NotPrimary { .. }), "{e}");
    assert!(e.is_retryable());
}

#[tokio::test]
async fn an_unreachable_switch_is_a_retryable_connect_error() {
    let port = kplane_testkit::free_port();
    let e = Session::open(SessionConfig {
        addr: format!("127.0.0.1:{port}"),
        device_id: 1,
        election_id: 1,
        timeout: Duration::from_secs(2),
    })
    .await
    .unwrap_err();
    assert!(matches!(e, P4rtError::Connect { .. }), "{e}");
    assert!(e.is_retryable());
}
