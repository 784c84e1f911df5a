use super::*;

fn spec(json: &str) -> EntrySpec {
    serde_json::from_str(json).unwrap()
}

fn entry(json: &str) -> Result<Entry, P4Error> {
    Entry::new(kplane(), &spec(json))
}

#[test]
fn p4c_p4info_has_the_programs_tables_with_short_names() {
    let info = kplane();
    let names: Vec<&str> = info.tables.iter().map(|t| t.name.as_str()).collect();
    for t in [
        "ipv4_forward",
        "int_watchlist",
        "int_sink_detection",
        "drop_acl",
        "label_config",
        "label_frequency",
    ] {
        assert!(names.contains(&t), "{t} in {names:?}");
    }
    let (_, acl) = info.table("drop_acl").unwrap();
    assert_eq!(acl.size, 256);
    assert!(acl.needs_priority());
    assert_eq!(acl.keys[3].name, "src_port");
    assert_eq!(acl.keys[3].kind, MatchKind::Range);
    let (_, fwd) = info.table("ipv4_forward").unwrap();
    assert!(!fwd.needs_priority());
    let (_, src) = info.action("int_source").unwrap();
    assert_eq!(src.params[0].name, "instruction_bitmap");
    assert_eq!(src.params[0].bitwidth, 16);
}

#[test]
fn entries_are_checked_and_every_error_names_its_place() {
    let e = entry(r#"{"table":"nope","action":"drop"}"#).unwrap_err();
    assert!(e.to_string().contains("unknown table \"nope\""), "{e}");
    let e = entry(r#"{"table":"int_watchlist","priority":1,"action":"drop"}"#).unwrap_err();
    assert!(
        e.to_string().contains("not allowed in int_watchlist"),
        "{e}"
    );
    let e = entry(r#"{"table":"drop_acl","priority":1,"action":"NoAction"}"#).unwrap_err();
    assert!(e.to_string().contains("not allowed"), "default-only: {e}");
    let e = entry(r#"{"table":"int_watchlist","priority":1,"action":"int_source","params":{"instruction_bitmap":65280}}"#).unwrap_err();
    assert_eq!(e.to_string(), "int_source: missing parameter \"max_hop\"");
    let e = entry(r#"{"table":"ipv4_forward","action":"set_egress","params":{"port":9999}}"#)
        .unwrap_err();
    assert!(e.to_string().contains("does not fit 9 bits"), "{e}");
    let e = entry(
        r#"{"table":"drop_acl","priority":1,"action":"acl_drop","match":{"dst_port":"90-80"}}"#,
    )
    .unwrap_err();
    assert!(
        e.to_string().starts_with("drop_acl.dst_port: \"90-80\""),
        "{e}"
    );
    let e = entry(r#"{"table":"drop_acl","priority":1,"action":"acl_drop","match":{"vlan":"1"}}"#)
        .unwrap_err();
    assert!(e.to_string().contains("unknown key \"vlan\""), "{e}");
    let e = entry(r#"{"table":"drop_acl","action":"acl_drop"}"#).unwrap_err();
    assert!(e.to_string().contains("priority must be ≥ 1"), "{e}");
    let e = entry(r#"{"table":"ipv4_forward","priority":3,"action":"drop"}"#).unwrap_err();
    assert!(e.to_string().contains("priority must be 0"), "{e}");
    let e = entry(r#"{"table":"label_config","action":"set_labelling","params":{"interval_ns":1,"max_hop":2,"algorithm":0,"function":0,"rest_ns":0}}"#).unwrap_err();
    assert!(
        e.to_string().contains("exact match and must be given"),
        "{e}"
    );
    let e = entry(
        r#"{"table":"drop_acl","priority":1,"action":"acl_drop","match":{"protocol":"300"}}"#,
    )
    .unwrap_err();
    assert!(e.to_string().contains("8 bits"), "{e}");
}

#[test]
fn canonical_form_makes_equal_entries_equal() {
    let a = entry(r#"{"table":"drop_acl","priority":5,"action":"acl_drop","match":{"src_addr":"10.1.2.3/8","dst_port":"0-65535","protocol":"6"}}"#).unwrap();
    let b = entry(r#"{"table":"drop_acl","priority":5,"action":"acl_drop","match":{"src_addr":"0x0a000000&&&0xff000000","protocol":"0x6"}}"#).unwrap();
    assert_eq!(a, b, "host bits cleared, full range omitted");
    let s = a.spec(kplane());
    assert_eq!(s.matches["src_addr"], "10.0.0.0/8");
    assert_eq!(s.matches["protocol"], "6");
    assert!(!s.matches.contains_key("dst_port"));
    assert_eq!(Entry::new(kplane(), &s).unwrap(), a, "the spec round-trips");
    let w = entry(r#"{"table":"ipv4_forward","action":"drop","match":{"dst_addr":"0.0.0.0/0"}}"#)
        .unwrap();
    assert!(w.key.matches.is_empty(), "prefix 0 is a wildcard");
}

#[test]
fn matching_and_overlap_follow_the_match_kinds() {
    let info = kplane();
    let ip = |s: &str| u64::from(u32::from(s.parse::<std::net::Ipv4Addr>().unwrap()));
    let e = entry(r#"{"table":"drop_acl","priority":5,"action":"acl_drop","match":{"dst_addr":"10.0.0.0/8","dst_port":"80-443","protocol":"6"}}"#).unwrap();
    assert!(e.matches(info, &[ip("1.2.3.4"), ip("10.9.0.1"), 6, 1000, 443]));
    assert!(!e.matches(info, &[ip("1.2.3.4"), ip("10.9.0.1"), 17, 1000, 443]));
    assert!(!e.matches(info, &[ip("1.2.3.4"), ip("11.0.0.1"), 6, 1000, 80]));
    assert!(!e.matches(info, &[ip("1.2.3.4"), ip("10.0.0.1"), 6, 1000, 444]));
    let over = |j: &str| e.overlaps(info, &entry(j).unwrap());
    assert!(over(
        r#"{"table":"drop_acl","priority":1,"action":"acl_drop","match":{"dst_addr":"10.1.0.0/16"}}"#
    ));
    assert!(over(
        r#"{"table":"drop_acl","priority":1,"action":"acl_drop","match":{"dst_port":"400-500"}}"#
    ));
    assert!(!over(
        r#"{"table":"drop_acl","priority":1,"action":"acl_drop","match":{"dst_port":"444-500"}}"#
    ));
    assert!(!over(
        r#"{"table":"drop_acl","priority":1,"action":"acl_drop","match":{"dst_addr":"11.0.0.0/8"}}"#
    ));
    assert!(!over(
        r#"{"table":"drop_acl","priority":1,"action":"acl_drop","match":{"protocol":"17"}}"#
    ));
}
