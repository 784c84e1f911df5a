//! [`kplane_p4::Entry`] ↔ P4Runtime `TableEntry`, with the ids of the P4Info and values as
//! P4Runtime's canonical byte strings (big endian, no leading zero bytes).

use kplane_p4::{Entry, EntryKey, MatchKind, MatchValue, P4Info};

use crate::proto::{Action, FieldMatch, TableAction, TableEntry, field_match, table_action};

/// `v` as the shortest big-endian byte string (zero is one zero byte).
fn bytes(v: u64) -> Vec<u8> {
    let b = v.to_be_bytes();
    let skip = (v.leading_zeros() / 8).min(7) as usize;
    b[skip..].to_vec()
}

/// A big-endian byte string of any length as a number, if it fits.
fn number(b: &[u8]) -> Result<u64, String> {
    let b = match b.iter().position(|x| *x != 0) {
        Some(i) => &b[i..],
        None => return Ok(0),
    };
    if b.len() > 8 {
        return Err(format!("a value of {} bytes", b.len()));
    }
    Ok(b.iter().fold(0u64, |acc, x| acc << 8 | u64::from(*x)))
}

/// The P4Runtime form of `e`.
pub fn to_table_entry(info: &P4Info, e: &Entry) -> TableEntry {
    let table = &info.tables[e.key.table];
    let action = &info.actions[e.action];
    TableEntry {
        table_id: table.id,
        r#match: e
            .key
            .matches
            .iter()
            .map(|(i, m)| FieldMatch {
                field_id: table.keys[*i].id,
                field_match_type: Some(match *m {
                    MatchValue::Exact(v) => {
                        field_match::FieldMatchType::Exact(field_match::Exact { value: bytes(v) })
                    }
                    MatchValue::Lpm(v, len) => field_match::FieldMatchType::Lpm(field_match::Lpm {
                        value: bytes(v),
                        prefix_len: len as i32,
                    }),
                    MatchValue::Ternary(v, mask) => {
                        field_match::FieldMatchType::Ternary(field_match::Ternary {
                            value: bytes(v),
                            mask: bytes(mask),
                        })
                    }
                    MatchValue::Range(lo, hi) => {
                        field_match::FieldMatchType::Range(field_match::Range {
                            low: bytes(lo),
                            high: bytes(hi),
                        })
                    }
                }),
            })
            .collect(),
        action: Some(TableAction {
            r#type: Some(table_action::Type::Action(Action {
                action_id: action.id,
                params: action
                    .params
                    .iter()
                    .zip(&e.params)
                    .map(|(p, v)| crate::proto::action::Param {
                        param_id: p.id,
                        value: bytes(*v),
                    })
                    .collect(),
            })),
        }),
        priority: e.key.priority as i32,
        is_default_action: e.is_default(info),
        ..TableEntry::default()
    }
}

/// A `TableEntry` read from a switch, typed by `info` (the switch is `switch`).
pub(crate) fn from_table_entry(
    info: &P4Info,
    t: &TableEntry,
    switch: u32,
) -> Result<Entry, String> {
    let ti = info
        .table_by_id(t.table_id)
        .ok_or_else(|| format!("unknown table id {}", t.table_id))?;
    let table = &info.tables[ti];
    let mut matches = Vec::with_capacity(t.r#match.len());
    for m in &t.r#match {
        let i = table
            .keys
            .iter()
            .position(|k| k.id == m.field_id)
            .ok_or_else(|| format!("{}: unknown field id {}", table.name, m.field_id))?;
        use field_match::FieldMatchType as F;
        let v = match (&m.field_match_type, table.keys[i].kind) {
            (Some(F::Exact(x)), MatchKind::Exact) => MatchValue::Exact(number(&x.value)?),
            (Some(F::Optional(x)), MatchKind::Optional) => MatchValue::Exact(number(&x.value)?),
            (Some(F::Lpm(x)), MatchKind::Lpm) => {
                MatchValue::Lpm(number(&x.value)?, x.prefix_len.max(0) as u32)
            }
            (Some(F::Ternary(x)), MatchKind::Ternary) => {
                MatchValue::Ternary(number(&x.value)?, number(&x.mask)?)
            }
            (Some(F::Range(x)), MatchKind::Range) => {
                MatchValue::Range(number(&x.low)?, number(&x.high)?)
            }
            (other, kind) => {
                return Err(format!(
                    "{}.{}: a {} key read back as {other:?}",
                    table.name,
                    table.keys[i].name,
                    kind.as_str()
                ));
            }
        };
        matches.push((i, v));
    }
    matches.sort();
    let Some(TableAction {
        r#type: Some(table_action::Type::Action(a)),
    }) = &t.action
    else {
        return Err(format!("{}: an entry without a direct action", table.name));
    };
    let ai = info
        .action_by_id(a.action_id)
        .ok_or_else(|| format!("unknown action id {}", a.action_id))?;
    let mut params = vec![0; info.actions[ai].params.len()];
    for p in &a.params {
        let i = info.actions[ai]
            .params
            .iter()
            .position(|x| x.id == p.param_id)
            .ok_or_else(|| format!("{}: unknown param id {}", info.actions[ai].name, p.param_id))?;
        params[i] = number(&p.value)?;
    }
    Ok(Entry {
        key: EntryKey {
            table: ti,
            matches,
            priority: t.priority.max(0) as u32,
        },
        switch: Some(switch),
        action: ai,
        params,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kplane_p4::EntrySpec;

    #[test]
    fn canonical_byte_strings() {
        assert_eq!(bytes(0), vec![0]);
        assert_eq!(bytes(2), vec![2]);
        assert_eq!(bytes(0x0a00_0001), vec![10, 0, 0, 1]);
        assert_eq!(number(&[0, 0, 2]).unwrap(), 2);
        assert_eq!(number(&[]).unwrap(), 0);
        assert!(number(&[1; 9]).is_err());
    }

    #[test]
    fn entries_round_trip_through_the_p4runtime_form() {
        let info = kplane_p4::kplane();
        for json in [
            r#"{"switch":1,"table":"drop_acl","priority":7,"action":"acl_drop","match":{"src_addr":"10.0.0.0/8","dst_port":"80-443","protocol":"6"}}"#,
            r#"{"switch":1,"table":"ipv4_forward","action":"set_egress","params":{"port":2},"match":{"dst_addr":"10.1.0.0/16"}}"#,
            r#"{"switch":1,"table":"int_sink_detection","priority":1,"action":"detect_ewma","params":{"measurement":0,"threshold":5000,"weight_q8":64}}"#,
            r#"{"switch":1,"table":"label_config","action":"set_labelling","params":{"interval_ns":100000,"max_hop":5,"algorithm":1,"function":2,"rest_ns":0},"match":{"egress_port":"3"}}"#,
            r#"{"switch":1,"table":"label_frequency","action":"set_label_shift","params":{"shift":2},"match":{"egress_port":"3"}}"#,
        ] {
            let spec: EntrySpec = serde_json::from_str(json).unwrap();
            let e = Entry::new(info, &spec).unwrap();
            let t = to_table_entry(info, &e);
            assert_eq!(from_table_entry(info, &t, 1).unwrap(), e, "{json}");
        }
    }
}
