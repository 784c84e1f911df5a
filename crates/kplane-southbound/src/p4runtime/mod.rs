//! P4Runtime switches (`kplane-p4runtime`): one primary session per switch, re-opened when
//! it drops; the pipeline (p4c's P4Info and BMv2 JSON of `p4/kplane_int.p4`), the switch's
//! configuration (identity, collector, sink ports, SQR), the configured `entries` and the
//! clone sessions pushed when the switch runs none or another one — at start, or a restarted
//! switch — which starts a new epoch so the engine re-pushes every desired entry. The engine
//! provisions every switch each pass, intents or not. Everything goes over P4Runtime: no
//! Thrift CLI is needed.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
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
    /// The switch's own IPv4 address: the source of its reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub switch_ip: Option<Ipv4Addr>,
    /// Where its reports go: the collector's IPv4 address…
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collector_ip: Option<Ipv4Addr>,
    /// …and the MAC address of the next hop towards it, out of `report-port`
    /// (`"02:00:00:00:00:fe"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collector_mac: Option<String>,
    /// GPINT's SQR recovery mode: `{ monitor-port = 1, hold = "400ms" }` (absent: off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_recovery: Option<ProbeRecovery>,
    /// The rate of its links in bits/s (default 100 Mb/s, the emulator's): what the egress tx
    /// utilisation it stamps is a share of.
    #[serde(default = "default_link_rate")]
    pub link_rate: u64,
    /// Hosts behind it: `{prefix = "10.0.1.0/24", port = 2}`; their ports are the switch's
    /// INT sink ports.
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

/// GPINT's SQR on a switch: it answers probes with feedback and holds a clone of each it
/// forwards for `hold` (t_f), then sends it to the monitor out of `monitor-port`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ProbeRecovery {
    pub monitor_port: u32,
    #[serde(with = "humantime_serde")]
    pub hold: Duration,
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

fn default_link_rate() -> u64 {
    100_000_000
}

fn default_timeout() -> Duration {
    Duration::from_secs(5)
}

/// `"aa:bb:cc:dd:ee:ff"` as a number.
fn parse_mac(text: &str) -> Option<u64> {
    let parts: Vec<&str> = text.split(':').collect();
    if parts.len() != 6 {
        return None;
    }
    parts.iter().try_fold(0u64, |acc, p| {
        (p.len() == 2)
            .then(|| u8::from_str_radix(p, 16).ok())
            .flatten()
            .map(|b| acc << 8 | u64::from(b))
    })
}

/// Clone session of the sink's reports (`REPORT_MIRROR_SESSION` in the P4 program).
const REPORT_SESSION: u32 = 500;
/// SQR: the held clone's session, and feedback out of port p through session 1000 + p.
const PROBE_RING_SESSION: u32 = 999;
const PROBE_FEEDBACK_SESSIONS: u32 = 1000;

impl Config {
    /// What a switch holds besides intents' entries, written with the pipeline: its identity
    /// and where reports go (`switch_config`'s default action), SQR's mode (`probe_config`),
    /// its host-facing ports (`sink_ports`), then the configured `entries`.
    fn provisioning(&self) -> Vec<kplane_p4::EntrySpec> {
        let ip = |a: Option<Ipv4Addr>| u64::from(u32::from(a.unwrap_or(Ipv4Addr::UNSPECIFIED)));
        let spec =
            |table: &str, action: &str, matches: &[(&str, String)], params: &[(&str, u64)]| {
                kplane_p4::EntrySpec {
                    switch: Some(self.switch),
                    table: table.to_string(),
                    priority: 0,
                    matches: matches
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.clone()))
                        .collect(),
                    action: action.to_string(),
                    params: params
                        .iter()
                        .map(|(k, v)| (k.to_string(), *v))
                        .collect::<BTreeMap<_, _>>(),
                }
            };
        let hold_us = self
            .probe_recovery
            .as_ref()
            .map_or(0, |p| p.hold.as_micros() as u64);
        let mut out = vec![
            spec(
                "switch_config",
                "set_switch",
                &[],
                &[
                    ("switch_id", u64::from(self.switch)),
                    ("switch_ip", ip(self.switch_ip)),
                    ("collector_ip", ip(self.collector_ip)),
                    (
                        "collector_mac",
                        self.collector_mac
                            .as_deref()
                            .and_then(parse_mac)
                            .unwrap_or(0),
                    ),
                    ("probe_hold_us", hold_us),
                    (
                        "tx_scale",
                        u64::from(kplane_p4::tx_util::scale_q16(self.link_rate)),
                    ),
                ],
            ),
            spec(
                "probe_config",
                "set_probe_config",
                &[],
                &[
                    ("recovery", u64::from(self.probe_recovery.is_some())),
                    (
                        "monitor_port",
                        self.probe_recovery
                            .as_ref()
                            .map_or(0, |p| u64::from(p.monitor_port)),
                    ),
                ],
            ),
        ];
        let sinks: BTreeSet<u32> = self.hosts.iter().map(|h| h.port).collect();
        out.extend(sinks.into_iter().map(|p| {
            spec(
                "sink_ports",
                "host_facing",
                &[("egress_port", p.to_string())],
                &[],
            )
        }));
        out.extend(self.entries.iter().cloned());
        out
    }

    /// Clone sessions `(session, port)`: reports out of `report-port`; with SQR, the ring's
    /// and one feedback session per port the switch uses.
    fn clone_sessions(&self) -> Vec<(u32, u32)> {
        let mut out: Vec<(u32, u32)> = self
            .report_port
            .map(|p| (REPORT_SESSION, p))
            .into_iter()
            .collect();
        if let Some(probe) = &self.probe_recovery {
            out.push((PROBE_RING_SESSION, probe.monitor_port));
            let ports: BTreeSet<u32> = self
                .hosts
                .iter()
                .map(|h| h.port)
                .chain(self.links.iter().map(|l| l.port))
                .chain(self.report_port)
                .chain([probe.monitor_port])
                .collect();
            out.extend(ports.into_iter().map(|p| (PROBE_FEEDBACK_SESSIONS + p, p)));
        }
        out
    }

    pub fn check(&self, problems: &mut Vec<String>) {
        if let Some(mac) = &self.collector_mac
            && parse_mac(mac).is_none()
        {
            problems.push(format!(
                "intent-api.drivers (p4runtime switch {}): collector-mac {mac:?} is not a MAC address (aa:bb:cc:dd:ee:ff)",
                self.switch
            ));
        }
        for h in &self.hosts {
            if ipv4_prefix(&h.prefix).is_none() {
                problems.push(format!(
                    "intent-api.drivers (p4runtime switch {}): hosts.prefix {:?} is not an IPv4 prefix",
                    self.switch, h.prefix
                ));
            }
        }
        for e in &self.provisioning() {
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
                // A fresh pipeline has empty tables: a new epoch, and the switch's own
                // entries (a keyless table's default action is modified, not inserted).
                st.epoch += 1;
                let info = kplane_p4::kplane();
                let fixed: Vec<Entry> = self
                    .cfg
                    .provisioning()
                    .iter()
                    .filter_map(|e| Entry::new(info, e).ok())
                    .collect();
                let batch: Vec<(P4rtUpdate, &Entry)> = fixed
                    .iter()
                    .map(|e| {
                        let kind = if e.is_default(info) {
                            P4rtUpdate::Modify
                        } else {
                            P4rtUpdate::Insert
                        };
                        (kind, e)
                    })
                    .collect();
                s.write(info, &batch).await.map_err(driver_error)?;
                tracing::info!(
                    switch = self.cfg.switch,
                    epoch = st.epoch,
                    "P4Runtime: pipeline pushed"
                );
            }
            for (session, port) in self.cfg.clone_sessions() {
                s.clone_session(session, port).await.map_err(driver_error)?;
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
