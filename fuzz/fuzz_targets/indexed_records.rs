#![no_main]
//! Fuzz target `indexed_records`: see `lazarus::fuzzing::decode_indexed_records`.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = lazarus::fuzzing::decode_indexed_records(data);
});
