//! Replays the `cargo fuzz` seed corpora (`fuzz/corpus/<target>/`) on stable Rust, so every
//! input the fuzzers were seeded with — and every crash minimised into the corpus — is a test.
//! `KPLANE_BLESS=1` regenerates the seeds from the wire samples.

mod common;

use std::path::PathBuf;

fn corpus(target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target)
}

/// The UDP payload of a sample frame sent to a collector (Ethernet + IPv4 + UDP = 42 bytes).
fn udp_payload(frame: &[u8]) -> &[u8] {
    &frame[42..]
}

fn bless() {
    let report = corpus("decode_report");
    let frame = corpus("decode_frame");
    std::fs::create_dir_all(&report).unwrap();
    std::fs::create_dir_all(&frame).unwrap();
    for (name, bytes) in common::cases() {
        let mut f = vec![0u8]; // Ethernet
        f.extend_from_slice(&bytes);
        std::fs::write(frame.join(name), f).unwrap();
        if name.starts_with("tr-") {
            std::fs::write(report.join(name), udp_payload(&bytes)).unwrap();
        }
    }
}

fn replay(target: &str, run: impl Fn(&[u8])) -> usize {
    let mut n = 0;
    for entry in std::fs::read_dir(corpus(target)).expect("corpus exists") {
        let path = entry.unwrap().path();
        let data = std::fs::read(&path).unwrap();
        run(&data);
        // Every prefix too: seeds are small, and truncation is the common real-world damage.
        for cut in 0..data.len() {
            run(&data[..cut]);
        }
        n += 1;
    }
    n
}

#[test]
fn fuzz_corpora_replay_cleanly() {
    if std::env::var_os("KPLANE_BLESS").is_some() {
        bless();
    }
    let reports = replay("decode_report", kplane_wire::fuzzing::report);
    let frames = replay("decode_frame", |d| {
        kplane_wire::fuzzing::frame(d, |v| {
            serde_json::to_string(v).unwrap();
        })
    });
    assert!(
        reports >= 7 && frames >= 20,
        "{reports} report and {frames} frame seeds"
    );
}
