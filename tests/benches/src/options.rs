//! Command-line options of the benchmark binary.
//!
//! `cargo bench -p dsh-benches [-- [--quick] [SECTION…]]`; cargo itself
//! adds `--bench`. `--child TASK…` is how the benchmark re-executes itself
//! for the measurements that need a fresh process.

use anyhow::{Result, bail};

use crate::child::ChildTask;

/// One group of figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SectionName {
    Subprocess,
    Fs,
    HostStart,
    Collect,
}

impl SectionName {
    /// Every section, in the order they run.
    pub const ALL: [SectionName; 4] = [
        SectionName::HostStart,
        SectionName::Subprocess,
        SectionName::Fs,
        SectionName::Collect,
    ];

    /// The name on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            SectionName::Subprocess => "subprocess",
            SectionName::Fs => "fs",
            SectionName::HostStart => "host-start",
            SectionName::Collect => "collect",
        }
    }

    fn parse(word: &str) -> Option<SectionName> {
        SectionName::ALL
            .into_iter()
            .find(|section| section.as_str() == word)
    }
}

/// What this invocation does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Invocation {
    /// Measure and print the table.
    Run(RunOptions),
    /// Perform one measurement in this fresh process and report it.
    Child(ChildTask),
}

/// Options of a measuring run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOptions {
    /// Fewer rounds and iterations (a smoke run while iterating; the
    /// figures are noisier).
    pub quick: bool,
    /// The sections to run, in [`SectionName::ALL`] order.
    pub sections: Vec<SectionName>,
}

/// Parses the arguments after the program name. `quick_env` is the value
/// of `DSH_BENCH_QUICK` (any value but empty or `0` means quick).
pub fn parse(args: &[String], quick_env: Option<&str>) -> Result<Invocation> {
    if let Some(position) = args.iter().position(|arg| arg == "--child") {
        return Ok(Invocation::Child(ChildTask::parse(&args[position + 1..])?));
    }
    let mut quick = quick_env.is_some_and(|value| !value.is_empty() && value != "0");
    let mut chosen = Vec::new();
    for arg in args {
        match arg.as_str() {
            // Added by `cargo bench` to every harness-less target.
            "--bench" => {}
            "--quick" => quick = true,
            word => match SectionName::parse(word) {
                Some(section) => chosen.push(section),
                None => bail!(
                    "dsh-benches: unknown argument {word:?} (expected --quick or a section: {})",
                    SectionName::ALL.map(SectionName::as_str).join(", ")
                ),
            },
        }
    }
    let sections = SectionName::ALL
        .into_iter()
        .filter(|section| chosen.is_empty() || chosen.contains(section))
        .collect();
    Ok(Invocation::Run(RunOptions { quick, sections }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Vec<String> {
        words.iter().map(|word| (*word).to_owned()).collect()
    }

    #[test]
    fn cargo_bench_runs_every_section_in_full() {
        let parsed = parse(&args(&["--bench"]), None).expect("parse");
        assert_eq!(
            parsed,
            Invocation::Run(RunOptions {
                quick: false,
                sections: SectionName::ALL.to_vec()
            })
        );
    }

    #[test]
    fn sections_keep_the_run_order_and_quick_comes_from_flag_or_env() {
        let parsed =
            parse(&args(&["--bench", "fs", "host-start", "--quick"]), None).expect("parse");
        assert_eq!(
            parsed,
            Invocation::Run(RunOptions {
                quick: true,
                sections: vec![SectionName::HostStart, SectionName::Fs]
            })
        );
        let Invocation::Run(env) = parse(&[], Some("1")).expect("parse") else {
            panic!("a run");
        };
        assert!(env.quick);
        for off in ["", "0"] {
            let Invocation::Run(options) = parse(&[], Some(off)).expect("parse") else {
                panic!("a run");
            };
            assert!(!options.quick, "DSH_BENCH_QUICK={off:?}");
        }
    }

    #[test]
    fn an_unknown_argument_is_refused_with_the_choices() {
        let err = parse(&args(&["--bench", "disk"]), None).expect_err("unknown");
        assert_eq!(
            err.to_string(),
            "dsh-benches: unknown argument \"disk\" (expected --quick or a section: host-start, subprocess, fs, collect)"
        );
    }

    #[test]
    fn child_invocations_are_recognised() {
        let parsed = parse(&args(&["--bench", "--child", "host-start"]), None).expect("parse");
        assert_eq!(parsed, Invocation::Child(ChildTask::HostStart));
    }
}
