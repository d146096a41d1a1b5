#![no_main]
//! Fuzz target `checkpoint_block`: see `lazarus::fuzzing::decode_checkpoint_block`.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = lazarus::fuzzing::decode_checkpoint_block(data);
});
