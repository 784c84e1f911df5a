//! `kplane sample-capture FILE`: a capture with one frame of every supported format (the
//! wire library's samples), plus one packet without telemetry. Deterministic: the shipped
//! `samples/int-formats.pcapng` is this command's output.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use kplane_pcap::{CaptureFormat, CaptureWriter, LINKTYPE_ETHERNET};
use kplane_wire::build::{FlowSpec, PacketSpec};
use kplane_wire::samples;

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Format {
    Pcap,
    Pcapng,
}

#[derive(Debug, Args)]
pub struct SampleArgs {
    /// Output file.
    file: PathBuf,
    /// File format.
    #[arg(long, value_enum, default_value_t = Format::Pcapng)]
    format: Format,
}

/// 2026-01-01T00:00:00Z, then one frame per millisecond.
const START_NS: u64 = 1_767_225_600_000_000_000;

pub fn frames() -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = samples::all().into_iter().map(|(_, f)| f).collect();
    let plain = FlowSpec::udp(samples::ip("10.0.1.1"), samples::ip("10.0.2.2"), 1234, 53);
    v.push(PacketSpec::new(plain).build());
    v
}

pub fn run(args: SampleArgs) -> ExitCode {
    let format = match args.format {
        Format::Pcap => CaptureFormat::Pcap,
        Format::Pcapng => CaptureFormat::PcapNg,
    };
    let result = CaptureWriter::create(&args.file, format, LINKTYPE_ETHERNET).and_then(|mut w| {
        for (i, f) in frames().iter().enumerate() {
            w.write(START_NS + i as u64 * 1_000_000, f)?;
        }
        w.finish()
    });
    match result {
        Ok(()) => {
            eprintln!(
                "kplane sample-capture: wrote {} frames to {}",
                frames().len(),
                args.file.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("kplane sample-capture: {e}");
            ExitCode::from(2)
        }
    }
}
