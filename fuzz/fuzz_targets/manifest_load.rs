//! libFuzzer entry point; the target itself is `openphone_fuzz::manifest_load`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| openphone_fuzz::manifest_load::run(data));
