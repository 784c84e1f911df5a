//! UDP receive threads: one per socket, SO_REUSEPORT so the kernel spreads exporters over
//! them, `recvmmsg` to take up to `recv_batch` datagrams per system call, `SO_RXQ_OVFL` to
//! learn how many datagrams the kernel dropped because the receive buffer was full — and, when
//! the socket is idle, `SO_MEMINFO` for the drops no datagram has reported yet (those after
//! the last one queued, at the end of a burst).

use std::io;
use std::mem::{size_of, size_of_val, zeroed};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{SyncSender, TrySendError};
use std::time::Duration;

use socket2::{Domain, Protocol, Socket, Type};

use super::RecvBatch;
use crate::metrics::CollectorMetrics;

/// Opens a bound, non-blocking-with-timeout UDP socket with SO_REUSEPORT.
pub fn bind(addr: SocketAddr, recv_buffer: usize) -> io::Result<Socket> {
    let s = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    s.set_reuse_address(true)?;
    s.set_reuse_port(true)?;
    if let Err(e) = s.set_recv_buffer_size(recv_buffer) {
        tracing::warn!(error = %e, recv_buffer, "cannot set SO_RCVBUF");
    }
    // Wake up regularly to notice shutdown.
    s.set_read_timeout(Some(Duration::from_millis(100)))?;
    let one: libc::c_int = 1;
    // SAFETY: setsockopt with a valid fd, level/name and a c_int value of the right size.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RXQ_OVFL,
            (&one as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        tracing::warn!(error = %io::Error::last_os_error(), "SO_RXQ_OVFL unavailable: kernel drops will not be counted");
    }
    s.bind(&addr.into())?;
    Ok(s)
}

/// Space for one datagram's source address and control message.
struct Slot {
    addr: libc::sockaddr_storage,
    cmsg: [u64; 8],
}

/// Receives batches of datagrams from one socket.
pub struct BatchReceiver {
    socket: Socket,
    max_datagram: usize,
    buf: Vec<u8>,
    iov: Vec<libc::iovec>,
    hdrs: Vec<libc::mmsghdr>,
    slots: Vec<Slot>,
    /// Last cumulative kernel drop count (SO_RXQ_OVFL).
    overflow: u32,
}

impl std::fmt::Debug for BatchReceiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchReceiver")
            .field("socket", &self.socket)
            .finish_non_exhaustive()
    }
}

// SAFETY: the raw pointers inside `iov`/`hdrs` point into this struct's own heap buffers and
// are only used by the thread that owns it.
unsafe impl Send for BatchReceiver {}

impl BatchReceiver {
    pub fn new(socket: Socket, batch: usize, max_datagram: usize) -> Self {
        // One extra byte per slot tells a datagram of exactly `max_datagram` bytes apart from a
        // longer one even where MSG_TRUNC is not reported.
        let stride = max_datagram + 1;
        let mut r = Self {
            socket,
            max_datagram,
            buf: vec![0; batch * stride],
            iov: Vec::with_capacity(batch),
            hdrs: Vec::with_capacity(batch),
            // SAFETY: sockaddr_storage and the cmsg buffer are plain data; zero is valid.
            slots: (0..batch).map(|_| unsafe { zeroed() }).collect(),
            overflow: 0,
        };
        for i in 0..batch {
            r.iov.push(libc::iovec {
                iov_base: r.buf[i * stride..].as_mut_ptr().cast(),
                iov_len: stride,
            });
        }
        for i in 0..batch {
            // SAFETY: mmsghdr is plain data; zero is a valid starting value.
            let mut h: libc::mmsghdr = unsafe { zeroed() };
            h.msg_hdr.msg_iov = &mut r.iov[i];
            h.msg_hdr.msg_iovlen = 1;
            r.hdrs.push(h);
        }
        r
    }

    /// Waits (up to the socket timeout) for datagrams and appends them to `out`. Returns the
    /// number received and how many the kernel dropped since the last call (0 datagrams: the
    /// socket was idle for the timeout, and the drops are the ones no datagram reported).
    pub fn recv(&mut self, out: &mut RecvBatch) -> io::Result<(usize, u64)> {
        let stride = self.max_datagram + 1;
        for (h, s) in self.hdrs.iter_mut().zip(self.slots.iter_mut()) {
            h.msg_hdr.msg_name = (&mut s.addr as *mut libc::sockaddr_storage).cast();
            h.msg_hdr.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            h.msg_hdr.msg_control = s.cmsg.as_mut_ptr().cast();
            h.msg_hdr.msg_controllen = size_of::<[u64; 8]>() as _;
            h.msg_hdr.msg_flags = 0;
            h.msg_len = 0;
        }
        // SAFETY: `hdrs` holds `len` initialised headers whose iovecs, names and control
        // buffers point into buffers owned by `self` that outlive the call.
        let n = unsafe {
            libc::recvmmsg(
                self.socket.as_raw_fd(),
                self.hdrs.as_mut_ptr(),
                self.hdrs.len() as libc::c_uint,
                libc::MSG_WAITFORONE,
                std::ptr::null_mut(),
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
                    Ok((0, self.unreported_drops()))
                }
                _ => Err(e),
            };
        }
        let n = n as usize;
        out.received_ns = kplane_model::unix_time_ns();
        let mut dropped = 0u64;
        for i in 0..n {
            let h = &self.hdrs[i];
            let len = h.msg_len as usize;
            let truncated = h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0 || len > self.max_datagram;
            let keep = len.min(self.max_datagram);
            let start = out.data.len();
            out.data
                .extend_from_slice(&self.buf[i * stride..i * stride + keep]);
            let src =
                socket_addr(&self.slots[i].addr).unwrap_or(SocketAddr::from(([0, 0, 0, 0], 0)));
            out.datagrams.push((start, keep, src, truncated));
            if let Some(total) = overflow_count(&h.msg_hdr) {
                dropped += self.advance(total);
            }
        }
        Ok((n, dropped))
    }

    /// Drops the kernel counted that no received datagram has reported: a datagram carries the
    /// count as it was when it was queued, so the drops after the last one queued — a burst's
    /// tail, with nothing after it — would wait for the next datagram. Read while idle.
    fn unreported_drops(&mut self) -> u64 {
        socket_drops(&self.socket).map_or(0, |total| self.advance(total))
    }

    /// Moves the cumulative drop count to `total` and returns the new drops. A datagram queued
    /// before an idle read may still carry an older count: it is behind, not 4 billion ahead.
    fn advance(&mut self, total: u32) -> u64 {
        let new = total.wrapping_sub(self.overflow);
        if new == 0 || new > u32::MAX / 2 {
            return 0;
        }
        self.overflow = total;
        u64::from(new)
    }
}

/// `SO_MEMINFO` (`asm-generic/socket.h`; not exported by the libc crate).
const SO_MEMINFO: libc::c_int = 55;

/// The socket's cumulative drop count, the counter `SO_RXQ_OVFL` reports with each datagram.
fn socket_drops(socket: &Socket) -> Option<u32> {
    // SK_MEMINFO_VARS: the kernel fills at most this many; a shorter answer lacks the drops.
    let mut info = [0u32; 9];
    let mut len = size_of_val(&info) as libc::socklen_t;
    // SAFETY: getsockopt with a valid fd and a buffer of `len` bytes the kernel writes into.
    let rc = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_MEMINFO,
            info.as_mut_ptr().cast(),
            &mut len,
        )
    };
    let drops = libc::SK_MEMINFO_DROPS as usize;
    (rc == 0 && len as usize > drops * size_of::<u32>()).then(|| info[drops])
}

/// The source address the kernel wrote into a `sockaddr_storage`.
fn socket_addr(ss: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match i32::from(ss.ss_family) {
        libc::AF_INET => {
            // SAFETY: ss_family says the storage holds a sockaddr_in, which it is large and
            // aligned enough for.
            let a = unsafe { &*(ss as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            let ip = Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr));
            Some(SocketAddr::from((ip, u16::from_be(a.sin_port))))
        }
        libc::AF_INET6 => {
            // SAFETY: as above, for sockaddr_in6.
            let a = unsafe { &*(ss as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
            let ip = Ipv6Addr::from(a.sin6_addr.s6_addr);
            Some(SocketAddr::from((ip, u16::from_be(a.sin6_port))))
        }
        _ => None,
    }
}

/// The SO_RXQ_OVFL control message's cumulative drop counter, if present.
fn overflow_count(msg: &libc::msghdr) -> Option<u32> {
    // SAFETY: walking the control buffer the kernel filled, with the libc CMSG macros.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SO_RXQ_OVFL {
                let data = libc::CMSG_DATA(c).cast::<u32>();
                return Some(data.read_unaligned());
            }
            c = libc::CMSG_NXTHDR(msg, c);
        }
    }
    None
}

/// Runs a receive thread until `stop`: batches go to `tx`; when the pipeline's queue is full
/// the batch is dropped *and counted* and the socket keeps being read. A batch short of
/// `recv-batch` is followed by a `coalesce` pause (the socket buffer holds what arrives).
pub fn receive_loop(
    mut rx: BatchReceiver,
    coalesce: Duration,
    tx: SyncSender<RecvBatch>,
    stop: Arc<AtomicBool>,
    metrics: CollectorMetrics,
) {
    while !stop.load(Ordering::Acquire) {
        let mut batch = RecvBatch::default();
        match rx.recv(&mut batch) {
            Ok((n, kernel_dropped)) => {
                metrics.drop("socket", "rcvbuf_overflow", kernel_dropped);
                if n == 0 {
                    continue;
                }
                match tx.try_send(batch) {
                    Ok(()) => {}
                    Err(TrySendError::Full(_)) => metrics.drop("queue", "full", n as u64),
                    Err(TrySendError::Disconnected(_)) => break,
                }
                if n < rx.hdrs.len() && !coalesce.is_zero() {
                    std::thread::sleep(coalesce);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                tracing::error!(error = %e, "recvmmsg failed; receive thread stops");
                metrics.drop("socket", "error", 1);
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A burst into a full receive buffer: every datagram after the buffer filled is dropped,
    /// and no datagram queued later reports them. Each is still counted once the socket is idle.
    #[test]
    fn drops_at_a_bursts_tail_are_counted_once_the_socket_is_idle() {
        let socket = bind("127.0.0.1:0".parse().unwrap(), 4096).unwrap();
        let to = socket.local_addr().unwrap().as_socket().unwrap();
        let mut rx = BatchReceiver::new(socket, 64, 2048);
        let sender = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        const SENT: u64 = 500;
        for i in 0..SENT {
            sender.send_to(&[i as u8; 200], to).unwrap();
        }
        let (mut received, mut reported) = (0u64, 0u64);
        // The receive that finds the socket idle returns the drops no datagram reported.
        let unreported = loop {
            let mut batch = RecvBatch::default();
            match rx.recv(&mut batch).unwrap() {
                (0, unreported) => break unreported,
                (n, dropped) => {
                    received += n as u64;
                    reported += dropped;
                }
            }
        };
        assert!(
            received > 0 && received < SENT,
            "the buffer held some: {received}"
        );
        assert!(unreported > 0, "the tail's drops reach no datagram");
        assert_eq!(received + reported + unreported, SENT);
        assert_eq!(
            rx.recv(&mut RecvBatch::default()).unwrap(),
            (0, 0),
            "counted once"
        );
        // A datagram queued before the idle read carries an older count: nothing new.
        sender.send_to(&[0; 200], to).unwrap();
        let mut batch = RecvBatch::default();
        assert_eq!(rx.recv(&mut batch).unwrap(), (1, 0));
    }
}
