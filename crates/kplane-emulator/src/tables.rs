//! The switch tables, typed by the P4 program's schema (`p4/kplane.p4info.json`): entries are
//! validated against it and matched the way the P4 tables match (lpm, ternary, range, exact;
//! highest priority, then longest prefix, wins).

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::sync::LazyLock;

use serde::{Deserialize, Serialize};

/// The schema, embedded from `p4/kplane.p4info.json`.
pub const SCHEMA_JSON: &str = include_str!("../../../p4/kplane.p4info.json");

#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct KeySchema {
    pub name: String,
    #[serde(rename = "match")]
    pub kind: String,
    pub bitwidth: u32,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct TableSchema {
    pub name: String,
    pub keys: Vec<KeySchema>,
    pub actions: Vec<String>,
    pub default_action: String,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct ParamSchema {
    pub name: String,
    pub bitwidth: u32,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct ActionSchema {
    pub name: String,
    pub params: Vec<ParamSchema>,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct Schema {
    pub tables: Vec<TableSchema>,
    pub actions: Vec<ActionSchema>,
}

/// The parsed schema (the embedded file is checked by a test).
pub static SCHEMA: LazyLock<Schema> = LazyLock::new(|| {
    serde_json::from_str(SCHEMA_JSON).unwrap_or(Schema {
        tables: Vec::new(),
        actions: Vec::new(),
    })
});

/// The tables and actions this emulator implements (checked against the schema by a test).
pub const IMPLEMENTED: &[(&str, &[&str])] = &[
    ("ipv4_forward", &["set_egress", "drop", "ecmp"]),
    ("int_watchlist", &["int_source", "NoAction"]),
    (
        "int_sink_detection",
        &[
            "detect_per_hop",
            "detect_per_flow",
            "detect_ewma",
            "detect_noop",
        ],
    ),
    ("drop_acl", &["acl_drop", "NoAction"]),
    ("label_config", &["set_labelling", "NoAction"]),
];

/// One key's match value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatchValue {
    Exact(u64),
    /// value, prefix length
    Lpm(u64, u32),
    /// value, mask
    Ternary(u64, u64),
    /// lo, hi (inclusive)
    Range(u64, u64),
}

impl MatchValue {
    fn matches(&self, v: u64) -> bool {
        match *self {
            Self::Exact(x) => v == x,
            Self::Lpm(x, len) => {
                let mask = if len == 0 {
                    0
                } else {
                    u32::MAX << (32 - len.min(32))
                } as u64;
                v & mask == x & mask
            }
            Self::Ternary(x, m) => v & m == x & m,
            Self::Range(lo, hi) => lo <= v && v <= hi,
        }
    }

    fn prefix_len(&self) -> u32 {
        match *self {
            Self::Lpm(_, l) => l,
            _ => 0,
        }
    }
}

fn parse_u64(s: &str) -> Option<u64> {
    if let Ok(ip) = s.parse::<Ipv4Addr>() {
        return Some(u32::from(ip).into());
    }
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// Parses a key's value by its match kind: `10.0.0.0/8` (lpm, ternary), `v&&&mask`
/// (ternary), `80-443` (range), a number or an address (exact, or a full-width match).
pub fn parse_match(kind: &str, bitwidth: u32, s: &str) -> Result<MatchValue, String> {
    let full = if bitwidth >= 64 {
        u64::MAX
    } else {
        (1u64 << bitwidth) - 1
    };
    let bad = || format!("{s:?} is not a valid {kind} value");
    match kind {
        "exact" => parse_u64(s).map(MatchValue::Exact).ok_or_else(bad),
        "lpm" | "ternary" => {
            if let Some((v, len)) = s.split_once('/') {
                let v = parse_u64(v).ok_or_else(bad)?;
                let len: u32 = len.parse().map_err(|_| bad())?;
                if len > bitwidth {
                    return Err(bad());
                }
                let mask = if len == 0 {
                    0
                } else {
                    full & (full << (bitwidth - len))
                };
                return Ok(if kind == "lpm" {
                    MatchValue::Lpm(v, len)
                } else {
                    MatchValue::Ternary(v, mask)
                });
            }
            if let Some((v, m)) = s.split_once("&&&") {
                let (v, m) = (parse_u64(v).ok_or_else(bad)?, parse_u64(m).ok_or_else(bad)?);
                return Ok(MatchValue::Ternary(v, m));
            }
            let v = parse_u64(s).ok_or_else(bad)?;
            Ok(if kind == "lpm" {
                MatchValue::Lpm(v, bitwidth)
            } else {
                MatchValue::Ternary(v, full)
            })
        }
        "range" => {
            let (lo, hi) = s.split_once('-').unwrap_or((s, s));
            let (lo, hi) = (
                parse_u64(lo).ok_or_else(bad)?,
                parse_u64(hi).ok_or_else(bad)?,
            );
            if lo > hi {
                return Err(bad());
            }
            Ok(MatchValue::Range(lo, hi))
        }
        _ => Err(format!("unknown match kind {kind}")),
    }
}

/// A table entry as the control channel receives it.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct EntrySpec {
    /// Node id of the switch; absent = every switch.
    #[serde(default)]
    pub switch: Option<u32>,
    pub table: String,
    #[serde(default)]
    pub priority: u32,
    /// Key name → value (see [`parse_match`]); missing keys match anything.
    #[serde(rename = "match", default)]
    pub matches: BTreeMap<String, String>,
    pub action: String,
    #[serde(default)]
    pub params: BTreeMap<String, u64>,
}

/// A validated entry.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub spec: EntrySpec,
    keys: Vec<(usize, MatchValue)>,
}

impl Entry {
    /// Checks `spec` against the schema.
    pub fn new(spec: EntrySpec) -> Result<Self, String> {
        let table = SCHEMA
            .tables
            .iter()
            .find(|t| t.name == spec.table)
            .ok_or_else(|| format!("unknown table {:?}", spec.table))?;
        if !table.actions.contains(&spec.action) {
            return Err(format!(
                "action {:?} is not allowed in {} (allowed: {})",
                spec.action,
                table.name,
                table.actions.join(", ")
            ));
        }
        let action = SCHEMA
            .actions
            .iter()
            .find(|a| a.name == spec.action)
            .ok_or_else(|| format!("unknown action {:?}", spec.action))?;
        for p in &action.params {
            let v = spec
                .params
                .get(&p.name)
                .ok_or_else(|| format!("{}: missing parameter {:?}", action.name, p.name))?;
            if p.bitwidth < 64 && *v >> p.bitwidth != 0 {
                return Err(format!(
                    "{}: {} does not fit {} bits",
                    action.name, p.name, p.bitwidth
                ));
            }
        }
        if let Some(extra) = spec
            .params
            .keys()
            .find(|k| !action.params.iter().any(|p| &p.name == *k))
        {
            return Err(format!("{}: unknown parameter {extra:?}", action.name));
        }
        let mut keys = Vec::new();
        for (name, value) in &spec.matches {
            let (i, k) = table
                .keys
                .iter()
                .enumerate()
                .find(|(_, k)| &k.name == name)
                .ok_or_else(|| format!("{}: unknown key {name:?}", table.name))?;
            keys.push((i, parse_match(&k.kind, k.bitwidth, value)?));
        }
        Ok(Self { spec, keys })
    }

    /// Whether the key values (in schema order) match.
    pub fn matches(&self, values: &[u64]) -> bool {
        self.keys
            .iter()
            .all(|(i, m)| values.get(*i).is_some_and(|v| m.matches(*v)))
    }

    pub fn param(&self, name: &str) -> u64 {
        self.spec.params.get(name).copied().unwrap_or(0)
    }
}

/// The tables, in the order of [`IMPLEMENTED`]; the packet path addresses them by index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TableId {
    Ipv4Forward = 0,
    IntWatchlist,
    IntSinkDetection,
    DropAcl,
    LabelConfig,
}

impl TableId {
    pub fn of(name: &str) -> Option<Self> {
        Some(match name {
            "ipv4_forward" => Self::Ipv4Forward,
            "int_watchlist" => Self::IntWatchlist,
            "int_sink_detection" => Self::IntSinkDetection,
            "drop_acl" => Self::DropAcl,
            "label_config" => Self::LabelConfig,
            _ => return None,
        })
    }
}

fn prefix_total(e: &Entry) -> u32 {
    e.keys.iter().map(|k| k.1.prefix_len()).sum()
}

/// Every table's entries.
#[derive(Clone, Debug, Default)]
pub struct Tables {
    entries: [Vec<Entry>; 5],
}

impl Tables {
    pub fn insert(&mut self, e: Entry) {
        let Some(id) = TableId::of(&e.spec.table) else {
            return;
        };
        let v = &mut self.entries[id as usize];
        v.push(e);
        // Highest priority first, then longest prefix; stable for equal ones.
        v.sort_by(|a, b| {
            b.spec
                .priority
                .cmp(&a.spec.priority)
                .then(prefix_total(b).cmp(&prefix_total(a)))
        });
    }

    pub fn clear(&mut self, table: &str) -> usize {
        TableId::of(table).map_or(0, |id| std::mem::take(&mut self.entries[id as usize]).len())
    }

    pub fn entries(&self, table: &str) -> &[Entry] {
        TableId::of(table).map_or(&[], |id| self.entries[id as usize].as_slice())
    }

    /// The winning entry of `table` at switch `node_id` for key `values`.
    pub fn lookup(&self, table: &str, node_id: u32, values: &[u64]) -> Option<&Entry> {
        self.lookup_id(TableId::of(table)?, node_id, values)
    }

    /// [`Tables::lookup`] by table id (the packet path).
    #[inline]
    pub fn lookup_id(&self, table: TableId, node_id: u32, values: &[u64]) -> Option<&Entry> {
        self.entries[table as usize]
            .iter()
            .find(|e| e.spec.switch.is_none_or(|s| s == node_id) && e.matches(values))
    }

    pub fn is_empty(&self, table: &str) -> bool {
        self.entries(table).is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(json: &str) -> EntrySpec {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn the_embedded_schema_parses_and_matches_what_the_emulator_implements() {
        let schema: Schema = serde_json::from_str(SCHEMA_JSON).expect("valid schema");
        let mut from_schema: Vec<(String, Vec<String>)> = schema
            .tables
            .iter()
            .map(|t| {
                let mut a = t.actions.clone();
                if !a.contains(&t.default_action) {
                    a.push(t.default_action.clone());
                }
                a.sort();
                (t.name.clone(), a)
            })
            .collect();
        from_schema.sort();
        let mut implemented: Vec<(String, Vec<String>)> = IMPLEMENTED
            .iter()
            .map(|(t, a)| {
                let mut a: Vec<String> = a.iter().map(|s| s.to_string()).collect();
                a.sort();
                (t.to_string(), a)
            })
            .collect();
        implemented.sort();
        assert_eq!(
            from_schema, implemented,
            "every table and action, both ways"
        );
        for (_, actions) in IMPLEMENTED {
            for a in *actions {
                assert!(
                    schema.actions.iter().any(|x| x.name == *a),
                    "action {a} defined"
                );
            }
        }
    }

    #[test]
    fn entries_are_validated_against_the_schema() {
        assert!(Entry::new(spec(r#"{"table":"nope","action":"drop"}"#)).is_err());
        let e = Entry::new(spec(r#"{"table":"int_watchlist","action":"drop"}"#)).unwrap_err();
        assert!(e.contains("not allowed"), "{e}");
        let e = Entry::new(spec(r#"{"table":"int_watchlist","action":"int_source","params":{"instruction_bitmap":65280}}"#)).unwrap_err();
        assert!(e.contains("max_hop"), "{e}");
        let e = Entry::new(spec(
            r#"{"table":"ipv4_forward","action":"set_egress","params":{"port":9999}}"#,
        ))
        .unwrap_err();
        assert!(e.contains("does not fit"), "{e}");
        let e = Entry::new(spec(
            r#"{"table":"drop_acl","action":"acl_drop","match":{"dst_port":"90-80"}}"#,
        ))
        .unwrap_err();
        assert!(e.contains("range"), "{e}");
    }

    #[test]
    fn matching_follows_priority_and_prefix_length() {
        let mut t = Tables::default();
        for j in [
            r#"{"table":"ipv4_forward","action":"set_egress","params":{"port":1},"match":{"dst_addr":"10.0.0.0/8"}}"#,
            r#"{"table":"ipv4_forward","action":"set_egress","params":{"port":2},"match":{"dst_addr":"10.1.0.0/16"}}"#,
            r#"{"switch":3,"table":"drop_acl","action":"acl_drop","priority":5,"match":{"dst_port":"80-443","protocol":"6"}}"#,
        ] {
            t.insert(Entry::new(spec(j)).unwrap());
        }
        let ip = |s: &str| u64::from(u32::from(s.parse::<Ipv4Addr>().unwrap()));
        let e = t.lookup("ipv4_forward", 1, &[ip("10.1.2.3")]).unwrap();
        assert_eq!(e.param("port"), 2, "longest prefix");
        assert_eq!(
            t.lookup("ipv4_forward", 1, &[ip("10.2.0.1")])
                .unwrap()
                .param("port"),
            1
        );
        assert!(t.lookup("ipv4_forward", 1, &[ip("11.0.0.1")]).is_none());
        let acl = [ip("10.0.0.1"), ip("10.0.0.2"), 6, 1000, 443];
        assert!(t.lookup("drop_acl", 3, &acl).is_some());
        assert!(t.lookup("drop_acl", 4, &acl).is_none(), "other switch");
        assert!(
            t.lookup("drop_acl", 3, &[acl[0], acl[1], 17, 1000, 443])
                .is_none()
        );
    }
}
