//! pcap/pcapng replay through the same pipeline, at the recorded pace or as fast as possible.

use std::path::Path;
use std::time::{Duration, Instant};

use kplane_pcap::{CaptureError, CaptureReader};
use kplane_wire::Start;

use crate::config::Speed;
use crate::pipeline::Pipeline;

/// Where the network layer starts for a capture's link type, and the bytes before it.
pub fn link_start(linktype: u32, data: &[u8]) -> Option<(Start, usize)> {
    let by_nibble = |at: usize| match data.get(at).map(|b| b >> 4) {
        Some(6) => Some((Start::Ipv6, at)),
        Some(_) => Some((Start::Ipv4, at)),
        None => None,
    };
    let by_ethertype = |at: usize, skip: usize| match data.get(at..at + 2) {
        Some([0x08, 0x00]) => Some((Start::Ipv4, skip)),
        Some([0x86, 0xDD]) => Some((Start::Ipv6, skip)),
        _ => None,
    };
    match linktype {
        kplane_pcap::LINKTYPE_ETHERNET => Some((Start::Ethernet, 0)),
        kplane_pcap::LINKTYPE_RAW | 12 | 14 => by_nibble(0),
        kplane_pcap::LINKTYPE_IPV4 => Some((Start::Ipv4, 0)),
        kplane_pcap::LINKTYPE_IPV6 => Some((Start::Ipv6, 0)),
        113 => by_ethertype(14, 16),
        276 => by_ethertype(0, 20),
        _ => None,
    }
}

/// Replays `path`; returns the number of frames read. `stop` ends it early.
pub fn replay(
    path: &Path,
    speed: Speed,
    pipeline: &mut Pipeline,
    stop: impl Fn() -> bool,
) -> Result<u64, CaptureError> {
    let mut reader = CaptureReader::open(path)?;
    let started = Instant::now();
    let mut first_ts = None;
    let mut frames = 0u64;
    let mut last_tick = Instant::now();
    while let Some(frame) = reader.next_frame() {
        let frame = frame?;
        frames += 1;
        if speed == Speed::Recorded {
            let first = *first_ts.get_or_insert(frame.ts_ns);
            let due = Duration::from_nanos(frame.ts_ns.saturating_sub(first));
            if let Some(wait) = due.checked_sub(started.elapsed()) {
                std::thread::sleep(wait);
            }
        }
        match link_start(frame.linktype, &frame.data) {
            Some((start, skip)) => pipeline.frame(
                frame.data.get(skip..).unwrap_or_default(),
                start,
                frame.ts_ns,
            ),
            None => pipeline.unsupported_link(),
        }
        if last_tick.elapsed() >= Duration::from_millis(10) {
            pipeline.tick(frame.ts_ns);
            last_tick = Instant::now();
            if stop() {
                break;
            }
        }
    }
    Ok(frames)
}
