#![no_main]
//! Fuzz target `stream_log`: see `lazarus::fuzzing::decode_stream_log`.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = lazarus::fuzzing::decode_stream_log(data);
});
