//! RFC 3339 timestamps for the control plane's `startedAt`, `endAt` and metric timestamps.

use std::time::{SystemTime, UNIX_EPOCH};

/// Formats `time` as RFC 3339 in UTC with millisecond precision, e.g. `2024-01-01T00:00:00.000Z`.
/// Times before the Unix epoch are clamped to the epoch (the server never produces them).
pub fn rfc3339(time: SystemTime) -> String {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        since.subsec_millis()
    )
}

/// Seconds since the Unix epoch, as the API's `timestampUnix` fields carry them.
pub fn unix_seconds(time: SystemTime) -> i64 {
    time.duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// Days since 1970-01-01 to a proleptic Gregorian (year, month, day) — H. Hinnant's algorithm.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn formats_known_instants() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let t = UNIX_EPOCH + Duration::from_millis(1_709_251_199_123);
        assert_eq!(rfc3339(t), "2024-02-29T23:59:59.123Z");
        let t = UNIX_EPOCH + Duration::from_secs(4_102_444_800);
        assert_eq!(rfc3339(t), "2100-01-01T00:00:00.000Z");
    }

    #[test]
    fn unix_seconds_truncates() {
        assert_eq!(unix_seconds(UNIX_EPOCH + Duration::from_millis(1999)), 1);
    }
}
