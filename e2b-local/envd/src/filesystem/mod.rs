//! The `filesystem.Filesystem` Connect service (docs/e2b-protocol.md §6). Every operation runs
//! with the acting user's permissions, or root's under [`FileAccess::AsRoot`](crate::FileAccess)
//! ([`as_user`]); paths follow envd's resolution rules for that user.

mod inotify;
mod ops;
mod watch;
pub(crate) mod watchers;

use std::path::PathBuf;
use std::sync::Arc;

use connectrpc::{
    ConnectError, RequestContext, Response, ServiceRequest, ServiceResult, ServiceStream,
};
use envd_proto::filesystem::{
    CreateWatcherRequest, CreateWatcherResponse, Filesystem, GetWatcherEventsRequest,
    GetWatcherEventsResponse, ListDirRequest, ListDirResponse, MakeDirRequest, MakeDirResponse,
    MoveRequest, MoveResponse, RemoveRequest, RemoveResponse, RemoveWatcherRequest,
    RemoveWatcherResponse, StatRequest, StatResponse, WatchDirRequest, WatchDirResponse,
};

use crate::acting_user::as_user;
use crate::paths::expand_and_resolve;
use crate::rpc_context::{request_timeout, request_user};
use crate::state::Daemon;
use crate::stream_timing::keepalive_interval;
use crate::users::User;

/// `filesystem.Filesystem` over the sandbox's filesystem.
pub(crate) struct FilesystemService {
    pub daemon: Arc<Daemon>,
}

impl FilesystemService {
    /// The acting user and `path` resolved for them; `field` names the request field in errors.
    fn resolve(
        &self,
        ctx: &RequestContext,
        path: &str,
        operation: &str,
        field: &str,
    ) -> Result<(User, PathBuf), ConnectError> {
        let user = request_user(&self.daemon, ctx)?;
        let resolved = self.resolve_for(&user, path, operation, field)?;
        Ok((user, resolved))
    }

    fn resolve_for(
        &self,
        user: &User,
        path: &str,
        operation: &str,
        field: &str,
    ) -> Result<PathBuf, ConnectError> {
        expand_and_resolve(path, user, self.daemon.default_workdir().as_deref())
            .map_err(|err| ConnectError::invalid_argument(format!("{operation}: {field}: {err}")))
    }

    /// Runs blocking filesystem `work` with the permissions of `user` (or root's, as the
    /// daemon's [`FileAccess`](crate::FileAccess) says: [`as_user`]); failing to act as the
    /// user, or a panic, is `internal`.
    async fn as_user<T: Send + 'static>(
        &self,
        user: &User,
        work: impl FnOnce() -> Result<T, ConnectError> + Send + 'static,
    ) -> Result<T, ConnectError> {
        let daemon = &self.daemon;
        as_user(&daemon.users, daemon.options.file_access, user, work)
            .await
            .map_err(|err| ConnectError::internal(err.to_string()))?
    }
}

fn required(value: &str, operation: &str, field: &str) -> Result<(), ConnectError> {
    if value.is_empty() {
        return Err(ConnectError::invalid_argument(format!(
            "{operation}: {field} is required"
        )));
    }
    Ok(())
}

#[allow(
    refining_impl_trait,
    reason = "the generated service trait returns `impl Future`; ours are `async fn`"
)]
impl Filesystem for FilesystemService {
    async fn stat(
        &self,
        ctx: RequestContext,
        request: ServiceRequest<'_, StatRequest>,
    ) -> ServiceResult<StatResponse> {
        let (user, path) = self.resolve(&ctx, &request.to_owned_message().path, "stat", "path")?;
        let users = self.daemon.users.clone();
        let entry = self
            .as_user(&user, move || ops::stat(&path, &users.names()))
            .await?;
        Ok(Response::new(StatResponse {
            entry: entry.into(),
            ..Default::default()
        }))
    }

    async fn make_dir(
        &self,
        ctx: RequestContext,
        request: ServiceRequest<'_, MakeDirRequest>,
    ) -> ServiceResult<MakeDirResponse> {
        let (user, path) =
            self.resolve(&ctx, &request.to_owned_message().path, "make dir", "path")?;
        let users = self.daemon.users.clone();
        let acting = user.clone();
        let entry = self
            .as_user(&acting, move || ops::make_dir(&path, &user, &users.names()))
            .await?;
        Ok(Response::new(MakeDirResponse {
            entry: entry.into(),
            ..Default::default()
        }))
    }

    async fn r#move(
        &self,
        ctx: RequestContext,
        request: ServiceRequest<'_, MoveRequest>,
    ) -> ServiceResult<MoveResponse> {
        let request = request.to_owned_message();
        // An empty path would resolve to the working directory: never what a move means.
        required(&request.source, "move", "source")?;
        required(&request.destination, "move", "destination")?;
        let (user, source) = self.resolve(&ctx, &request.source, "move", "source")?;
        let destination = self.resolve_for(&user, &request.destination, "move", "destination")?;
        let users = self.daemon.users.clone();
        let acting = user.clone();
        let entry = self
            .as_user(&acting, move || {
                ops::rename(&source, &destination, &user, &users.names())
            })
            .await?;
        Ok(Response::new(MoveResponse {
            entry: entry.into(),
            ..Default::default()
        }))
    }

    async fn list_dir(
        &self,
        ctx: RequestContext,
        request: ServiceRequest<'_, ListDirRequest>,
    ) -> ServiceResult<ListDirResponse> {
        let request = request.to_owned_message();
        let (user, path) = self.resolve(&ctx, &request.path, "list dir", "path")?;
        let users = self.daemon.users.clone();
        let depth = request.depth;
        let entries = self
            .as_user(&user, move || ops::list_dir(&path, depth, &users.names()))
            .await?;
        Ok(Response::new(ListDirResponse {
            entries,
            ..Default::default()
        }))
    }

    async fn remove(
        &self,
        ctx: RequestContext,
        request: ServiceRequest<'_, RemoveRequest>,
    ) -> ServiceResult<RemoveResponse> {
        let request = request.to_owned_message();
        // An empty path would resolve to the working directory (the home by default): refuse
        // rather than delete it.
        required(&request.path, "remove", "path")?;
        let (user, path) = self.resolve(&ctx, &request.path, "remove", "path")?;
        self.as_user(&user, move || ops::remove(&path)).await?;
        Ok(Response::new(RemoveResponse::default()))
    }

    async fn watch_dir(
        &self,
        ctx: RequestContext,
        request: ServiceRequest<'_, WatchDirRequest>,
    ) -> ServiceResult<ServiceStream<WatchDirResponse>> {
        let request = request.to_owned_message();
        let (user, path) = self.resolve(&ctx, &request.path, "watch dir", "path")?;
        let allow_network_mounts = request.allow_network_mounts;
        let root = self
            .as_user(&user, move || {
                watch::check_watch_path(&path, allow_network_mounts)
            })
            .await?;
        let watcher = watch::start_watcher(&root, request.recursive)?;
        let deadline = request_timeout(&ctx)?
            .and(ctx.deadline())
            .map(tokio::time::Instant::from_std);
        Ok(Response::stream(watch::watch_stream(
            watcher,
            root,
            request.include_entry,
            self.daemon.users.clone(),
            keepalive_interval(ctx.headers()),
            deadline,
        )))
    }

    async fn create_watcher(
        &self,
        ctx: RequestContext,
        request: ServiceRequest<'_, CreateWatcherRequest>,
    ) -> ServiceResult<CreateWatcherResponse> {
        let request = request.to_owned_message();
        let (user, path) = self.resolve(&ctx, &request.path, "create watcher", "path")?;
        let allow_network_mounts = request.allow_network_mounts;
        let root = self
            .as_user(&user, move || {
                watch::check_watch_path(&path, allow_network_mounts)
            })
            .await?;
        let watcher = watch::start_watcher(&root, request.recursive)?;
        let watcher_id = self.daemon.watchers.create(
            watcher,
            root,
            request.include_entry,
            self.daemon.users.clone(),
        );
        Ok(Response::new(CreateWatcherResponse {
            watcher_id,
            ..Default::default()
        }))
    }

    async fn get_watcher_events(
        &self,
        _ctx: RequestContext,
        request: ServiceRequest<'_, GetWatcherEventsRequest>,
    ) -> ServiceResult<GetWatcherEventsResponse> {
        let events = self
            .daemon
            .watchers
            .drain(&request.to_owned_message().watcher_id)?;
        Ok(Response::new(GetWatcherEventsResponse {
            events,
            ..Default::default()
        }))
    }

    async fn remove_watcher(
        &self,
        _ctx: RequestContext,
        request: ServiceRequest<'_, RemoveWatcherRequest>,
    ) -> ServiceResult<RemoveWatcherResponse> {
        self.daemon
            .watchers
            .remove(&request.to_owned_message().watcher_id)?;
        Ok(Response::new(RemoveWatcherResponse::default()))
    }
}
