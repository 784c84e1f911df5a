//! Malformed input: truncation at every offset, corrupted bytes, bad lengths and versions.
//! Decoding must never panic, and must name what is wrong.

mod common;

use kplane_model::ReportRecord;
use kplane_wire::{Decoder, ErrorKind, RecordMeta, Start, decode_frame};

fn exercise(frame: &[u8]) {
    let opts = common::options();
    if let Ok(d) = decode_frame(frame, Start::Ethernet, &opts) {
        let mut rec = ReportRecord::default();
        d.for_each_record(RecordMeta::default(), &mut rec, |_| {});
        let _ = serde_json::to_string(&d).unwrap();
    }
}

#[test]
fn every_truncation_of_every_golden_frame_is_handled() {
    for (name, frame) in common::cases() {
        for cut in 0..frame.len() {
            exercise(&frame[..cut]);
        }
        // A cut inside the headers before the telemetry is a truncation error, not a guess.
        let opts = common::options();
        let err = decode_frame(&frame[..30], Start::Ethernet, &opts).unwrap_err();
        assert_eq!(err.reason(), "truncated", "{name}: {err}");
    }
}

#[test]
fn every_byte_corruption_of_every_golden_frame_is_handled() {
    for (_, frame) in common::cases() {
        for i in 0..frame.len() {
            for x in [0xFFu8, 0x80, 0x01] {
                let mut f = frame.clone();
                f[i] ^= x;
                exercise(&f);
            }
        }
    }
}

fn decode_err(payload: &[u8]) -> kplane_wire::WireError {
    let mut d = Decoder::default();
    d.decode_report(payload, RecordMeta::default(), |_| {})
        .error
        .expect("an error")
}

#[test]
fn report_truncated_in_its_headers_names_the_header_and_offset() {
    let p = common::tr_v20_5hop_payload();
    for cut in 0..20 {
        let e = decode_err(&p[..cut]);
        assert!(
            matches!(e.kind, ErrorKind::Truncated { .. }),
            "cut {cut}: {e}"
        );
        assert!(
            e.header.starts_with("tr_v2.0") || e.header == "telemetry_report",
            "cut {cut}: {e}"
        );
        assert!(e.offset <= cut, "cut {cut}: {e}");
    }
    // Cut inside the INT stack of the inner packet.
    let e = decode_err(&p[..p.len() - 60]);
    assert_eq!(e.reason(), "truncated", "{e}");
    let v05 = common::tr_v05_local_payload();
    for cut in 0..28 {
        assert_eq!(decode_err(&v05[..cut]).reason(), "truncated");
    }
    let v10 = common::tr_v10_6hop_payload();
    for cut in 0..16 {
        assert_eq!(decode_err(&v10[..cut]).reason(), "truncated");
    }
}

#[test]
fn bad_versions_are_named() {
    let mut p = common::tr_v20_5hop_payload();
    p[0] = 0x30 | (p[0] & 0x0F);
    let e = decode_err(&p);
    assert_eq!(e.kind, ErrorKind::BadVersion { found: 3 });
    assert_eq!(
        (e.header, e.field, e.offset),
        ("telemetry_report", "version", 0)
    );
    // Wrong INT-MD header version inside the inner packet.
    let mut p = common::tr_v20_5hop_payload();
    let md = p
        .windows(4)
        .position(|w| w == [0x20, 0x00, 0x0B, 0x08])
        .unwrap();
    p[md] = 0x70;
    assert_eq!(decode_err(&p).reason(), "bad_version");
}

#[test]
fn bad_lengths_are_named() {
    // Report Length beyond the payload.
    let mut p = common::tr_v20_5hop_payload();
    p[9] = 0xFE;
    let e = decode_err(&p);
    assert_eq!((e.field, e.reason()), ("report_length", "truncated"), "{e}");
    // MD Length beyond Report Length.
    let mut p = common::tr_v20_5hop_payload();
    p[10] = 0xF0;
    let e = decode_err(&p);
    assert_eq!((e.field, e.reason()), ("md_length", "bad_length"), "{e}");
    // MD Length too short for RepMdBits.
    let mut p = common::tr_v20_5hop_payload();
    p[10] = 1;
    assert_eq!(decode_err(&p).reason(), "bad_length");
    // Hop ML too small for the instruction bitmap.
    let mut p = common::tr_v20_5hop_payload();
    let md = p
        .windows(4)
        .position(|w| w == [0x20, 0x00, 0x0B, 0x08])
        .unwrap();
    p[md + 2] = 0x02;
    let e = decode_err(&p);
    assert_eq!((e.header, e.reason()), ("int_stack", "bad_length"), "{e}");
    // v1.0 Length disagreeing with RepMdBits.
    let mut p = common::tr_v10_6hop_payload();
    p[0] = 0x14;
    let e = decode_err(&p);
    assert_eq!((e.field, e.reason()), ("length", "bad_length"), "{e}");
}

#[test]
fn later_individual_report_errors_keep_the_earlier_records() {
    let mut p = common::tr_v20_5hop_payload();
    // Append a second individual report with an unsupported RepType (IOAM).
    p.extend_from_slice(&[0x20, 0x00, 0x00, 0x00]);
    let mut d = Decoder::default();
    let mut n = 0;
    let o = d.decode_report(&p, RecordMeta::default(), |_| n += 1);
    assert_eq!((n, o.records), (1, 1));
    assert_eq!(o.error.unwrap().kind, ErrorKind::Unsupported { value: 2 });
}
