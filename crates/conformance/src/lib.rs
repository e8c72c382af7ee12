//! The dsh conformance kit: one provider-neutral suite for the `fs` and
//! `subprocess` seams (docs/design.md §5, §9).
//!
//! Every promise the seam traits of `dsh-plugin-api` make in their doc
//! comments is a named case here. The same cases run against the local
//! composition, the E2B composition on `e2b-local`, and any third-party
//! provider, in-process, through the plain traits:
//!
//! ```no_run
//! # async fn demo(fs: std::sync::Arc<dyn dsh_plugin_api::fs::FsProvider>) {
//! use dsh_conformance::{KitOptions, World, run};
//! let world = World { fs: Some(fs), subprocess: None };
//! let report = run(&world, &KitOptions::default(), |case| println!("{case}")).await;
//! assert!(report.is_success(), "{report}");
//! # }
//! ```
//!
//! The kit assumes a POSIX world with the tools every Debian or E2B base
//! image has (`sh`, `bash`, `cat`, `printf`, `sleep`, `kill`, `ps`, `tput`,
//! `stty`, coreutils); every path it touches lies under a unique scratch
//! directory it creates in the world and removes afterwards, and every wait
//! is bounded, so a broken provider fails cases instead of hanging the run.
//! A case the world cannot support (no `fs`, a read-only `fs`, no
//! terminals, no `python3` for the one case that needs it) is reported
//! skipped with the reason, never passed. An `fs` confined to a directory
//! ([`KitOptions::fs_confined_to`]) is checked for its confinement instead
//! of for reaching `/` ([`FsReach`]).

#![forbid(unsafe_code)]

mod cases;
mod check;
mod commands;
mod context;
mod fixtures;
mod options;
mod patterns;
mod process_table;
mod registry;
mod report;
mod runner;
mod scratch;

pub use options::{DEFAULT_CASE_TIMEOUT, KitOptions, World};
pub use registry::{CaseInfo, FsReach, Need, cases};
pub use report::{CaseReport, Outcome, Report, Seam};
pub use runner::run;
pub use scratch::SCRATCH_PREFIX;
