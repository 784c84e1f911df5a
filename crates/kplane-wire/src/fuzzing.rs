//! Entry points shared by the `cargo fuzz` targets (`fuzz/`) and the corpus replay test, so a
//! crash found by the fuzzer is a failing test on stable Rust in CI.

use kplane_model::{MAX_HOPS, ReportRecord};

use crate::{DecodeOptions, Decoder, RecordMeta, Start, decode_frame};

fn options() -> DecodeOptions {
    DecodeOptions {
        kdn_port: Some(5001),
        ..DecodeOptions::default()
    }
}

fn check(rec: &ReportRecord) {
    assert!(rec.hops.len() <= MAX_HOPS * 2, "hop count bounded");
}

/// A UDP payload handed to the collector's decoder — which must agree with the general
/// parser alone (the fast path only ever takes inputs both read the same).
pub fn report(data: &[u8]) {
    let decode = |mut d: Decoder| {
        let mut records = Vec::new();
        let outcome = d.decode_report(data, RecordMeta::default(), |r| {
            check(r);
            records.push(r.clone());
        });
        (records, outcome)
    };
    let (records, outcome) = decode(Decoder::new(options()));
    let general = decode(Decoder::general_only(options()));
    assert_eq!(
        (&records, &outcome),
        (&general.0, &general.1),
        "fast path and general parser disagree"
    );
    if let Some(e) = outcome.error {
        // Errors must point inside (or at the end of) the input.
        assert!(e.offset <= data.len(), "{e}");
        assert!(!e.to_string().is_empty());
    }
}

/// A captured frame (the first byte selects Ethernet / IPv4 / IPv6), decoded and turned into
/// records; `render` gets the decoded view (the fuzz target and test serialise it to JSON,
/// which walks every lazy part: v2.0 individual reports, stacks, probes).
pub fn frame(data: &[u8], render: impl FnOnce(&crate::Decoded<'_>)) {
    let Some((&sel, data)) = data.split_first() else {
        return;
    };
    let start = match sel % 3 {
        0 => Start::Ethernet,
        1 => Start::Ipv4,
        _ => Start::Ipv6,
    };
    let opts = options();
    match decode_frame(data, start, &opts) {
        Ok(d) => {
            let mut rec = ReportRecord::default();
            d.for_each_record(RecordMeta::default(), &mut rec, check);
            render(&d);
        }
        Err(e) => assert!(e.offset <= data.len(), "{e}"),
    }
}
