//! BMv2 `simple_switch_grpc` for tests: a switch process on free ports, network namespaces
//! with veth pairs, raw Ethernet frames sent and received inside a namespace, and the Thrift
//! CLI for provisioning registers. Needs root and the P4 toolchain
//! (`../shared/p4-toolchain/install.sh`).

use std::io::Write;
use std::os::fd::AsRawFd;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kplane_probe::packet_socket::PacketSocket;

use crate::{ChildGuard, free_port};

/// Whether BMv2 can run here. Without it a test returns early (skips), unless
/// `KPLANE_REQUIRE_P4=1` (CI), where a missing toolchain fails it.
pub fn available() -> bool {
    let found = Command::new("simple_switch_grpc")
        .arg("--help")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    let root = unsafe { libc::geteuid() } == 0;
    if !(found && root) {
        assert!(
            std::env::var("KPLANE_REQUIRE_P4").as_deref() != Ok("1"),
            "KPLANE_REQUIRE_P4=1 but simple_switch_grpc is missing or we are not root"
        );
        eprintln!("BMv2 or root missing: skipping (../shared/p4-toolchain/install.sh)");
    }
    found && root
}

fn run(cmd: &str, args: &[&str]) {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .expect("run a command");
    assert!(
        out.status.success(),
        "{cmd} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Brings up an interface here for a switch port: checksum offload off, so BMv2 sees and
/// sends finished frames, and no IPv6 chatter (router solicitations).
fn port_up(name: &str) {
    run("ip", &["link", "set", name, "up"]);
    let _ = Command::new("ethtool")
        .args(["-K", name, "tx", "off", "rx", "off"])
        .output();
    let _ = Command::new("sysctl")
        .args(["-qw", &format!("net.ipv6.conf.{name}.disable_ipv6=1")])
        .output();
}

/// A network namespace holding the far ends of veth pairs whose near ends stay in ours;
/// deleted (with its veths) when dropped.
#[derive(Debug)]
pub struct Netns {
    pub name: String,
}

impl Netns {
    /// A new namespace named after the test process and `tag` (a few characters).
    pub fn new(tag: &str) -> Self {
        let name = format!("kp{}{tag}", std::process::id());
        let _ = Command::new("ip").args(["netns", "del", &name]).output();
        run("ip", &["netns", "add", &name]);
        run("ip", &["-n", &name, "link", "set", "lo", "up"]);
        Self { name }
    }

    /// A veth pair: `near` stays here (for the switch), `far` goes into the namespace.
    /// Both are up; checksum offload is off so BMv2 sees and sends finished frames.
    pub fn veth(&self, near: &str, far: &str) {
        let _ = Command::new("ip").args(["link", "del", near]).output();
        run(
            "ip",
            &[
                "link", "add", near, "type", "veth", "peer", "name", far, "netns", &self.name,
            ],
        );
        port_up(near);
        run("ip", &["-n", &self.name, "link", "set", far, "up"]);
    }

    /// Runs `ip ARGS` inside the namespace.
    pub fn ip(&self, args: &[&str]) {
        let mut all = vec!["-n", self.name.as_str()];
        all.extend_from_slice(args);
        run("ip", &all);
    }

    /// Runs `f` on a thread that has entered the namespace (sockets it opens live there).
    pub fn enter<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        let path = format!("/var/run/netns/{}", self.name);
        std::thread::spawn(move || {
            let fd = std::fs::File::open(&path).expect("open the namespace");
            let rc = unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(rc, 0, "setns {path}: {}", std::io::Error::last_os_error());
            f()
        })
        .join()
        .expect("namespace thread")
    }

    /// [`Netns::enter`] through a handle that does not delete the namespace when dropped
    /// (for a second thread working in it).
    pub fn enter_keep<T: Send + 'static>(self, f: impl FnOnce() -> T + Send + 'static) -> T {
        let this = std::mem::ManuallyDrop::new(self);
        this.enter(f)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}

/// A veth pair with both ends here (switch to switch, or a switch to a process on this
/// host), each end brought up like a switch port; deleted when dropped.
#[derive(Debug)]
pub struct Veth {
    pub a: String,
    pub b: String,
}

impl Veth {
    pub fn pair(a: &str, b: &str) -> Self {
        let _ = Command::new("ip").args(["link", "del", a]).output();
        run("ip", &["link", "add", a, "type", "veth", "peer", "name", b]);
        port_up(a);
        port_up(b);
        Self {
            a: a.to_string(),
            b: b.to_string(),
        }
    }

    /// Everything sent into end `from` (a or b) is lost from now on: a one-way link failure
    /// that leaves both interfaces up (BMv2 stalls on a port whose interface goes down).
    pub fn lose(&self, from: &str) {
        assert!(
            from == self.a || from == self.b,
            "{from} is not an end of this pair"
        );
        run(
            "tc",
            &["qdisc", "add", "dev", from, "root", "pfifo", "limit", "0"],
        );
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["link", "del", &self.a]).output();
    }
}

/// A raw Ethernet socket bound to one interface (opened inside a namespace with
/// [`Netns::enter`]); panics on errors, as tests want.
#[derive(Debug)]
pub struct RawPort(PacketSocket);

impl RawPort {
    pub fn open(ifname: &str) -> Self {
        Self(
            PacketSocket::open(ifname, Duration::from_millis(100))
                .unwrap_or_else(|e| panic!("AF_PACKET socket on {ifname}: {e}")),
        )
    }

    pub fn send(&self, frame: &[u8]) {
        self.0.send(frame).expect("send");
    }

    /// Frames received within `wait` for which `keep` holds.
    pub fn recv_for(&self, wait: Duration, keep: impl Fn(&[u8]) -> bool) -> Vec<Vec<u8>> {
        self.recv_up_to(usize::MAX, wait, keep)
    }

    /// Like [`recv_for`](Self::recv_for), but returns as soon as `count` frames are kept.
    pub fn recv_up_to(
        &self,
        count: usize,
        wait: Duration,
        keep: impl Fn(&[u8]) -> bool,
    ) -> Vec<Vec<u8>> {
        let end = Instant::now() + wait;
        let mut out = Vec::new();
        let mut buf = vec![0u8; 9216];
        while Instant::now() < end && out.len() < count {
            if let Ok(Some(n)) = self.0.recv(&mut buf)
                && keep(&buf[..n])
            {
                out.push(buf[..n].to_vec());
            }
        }
        out
    }
}

/// `simple_switch_grpc` on `ports`, its P4Runtime server on `grpc`; returns once it listens.
fn spawn(device_id: u64, grpc: &str, thrift_port: u16, ports: &[(u32, String)]) -> ChildGuard {
    let mut cmd = Command::new("simple_switch_grpc");
    cmd.args(["--device-id", &device_id.to_string(), "--no-p4"])
        .args(["--thrift-port", &thrift_port.to_string()]);
    for (n, ifname) in ports {
        cmd.args(["-i", &format!("{n}@{ifname}")]);
    }
    // KPLANE_BMV2_LOG=debug: the switch's packet trace in its log file (named on stderr).
    if let Ok(level) = std::env::var("KPLANE_BMV2_LOG") {
        cmd.args(["--log-console", "-L", &level]);
    }
    let log = std::env::temp_dir().join(format!(
        "bmv2-{}.log",
        grpc.rsplit(':').next().unwrap_or("switch")
    ));
    eprintln!("simple_switch_grpc log: {}", log.display());
    // Appended: a restarted switch's log follows its first life's.
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .expect("switch log");
    cmd.args(["--", "--grpc-server-addr", grpc])
        .stdout(log.try_clone().expect("log"))
        .stderr(log);
    let child = ChildGuard::new(cmd.spawn().expect("start simple_switch_grpc"));
    let end = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(grpc).is_err() {
        assert!(
            Instant::now() < end,
            "simple_switch_grpc never listened on {grpc}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    child
}

/// A running `simple_switch_grpc` without a pipeline (`--no-p4`): the P4Runtime client
/// pushes it. Killed when dropped.
#[derive(Debug)]
pub struct Bmv2 {
    /// `127.0.0.1:port` of its P4Runtime server.
    pub grpc: String,
    pub thrift_port: u16,
    pub device_id: u64,
    ports: Vec<(u32, String)>,
    child: ChildGuard,
}

impl Bmv2 {
    /// Starts a switch with `ports` (`(port number, interface)`); waits until its gRPC
    /// server accepts connections.
    pub fn start(device_id: u64, ports: &[(u32, &str)]) -> Self {
        let grpc = format!("127.0.0.1:{}", free_port());
        let thrift_port = free_port();
        let ports: Vec<(u32, String)> = ports.iter().map(|(n, i)| (*n, i.to_string())).collect();
        let child = spawn(device_id, &grpc, thrift_port, &ports);
        Self {
            grpc,
            thrift_port,
            device_id,
            ports,
            child,
        }
    }

    /// Kills the switch and starts it again on the same ports and addresses, without a
    /// pipeline: a switch that rebooted, as its controller sees it.
    pub fn restart(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let end = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(&self.grpc).is_ok() {
            assert!(
                Instant::now() < end,
                "the old switch still listens on {}",
                self.grpc
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        self.child = spawn(self.device_id, &self.grpc, self.thrift_port, &self.ports);
    }

    /// Runs `simple_switch_CLI` commands (registers, mirroring); its output.
    pub fn cli(&self, commands: &str) -> String {
        let (ok, text) = self.try_cli(commands);
        assert!(ok, "simple_switch_CLI: {text}");
        text
    }

    /// Runs `simple_switch_CLI` commands: whether they all succeeded (a switch running no
    /// pipeline yet knows no table), and the output with any error.
    pub fn try_cli(&self, commands: &str) -> (bool, String) {
        let cli = String::from_utf8(
            Command::new("sh")
                .args(["-c", "command -v simple_switch_CLI"])
                .output()
                .expect("which")
                .stdout,
        )
        .expect("path");
        // Debian's python3 has the thrift module; a pyenv python first in PATH may not.
        let mut child = Command::new("/usr/bin/python3")
            .arg(cli.trim())
            .args(["--thrift-port", &self.thrift_port.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("simple_switch_CLI");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(commands.as_bytes())
            .expect("write commands");
        let out = child.wait_with_output().expect("simple_switch_CLI output");
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let ok = out.status.success() && !text.contains("Error");
        (ok, text + &String::from_utf8_lossy(&out.stderr))
    }

    /// One cell of a register (`Control.register`), read through `simple_switch_CLI`.
    pub fn register(&self, name: &str, index: u32) -> u64 {
        let out = self.cli(&format!("register_read {name} {index}\n"));
        let short = name.rsplit('.').next().unwrap_or(name);
        out.lines()
            .find_map(|l| l.split(&format!("{short}[{index}]=")).nth(1))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name}[{index}] in {out}"))
    }
}
