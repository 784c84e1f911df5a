//! `kplane bench …`: benchmarks the issues ask for, printed as plain text with the parameters,
//! so figures can be quoted and reproduced.

use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use kplane_collector::bench::{ReductionParams, fat_tree_reports};
use kplane_runtime::probe::{http_get, metric_sum, wait_ready};

#[derive(Debug, Subcommand)]
pub enum Bench {
    /// Data reduction of event detection on INTCollector's example (fat-tree, 20 switches,
    /// 5000 flows, 5 hops, every field), in virtual time.
    Reduction(ReductionArgs),
    /// Memory per tracked metric key.
    Memory(MemoryArgs),
    /// Loopback UDP: starts a collector in a second process and sends it reports (sendmmsg).
    Udp(UdpArgs),
    /// Emulator speed: virtual time on the default fat-tree, INT on every flow, a TR v2.0
    /// report built for every delivered packet (no collector).
    Emulator(EmulatorArgs),
    /// Collector → Kafka → consumer group on one machine: sustained reports/s, loss, and
    /// receive-to-consume latency p50/p99 (needs a broker: `make broker`).
    Kafka(crate::bench_kafka::KafkaArgs),
    /// Stream processor: reports/s through the 1 s window analytics on one core; with
    /// `--latency 20s`, arrival → window result / immediate event latency p50/p99.
    Processor(crate::bench_processor::ProcessorArgs),
    /// Intents: check, compile and conflict-check many intents (in memory).
    Intents(crate::bench_intents::IntentsArgs),
    /// Table entries pushed per second to a P4Runtime switch (BMv2 started if no --addr).
    P4runtime(crate::bench_intents::P4runtimeArgs),
    /// Flow churn through the collector's pipeline and the processor's detectors (virtual
    /// time): resident memory and state-table sizes and evictions per virtual minute.
    Soak(crate::bench_soak::SoakArgs),
    /// The closed loop in `kplane up`: a DDoS → anomaly → block intents written → verified,
    /// seconds from the attack's start, and the attack's traffic at the victim afterwards.
    Loop(crate::bench_loop::LoopArgs),
}

#[derive(Debug, Args)]
pub struct EmulatorArgs {
    /// Virtual seconds to emulate.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    #[arg(long, default_value = "fat-tree:4")]
    topology: String,
    /// Poisson flow arrivals per second.
    #[arg(long, default_value_t = 1000.0)]
    flows: f64,
}

#[derive(Debug, Args)]
pub struct ReductionArgs {
    #[arg(long, default_value_t = 5000)]
    flows: u32,
    /// Reports per second (virtual time).
    #[arg(long, default_value_t = 1_000_000)]
    rate: u64,
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Real changes per second.
    #[arg(long, default_value_t = 1000)]
    changes: u64,
}

#[derive(Debug, Args)]
pub struct MemoryArgs {
    #[arg(long, default_value_t = 1_000_000)]
    flows: u32,
}

#[derive(Debug, Args)]
pub struct UdpArgs {
    /// Reports per second to send; 0 = as fast as the sender can.
    #[arg(long, default_value_t = 0)]
    rate: u64,
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    /// Distinct flows (sources) in the reports.
    #[arg(long, default_value_t = 5000)]
    flows: u32,
    /// Collector receive sockets (SO_REUSEPORT), one thread each.
    #[arg(long, default_value_t = 1)]
    sockets: usize,
    /// Datagrams per sendmmsg call.
    #[arg(long, default_value_t = 64)]
    batch: usize,
}

pub fn run(b: Bench) -> ExitCode {
    match b {
        Bench::Reduction(a) => reduction(a),
        Bench::Intents(a) => crate::bench_intents::intents(a),
        Bench::P4runtime(a) => crate::bench_intents::p4runtime(a),
        Bench::Memory(a) => memory(a),
        Bench::Emulator(a) => emulator(a),
        Bench::Processor(a) => match crate::bench_processor::run_cli(a) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("kplane bench processor: {e}");
                ExitCode::FAILURE
            }
        },
        Bench::Kafka(a) => match crate::bench_kafka::run(a) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("kplane bench kafka: {e}");
                ExitCode::FAILURE
            }
        },
        Bench::Soak(a) => match crate::bench_soak::run(a) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("kplane bench soak: {e:#}");
                ExitCode::FAILURE
            }
        },
        Bench::Loop(a) => match crate::bench_loop::run(a) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("kplane bench loop: {e:#}");
                ExitCode::FAILURE
            }
        },
        Bench::Udp(a) => match udp(a) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("kplane bench udp: {e}");
                ExitCode::FAILURE
            }
        },
    }
}

fn reduction(a: ReductionArgs) -> ExitCode {
    let p = ReductionParams {
        flows: a.flows,
        rate: a.rate,
        seconds: a.seconds,
        changes: a.changes,
        ..ReductionParams::default()
    };
    let t = Instant::now();
    let r = kplane_collector::bench::reduction(&p);
    let wall = t.elapsed().as_secs_f64();
    println!(
        "scenario: fat-tree k=4 (20 switches), {} flows, 5 hops, every field",
        p.flows
    );
    println!(
        "rate {} reports/s x {} s (virtual), {} real changes/s, refresh {:?}",
        p.rate, p.seconds, p.changes, p.events.refresh
    );
    println!("reports                 {}", r.reports);
    println!("metric values in (M_all) {}", r.metric_values);
    println!("events out (M_event)    {}", r.events);
    println!("metric keys (K)         {}", r.keys);
    println!("reduction M_all/M_event {:.0}x", r.ratio);
    println!(
        "paper formula R*k/(E+K/P) for these R, K, E, P: {:.0}x",
        r.paper_ratio
    );
    println!(
        "detection throughput    {:.2} M reports/s ({:.1} s wall)",
        r.reports as f64 / wall / 1e6,
        wall
    );
    ExitCode::SUCCESS
}

fn emulator(a: EmulatorArgs) -> ExitCode {
    use kplane_emulator::run::{RunConfig, build, run};
    let cfg = RunConfig {
        topology: a.topology,
        duration: Duration::from_secs(a.seconds),
        flows_per_second: a.flows,
        ..RunConfig::default()
    };
    let sim = match build(&cfg) {
        Ok(s) => std::sync::Arc::new(std::sync::Mutex::new(s)),
        Err(e) => {
            eprintln!("kplane bench emulator: {e}");
            return ExitCode::from(2);
        }
    };
    match run(&cfg, sim, || false) {
        Ok(s) => {
            println!(
                "{} ({} switches, {} hosts), {} s virtual, {} flows/s, INT on every flow",
                s.topology, s.switches, s.hosts, a.seconds, a.flows
            );
            println!(
                "packets {} ({} delivered), events {}, reports built {} ({:.0} MB)",
                s.stats.packets_sent,
                s.stats.packets_delivered,
                s.stats.events,
                s.stats.reports,
                s.stats.report_bytes as f64 / 1e6
            );
            println!(
                "wall {:.2} s: {:.3} M emulated packets/s, {:.2} M events/s, one core",
                s.wall_seconds,
                s.packets_per_second() / 1e6,
                s.stats.events as f64 / s.wall_seconds / 1e6
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("kplane bench emulator: {e}");
            ExitCode::FAILURE
        }
    }
}

fn memory(a: MemoryArgs) -> ExitCode {
    let (keys, rss, table) = kplane_collector::bench::memory(a.flows);
    println!(
        "flows {}: {keys} metric keys (path, latency, per-hop latency)",
        a.flows
    );
    println!(
        "resident memory added  {:.1} MiB = {:.1} B per key",
        rss as f64 / 1048576.0,
        rss as f64 / keys.max(1) as f64
    );
    println!(
        "key table (buckets)    {:.1} MiB = {:.1} B per key",
        table as f64 / 1048576.0,
        table as f64 / keys.max(1) as f64
    );
    ExitCode::SUCCESS
}

/// CPU seconds (user + system) a process has used, from /proc.
pub(crate) fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let (utime, stime): (f64, f64) = (f.get(11)?.parse().ok()?, f.get(12)?.parse().ok()?);
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Some((utime + stime) / hz)
}

pub(crate) fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Sends `msgs` with one sendmmsg call; returns how many were sent.
fn send_batch(sock: &UdpSocket, msgs: &mut [Vec<u8>]) -> usize {
    let mut iov: Vec<libc::iovec> = msgs
        .iter_mut()
        .map(|m| libc::iovec {
            iov_base: m.as_mut_ptr().cast(),
            iov_len: m.len(),
        })
        .collect();
    let mut hdrs: Vec<libc::mmsghdr> = iov
        .iter_mut()
        .map(|v| {
            // SAFETY: mmsghdr is plain data; zero is a valid starting value.
            let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
            h.msg_hdr.msg_iov = v;
            h.msg_hdr.msg_iovlen = 1;
            h
        })
        .collect();
    // SAFETY: the headers point at iovecs and buffers that live across the call; the socket
    // is connected so no address is needed.
    let n = unsafe {
        libc::sendmmsg(
            sock.as_raw_fd(),
            hdrs.as_mut_ptr(),
            hdrs.len() as libc::c_uint,
            0,
        )
    };
    n.max(0) as usize
}

/// Sends fat-tree TR v2.0 reports (per-node sequence numbers kept gap-free) to `target` at
/// `rate` per second (0 = flat out) for `seconds`; returns (sent, seconds taken).
pub(crate) fn paced_send(
    target: SocketAddr,
    flows: u32,
    rate: u64,
    seconds: u64,
    batch_size: usize,
) -> std::io::Result<(u64, f64)> {
    let templates = fat_tree_reports(flows);
    let sock = UdpSocket::bind("127.0.0.1:0")?;
    sock.connect(target)?;
    let started = Instant::now();
    let deadline = started + Duration::from_secs(seconds);
    let mut seq = [0u32; 21];
    let mut sent = 0u64;
    let mut next = 0usize;
    let mut batch: Vec<Vec<u8>> = Vec::with_capacity(batch_size);
    while Instant::now() < deadline {
        if rate > 0 {
            let due = (started.elapsed().as_secs_f64() * rate as f64) as u64;
            if sent >= due {
                std::thread::sleep(Duration::from_micros(100));
                continue;
            }
        }
        batch.clear();
        for _ in 0..batch_size {
            let mut r = templates[next % templates.len()].clone();
            next += 1;
            // Per-node sequence numbers (22 bits, group header bytes 1-3).
            let node = u32::from_be_bytes([r[4], r[5], r[6], r[7]]) as usize % seq.len();
            let s = seq[node] & 0x3F_FFFF;
            seq[node] += 1;
            r[1] = (r[1] & 0xC0) | ((s >> 16) as u8 & 0x3F);
            r[2] = (s >> 8) as u8;
            r[3] = s as u8;
            batch.push(r);
        }
        sent += send_batch(&sock, &mut batch) as u64;
    }
    Ok((sent, started.elapsed().as_secs_f64()))
}

fn udp(a: UdpArgs) -> Result<(), Box<dyn std::error::Error>> {
    let (port, admin_port) = (free_port()?, free_port()?);
    let target: SocketAddr = ([127, 0, 0, 1], port).into();
    let admin: SocketAddr = ([127, 0, 0, 1], admin_port).into();
    let mut child = Command::new(std::env::current_exe()?)
        .args([
            "collector",
            "--listen",
            &target.to_string(),
            "--admin",
            &admin.to_string(),
        ])
        .env(
            "KPLANE__COLLECTOR__SOCKETS_PER_LISTENER",
            a.sockets.to_string(),
        )
        .env("KPLANE__COLLECTOR__RECV_BUFFER", (32 << 20).to_string())
        .env("KPLANE__COLLECTOR__BUS_CAPACITY", "100000000")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .spawn()?;
    let result = (|| -> Result<(), Box<dyn std::error::Error>> {
        if !wait_ready(admin, Duration::from_secs(20)) {
            return Err("the collector never became ready".into());
        }
        let cpu0 = cpu_seconds(child.id()).unwrap_or(0.0);
        let (sent, send_secs) = paced_send(target, a.flows, a.rate, a.seconds, a.batch)?;
        // Let the collector drain.
        let mut last = -1.0;
        let mut m = String::new();
        for _ in 0..100 {
            std::thread::sleep(Duration::from_millis(100));
            m = http_get(admin, "/metrics").unwrap_or_default();
            let now = metric_sum(&m, "kplane_collector_datagrams_received_total", &[]);
            if now == last {
                break;
            }
            last = now;
        }
        let cpu = cpu_seconds(child.id()).unwrap_or(0.0) - cpu0;
        let received = metric_sum(&m, "kplane_collector_datagrams_received_total", &[]);
        let decoded = metric_sum(&m, "kplane_collector_reports_decoded_total", &[]);
        let kernel = metric_sum(&m, "kplane_collector_dropped_total", &["stage=\"socket\""]);
        let queue = metric_sum(&m, "kplane_collector_dropped_total", &["stage=\"queue\""]);
        let malformed = metric_sum(&m, "kplane_collector_malformed_total", &[]);
        let unaccounted = sent as f64 - received - kernel - queue;
        println!(
            "sent        {sent} reports (5-hop TR v2.0, 0xFF00) in {send_secs:.2} s = {:.3} M/s, {} flows",
            sent as f64 / send_secs / 1e6,
            a.flows
        );
        println!(
            "received    {received:.0} ({:.2} %)",
            received * 100.0 / sent.max(1) as f64
        );
        println!("decoded     {decoded:.0} records, malformed {malformed:.0}");
        println!(
            "dropped     kernel receive buffer {kernel:.0}, pipeline queue {queue:.0} (counted)"
        );
        println!("unaccounted {unaccounted:.0}");
        println!(
            "collector   {cpu:.2} CPU-s = {:.0} % of one core over the send time, {:.0} ns CPU per received report",
            cpu * 100.0 / send_secs,
            cpu * 1e9 / received.max(1.0)
        );
        Ok(())
    })();
    // SAFETY: signalling our own child.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
    }
    let _ = child.wait();
    result
}
