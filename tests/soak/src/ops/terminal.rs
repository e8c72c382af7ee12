//! Terminal sessions (`dsh sh`): lines typed into an interactive bash over stdin, each printing
//! a value that appears only in its output (never in the echoed input), ending with `exit N`;
//! optionally a background job SIGKILLed from the shell.

use std::time::Duration;

use rand::Rng;
use rand::seq::IndexedRandom;

use crate::dsh::{Input, contains};
use crate::tally::counter;
use crate::worker::{Settled, Worker, expect_code};

impl Worker {
    /// One session; `with_kill` adds a job the shell SIGKILLs (`rc-137` must appear).
    pub async fn terminal(&mut self, with_kill: bool) -> bool {
        let kind = if with_kill {
            "terminal-kill"
        } else {
            "terminal"
        };
        let m = self.serial();
        let (a, b): (u32, u32) = (
            self.rng.random_range(0..1_000_000),
            self.rng.random_range(0..1_000_000),
        );
        let code = *[0, 0, 1, 3, 7].choose(&mut self.rng).unwrap_or(&0);
        let mut lines = vec![
            (
                format!("echo t-$(( {a} + {b} ))"),
                format!("t-{}", u64::from(a) + u64::from(b)),
            ),
            (
                "cd /tmp && echo \"pwd-$(pwd)\"".to_owned(),
                "pwd-/tmp".to_owned(),
            ),
            (
                format!(
                    "printf '%s\\n' x{m} > /tmp/t{m}; echo \"wc-$(wc -c < /tmp/t{m})\"; rm /tmp/t{m}"
                ),
                format!("wc-{}", format!("x{m}\n").len()),
            ),
            (
                format!("for i in 1 2 3; do echo loop-$i-{m}; done"),
                format!("loop-3-{m}"),
            ),
        ];
        if with_kill {
            lines.push((
                format!("sleep 1000.{m} & kill -9 $!; wait $!; echo \"rc-$?\""),
                "rc-137".to_owned(),
            ));
        }
        let mut chunks = Vec::new();
        for (line, _) in &lines {
            let delay = self.rng.random_range(0..150);
            chunks.push((
                Duration::from_millis(delay),
                format!("{line}\n").into_bytes(),
            ));
        }
        chunks.push((Duration::ZERO, format!("exit {code}\n").into_bytes()));
        let close = self.rng.random_bool(0.3);
        // The user's bash (rc files and all) or a bare one.
        let bare = self.rng.random_bool(0.5);
        let mut args = vec!["sh"];
        if bare {
            args.extend(["--", "bash", "--norc", "--noprofile", "-i"]);
        }
        let kill = self.kill_plan(1500);
        let manifest = self.leave_manifest();
        let Some(outcome) = self
            .dsh(kind, &manifest, &args, Input::Typed { chunks, close }, kill)
            .await
        else {
            return false;
        };
        let settled = self.settle(kind, &args, &outcome, |outcome| {
            expect_code(outcome, code)?;
            let missing: Vec<&str> = lines
                .iter()
                .map(|(_, want)| want.as_str())
                .filter(|want| !contains(&outcome.stdout, want.as_bytes()))
                .collect();
            if missing.is_empty() {
                Ok(())
            } else {
                Err(format!(
                    "the screen lacks {missing:?}; it shows {:?}",
                    outcome.stdout_text()
                ))
            }
        });
        if settled == Settled::Ok && with_kill {
            self.tally().count(counter::KILL_TERMINAL, 1);
        }
        settled != Settled::Failed
    }
}
