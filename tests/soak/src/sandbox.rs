//! Sandbox lifecycles through `dsh`: a worker's sandbox is created by a `dsh` whose owner leaves
//! it running, and retired by one whose owner kills it; a one-run sandbox is created and killed
//! by the same `dsh`. A `dsh` SIGKILLed meanwhile abandons its sandbox to the sandbox timeout,
//! which the end of the run checks (every sandbox must be gone).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use rand::Rng;

use crate::dsh::Input;
use crate::manifest::{Acquire, GENERATION_KEY, OnDispose, WORKER_KEY};
use crate::model::{Model, ROOT};
use crate::tally::counter;
use crate::worker::{Sandbox, Settled, Worker, expect_code};

/// How long a sandbox a `dsh` killed may take to disappear from the API.
const GONE_LIMIT: Duration = Duration::from_secs(10);

impl Worker {
    /// Creates the worker's next sandbox (`exec -- printenv E2B_SANDBOX_ID` with a creating,
    /// leaving owner), checks the API lists it with its tags, and makes its data directory.
    /// False if no sandbox was adopted.
    pub async fn create(&mut self) -> bool {
        const KIND: &str = "create";
        let generation = self.generation;
        self.generation += 1;
        let manifest = match self.shared.manifests.write(
            &format!("w{}-create-{generation}", self.id),
            &Acquire::Create {
                worker: self.id,
                generation,
            },
            OnDispose::Leave,
        ) {
            Ok(path) => path,
            Err(err) => {
                self.fail(KIND, Duration::ZERO, format!("{err:#}"));
                return false;
            }
        };
        let args = ["exec", "--", "printenv", "E2B_SANDBOX_ID"];
        let kill = self.kill_plan(600);
        let Some(outcome) = self.dsh(KIND, &manifest, &args, Input::Null, kill).await else {
            return false;
        };
        let id = outcome.stdout_text().trim().to_owned();
        let worker = self.id.to_string();
        let generation_text = generation.to_string();
        let listed = if outcome.killed() || outcome.code() != Some(0) {
            None
        } else {
            Some(
                self.shared
                    .control
                    .list(&[(WORKER_KEY, &worker), (GENERATION_KEY, &generation_text)])
                    .await,
            )
        };
        let settled = self.settle(KIND, &args, &outcome, |outcome| {
            expect_code(outcome, 0)?;
            if id.is_empty() || id.contains(char::is_whitespace) {
                return Err(format!(
                    "printed no sandbox id: {:?}",
                    outcome.stdout_text()
                ));
            }
            match listed {
                Some(Ok(listed)) if listed.len() == 1 && listed[0].id == id => Ok(()),
                Some(Ok(listed)) => Err(format!(
                    "the API lists {:?} with this worker's tags, not just {id}",
                    listed.iter().map(|l| &l.id).collect::<Vec<_>>()
                )),
                Some(Err(err)) => Err(format!("{err:#}")),
                None => Err("not listed".to_owned()),
            }
        });
        match settled {
            Settled::Killed => {
                self.tally().count(counter::ABANDONED, 1);
                return false;
            }
            Settled::Failed => return false,
            Settled::Ok => {}
        }
        self.tally().count(counter::CREATED_WORKER, 1);
        let connect = Acquire::Connect(id.clone());
        let name = format!("w{}-{generation}", self.id);
        let manifests = &self.shared.manifests;
        let (leave, kill) = match (
            manifests.write(&format!("{name}-leave"), &connect, OnDispose::Leave),
            manifests.write(&format!("{name}-kill"), &connect, OnDispose::Kill),
        ) {
            (Ok(leave), Ok(kill)) => (leave, kill),
            (Err(err), _) | (_, Err(err)) => {
                self.fail(KIND, Duration::ZERO, format!("{err:#}"));
                return false;
            }
        };
        let (low, high) = self.shared.lifetime;
        let lifetime = self.rng.random_range(low..=high);
        self.sandbox = Some(Sandbox {
            id,
            leave: leave.clone(),
            kill,
            model: Model::new(),
            retire_at: Instant::now() + lifetime,
            staging_suspects: BTreeSet::new(),
        });
        // The data directory, never killed: every file operation works under it.
        let args = ["fs", "mkdir", ROOT];
        let Some(outcome) = self.dsh("fs-mkdir", &leave, &args, Input::Null, None).await else {
            return true;
        };
        self.settle("fs-mkdir", &args, &outcome, |o| expect_code(o, 0));
        true
    }

    /// Retires the worker's sandbox: a `dsh` connecting with `onDispose: kill` looks at what
    /// killed `dsh`s left inside (processes, spill dirs), exits, and the sandbox must then be
    /// gone. `killable`: whether this `dsh` may be SIGKILLed too (abandoning the sandbox).
    pub async fn retire(&mut self, killable: bool) {
        const KIND: &str = "retire";
        let Some(sandbox) = self.sandbox.take() else {
            return;
        };
        let script = "echo \"sleeps $(pgrep -cf '^sleep [0-9]+[.][0-9]+$') shells $(pgrep -cx \
                      bash) spill $(ls -d /tmp/dsh-subprocess-e2b-* 2>/dev/null | wc -l)\"";
        let args = ["exec", "--", "sh", "-c", script];
        let kill = if killable { self.kill_plan(400) } else { None };
        let Some(outcome) = self
            .dsh(KIND, &sandbox.kill, &args, Input::Null, kill)
            .await
        else {
            return;
        };
        let gone = if outcome.killed() || outcome.code() != Some(0) {
            None
        } else {
            Some(
                self.shared
                    .control
                    .gone_within(&sandbox.id, GONE_LIMIT)
                    .await,
            )
        };
        let mut found = [0; 3];
        let settled = self.settle(KIND, &args, &outcome, |outcome| {
            expect_code(outcome, 0)?;
            let text = outcome.stdout_text();
            let fields: Vec<&str> = text.split_whitespace().collect();
            match fields[..] {
                ["sleeps", sleeps, "shells", shells, "spill", spill] => {
                    for (slot, field) in found.iter_mut().zip([sleeps, shells, spill]) {
                        *slot = field
                            .parse()
                            .map_err(|_| format!("unexpected output {text:?}"))?;
                    }
                }
                _ => return Err(format!("unexpected output {text:?}")),
            }
            match gone {
                Some(Ok(true)) => Ok(()),
                Some(Ok(false)) => Err(format!(
                    "sandbox {} still exists {} s after its dsh killed it on disposal",
                    sandbox.id,
                    GONE_LIMIT.as_secs()
                )),
                Some(Err(err)) => Err(format!("{err:#}")),
                None => Err("no answer".to_owned()),
            }
        });
        match settled {
            Settled::Ok => {
                self.tally().count(counter::RETIRED, 1);
                self.tally().count(counter::RETIRE_SLEEPS, found[0]);
                self.tally().count(counter::RETIRE_SHELLS, found[1]);
                self.tally().count(counter::RETIRE_SPILL, found[2]);
            }
            Settled::Killed => self.tally().count(counter::ABANDONED, 1),
            Settled::Failed => {}
        }
    }

    /// A `dsh` that creates its own sandbox, runs a command and kills the sandbox on disposal;
    /// afterwards the sandbox must be gone. Sometimes SIGKILLed (abandoning the sandbox).
    pub async fn ephemeral(&mut self) -> bool {
        const KIND: &str = "ephemeral";
        let pause = self.rng.random_range(0..300);
        let script = format!("echo \"$E2B_SANDBOX_ID\"; sleep 0.{pause:03}");
        let args = ["exec", "--", "sh", "-c", &script];
        let kill = self.kill_plan(800);
        let manifest = self.shared.ephemeral.clone();
        let Some(outcome) = self.dsh(KIND, &manifest, &args, Input::Null, kill).await else {
            return false;
        };
        let id = outcome.stdout_text().trim().to_owned();
        let gone = if outcome.killed() || outcome.code() != Some(0) || id.is_empty() {
            None
        } else {
            Some(self.shared.control.gone_within(&id, GONE_LIMIT).await)
        };
        let settled = self.settle(KIND, &args, &outcome, |outcome| {
            expect_code(outcome, 0)?;
            match gone {
                Some(Ok(true)) => Ok(()),
                Some(Ok(false)) => Err(format!(
                    "sandbox {id} still exists {} s after its dsh ended",
                    GONE_LIMIT.as_secs()
                )),
                Some(Err(err)) => Err(format!("{err:#}")),
                None => Err("printed no sandbox id".to_owned()),
            }
        });
        match settled {
            Settled::Ok => {
                self.tally().count(counter::CREATED_EPHEMERAL, 1);
                true
            }
            Settled::Killed => {
                self.tally().count(counter::ABANDONED, 1);
                true
            }
            Settled::Failed => false,
        }
    }
}
