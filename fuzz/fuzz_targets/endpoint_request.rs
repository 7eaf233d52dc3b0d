//! libFuzzer entry point; the target itself is `openphone_fuzz::endpoint_request`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| openphone_fuzz::endpoint_request::run(data));
