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
//! kills its sandboxes).
//!
//! Plugin libraries are found next to the test executable
//! ([`plugin_dirs`]): this crate depends on the shipped plugins, so cargo
//! builds their libraries into `target/<profile>/deps` with your tests; a
//! plugin of your own is found there too once your test crate depends on it
//! (a `[dev-dependencies]` line). [`World::e2b_local`] also needs the
//! `e2b-local` binary (`cargo build -p e2b-local`, or `E2B_LOCAL_BIN`), and
//! the default feature `e2b-local`; without it the kit builds no E2B crate.

#![forbid(unsafe_code)]

mod plugins;
mod world;

pub use plugins::plugin_dirs;
pub use world::World;
