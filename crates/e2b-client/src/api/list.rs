//! Listing sandboxes: the query (`GET /v2/sandboxes`) and its
//! `x-next-token` pagination, as a page iterator or a stream.

use std::collections::BTreeMap;

use futures::StreamExt;
use futures::stream::{self, BoxStream};

use super::Api;
use super::models::{SandboxDetail, SandboxState};
use crate::error::{Context, Error, Result};
use crate::urlenc;

/// Which sandboxes to list. Filters combine with AND.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListQuery {
    metadata: BTreeMap<String, String>,
    states: Vec<SandboxState>,
    limit: Option<u32>,
}

impl ListQuery {
    /// Only sandboxes whose metadata has `key = value`.
    #[must_use]
    pub fn metadata(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.metadata.insert(key.into(), value.into());
        self
    }

    /// Only sandboxes in `state` (may be given several times).
    #[must_use]
    pub fn state(mut self, state: SandboxState) -> Self {
        if !self.states.contains(&state) {
            self.states.push(state);
        }
        self
    }

    /// At most `limit` sandboxes per page (1–100; the server's default is
    /// 100).
    #[must_use]
    pub fn limit(mut self, limit: u32) -> Self {
        self.limit = Some(limit);
        self
    }

    pub(crate) fn validate(&self, context: &Context) -> Result<()> {
        if let Some(limit) = self.limit
            && !(1..=100).contains(&limit)
        {
            return Err(Error::invalid_argument(
                context.clone(),
                format!("limit {limit} is outside 1-100"),
            ));
        }
        if let Some(SandboxState::Other(state)) = self
            .states
            .iter()
            .find(|s| matches!(s, SandboxState::Other(_)))
        {
            return Err(Error::invalid_argument(
                context.clone(),
                format!("state {state:?} cannot be listed (use running or paused)"),
            ));
        }
        Ok(())
    }

    /// The query string for one page.
    ///
    /// Metadata goes out the way the SDKs send it, which the real API
    /// decodes three times (framework, whole value, each key and value):
    /// each key and value is encoded twice, pairs are joined with `=` and
    /// `&`, and the whole value is encoded once more; `{k: "v w"}` becomes
    /// `metadata=k%3Dv%252520w`.
    pub(crate) fn to_query(&self, next_token: Option<&str>) -> String {
        let mut parts = Vec::new();
        if !self.metadata.is_empty() {
            let joined = self
                .metadata
                .iter()
                .map(|(k, v)| {
                    format!(
                        "{}={}",
                        urlenc::component(&urlenc::component(k)),
                        urlenc::component(&urlenc::component(v))
                    )
                })
                .collect::<Vec<_>>()
                .join("&");
            parts.push(format!("metadata={}", urlenc::component(&joined)));
        }
        if !self.states.is_empty() {
            let states: Vec<&str> = self.states.iter().map(SandboxState::as_str).collect();
            parts.push(format!("state={}", states.join(",")));
        }
        if let Some(limit) = self.limit {
            parts.push(format!("limit={limit}"));
        }
        if let Some(token) = next_token {
            parts.push(format!("nextToken={}", urlenc::component(token)));
        }
        parts.join("&")
    }
}

/// One page of a listing.
#[derive(Debug, Clone)]
pub struct SandboxPage {
    /// The sandboxes on this page.
    pub sandboxes: Vec<SandboxDetail>,
    /// The token of the next page; `None` on the last page.
    pub next_token: Option<String>,
}

/// Walks a listing page by page; each [`SandboxPager::next_page`] is one
/// API call.
#[derive(Debug, Clone)]
pub struct SandboxPager {
    api: Api,
    query: ListQuery,
    next_token: Option<String>,
    done: bool,
}

impl SandboxPager {
    pub(crate) fn new(api: Api, query: ListQuery) -> Self {
        SandboxPager {
            api,
            query,
            next_token: None,
            done: false,
        }
    }

    /// Whether another page may exist.
    pub fn has_next(&self) -> bool {
        !self.done
    }

    /// The next page, or `None` after the last one.
    ///
    /// # Errors
    /// As [`Api::list_sandboxes_page`]; after an error the same page can be
    /// asked for again.
    pub async fn next_page(&mut self) -> Result<Option<Vec<SandboxDetail>>> {
        if self.done {
            return Ok(None);
        }
        let page = self
            .api
            .list_sandboxes_page(&self.query, self.next_token.as_deref())
            .await?;
        self.next_token = page.next_token;
        self.done = self.next_token.is_none();
        Ok(Some(page.sandboxes))
    }

    /// Every sandbox of every remaining page, fetched lazily one page at a
    /// time. The stream ends after yielding an error.
    pub fn into_stream(self) -> BoxStream<'static, Result<SandboxDetail>> {
        stream::unfold(Some(self), |pager| async move {
            let mut pager = pager?;
            match pager.next_page().await {
                Ok(Some(page)) => {
                    Some((stream::iter(page.into_iter().map(Ok)).boxed(), Some(pager)))
                }
                Ok(None) => None,
                Err(err) => Some((stream::once(async move { Err(err) }).boxed(), None)),
            }
        })
        .flatten()
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_is_encoded_as_the_sdk_does() {
        let query = ListQuery::default().metadata("k", "v w");
        assert_eq!(query.to_query(None), "metadata=k%3Dv%252520w");
    }

    #[test]
    fn metadata_survives_three_decodes() {
        let query = ListQuery::default()
            .metadata("a&b", "c=d")
            .metadata("pct", "50%");
        let wire = query.to_query(None);
        let value = wire.strip_prefix("metadata=").unwrap();
        let decode = |s: &str| {
            percent_encoding::percent_decode_str(s)
                .decode_utf8()
                .unwrap()
                .into_owned()
        };
        // Framework, then the whole value, then each key and value.
        let whole = decode(&decode(value));
        let pairs: BTreeMap<String, String> = whole
            .split('&')
            .map(|pair| {
                let (k, v) = pair.split_once('=').unwrap();
                (decode(k), decode(v))
            })
            .collect();
        assert_eq!(pairs["a&b"], "c=d");
        assert_eq!(pairs["pct"], "50%");
    }

    #[test]
    fn states_limit_and_token() {
        let query = ListQuery::default()
            .state(SandboxState::Running)
            .state(SandboxState::Paused)
            .state(SandboxState::Running)
            .limit(10);
        assert_eq!(
            query.to_query(Some("tok/1")),
            "state=running,paused&limit=10&nextToken=tok%2F1"
        );
        assert_eq!(ListQuery::default().to_query(None), "");
    }

    #[test]
    fn bad_limits_and_states_are_rejected() {
        let context = Context::new("list sandboxes", "");
        assert!(ListQuery::default().limit(0).validate(&context).is_err());
        assert!(ListQuery::default().limit(101).validate(&context).is_err());
        assert!(
            ListQuery::default()
                .state(SandboxState::Other("x".into()))
                .validate(&context)
                .is_err()
        );
        ListQuery::default().limit(100).validate(&context).unwrap();
    }
}
