#![no_main]
//! Fuzz target `checkpoint_manifest`: see `lazarus::fuzzing::decode_checkpoint_manifest`.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = lazarus::fuzzing::decode_checkpoint_manifest(data);
});
