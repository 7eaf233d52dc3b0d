//! libFuzzer entry point; the target itself is `openphone_fuzz::canonical_params`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| openphone_fuzz::canonical_params::run(data));
