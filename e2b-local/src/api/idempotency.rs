//! `Idempotency-Key` on create (PyPI `e2b` 2.63 sends one when its caller passes
//! `idempotency_key`, and reuses it on every retry): the first request with a key creates the
//! sandbox, a repeat of the same request gets the same answer instead of a second sandbox, a
//! different request under the key is refused (`idempotency_request_mismatch`), and a repeat
//! while the first is still creating is told so (`idempotency_in_progress`). A create that
//! failed leaves no trace, so it can be retried. Keys are kept for a day, at most 10 000.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http::StatusCode;
use sha2::{Digest, Sha256};

use super::error::ApiError;

const KEPT_FOR: Duration = Duration::from_secs(24 * 60 * 60);
const MAX_KEYS: usize = 10_000;

#[derive(Debug)]
enum Outcome {
    Creating,
    /// The answer the first request got.
    Created(serde_json::Value),
}

#[derive(Debug)]
struct Entry {
    /// The request the key was first used for.
    digest: [u8; 32],
    outcome: Outcome,
    at: Instant,
}

/// The keys seen by one server.
#[derive(Debug, Default)]
pub struct Idempotency {
    entries: Mutex<HashMap<String, Entry>>,
}

/// What a request under a key is to do.
pub enum Claim {
    /// Create; report the outcome through the guard.
    Create(Creating),
    /// Answer what the first request got.
    Replay(serde_json::Value),
}

/// A create in progress under a key. Dropped without [`Creating::created`], it releases the
/// key (the create failed: a retry may try again).
pub struct Creating {
    store: Arc<Idempotency>,
    key: String,
    done: bool,
}

impl Creating {
    /// Records the answer a repeat of the request will get.
    pub fn created(mut self, answer: serde_json::Value) {
        if let Some(entry) = self.store.lock().get_mut(&self.key) {
            entry.outcome = Outcome::Created(answer);
        }
        self.done = true;
    }
}

impl Drop for Creating {
    fn drop(&mut self) {
        if !self.done {
            self.store.lock().remove(&self.key);
        }
    }
}

/// Whether `key` is what the SDK allows: 1–255 of `[a-z0-9-]`.
fn valid(key: &str) -> bool {
    (1..=255).contains(&key.len())
        && key
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

impl Idempotency {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.entries.lock().expect("idempotency lock")
    }

    /// Claims `key` for a request whose body is `body`.
    pub fn claim(self: &Arc<Self>, op: &str, key: &str, body: &[u8]) -> Result<Claim, ApiError> {
        if !valid(key) {
            return Err(ApiError::bad_request(format!(
                "{op}: invalid Idempotency-Key {key:?}: expected 1-255 lowercase letters, digits or hyphens"
            )));
        }
        let digest: [u8; 32] = Sha256::digest(body).into();
        let mut entries = self.lock();
        let now = Instant::now();
        entries.retain(|_, entry| now.duration_since(entry.at) < KEPT_FOR);
        if let Some(entry) = entries.get(key) {
            if entry.digest != digest {
                return Err(ApiError::new(
                    StatusCode::CONFLICT,
                    format!("{op}: Idempotency-Key {key:?} was used for a different request"),
                )
                .with_error_code("idempotency_request_mismatch"));
            }
            return match &entry.outcome {
                Outcome::Creating => Err(ApiError::new(
                    StatusCode::CONFLICT,
                    format!("{op}: the request with Idempotency-Key {key:?} is still in progress"),
                )
                .with_error_code("idempotency_in_progress")),
                Outcome::Created(answer) => Ok(Claim::Replay(answer.clone())),
            };
        }
        if entries.len() >= MAX_KEYS
            && let Some(oldest) = entries
                .iter()
                .min_by_key(|(_, entry)| entry.at)
                .map(|(key, _)| key.clone())
        {
            entries.remove(&oldest);
        }
        entries.insert(
            key.to_owned(),
            Entry {
                digest,
                outcome: Outcome::Creating,
                at: now,
            },
        );
        Ok(Claim::Create(Creating {
            store: self.clone(),
            key: key.to_owned(),
            done: false,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_replays_its_answer_refuses_other_requests_and_frees_on_failure() {
        let store = Arc::new(Idempotency::default());
        assert!(store.claim("create", "Bad_Key", b"{}").is_err());
        let Claim::Create(first) = store.claim("create", "k-1", b"{}").unwrap() else {
            panic!("a new key creates")
        };
        let busy = store.claim("create", "k-1", b"{}").err().unwrap();
        assert_eq!(busy.error_code, Some("idempotency_in_progress"));
        first.created(serde_json::json!({"sandboxID": "abc"}));
        let Claim::Replay(answer) = store.claim("create", "k-1", b"{}").unwrap() else {
            panic!("a repeat replays")
        };
        assert_eq!(answer["sandboxID"], "abc");
        let other = store.claim("create", "k-1", b"{\"x\":1}").err().unwrap();
        assert_eq!(other.error_code, Some("idempotency_request_mismatch"));
        // A create that failed frees its key.
        let Claim::Create(failed) = store.claim("create", "k-2", b"{}").unwrap() else {
            panic!()
        };
        drop(failed);
        assert!(matches!(
            store.claim("create", "k-2", b"{}"),
            Ok(Claim::Create(_))
        ));
    }
}
