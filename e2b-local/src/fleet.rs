//! The server's history of running sandboxes, for the team metrics (`GET /teams/{id}/metrics`):
//! each time a sandbox started running (created or resumed) or stopped (paused, killed,
//! expired), and each create. Concurrency at an instant is the running count then; the start
//! rate over a step is creates per second. Bounded: the oldest changes go first, folded into a
//! base count so that the concurrency stays exact.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Changes kept; older ones are folded into the base.
const MAX_CHANGES: usize = 100_000;

/// One change of the running count.
#[derive(Debug, Clone, Copy)]
struct Change {
    at: SystemTime,
    /// +1 (started running), -1 (stopped).
    running: i64,
    /// A create (not a resume).
    created: bool,
}

/// The history; cheap to update from any lifecycle transition.
#[derive(Debug, Default)]
pub struct Fleet {
    inner: Mutex<History>,
}

#[derive(Debug, Default)]
struct History {
    /// The running count before the first kept change.
    base: i64,
    /// Since when changes are kept (`None`: since the server started).
    since: Option<SystemTime>,
    changes: VecDeque<Change>,
}

/// The team's figures at one instant.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub at: SystemTime,
    /// Sandboxes running at `at`.
    pub concurrent: i64,
    /// Creates per second over the step that ends at `at`.
    pub start_rate: f64,
}

impl Fleet {
    /// A sandbox was created, running.
    pub fn created(&self) {
        self.record(1, true);
    }

    /// A paused sandbox runs again.
    pub fn resumed(&self) {
        self.record(1, false);
    }

    /// A running sandbox stopped (paused, killed or expired).
    pub fn stopped(&self) {
        self.record(-1, false);
    }

    fn record(&self, running: i64, created: bool) {
        let mut history = self.inner.lock().expect("fleet lock");
        history.changes.push_back(Change {
            at: SystemTime::now(),
            running,
            created,
        });
        if history.changes.len() > MAX_CHANGES
            && let Some(oldest) = history.changes.pop_front()
        {
            history.base += oldest.running;
            history.since = Some(oldest.at);
        }
    }

    /// The figures every `step` from `start`, and at `end` (the last point, whether or not it
    /// falls on a step). Instants before what is kept read the concurrency then known and a
    /// rate of 0. One pass over the history (the changes are in time order).
    pub fn series(&self, start: SystemTime, end: SystemTime, step: Duration) -> Vec<Point> {
        let history = self.inner.lock().expect("fleet lock");
        let changes = &history.changes;
        // Changes applied up to the current instant, and creates up to it and up to a step
        // before it.
        let (mut upto, mut concurrent) = (0, history.base);
        let (mut created_upto, mut created_before) = (0u64, 0u64);
        let mut before = 0;
        let mut points = Vec::new();
        let mut at = start;
        loop {
            while upto < changes.len() && changes[upto].at <= at {
                concurrent += changes[upto].running;
                created_upto += u64::from(changes[upto].created);
                upto += 1;
            }
            let from = at.checked_sub(step).unwrap_or(UNIX_EPOCH);
            while before < changes.len() && changes[before].at <= from {
                created_before += u64::from(changes[before].created);
                before += 1;
            }
            points.push(Point {
                at,
                concurrent,
                start_rate: (created_upto - created_before) as f64 / step.as_secs_f64(),
            });
            if at >= end {
                return points;
            }
            at = (at + step).min(end);
        }
    }
}

impl Fleet {
    /// The most sandboxes running at once from `start` to `end`, and the first instant of it:
    /// exact, from every change (a series' points would miss a short peak between them).
    pub fn peak(&self, start: SystemTime, end: SystemTime) -> (SystemTime, i64) {
        let history = self.inner.lock().expect("fleet lock");
        let mut running = history.base;
        let mut changes = history.changes.iter().peekable();
        while let Some(change) = changes.next_if(|c| c.at <= start) {
            running += change.running;
        }
        let mut peak = (start, running);
        for change in changes.take_while(|c| c.at <= end) {
            running += change.running;
            if running > peak.1 {
                peak = (change.at, running);
            }
        }
        peak
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concurrency_and_start_rate_follow_the_changes() {
        let fleet = Fleet::default();
        let before = SystemTime::now() - Duration::from_millis(500);
        fleet.created();
        fleet.created();
        fleet.stopped();
        fleet.resumed();
        fleet.created();
        fleet.stopped();
        let after = SystemTime::now() + Duration::from_millis(600);
        let points = fleet.series(before, after, Duration::from_secs(1));
        assert_eq!(points.len(), 3, "{points:?}");
        assert_eq!((points[0].concurrent, points[0].start_rate), (0, 0.0));
        assert_eq!((points[1].concurrent, points[1].start_rate), (2, 3.0));
        // The last point is at the end: a step of its own after the changes.
        assert_eq!(points[2].at, after);
        assert_eq!(points[2].concurrent, 2);
        // One point when the span is empty.
        assert_eq!(fleet.series(after, after, Duration::from_secs(1)).len(), 1);
        // The peak between points: 3 running after the third create.
        let (at, most) = fleet.peak(before, after);
        assert_eq!(most, 3);
        assert!(at > before && at < after);
        assert_eq!(
            fleet.peak(after, after).1,
            2,
            "what runs at the start counts"
        );
    }
}
