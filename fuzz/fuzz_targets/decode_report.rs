//! A UDP payload into the collector's report decoder.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kplane_wire::fuzzing::report(data));
