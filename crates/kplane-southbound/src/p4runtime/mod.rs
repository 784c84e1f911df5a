//! P4Runtime switches (`kplane-p4runtime`): one primary session per switch, re-opened when
//! it drops; the pipeline (p4c's P4Info and BMv2 JSON of `p4/kplane_int.p4`), the configured
//! `entries` and the report clone session pushed when the switch runs none or another one —
//! at start, or a restarted switch — which starts a new epoch so the engine re-pushes every
//! desired entry. The engine provisions every switch each pass, intents or not.

use std::time::Duration;

use kplane_model::detection::ipv4_prefix;
use kplane_p4::{Entry, KPLANE_BMV2_JSON, KPLANE_P4INFO_BIN};
use kplane_p4runtime::{P4rtError, Pipeline, Session, SessionConfig, UpdateKind as P4rtUpdate};
use serde::{Deserialize, Serialize};
use tokio::sync::Mutex;

use crate::{BoxFuture, DriverError, ReadBack, SwitchDriver, SwitchNode, Topology, UpdateKind};

/// P4Runtime's update type of a write.
fn p4rt_update(k: UpdateKind) -> P4rtUpdate {
    match k {
        UpdateKind::Insert => P4rtUpdate::Insert,
        UpdateKind::Modify => P4rtUpdate::Modify,
        UpdateKind::Delete => P4rtUpdate::Delete,
    }
}

/// The cookie kplane's pipeline carries: a switch reporting another runs something else.
pub const PIPELINE_COOKIE: u64 = 0x6b70_6c61_6e65_0001;

/// `[[intent-api.drivers]] kind = "p4runtime"`: one switch.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Config {
    /// The switch's INT node id (what its reports carry, what intents name).
    pub switch: u32,
    pub name: Option<String>,
    /// `host:port` of its P4Runtime server.
    pub addr: String,
    #[serde(default)]
    pub device_id: u64,
    /// Our election id (the highest connected controller is primary).
    #[serde(default = "one")]
    pub election_id: u64,
    /// Push kplane's pipeline when the switch runs none or another one (default); `false`:
    /// refuse to write to such a switch.
    #[serde(default = "yes")]
    pub push_pipeline: bool,
    /// Port the sink's report clones leave on (clone session 500 → this port).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report_port: Option<u32>,
    /// Hosts behind it: `{prefix = "10.0.1.0/24", port = 2}`.
    #[serde(default)]
    pub hosts: Vec<HostPort>,
    /// Links to other switches: `{port = 1, peer = 2, peer-port = 1}`.
    #[serde(default)]
    pub links: Vec<LinkPort>,
    /// Entries the switch always holds (a routing agent's forwarding, say), written right
    /// after the pipeline is pushed; intents neither own nor remove them.
    #[serde(default)]
    pub entries: Vec<kplane_p4::EntrySpec>,
    #[serde(default = "default_timeout", with = "humantime_serde")]
    pub timeout: Duration,
}

#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct HostPort {
    pub prefix: String,
    pub port: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct LinkPort {
    pub port: u32,
    pub peer: u32,
    pub peer_port: u32,
}

fn one() -> u64 {
    1
}

fn yes() -> bool {
    true
}

fn default_timeout() -> Duration {
    Duration::from_secs(5)
}

impl Config {
    pub fn check(&self, problems: &mut Vec<String>) {
        for h in &self.hosts {
            if ipv4_prefix(&h.prefix).is_none() {
                problems.push(format!(
                    "intent-api.drivers (p4runtime switch {}): hosts.prefix {:?} is not an IPv4 prefix",
                    self.switch, h.prefix
                ));
            }
        }
        for e in &self.entries {
            if let Err(err) = kplane_p4::Entry::new(kplane_p4::kplane(), e) {
                problems.push(format!(
                    "intent-api.drivers (p4runtime switch {}): entries: {err}",
                    self.switch
                ));
            }
        }
        if self.addr.parse::<std::net::SocketAddr>().is_err() && !self.addr.contains(':') {
            problems.push(format!(
                "intent-api.drivers (p4runtime switch {}): addr {:?} is not host:port",
                self.switch, self.addr
            ));
        }
    }
}

#[derive(Debug)]
pub struct Driver {
    cfg: Config,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    session: Option<Session>,
    epoch: u64,
}

fn driver_error(e: P4rtError) -> DriverError {
    DriverError {
        retryable: e.is_retryable(),
        failed: match &e {
            P4rtError::Write { failed, .. } => failed.iter().map(|(i, _)| *i).collect(),
            _ => Vec::new(),
        },
        message: e.to_string(),
    }
}

impl Driver {
    pub fn new(cfg: Config) -> Self {
        Self {
            cfg,
            state: Mutex::new(State::default()),
        }
    }

    fn unknown(&self, switch: u32) -> DriverError {
        DriverError::fatal(format!(
            "switch {switch} is not served here (this P4Runtime driver serves {})",
            self.cfg.switch
        ))
    }

    /// A live primary session running kplane's pipeline.
    async fn session<'a>(&self, st: &'a mut State) -> Result<&'a mut Session, DriverError> {
        if st.session.as_ref().is_none_or(|s| !s.is_alive()) {
            st.session = None;
            let mut s = Session::open(SessionConfig {
                addr: self.cfg.addr.clone(),
                device_id: self.cfg.device_id,
                election_id: self.cfg.election_id,
                timeout: self.cfg.timeout,
            })
            .await
            .map_err(driver_error)?;
            let cookie = s.pipeline_cookie().await.map_err(driver_error)?;
            if cookie != Some(PIPELINE_COOKIE) {
                if !self.cfg.push_pipeline {
                    return Err(DriverError::fatal(format!(
                        "switch {} runs another pipeline (cookie {cookie:?}) and push-pipeline is off",
                        self.cfg.switch
                    )));
                }
                s.set_pipeline(&Pipeline {
                    p4info: KPLANE_P4INFO_BIN,
                    device_config: KPLANE_BMV2_JSON,
                    cookie: PIPELINE_COOKIE,
                })
                .await
                .map_err(driver_error)?;
                // A fresh pipeline has empty tables: a new epoch, and the static entries.
                st.epoch += 1;
                let info = kplane_p4::kplane();
                let fixed: Vec<Entry> = self
                    .cfg
                    .entries
                    .iter()
                    .filter_map(|e| Entry::new(info, e).ok())
                    .collect();
                if !fixed.is_empty() {
                    let batch: Vec<(P4rtUpdate, &Entry)> =
                        fixed.iter().map(|e| (P4rtUpdate::Insert, e)).collect();
                    s.write(info, &batch).await.map_err(driver_error)?;
                }
                tracing::info!(
                    switch = self.cfg.switch,
                    epoch = st.epoch,
                    "P4Runtime: pipeline pushed"
                );
            }
            if let Some(port) = self.cfg.report_port {
                s.clone_session(500, port).await.map_err(driver_error)?;
            }
            st.session = Some(s);
        }
        st.session
            .as_mut()
            .ok_or_else(|| DriverError::retryable("no session"))
    }
}

impl SwitchDriver for Driver {
    fn kind(&self) -> &'static str {
        "p4runtime"
    }

    fn topology(&self) -> BoxFuture<'_, Result<Topology, DriverError>> {
        Box::pin(async move {
            let c = &self.cfg;
            Ok(Topology {
                switches: vec![SwitchNode {
                    id: c.switch,
                    name: c
                        .name
                        .clone()
                        .unwrap_or_else(|| format!("p4rt-{}", c.switch)),
                    hosts: c
                        .hosts
                        .iter()
                        .filter_map(|h| ipv4_prefix(&h.prefix).map(|(n, l)| (n, l, h.port)))
                        .collect(),
                }],
                links: c
                    .links
                    .iter()
                    .map(|l| ((c.switch, l.port), (l.peer, l.peer_port), true))
                    .collect(),
            })
        })
    }

    fn write(
        &self,
        switch: u32,
        updates: Vec<(UpdateKind, Entry)>,
    ) -> BoxFuture<'_, Result<(), DriverError>> {
        Box::pin(async move {
            if switch != self.cfg.switch {
                return Err(self.unknown(switch));
            }
            let mut st = self.state.lock().await;
            let s = self.session(&mut st).await?;
            let batch: Vec<(P4rtUpdate, &Entry)> =
                updates.iter().map(|(k, e)| (p4rt_update(*k), e)).collect();
            let r = s.write(kplane_p4::kplane(), &batch).await;
            if r.as_ref().is_err_and(|e| e.is_retryable()) {
                st.session = None;
            }
            r.map_err(driver_error)
        })
    }

    /// Opens the session, which pushes the pipeline, the configured entries and the report
    /// clone session when the switch runs none (a new switch, or one that restarted); a live
    /// session costs nothing.
    fn provision(&self, switch: u32) -> BoxFuture<'_, Result<Option<u64>, DriverError>> {
        Box::pin(async move {
            if switch != self.cfg.switch {
                return Err(self.unknown(switch));
            }
            let mut st = self.state.lock().await;
            self.session(&mut st).await?;
            Ok(Some(st.epoch))
        })
    }

    fn read(&self, switch: u32) -> BoxFuture<'_, Result<ReadBack, DriverError>> {
        Box::pin(async move {
            if switch != self.cfg.switch {
                return Err(self.unknown(switch));
            }
            let mut st = self.state.lock().await;
            let s = self.session(&mut st).await?;
            match s.read_entries(kplane_p4::kplane(), switch).await {
                Ok(entries) => Ok(ReadBack {
                    entries,
                    epoch: st.epoch,
                }),
                Err(e) => {
                    if e.is_retryable() {
                        st.session = None;
                    }
                    Err(driver_error(e))
                }
            }
        })
    }
}
