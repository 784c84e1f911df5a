//! `kplane decode FILE`: every telemetry report or INT-carrying packet of a capture as one
//! JSON object per line (stdout), then a summary (stderr). Exit 0, or 2 if the file cannot
//! be read (1 with `--strict` when any frame is malformed).

use std::collections::BTreeMap;
use std::io::{BufWriter, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use kplane_model::ReportRecord;
use kplane_pcap::{CaptureReader, Frame};
use kplane_wire::packet::L4;
use kplane_wire::{DecodeOptions, Decoded, DscpMatch, RecordMeta, Start, decode_frame};
use serde_json::json;

#[derive(Debug, Args)]
pub struct DecodeArgs {
    /// Capture file: pcap or pcapng (Ethernet, raw IP, Linux cooked v1/v2 link types).
    file: PathBuf,
    /// Treat UDP datagrams to PORT as Telemetry Reports (repeatable). Default: any port,
    /// auto-detected; 32766, 1234, 5900, 54321 and 8090 are always reports.
    #[arg(long = "port", value_name = "PORT")]
    ports: Vec<u16>,
    /// L4 destination port announcing embedded INT after TCP/UDP (repeatable; default 17768).
    #[arg(long = "int-port", value_name = "PORT")]
    int_ports: Vec<u16>,
    /// DSCP marking embedded INT (repeatable; decimal or 0x..; default 0x17 and 0x20).
    #[arg(long = "int-dscp", value_name = "DSCP", value_parser = parse_u8)]
    int_dscp: Vec<u8>,
    /// UDP port of the KDN paper's INT-over-UDP format (not detected unless given).
    #[arg(long, value_name = "PORT")]
    kdn_port: Option<u16>,
    /// Geneve option class carrying INT (default 0x0103).
    #[arg(long, value_name = "CLASS", value_parser = parse_u16)]
    geneve_class: Option<u16>,
    /// GRE protocol type of the INT shim (default 0x4569).
    #[arg(long, value_name = "ETHERTYPE", value_parser = parse_u16)]
    gre_protocol: Option<u16>,
    /// IP protocol number of the INT-label option (default 253).
    #[arg(long, value_name = "PROTO")]
    int_label_protocol: Option<u8>,
    /// INT-label MAX_hop (default 5).
    #[arg(long, value_name = "N")]
    int_label_max_hop: Option<u8>,
    /// IP protocol number of GPINT probes (default 254).
    #[arg(long, value_name = "PROTO")]
    gpint_protocol: Option<u8>,
    /// Pretty-print each object over several lines.
    #[arg(long)]
    pretty: bool,
    /// Exit 1 if any frame is malformed.
    #[arg(long)]
    strict: bool,
}

fn parse_num(s: &str) -> Result<u64, String> {
    let r = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => s.parse(),
    };
    r.map_err(|e| format!("{s:?}: {e}"))
}

fn parse_u8(s: &str) -> Result<u8, String> {
    u8::try_from(parse_num(s)?).map_err(|e| e.to_string())
}

fn parse_u16(s: &str) -> Result<u16, String> {
    u16::try_from(parse_num(s)?).map_err(|e| e.to_string())
}

impl DecodeArgs {
    fn options(&self) -> DecodeOptions {
        let mut o = DecodeOptions {
            report_ports: self.ports.clone(),
            kdn_port: self.kdn_port,
            ..DecodeOptions::default()
        };
        if !self.int_ports.is_empty() {
            o.int_l4_ports = self.int_ports.clone();
        }
        if !self.int_dscp.is_empty() {
            o.int_dscp = self
                .int_dscp
                .iter()
                .map(|&value| DscpMatch { value, mask: 0x3F })
                .collect();
        }
        if let Some(v) = self.geneve_class {
            o.geneve_int_class = v;
        }
        if let Some(v) = self.gre_protocol {
            o.gre_int_protocol = v;
        }
        if let Some(v) = self.int_label_protocol {
            o.int_label_protocol = v;
        }
        if let Some(v) = self.int_label_max_hop {
            o.int_label_max_hop = v;
        }
        if let Some(v) = self.gpint_protocol {
            o.gpint_protocol = v;
        }
        o
    }
}

/// Where the network layer starts for a link type, and the bytes before it.
fn link_start(frame: &Frame<'_>) -> Option<(Start, usize)> {
    let ip_by_nibble = |at: usize| match frame.data.get(at).map(|b| b >> 4) {
        Some(6) => Some((Start::Ipv6, at)),
        Some(_) => Some((Start::Ipv4, at)),
        None => None,
    };
    let by_ethertype = |et: Option<u16>, at: usize| match et {
        Some(0x0800) => Some((Start::Ipv4, at)),
        Some(0x86DD) => Some((Start::Ipv6, at)),
        _ => None,
    };
    let be16 = |at: usize| {
        frame
            .data
            .get(at..at + 2)
            .map(|b| u16::from_be_bytes([b[0], b[1]]))
    };
    match frame.linktype {
        kplane_pcap::LINKTYPE_ETHERNET => Some((Start::Ethernet, 0)),
        kplane_pcap::LINKTYPE_RAW | 12 | 14 => ip_by_nibble(0),
        kplane_pcap::LINKTYPE_IPV4 => Some((Start::Ipv4, 0)),
        kplane_pcap::LINKTYPE_IPV6 => Some((Start::Ipv6, 0)),
        113 => by_ethertype(be16(14), 16), // Linux cooked capture v1
        276 => by_ethertype(be16(0), 20),  // Linux cooked capture v2
        _ => None,
    }
}

#[derive(Default)]
struct Summary {
    packets: u64,
    decoded: BTreeMap<&'static str, u64>,
    no_telemetry: u64,
    malformed: BTreeMap<&'static str, u64>,
    unsupported_link: u64,
}

impl Summary {
    fn line(&self) -> String {
        let count = |what: &str, m: &BTreeMap<&str, u64>| {
            let total: u64 = m.values().sum();
            if m.is_empty() {
                return format!("{total} {what}");
            }
            let parts: Vec<_> = m.iter().map(|(k, v)| format!("{k} {v}")).collect();
            format!("{total} {what} ({})", parts.join(", "))
        };
        format!(
            "{} packets: {}, {} without telemetry, {}, {} unsupported link type",
            self.packets,
            count("decoded", &self.decoded),
            self.no_telemetry,
            count("malformed", &self.malformed),
            self.unsupported_link
        )
    }
}

fn exporter(d: &Decoded<'_>) -> Option<SocketAddr> {
    match d {
        Decoded::Report { outer, .. } => {
            let ip = outer.ip?;
            let port = match outer.l4? {
                L4::Udp(u) => u.src_port,
                L4::Tcp(t) => t.src_port,
            };
            Some(SocketAddr::new(ip.src(), port))
        }
        Decoded::Packet(_) => None,
    }
}

pub fn run(args: DecodeArgs) -> ExitCode {
    let mut reader = match CaptureReader::open(&args.file) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("kplane decode: {e}");
            return ExitCode::from(2);
        }
    };
    let opts = args.options();
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let mut summary = Summary::default();
    let mut rec = ReportRecord::default();
    let mut read_error = None;
    while let Some(frame) = reader.next_frame() {
        let frame = match frame {
            Ok(f) => f,
            Err(e) => {
                read_error = Some(e);
                break;
            }
        };
        summary.packets += 1;
        let n = summary.packets;
        let Some((start, skip)) = link_start(&frame) else {
            summary.unsupported_link += 1;
            continue;
        };
        let data = frame.data.get(skip..).unwrap_or_default();
        let decoded = match decode_frame(data, start, &opts) {
            Ok(d) => d,
            Err(e) => {
                *summary.malformed.entry(e.reason()).or_default() += 1;
                eprintln!("kplane decode: frame {n}: {e}");
                continue;
            }
        };
        if !decoded.has_telemetry() {
            summary.no_telemetry += 1;
            continue;
        }
        let meta = RecordMeta {
            exporter: exporter(&decoded),
            received_ns: frame.ts_ns,
        };
        let mut records = Vec::new();
        let outcome = decoded.for_each_record(meta, &mut rec, |r| records.push(json!(r)));
        if let Some(e) = outcome.error {
            *summary.malformed.entry(e.reason()).or_default() += 1;
            eprintln!("kplane decode: frame {n}: {e}");
            if records.is_empty() {
                continue;
            }
        }
        let format = records
            .first()
            .and_then(|r| r["format"].as_str().map(str::to_owned))
            .unwrap_or_else(|| "unknown".into());
        let key = kplane_model::ReportFormat::ALL
            .iter()
            .map(|f| f.as_str())
            .find(|f| *f == format)
            .unwrap_or("unknown");
        *summary.decoded.entry(key).or_default() += 1;
        let obj = json!({
            "frame": n,
            "time_ns": frame.ts_ns,
            "length": frame.orig_len,
            "format": format,
            "headers": decoded,
            "records": records,
        });
        let text = if args.pretty {
            serde_json::to_string_pretty(&obj)
        } else {
            serde_json::to_string(&obj)
        };
        let written = text
            .map_err(std::io::Error::other)
            .and_then(|t| writeln!(out, "{t}"));
        if written.is_err() {
            // stdout closed (e.g. piped into `head`): stop quietly.
            break;
        }
    }
    let _ = out.flush();
    eprintln!("kplane decode: {}", summary.line());
    if let Some(e) = read_error {
        eprintln!("kplane decode: stopped reading: {e}");
        return ExitCode::from(2);
    }
    if args.strict && !summary.malformed.is_empty() {
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
