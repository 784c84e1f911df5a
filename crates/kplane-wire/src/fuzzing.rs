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

/// A UDP payload handed to the collector's decoder.
pub fn report(data: &[u8]) {
    let mut d = Decoder::new(options());
    let outcome = d.decode_report(data, RecordMeta::default(), check);
    if let Some(e) = outcome.error {
        // Errors must point inside (or at the end of) the input.
        assert!(e.offset <= data.len(), "{e}");
        assert!(!e.to_string().is_empty());
    }
}

/// A captured frame from `start` (first byte selects Ethernet / IPv4 / IPv6), decoded, turned
/// into records and rendered as JSON like `kplane decode` does.
pub fn frame(data: &[u8]) {
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
            #[cfg(feature = "serde")]
            {
                let _ = serde_json_like(&d);
            }
        }
        Err(e) => assert!(e.offset <= data.len(), "{e}"),
    }
}

#[cfg(feature = "serde")]
fn serde_json_like(d: &crate::Decoded<'_>) -> usize {
    // Serialising walks every lazy view (v2.0 reports, stacks, probes); count the bytes.
    struct Count(usize);
    impl std::fmt::Write for Count {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            self.0 += s.len();
            Ok(())
        }
    }
    let mut c = Count(0);
    let _ = std::fmt::write(&mut c, format_args!("{d:?}"));
    c.0
}
