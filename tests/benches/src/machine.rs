//! The conditions a run was measured under, printed with its figures:
//! absolute times mean little without them (ratios mean more).

use std::path::Path;

use anyhow::{Context, Result, bail};

/// The 1-, 5- and 15-minute load averages.
pub fn load_average() -> Result<[f64; 3]> {
    let text = std::fs::read_to_string("/proc/loadavg").context("read /proc/loadavg")?;
    parse_load_average(&text).context("parse /proc/loadavg")
}

fn parse_load_average(text: &str) -> Result<[f64; 3]> {
    let mut fields = text.split_whitespace();
    let mut next = |which: &str| -> Result<f64> {
        let word = fields
            .next()
            .with_context(|| format!("the {which} load average is missing"))?;
        word.parse()
            .with_context(|| format!("the {which} load average {word:?} is not a number"))
    };
    Ok([next("1-minute")?, next("5-minute")?, next("15-minute")?])
}

/// One line describing the machine: date (UTC), kernel, CPUs, load.
pub fn describe() -> String {
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|text| text.trim().to_owned())
        .unwrap_or_else(|err| format!("unknown ({err})"));
    let cpus = std::thread::available_parallelism().map_or(0, usize::from);
    format!(
        "{} UTC, Linux {kernel}, {cpus} CPUs, {}",
        jiff::Timestamp::now().strftime("%Y-%m-%d %H:%M:%S"),
        describe_load()
    )
}

/// `load average 1.23 0.98 0.50` (or why it is unknown).
pub fn describe_load() -> String {
    match load_average() {
        Ok([one, five, fifteen]) => format!("load average {one:.2} {five:.2} {fifteen:.2}"),
        Err(err) => format!("load average unknown ({err:#})"),
    }
}

/// The type of the filesystem holding `path` (`ext4`, `tmpfs` … or the
/// magic number for others).
pub fn filesystem_type(path: &Path) -> Result<String> {
    let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
        .with_context(|| format!("statfs {}: the path contains NUL", path.display()))?;
    let mut info = std::mem::MaybeUninit::<libc::statfs>::zeroed();
    // SAFETY: `c_path` is a valid C string and `info` is writable memory of
    // the type statfs fills.
    let status = unsafe { libc::statfs(c_path.as_ptr(), info.as_mut_ptr()) };
    if status != 0 {
        bail!(
            "statfs {}: {}",
            path.display(),
            std::io::Error::last_os_error()
        );
    }
    // SAFETY: statfs succeeded, so it initialised the struct.
    let magic = unsafe { info.assume_init() }.f_type as u64;
    Ok(match magic {
        0xEF53 => "ext4".to_owned(),
        0x0102_1994 => "tmpfs".to_owned(),
        0x794C_7630 => "overlayfs".to_owned(),
        0x5846_5342 => "xfs".to_owned(),
        0x9123_683E => "btrfs".to_owned(),
        other => format!("filesystem magic {other:#x}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_averages_parse_and_bad_ones_are_named() {
        let parsed = parse_load_average("0.52 1.50 2.00 3/400 1234\n").expect("parse");
        assert_eq!(parsed, [0.52, 1.5, 2.0]);
        let err = parse_load_average("0.5 x 1").expect_err("bad");
        assert_eq!(
            err.to_string(),
            "the 5-minute load average \"x\" is not a number"
        );
        let err = parse_load_average("0.5").expect_err("short");
        assert_eq!(err.to_string(), "the 5-minute load average is missing");
    }

    #[test]
    fn the_description_names_date_kernel_and_load() {
        let line = describe();
        assert!(
            line.contains(" UTC, Linux ") && line.contains("load average"),
            "{line}"
        );
    }

    #[test]
    fn filesystem_types_are_named_and_a_missing_path_is_an_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(!filesystem_type(dir.path()).expect("statfs").is_empty());
        let err = filesystem_type(&dir.path().join("missing")).expect_err("missing");
        assert!(err.to_string().contains("No such file"), "{err}");
    }
}
