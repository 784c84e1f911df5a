//! The control channel: entries typed by the P4 schema, failures at runtime.

use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use kplane_emulator::control::router;
use kplane_emulator::run::{RunConfig, build};
use tower::ServiceExt;

async fn call(
    app: &axum::Router,
    method: &str,
    uri: &str,
    body: &str,
) -> (StatusCode, serde_json::Value) {
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap();
    let res = app.clone().oneshot(req).await.unwrap();
    let status = res.status();
    let bytes = res.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null),
    )
}

#[tokio::test]
async fn entries_and_failures_at_runtime() {
    let cfg = RunConfig {
        flows_per_second: 0.0,
        ..RunConfig::default()
    };
    let sim = Arc::new(Mutex::new(build(&cfg).unwrap()));
    let app = router(sim.clone());

    let (s, schema) = call(&app, "GET", "/v1/schema", "").await;
    assert_eq!(s, StatusCode::OK);
    assert!(schema["tables"].as_array().unwrap().len() >= 5);

    let (s, v) = call(
        &app,
        "POST",
        "/v1/tables/drop_acl",
        r#"{"switch":17,"priority":9,"match":{"dst_addr":"10.0.0.1/32"},"action":"acl_drop"}"#,
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    let (s, v) = call(&app, "GET", "/v1/tables/drop_acl", "").await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["entries"][0]["switch"], 17);

    let (s, v) = call(
        &app,
        "POST",
        "/v1/tables/drop_acl",
        r#"{"action":"set_egress","params":{"port":1}}"#,
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(v["error"].as_str().unwrap().contains("not allowed"), "{v}");
    let (s, _) = call(&app, "POST", "/v1/tables/nope", r#"{"action":"drop"}"#).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);

    let (s, v) = call(&app, "GET", "/v1/topology", "").await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["links"].as_array().unwrap().len(), 48);
    let (s, _) = call(&app, "POST", "/v1/links/20/down", "").await;
    assert_eq!(s, StatusCode::OK);
    sim.lock().unwrap().run_until(1_000);
    let (_, v) = call(&app, "GET", "/v1/topology", "").await;
    assert_eq!(v["links"][20]["up"], false);
    let (s, _) = call(&app, "POST", "/v1/switches/99/down", "").await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    assert!(
        sim.lock()
            .unwrap()
            .truth
            .events
            .iter()
            .any(|e| e["kind"] == "link_down")
    );

    // A batch is all or nothing; the error names the failing update.
    let (s, v) = call(
        &app,
        "POST",
        "/v1/write",
        r#"{"updates":[
            {"type":"insert","entry":{"switch":3,"table":"drop_acl","priority":4,"match":{"src_addr":"10.0.0.9"},"action":"acl_drop"}},
            {"type":"delete","entry":{"switch":3,"table":"drop_acl","priority":5,"action":"acl_drop"}}]}"#,
    )
    .await;
    assert_eq!(
        (s, v["index"].as_u64()),
        (StatusCode::BAD_REQUEST, Some(1)),
        "{v}"
    );
    assert!(
        v["error"].as_str().unwrap().contains("no such entry"),
        "{v}"
    );
    let (s, v) = call(
        &app,
        "POST",
        "/v1/write",
        r#"{"updates":[
            {"type":"insert","entry":{"switch":3,"table":"drop_acl","priority":4,"match":{"src_addr":"10.0.0.9"},"action":"acl_drop"}},
            {"type":"delete","entry":{"switch":17,"table":"drop_acl","priority":9,"match":{"dst_addr":"10.0.0.1/32"},"action":"acl_drop"}}]}"#,
    )
    .await;
    assert_eq!((s, v["written"].as_u64()), (StatusCode::OK, Some(2)), "{v}");
    let (_, v) = call(&app, "GET", "/v1/tables", "").await;
    let entries = v["entries"].as_array().unwrap();
    assert!(v["boot_id"].as_u64().is_some());
    assert!(
        entries
            .iter()
            .any(|e| e["switch"] == 3 && e["match"]["src_addr"] == "10.0.0.9"),
        "{v}"
    );
    assert!(!entries.iter().any(|e| e["switch"] == 17), "{v}");

    let (s, v) = call(&app, "DELETE", "/v1/tables/drop_acl", "").await;
    assert_eq!((s, v["removed"].as_u64()), (StatusCode::OK, Some(1)));
}
