//! One controller session with one P4Runtime device.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use kplane_p4::{Entry, P4Info};
use prost::Message;
use tokio::sync::mpsc;
use tonic::transport::{Channel, Endpoint};

use crate::P4rtError;
use crate::convert::{from_table_entry, to_table_entry};
use crate::proto::p4_runtime_client::P4RuntimeClient;
use crate::proto::{
    self, Entity, ForwardingPipelineConfig, MasterArbitrationUpdate, StreamMessageRequest, Uint128,
    entity, stream_message_request, stream_message_response,
};

/// Where a device is and who we are to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionConfig {
    /// `host:port` of the P4Runtime server.
    pub addr: String,
    pub device_id: u64,
    /// Our election id: the highest among connected controllers is the primary.
    pub election_id: u64,
    /// Deadline of connecting and of every RPC.
    pub timeout: Duration,
}

/// A forwarding pipeline: p4c's serialized P4Info and the target's configuration.
#[derive(Clone, Copy, Debug)]
pub struct Pipeline<'a> {
    pub p4info: &'a [u8],
    pub device_config: &'a [u8],
    /// Identifies the pipeline: a switch reporting another cookie runs something else.
    pub cookie: u64,
}

/// One update of a Write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpdateKind {
    Insert,
    Modify,
    Delete,
}

/// A primary-controller session: the arbitration stream stays open for its lifetime (the
/// switch drops a controller whose stream closes).
#[derive(Debug)]
pub struct Session {
    cfg: SessionConfig,
    client: P4RuntimeClient<Channel>,
    _stream: mpsc::Sender<StreamMessageRequest>,
    alive: Arc<AtomicBool>,
}

impl Session {
    /// Connects and becomes the primary controller of the device.
    pub async fn open(cfg: SessionConfig) -> Result<Self, P4rtError> {
        let connect_err = |message: String| P4rtError::Connect {
            addr: cfg.addr.clone(),
            message,
        };
        let endpoint = Endpoint::from_shared(format!("http://{}", cfg.addr))
            .map_err(|e| connect_err(e.to_string()))?
            .connect_timeout(cfg.timeout)
            .timeout(cfg.timeout);
        let channel = endpoint
            .connect()
            .await
            .map_err(|e| connect_err(format!("{e} ({:?})", std::error::Error::source(&e))))?;
        let mut client = P4RuntimeClient::new(channel).max_decoding_message_size(64 << 20);
        let (tx, rx) = mpsc::channel(4);
        let arbitration = StreamMessageRequest {
            update: Some(stream_message_request::Update::Arbitration(
                MasterArbitrationUpdate {
                    device_id: cfg.device_id,
                    election_id: Some(election(&cfg)),
                    ..Default::default()
                },
            )),
        };
        tx.send(arbitration)
            .await
            .map_err(|_| connect_err("stream closed".into()))?;
        let rx = tokio_stream::wrappers::ReceiverStream::new(rx);
        let mut inbound = tokio::time::timeout(cfg.timeout, client.stream_channel(rx))
            .await
            .map_err(|_| connect_err("no answer to arbitration".into()))?
            .map_err(|s| P4rtError::rpc(&cfg.addr, "StreamChannel", &s))?
            .into_inner();
        let first = tokio::time::timeout(cfg.timeout, inbound.message())
            .await
            .map_err(|_| connect_err("no answer to arbitration".into()))?
            .map_err(|s| P4rtError::rpc(&cfg.addr, "StreamChannel", &s))?;
        match first.and_then(|m| m.update) {
            Some(stream_message_response::Update::Arbitration(a)) => {
                let status = a.status.unwrap_or_default();
                if status.code != 0 {
                    return Err(P4rtError::NotPrimary {
                        addr: cfg.addr.clone(),
                        device_id: cfg.device_id,
                        message: status.message,
                    });
                }
            }
            other => {
                return Err(connect_err(format!(
                    "expected an arbitration answer, got {other:?}"
                )));
            }
        }
        let alive = Arc::new(AtomicBool::new(true));
        let flag = alive.clone();
        let addr = cfg.addr.clone();
        tokio::spawn(async move {
            // Drain the stream; when it ends, the session is no longer primary.
            while let Ok(Some(m)) = inbound.message().await {
                if let Some(stream_message_response::Update::Arbitration(a)) = m.update
                    && a.status.is_some_and(|s| s.code != 0)
                {
                    tracing::warn!(%addr, "P4Runtime: another controller became primary");
                    break;
                }
            }
            flag.store(false, Ordering::Release);
        });
        tracing::info!(addr = %cfg.addr, device_id = cfg.device_id, "P4Runtime: primary");
        Ok(Self {
            cfg,
            client,
            _stream: tx,
            alive,
        })
    }

    /// Whether the arbitration stream is still open and we are still primary.
    pub fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Acquire)
    }

    pub fn config(&self) -> &SessionConfig {
        &self.cfg
    }

    /// The cookie of the pipeline the device runs (`None`: no pipeline set).
    pub async fn pipeline_cookie(&mut self) -> Result<Option<u64>, P4rtError> {
        let req = proto::GetForwardingPipelineConfigRequest {
            device_id: self.cfg.device_id,
            response_type: proto::get_forwarding_pipeline_config_request::ResponseType::CookieOnly
                as i32,
        };
        match self.client.get_forwarding_pipeline_config(req).await {
            Ok(r) => Ok(r
                .into_inner()
                .config
                .and_then(|c| c.cookie)
                .map(|c| c.cookie)),
            Err(s) if s.code() == tonic::Code::FailedPrecondition => Ok(None),
            Err(s) => Err(P4rtError::rpc(
                &self.cfg.addr,
                "GetForwardingPipelineConfig",
                &s,
            )),
        }
    }

    /// Verifies and commits `p` (the device's tables start empty).
    pub async fn set_pipeline(&mut self, p: &Pipeline<'_>) -> Result<(), P4rtError> {
        let req = proto::SetForwardingPipelineConfigRequest {
            device_id: self.cfg.device_id,
            election_id: Some(election(&self.cfg)),
            action: proto::set_forwarding_pipeline_config_request::Action::VerifyAndCommit as i32,
            config: Some(ForwardingPipelineConfig {
                p4info: p.p4info.to_vec(),
                p4_device_config: p.device_config.to_vec(),
                cookie: Some(proto::forwarding_pipeline_config::Cookie { cookie: p.cookie }),
            }),
            ..Default::default()
        };
        self.client
            .set_forwarding_pipeline_config(req)
            .await
            .map_err(|s| P4rtError::rpc(&self.cfg.addr, "SetForwardingPipelineConfig", &s))?;
        Ok(())
    }

    /// Writes a batch. The device attempts every update (CONTINUE_ON_ERROR); the error lists
    /// the ones that failed, by index, so the caller can undo the others.
    pub async fn write(
        &mut self,
        info: &P4Info,
        updates: &[(UpdateKind, &Entry)],
    ) -> Result<(), P4rtError> {
        let req = proto::WriteRequest {
            device_id: self.cfg.device_id,
            election_id: Some(election(&self.cfg)),
            updates: updates
                .iter()
                .map(|(kind, e)| proto::Update {
                    r#type: match kind {
                        UpdateKind::Insert => proto::update::Type::Insert,
                        UpdateKind::Modify => proto::update::Type::Modify,
                        UpdateKind::Delete => proto::update::Type::Delete,
                    } as i32,
                    entity: Some(Entity {
                        entity: Some(entity::Entity::TableEntry(to_table_entry(info, e))),
                    }),
                })
                .collect(),
            ..Default::default()
        };
        let update_entities = req.updates.len();
        match self.client.write(req).await {
            Ok(_) => Ok(()),
            Err(s) => match per_update_errors(&s) {
                Some(failed) if !failed.is_empty() => Err(P4rtError::Write {
                    addr: self.cfg.addr.clone(),
                    total: update_entities,
                    failed,
                }),
                _ => Err(P4rtError::rpc(&self.cfg.addr, "Write", &s)),
            },
        }
    }

    /// Every table entry on the device (default entries excluded), typed by `info`;
    /// `switch` is the node id the entries are attributed to.
    pub async fn read_entries(
        &mut self,
        info: &P4Info,
        switch: u32,
    ) -> Result<Vec<Entry>, P4rtError> {
        let req = proto::ReadRequest {
            device_id: self.cfg.device_id,
            entities: vec![Entity {
                entity: Some(entity::Entity::TableEntry(proto::TableEntry::default())),
            }],
            ..Default::default()
        };
        let rpc = |s: tonic::Status| P4rtError::rpc(&self.cfg.addr, "Read", &s);
        let mut stream = self.client.read(req).await.map_err(rpc)?.into_inner();
        let mut out = Vec::new();
        while let Some(r) = stream
            .message()
            .await
            .map_err(|s| P4rtError::rpc(&self.cfg.addr, "Read", &s))?
        {
            for e in r.entities {
                if let Some(entity::Entity::TableEntry(t)) = e.entity {
                    if t.is_default_action {
                        continue;
                    }
                    out.push(from_table_entry(info, &t, switch).map_err(|message| {
                        P4rtError::Mismatch {
                            addr: self.cfg.addr.clone(),
                            message,
                        }
                    })?);
                }
            }
        }
        Ok(out)
    }

    /// Programs clone session `session_id` to copy packets to `port` (inserted, or
    /// modified when it exists).
    pub async fn clone_session(&mut self, session_id: u32, port: u32) -> Result<(), P4rtError> {
        for kind in [proto::update::Type::Insert, proto::update::Type::Modify] {
            let req = proto::WriteRequest {
                device_id: self.cfg.device_id,
                election_id: Some(election(&self.cfg)),
                updates: vec![proto::Update {
                    r#type: kind as i32,
                    entity: Some(Entity {
                        entity: Some(entity::Entity::PacketReplicationEngineEntry(
                            proto::PacketReplicationEngineEntry {
                                r#type: Some(
                                    proto::packet_replication_engine_entry::Type::CloneSessionEntry(
                                        proto::CloneSessionEntry {
                                            session_id,
                                            replicas: vec![proto::Replica {
                                                egress_port: port,
                                                instance: 1,
                                            }],
                                            ..Default::default()
                                        },
                                    ),
                                ),
                            },
                        )),
                    }),
                }],
                ..Default::default()
            };
            match self.client.write(req).await {
                Ok(_) => return Ok(()),
                Err(s) if kind == proto::update::Type::Insert => {
                    tracing::debug!(error = %s.message(), "clone session exists: modifying");
                }
                Err(s) => return Err(P4rtError::rpc(&self.cfg.addr, "Write", &s)),
            }
        }
        Ok(())
    }
}

fn election(cfg: &SessionConfig) -> Uint128 {
    Uint128 {
        high: 0,
        low: cfg.election_id,
    }
}

/// The per-update errors a failed Write carries in its status details (P4Runtime §12.3:
/// one `p4.v1.Error` per update, OK for the ones that succeeded).
fn per_update_errors(s: &tonic::Status) -> Option<Vec<(usize, String)>> {
    let status = proto::google::rpc::Status::decode(s.details()).ok()?;
    let mut failed = Vec::new();
    for (i, d) in status.details.iter().enumerate() {
        let e = proto::Error::decode(d.value.as_slice()).ok()?;
        if e.canonical_code != 0 {
            failed.push((i, e.message));
        }
    }
    Some(failed)
}
