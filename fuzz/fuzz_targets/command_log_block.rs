#![no_main]
//! Fuzz target `command_log_block`: see `lazarus::fuzzing::decode_command_log_block`.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = lazarus::fuzzing::decode_command_log_block(data);
});
