//! Interleaved measurement: every contender of a comparison runs once per
//! round, back to back, so drift (another build starting, the page cache
//! filling, a CPU frequency change) hits all of them alike.

use std::future::Future;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::stats::Samples;

/// How much work one comparison does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// Measured rounds (one untimed warm-up round runs before them).
    pub rounds: usize,
    /// Operations per round and contender; the round's time is divided by it.
    pub iterations: usize,
}

/// Runs the operation `n` times and returns the time those `n` took,
/// excluding any setup it did first (e.g. preparing owned inputs).
type Run<'a> = Box<dyn FnMut(usize) -> Result<Duration> + 'a>;

/// One side of a comparison.
pub struct Contender<'a> {
    name: String,
    run: Run<'a>,
}

impl std::fmt::Debug for Contender<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Contender")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl<'a> Contender<'a> {
    /// A contender named `name` (used in error messages) whose `run(n)`
    /// performs `n` operations and returns the time they took.
    pub fn new(
        name: impl Into<String>,
        run: impl FnMut(usize) -> Result<Duration> + 'a,
    ) -> Contender<'a> {
        Contender {
            name: name.into(),
            run: Box::new(run),
        }
    }
}

/// Runs one untimed warm-up round of every contender, then `plan.rounds`
/// measured rounds. Round `r` starts with contender `r mod len` and goes
/// on in order, so no contender always runs first. Returns one
/// [`Samples`] per contender, in the order given. The first failure stops
/// the comparison; its error names the contender and the round.
pub fn interleave<const N: usize>(
    plan: Plan,
    contenders: &mut [Contender<'_>; N],
) -> Result<[Samples; N]> {
    anyhow::ensure!(
        plan.rounds > 0 && plan.iterations > 0,
        "measure: a plan needs at least one round and one iteration (got {plan:?})"
    );
    let mut samples: [Samples; N] = std::array::from_fn(|_| Samples::default());
    for round in 0..=plan.rounds {
        for offset in 0..N {
            let index = (round + offset) % N;
            let contender = &mut contenders[index];
            let elapsed = (contender.run)(plan.iterations).with_context(|| {
                if round == 0 {
                    format!("{}: warm-up round", contender.name)
                } else {
                    format!("{}: round {round}", contender.name)
                }
            })?;
            if round > 0 {
                samples[index].push(elapsed, plan.iterations);
            }
        }
    }
    Ok(samples)
}

/// Times `n` calls of a synchronous operation.
pub fn time_each(n: usize, mut operation: impl FnMut() -> Result<()>) -> Result<Duration> {
    let started = Instant::now();
    for _ in 0..n {
        operation()?;
    }
    Ok(started.elapsed())
}

/// Times `n` sequential calls of an asynchronous operation.
pub async fn time_each_async<F, Fut>(n: usize, mut operation: F) -> Result<Duration>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<()>>,
{
    let started = Instant::now();
    for _ in 0..n {
        operation().await?;
    }
    Ok(started.elapsed())
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::*;

    #[test]
    fn rounds_rotate_the_order_and_the_warm_up_is_not_recorded() {
        let log = RefCell::new(Vec::new());
        let mut contenders = ["a", "b", "c"].map(|name| {
            let log = &log;
            Contender::new(name, move |n| {
                log.borrow_mut().push(name);
                Ok(Duration::from_micros(n as u64))
            })
        });
        let plan = Plan {
            rounds: 3,
            iterations: 4,
        };
        let samples = interleave(plan, &mut contenders).expect("measure");
        assert_eq!(
            *log.borrow(),
            ["a", "b", "c", "b", "c", "a", "c", "a", "b", "a", "b", "c"]
        );
        assert_eq!(samples.len(), 3);
        for contender in &samples {
            assert_eq!(contender.len(), 3, "the warm-up round is not a sample");
            assert_eq!(contender.median(), Duration::from_micros(1));
        }
    }

    #[test]
    fn a_failing_contender_stops_the_comparison_and_is_named() {
        let mut contenders = [
            Contender::new("fine", |_| Ok(Duration::from_millis(1))),
            Contender::new("broken", |_| anyhow::bail!("read /x: not found")),
        ];
        let plan = Plan {
            rounds: 2,
            iterations: 1,
        };
        let err = interleave(plan, &mut contenders).expect_err("must fail");
        let message = format!("{err:#}");
        assert!(
            message.starts_with("broken: warm-up round: read /x: not found"),
            "{message}"
        );
    }

    #[test]
    fn an_empty_plan_is_refused() {
        let mut contenders = [Contender::new("a", |_| Ok(Duration::ZERO))];
        let plan = Plan {
            rounds: 0,
            iterations: 1,
        };
        let err = interleave(plan, &mut contenders).expect_err("no rounds");
        assert!(err.to_string().contains("at least one round"), "{err}");
    }

    #[test]
    fn time_each_runs_n_times_and_stops_at_the_first_error() {
        let mut calls = 0;
        time_each(5, || {
            calls += 1;
            Ok(())
        })
        .expect("runs");
        assert_eq!(calls, 5);
        let mut calls = 0;
        let err = time_each(5, || {
            calls += 1;
            anyhow::ensure!(calls < 2, "call {calls} failed");
            Ok(())
        })
        .expect_err("fails");
        assert_eq!(calls, 2);
        assert_eq!(err.to_string(), "call 2 failed");
    }
}
