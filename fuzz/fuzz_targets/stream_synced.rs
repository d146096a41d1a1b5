#![no_main]
//! Fuzz target `stream_synced`: see `lazarus::fuzzing::decode_stream_synced`.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = lazarus::fuzzing::decode_stream_synced(data);
});
