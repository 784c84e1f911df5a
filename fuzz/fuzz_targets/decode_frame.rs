//! A captured frame into the frame decoder, records and JSON.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    kplane_wire::fuzzing::frame(data, |d| {
        let _ = serde_json::to_string(d);
    })
});
