#![no_main]
//! Fuzz target `resp`: see `lazarus::fuzzing::parse_resp`.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = lazarus::fuzzing::parse_resp(data);
});
