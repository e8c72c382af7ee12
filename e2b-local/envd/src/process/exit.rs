//! The `EndEvent` of a process, rendered exactly as envd's Go runtime does
//! (docs/e2b-protocol.md §5.4):
//! `exit_code` (-1 when a signal ended it), `exited`, `status` in Go's `ProcessState.String()`
//! form, and `error` (the same text) only when the process did not exit 0.

use envd_proto::process::process_event::EndEvent;

/// Builds the end event from a raw `waitpid` status.
pub(crate) fn end_event(raw_status: i32) -> EndEvent {
    let status = go_status_string(raw_status);
    let (exit_code, exited) = if libc::WIFEXITED(raw_status) {
        (libc::WEXITSTATUS(raw_status), true)
    } else {
        (-1, false)
    };
    let success = exited && exit_code == 0;
    EndEvent {
        exit_code,
        exited,
        error: (!success).then(|| status.clone()),
        status,
        ..Default::default()
    }
}

/// Go's `os.ProcessState.String()`.
fn go_status_string(raw_status: i32) -> String {
    let mut text = if libc::WIFEXITED(raw_status) {
        format!("exit status {}", libc::WEXITSTATUS(raw_status))
    } else if libc::WIFSIGNALED(raw_status) {
        format!("signal: {}", go_signal_name(libc::WTERMSIG(raw_status)))
    } else if libc::WIFSTOPPED(raw_status) {
        format!(
            "stop signal: {}",
            go_signal_name(libc::WSTOPSIG(raw_status))
        )
    } else if libc::WIFCONTINUED(raw_status) {
        "continued".to_owned()
    } else {
        String::new()
    };
    if libc::WIFSIGNALED(raw_status) && libc::WCOREDUMP(raw_status) {
        text.push_str(" (core dumped)");
    }
    text
}

/// Go's `syscall.Signal.String()` on Linux.
pub(crate) fn go_signal_name(signal: i32) -> String {
    let name = match signal {
        1 => "hangup",
        2 => "interrupt",
        3 => "quit",
        4 => "illegal instruction",
        5 => "trace/breakpoint trap",
        6 => "aborted",
        7 => "bus error",
        8 => "floating point exception",
        9 => "killed",
        10 => "user defined signal 1",
        11 => "segmentation fault",
        12 => "user defined signal 2",
        13 => "broken pipe",
        14 => "alarm clock",
        15 => "terminated",
        16 => "stack fault",
        17 => "child exited",
        18 => "continued",
        19 => "stopped (signal)",
        20 => "stopped",
        21 => "stopped (tty input)",
        22 => "stopped (tty output)",
        23 => "urgent I/O condition",
        24 => "CPU time limit exceeded",
        25 => "file size limit exceeded",
        26 => "virtual timer expired",
        27 => "profiling timer expired",
        28 => "window changed",
        29 => "I/O possible",
        30 => "power failure",
        31 => "bad system call",
        other => return format!("signal {other}"),
    };
    name.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exited(code: i32) -> i32 {
        code << 8
    }

    #[test]
    fn end_events_match_go() {
        let ok = end_event(exited(0));
        assert_eq!((ok.exit_code, ok.exited), (0, true));
        assert_eq!(ok.status, "exit status 0");
        assert_eq!(ok.error, None);

        let failed = end_event(exited(2));
        assert_eq!((failed.exit_code, failed.exited), (2, true));
        assert_eq!(failed.error.as_deref(), Some("exit status 2"));

        let killed = end_event(libc::SIGKILL);
        assert_eq!((killed.exit_code, killed.exited), (-1, false));
        assert_eq!(killed.status, "signal: killed");
        assert_eq!(killed.error.as_deref(), Some("signal: killed"));

        let dumped = end_event(libc::SIGSEGV | 0x80);
        assert_eq!(dumped.status, "signal: segmentation fault (core dumped)");
        assert_eq!(end_event(libc::SIGTERM).status, "signal: terminated");
        assert_eq!(go_signal_name(64), "signal 64");
    }
}
