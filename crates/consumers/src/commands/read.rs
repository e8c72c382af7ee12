//! `read_output`: a command's output by cursor, optionally after waiting
//! for its exit, for new output or for a pattern.

use std::time::Duration;

use dsh_plugin_api::Result;
use regex::Regex;
use tokio::time::Instant;

use super::Commands;
use super::errors::{from_seam, invalid};
use super::output::CommandOutput;
use super::registry::Tracked;
use super::status::{CommandStatus, ExitInfo, state_text};
use super::text::{cut_character_start, decode_piece, text_tail};
use super::tracked::TrackedCommand;

const TOOL: &str = "read_output";

/// Bytes a read returns when `max_bytes` is not given.
pub const DEFAULT_READ_BYTES: u64 = 32 * 1024;
/// The most bytes one read returns, whatever `max_bytes` asks.
pub const MAX_READ_BYTES: u64 = 1024 * 1024;
/// The longest a read waits, whatever `wait_ms` asks: below the call
/// timeouts of common clients, so a wait returns progress, not an error.
pub const MAX_WAIT_MS: u64 = 50_000;
/// How long a read with `until` waits when `wait_ms` is not given.
pub const DEFAULT_UNTIL_WAIT_MS: u64 = 30_000;
/// The longest `pattern` accepted, in bytes.
pub const MAX_PATTERN_BYTES: usize = 1000;
/// The compiled size a pattern may reach.
const REGEX_SIZE_LIMIT: usize = 1 << 20;
/// Bytes of output scanned for a pattern per step.
const SCAN_CHUNK: usize = 64 * 1024;
/// Text kept from one scanned step for the next, so a match across the
/// boundary is found: a match must fit in this many bytes.
pub const SCAN_OVERLAP: usize = 4 * 1024;
/// Polling of a running command's output starts this fast and slows down
/// to [`POLL_SLOWEST`] while nothing happens (an exit wakes it at once).
const POLL_FASTEST: Duration = Duration::from_millis(5);
const POLL_SLOWEST: Duration = Duration::from_millis(50);

/// What a read waits for before it reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Until {
    /// The command has exited.
    Exit,
    /// There is output after the cursor (or the command has exited).
    Output,
    /// Output after the cursor matches `pattern` (or the command has
    /// exited without it).
    Pattern,
}

/// Reads a command's output from a byte cursor.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadOutputRequest {
    /// The command's id, from `run`.
    pub id: String,
    /// Byte offset in the output to read from. Default: where the previous
    /// `read_output` of this command ended (0 at first). A cursor past the
    /// end reads nothing and returns the end as `cursor`.
    #[serde(default)]
    pub cursor: Option<u64>,
    /// The most bytes to return. Default 32768; at most 1048576 (larger
    /// values read that much).
    #[serde(default)]
    pub max_bytes: Option<u64>,
    /// How long to wait, in milliseconds, for what `until` says before
    /// reading. Default 0 (read at once), or 30000 when `until` or
    /// `pattern` is given; at most 50000 (larger values wait that long).
    /// When the wait ends first, the read returns what there is.
    #[serde(default)]
    pub wait_ms: Option<u64>,
    /// What to wait for: `exit`, `output` (any new output) or `pattern`.
    /// Default: `pattern` when `pattern` is given, else `output` when
    /// `wait_ms` is given.
    #[serde(default)]
    pub until: Option<Until>,
    /// A regular expression (Rust `regex` syntax, at most 1000 bytes; `^`
    /// and `$` match at line ends) to wait for in the output after the
    /// cursor. A match must fit in 4096 bytes.
    #[serde(default)]
    pub pattern: Option<String>,
}

/// A piece of a command's output and where the command is.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct ReadOutputResult {
    pub id: String,
    /// The output from the cursor (stdout and stderr merged), as UTF-8
    /// with invalid bytes replaced. A read never ends inside a multibyte
    /// character — the cursor stops before it — so reading on loses no
    /// text; only a cursor placed inside a character decodes lossily.
    pub output: String,
    /// The cursor for the next read: the offset just after `output`.
    pub cursor: u64,
    /// Bytes between the requested cursor and the start of `output` that
    /// are no longer kept (the complete copy is cut at 1 GiB); 0 normally.
    pub dropped: u64,
    /// Bytes written after `cursor` so far (0 when caught up).
    pub remaining_bytes: u64,
    /// Bytes the command has written in all, so far.
    pub total_bytes: u64,
    /// `running`, or how it ended.
    pub status: CommandStatus,
    #[serde(flatten)]
    pub exit: ExitInfo,
    /// With `until: pattern`: whether the pattern was found.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matched: Option<bool>,
}

impl crate::Outcome for ReadOutputResult {
    fn text(&self) -> String {
        let mut meta = format!(
            "[{}: {} · cursor {} of {} bytes",
            self.id,
            state_text(self.status, &self.exit),
            self.cursor,
            self.total_bytes
        );
        if self.remaining_bytes > 0 {
            meta.push_str(&format!(" · {} more bytes to read", self.remaining_bytes));
        }
        if self.dropped > 0 {
            meta.push_str(&format!(
                " · {} bytes before the output are no longer kept",
                self.dropped
            ));
        }
        match self.matched {
            Some(true) => meta.push_str(" · pattern found"),
            Some(false) => meta.push_str(" · pattern not found"),
            None => {}
        }
        meta.push(']');
        if self.output.is_empty() {
            format!("(no new output)\n{meta}")
        } else if self.output.ends_with('\n') {
            format!("{}{meta}", self.output)
        } else {
            format!("{}\n{meta}", self.output)
        }
    }
}

/// A checked wait condition.
enum Goal {
    Exit,
    Output,
    Pattern(Regex),
}

fn check_goal(
    until: Option<Until>,
    pattern: Option<&str>,
    wait_ms: Option<u64>,
) -> Result<Option<Goal>> {
    let until = match (until, pattern) {
        (Some(Until::Pattern) | None, Some(_)) => Until::Pattern,
        (Some(until), Some(_)) => {
            return Err(invalid(
                TOOL,
                format_args!("pattern is only for until: pattern, not {until:?}"),
            ));
        }
        (Some(Until::Pattern), None) => {
            return Err(invalid(TOOL, "until: pattern needs a pattern"));
        }
        (Some(until), None) => until,
        (None, None) if wait_ms.is_some_and(|ms| ms > 0) => Until::Output,
        (None, None) => return Ok(None),
    };
    Ok(Some(match until {
        Until::Exit => Goal::Exit,
        Until::Output => Goal::Output,
        Until::Pattern => Goal::Pattern(compile(pattern.unwrap_or_default())?),
    }))
}

fn compile(pattern: &str) -> Result<Regex> {
    if pattern.len() > MAX_PATTERN_BYTES {
        return Err(invalid(
            TOOL,
            format_args!(
                "pattern is {} bytes, more than {MAX_PATTERN_BYTES}",
                pattern.len()
            ),
        ));
    }
    regex::RegexBuilder::new(pattern)
        .multi_line(true)
        .size_limit(REGEX_SIZE_LIMIT)
        .build()
        .map_err(|err| invalid(TOOL, format_args!("pattern is not a valid regex: {err}")))
}

impl Commands {
    /// `read_output`: up to `max_bytes` of a command's output from
    /// `cursor`, after waiting (at most [`MAX_WAIT_MS`]) for `until`.
    /// Output older than the memory tail is read from the spill file
    /// through the `fs` seam, in bounded memory. Dropping the future stops
    /// the wait and the read; the command is not affected.
    pub async fn read_output(&self, request: ReadOutputRequest) -> Result<ReadOutputResult> {
        let command = self.lookup(TOOL, &request.id).await?;
        let max = match request.max_bytes {
            Some(0) => return Err(invalid(TOOL, "max_bytes must be at least 1")),
            Some(max) => max.min(MAX_READ_BYTES),
            None => DEFAULT_READ_BYTES,
        } as usize;
        let goal = check_goal(request.until, request.pattern.as_deref(), request.wait_ms)?;
        let cursor = request.cursor.unwrap_or_else(|| command.default_cursor());
        let matched = match &goal {
            Some(goal) => {
                let wait_ms = request.wait_ms.unwrap_or(DEFAULT_UNTIL_WAIT_MS);
                let wait = Duration::from_millis(wait_ms.min(MAX_WAIT_MS));
                wait_until(&command, cursor, goal, wait)
                    .await
                    .map_err(|err| from_seam(TOOL, err))?
            }
            None => None,
        };

        // The exit is taken before the read: once it is known, the output
        // is complete and the read sees all of it.
        let exit = command.exit();
        let piece = command
            .output
            .read(cursor, max)
            .await
            .map_err(|err| from_seam(TOOL, err))?;
        // After a gap the first bytes may be the rest of a character.
        let skip = if piece.dropped > 0 {
            cut_character_start(&piece.bytes)
        } else {
            0
        };
        let end = piece.start + piece.bytes.len() as u64;
        let more_may_follow = exit.is_none() || end < piece.total;
        let (output, used) = decode_piece(&piece.bytes[skip..], more_may_follow);
        let next = piece.start + (skip + used) as u64;
        command.advance_cursor(next);
        Ok(ReadOutputResult {
            id: command.id.clone(),
            output,
            cursor: next,
            dropped: piece.dropped + skip as u64,
            remaining_bytes: piece.total.saturating_sub(next),
            total_bytes: piece.total,
            status: CommandStatus::of(&exit),
            exit: ExitInfo::of(&exit),
            matched,
        })
    }
}

/// Waits until `goal` holds or `wait` passes. Returns whether the pattern
/// matched (for a pattern goal).
async fn wait_until(
    command: &TrackedCommand,
    cursor: u64,
    goal: &Goal,
    wait: Duration,
) -> Result<Option<bool>> {
    let deadline = Instant::now() + wait;
    let mut scan = PatternScan::new(cursor);
    let mut pause = POLL_FASTEST;
    loop {
        // Taken before the output is looked at: once finished, the output
        // seen is complete.
        let finished = command.is_finished();
        let met = match goal {
            Goal::Exit => finished,
            Goal::Output => finished || command.output.snapshot().await?.total > cursor,
            Goal::Pattern(pattern) => {
                if scan.advance(&command.output, pattern, deadline).await? {
                    return Ok(Some(true));
                }
                finished && scan.caught_up
            }
        };
        let now = Instant::now();
        if met || now >= deadline {
            return Ok(matches!(goal, Goal::Pattern(_)).then_some(false));
        }
        tokio::select! {
            () = tokio::time::sleep(pause.min(deadline - now)) => {}
            exit = command.wait_exit(), if !finished => {
                // An error without a published exit means nobody watches
                // the command any more (shutdown): stop waiting.
                if let Err(err) = exit
                    && !command.is_finished()
                {
                    return Err(err);
                }
            }
        }
        pause = (pause * 2).min(POLL_SLOWEST);
    }
}

/// An incremental search of the output for a pattern: each step scans the
/// bytes after the last one, with [`SCAN_OVERLAP`] bytes of text carried
/// over.
struct PatternScan {
    next: u64,
    carry: String,
    /// The last step reached the end of the output.
    caught_up: bool,
}

impl PatternScan {
    fn new(from: u64) -> PatternScan {
        PatternScan {
            next: from,
            carry: String::new(),
            caught_up: false,
        }
    }

    /// Scans the output written since the last step, until the end or
    /// `deadline` (at least one piece); whether `pattern` matched.
    async fn advance(
        &mut self,
        output: &CommandOutput,
        pattern: &Regex,
        deadline: Instant,
    ) -> Result<bool> {
        loop {
            let piece = output.read(self.next, SCAN_CHUNK).await?;
            if piece.dropped > 0 {
                self.carry.clear();
            }
            if piece.bytes.is_empty() {
                self.next = piece.start;
                self.caught_up = piece.start >= piece.total;
                return Ok(false);
            }
            let (text, used) = decode_piece(&piece.bytes, true);
            self.carry.push_str(&text);
            if pattern.is_match(&self.carry) {
                return Ok(true);
            }
            self.next = piece.start + used as u64;
            self.carry = text_tail(&self.carry, SCAN_OVERLAP).to_owned();
            if Instant::now() >= deadline {
                self.caught_up = self.next >= piece.total;
                return Ok(false);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_plugin_api::ErrorKind;

    #[test]
    fn goals_follow_until_pattern_and_wait() {
        assert!(check_goal(None, None, None).unwrap().is_none());
        assert!(check_goal(None, None, Some(0)).unwrap().is_none());
        assert!(matches!(
            check_goal(None, None, Some(5)).unwrap(),
            Some(Goal::Output)
        ));
        assert!(matches!(
            check_goal(Some(Until::Exit), None, None).unwrap(),
            Some(Goal::Exit)
        ));
        assert!(matches!(
            check_goal(None, Some("ready"), None).unwrap(),
            Some(Goal::Pattern(_))
        ));
        for (until, pattern) in [
            (Some(Until::Pattern), None),
            (Some(Until::Exit), Some("x")),
            (None, Some("(")),
        ] {
            let err = check_goal(until, pattern, None).err().unwrap();
            assert_eq!(err.kind(), ErrorKind::InvalidInput, "{until:?} {pattern:?}");
            assert!(err.message().starts_with("read_output: "));
        }
        let long = "a".repeat(MAX_PATTERN_BYTES + 1);
        assert!(check_goal(None, Some(&long), None).is_err());
    }

    #[test]
    fn patterns_anchor_at_line_ends() {
        let pattern = compile("^ready$").unwrap();
        assert!(pattern.is_match("starting\nready\nmore"));
        assert!(!pattern.is_match("not ready yet"));
    }
}
