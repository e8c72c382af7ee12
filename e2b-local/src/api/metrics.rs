//! Metrics beyond one sandbox's (`…/{id}/metrics` is in `sandboxes.rs`): the latest sample of
//! several sandboxes (`GET /sandboxes/metrics`), and the team's running count and start rate
//! over time (`GET /teams/{teamID}/metrics`, `…/metrics/max`) from the server's history
//! ([`crate::fleet`]). e2b-local serves one team: any team id is it.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Json;
use axum::extract::{Path, RawQuery, State};
use serde::Serialize;

use super::ApiState;
use super::error::ApiError;
use super::list_query::{query_pairs, unknown_parameter};
use super::model::MetricBody;
use crate::fleet::Point;
use crate::timefmt::{rfc3339, unix_seconds};

/// The most sandboxes one `GET /sandboxes/metrics` names.
const MAX_SANDBOXES: usize = 100;
/// The span of a team series when the caller gives no `start`.
const DEFAULT_SPAN: Duration = Duration::from_secs(3600);
/// The most points of a team series (the step grows to fit) and the shortest step.
const MAX_POINTS: u64 = 360;
const MIN_STEP: Duration = Duration::from_secs(5);

#[derive(Debug, Serialize)]
pub struct SandboxesMetrics {
    sandboxes: BTreeMap<String, MetricBody>,
}

/// `GET /sandboxes/metrics?sandbox_ids=a,b`: the latest sample of each named sandbox that is
/// running or paused (others are left out); 1 to 100 ids.
pub async fn sandboxes(
    State(state): State<ApiState>,
    RawQuery(raw): RawQuery,
) -> Result<Json<SandboxesMetrics>, ApiError> {
    let op = "get sandboxes metrics";
    let mut ids: Vec<String> = Vec::new();
    for (key, value) in query_pairs(op, raw.as_deref())? {
        match key.as_str() {
            "sandbox_ids" => ids.extend(
                value
                    .split(',')
                    .filter(|id| !id.is_empty())
                    .map(str::to_owned),
            ),
            other => return Err(unknown_parameter(op, other)),
        }
    }
    if ids.is_empty() || ids.len() > MAX_SANDBOXES {
        return Err(ApiError::bad_request(format!(
            "{op}: sandbox_ids must name 1 to {MAX_SANDBOXES} sandboxes, comma-separated"
        )));
    }
    let mut sandboxes = BTreeMap::new();
    for id in ids {
        let Some(sandbox) = state.registry.get(&id) else {
            continue;
        };
        // A sandbox killed meanwhile is left out too.
        if let Ok(sample) = sandbox.world.sample(&state.registry.host).await {
            sandboxes.insert(id, MetricBody::of(&sample));
        }
    }
    Ok(Json(SandboxesMetrics { sandboxes }))
}

/// One point of the team series.
#[derive(Debug, Serialize)]
pub struct TeamMetric {
    #[serde(rename = "concurrentSandboxes")]
    concurrent_sandboxes: i64,
    #[serde(rename = "sandboxStartRate")]
    sandbox_start_rate: f64,
    timestamp: String,
    #[serde(rename = "timestampUnix")]
    timestamp_unix: i64,
}

/// The largest value of one team metric, and when.
#[derive(Debug, Serialize)]
pub struct TeamMetricMax {
    timestamp: String,
    #[serde(rename = "timestampUnix")]
    timestamp_unix: i64,
    value: f64,
}

/// Which team metric `…/metrics/max` reads.
#[derive(Debug, Clone, Copy)]
enum Metric {
    Concurrent,
    StartRate,
}

/// What a team query asks: `start`..`end` (Unix seconds; default the last hour up to now) and,
/// for `…/max`, the metric.
struct TeamQuery {
    start: SystemTime,
    end: SystemTime,
    metric: Option<Metric>,
}

impl TeamQuery {
    fn parse(op: &str, raw: Option<&str>, with_metric: bool) -> Result<TeamQuery, ApiError> {
        let (mut start, mut end, mut metric) = (None, None, None);
        let seconds = |key: &str, value: &str| {
            value
                .parse::<u64>()
                .map(|s| UNIX_EPOCH + Duration::from_secs(s))
                .map_err(|_| {
                    ApiError::bad_request(format!(
                        "{op}: {key} must be unix seconds, got {value:?}"
                    ))
                })
        };
        for (key, value) in query_pairs(op, raw)? {
            match key.as_str() {
                "start" => start = Some(seconds(&key, &value)?),
                "end" => end = Some(seconds(&key, &value)?),
                "metric" if with_metric => {
                    metric = Some(match value.as_str() {
                        "concurrent_sandboxes" => Metric::Concurrent,
                        "sandbox_start_rate" => Metric::StartRate,
                        other => {
                            return Err(ApiError::bad_request(format!(
                                "{op}: invalid metric {other:?}: expected concurrent_sandboxes or sandbox_start_rate"
                            )));
                        }
                    })
                }
                other => return Err(unknown_parameter(op, other)),
            }
        }
        let end = end.unwrap_or_else(SystemTime::now);
        let start = start.unwrap_or_else(|| end.checked_sub(DEFAULT_SPAN).unwrap_or(UNIX_EPOCH));
        if start > end {
            return Err(ApiError::bad_request(format!("{op}: start is after end")));
        }
        Ok(TeamQuery { start, end, metric })
    }

    /// The series over the span: at most [`MAX_POINTS`] points, at least [`MIN_STEP`] apart.
    fn series(&self, state: &ApiState) -> Vec<Point> {
        let span = self.end.duration_since(self.start).unwrap_or_default();
        let step = MIN_STEP.max(Duration::from_secs(span.as_secs().div_ceil(MAX_POINTS)));
        state.registry.fleet.series(self.start, self.end, step)
    }
}

/// `GET /teams/{teamID}/metrics?start&end`: the running count and start rate (creates per
/// second over the step before each point), at most 360 points at least 5 s apart.
pub async fn team(
    State(state): State<ApiState>,
    Path(_team): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Json<Vec<TeamMetric>>, ApiError> {
    let query = TeamQuery::parse("get team metrics", raw.as_deref(), false)?;
    Ok(Json(
        query
            .series(&state)
            .into_iter()
            .map(|point| TeamMetric {
                concurrent_sandboxes: point.concurrent,
                sandbox_start_rate: point.start_rate,
                timestamp: rfc3339(point.at),
                timestamp_unix: unix_seconds(point.at),
            })
            .collect(),
    ))
}

/// `GET /teams/{teamID}/metrics/max?start&end&metric=concurrent_sandboxes|sandbox_start_rate`:
/// the largest value over the span and its first instant — the exact peak of running
/// sandboxes, the largest start rate of the series' steps.
pub async fn team_max(
    State(state): State<ApiState>,
    Path(_team): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Json<TeamMetricMax>, ApiError> {
    let op = "get team metrics max";
    let query = TeamQuery::parse(op, raw.as_deref(), true)?;
    let (at, value) = match query.metric {
        None => {
            return Err(ApiError::bad_request(format!(
                "{op}: missing query parameter metric"
            )));
        }
        Some(Metric::Concurrent) => {
            let (at, most) = state.registry.fleet.peak(query.start, query.end);
            (at, most as f64)
        }
        Some(Metric::StartRate) => {
            query
                .series(&state)
                .iter()
                .fold((query.start, 0.0), |best, point| {
                    if point.start_rate > best.1 {
                        (point.at, point.start_rate)
                    } else {
                        best
                    }
                })
        }
    };
    Ok(Json(TeamMetricMax {
        timestamp: rfc3339(at),
        timestamp_unix: unix_seconds(at),
        value,
    }))
}
