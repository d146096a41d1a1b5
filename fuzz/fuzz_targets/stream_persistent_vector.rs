#![no_main]
//! Fuzz target `stream_persistent_vector`: see `lazarus::fuzzing::decode_stream_persistent_vector`.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = lazarus::fuzzing::decode_stream_persistent_vector(data);
});
