#![no_main]
//! Fuzz target `frame`: see `lazarus::fuzzing::decode_frames`.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = lazarus::fuzzing::decode_frames(data);
});
