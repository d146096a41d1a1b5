#![no_main]
//! Fuzz target `pepoch`: see `lazarus::fuzzing::decode_pepoch`.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = lazarus::fuzzing::decode_pepoch(data);
});
