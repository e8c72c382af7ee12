//! Exit facts as envd reports them for processes it started itself (a
//! terminal's program, or a supervising helper whose exit mirrors its
//! command's): an exit code, or Go's rendering of the signal that ended the
//! process (`"signal: killed"`).

use dsh_plugin_api::subprocess::{ExitStatus, Signal};
use dsh_provider_kit::status::Ended;

/// Go's `syscall.Signal.String()` names on Linux, by number.
const GO_NAMES: [&str; 31] = [
    "hangup",
    "interrupt",
    "quit",
    "illegal instruction",
    "trace/breakpoint trap",
    "aborted",
    "bus error",
    "floating point exception",
    "killed",
    "user defined signal 1",
    "segmentation fault",
    "user defined signal 2",
    "broken pipe",
    "alarm clock",
    "terminated",
    "stack fault",
    "child exited",
    "continued",
    "stopped (signal)",
    "stopped",
    "stopped (tty input)",
    "stopped (tty output)",
    "urgent I/O condition",
    "CPU time limit exceeded",
    "file size limit exceeded",
    "virtual timer expired",
    "profiling timer expired",
    "window changed",
    "I/O possible",
    "power failure",
    "bad system call",
];

/// The signal number in a Go status string (`"signal: terminated"`,
/// `"signal: segmentation fault (core dumped)"`, `"signal: signal 40"`).
pub fn signal_of_status(status: &str) -> Option<i32> {
    let name = status.strip_prefix("signal: ")?;
    let name = name.strip_suffix(" (core dumped)").unwrap_or(name);
    if let Some(number) = name.strip_prefix("signal ") {
        return number.parse().ok();
    }
    GO_NAMES
        .iter()
        .position(|&known| known == name)
        .map(|index| index as i32 + 1)
}

/// The seam's status for envd's end event, or `None` when it says neither
/// an exit code nor a signal.
pub fn from_envd(end: &e2b_client::ExitStatus, timed_out: bool) -> Option<ExitStatus> {
    let ended = if end.exited {
        Ended::Code(end.exit_code)
    } else {
        Ended::Signal(Signal(signal_of_status(&end.status)?))
    };
    Some(ended.status(timed_out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn end(exit_code: i32, exited: bool, status: &str) -> e2b_client::ExitStatus {
        e2b_client::ExitStatus {
            exit_code,
            exited,
            status: status.to_owned(),
            error: None,
        }
    }

    #[test]
    fn go_names_map_back_to_numbers() {
        assert_eq!(signal_of_status("signal: killed"), Some(9));
        assert_eq!(signal_of_status("signal: terminated"), Some(15));
        assert_eq!(signal_of_status("signal: user defined signal 1"), Some(10));
        assert_eq!(
            signal_of_status("signal: segmentation fault (core dumped)"),
            Some(11)
        );
        assert_eq!(signal_of_status("signal: signal 40"), Some(40));
        assert_eq!(signal_of_status("exit status 1"), None);
        assert_eq!(signal_of_status("signal: bogus"), None);
    }

    #[test]
    fn end_events_become_statuses() {
        assert_eq!(
            from_envd(&end(3, true, "exit status 3"), false),
            Some(ExitStatus {
                code: Some(3),
                signal: None,
                timed_out: false
            })
        );
        assert_eq!(
            from_envd(&end(-1, false, "signal: interrupt"), true),
            Some(ExitStatus {
                code: None,
                signal: Some(Signal::INT),
                timed_out: true
            })
        );
        assert_eq!(from_envd(&end(-1, false, "wait failed"), false), None);
    }
}
