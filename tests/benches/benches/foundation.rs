//! The foundation benchmarks through the plugin ABI: `cargo bench -p
//! dsh-benches [-- [--quick] [host-start|subprocess|fs|collect]…]`. See
//! `tests/benches/README.md` and the `dsh_benches` crate documentation.

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match dsh_benches::main_with_args(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
