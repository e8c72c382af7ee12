//! libFuzzer target: [`dsh_fuzz::manifest`] (see `tests/fuzz/README.md`).

#![no_main]
#![forbid(unsafe_code)]

libfuzzer_sys::fuzz_target!(|data: &[u8]| dsh_fuzz::manifest(data));
