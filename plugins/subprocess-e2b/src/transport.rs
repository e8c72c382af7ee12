//! What the provider needs of the transport its envd client sends through:
//! any transport `e2b_client::Envd` can read ([`EnvdReadable`]) — the
//! sandbox's own `SandboxTransport` (tests), or the owner's `OwnerTransport`
//! (the plugin) — shareable across tasks.

use dsh_e2b_gateway::EnvdReadable;

/// A transport `e2b_client::Envd` can use, shareable across tasks.
pub trait EnvdTransport: EnvdReadable + Send + Sync + 'static {}

impl<T> EnvdTransport for T where T: EnvdReadable + Send + Sync + 'static {}
