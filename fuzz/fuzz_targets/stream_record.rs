#![no_main]
//! Fuzz target `stream_record`: see `lazarus::fuzzing::decode_stream_record`.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = lazarus::fuzzing::decode_stream_record(data);
});
