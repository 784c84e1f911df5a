//! The few `bpf(2)` commands the AF_XDP input needs (map create/update, program load, XDP
//! link), called directly so the collector needs no C toolchain or libbpf at build or run time.

use std::ffi::CString;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

use super::program::Insn;

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_LINK_CREATE: libc::c_long = 28;

const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
/// `enum bpf_attach_type`'s BPF_XDP.
const BPF_XDP: u32 = 37;

/// `XDP_FLAGS_SKB_MODE` / `XDP_FLAGS_DRV_MODE` (linux/if_link.h).
pub const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
pub const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

/// `union bpf_attr` is 144+ bytes; every command reads its own prefix and requires the rest
/// to be zero, so each call fills a zeroed buffer at the documented offsets.
#[repr(C, align(8))]
struct Attr([u8; 128]);

impl Attr {
    fn new() -> Self {
        Self([0; 128])
    }
    fn u32(&mut self, off: usize, v: u32) -> &mut Self {
        self.0[off..off + 4].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn u64(&mut self, off: usize, v: u64) -> &mut Self {
        self.0[off..off + 8].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn name(&mut self, off: usize, name: &str) -> &mut Self {
        let n = name.len().min(15);
        self.0[off..off + n].copy_from_slice(&name.as_bytes()[..n]);
        self
    }
}

fn bpf(cmd: libc::c_long, attr: &mut Attr) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a zero-initialised bpf_attr of the size passed; pointers written into
    // it (instructions, license, log, key/value) outlive the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr.0.as_mut_ptr(),
            std::mem::size_of::<Attr>() as libc::c_uint,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

fn owned(fd: libc::c_long) -> OwnedFd {
    // SAFETY: the kernel just returned this descriptor and nothing else owns it.
    unsafe { OwnedFd::from_raw_fd(fd as RawFd) }
}

/// An XSKMAP of `entries` slots (one per receive queue).
pub fn create_xskmap(entries: u32) -> io::Result<OwnedFd> {
    let mut a = Attr::new();
    a.u32(0, BPF_MAP_TYPE_XSKMAP)
        .u32(4, 4)
        .u32(8, 4)
        .u32(12, entries)
        .name(28, "kplane_xsks");
    bpf(BPF_MAP_CREATE, &mut a).map(owned)
}

/// Puts the AF_XDP socket `xsk` in slot `queue` of the XSKMAP.
pub fn xskmap_set(map: RawFd, queue: u32, xsk: RawFd) -> io::Result<()> {
    let (key, value) = (queue, xsk as u32);
    let mut a = Attr::new();
    a.u32(0, map as u32)
        .u64(8, &key as *const u32 as u64)
        .u64(16, &value as *const u32 as u64);
    bpf(BPF_MAP_UPDATE_ELEM, &mut a).map(|_| ())
}

/// Loads an XDP program; on a verifier rejection the error carries the verifier's log.
pub fn load_xdp(insns: &[Insn]) -> io::Result<OwnedFd> {
    let license = CString::new("Apache-2.0").expect("no NUL");
    let mut log = vec![0u8; 64 * 1024];
    let mut a = Attr::new();
    a.u32(0, BPF_PROG_TYPE_XDP)
        .u32(4, insns.len() as u32)
        .u64(8, insns.as_ptr() as u64)
        .u64(16, license.as_ptr() as u64)
        .u32(24, 1)
        .u32(28, log.len() as u32)
        .u64(32, log.as_mut_ptr() as u64)
        .name(48, "kplane_steer")
        .u32(68, BPF_XDP);
    bpf(BPF_PROG_LOAD, &mut a).map(owned).map_err(|e| {
        let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
        let text = String::from_utf8_lossy(&log[..end]);
        io::Error::new(e.kind(), format!("{e}; verifier log: {}", text.trim()))
    })
}

/// Attaches `prog` to `ifindex` as a BPF link: the program stays attached exactly as long as
/// the returned descriptor is open, so a collector that exits (or crashes) leaves nothing
/// behind on the interface.
pub fn attach_xdp(prog: RawFd, ifindex: u32, flags: u32) -> io::Result<OwnedFd> {
    let mut a = Attr::new();
    a.u32(0, prog as u32)
        .u32(4, ifindex)
        .u32(8, BPF_XDP)
        .u32(12, flags);
    bpf(BPF_LINK_CREATE, &mut a).map(owned)
}
