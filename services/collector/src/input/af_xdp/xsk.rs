//! One AF_XDP socket bound to one receive queue: its UMEM (frames the kernel writes
//! datagrams into), the fill ring (frames handed to the kernel) and the RX ring (frames
//! holding a received packet). Single-producer/single-consumer rings shared with the kernel
//! through `mmap`, synchronised with acquire/release on their producer and consumer indices.

use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

/// `struct xdp_desc`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct Desc {
    addr: u64,
    len: u32,
    options: u32,
}

/// A mapped region, unmapped on drop.
struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

impl Mapping {
    fn new(fd: RawFd, len: usize, offset: libc::off_t) -> io::Result<Self> {
        let (prot, flags) = (libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED);
        let (flags, fd) = if fd < 0 {
            (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1)
        } else {
            (flags | libc::MAP_POPULATE, fd)
        };
        // SAFETY: a fresh mapping; the kernel picks the address.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, flags, fd, offset) };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Self {
            ptr: NonNull::new(p.cast()).ok_or_else(|| io::Error::other("mmap returned null"))?,
            len,
        })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what `new` mapped.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// A ring's shared indices and entries.
struct Ring {
    _map: Mapping,
    producer: *const AtomicU32,
    consumer: *const AtomicU32,
    flags: *const AtomicU32,
    entries: *mut u8,
    mask: u32,
}

impl Ring {
    fn map(
        fd: RawFd,
        off: &libc::xdp_ring_offset,
        size: u32,
        entry: usize,
        pgoff: u64,
    ) -> io::Result<Self> {
        let map = Mapping::new(
            fd,
            off.desc as usize + size as usize * entry,
            pgoff as libc::off_t,
        )?;
        let base = map.ptr.as_ptr();
        // SAFETY: the offsets come from XDP_MMAP_OFFSETS and lie inside the mapping.
        unsafe {
            Ok(Self {
                producer: base.add(off.producer as usize).cast(),
                consumer: base.add(off.consumer as usize).cast(),
                flags: base.add(off.flags as usize).cast(),
                entries: base.add(off.desc as usize),
                mask: size - 1,
                _map: map,
            })
        }
    }
    fn producer(&self) -> &AtomicU32 {
        // SAFETY: points into the live mapping, u32-aligned, shared with the kernel.
        unsafe { &*self.producer }
    }
    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as above.
        unsafe { &*self.consumer }
    }
    fn needs_wakeup(&self) -> bool {
        // SAFETY: as above.
        unsafe { &*self.flags }.load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0
    }
}

/// How the socket was bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BindMode {
    /// The kernel copies each frame into the UMEM (any driver).
    Copy,
    /// The driver writes frames straight into the UMEM.
    ZeroCopy,
}

impl BindMode {
    /// The name in logs and on `kplane_collector_af_xdp_sockets{mode}`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Copy => "copy",
            Self::ZeroCopy => "zero-copy",
        }
    }
}

/// Frame size in the UMEM; a frame holds a packet of up to `FRAME - XDP_PACKET_HEADROOM`.
pub const FRAME: usize = 4096;
/// Room the kernel keeps in front of every packet in a frame.
pub const HEADROOM: usize = 256;

/// An AF_XDP socket receiving one queue.
pub struct Xsk {
    fd: OwnedFd,
    umem: Mapping,
    fill: Ring,
    rx: Ring,
    frames: u32,
    pub mode: BindMode,
}

// SAFETY: the raw pointers point into mappings owned by this struct; one thread uses it.
unsafe impl Send for Xsk {}

impl std::fmt::Debug for Xsk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Xsk")
            .field("fd", &self.fd)
            .field("frames", &self.frames)
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

fn setsockopt<T>(fd: RawFd, name: libc::c_int, v: &T) -> io::Result<()> {
    // SAFETY: passing a plain value of its own size.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_XDP,
            name,
            (v as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn getsockopt<T>(fd: RawFd, name: libc::c_int, v: &mut T) -> io::Result<()> {
    let mut len = size_of::<T>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `v`.
    let rc = unsafe { libc::getsockopt(fd, libc::SOL_XDP, name, (v as *mut T).cast(), &mut len) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// What failed while opening a socket, for the caller's error message.
#[derive(Debug)]
pub struct OpenError {
    pub step: &'static str,
    pub source: io::Error,
}

fn step(step: &'static str) -> impl FnOnce(io::Error) -> OpenError {
    move |source| OpenError { step, source }
}

impl Xsk {
    /// Opens a socket on (`ifindex`, `queue`) with `frames` UMEM frames (a power of two),
    /// bound in `mode`.
    pub fn open(ifindex: u32, queue: u32, frames: u32, mode: BindMode) -> Result<Self, OpenError> {
        // SAFETY: plain socket creation.
        let raw = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return Err(step("socket(AF_XDP)")(io::Error::last_os_error()));
        }
        // SAFETY: a descriptor we just created.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let umem = Mapping::new(-1, frames as usize * FRAME, 0).map_err(step("UMEM mmap"))?;
        let reg = libc::xdp_umem_reg {
            addr: umem.ptr.as_ptr() as u64,
            len: umem.len as u64,
            chunk_size: FRAME as u32,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        setsockopt(raw, libc::XDP_UMEM_REG, &reg).map_err(step("XDP_UMEM_REG"))?;
        setsockopt(raw, libc::XDP_UMEM_FILL_RING, &frames).map_err(step("fill ring"))?;
        // Never used (no transmit), but the kernel wants one before binding.
        setsockopt(raw, libc::XDP_UMEM_COMPLETION_RING, &64u32).map_err(step("completion ring"))?;
        setsockopt(raw, libc::XDP_RX_RING, &frames).map_err(step("RX ring"))?;
        // SAFETY: xdp_mmap_offsets is plain data.
        let mut off: libc::xdp_mmap_offsets = unsafe { std::mem::zeroed() };
        getsockopt(raw, libc::XDP_MMAP_OFFSETS, &mut off).map_err(step("XDP_MMAP_OFFSETS"))?;
        let fill = Ring::map(
            raw,
            &off.fr,
            frames,
            size_of::<u64>(),
            libc::XDP_UMEM_PGOFF_FILL_RING,
        )
        .map_err(step("fill ring mmap"))?;
        let rx = Ring::map(
            raw,
            &off.rx,
            frames,
            size_of::<Desc>(),
            libc::XDP_PGOFF_RX_RING as u64,
        )
        .map_err(step("RX ring mmap"))?;
        let mut xsk = Self {
            fd,
            umem,
            fill,
            rx,
            frames,
            mode: BindMode::Copy,
        };
        // Every frame starts in the kernel's hands.
        for i in 0..frames {
            xsk.fill_slot(i, u64::from(i) * FRAME as u64);
        }
        xsk.fill.producer().store(frames, Ordering::Release);
        xsk.bind(ifindex, queue, mode)?;
        xsk.mode = mode;
        Ok(xsk)
    }

    fn bind(&self, ifindex: u32, queue: u32, mode: BindMode) -> Result<(), OpenError> {
        let flags = match mode {
            BindMode::Copy => libc::XDP_COPY,
            BindMode::ZeroCopy => libc::XDP_ZEROCOPY,
        };
        let addr = libc::sockaddr_xdp {
            sxdp_family: libc::AF_XDP as u16,
            sxdp_flags: flags | libc::XDP_USE_NEED_WAKEUP,
            sxdp_ifindex: ifindex,
            sxdp_queue_id: queue,
            sxdp_shared_umem_fd: 0,
        };
        // SAFETY: binding with a sockaddr_xdp of its own size.
        let rc = unsafe {
            libc::bind(
                self.fd.as_raw_fd(),
                (&addr as *const libc::sockaddr_xdp).cast(),
                size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(step("bind")(io::Error::last_os_error()))
        }
    }

    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    fn fill_slot(&mut self, index: u32, addr: u64) {
        // SAFETY: `index & mask` is inside the fill ring's entries.
        unsafe {
            self.fill
                .entries
                .cast::<u64>()
                .add((index & self.fill.mask) as usize)
                .write(addr);
        }
    }

    /// Hands every received frame to `each` (its bytes), then gives the frames back to the
    /// kernel. Returns how many there were.
    pub fn drain(&mut self, mut each: impl FnMut(&[u8])) -> usize {
        let cons = self.rx.consumer().load(Ordering::Relaxed);
        let prod = self.rx.producer().load(Ordering::Acquire);
        let n = prod.wrapping_sub(cons);
        if n == 0 {
            return 0;
        }
        let fill_prod = self.fill.producer().load(Ordering::Relaxed);
        for i in 0..n {
            let idx = cons.wrapping_add(i);
            // SAFETY: the kernel published entries cons..prod; `idx & mask` is in the ring.
            let d = unsafe {
                self.rx
                    .entries
                    .cast::<Desc>()
                    .add((idx & self.rx.mask) as usize)
                    .read()
            };
            let (addr, len) = (d.addr as usize, d.len as usize);
            if addr + len <= self.umem.len {
                // SAFETY: the frame lies inside the UMEM and the kernel is done with it until
                // it comes back through the fill ring.
                let frame = unsafe {
                    std::slice::from_raw_parts(self.umem.ptr.as_ptr().add(addr).cast_const(), len)
                };
                each(frame);
            }
            self.fill_slot(fill_prod.wrapping_add(i), d.addr & !(FRAME as u64 - 1));
        }
        self.rx.consumer().store(prod, Ordering::Release);
        self.fill
            .producer()
            .store(fill_prod.wrapping_add(n), Ordering::Release);
        // A zero-copy driver that ran out of fill frames waits to be told they are back.
        if self.fill.needs_wakeup() {
            self.wake();
        }
        n as usize
    }

    /// The wake-up call: a zero-length non-blocking receive on the socket.
    fn wake(&self) {
        // SAFETY: a zero-length receive into no buffer, on our own socket.
        unsafe {
            libc::recvfrom(
                self.fd.as_raw_fd(),
                std::ptr::null_mut(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
    }

    /// Waits up to `timeout_ms` for frames, waking the driver first if it asked to be.
    pub fn wait(&self, timeout_ms: i32) -> io::Result<()> {
        if self.fill.needs_wakeup() {
            self.wake();
        }
        let mut p = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let rc = unsafe { libc::poll(&mut p, 1, timeout_ms) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
        Ok(())
    }

    /// The kernel's counters for this socket.
    pub fn statistics(&self) -> io::Result<libc::xdp_statistics> {
        // SAFETY: xdp_statistics is plain data.
        let mut s: libc::xdp_statistics = unsafe { std::mem::zeroed() };
        getsockopt(self.fd.as_raw_fd(), libc::XDP_STATISTICS, &mut s)?;
        Ok(s)
    }
}
