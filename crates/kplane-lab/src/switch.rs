//! The lab's switch processes: BMv2 `simple_switch_grpc`, started without a pipeline (the
//! P4Runtime driver pushes it), its P4Runtime server on loopback.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::{LabError, Result};

/// A running switch; killed when dropped.
#[derive(Debug)]
pub struct Switch {
    pub id: u32,
    /// Its P4Runtime server.
    pub grpc: SocketAddr,
    pub log: PathBuf,
    child: Child,
}

/// Whether BMv2 and root are here; why not, otherwise.
pub fn available() -> Result<()> {
    // SAFETY: geteuid(2) has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(LabError::Missing(
            "the lab needs root (network namespaces, veths)".into(),
        ));
    }
    Command::new("simple_switch_grpc")
        .arg("--help")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|_| {
            LabError::Missing(
                "simple_switch_grpc is not on PATH (../shared/p4-toolchain/install.sh; PATH=/opt/p4/bin:$PATH)".into(),
            )
        })?;
    Ok(())
}

/// A free TCP port on loopback (taken by the switch right after).
fn free_port() -> Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(LabError::io("a free port"))?;
    Ok(l.local_addr().map_err(LabError::io("a free port"))?.port())
}

impl Switch {
    /// Starts switch `id` (also its device id) on `ports` (`(number, interface)`), logging
    /// into `log_dir`; returns once its P4Runtime server accepts connections.
    pub fn start(id: u32, ports: &[(u32, String)], log_dir: &Path) -> Result<Self> {
        let grpc: SocketAddr = format!("127.0.0.1:{}", free_port()?)
            .parse()
            .map_err(|_| LabError::Missing("loopback".into()))?;
        let log = log_dir.join(format!("switch-{id}.log"));
        let file = std::fs::File::create(&log)
            .map_err(LabError::io(format!("creating {}", log.display())))?;
        let mut cmd = Command::new("simple_switch_grpc");
        cmd.args(["--device-id", &id.to_string(), "--no-p4"])
            .args(["--thrift-port", &free_port()?.to_string()]);
        for (n, iface) in ports {
            cmd.args(["-i", &format!("{n}@{iface}")]);
        }
        cmd.args(["--", "--grpc-server-addr", &grpc.to_string()])
            .stdin(Stdio::null())
            .stdout(file.try_clone().map_err(LabError::io("switch log"))?)
            .stderr(file);
        let child = cmd
            .spawn()
            .map_err(LabError::io("starting simple_switch_grpc"))?;
        let mut sw = Self {
            id,
            grpc,
            log,
            child,
        };
        let end = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(grpc).is_err() {
            if let Ok(Some(status)) = sw.child.try_wait() {
                return Err(LabError::Command {
                    command: format!("simple_switch_grpc (switch {id})"),
                    message: format!("exited with {status}; see {}", sw.log.display()),
                });
            }
            if Instant::now() > end {
                return Err(LabError::Command {
                    command: format!("simple_switch_grpc (switch {id})"),
                    message: format!("never listened on {grpc}; see {}", sw.log.display()),
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(sw)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Switch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Kills every `simple_switch_grpc` whose ports are this lab's interfaces (`N@<prefix><digit>…`),
/// found in /proc: a lab whose process crashed leaves them behind. How many.
pub fn kill_all(prefix: &str) -> usize {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let mut killed = 0;
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        let is_switch = args
            .first()
            .is_some_and(|a| a.ends_with(b"simple_switch_grpc"));
        let ours = args.iter().any(|a| {
            std::str::from_utf8(a).is_ok_and(|a| {
                a.split_once('@').is_some_and(|(_, iface)| {
                    iface
                        .strip_prefix(prefix)
                        .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()))
                })
            })
        });
        // SAFETY: kill(2) on a pid read from /proc.
        if is_switch && ours && unsafe { libc::kill(pid, libc::SIGKILL) } == 0 {
            killed += 1;
        }
    }
    killed
}
