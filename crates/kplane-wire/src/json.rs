//! Serde helpers so decoded headers print the way network engineers read them.
#![cfg(feature = "serde")]

use serde::Serializer;

pub(crate) fn hex16<S: Serializer>(v: &u16, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&format_args!("{v:#06x}"))
}

pub(crate) fn hex8<S: Serializer>(v: &u8, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&format_args!("{v:#04x}"))
}

pub(crate) fn mac<S: Serializer>(m: &[u8; 6], s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&format_args!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        m[0], m[1], m[2], m[3], m[4], m[5]
    ))
}
