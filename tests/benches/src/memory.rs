//! This process's resident memory, from the kernel (`/proc/self`).
//!
//! The peak is the kernel's own high-water mark (`VmHWM`), exact rather
//! than sampled; [`reset_peak`] restarts it at the current size so one
//! operation's peak can be isolated.

use anyhow::{Context, Result, anyhow};

/// Resident set size now and at its peak, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resident {
    pub now: u64,
    pub peak: u64,
}

/// Reads this process's resident set size and its high-water mark.
pub fn resident() -> Result<Resident> {
    let status = std::fs::read_to_string("/proc/self/status").context("read /proc/self/status")?;
    parse_status(&status).context("parse /proc/self/status")
}

/// Restarts the high-water mark at the current resident size (Linux ≥ 4.0:
/// writing `5` to `/proc/self/clear_refs`).
pub fn reset_peak() -> Result<()> {
    std::fs::write("/proc/self/clear_refs", "5")
        .context("reset the peak RSS through /proc/self/clear_refs")
}

/// `VmRSS` and `VmHWM` from the text of a `/proc/<pid>/status` file.
pub fn parse_status(status: &str) -> Result<Resident> {
    Ok(Resident {
        now: kib_field(status, "VmRSS")? * 1024,
        peak: kib_field(status, "VmHWM")? * 1024,
    })
}

fn kib_field(status: &str, name: &str) -> Result<u64> {
    let line = status
        .lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
        .ok_or_else(|| anyhow!("field {name} is missing"))?;
    let mut words = line.split_whitespace();
    let (Some(number), Some("kB"), None) = (words.next(), words.next(), words.next()) else {
        return Err(anyhow!(
            "field {name}: expected `<number> kB`, found {:?}",
            line.trim()
        ));
    };
    number
        .parse()
        .with_context(|| format!("field {name}: {number:?} is not a number of kB"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATUS: &str = "Name:\tbench\nVmPeak:\t  100000 kB\nVmHWM:\t    9000 kB\nVmRSS:\t    8000 kB\nThreads:\t5\n";

    #[test]
    fn parses_current_and_peak_resident_size() {
        assert_eq!(
            parse_status(STATUS).expect("parse"),
            Resident {
                now: 8000 * 1024,
                peak: 9000 * 1024
            }
        );
    }

    #[test]
    fn a_missing_or_malformed_field_is_named() {
        let err = parse_status("VmRSS:\t1 kB\n").expect_err("no VmHWM");
        assert_eq!(err.to_string(), "field VmHWM is missing");
        let err = parse_status("VmRSS:\tmany kB\nVmHWM:\t1 kB\n").expect_err("not a number");
        assert_eq!(
            err.to_string(),
            "field VmRSS: \"many\" is not a number of kB"
        );
        let err = parse_status("VmRSS:\t1 MB\nVmHWM:\t1 kB\n").expect_err("unit");
        assert_eq!(
            err.to_string(),
            "field VmRSS: expected `<number> kB`, found \"1 MB\""
        );
    }

    #[test]
    fn this_process_has_a_peak_at_least_its_current_size() {
        let before = resident().expect("read");
        assert!(before.now > 0 && before.peak >= before.now, "{before:?}");
        reset_peak().expect("reset");
        let after = resident().expect("read");
        assert!(after.peak >= after.now, "{after:?}");
    }
}
