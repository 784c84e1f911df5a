//! A `kplane up` or `kplane lab up` child process and how to reach it: what the benchmarks and
//! evaluations that run the whole system (`kplane bench loop`, `kplane eval lab`) start and
//! read through its real entry points.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};

/// A running `kplane up` / `kplane lab up`; stopped as Ctrl-C would when dropped.
#[derive(Debug)]
pub struct Up {
    child: std::process::Child,
    pub api: SocketAddr,
    /// The emulator's control channel (none in the lab).
    pub control: Option<SocketAddr>,
    token: String,
    /// Its `--data-dir`.
    pub data: PathBuf,
}

impl Up {
    /// Starts `kplane <args>` (with the environment variables `env`) with its API on a free
    /// loopback port and its data in `data` (emptied first), and waits until it printed its console URL and is up (the emulator's
    /// line names its control channel; the lab's says its switches are provisioned).
    pub fn spawn(args: &[String], env: &[(&str, &str)], data: PathBuf) -> anyhow::Result<Self> {
        let api: SocketAddr = {
            let l = std::net::TcpListener::bind("127.0.0.1:0")?;
            l.local_addr()?
        };
        let _ = std::fs::remove_dir_all(&data);
        let mut child = Command::new(std::env::current_exe()?)
            .args(args)
            .args(["--api", &api.to_string()])
            .arg("--data-dir")
            .arg(&data)
            // The measurements poll the store several times a second with the one token they
            // have: above the default per-token query rate meant for people.
            .env("KPLANE__INTENT_API__QUERY_RATE", "100000")
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("cannot start kplane up / kplane lab up")?;
        let stdout = child.stdout.take().context("the child's stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let (mut token, mut control, mut ready) = (None, None, false);
        for line in lines.by_ref().map_while(Result::ok) {
            if let Some(t) = line.split("#token=").nth(1) {
                token = Some(t.trim().to_string());
            }
            if let Some(c) = line.split("control channel http://").nth(1) {
                control = c.split(')').next().and_then(|c| c.parse().ok());
            }
            ready |= control.is_some() || line.contains("provisioned");
            if token.is_some() && ready {
                break;
            }
        }
        // The rest of what it prints is read (and dropped) so that it never blocks on a pipe.
        std::thread::spawn(move || lines.map_while(Result::ok).for_each(drop));
        let Some(token) = token.filter(|_| ready) else {
            let _ = child.kill();
            bail!("the child did not print its console URL and come up");
        };
        Ok(Self {
            child,
            api,
            control,
            token,
            data,
        })
    }

    /// An HTTP call to `addr` (the API or the control channel) with the admin token; the
    /// JSON answer of a 2xx.
    pub fn call(
        &self,
        addr: SocketAddr,
        method: &str,
        path: &str,
        body: &Value,
    ) -> anyhow::Result<Value> {
        let auth = format!("Bearer {}", self.token);
        let body = if body.is_null() {
            String::new()
        } else {
            body.to_string()
        };
        let r = kplane_runtime::probe::request(
            addr,
            method,
            path,
            &[("authorization", &auth)],
            &body,
            Duration::from_secs(30),
        )
        .with_context(|| format!("{method} {path}"))?;
        if r.status >= 300 {
            bail!("{method} {path}: {} {}", r.status, r.body);
        }
        serde_json::from_str(&r.body).with_context(|| format!("{method} {path}: {}", r.body))
    }

    pub fn api(&self, method: &str, path: &str, body: &Value) -> anyhow::Result<Value> {
        self.call(self.api, method, path, body)
    }

    /// Rows of `/v1/query`'s first column `n`.
    pub fn count(&self, sql: &str) -> anyhow::Result<u64> {
        let v = self.api("POST", "/v1/query", &json!({ "sql": sql }))?;
        Ok(v["rows"][0]["n"].as_u64().unwrap_or(0))
    }

    /// Waits up to `timeout` for the child to end on its own (its `--duration`), then stops it.
    pub fn finish(mut self, timeout: Duration) -> anyhow::Result<()> {
        let end = Instant::now() + timeout;
        while Instant::now() < end {
            if let Some(status) = self.child.try_wait()? {
                if !status.success() {
                    bail!("the child ended with {status}");
                }
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        bail!("the child did not end within {timeout:?}")
    }

    /// Ctrl-C, as an operator stops it; its data directory removed.
    pub fn stop(self) {
        let data = self.data.clone();
        drop(self);
        let _ = std::fs::remove_dir_all(data);
    }
}

impl Drop for Up {
    /// A run that failed stops its child as Ctrl-C would (the lab tears its fabric down),
    /// killing it only if it does not stop within 20 s.
    fn drop(&mut self) {
        if !matches!(self.child.try_wait(), Ok(None)) {
            return;
        }
        // SAFETY: signalling our own child, still running.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGINT);
        }
        let end = Instant::now() + Duration::from_secs(20);
        while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
