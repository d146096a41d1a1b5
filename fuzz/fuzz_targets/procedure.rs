#![no_main]
//! Fuzz target `procedure`: see `lazarus::fuzzing::check_procedures`.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = lazarus::fuzzing::check_procedures(data);
});
