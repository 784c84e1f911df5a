//! Persisted desired state (`<state-dir>/intents.json`, replaced atomically on every change)
//! and the audit log (`<state-dir>/audit.jsonl`, one JSON object per line, appended).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use kplane_p4::EntrySpec;
use serde::{Deserialize, Serialize};

use super::model::{IntentKind, IntentSpec};

/// Where an intent is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum State {
    /// A recommendation the policy does not auto-apply: waits for an admin's approval.
    PendingApproval,
    /// Its entries are being written (a switch that is unreachable keeps it here, retried).
    Applying,
    /// Written everywhere; waiting for fresh telemetry to show its effect.
    Verifying,
    Active,
    /// A switch refused its entries; removed from the switches that took them.
    Failed,
    /// Its effect did not show before the deadline; removed.
    RolledBack,
    /// Its TTL passed; removed.
    Expired,
    /// Deleted by an operator; removed.
    Deleted,
}

impl State {
    /// Whether its entries belong on the switches.
    pub fn installed(self) -> bool {
        matches!(self, Self::Applying | Self::Verifying | Self::Active)
    }

    /// Whether it is over (kept for history only).
    pub fn ended(self) -> bool {
        matches!(
            self,
            Self::Failed | Self::RolledBack | Self::Expired | Self::Deleted
        )
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::PendingApproval => "pending-approval",
            Self::Applying => "applying",
            Self::Verifying => "verifying",
            Self::Active => "active",
            Self::Failed => "failed",
            Self::RolledBack => "rolled-back",
            Self::Expired => "expired",
            Self::Deleted => "deleted",
        }
    }
}

/// One intent with its compiled entries and per-switch status.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
pub struct Intent {
    pub id: String,
    pub spec: IntentSpec,
    pub state: State,
    /// Unix ms.
    pub created_ms: u64,
    pub updated_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_ms: Option<u64>,
    /// When its last entry was written (verification counts from here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied_ms: Option<u64>,
    pub submitted_by: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved_by: Option<String>,
    /// Why it covers a wide share of the fabric (the blast-radius rule): it waits for an
    /// admin and expires within `wide-max-ttl`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blast_radius: Vec<String>,
    /// Its table entries, per switch (canonical).
    pub entries: Vec<EntrySpec>,
    /// Switch → `pending`, `installed`, `unreachable: …` or `refused: …`.
    pub switches: BTreeMap<u32, String>,
    /// What fresh telemetry must show after it is applied.
    pub expected_effect: String,
    /// What verification saw, or why it failed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<String>,
}

impl Intent {
    pub fn kind(&self) -> &IntentKind {
        &self.spec.kind
    }
}

/// Everything persisted.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
pub struct Snapshot {
    pub next_id: u64,
    pub intents: Vec<Intent>,
    pub policy: Policy,
}

/// Which recommendations are applied without an admin.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Policy {
    /// Intent kinds (`monitor`, `block`, `reroute`, `tune`) applied at once when recommended.
    pub auto_apply: Vec<String>,
}

impl Default for Policy {
    fn default() -> Self {
        // Watching more closely is harmless; blocking and rerouting wait for a person.
        Self {
            auto_apply: vec!["monitor".into(), "tune".into()],
        }
    }
}

/// The state directory.
#[derive(Debug)]
pub struct Store {
    dir: PathBuf,
}

/// One audit record: who did what to which intent, when, with what result.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
pub struct AuditRecord {
    pub time_ms: u64,
    pub actor: String,
    pub action: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub intent: String,
    pub result: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

impl Store {
    /// Opens (creating) `dir` and loads its snapshot.
    pub fn open(dir: &Path) -> std::io::Result<(Self, Snapshot)> {
        std::fs::create_dir_all(dir)?;
        let store = Self {
            dir: dir.to_path_buf(),
        };
        let path = store.dir.join("intents.json");
        let snap = match std::fs::read(&path) {
            Ok(b) => serde_json::from_slice(&b).map_err(|e| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("{}: {e}", path.display()),
                )
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Snapshot::default(),
            Err(e) => return Err(e),
        };
        Ok((store, snap))
    }

    /// Replaces the snapshot: write a temporary file, fsync it, rename, fsync the directory.
    pub fn save(&self, snap: &Snapshot) -> std::io::Result<()> {
        let tmp = self.dir.join("intents.json.tmp");
        {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(&serde_json::to_vec_pretty(snap).map_err(std::io::Error::other)?)?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, self.dir.join("intents.json"))?;
        std::fs::File::open(&self.dir)?.sync_all()
    }

    /// Appends a record (and syncs it: the audit log is what an incident review reads).
    pub fn audit(&self, r: &AuditRecord) -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("audit.jsonl"))?;
        let mut line = serde_json::to_vec(r).map_err(std::io::Error::other)?;
        line.push(b'\n');
        f.write_all(&line)?;
        f.sync_data()
    }

    /// The newest `limit` records for which `keep` holds, newest first.
    pub fn audit_log(
        &self,
        limit: usize,
        keep: impl Fn(&AuditRecord) -> bool,
    ) -> std::io::Result<Vec<AuditRecord>> {
        let text = match std::fs::read_to_string(self.dir.join("audit.jsonl")) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(e),
        };
        // A torn last line (a crash mid-append) is skipped, not an error.
        Ok(text
            .lines()
            .rev()
            .filter_map(|l| serde_json::from_str::<AuditRecord>(l).ok())
            .filter(|r| keep(r))
            .take(limit)
            .collect())
    }
}

/// Unix time in ms.
pub fn now_ms() -> u64 {
    kplane_model::unix_time_ns() / 1_000_000
}
