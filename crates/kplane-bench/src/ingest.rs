//! `kplane bench ingest --input udp|af-xdp`: reports taken off a wire by a collector process.
//! The wire is a veth pair whose far end sits in a network namespace where this process
//! sends from (UDP GSO sends of 64 reports, one thread); the collector listens on the near end with its UDP
//! sockets or with AF_XDP. Both inputs are measured on the same wire with the same sender, so
//! their figures compare like with like. Needs root (namespaces, XDP).

use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::{Args, ValueEnum};
use kplane_collector::bench::fat_tree_reports;
use kplane_runtime::probe::{http_get, metric_sum, wait_ready};
use kplane_testkit::netns::VethPair;

use crate::{cpu_seconds, free_port};

/// How the collector takes reports off the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Input {
    /// The kernel's UDP stack, `recvmmsg`.
    Udp,
    /// An XDP program redirecting the telemetry port to AF_XDP sockets.
    AfXdp,
}

#[derive(Debug, Args)]
pub struct IngestArgs {
    #[arg(long, value_enum, default_value = "af-xdp")]
    input: Input,
    /// Reports per second to send; 0 = as fast as the sender can.
    #[arg(long, default_value_t = 0)]
    rate: u64,
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    /// Distinct flows (sources) in the reports.
    #[arg(long, default_value_t = 5000)]
    flows: u32,
    /// Datagrams per send call (one UDP GSO send, at most 64).
    #[arg(long, default_value_t = 64)]
    batch: usize,
}

/// A veth wire to a collector: where to send, from which socket, and how to configure the
/// collector for the chosen input.
#[derive(Debug)]
pub struct Wire {
    pub target: SocketAddr,
    pub sender: UdpSocket,
    /// `KPLANE__…` settings for the collector process.
    pub env: Vec<(&'static str, String)>,
    pub veth: VethPair,
}

impl Wire {
    pub fn new(input: Input, tag: &str) -> anyhow::Result<Self> {
        let veth = VethPair::create(tag).context("setting up the veth wire (run as root)")?;
        let target = SocketAddr::from((veth.host_ip, free_port()?));
        let sender = veth.peer_socket()?;
        sender.connect(target)?;
        let mut env = vec![
            ("KPLANE__COLLECTOR__LISTEN", format!("[\"{target}\"]")),
            ("KPLANE__COLLECTOR__RECV_BUFFER", (32 << 20).to_string()),
        ];
        if input == Input::AfXdp {
            env.push(("KPLANE__COLLECTOR__INPUT", "af-xdp".into()));
            env.push(("KPLANE__COLLECTOR__AF_XDP__INTERFACE", veth.host.clone()));
        }
        Ok(Self {
            target,
            sender,
            env,
            veth,
        })
    }
}

impl Wire {
    /// A collector process listening on this wire (admin listener on `admin`, quiet logs);
    /// callers add their own settings before spawning it.
    pub fn collector(&self, admin: SocketAddr) -> std::io::Result<Command> {
        let mut c = Command::new(std::env::current_exe()?);
        c.args(["collector", "--admin", &admin.to_string()])
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null());
        Ok(c)
    }
}

/// Sends `msgs` (all of one length) as one UDP GSO super-datagram (`UDP_SEGMENT`): one pass
/// through the sender's socket and IP layers for the batch, cut into one datagram per report
/// before the veth when XDP is attached on the far end (veth then turns segmentation offload
/// off), or at the receiving socket otherwise. Returns how many were sent.
fn send_batch(sock: &UdpSocket, msgs: &[Vec<u8>], buf: &mut Vec<u8>) -> usize {
    let Some(first) = msgs.first() else { return 0 };
    let seg = first.len();
    buf.clear();
    for m in msgs {
        buf.extend_from_slice(m);
    }
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: CMSG_SPACE is a pure size computation.
    let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<u16>() as u32) } as usize;
    let mut control = [0u64; 4];
    // SAFETY: msghdr is plain data; zero is a valid starting value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    // SAFETY: the control buffer is large enough for one u16 control message; the socket is
    // connected; the buffers outlive the call.
    let n = unsafe {
        let c = libc::CMSG_FIRSTHDR(&msg);
        (*c).cmsg_level = libc::SOL_UDP;
        (*c).cmsg_type = libc::UDP_SEGMENT;
        (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<u16>() as u32) as _;
        libc::CMSG_DATA(c).cast::<u16>().write_unaligned(seg as u16);
        libc::sendmsg(sock.as_raw_fd(), &msg, 0)
    };
    if n < 0 { 0 } else { msgs.len() }
}

/// CPU seconds the calling thread has used.
fn thread_cpu() -> f64 {
    // SAFETY: clock_gettime writes one timespec.
    let mut t: libc::timespec = unsafe { std::mem::zeroed() };
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 + t.tv_nsec as f64 / 1e9
}

/// What a paced send did.
#[derive(Debug, Clone, Copy)]
pub struct Sent {
    pub reports: u64,
    pub seconds: f64,
    /// CPU time of the sending thread (its system calls and the kernel work they do).
    pub cpu: f64,
}

/// What a sender sends: a report per flow, cycled, and for each flow a changed copy of the
/// same length that replaces it while the flow is "changed"; `changes_per_second` flips one
/// flow (round robin) between the two, each flip a real change the collector should see.
#[derive(Clone, Debug)]
pub struct Traffic {
    pub base: Vec<Vec<u8>>,
    pub changed: Vec<Vec<u8>>,
    pub changes_per_second: u64,
}

impl Traffic {
    /// Fat-tree TR v2.0 reports (5 hops, every field) of `flows` flows, never changing.
    pub fn fat_tree(flows: u32) -> Self {
        Self {
            base: fat_tree_reports(flows),
            changed: Vec::new(),
            changes_per_second: 0,
        }
    }
}

/// Per-node report sequence numbers of a sender (by node id modulo 21), kept gap-free across
/// sends so the collector sees no loss.
pub type Sequences = [u32; 21];

/// Sends `traffic` on the connected `sock` at `rate` reports per second (0 = flat out) for
/// `seconds`, stamping each sink's next sequence number.
pub fn paced_send(
    sock: &UdpSocket,
    traffic: &Traffic,
    seq: &mut Sequences,
    rate: u64,
    seconds: f64,
    batch_size: usize,
) -> std::io::Result<Sent> {
    let n = traffic.base.len().max(1);
    let mut changed = vec![false; n];
    let mut flips = 0u64;
    let cpu0 = thread_cpu();
    let started = Instant::now();
    let deadline = started + Duration::from_secs_f64(seconds);
    let mut sent = 0u64;
    let mut next = 0usize;
    let batch_size = batch_size.clamp(1, 64);
    let mut batch: Vec<Vec<u8>> = Vec::with_capacity(batch_size);
    let mut buf = Vec::new();
    while Instant::now() < deadline {
        let elapsed = started.elapsed().as_secs_f64();
        if rate > 0 {
            let due = (elapsed * rate as f64) as u64;
            if sent >= due {
                std::thread::sleep(Duration::from_micros(100));
                continue;
            }
        }
        if !traffic.changed.is_empty() {
            let due = (elapsed * traffic.changes_per_second as f64) as u64;
            while flips < due {
                let f = (flips % n as u64) as usize;
                changed[f] = !changed[f];
                flips += 1;
            }
        }
        batch.clear();
        for _ in 0..batch_size {
            let f = next % n;
            let mut r = if changed[f] {
                traffic.changed[f].clone()
            } else {
                traffic.base[f].clone()
            };
            // One GSO send carries reports of one length.
            if batch.first().is_some_and(|f: &Vec<u8>| f.len() != r.len())
                || (batch.len() + 1) * r.len() > 60_000
            {
                break;
            }
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
        let sent_now = send_batch(sock, &batch, &mut buf);
        sent += sent_now as u64;
        // Sequence numbers of what the kernel refused (a full send queue) are reused.
        for r in &batch[sent_now..] {
            let node = u32::from_be_bytes([r[4], r[5], r[6], r[7]]) as usize % seq.len();
            seq[node] -= 1;
        }
        next -= batch.len() - sent_now;
    }
    Ok(Sent {
        reports: sent,
        seconds: started.elapsed().as_secs_f64(),
        cpu: thread_cpu() - cpu0,
    })
}

/// Machine-wide CPU seconds spent in softirq context (`/proc/stat`): the receive path that
/// runs outside any process's own time (veth, XDP, the UDP stack).
pub fn softirq_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let ticks: f64 = stat
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(7))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    // SAFETY: sysconf has no preconditions.
    ticks / unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64
}

pub fn run(a: IngestArgs) -> anyhow::Result<()> {
    let wire = Wire::new(a.input, "bi")?;
    let admin: SocketAddr = ([127, 0, 0, 1], free_port()?).into();
    let mut child = wire
        .collector(admin)?
        // Nothing consumes the embedded bus here: let it hold the whole run.
        .env("KPLANE__COLLECTOR__BUS_CAPACITY", "100000000")
        .spawn()?;
    let result = (|| -> anyhow::Result<()> {
        if !wait_ready(admin, Duration::from_secs(20)) {
            anyhow::bail!("the collector never became ready");
        }
        let info = http_get(admin, "/metrics").unwrap_or_default();
        let cpu0 = cpu_seconds(child.id()).unwrap_or(0.0);
        let soft0 = softirq_seconds();
        let sent = paced_send(
            &wire.sender,
            &Traffic::fat_tree(a.flows),
            &mut [0; 21],
            a.rate,
            a.seconds as f64,
            a.batch,
        )?;
        // Let the collector drain, and count a burst's last kernel drops: it reads those when
        // its socket has been idle for its receive timeout (100 ms), so wait for 300 ms
        // without a change in what it took or dropped.
        let (mut last, mut still) = (-1.0, 0);
        let mut m = String::new();
        for _ in 0..100 {
            std::thread::sleep(Duration::from_millis(100));
            m = http_get(admin, "/metrics").unwrap_or_default();
            let now = metric_sum(&m, "kplane_collector_datagrams_received_total", &[])
                + metric_sum(&m, "kplane_collector_dropped_total", &[]);
            still = if now == last { still + 1 } else { 0 };
            if still == 3 {
                break;
            }
            last = now;
        }
        let cpu = cpu_seconds(child.id()).unwrap_or(0.0) - cpu0;
        let softirq = softirq_seconds() - soft0;
        print_report(&a, &wire, &info, &m, sent, cpu, softirq);
        Ok(())
    })();
    // SAFETY: signalling our own child.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
    }
    let _ = child.wait();
    result
}

fn print_report(
    a: &IngestArgs,
    wire: &Wire,
    info: &str,
    m: &str,
    sent: Sent,
    cpu: f64,
    softirq: f64,
) {
    let received = metric_sum(m, "kplane_collector_datagrams_received_total", &[]);
    let via_xdp = metric_sum(m, "kplane_collector_af_xdp_frames_total", &[]);
    let decoded = metric_sum(m, "kplane_collector_reports_decoded_total", &[]);
    let malformed = metric_sum(m, "kplane_collector_malformed_total", &[]);
    let kernel = metric_sum(m, "kplane_collector_dropped_total", &["stage=\"socket\""])
        + metric_sum(m, "kplane_collector_dropped_total", &["stage=\"af_xdp\""]);
    let queue = metric_sum(m, "kplane_collector_dropped_total", &["stage=\"queue\""]);
    let unaccounted = sent.reports as f64 - received - kernel - queue;
    let input = match a.input {
        Input::Udp => format!("udp on {} (recvmmsg, one socket)", wire.target),
        Input::AfXdp => {
            let mode = if metric_sum(
                info,
                "kplane_collector_af_xdp_sockets",
                &["mode=\"zero-copy\""],
            ) > 0.0
            {
                "zero-copy"
            } else {
                "copy mode"
            };
            let attach = if metric_sum(
                info,
                "kplane_collector_af_xdp_sockets",
                &["attach=\"native\""],
            ) > 0.0
            {
                "native XDP"
            } else {
                "generic XDP"
            };
            format!("af-xdp on {} ({mode}, {attach})", wire.veth.host)
        }
    };
    println!(
        "input       {input}; wire: veth from the namespace {}",
        wire.veth.ns
    );
    println!(
        "sent        {} reports (5-hop TR v2.0, 0xFF00, {} flows) in {:.2} s = {:.3} M/s; sender thread (GSO) {:.2} CPU-s = {:.0} ns per report",
        sent.reports,
        a.flows,
        sent.seconds,
        sent.reports as f64 / sent.seconds / 1e6,
        sent.cpu,
        sent.cpu * 1e9 / sent.reports.max(1) as f64
    );
    println!(
        "received    {received:.0} ({:.2} %), {via_xdp:.0} through AF_XDP",
        received * 100.0 / sent.reports.max(1) as f64
    );
    println!("decoded     {decoded:.0} records, malformed {malformed:.0}");
    println!("dropped     kernel {kernel:.0}, pipeline queue {queue:.0} (counted)");
    println!("unaccounted {unaccounted:.0}");
    let per_report = cpu * 1e9 / received.max(1.0);
    println!(
        "collector   {cpu:.2} CPU-s = {:.0} % of one core over the send; {per_report:.0} ns CPU per report = {:.2} M reports/s per core",
        cpu * 100.0 / sent.seconds,
        1e3 / per_report.max(1e-9)
    );
    println!(
        "softirq     {softirq:.2} CPU-s machine-wide = {:.0} ns per report (veth, XDP or the UDP stack; tick-sampled)",
        softirq * 1e9 / received.max(1.0)
    );
}
