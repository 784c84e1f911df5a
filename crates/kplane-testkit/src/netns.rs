//! A veth pair with one end in a fresh network namespace: a wire to send real frames over in
//! tests and benchmarks (`kplane bench ingest`). Needs root; removed on drop.

use std::io;
use std::net::{Ipv4Addr, UdpSocket};
use std::os::fd::AsRawFd;
use std::process::Command;

/// `host` stays in the current namespace (where a collector listens); `peer` lives in the
/// namespace `ns` (where senders run). Each end has an address of a /30.
#[derive(Debug)]
pub struct VethPair {
    pub ns: String,
    pub host: String,
    pub peer: String,
    pub host_ip: Ipv4Addr,
    pub peer_ip: Ipv4Addr,
}

fn ip(args: &[&str]) -> io::Result<()> {
    let out = Command::new("ip").args(args).output()?;
    if out.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

impl VethPair {
    /// Creates the pair, named after `tag` and this process so parallel tests do not meet.
    pub fn create(tag: &str) -> io::Result<Self> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "a veth pair in a network namespace needs root",
            ));
        }
        let pid = std::process::id();
        // A /30 per process inside 10.200.0.0/14.
        let base = u32::from(Ipv4Addr::new(10, 200, 0, 0)) + (pid % 65_536) * 4;
        let pair = Self {
            ns: format!("kplane-{tag}-{pid}"),
            host: format!("kp{tag}{}h", pid % 100_000),
            peer: format!("kp{tag}{}p", pid % 100_000),
            host_ip: Ipv4Addr::from(base + 1),
            peer_ip: Ipv4Addr::from(base + 2),
        };
        // Leftovers of a crashed run with the same pid.
        let _ = ip(&["netns", "del", &pair.ns]);
        let _ = ip(&["link", "del", &pair.host]);
        pair.setup()?;
        Ok(pair)
    }

    fn setup(&self) -> io::Result<()> {
        let (ns, host, peer) = (self.ns.as_str(), self.host.as_str(), self.peer.as_str());
        ip(&["netns", "add", ns])?;
        ip(&[
            "link", "add", host, "type", "veth", "peer", "name", peer, "netns", ns,
        ])?;
        ip(&["addr", "add", &format!("{}/30", self.host_ip), "dev", host])?;
        ip(&["link", "set", host, "up"])?;
        ip(&[
            "-n",
            ns,
            "addr",
            "add",
            &format!("{}/30", self.peer_ip),
            "dev",
            peer,
        ])?;
        ip(&["-n", ns, "link", "set", peer, "up"])?;
        ip(&["-n", ns, "link", "set", "lo", "up"])?;
        // A permanent neighbour entry: no datagram waits for (or is dropped behind) ARP.
        let mac = std::fs::read_to_string(format!("/sys/class/net/{host}/address"))?;
        ip(&[
            "-n",
            ns,
            "neigh",
            "replace",
            &self.host_ip.to_string(),
            "lladdr",
            mac.trim(),
            "dev",
            peer,
            "nud",
            "permanent",
        ])
    }

    /// A UDP socket bound to the peer's address inside the namespace.
    pub fn peer_socket(&self) -> io::Result<UdpSocket> {
        let (path, addr) = (format!("/var/run/netns/{}", self.ns), self.peer_ip);
        std::thread::spawn(move || -> io::Result<UdpSocket> {
            let ns = std::fs::File::open(&path)?;
            // SAFETY: moves only this short-lived thread into the namespace; the socket it
            // creates stays in that namespace wherever it is used afterwards.
            if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                return Err(io::Error::last_os_error());
            }
            UdpSocket::bind((addr, 0))
        })
        .join()
        .map_err(|_| io::Error::other("the namespace thread panicked"))?
    }
}

impl Drop for VethPair {
    fn drop(&mut self) {
        // Deleting the namespace deletes the peer, and with it the host end.
        let _ = ip(&["netns", "del", &self.ns]);
        let _ = ip(&["link", "del", &self.host]);
    }
}
