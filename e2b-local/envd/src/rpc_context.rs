//! The request context every Connect RPC shares: the Basic-auth user check that envd's authn
//! middleware does before any handler runs (docs/e2b-protocol.md §3.2), the `Connect-Timeout-Ms`
//! validation and resolving the acting user inside handlers.

use std::sync::Arc;
use std::time::Duration;

use connectrpc::interceptor::{
    NextStream, PayloadStream, StreamRequest, StreamResponse, UnaryRequest, UnaryResponse,
};
use connectrpc::{ConnectError, Interceptor, Next, RequestContext};

use crate::auth::basic_auth_user;
use crate::state::{Daemon, UserError};
use crate::users::User;

/// The user named by a request's Basic-auth header, resolved by [`UserInterceptor`].
#[derive(Debug, Clone)]
pub(crate) struct AuthUser(pub User);

/// Resolves the Basic-auth user of every RPC before its handler runs (an unknown user is
/// `unauthenticated`, whatever the RPC) and rejects a malformed `Connect-Timeout-Ms`.
pub(crate) struct UserInterceptor {
    pub daemon: Arc<Daemon>,
}

impl UserInterceptor {
    fn admit(&self, ctx: &mut RequestContext) -> Result<(), ConnectError> {
        request_timeout(ctx)?;
        let name = basic_auth_user(ctx.headers()).map_err(ConnectError::unauthenticated)?;
        if let Some(name) = name {
            let user = self.daemon.users.user(&name).map_err(|_| {
                ConnectError::unauthenticated(format!("invalid username: '{name}'"))
            })?;
            ctx.extensions_mut().insert(AuthUser(user));
        }
        Ok(())
    }
}

#[connectrpc::async_trait]
impl Interceptor for UserInterceptor {
    async fn intercept_unary(
        &self,
        mut req: UnaryRequest,
        next: Next<'_>,
    ) -> Result<UnaryResponse, ConnectError> {
        self.admit(&mut req.ctx)?;
        next.run(req).await
    }

    async fn intercept_streaming(
        &self,
        mut req: StreamRequest,
        inbound: PayloadStream,
        next: NextStream<'_>,
    ) -> Result<StreamResponse, ConnectError> {
        self.admit(&mut req.ctx)?;
        next.run(req, inbound).await
    }
}

/// The request's `Connect-Timeout-Ms`: `None` when absent or 0 (no limit, as in envd), an
/// `invalid_argument` error when it is not a non-negative integer.
pub(crate) fn request_timeout(ctx: &RequestContext) -> Result<Option<Duration>, ConnectError> {
    let Some(value) = ctx.header("connect-timeout-ms") else {
        return Ok(None);
    };
    let text = value.to_str().unwrap_or("");
    match text.trim().parse::<u64>() {
        Ok(0) => Ok(None),
        Ok(ms) => Ok(Some(Duration::from_millis(ms))),
        Err(_) => Err(ConnectError::invalid_argument(format!(
            "invalid Connect-Timeout-Ms header {text:?}: expected a number of milliseconds"
        ))),
    }
}

/// The user a handler acts as: the Basic-auth user, else the default user.
pub(crate) fn request_user(daemon: &Daemon, ctx: &RequestContext) -> Result<User, ConnectError> {
    if let Some(AuthUser(user)) = ctx.extensions().get::<AuthUser>() {
        return Ok(user.clone());
    }
    daemon.resolve_user(None).map_err(|(name, err)| match err {
        UserError::Unspecified => ConnectError::unauthenticated("no user specified"),
        UserError::Lookup(_) => {
            ConnectError::unauthenticated(format!("invalid default user: '{name}'"))
        }
    })
}
