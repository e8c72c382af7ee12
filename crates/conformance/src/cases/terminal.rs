//! Terminals (docs/design.md §5.2 `spawn_terminal`): exact output without
//! bootstrap noise, echo of typed input, resize seen by `tput`, the foreground
//! process group, Ctrl-C and `signal(INT)` to the foreground job while the
//! shell survives, whole-session teardown, buffering for a paused consumer.

use std::sync::Arc;
use std::time::Duration;

use dsh_plugin_api::stream::ByteStream;
use dsh_plugin_api::subprocess::{Signal, Terminal, TerminalSpec};
use dsh_plugin_api::{Bytes, ErrorKind};
use futures::StreamExt;

use crate::check::{CaseResult, Failure, ensure, ensure_eq, ensure_names, fail, show};
use crate::context::Cx;
use crate::process_table::show_rows;
use crate::registry::{CaseInfo, case};

pub(crate) const CASES: &[CaseInfo] = &[
    case!(
        "terminal.output_exact",
        Terminal,
        [Terminal],
        "the output stream carries exactly what the program writes (no prompt or echoed bootstrap) and ends at exit",
        output_exact
    ),
    case!(
        "terminal.identity_env_cwd",
        Terminal,
        [Terminal],
        "the program leads its session and group on a tty, runs in spec.cwd, gets explicit env and no scrubbed names",
        identity_env_cwd
    ),
    case!(
        "terminal.echo_input",
        Terminal,
        [Terminal],
        "typed input is echoed by the terminal and read by the program",
        echo_input
    ),
    case!(
        "terminal.resize",
        Terminal,
        [Terminal],
        "the initial size and a resize are visible to `tput cols`/`tput lines`, and the program gets SIGWINCH",
        resize
    ),
    case!(
        "terminal.foreground_job_and_signal",
        Terminal,
        [Terminal, Shell],
        "foreground_pgid follows a job-control shell's foreground job; signal(INT) kills the job, the shell survives",
        foreground_and_signal
    ),
    case!(
        "terminal.ctrl_c",
        Terminal,
        [Terminal],
        "typing Ctrl-C interrupts the foreground job and the interactive shell survives",
        ctrl_c
    ),
    case!(
        "terminal.terminate_session",
        Terminal,
        [Terminal, Shell],
        "terminate tears down every process group of the session (ps proves it), rejects later writes, and is a no-op when repeated",
        terminate_session
    ),
    case!(
        "terminal.exit_status",
        Terminal,
        [Terminal],
        "wait reports the program's exit code, the same on every call",
        exit_status
    ),
    case!(
        "terminal.paused_consumer_buffers",
        Terminal,
        [Terminal],
        "output produced while nobody reads is buffered, not lost: 3000 lines read after the program exited",
        paused_consumer_buffers
    ),
    case!(
        "terminal.bad_input",
        Terminal,
        [Terminal],
        "empty argv, a zero size, bad env names are InvalidInput; a missing program or cwd is NotFound",
        bad_input
    ),
];

/// Reads a terminal's output incrementally, remembering everything.
struct Screen {
    stream: ByteStream,
    seen: Vec<u8>,
    /// Where the next `expect` starts looking.
    cursor: usize,
    ended: bool,
}

impl Screen {
    fn take(terminal: &Arc<dyn Terminal>) -> Result<Screen, Failure> {
        let Some(stream) = terminal.take_output() else {
            fail!("take_output returned None on its first call");
        };
        Ok(Screen {
            stream,
            seen: Vec::new(),
            cursor: 0,
            ended: false,
        })
    }

    /// Reads until `needle` appears after the cursor, then moves past it.
    async fn expect(&mut self, cx: &Cx, needle: &str) -> Result<(), Failure> {
        let needle = needle.as_bytes();
        let found = cx
            .within(&format!("terminal output {}", show(needle)), async {
                loop {
                    if let Some(at) = find(&self.seen[self.cursor..], needle) {
                        return Some(self.cursor + at + needle.len());
                    }
                    if self.ended {
                        return None;
                    }
                    self.pull().await;
                }
            })
            .await;
        match found {
            Ok(Some(end)) => {
                self.cursor = end;
                Ok(())
            }
            Ok(None) => fail!(
                "terminal output ended without {}; after the last match it carried {}",
                show(needle),
                show(&self.seen[self.cursor..])
            ),
            Err(timeout) => fail!(
                "{}; after the last match the terminal showed {}",
                timeout.message,
                show(&self.seen[self.cursor..])
            ),
        }
    }

    /// Reads until the stream ends; returns everything seen.
    async fn read_to_end(&mut self, cx: &Cx) -> Result<&[u8], Failure> {
        cx.within("terminal output to end", async {
            while !self.ended {
                self.pull().await;
            }
        })
        .await
        .map_err(|timeout| {
            Failure::new(format!(
                "{} (the output did not end after the program exited); it showed {}",
                timeout.message,
                show(&self.seen)
            ))
        })?;
        Ok(&self.seen)
    }

    async fn pull(&mut self) {
        match self.stream.next().await {
            Some(Ok(bytes)) => self.seen.extend_from_slice(&bytes),
            // A read error after exit is how some PTYs end (EIO).
            Some(Err(_)) | None => self.ended = true,
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn spec(cx: &Cx, argv: &[&str]) -> TerminalSpec {
    let mut spec = TerminalSpec::new(argv.iter().copied());
    spec.cwd = Some(cx.dir.clone());
    spec.env.insert("TERM".into(), "xterm".into());
    spec
}

/// An interactive bash without profiles and with a fixed prompt.
fn interactive_bash(cx: &Cx) -> TerminalSpec {
    let mut spec = spec(cx, &["bash", "--norc", "--noprofile", "-i"]);
    spec.env.insert("PS1".into(), "kit$ ".into());
    spec
}

async fn write(cx: &Cx, terminal: &Arc<dyn Terminal>, text: &str) -> CaseResult {
    cx.ok(
        &format!("terminal write {}", show(text.as_bytes())),
        terminal.write(Bytes::copy_from_slice(text.as_bytes())),
    )
    .await
}

/// Polls `foreground_pgid` until `accept` holds (5 s at most).
async fn foreground_until(
    cx: &Cx,
    terminal: &Arc<dyn Terminal>,
    what: &str,
    accept: impl Fn(u32) -> bool,
) -> Result<u32, Failure> {
    let mut last = 0;
    for _ in 0..50 {
        last = cx.ok("foreground_pgid", terminal.foreground_pgid()).await?;
        if accept(last) {
            return Ok(last);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    fail!("foreground_pgid: {what}; it stayed {last} for 5 s")
}

async fn output_exact(cx: &Cx) -> CaseResult {
    let terminal = cx
        .spawn_terminal(
            "spawn_terminal printf",
            spec(cx, &["sh", "-c", "printf 'KIT-BEGIN\\n'; printf 'KIT-END'"]),
        )
        .await?;
    let mut screen = Screen::take(&terminal)?;
    ensure!(
        terminal.take_output().is_none(),
        "take_output: a second call returned a stream"
    );
    let status = cx
        .ok("wait for the terminal program", terminal.wait())
        .await?;
    ensure!(
        status.success(),
        "terminal program: expected exit 0, got {status:?}"
    );
    let seen = screen.read_to_end(cx).await?;
    // The terminal itself turns "\n" into "\r\n" (onlcr).
    ensure!(
        seen == b"KIT-BEGIN\r\nKIT-END",
        "terminal output: expected exactly b\"KIT-BEGIN\\r\\nKIT-END\", got {}",
        show(seen)
    );
    Ok(())
}

async fn identity_env_cwd(cx: &Cx) -> CaseResult {
    let script = r#"
printf 'ids %s %s %s\n' "$$" "$(ps -o pgid= -p $$ | tr -d ' ')" "$(ps -o sid= -p $$ | tr -d ' ')"
if [ -t 0 ] && [ -t 1 ]; then echo tty-yes; else echo tty-no; fi
echo "cwd $(pwd -P)"
echo "var [$KIT_VAR]"
awk 'BEGIN { for (k in ENVIRON) if (k ~ /^DSH_|KEY|SECRET|TOKEN/ && k != "KIT_API_KEY") print "leak " k }'
echo "explicit-key [$KIT_API_KEY]"
echo done"#;
    let mut spec = spec(cx, &["sh", "-c", script]);
    spec.env.insert("KIT_VAR".into(), "value é".into());
    spec.env.insert("KIT_API_KEY".into(), "explicit".into());
    let terminal = cx.spawn_terminal("spawn_terminal probe", spec).await?;
    let pid = terminal.pid();
    ensure!(
        pid > 1,
        "spawn_terminal: pid() is {pid}; it must be a real process id > 1"
    );
    let mut screen = Screen::take(&terminal)?;
    cx.ok("wait for the probe", terminal.wait()).await?;
    let seen = String::from_utf8_lossy(screen.read_to_end(cx).await?).replace("\r\n", "\n");
    let expected_ids = format!("ids {pid} {pid} {pid}\n");
    ensure!(
        seen.contains(&expected_ids),
        "terminal program: expected {expected_ids:?} (its own pid, group and session = pid()), got {seen:?}"
    );
    ensure!(
        seen.contains("tty-yes\n"),
        "terminal program: stdin/stdout are not a tty: {seen:?}"
    );
    ensure!(
        seen.contains(&format!("cwd {}\n", cx.dir)),
        "terminal program: expected to run in {}, got {seen:?}",
        cx.dir
    );
    ensure!(
        seen.contains("var [value é]\n"),
        "terminal program: explicit KIT_VAR missing or altered: {seen:?}"
    );
    ensure!(
        seen.contains("explicit-key [explicit]\n"),
        "terminal program: explicit KIT_API_KEY missing: {seen:?}"
    );
    let leaks: Vec<&str> = seen.lines().filter(|l| l.starts_with("leak ")).collect();
    ensure!(
        leaks.is_empty(),
        "terminal program: scrubbed ambient names present: {leaks:?}"
    );
    ensure!(
        seen.ends_with("done\n"),
        "terminal program: output incomplete: {seen:?}"
    );
    Ok(())
}

async fn echo_input(cx: &Cx) -> CaseResult {
    let script = r#"printf 'READY\n'; read line; printf 'GOT[%s]\n' "$line""#;
    let terminal = cx
        .spawn_terminal("spawn_terminal reader", spec(cx, &["sh", "-c", script]))
        .await?;
    let mut screen = Screen::take(&terminal)?;
    screen.expect(cx, "READY\r\n").await?;
    write(cx, &terminal, "typed-text\r").await?;
    // The echo comes from the terminal before the program answers.
    screen.expect(cx, "typed-text").await?;
    screen.expect(cx, "GOT[typed-text]").await?;
    let status = cx.ok("wait for the reader", terminal.wait()).await?;
    ensure!(status.success(), "reader: expected exit 0, got {status:?}");
    Ok(())
}

async fn resize(cx: &Cx) -> CaseResult {
    let script = r#"trap 'echo WINCH-SEEN' WINCH
unset COLUMNS LINES
echo "SIZE $(tput cols) $(tput lines)"
while :; do if read -r cmd; then case "$cmd" in size) echo "SIZE $(tput cols) $(tput lines)";; quit) exit 0;; esac; fi; done"#;
    let mut spec = spec(cx, &["bash", "-c", script]);
    spec.cols = 100;
    spec.rows = 30;
    let terminal = cx.spawn_terminal("spawn_terminal 100x30", spec).await?;
    let mut screen = Screen::take(&terminal)?;
    screen.expect(cx, "SIZE 100 30").await?;
    cx.ok("resize to 132x40", terminal.resize(132, 40)).await?;
    // bash runs the WINCH trap once `read` returns, so ask for the size
    // first: the trap's line comes before the answer either way.
    write(cx, &terminal, "size\r").await?;
    screen.expect(cx, "WINCH-SEEN").await?;
    screen.expect(cx, "SIZE 132 40").await?;
    cx.err(
        "resize to 0x40",
        ErrorKind::InvalidInput,
        terminal.resize(0, 40),
    )
    .await?;
    write(cx, &terminal, "quit\r").await?;
    let status = cx.ok("wait for the resize probe", terminal.wait()).await?;
    ensure!(
        status.success(),
        "resize probe: expected exit 0, got {status:?}"
    );
    Ok(())
}

/// Starts an interactive bash, runs `sleep 30` in the foreground, and
/// returns the terminal, its screen and the job's process group once the
/// job's leader runs `sleep` (seen by `ps` in the world).
async fn shell_with_foreground_job(cx: &Cx) -> Result<(Arc<dyn Terminal>, Screen, u32), Failure> {
    let terminal = cx
        .spawn_terminal("spawn_terminal bash -i", interactive_bash(cx))
        .await?;
    let mut screen = Screen::take(&terminal)?;
    screen.expect(cx, "kit$ ").await?;
    let pid = terminal.pid();
    let shell = foreground_until(
        cx,
        &terminal,
        &format!("expected the shell {pid} in the foreground"),
        |pgid| pgid == pid,
    )
    .await?;
    ensure_eq("foreground_pgid of an idle shell", &shell, &pid)?;
    write(cx, &terminal, "sleep 30\r").await?;
    let job = foreground_until(
        cx,
        &terminal,
        &format!("expected the foreground job to replace the shell {pid}"),
        |pgid| pgid != pid && pgid > 1,
    )
    .await?;
    // bash hands the terminal to the job before the job execs `sleep`; an interrupt in that
    // window reaches bash's forked child, which swallows it. Wait for the exec.
    let mut members = Vec::new();
    for _ in 0..50 {
        members = cx.group_members(job).await?;
        if members
            .iter()
            .any(|row| row.pid == job && row.args.starts_with("sleep"))
        {
            return Ok((terminal, screen, job));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    fail!(
        "foreground_pgid {job}: expected the group of the `sleep 30` job, ps finds for 5 s: {}",
        show_rows(&members)
    )
}

async fn foreground_and_signal(cx: &Cx) -> CaseResult {
    let (terminal, mut screen, job) = shell_with_foreground_job(cx).await?;
    let pid = terminal.pid();
    cx.ok(
        "signal(INT) to the foreground group",
        terminal.signal(Signal::INT),
    )
    .await?;
    foreground_until(
        cx,
        &terminal,
        &format!("expected the shell {pid} back in the foreground after SIGINT"),
        |pgid| pgid == pid,
    )
    .await?;
    let members = cx.group_members(job).await?;
    ensure!(
        members.is_empty(),
        "signal(INT): the foreground job's group {job} still runs: {}",
        show_rows(&members)
    );
    shell_survives(cx, &terminal, &mut screen, "signal(INT)").await
}

/// The interactive shell still runs commands after its job was
/// interrupted, and exits cleanly when told to.
async fn shell_survives(
    cx: &Cx,
    terminal: &Arc<dyn Terminal>,
    screen: &mut Screen,
    after: &str,
) -> CaseResult {
    // The typed command echoes as `$((40+2))`; only the shell prints 42.
    write(cx, terminal, "echo alive-$((40+2))\r").await?;
    screen.expect(cx, "alive-42").await?;
    write(cx, terminal, "exit 0\r").await?;
    let status = cx.ok("wait for the shell", terminal.wait()).await?;
    ensure!(
        status.success(),
        "the shell after {after}: expected exit 0, got {status:?}"
    );
    Ok(())
}

async fn ctrl_c(cx: &Cx) -> CaseResult {
    let (terminal, mut screen, _job) = shell_with_foreground_job(cx).await?;
    let pid = terminal.pid();
    write(cx, &terminal, "\u{3}").await?;
    foreground_until(
        cx,
        &terminal,
        &format!("expected the shell {pid} back in the foreground after Ctrl-C"),
        |pgid| pgid == pid,
    )
    .await?;
    shell_survives(cx, &terminal, &mut screen, "Ctrl-C").await
}

async fn terminate_session(cx: &Cx) -> CaseResult {
    let terminal = cx
        .spawn_terminal("spawn_terminal bash -i", interactive_bash(cx))
        .await?;
    let mut screen = Screen::take(&terminal)?;
    screen.expect(cx, "kit$ ").await?;
    write(
        cx,
        &terminal,
        "sleep 300 & sleep 301 & echo jobs-started; sleep 302\r",
    )
    .await?;
    screen.expect(cx, "jobs-started\r\n").await?;
    let pid = terminal.pid();
    let mut members = Vec::new();
    for _ in 0..50 {
        members = cx.session_members(pid).await?;
        if members
            .iter()
            .filter(|row| row.args.starts_with("sleep 30"))
            .count()
            == 3
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut groups: Vec<u32> = members.iter().map(|row| row.pgid).collect();
    groups.sort_unstable();
    groups.dedup();
    ensure!(
        groups.len() >= 3,
        "session {pid}: expected the shell and three jobs in their own groups, ps finds: {}",
        show_rows(&members)
    );
    cx.ok("terminate the terminal", terminal.terminate())
        .await?;
    let left = cx.session_members(pid).await?;
    ensure!(
        left.is_empty(),
        "terminate of terminal session {pid} succeeded but ps still finds: {}",
        show_rows(&left)
    );
    cx.ok("terminate the terminal again", terminal.terminate())
        .await?;
    let err = cx
        .err(
            "write after terminate",
            ErrorKind::Closed,
            terminal.write(Bytes::from_static(b"x")),
        )
        .await?;
    ensure!(
        !err.message().is_empty(),
        "write after terminate: the error has no message"
    );
    cx.ok("wait after terminate", terminal.wait()).await?;
    Ok(())
}

async fn exit_status(cx: &Cx) -> CaseResult {
    let terminal = cx
        .spawn_terminal(
            "spawn_terminal sh -c 'exit 3'",
            spec(cx, &["sh", "-c", "exit 3"]),
        )
        .await?;
    let mut screen = Screen::take(&terminal)?;
    let first = cx.ok("wait", terminal.wait()).await?;
    ensure_eq("terminal exit code", &first.code, &Some(3))?;
    ensure_eq("terminal exit signal", &first.signal, &None)?;
    let second = cx.ok("wait again", terminal.wait()).await?;
    ensure_eq("a second wait", &second, &first)?;
    let seen = screen.read_to_end(cx).await?;
    ensure!(
        seen.is_empty(),
        "terminal output of a silent program: {}",
        show(seen)
    );
    Ok(())
}

async fn paused_consumer_buffers(cx: &Cx) -> CaseResult {
    const LINES: usize = 3000;
    let script = format!(
        "i=0; while [ $i -lt {LINES} ]; do echo \"line $i\"; i=$((i+1)); done; echo END-OF-OUTPUT"
    );
    let terminal = cx
        .spawn_terminal(
            "spawn_terminal line writer",
            spec(cx, &["sh", "-c", &script]),
        )
        .await?;
    // Nobody reads until the program has exited.
    let status = cx.ok("wait for the line writer", terminal.wait()).await?;
    ensure!(
        status.success(),
        "line writer: expected exit 0, got {status:?}"
    );
    let mut screen = Screen::take(&terminal)?;
    let seen = String::from_utf8_lossy(screen.read_to_end(cx).await?).replace("\r\n", "\n");
    let mut expected = String::new();
    for i in 0..LINES {
        expected.push_str(&format!("line {i}\n"));
    }
    expected.push_str("END-OF-OUTPUT\n");
    if seen != expected {
        let first_bad = seen
            .lines()
            .zip(expected.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(seen.lines().count().min(expected.lines().count()));
        fail!(
            "output buffered for a paused consumer: expected {} lines, got {}; first difference at line {first_bad}",
            LINES + 1,
            seen.lines().count()
        );
    }
    Ok(())
}

async fn bad_input(cx: &Cx) -> CaseResult {
    let sp = cx.sp();
    let mut empty = spec(cx, &[]);
    empty.argv.clear();
    let mut zero = spec(cx, &["sh"]);
    zero.cols = 0;
    let mut bad_env = spec(cx, &["sh"]);
    bad_env.env.insert("A=B".into(), "v".into());
    let mut empty_env = spec(cx, &["sh"]);
    empty_env.env.insert(String::new(), "v".into());
    for (label, spec) in [
        ("empty argv", empty),
        ("a 0-column size", zero),
        ("env name with '='", bad_env),
        ("empty env name", empty_env),
        ("relative argv with '/'", spec(cx, &["bin/sh"])),
    ] {
        cx.err(
            &format!("spawn_terminal with {label}"),
            ErrorKind::InvalidInput,
            sp.spawn_terminal(spec),
        )
        .await?;
    }
    let what = "spawn_terminal dsh-conformance-no-such-program";
    let err = cx
        .err(
            what,
            ErrorKind::NotFound,
            sp.spawn_terminal(spec(cx, &["dsh-conformance-no-such-program"])),
        )
        .await?;
    ensure_names(what, &err, "dsh-conformance-no-such-program")?;
    let mut missing_cwd = spec(cx, &["sh"]);
    let missing = cx.path("missing-cwd");
    missing_cwd.cwd = Some(missing.clone());
    let err = cx
        .err(
            &format!("spawn_terminal with cwd {missing}"),
            ErrorKind::NotFound,
            sp.spawn_terminal(missing_cwd),
        )
        .await?;
    ensure_names(
        &format!("spawn_terminal with cwd {missing}"),
        &err,
        "missing-cwd",
    )
}
