//! Telemetry Reports v0.5, v1.0 and v2.0: what a switch sends to a collector over UDP.

pub mod v05;
pub mod v10;
pub mod v20;

use crate::bytes::Bytes;
use crate::error::{ErrorKind, Result, WireError};
use crate::opts::DecodeOptions;

pub use v05::ReportV05;
pub use v10::ReportV10;
pub use v20::{IndividualReport, ReportV20};

/// A Telemetry Report of any version, told apart by the version nibble of byte 0.
#[derive(Clone, Copy, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(tag = "version"))]
pub enum TelemetryReport<'a> {
    #[cfg_attr(feature = "serde", serde(rename = "0.5"))]
    V05(ReportV05<'a>),
    #[cfg_attr(feature = "serde", serde(rename = "1.0"))]
    V10(ReportV10<'a>),
    #[cfg_attr(feature = "serde", serde(rename = "2.0"))]
    V20(ReportV20<'a>),
}

impl<'a> TelemetryReport<'a> {
    /// Parses a UDP payload as a report.
    #[inline]
    pub fn parse(payload: &'a [u8], opts: &'a DecodeOptions) -> Result<Self> {
        Self::parse_bytes(Bytes::new(payload), opts)
    }

    #[inline]
    pub fn parse_bytes(b: Bytes<'a>, opts: &'a DecodeOptions) -> Result<Self> {
        let first = b.array::<1>("telemetry_report", "version")?[0];
        match first >> 4 {
            0 => ReportV05::parse(b, opts).map(Self::V05),
            1 => ReportV10::parse(b, opts).map(Self::V10),
            2 => ReportV20::parse(b, opts).map(Self::V20),
            v => Err(WireError::new(
                "telemetry_report",
                "version",
                b.offset(),
                ErrorKind::BadVersion { found: v },
            )),
        }
    }
}
