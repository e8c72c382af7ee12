//! dsh as the harness of your own tests.
//!
//! ```no_run
//! #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
//! async fn my_tool_edits_files() {
//!     let world = dsh_testkit::World::local().await; // or World::e2b_local()
//!     let fs = world.fs();
//!     // … drive your code against `fs` and `world.subprocess()` …
//!     world.dispose().await;
//! }
//! ```
//!
//! [`World::local`] loads the local composition (`dsh-fs-local`,
//! `dsh-subprocess-local`); [`World::e2b_local`] starts a fresh e2b-local
//! server for the test (root needed, as e2b-local itself) and loads the E2B
//! composition against it, every setting passed in the manifest — no
//! environment variable; [`World::from_yaml`] loads any manifest.
//! [`World::dispose`] disposes the plugins, then stops the server (which
//! kills its sandboxes); a world dropped without it (a failing test) is
//! disposed the same way before the drop returns, so no command it started
//! outlives the test.
//!
//! Plugin libraries are found next to the test executable
//! ([`plugin_dirs`]): this crate depends on the shipped plugins, so cargo
//! builds their libraries into `target/<profile>/deps` with your tests; a
//! plugin of your own is found there too once your test crate depends on it
//! (a `[dev-dependencies]` line). [`World::e2b_local`] also needs the
//! default feature `e2b-local` (without it the kit builds no E2B crate) and
//! the `e2b-local` binary: `E2B_LOCAL_BIN`, else the one next to the test
//! executable, else the kit builds it there from the dsh checkout it comes
//! from (`cargo build --manifest-path …/e2b-local/Cargo.toml`: minutes, once
//! per target directory — never `cargo build -p e2b-local` in your own
//! workspace, which cargo cannot do for a dependency of a dev-dependency).
//! [`World::e2b_local_with`] takes [`ServerOptions`]: the binary, ports,
//! state directory, sandbox network and more `serve` arguments.

#![forbid(unsafe_code)]

mod plugins;
mod world;

#[cfg(feature = "e2b-local")]
pub use e2b_local::harness::ServerOptions;
pub use plugins::plugin_dirs;
pub use world::World;
