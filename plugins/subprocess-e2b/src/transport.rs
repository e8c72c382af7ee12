//! What the provider needs of the transport its envd client sends through:
//! any `connectrpc` client transport whose response bodies `e2b_client::Envd`
//! can read — the sandbox's own `SandboxTransport` (tests), or the owner's
//! `OwnerTransport` (the plugin).

use std::fmt::Display;

use e2b_client::ClientTransport;
use http_body::Body;

/// A transport `e2b_client::Envd` can use, shareable across tasks.
pub trait EnvdTransport:
    ClientTransport<ResponseBody: Unpin + Body<Error: Display>> + Send + Sync + 'static
{
}

impl<T> EnvdTransport for T
where
    T: ClientTransport + Send + Sync + 'static,
    T::ResponseBody: Unpin,
    <T::ResponseBody as Body>::Error: Display,
{
}
