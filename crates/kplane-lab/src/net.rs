//! Network namespaces and veth pairs, named after the lab (its prefix) so that `kplane lab
//! down` finds everything of a lab by name, even after a crash.

use std::os::fd::AsRawFd;
use std::process::Command;

use crate::{LabError, Result};

/// Runs a command; its standard output, or its standard error as the error.
pub fn run(cmd: &str, args: &[&str]) -> Result<String> {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .map_err(LabError::io(format!("running {cmd}")))?;
    if !out.status.success() {
        return Err(LabError::Command {
            command: format!("{cmd} {}", args.join(" ")),
            message: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).to_string())
}

/// `ip ARGS`, inside `netns` when given.
pub fn ip(netns: Option<&str>, args: &[&str]) -> Result<String> {
    let mut all: Vec<&str> = netns.map(|n| vec!["-n", n]).unwrap_or_default();
    all.extend_from_slice(args);
    run("ip", &all)
}

/// Brings an interface up as a switch port or a host's: checksum offload off (BMv2 sees and
/// sends finished frames) and no IPv6 chatter.
pub fn port_up(netns: Option<&str>, name: &str) -> Result<()> {
    ip(netns, &["link", "set", name, "up"])?;
    let in_ns = |cmd: &[&str]| match netns {
        Some(n) => run("ip", &[&["netns", "exec", n][..], cmd].concat()),
        None => run(cmd[0], &cmd[1..]),
    };
    // Best effort: a kernel without IPv6, or a veth without these offloads, works as well.
    let _ = in_ns(&["ethtool", "-K", name, "tx", "off", "rx", "off"]);
    let _ = in_ns(&[
        "sysctl",
        "-qw",
        &format!("net.ipv6.conf.{name}.disable_ipv6=1"),
    ]);
    Ok(())
}

/// A new namespace (an old one of the same name is removed first), loopback up.
pub fn add_netns(name: &str) -> Result<()> {
    let _ = run("ip", &["netns", "del", name]);
    run("ip", &["netns", "add", name])?;
    ip(Some(name), &["link", "set", "lo", "up"])?;
    Ok(())
}

/// A veth pair: `a` here, `b` here or inside `b_netns`; both up as ports.
pub fn veth(a: &str, b: &str, b_netns: Option<&str>) -> Result<()> {
    let _ = run("ip", &["link", "del", a]);
    let mut args = vec!["link", "add", a, "type", "veth", "peer", "name", b];
    if let Some(ns) = b_netns {
        args.extend_from_slice(&["netns", ns]);
    }
    run("ip", &args)?;
    port_up(None, a)?;
    port_up(b_netns, b)
}

/// An interface's MAC address (`aa:bb:cc:dd:ee:ff`).
pub fn mac(netns: Option<&str>, iface: &str) -> Result<String> {
    let text = ip(netns, &["-o", "link", "show", iface])?;
    text.split_whitespace()
        .skip_while(|w| *w != "link/ether")
        .nth(1)
        .map(str::to_string)
        .ok_or_else(|| LabError::Command {
            command: format!("ip -o link show {iface}"),
            message: format!("no MAC address in {text:?}"),
        })
}

/// Runs `f` on a thread inside namespace `name` (sockets it opens live there and keep
/// working from any thread afterwards).
pub fn in_netns<T: Send + 'static>(
    name: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T> {
    let path = format!("/var/run/netns/{name}");
    let file = std::fs::File::open(&path).map_err(LabError::io(format!("opening {path}")))?;
    std::thread::spawn(move || {
        // SAFETY: setns(2) on an open namespace file; it changes only this thread.
        let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        if rc != 0 {
            return Err(LabError::io(format!("entering namespace {path}"))(
                std::io::Error::last_os_error(),
            ));
        }
        Ok(f())
    })
    .join()
    .map_err(|_| LabError::Missing("a namespace thread panicked".into()))?
}

/// What a clean-up removed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Cleaned {
    pub processes: usize,
    pub namespaces: usize,
    pub links: usize,
}

/// Removes everything of the lab named `prefix`: its switch processes (their interfaces are
/// named after it), its namespaces and the interfaces left in this one.
pub fn clean(prefix: &str) -> Result<Cleaned> {
    let mut done = Cleaned {
        processes: crate::switch::kill_all(prefix),
        ..Cleaned::default()
    };
    for line in run("ip", &["netns", "list"])?.lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        if name.starts_with(&format!("{prefix}-")) && run("ip", &["netns", "del", name]).is_ok() {
            done.namespaces += 1;
        }
    }
    for line in run("ip", &["-o", "link", "show"])?.lines() {
        // "12: kpl1p3@kpl5p1: <...>"
        let name = line
            .split(':')
            .nth(1)
            .map(|n| n.trim().split('@').next().unwrap_or(""))
            .unwrap_or("");
        if is_ours(prefix, name) && run("ip", &["link", "del", name]).is_ok() {
            done.links += 1;
        }
    }
    Ok(done)
}

/// Whether an interface name is one of this lab's: the prefix, then a switch number.
fn is_ours(prefix: &str, name: &str) -> bool {
    name.strip_prefix(prefix)
        .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lab_owns_only_interfaces_named_after_it() {
        assert!(is_ours("kpl", "kpl1p3"));
        assert!(is_ours("kpl", "kpl12c"));
        assert!(!is_ours("kpl", "kplt1p3"), "another lab's");
        assert!(!is_ours("kpl", "eth0"));
        assert!(!is_ours("kpl", "kpl"));
    }
}
