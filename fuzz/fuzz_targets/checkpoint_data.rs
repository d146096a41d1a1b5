#![no_main]
//! Fuzz target `checkpoint_data`: see `lazarus::fuzzing::decode_checkpoint_data`.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = lazarus::fuzzing::decode_checkpoint_data(data);
});
