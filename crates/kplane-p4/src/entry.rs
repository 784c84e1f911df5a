//! Table entries: as written ([`EntrySpec`]), and checked and canonical ([`Entry`]).

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use crate::P4Error;
use crate::p4info::{MatchKind, P4Info, TableInfo};

/// A table entry as people, the control channel and the intent compiler write it.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct EntrySpec {
    /// Node id of the switch; absent = every switch (the emulator's control channel only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub switch: Option<u32>,
    pub table: String,
    /// Needed (≥ 1, higher wins) in tables with ternary or range keys; 0 elsewhere.
    #[serde(default)]
    pub priority: u32,
    /// Key name → value (see [`parse_match`]); a missing key matches anything.
    #[serde(rename = "match", default)]
    pub matches: BTreeMap<String, String>,
    pub action: String,
    #[serde(default)]
    pub params: BTreeMap<String, u64>,
}

/// One key's match value, canonical: bits outside a mask or prefix are zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MatchValue {
    Exact(u64),
    /// value, prefix length
    Lpm(u64, u32),
    /// value, mask
    Ternary(u64, u64),
    /// lo, hi (inclusive)
    Range(u64, u64),
}

fn full(bitwidth: u32) -> u64 {
    if bitwidth >= 64 {
        u64::MAX
    } else {
        (1u64 << bitwidth) - 1
    }
}

fn prefix_mask(bitwidth: u32, len: u32) -> u64 {
    if len == 0 {
        0
    } else {
        full(bitwidth) & (full(bitwidth) << (bitwidth - len.min(bitwidth)))
    }
}

impl MatchValue {
    /// Whether key value `v` (of `bitwidth` bits) matches.
    pub fn matches(&self, bitwidth: u32, v: u64) -> bool {
        match *self {
            Self::Exact(x) => v == x,
            Self::Lpm(x, len) => v & prefix_mask(bitwidth, len) == x,
            Self::Ternary(x, m) => v & m == x,
            Self::Range(lo, hi) => lo <= v && v <= hi,
        }
    }

    /// Whether some value matches both.
    pub fn overlaps(&self, other: &Self, bitwidth: u32) -> bool {
        match (self.as_mask(bitwidth), other.as_mask(bitwidth)) {
            (Some((a, ma)), Some((b, mb))) => (a ^ b) & ma & mb == 0,
            _ => {
                let (alo, ahi) = self.bounds(bitwidth);
                let (blo, bhi) = other.bounds(bitwidth);
                // A range against a masked value: test the mask's values inside the range
                // only when the mask is a prefix (an interval); otherwise be conservative.
                alo <= bhi && blo <= ahi
            }
        }
    }

    /// Value and mask, for the kinds that are masks.
    fn as_mask(&self, bitwidth: u32) -> Option<(u64, u64)> {
        match *self {
            Self::Exact(x) => Some((x, full(bitwidth))),
            Self::Lpm(x, len) => Some((x, prefix_mask(bitwidth, len))),
            Self::Ternary(x, m) => Some((x, m)),
            Self::Range(..) => None,
        }
    }

    /// The smallest and largest matching value.
    fn bounds(&self, bitwidth: u32) -> (u64, u64) {
        match *self {
            Self::Range(lo, hi) => (lo, hi),
            _ => {
                let (x, m) = self.as_mask(bitwidth).unwrap_or((0, 0));
                (x, x | (full(bitwidth) & !m))
            }
        }
    }

    /// How specific it is (prefix length, mask bits, or range narrowness), for ordering
    /// equal-priority entries the way the emulator matches them.
    pub fn specificity(&self, bitwidth: u32) -> u32 {
        match *self {
            Self::Exact(_) => bitwidth,
            Self::Lpm(_, len) => len,
            Self::Ternary(_, m) => m.count_ones(),
            Self::Range(lo, hi) => bitwidth - (64 - (hi - lo).leading_zeros()).min(bitwidth),
        }
    }
}

fn parse_u64(s: &str) -> Option<u64> {
    let s = s.trim();
    if let Ok(ip) = s.parse::<Ipv4Addr>() {
        return Some(u32::from(ip).into());
    }
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// Parses a key's value by its match kind: `10.0.0.0/8` (lpm, ternary), `value&&&mask`
/// (ternary), `80-443` (range), a number (decimal or `0x…`) or an IPv4 address (exact, or a
/// full-width lpm / ternary match, or a one-value range). Returns `None` for a wildcard
/// (prefix 0, mask 0, the full range): P4Runtime wants those omitted.
pub fn parse_match(kind: MatchKind, bitwidth: u32, s: &str) -> Result<Option<MatchValue>, P4Error> {
    match_value(kind, bitwidth, s).map_err(P4Error::InvalidMatch)
}

fn match_value(kind: MatchKind, bitwidth: u32, s: &str) -> Result<Option<MatchValue>, String> {
    let f = full(bitwidth);
    let bad = |hint: &str| format!("{s:?} is not a valid {} value{hint}", kind.as_str());
    let num = |v: &str| {
        parse_u64(v)
            .filter(|x| *x <= f)
            .ok_or_else(|| bad(" (a number, 0x…, or an IPv4 address, within the key's width)"))
    };
    let value = match kind {
        MatchKind::Exact | MatchKind::Optional => MatchValue::Exact(num(s)?),
        MatchKind::Lpm | MatchKind::Ternary => {
            if let Some((v, len)) = s.split_once('/') {
                let v = num(v)?;
                let len: u32 = len
                    .trim()
                    .parse()
                    .ok()
                    .filter(|l| *l <= bitwidth)
                    .ok_or_else(|| bad(" (prefix length beyond the key's width)"))?;
                let m = prefix_mask(bitwidth, len);
                if kind == MatchKind::Lpm {
                    MatchValue::Lpm(v & m, len)
                } else {
                    MatchValue::Ternary(v & m, m)
                }
            } else if let Some((v, m)) = s.split_once("&&&") {
                if kind == MatchKind::Lpm {
                    return Err(bad(" (lpm takes value/prefix-length)"));
                }
                let (v, m) = (num(v)?, num(m)?);
                MatchValue::Ternary(v & m, m)
            } else {
                let v = num(s)?;
                if kind == MatchKind::Lpm {
                    MatchValue::Lpm(v, bitwidth)
                } else {
                    MatchValue::Ternary(v, f)
                }
            }
        }
        MatchKind::Range => {
            let (lo, hi) = s.split_once('-').unwrap_or((s, s));
            let (lo, hi) = (num(lo)?, num(hi)?);
            if lo > hi {
                return Err(bad(" (lo-hi with lo ≤ hi)"));
            }
            MatchValue::Range(lo, hi)
        }
    };
    let wildcard = matches!(value, MatchValue::Lpm(_, 0) | MatchValue::Ternary(_, 0))
        || value == MatchValue::Range(0, f);
    Ok((!wildcard).then_some(value))
}

fn show(name: &str, bitwidth: u32, v: u64) -> String {
    if bitwidth == 32 && name.ends_with("addr") {
        Ipv4Addr::from(v as u32).to_string()
    } else {
        v.to_string()
    }
}

fn show_match(name: &str, bitwidth: u32, m: MatchValue) -> String {
    match m {
        MatchValue::Exact(v) => show(name, bitwidth, v),
        MatchValue::Lpm(v, len) => format!("{}/{len}", show(name, bitwidth, v)),
        MatchValue::Ternary(v, mask) => {
            let len = mask.count_ones();
            if mask == prefix_mask(bitwidth, len) {
                if len == bitwidth {
                    show(name, bitwidth, v)
                } else {
                    format!("{}/{len}", show(name, bitwidth, v))
                }
            } else {
                format!("{}&&&{mask:#x}", show(name, bitwidth, v))
            }
        }
        MatchValue::Range(lo, hi) if lo == hi => lo.to_string(),
        MatchValue::Range(lo, hi) => format!("{lo}-{hi}"),
    }
}

/// What identifies an entry in a switch's table (P4Runtime: table, match, priority).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EntryKey {
    pub table: usize,
    /// `(key index, value)` in key order; wildcards omitted.
    pub matches: Vec<(usize, MatchValue)>,
    pub priority: u32,
}

impl EntrySpec {
    /// The INT source entry for every IPv4 flow entering a switch (at priority 1, the lowest:
    /// `monitor` intents override it), asking for `instruction_bitmap` over up to `max_hop`
    /// hops. On every switch (`switch: None`; a P4Runtime driver writes only its own).
    pub fn int_source_everywhere(instruction_bitmap: u16, max_hop: u8) -> Self {
        Self {
            switch: None,
            table: "int_watchlist".into(),
            priority: 1,
            matches: BTreeMap::new(),
            action: "int_source".into(),
            params: [
                (
                    "instruction_bitmap".to_string(),
                    u64::from(instruction_bitmap),
                ),
                ("max_hop".to_string(), u64::from(max_hop)),
            ]
            .into(),
        }
    }
}

/// An entry checked against a P4Info, in canonical form.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Entry {
    pub key: EntryKey,
    /// The switch it is for (`None`: every switch, the emulator's control channel only).
    pub switch: Option<u32>,
    /// Index into [`P4Info::actions`].
    pub action: usize,
    /// The action's parameters, in its parameter order.
    pub params: Vec<u64>,
}

impl Entry {
    /// Whether this is a keyless table's default action (written by modifying the table's
    /// default entry: such a table takes no inserts).
    pub fn is_default(&self, info: &P4Info) -> bool {
        info.tables[self.key.table].keys.is_empty()
    }

    /// Checks `spec` against `info`, naming the table, key, action or parameter at fault.
    pub fn new(info: &P4Info, spec: &EntrySpec) -> Result<Self, P4Error> {
        let (ti, table) = info.table(&spec.table)?;
        let (ai, action) = info.action(&spec.action)?;
        if !table.entry_actions.contains(&ai) {
            return Err(P4Error::ActionNotAllowed {
                table: table.name.clone(),
                action: action.name.clone(),
                allowed: table
                    .entry_actions
                    .iter()
                    .map(|i| info.actions[*i].name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        let mut params = Vec::with_capacity(action.params.len());
        for p in &action.params {
            let v = *spec
                .params
                .get(&p.name)
                .ok_or_else(|| P4Error::MissingParam {
                    action: action.name.clone(),
                    param: p.name.clone(),
                })?;
            if v > full(p.bitwidth) {
                return Err(P4Error::ParamTooWide {
                    action: action.name.clone(),
                    param: p.name.clone(),
                    value: v,
                    bitwidth: p.bitwidth,
                });
            }
            params.push(v);
        }
        if let Some(extra) = spec
            .params
            .keys()
            .find(|k| !action.params.iter().any(|p| &p.name == *k))
        {
            return Err(P4Error::UnknownParam {
                action: action.name.clone(),
                param: extra.clone(),
                known: action
                    .params
                    .iter()
                    .map(|p| p.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        let mut matches = Vec::new();
        for (name, value) in &spec.matches {
            let i = table.key(name).ok_or_else(|| P4Error::UnknownKey {
                table: table.name.clone(),
                key: name.clone(),
                known: key_names(table),
            })?;
            let k = &table.keys[i];
            let m = parse_match(k.kind, k.bitwidth, value).map_err(|_| P4Error::BadValue {
                table: table.name.clone(),
                key: name.clone(),
                value: value.clone(),
                kind: k.kind.as_str(),
                bitwidth: k.bitwidth,
                hint: match k.kind {
                    MatchKind::Lpm => " (e.g. 10.0.0.0/8)",
                    MatchKind::Ternary => " (e.g. 10.0.0.0/8 or 0x0a000000&&&0xff000000)",
                    MatchKind::Range => " (e.g. 80-443)",
                    _ => "",
                },
            })?;
            if let Some(m) = m {
                matches.push((i, m));
            }
        }
        matches.sort();
        for (i, k) in table.keys.iter().enumerate() {
            if k.kind == MatchKind::Exact && !matches.iter().any(|(j, _)| *j == i) {
                return Err(P4Error::MissingExactKey {
                    table: table.name.clone(),
                    key: k.name.clone(),
                });
            }
        }
        let needs = table.needs_priority();
        if needs && spec.priority == 0 {
            return Err(P4Error::Priority {
                table: table.name.clone(),
                expected: "≥ 1",
                why: "it has ternary or range keys",
                got: 0,
            });
        }
        if !needs && spec.priority != 0 {
            return Err(P4Error::Priority {
                table: table.name.clone(),
                expected: "0",
                why: "it has only exact and lpm keys",
                got: spec.priority,
            });
        }
        Ok(Self {
            key: EntryKey {
                table: ti,
                matches,
                priority: spec.priority,
            },
            switch: spec.switch,
            action: ai,
            params,
        })
    }

    /// The entry written back with canonical values (what a Read shows).
    pub fn spec(&self, info: &P4Info) -> EntrySpec {
        let table = &info.tables[self.key.table];
        let action = &info.actions[self.action];
        EntrySpec {
            switch: self.switch,
            table: table.name.clone(),
            priority: self.key.priority,
            matches: self
                .key
                .matches
                .iter()
                .map(|(i, m)| {
                    let k = &table.keys[*i];
                    (k.name.clone(), show_match(&k.name, k.bitwidth, *m))
                })
                .collect(),
            action: action.name.clone(),
            params: action
                .params
                .iter()
                .zip(&self.params)
                .map(|(p, v)| (p.name.clone(), *v))
                .collect(),
        }
    }

    /// Whether key values `values` (one per key, in the table's key order) match.
    pub fn matches(&self, info: &P4Info, values: &[u64]) -> bool {
        let keys = &info.tables[self.key.table].keys;
        self.key.matches.iter().all(|(i, m)| {
            values
                .get(*i)
                .is_some_and(|v| m.matches(keys[*i].bitwidth, *v))
        })
    }

    /// Whether some packet matches both (same table; a missing key matches anything).
    pub fn overlaps(&self, info: &P4Info, other: &Entry) -> bool {
        if self.key.table != other.key.table {
            return false;
        }
        let keys = &info.tables[self.key.table].keys;
        self.key.matches.iter().all(|(i, a)| {
            other
                .key
                .matches
                .iter()
                .find(|(j, _)| j == i)
                .is_none_or(|(_, b)| a.overlaps(b, keys[*i].bitwidth))
        })
    }

    /// Sum of the keys' specificity: equal-priority entries are tried most specific first.
    pub fn specificity(&self, info: &P4Info) -> u32 {
        let keys = &info.tables[self.key.table].keys;
        self.key
            .matches
            .iter()
            .map(|(i, m)| m.specificity(keys[*i].bitwidth))
            .sum()
    }

    /// A parameter by name (0 when the action has no such parameter).
    pub fn param(&self, info: &P4Info, name: &str) -> u64 {
        info.actions[self.action]
            .params
            .iter()
            .position(|p| p.name == name)
            .and_then(|i| self.params.get(i).copied())
            .unwrap_or(0)
    }
}

fn key_names(t: &TableInfo) -> String {
    t.keys
        .iter()
        .map(|k| k.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}
