//! `POST /init` (docs/e2b-protocol.md §7.4): the orchestrator's runtime configuration — user
//! environment variables, access token, default user and working directory. It authenticates
//! itself: once a token is set, only a request carrying the same token may re-initialise. Requests
//! older than the last applied one (by `timestamp`) are acknowledged but ignored. Unlike envd, the
//! daemon never sets the system clock (it shares the host's).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use http::{HeaderValue, Request, Response, StatusCode, header};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde::Deserialize;

use super::response::{Body, json_error, status};
use crate::ENVD_VERSION;
use crate::auth::tokens_equal;
use crate::state::Daemon;

/// The largest `/init` body accepted.
const MAX_INIT_BODY: usize = 1 << 20;

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct InitRequest {
    env_vars: Option<BTreeMap<String, String>>,
    access_token: Option<String>,
    timestamp: Option<String>,
    default_user: Option<String>,
    default_workdir: Option<String>,
}

pub(crate) async fn post_init(daemon: &Arc<Daemon>, request: Request<Incoming>) -> Response<Body> {
    let mut response = init(daemon, request).await;
    response
        .headers_mut()
        .insert("x-envd-version", HeaderValue::from_static(ENVD_VERSION));
    response
}

async fn init(daemon: &Arc<Daemon>, request: Request<Incoming>) -> Response<Body> {
    let body = match http_body_util::Limited::new(request.into_body(), MAX_INIT_BODY)
        .collect()
        .await
    {
        Ok(collected) => collected.to_bytes(),
        Err(err) => {
            return json_error(
                StatusCode::BAD_REQUEST,
                format!("init: reading body: {err}"),
            );
        }
    };
    let init: InitRequest = if body.iter().all(u8::is_ascii_whitespace) {
        InitRequest::default()
    } else {
        match serde_json::from_slice(&body) {
            Ok(init) => init,
            Err(err) => {
                return json_error(
                    StatusCode::BAD_REQUEST,
                    format!("init: invalid JSON body: {err}"),
                );
            }
        }
    };
    let timestamp = match init.timestamp.as_deref().map(parse_rfc3339) {
        None => None,
        Some(Ok(nanos)) => Some(nanos),
        Some(Err(err)) => {
            return json_error(StatusCode::BAD_REQUEST, format!("init: timestamp: {err}"));
        }
    };
    if let Some(vars) = &init.env_vars {
        for (name, value) in vars {
            if let Err(err) = crate::env_vars::validate_env_var(name, value) {
                return json_error(StatusCode::BAD_REQUEST, format!("init: envVars: {err}"));
            }
        }
    }
    let requested_token = init.access_token.filter(|token| !token.is_empty());

    let mut settings = daemon.settings_mut();
    if let Some(current) = &settings.access_token {
        match &requested_token {
            Some(given) if tokens_equal(current, given) => {}
            Some(_) => {
                return json_error(StatusCode::UNAUTHORIZED, "access token validation failed");
            }
            None => {
                return json_error(
                    StatusCode::UNAUTHORIZED,
                    "access token reset not authorized",
                );
            }
        }
    }
    let newer = match (timestamp, settings.last_init_nanos) {
        (Some(new), Some(last)) => new > last,
        _ => true,
    };
    if newer {
        if let Some(nanos) = timestamp {
            settings.last_init_nanos = Some(nanos);
        }
        if let Some(vars) = &init.env_vars {
            settings.env_vars.replace_user(vars);
        }
        settings.access_token = requested_token;
        if let Some(user) = init.default_user.filter(|user| !user.is_empty()) {
            settings.default_user = user;
        }
        if let Some(workdir) = init.default_workdir.filter(|workdir| !workdir.is_empty()) {
            settings.default_workdir = Some(PathBuf::from(workdir));
        }
    }
    drop(settings);
    let mut response = status(StatusCode::NO_CONTENT);
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// Parses an RFC 3339 date-time (`2024-01-02T03:04:05.123Z`, `…+02:00`) into unix nanoseconds.
fn parse_rfc3339(text: &str) -> Result<i128, String> {
    let invalid = || format!("{text:?} is not an RFC 3339 date-time");
    let bytes = text.as_bytes();
    if bytes.len() < 20
        || bytes[4] != b'-'
        || bytes[7] != b'-'
        || !matches!(bytes[10], b'T' | b't' | b' ')
        || bytes[13] != b':'
        || bytes[16] != b':'
    {
        return Err(invalid());
    }
    let number = |range: std::ops::Range<usize>| -> Result<i64, String> {
        text.get(range)
            .filter(|digits| digits.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|digits| digits.parse().ok())
            .ok_or_else(invalid)
    };
    let (year, month, day) = (number(0..4)?, number(5..7)?, number(8..10)?);
    let (hour, minute, second) = (number(11..13)?, number(14..16)?, number(17..19)?);
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return Err(invalid());
    }
    let mut rest = &text[19..];
    let mut nanos: i64 = 0;
    if let Some(fraction) = rest.strip_prefix('.') {
        let digits = fraction.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(invalid());
        }
        let scaled = format!("{:0<9}", &fraction[..digits.min(9)]);
        nanos = scaled.parse().map_err(|_| invalid())?;
        rest = &fraction[digits..];
    }
    let offset_seconds = match rest {
        "Z" | "z" => 0,
        offset
            if offset.len() == 6
                && matches!(offset.as_bytes()[0], b'+' | b'-')
                && offset.as_bytes()[3] == b':' =>
        {
            let hours: i64 = offset[1..3].parse().map_err(|_| invalid())?;
            let minutes: i64 = offset[4..6].parse().map_err(|_| invalid())?;
            let sign = if offset.starts_with('-') { -1 } else { 1 };
            sign * (hours * 3600 + minutes * 60)
        }
        _ => return Err(invalid()),
    };
    // Days from the civil date (Howard Hinnant's algorithm).
    let (y, m) = if month <= 2 {
        (year - 1, month + 9)
    } else {
        (year, month - 3)
    };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let day_of_year = (153 * m + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    let days = era * 146_097 + day_of_era - 719_468;
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset_seconds;
    Ok(i128::from(seconds) * 1_000_000_000 + i128::from(nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_parsing() {
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Ok(0));
        assert_eq!(
            parse_rfc3339("2024-01-01T00:00:00.5Z"),
            Ok(1_704_067_200_500_000_000)
        );
        assert_eq!(
            parse_rfc3339("2024-01-01T02:00:00+02:00"),
            Ok(1_704_067_200_000_000_000)
        );
        assert!(parse_rfc3339("yesterday").is_err());
        assert!(parse_rfc3339("2024-13-01T00:00:00Z").is_err());
        assert!(parse_rfc3339("2024-01-01T00:00:00").is_err());
    }
}
