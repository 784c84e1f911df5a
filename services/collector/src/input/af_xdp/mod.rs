//! The `af-xdp` input: an XDP program on one interface redirects the telemetry UDP ports to an
//! AF_XDP socket per receive queue and passes everything else to the kernel; one thread per
//! queue drains its socket's ring in batches into the same pipeline queue the UDP input
//! feeds. The kernel's UDP stack is skipped for telemetry, which is where the UDP input spends
//! most of its time per report.
//!
//! Loaded without libbpf or a C toolchain: the program is built from eBPF instructions
//! ([`program`]) and loaded with `bpf(2)` ([`bpf`]). It is attached as a BPF link, so it is
//! detached when the collector exits, however it exits. Without the privileges or the kernel
//! support it needs, the collector refuses to start and says what is missing.

mod bpf;
pub mod frame;
mod program;
mod xsk;

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{SyncSender, TrySendError};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

pub use xsk::BindMode;
use xsk::{FRAME, HEADROOM, OpenError, Xsk};

use super::RecvBatch;
use crate::error::CollectorError;
use crate::metrics::CollectorMetrics;

/// `[collector.af-xdp] copy-mode`
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CopyMode {
    /// Zero-copy where the driver supports it, else copy mode (the choice is logged and
    /// shown on `kplane_collector_af_xdp_sockets`).
    #[default]
    Auto,
    Copy,
    /// Zero-copy or refuse to start.
    ZeroCopy,
}

/// `[collector.af-xdp] attach`
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AttachMode {
    /// Native (driver) XDP where the driver has it, else generic.
    #[default]
    Auto,
    Native,
    /// Generic (skb) XDP: any driver, slower.
    Generic,
}

/// `[collector.af-xdp]`
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct AfXdpConfig {
    /// The interface the reports arrive on.
    pub interface: String,
    /// Receive queues to take; empty = every queue of the interface.
    pub queues: Vec<u32>,
    pub copy_mode: CopyMode,
    pub attach: AttachMode,
    /// UMEM frames (and ring slots) per queue, a power of two: how many packets may wait for
    /// the collector before the kernel drops (counted).
    pub frames: u32,
}

impl Default for AfXdpConfig {
    fn default() -> Self {
        Self {
            interface: String::new(),
            queues: Vec::new(),
            copy_mode: CopyMode::Auto,
            attach: AttachMode::Auto,
            frames: 8192,
        }
    }
}

impl AfXdpConfig {
    pub fn validate(&self, problems: &mut Vec<String>) {
        if self.interface.is_empty() {
            problems.push("collector.af-xdp.interface must name the interface reports arrive on (input = \"af-xdp\")".into());
        }
        if !self.frames.is_power_of_two() || !(64..=65_536).contains(&self.frames) {
            problems.push("collector.af-xdp.frames must be a power of two in 64..=65536".into());
        }
    }
}

/// The program attached to the interface and one socket per queue.
pub struct AfXdp {
    pub interface: String,
    /// "native" or "generic".
    pub attach: &'static str,
    pub sockets: Vec<(u32, Xsk)>,
    /// Detaches the program when dropped (with the program and map it holds).
    link: Arc<OwnedFd>,
}

impl std::fmt::Debug for AfXdp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AfXdp")
            .field("interface", &self.interface)
            .field("attach", &self.attach)
            .field("sockets", &self.sockets)
            .finish_non_exhaustive()
    }
}

const PRIVILEGES: &str = "AF_XDP needs root, or CAP_NET_ADMIN, CAP_NET_RAW, CAP_BPF and \
                          CAP_IPC_LOCK (a container needs them granted)";

fn fail(interface: &str, what: impl Into<String>, source: io::Error) -> CollectorError {
    let mut what = what.into();
    let hint = match source.raw_os_error() {
        Some(libc::EPERM | libc::EACCES) => Some(PRIVILEGES),
        Some(libc::EAFNOSUPPORT) => {
            Some("this kernel has no AF_XDP sockets (CONFIG_XDP_SOCKETS); use input = \"udp\"")
        }
        Some(libc::ENOSYS) => Some("this kernel has no bpf(2) (CONFIG_BPF_SYSCALL)"),
        Some(libc::ENOMEM | libc::ENOBUFS) => Some(
            "the UMEM could not be locked in memory: raise the memlock limit or lower \
             collector.af-xdp.frames",
        ),
        Some(libc::EBUSY | libc::EEXIST) => Some(
            "another XDP program or AF_XDP socket holds this interface or queue \
             (`ip link show dev IF` shows it; `ip link set dev IF xdp off` removes a program)",
        ),
        _ => None,
    };
    if let Some(h) = hint {
        what = format!("{what} ({h})");
    }
    CollectorError::AfXdp {
        interface: interface.to_string(),
        what,
        source,
    }
}

/// The receive queues of `interface`, from sysfs.
fn all_queues(interface: &str) -> io::Result<Vec<u32>> {
    let mut q: Vec<u32> = std::fs::read_dir(format!("/sys/class/net/{interface}/queues"))?
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str()?.strip_prefix("rx-")?.parse().ok())
        .collect();
    q.sort_unstable();
    Ok(q)
}

/// Opens the sockets, loads the program steering `ports` to them and attaches it.
pub fn open(cfg: &AfXdpConfig, ports: &[u16]) -> Result<AfXdp, CollectorError> {
    let name = cfg.interface.as_str();
    let c_name = std::ffi::CString::new(name)
        .map_err(|_| CollectorError::Config("collector.af-xdp.interface contains NUL".into()))?;
    // SAFETY: a NUL-terminated name.
    let ifindex = unsafe { libc::if_nametoindex(c_name.as_ptr()) };
    if ifindex == 0 {
        return Err(fail(name, "no such interface", io::Error::last_os_error()));
    }
    let queues = if cfg.queues.is_empty() {
        all_queues(name).map_err(|e| fail(name, "listing its receive queues", e))?
    } else {
        cfg.queues.clone()
    };
    let slots = queues.iter().max().map_or(1, |q| q + 1);
    let map = bpf::create_xskmap(slots).map_err(|e| fail(name, "creating the XSKMAP", e))?;

    let mut sockets = Vec::with_capacity(queues.len());
    for &q in &queues {
        let open = |mode| Xsk::open(ifindex, q, cfg.frames, mode);
        let opened = match cfg.copy_mode {
            CopyMode::Copy => open(BindMode::Copy),
            CopyMode::ZeroCopy => open(BindMode::ZeroCopy),
            CopyMode::Auto => open(BindMode::ZeroCopy).or_else(|_| open(BindMode::Copy)),
        };
        let xsk = opened.map_err(|OpenError { step, source }| {
            fail(name, format!("queue {q}: {step}"), source)
        })?;
        bpf::xskmap_set(map.as_raw_fd(), q, xsk.raw_fd()).map_err(|e| {
            fail(
                name,
                format!("queue {q}: adding the socket to the XSKMAP"),
                e,
            )
        })?;
        sockets.push((q, xsk));
    }

    let insns = program::steering(ports, (FRAME - HEADROOM) as u16, map.as_raw_fd());
    let prog = bpf::load_xdp(&insns).map_err(|e| fail(name, "loading the XDP program", e))?;
    let attach = |flags| bpf::attach_xdp(prog.as_raw_fd(), ifindex, flags);
    let (link, attach) = match cfg.attach {
        AttachMode::Native => (attach(bpf::XDP_FLAGS_DRV_MODE), "native"),
        AttachMode::Generic => (attach(bpf::XDP_FLAGS_SKB_MODE), "generic"),
        AttachMode::Auto => match attach(bpf::XDP_FLAGS_DRV_MODE) {
            Ok(l) => (Ok(l), "native"),
            Err(_) => (attach(bpf::XDP_FLAGS_SKB_MODE), "generic"),
        },
    };
    let link = link.map_err(|e| {
        fail(
            name,
            format!("attaching the XDP program ({attach}; BPF links need Linux ≥ 5.9)"),
            e,
        )
    })?;
    // The link holds the program, and the program the map.
    drop((prog, map));
    Ok(AfXdp {
        interface: name.to_string(),
        attach,
        sockets,
        link: Arc::new(link),
    })
}

impl AfXdp {
    /// A handle that keeps the program attached while any receive thread holds it.
    pub fn attachment(&self) -> Arc<OwnedFd> {
        self.link.clone()
    }
}

/// Drains one queue's socket until `stop`: each batch of frames becomes one [`RecvBatch`] for
/// the pipeline; when its queue is full the batch is dropped and counted. A batch short of
/// `batch_target` frames is followed by a `coalesce` pause. The kernel's
/// drops (no free frame, ring full) are read from `XDP_STATISTICS` and counted too.
pub fn receive_loop(
    mut xsk: Xsk,
    max_datagram: usize,
    (batch_target, coalesce): (usize, Duration),
    tx: SyncSender<RecvBatch>,
    stop: Arc<AtomicBool>,
    metrics: CollectorMetrics,
    _attachment: Arc<OwnedFd>,
) {
    let mut kernel = KernelDrops::default();
    let mut last_stats = Instant::now();
    while !stop.load(Ordering::Acquire) {
        let mut batch = RecvBatch::default();
        let mut not_udp = 0u64;
        let n = xsk.drain(|f| match frame::datagram(f) {
            Some(d) => {
                let len = d.payload.len();
                let keep = len.min(max_datagram);
                let start = batch.data.len();
                batch
                    .data
                    .extend_from_slice(&f[d.payload.start..d.payload.start + keep]);
                let truncated = d.truncated || len > max_datagram;
                batch.datagrams.push((start, keep, d.source, truncated));
            }
            None => not_udp += 1,
        });
        if last_stats.elapsed() >= Duration::from_millis(100) {
            kernel.count(&xsk, &metrics);
            last_stats = Instant::now();
        }
        if n == 0 {
            if let Err(e) = xsk.wait(100) {
                tracing::error!(error = %e, "AF_XDP poll failed; receive thread stops");
                metrics.drop("af_xdp", "error", 1);
                break;
            }
            continue;
        }
        metrics.af_xdp_frames.inc_by(n as u64);
        metrics.drop("af_xdp", "not_udp", not_udp);
        if batch.datagrams.is_empty() {
            continue;
        }
        batch.received_ns = kplane_model::unix_time_ns();
        let datagrams = batch.datagrams.len() as u64;
        match tx.try_send(batch) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => metrics.drop("queue", "full", datagrams),
            Err(TrySendError::Disconnected(_)) => break,
        }
        // The ring holds what arrives meanwhile.
        if n < batch_target && !coalesce.is_zero() {
            std::thread::sleep(coalesce);
        }
    }
    kernel.count(&xsk, &metrics);
}

/// The kernel's cumulative drop counters of one socket, turned into increments.
#[derive(Debug, Default)]
struct KernelDrops {
    rx_dropped: u64,
    rx_ring_full: u64,
    rx_invalid: u64,
}

impl KernelDrops {
    fn count(&mut self, xsk: &Xsk, metrics: &CollectorMetrics) {
        let Ok(s) = xsk.statistics() else { return };
        for (last, now, reason) in [
            (&mut self.rx_dropped, s.rx_dropped, "rx_dropped"),
            (&mut self.rx_ring_full, s.rx_ring_full, "rx_ring_full"),
            (&mut self.rx_invalid, s.rx_invalid_descs, "rx_invalid_descs"),
        ] {
            metrics.drop("af_xdp", reason, now.saturating_sub(*last));
            *last = now;
        }
    }
}
