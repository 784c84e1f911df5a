//! The switch tables, typed by p4c's P4Info of `p4/kplane_int.p4` (through `kplane-p4`):
//! entries are checked against it and matched the way the P4 tables match (lpm, ternary,
//! range, exact; highest priority, then the most specific, wins). Entries are identified as
//! P4Runtime identifies them — (switch, table, match, priority) — so inserting one twice,
//! or modifying or deleting one that is not there, is an error, as on a real switch.

use crate::EmulatorError;
use kplane_p4::{Entry, EntryKey, EntrySpec, P4Info};
use serde::{Deserialize, Serialize};

/// The P4Info every entry is checked against.
pub fn p4info() -> &'static P4Info {
    kplane_p4::kplane()
}

/// The tables this emulator implements, each with its default action (what a miss does),
/// checked against the P4Info by a test.
pub const IMPLEMENTED: &[(&str, &str)] = &[
    ("ipv4_forward", "ecmp"),
    ("int_watchlist", "NoAction"),
    ("int_sink_detection", "detect_noop"),
    ("drop_acl", "NoAction"),
    ("label_config", "NoAction"),
    ("label_frequency", "NoAction"),
];

/// The P4 program's provisioning tables (a switch's identity and collector, SQR's settings,
/// its host-facing ports), which the P4Runtime driver writes at start: the emulator takes all
/// of it from its topology and configuration, so no entry reaches these.
pub const FROM_TOPOLOGY: &[&str] = &["switch_config", "probe_config", "sink_ports"];

/// An installed entry: the checked entry and its canonical spec (names, for the packet path).
#[derive(Clone, Debug, PartialEq)]
pub struct Rule {
    pub entry: Entry,
    pub spec: EntrySpec,
    specificity: u32,
}

impl Rule {
    /// Checks `spec` against the P4Info.
    pub fn new(spec: &EntrySpec) -> Result<Self, EmulatorError> {
        let entry = Entry::new(p4info(), spec)?;
        Ok(Self {
            spec: entry.spec(p4info()),
            specificity: entry.specificity(p4info()),
            entry,
        })
    }

    pub fn param(&self, name: &str) -> u64 {
        self.entry.param(p4info(), name)
    }

    fn same_key(&self, switch: Option<u32>, key: &EntryKey) -> bool {
        self.entry.switch == switch && &self.entry.key == key
    }
}

/// One change of a write batch (P4Runtime's Update).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase", tag = "type", content = "entry")]
pub enum Update {
    Insert(EntrySpec),
    Modify(EntrySpec),
    Delete(EntrySpec),
}

/// The tables, in the order of [`IMPLEMENTED`]; the packet path addresses them by index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TableId {
    Ipv4Forward = 0,
    IntWatchlist,
    IntSinkDetection,
    DropAcl,
    LabelConfig,
    LabelFrequency,
}

impl TableId {
    pub fn of(name: &str) -> Option<Self> {
        Some(match name {
            "ipv4_forward" => Self::Ipv4Forward,
            "int_watchlist" => Self::IntWatchlist,
            "int_sink_detection" => Self::IntSinkDetection,
            "drop_acl" => Self::DropAcl,
            "label_config" => Self::LabelConfig,
            "label_frequency" => Self::LabelFrequency,
            _ => return None,
        })
    }
}

/// Every table's entries.
#[derive(Clone, Debug, Default)]
pub struct Tables {
    entries: [Vec<Rule>; 6],
}

impl Tables {
    fn table_of(&mut self, r: &Rule) -> Result<&mut Vec<Rule>, EmulatorError> {
        let id = TableId::of(&r.spec.table)
            .ok_or_else(|| EmulatorError::NotEmulated(r.spec.table.clone()))?;
        Ok(&mut self.entries[id as usize])
    }

    /// Adds an entry; one with the same switch, match and priority is an error.
    pub fn insert(&mut self, r: Rule) -> Result<(), EmulatorError> {
        let v = self.table_of(&r)?;
        if v.iter().any(|x| x.same_key(r.entry.switch, &r.entry.key)) {
            return Err(EmulatorError::EntryExists(r.spec.table.clone()));
        }
        v.push(r);
        // Highest priority first, then the most specific; stable for equal ones.
        v.sort_by(|a, b| {
            (b.entry.key.priority, b.specificity).cmp(&(a.entry.key.priority, a.specificity))
        });
        Ok(())
    }

    /// Replaces the action of an existing entry.
    pub fn modify(&mut self, r: Rule) -> Result<(), EmulatorError> {
        let v = self.table_of(&r)?;
        let x = v
            .iter_mut()
            .find(|x| x.same_key(r.entry.switch, &r.entry.key))
            .ok_or_else(|| EmulatorError::NoSuchEntry {
                table: r.spec.table.clone(),
                action: "modify",
            })?;
        *x = r;
        Ok(())
    }

    /// Removes an entry (its action is not compared).
    pub fn delete(&mut self, r: &Rule) -> Result<(), EmulatorError> {
        let v = self.table_of(r)?;
        let before = v.len();
        v.retain(|x| !x.same_key(r.entry.switch, &r.entry.key));
        if v.len() == before {
            return Err(EmulatorError::NoSuchEntry {
                table: r.spec.table.clone(),
                action: "delete",
            });
        }
        Ok(())
    }

    /// Applies a batch all or nothing: on the first failing update nothing changes, and
    /// the error carries that update's index.
    pub fn write(&mut self, updates: &[Update]) -> Result<(), (usize, EmulatorError)> {
        let mut next = self.clone();
        for (i, u) in updates.iter().enumerate() {
            let r = match u {
                Update::Insert(s) | Update::Modify(s) | Update::Delete(s) => {
                    Rule::new(s).map_err(|e| (i, e))?
                }
            };
            match u {
                Update::Insert(_) => next.insert(r),
                Update::Modify(_) => next.modify(r),
                Update::Delete(_) => next.delete(&r),
            }
            .map_err(|e| (i, e))?;
        }
        *self = next;
        Ok(())
    }

    pub fn clear(&mut self, table: &str) -> usize {
        TableId::of(table).map_or(0, |id| std::mem::take(&mut self.entries[id as usize]).len())
    }

    pub fn entries(&self, table: &str) -> &[Rule] {
        TableId::of(table).map_or(&[], |id| self.entries[id as usize].as_slice())
    }

    /// Every entry of every table.
    pub fn all(&self) -> impl Iterator<Item = &Rule> {
        self.entries.iter().flatten()
    }

    /// The winning entry of `table` at switch `node_id` for key `values`.
    pub fn lookup(&self, table: &str, node_id: u32, values: &[u64]) -> Option<&Rule> {
        self.lookup_id(TableId::of(table)?, node_id, values)
    }

    /// [`Tables::lookup`] by table id (the packet path).
    #[inline]
    pub fn lookup_id(&self, table: TableId, node_id: u32, values: &[u64]) -> Option<&Rule> {
        self.entries[table as usize].iter().find(|r| {
            r.entry.switch.is_none_or(|s| s == node_id) && r.entry.matches(p4info(), values)
        })
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

    fn rule(json: &str) -> Rule {
        Rule::new(&spec(json)).unwrap()
    }

    #[test]
    fn the_emulator_implements_every_table_and_action_of_the_p4info() {
        let info = p4info();
        let mut tables: Vec<&str> = info.tables.iter().map(|t| t.name.as_str()).collect();
        tables.sort();
        let mut implemented: Vec<&str> = IMPLEMENTED
            .iter()
            .map(|(t, _)| *t)
            .chain(FROM_TOPOLOGY.iter().copied())
            .collect();
        implemented.sort();
        assert_eq!(tables, implemented, "every table, both ways");
        for (t, default) in IMPLEMENTED {
            let (_, table) = info.table(t).unwrap();
            let (a, _) = info.action(default).unwrap();
            assert!(
                table.entry_actions.contains(&a) || table.default_only_actions.contains(&a),
                "{t}: default {default} is one of its actions"
            );
        }
    }

    #[test]
    fn matching_follows_priority_and_prefix_length() {
        let mut t = Tables::default();
        for j in [
            r#"{"table":"ipv4_forward","action":"set_egress","params":{"port":1},"match":{"dst_addr":"10.0.0.0/8"}}"#,
            r#"{"table":"ipv4_forward","action":"set_egress","params":{"port":2},"match":{"dst_addr":"10.1.0.0/16"}}"#,
            r#"{"switch":3,"table":"drop_acl","action":"acl_drop","priority":5,"match":{"dst_port":"80-443","protocol":"6"}}"#,
        ] {
            t.insert(rule(j)).unwrap();
        }
        let ip = |s: &str| u64::from(u32::from(s.parse::<std::net::Ipv4Addr>().unwrap()));
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

    #[test]
    fn writes_are_keyed_like_p4runtime_and_batches_are_all_or_nothing() {
        let mut t = Tables::default();
        let a = r#"{"switch":1,"table":"drop_acl","priority":5,"action":"acl_drop","match":{"src_addr":"10.0.0.1"}}"#;
        t.write(&[Update::Insert(spec(a))]).unwrap();
        let e = t.write(&[Update::Insert(spec(a))]).unwrap_err();
        assert_eq!(
            (e.0, e.1.to_string()),
            (0, "drop_acl: the entry already exists".into())
        );
        // The second update fails: the first is not applied either.
        let b = r#"{"switch":1,"table":"drop_acl","priority":6,"action":"acl_drop","match":{"src_addr":"10.0.0.2"}}"#;
        let missing = r#"{"switch":1,"table":"drop_acl","priority":7,"action":"acl_drop"}"#;
        let e = t
            .write(&[Update::Insert(spec(b)), Update::Delete(spec(missing))])
            .unwrap_err();
        assert_eq!(e.0, 1);
        assert_eq!(t.entries("drop_acl").len(), 1);
        t.write(&[Update::Delete(spec(a))]).unwrap();
        assert!(t.is_empty("drop_acl"));
    }
}
