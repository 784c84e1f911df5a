//! The emulator's control channel (`kplane emulate --control ADDR`, started by `kplane up`):
//! write batches to `POST /v1/write`, reads from `GET /v1/tables`, the fabric from
//! `GET /v1/topology`. Entries carry their switch's node id.

use std::net::SocketAddr;
use std::time::Duration;

use kplane_p4::{Entry, EntrySpec};
use kplane_runtime::probe;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::{BoxFuture, DriverError, ReadBack, SwitchDriver, SwitchNode, Topology, UpdateKind};

/// `[[intent-api.drivers]] kind = "emulator"`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Config {
    /// The control channel's address.
    pub control: SocketAddr,
    /// Deadline of each call.
    #[serde(default = "default_timeout", with = "humantime_serde")]
    pub timeout: Duration,
    /// A bearer token of the emulator's `[http]` tokens with the operator role (a secret:
    /// `kplane config` does not print it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
}

fn default_timeout() -> Duration {
    Duration::from_secs(5)
}

#[derive(Debug)]
pub struct Driver {
    cfg: Config,
}

impl Driver {
    pub fn new(cfg: Config) -> Self {
        Self { cfg }
    }

    async fn call(&self, method: &str, path: &str, body: String) -> Result<Value, DriverError> {
        let (addr, timeout) = (self.cfg.control, self.cfg.timeout);
        let (method, path) = (method.to_string(), path.to_string());
        let auth = self.cfg.token.as_ref().map(|t| format!("Bearer {t}"));
        let r = tokio::task::spawn_blocking(move || {
            let headers: Vec<(&str, &str)> = auth
                .as_deref()
                .map(|a| ("authorization", a))
                .into_iter()
                .collect();
            probe::request(addr, &method, &path, &headers, &body, timeout)
        })
        .await
        .map_err(|e| DriverError::retryable(e.to_string()))?
        .map_err(|e| {
            let e = match e.kind() {
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                    format!("no answer within {timeout:?}")
                }
                _ => e.to_string(),
            };
            DriverError::retryable(format!("emulator {addr}: {e}"))
        })?;
        let v: Value = serde_json::from_str(&r.body).unwrap_or(Value::Null);
        match r.status {
            200..=299 => Ok(v),
            400..=499 => {
                let mut e = DriverError::fatal(format!(
                    "emulator refused: {}",
                    v["error"].as_str().unwrap_or(&r.body)
                ));
                e.failed = v["index"]
                    .as_u64()
                    .map(|i| i as usize)
                    .into_iter()
                    .collect();
                Err(e)
            }
            s => Err(DriverError::retryable(format!("emulator answered {s}"))),
        }
    }
}

/// A link end of `/v1/topology`: (node name, node id, port).
fn end(e: &Value) -> (&str, u32, u32) {
    (
        e["node"].as_str().unwrap_or(""),
        e["id"].as_u64().unwrap_or(0) as u32,
        e["port"].as_u64().unwrap_or(0) as u32,
    )
}

impl SwitchDriver for Driver {
    fn kind(&self) -> &'static str {
        "emulator"
    }

    fn topology(&self) -> BoxFuture<'_, Result<Topology, DriverError>> {
        Box::pin(async move {
            let v = self.call("GET", "/v1/topology", String::new()).await?;
            let nodes = v["nodes"].as_array().cloned().unwrap_or_default();
            let kind_of = |name: &str| {
                nodes
                    .iter()
                    .find(|n| n["name"] == name)
                    .map(|n| (n["kind"].as_str() == Some("host"), n["ip"].as_str()))
            };
            let mut t = Topology {
                switches: nodes
                    .iter()
                    .filter(|n| n["kind"] == "switch")
                    .map(|n| SwitchNode {
                        id: n["id"].as_u64().unwrap_or(0) as u32,
                        name: n["name"].as_str().unwrap_or("").to_string(),
                        hosts: Vec::new(),
                    })
                    .collect(),
                links: Vec::new(),
            };
            for l in v["links"].as_array().into_iter().flatten() {
                let (a, b) = (end(&l["a"]), end(&l["b"]));
                let up = l["up"].as_bool().unwrap_or(true);
                match (kind_of(a.0), kind_of(b.0)) {
                    (Some((false, _)), Some((false, _))) => {
                        t.links.push(((a.1, a.2), (b.1, b.2), up));
                    }
                    (Some((true, Some(ip))), Some((false, _)))
                    | (Some((false, _)), Some((true, Some(ip)))) => {
                        let sw = if kind_of(a.0).is_some_and(|k| !k.0) {
                            a
                        } else {
                            b
                        };
                        if let (Ok(ip), Some(s)) = (
                            ip.parse::<std::net::Ipv4Addr>(),
                            t.switches.iter_mut().find(|s| s.id == sw.1),
                        ) {
                            s.hosts.push((u32::from(ip), 32, sw.2));
                        }
                    }
                    _ => {}
                }
            }
            Ok(t)
        })
    }

    fn write(
        &self,
        switch: u32,
        updates: Vec<(UpdateKind, Entry)>,
    ) -> BoxFuture<'_, Result<(), DriverError>> {
        Box::pin(async move {
            let info = kplane_p4::kplane();
            let updates: Vec<Value> = updates
                .iter()
                .map(|(kind, e)| {
                    let mut spec = e.spec(info);
                    spec.switch = Some(switch);
                    let t = match kind {
                        UpdateKind::Insert => "insert",
                        UpdateKind::Modify => "modify",
                        UpdateKind::Delete => "delete",
                    };
                    json!({ "type": t, "entry": spec })
                })
                .collect();
            // The emulator applies a batch all or nothing: a refused update leaves the
            // others unapplied, so none needs undoing.
            self.call(
                "POST",
                "/v1/write",
                json!({ "updates": updates }).to_string(),
            )
            .await
            .map(|_| ())
            .map_err(|mut e| {
                e.message = format!("switch {switch}: {}", e.message);
                e
            })
        })
    }

    fn read(&self, switch: u32) -> BoxFuture<'_, Result<ReadBack, DriverError>> {
        Box::pin(async move {
            let v = self.call("GET", "/v1/tables", String::new()).await?;
            let info = kplane_p4::kplane();
            let mut entries = Vec::new();
            for e in v["entries"].as_array().into_iter().flatten() {
                let spec: EntrySpec = serde_json::from_value(e.clone())
                    .map_err(|e| DriverError::fatal(format!("emulator entry: {e}")))?;
                // Entries for every switch (switch absent) are the emulator's own defaults.
                if spec.switch == Some(switch) {
                    entries.push(
                        Entry::new(info, &spec)
                            .map_err(|e| DriverError::fatal(format!("emulator entry: {e}")))?,
                    );
                }
            }
            Ok(ReadBack {
                entries,
                epoch: v["boot_id"].as_u64().unwrap_or(0),
            })
        })
    }
}
