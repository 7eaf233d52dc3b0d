//! libFuzzer entry point; the target itself is `openphone_fuzz::scenario_load`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| openphone_fuzz::scenario_load::run(data));
