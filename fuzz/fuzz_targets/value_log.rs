#![no_main]
//! Fuzz target `value_log`: see `lazarus::fuzzing::decode_value_log`.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = lazarus::fuzzing::decode_value_log(data);
});
