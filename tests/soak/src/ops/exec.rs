//! One-shot commands (`dsh exec`): exit codes, stdout and stderr, bulk output, stdin, and
//! commands SIGKILLed inside the sandbox — by themselves, by their shell, by a concurrent `exec`
//! — or left running by a `dsh` the soak SIGKILLs.

use std::time::Duration;

use rand::Rng;
use rand::seq::IndexedRandom;

use crate::content::{Content, difference, sha256_hex};
use crate::dsh::{Input, contains};
use crate::tally::counter;
use crate::worker::{Settled, Worker, expect_code};

/// How long a command may take to report that it started.
const START_LIMIT: Duration = Duration::from_secs(60);

impl Worker {
    /// `sh -c` with arithmetic, stderr and a chosen exit code.
    pub async fn exec(&mut self) -> bool {
        const KIND: &str = "exec";
        let tag = self.serial().to_string();
        let (a, b): (u64, u64) = (
            self.rng.random_range(0..100_000),
            self.rng.random_range(0..100_000),
        );
        let code = *[0, 0, 0, 1, 2, 3, 42].choose(&mut self.rng).unwrap_or(&0);
        let script = r#"echo "$1-$(( $2 * $3 ))"; echo "err-$1" >&2; exit "$4""#;
        let (a_text, b_text, code_text) = (a.to_string(), b.to_string(), code.to_string());
        let args = [
            "exec", "--", "sh", "-c", script, "sh", &tag, &a_text, &b_text, &code_text,
        ];
        let kill = self.kill_plan(400);
        let manifest = self.leave_manifest();
        let Some(outcome) = self.dsh(KIND, &manifest, &args, Input::Null, kill).await else {
            return false;
        };
        let settled = self.settle(KIND, &args, &outcome, |outcome| {
            expect_code(outcome, code)?;
            let want = format!("{tag}-{}\n", a * b);
            if outcome.stdout != want.as_bytes() {
                return Err(format!(
                    "stdout {:?}, expected {want:?}",
                    outcome.stdout_text()
                ));
            }
            if !contains(&outcome.stderr, format!("err-{tag}").as_bytes()) {
                return Err("the command's stderr is missing".to_owned());
            }
            Ok(())
        });
        settled != Settled::Failed
    }

    /// `seq 1 N`: up to ~1.3 MB of output, checked byte for byte.
    pub async fn exec_output(&mut self) -> bool {
        const KIND: &str = "exec-output";
        let n: u32 = self.rng.random_range(1..=200_000);
        let n_text = n.to_string();
        let args = ["exec", "--", "seq", "1", &n_text];
        let kill = self.kill_plan(600);
        let manifest = self.leave_manifest();
        let Some(outcome) = self.dsh(KIND, &manifest, &args, Input::Null, kill).await else {
            return false;
        };
        let settled = self.settle(KIND, &args, &outcome, |outcome| {
            expect_code(outcome, 0)?;
            let want: String = (1..=n).map(|i| format!("{i}\n")).collect();
            difference(want.as_bytes(), &outcome.stdout).map_or(Ok(()), Err)
        });
        settled != Settled::Failed
    }

    /// Up to 1 MiB through the command's stdin into `sha256sum`.
    pub async fn exec_stdin(&mut self) -> bool {
        const KIND: &str = "exec-stdin";
        let content = Content::Generated {
            seed: self.rng.random(),
            len: self.rng.random_range(0..=1 << 20),
        };
        let bytes = content.bytes();
        let want = format!("{}  -\n", sha256_hex(&bytes));
        let args = ["exec", "--", "sha256sum"];
        let kill = self.kill_plan(500);
        let manifest = self.leave_manifest();
        let Some(outcome) = self
            .dsh(KIND, &manifest, &args, Input::Bytes(bytes), kill)
            .await
        else {
            return false;
        };
        let settled = self.settle(KIND, &args, &outcome, |outcome| {
            expect_code(outcome, 0)?;
            if outcome.stdout == want.as_bytes() {
                Ok(())
            } else {
                Err(format!(
                    "stdout {:?}, expected {want:?} ({} bytes in)",
                    outcome.stdout_text(),
                    content.len()
                ))
            }
        });
        settled != Settled::Failed
    }

    /// A command that SIGKILLs itself: `dsh` must exit 137.
    pub async fn exec_kill_self(&mut self) -> bool {
        const KIND: &str = "exec-kill-self";
        let script = format!("(sleep 0.2; kill -9 $$) & exec sleep 30.{}", self.serial());
        let args = ["exec", "--", "sh", "-c", &script];
        let kill = self.kill_plan(400);
        let manifest = self.leave_manifest();
        let Some(outcome) = self.dsh(KIND, &manifest, &args, Input::Null, kill).await else {
            return false;
        };
        let settled = self.settle(KIND, &args, &outcome, |o| expect_code(o, 137));
        if settled == Settled::Ok {
            self.tally().count(counter::KILL_SELF, 1);
        }
        settled != Settled::Failed
    }

    /// A shell that SIGKILLs its child and reports the child's status.
    pub async fn exec_kill_child(&mut self) -> bool {
        const KIND: &str = "exec-kill-child";
        let script = "sleep 30 & kill -9 $!; wait $!; echo \"rc-$?\"";
        let args = ["exec", "--", "sh", "-c", script];
        let kill = self.kill_plan(400);
        let manifest = self.leave_manifest();
        let Some(outcome) = self.dsh(KIND, &manifest, &args, Input::Null, kill).await else {
            return false;
        };
        let settled = self.settle(KIND, &args, &outcome, |outcome| {
            expect_code(outcome, 0)?;
            if outcome.stdout == b"rc-137\n" {
                Ok(())
            } else {
                Err(format!(
                    "stdout {:?}, expected \"rc-137\\n\"",
                    outcome.stdout_text()
                ))
            }
        });
        if settled == Settled::Ok {
            self.tally().count(counter::KILL_CHILD, 1);
        }
        settled != Settled::Failed
    }

    /// A long command, SIGKILLed by `pkill -9` from a second, concurrent `dsh exec` on the same
    /// sandbox once it has started: the killer exits 0, the first `dsh` 137.
    pub async fn exec_pkill(&mut self) -> bool {
        const KIND: &str = "exec-pkill";
        let target = format!("sleep 1000.{}", self.serial());
        let script = format!("echo started; exec {target}");
        let args = ["exec", "--", "sh", "-c", &script];
        let manifest = self.leave_manifest();
        let mut long = match self.shared.dsh.spawn(&manifest, &args, Input::Null) {
            Ok(running) => running,
            Err(err) => {
                self.fail(KIND, Duration::ZERO, format!("{err:#}"));
                return false;
            }
        };
        let started = long.wait_for_stdout(b"started\n", START_LIMIT).await;
        let mut killer_ok = true;
        if started {
            let killer = ["exec", "--", "pkill", "-9", "-xf", &target];
            killer_ok = match self
                .dsh("exec-killer", &manifest, &killer, Input::Null, None)
                .await
            {
                Some(outcome) => {
                    self.settle("exec-killer", &killer, &outcome, |o| expect_code(o, 0))
                        == Settled::Ok
                }
                None => false,
            };
        }
        if !started || !killer_ok {
            long.kill();
        }
        let outcome = match long.finish().await {
            Ok(outcome) => outcome,
            Err(err) => {
                self.fail(KIND, Duration::ZERO, format!("{err:#}"));
                return false;
            }
        };
        if !started {
            self.settle(KIND, &args, &outcome, |_| {
                Err("the command did not start".to_owned())
            });
            return false;
        }
        if !killer_ok {
            return false;
        }
        let settled = self.settle(KIND, &args, &outcome, |o| expect_code(o, 137));
        if settled == Settled::Ok {
            self.tally().count(counter::KILL_PKILL, 1);
        }
        settled == Settled::Ok
    }

    /// Two or three `dsh exec`s started at the same moment on the sandbox: each must run its
    /// command (`--concurrent-starts`).
    pub async fn exec_concurrent(&mut self) -> bool {
        const KIND: &str = "exec-concurrent";
        let manifest = self.leave_manifest();
        let tag = self.serial();
        let count = self.rng.random_range(2..=3);
        let words: Vec<String> = (0..count)
            .map(|i| format!("concurrent-{tag}-{i}"))
            .collect();
        let mut running = Vec::new();
        for word in &words {
            match self
                .shared
                .dsh
                .spawn(&manifest, &["exec", "--", "echo", word], Input::Null)
            {
                Ok(started) => running.push(started),
                Err(err) => {
                    self.fail(KIND, Duration::ZERO, format!("{err:#}"));
                    return false;
                }
            }
        }
        let mut all_ok = true;
        for (word, started) in words.iter().zip(running) {
            let args = ["exec", "--", "echo", word];
            let outcome = match started.finish().await {
                Ok(outcome) => outcome,
                Err(err) => {
                    self.fail(KIND, Duration::ZERO, format!("{err:#}"));
                    all_ok = false;
                    continue;
                }
            };
            let settled = self.settle(KIND, &args, &outcome, |outcome| {
                expect_code(outcome, 0)?;
                if outcome.stdout == format!("{word}\n").as_bytes() {
                    Ok(())
                } else {
                    Err(format!("stdout {:?}", outcome.stdout_text()))
                }
            });
            all_ok &= settled == Settled::Ok;
        }
        all_ok
    }

    /// A long command whose `dsh` the soak SIGKILLs while it runs; then a second `dsh` looks
    /// for the command (E2B leaves processes running when their client goes; so does the world
    /// of a SIGKILLed `dsh`, whose disposal never ran) and kills it if found.
    pub async fn exec_abandon(&mut self) -> bool {
        const KIND: &str = "exec-abandon";
        let target = format!("sleep 30.{}", self.serial());
        let script = format!("echo started; exec {target}");
        let args = ["exec", "--", "sh", "-c", &script];
        let manifest = self.leave_manifest();
        let mut running = match self.shared.dsh.spawn(&manifest, &args, Input::Null) {
            Ok(running) => running,
            Err(err) => {
                self.fail(KIND, Duration::ZERO, format!("{err:#}"));
                return false;
            }
        };
        let started = running.wait_for_stdout(b"started\n", START_LIMIT).await;
        if started {
            let delay = self.rng.random_range(0..300);
            running.kill_after(Duration::from_millis(delay)).await;
        }
        running.kill();
        let outcome = match running.finish().await {
            Ok(outcome) => outcome,
            Err(err) => {
                self.fail(KIND, Duration::ZERO, format!("{err:#}"));
                return false;
            }
        };
        let settled = self.settle(KIND, &args, &outcome, |_| {
            Err(if started {
                "dsh ended by itself while its command slept".to_owned()
            } else {
                "the command did not start".to_owned()
            })
        });
        if settled != Settled::Killed || !started {
            return false;
        }
        self.tally().count(counter::ORPHANED, 1);
        let probe = ["exec", "--", "pkill", "-9", "-xf", &target];
        let Some(outcome) = self
            .dsh("exec-probe", &manifest, &probe, Input::Null, None)
            .await
        else {
            return false;
        };
        let mut still_ran = false;
        let settled = self.settle("exec-probe", &probe, &outcome, |outcome| {
            match outcome.code() {
                Some(0) => {
                    still_ran = true;
                    Ok(())
                }
                Some(1) => Ok(()),
                _ => Err("expected exit 0 (found and killed) or 1 (none)".to_owned()),
            }
        });
        if still_ran {
            self.tally().count(counter::STILL_RUNNING, 1);
        }
        settled == Settled::Ok
    }
}
