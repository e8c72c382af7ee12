//! The zero-copy prototype: byte buffers moved across a `dlopen`ed library
//! boundary, copied (today's plugin API) vs wrapped in `bytes::Bytes`.
//! `cargo run --release -p dsh-benches --example zero_copy [-- --quick]`;
//! see `benches/README.md`.

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match dsh_benches::zero_copy::main_with_args(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
