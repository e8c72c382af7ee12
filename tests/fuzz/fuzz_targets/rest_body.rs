//! libFuzzer target: [`dsh_fuzz::rest_body`] (see `tests/fuzz/README.md`).

#![no_main]
#![forbid(unsafe_code)]

libfuzzer_sys::fuzz_target!(|data: &[u8]| dsh_fuzz::rest_body(data));
