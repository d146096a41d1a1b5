#![no_main]
//! Fuzz target `catalog`: see `lazarus::fuzzing::decode_catalog`.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = lazarus::fuzzing::decode_catalog(data);
});
