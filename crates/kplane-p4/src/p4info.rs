//! The parts of p4c's P4Info (JSON form of `p4.config.v1.P4Info`) that typing entries needs.

use serde::Deserialize;

use crate::P4Error;

/// A key's match kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum MatchKind {
    Exact,
    Lpm,
    Ternary,
    Range,
    Optional,
}

impl MatchKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Exact => "exact",
            Self::Lpm => "lpm",
            Self::Ternary => "ternary",
            Self::Range => "range",
            Self::Optional => "optional",
        }
    }

    /// Whether entries of a table with this key need a priority (P4Runtime §9.1).
    pub fn needs_priority(self) -> bool {
        matches!(self, Self::Ternary | Self::Range | Self::Optional)
    }
}

#[derive(Clone, Debug, Deserialize)]
struct Preamble {
    id: u32,
    name: String,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawMatchField {
    id: u32,
    name: String,
    bitwidth: u32,
    match_type: MatchKind,
}

#[derive(Clone, Debug, Deserialize)]
struct RawActionRef {
    id: u32,
    #[serde(default)]
    scope: Option<String>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawTable {
    preamble: Preamble,
    #[serde(default)]
    match_fields: Vec<RawMatchField>,
    #[serde(default)]
    action_refs: Vec<RawActionRef>,
    /// int64 in protobuf's JSON mapping: a string.
    #[serde(default)]
    size: Option<String>,
}

#[derive(Clone, Debug, Deserialize)]
struct RawParam {
    id: u32,
    name: String,
    bitwidth: u32,
}

#[derive(Clone, Debug, Deserialize)]
struct RawAction {
    preamble: Preamble,
    #[serde(default)]
    params: Vec<RawParam>,
}

#[derive(Clone, Debug, Deserialize)]
struct RawP4Info {
    #[serde(default)]
    tables: Vec<RawTable>,
    #[serde(default)]
    actions: Vec<RawAction>,
}

/// A table key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MatchField {
    pub id: u32,
    pub name: String,
    pub bitwidth: u32,
    pub kind: MatchKind,
}

/// A table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableInfo {
    pub id: u32,
    pub name: String,
    pub keys: Vec<MatchField>,
    /// Actions entries may use (indices into [`P4Info::actions`]).
    pub entry_actions: Vec<usize>,
    /// Actions only the default entry may use.
    pub default_only_actions: Vec<usize>,
    /// How many entries the table holds.
    pub size: u64,
}

impl TableInfo {
    /// Whether entries need a priority ≥ 1 (some key is ternary, range or optional).
    pub fn needs_priority(&self) -> bool {
        self.keys.iter().any(|k| k.kind.needs_priority())
    }

    pub fn key(&self, name: &str) -> Option<usize> {
        self.keys.iter().position(|k| k.name == name)
    }
}

/// An action parameter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamInfo {
    pub id: u32,
    pub name: String,
    pub bitwidth: u32,
}

/// An action.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActionInfo {
    pub id: u32,
    pub name: String,
    pub params: Vec<ParamInfo>,
}

/// A program's tables and actions, with their P4Runtime ids.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct P4Info {
    pub tables: Vec<TableInfo>,
    pub actions: Vec<ActionInfo>,
}

impl P4Info {
    /// Parses p4c's `--p4runtime-files x.p4info.json` output.
    pub fn from_json(json: &str) -> Result<Self, P4Error> {
        let raw: RawP4Info =
            serde_json::from_str(json).map_err(|e| P4Error::P4Info(e.to_string()))?;
        let actions: Vec<ActionInfo> = raw
            .actions
            .into_iter()
            .map(|a| ActionInfo {
                id: a.preamble.id,
                name: a.preamble.name,
                params: a
                    .params
                    .into_iter()
                    .map(|p| ParamInfo {
                        id: p.id,
                        name: p.name,
                        bitwidth: p.bitwidth,
                    })
                    .collect(),
            })
            .collect();
        let mut tables = Vec::new();
        for t in raw.tables {
            let mut entry_actions = Vec::new();
            let mut default_only_actions = Vec::new();
            for r in &t.action_refs {
                let i = actions.iter().position(|a| a.id == r.id).ok_or_else(|| {
                    P4Error::P4Info(format!(
                        "table {} refers to action id {}",
                        t.preamble.name, r.id
                    ))
                })?;
                match r.scope.as_deref() {
                    Some("DEFAULT_ONLY") => default_only_actions.push(i),
                    _ => entry_actions.push(i),
                }
            }
            let size = match &t.size {
                Some(s) => s.parse().map_err(|_| {
                    P4Error::P4Info(format!("table {}: size {s:?}", t.preamble.name))
                })?,
                None => 0,
            };
            tables.push(TableInfo {
                id: t.preamble.id,
                name: t.preamble.name,
                keys: t
                    .match_fields
                    .into_iter()
                    .map(|m| MatchField {
                        id: m.id,
                        name: m.name,
                        bitwidth: m.bitwidth,
                        kind: m.match_type,
                    })
                    .collect(),
                entry_actions,
                default_only_actions,
                size,
            });
        }
        Ok(Self { tables, actions })
    }

    pub fn table(&self, name: &str) -> Result<(usize, &TableInfo), P4Error> {
        self.tables
            .iter()
            .enumerate()
            .find(|(_, t)| t.name == name)
            .ok_or_else(|| {
                P4Error::UnknownTable(
                    name.to_string(),
                    self.tables
                        .iter()
                        .map(|t| t.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                )
            })
    }

    pub fn action(&self, name: &str) -> Result<(usize, &ActionInfo), P4Error> {
        self.actions
            .iter()
            .enumerate()
            .find(|(_, a)| a.name == name)
            .ok_or_else(|| P4Error::UnknownAction(name.to_string()))
    }

    pub fn table_by_id(&self, id: u32) -> Option<usize> {
        self.tables.iter().position(|t| t.id == id)
    }

    pub fn action_by_id(&self, id: u32) -> Option<usize> {
        self.actions.iter().position(|a| a.id == id)
    }
}
