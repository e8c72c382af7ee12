//! Errors that stop the daemon (as opposed to per-request errors, which are answered on the wire
//! and never end [`serve`](crate::serve)).

use std::io;

/// Why [`serve`](crate::serve) could not start or had to stop.
#[derive(Debug, thiserror::Error)]
pub enum EnvdError {
    /// The configuration cannot be served as given (the message names the field and the reason).
    #[error("envd config: {0}")]
    InvalidConfig(String),
    /// Accepting connections failed in a way that retrying cannot fix (e.g. the listener's file
    /// descriptor became invalid). Transient conditions (EMFILE, ECONNABORTED, …) are retried.
    #[error("envd accept on {listener}: {source}")]
    Accept {
        /// The listener's address, for the message.
        listener: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}
