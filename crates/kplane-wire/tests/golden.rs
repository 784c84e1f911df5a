//! Golden vectors: for every format a frame (hex) and what it decodes to (JSON: every header,
//! then the normalised records). `KPLANE_BLESS=1 cargo test -p kplane-wire --test golden`
//! rewrites them; review the diff before committing.

mod common;

use std::path::PathBuf;

use kplane_model::ReportRecord;
use kplane_wire::{RecordMeta, Start, decode_frame};

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

fn to_hex(bytes: &[u8]) -> String {
    bytes
        .chunks(16)
        .map(|c| {
            c.iter()
                .map(|b| format!("{b:02x}"))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

fn from_hex(text: &str) -> Vec<u8> {
    hex::decode(text.split_whitespace().collect::<String>()).unwrap()
}

fn decode_json(frame: &[u8]) -> serde_json::Value {
    let opts = common::options();
    let decoded = decode_frame(frame, Start::Ethernet, &opts).expect("golden frame decodes");
    assert!(decoded.has_telemetry());
    let mut rec = ReportRecord::default();
    let mut records = Vec::new();
    let outcome = decoded.for_each_record(RecordMeta::default(), &mut rec, |r| {
        records.push(serde_json::to_value(r).unwrap())
    });
    assert_eq!(outcome.error, None);
    serde_json::json!({ "decoded": decoded, "records": records })
}

#[test]
fn golden_vectors() {
    let bless = std::env::var_os("KPLANE_BLESS").is_some();
    let mut failures = Vec::new();
    for (name, frame) in common::cases() {
        let hex_path = dir().join(format!("{name}.hex"));
        let json_path = dir().join(format!("{name}.json"));
        let json = decode_json(&frame);
        if bless {
            std::fs::write(&hex_path, to_hex(&frame)).unwrap();
            std::fs::write(
                &json_path,
                serde_json::to_string_pretty(&json).unwrap() + "\n",
            )
            .unwrap();
            continue;
        }
        let stored = from_hex(&std::fs::read_to_string(&hex_path).expect("hex exists"));
        if stored != frame {
            failures.push(format!("{name}: builder output differs from {hex_path:?}"));
        }
        // Decode the stored bytes, not the builder's: the file is the contract.
        let expected: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
        if decode_json(&stored) != expected {
            failures.push(format!("{name}: decoded JSON differs from {json_path:?}"));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
