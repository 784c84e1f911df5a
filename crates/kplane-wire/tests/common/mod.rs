//! The library's samples are the test cases.
#![allow(unused_imports, dead_code)]

pub use kplane_wire::samples::{
    hops, int_md_geneve, ip, options, tr_v05_local_payload, tr_v10_6hop_payload,
    tr_v20_5hop_payload,
};

pub fn cases() -> Vec<(&'static str, Vec<u8>)> {
    kplane_wire::samples::all()
}
