//! Creating and disposing plugin instances in order.
//!
//! [`create_all`] creates in the planned (topological) order, handing each
//! plugin exactly the services it declared, taken from its bound providers.
//! If a create fails, the instances already created are disposed in reverse
//! before the error is returned. [`dispose_all`] disposes in exact reverse
//! create order, runs every dispose even after failures, and reports all
//! failures together.
//!
//! Both work over the [`Factory`]/[`Instance`] seam so the ordering logic is
//! independent of how a plugin is loaded (the dlopen loader in production,
//! in-process fakes in unit tests).

use std::fmt;

use dsh_plugin_api::{Error as PluginError, Service, ServiceKind};
use futures::future::BoxFuture;

/// What a create call receives.
#[derive(Debug)]
pub(crate) struct CreateInput {
    pub id: String,
    pub config: serde_json::Value,
    /// Exactly the declared services, in the descriptor's inject order.
    pub services: Vec<Service>,
}

/// Something that creates plugin instances (a loaded library).
pub(crate) trait Factory: Send + Sync {
    /// Every problem of an entry's `config` for this plugin (empty: valid),
    /// without creating anything; `Err` if the check itself failed.
    fn validate_config(
        &self,
        config: &serde_json::Value,
    ) -> Result<Vec<dsh_plugin_api::FieldError>, PluginError>;

    /// Creates one instance. Runs the plugin's own create on the plugin's
    /// runtime; the returned future may be polled from any runtime.
    fn create(&self, input: CreateInput) -> BoxFuture<'_, Result<Box<dyn Instance>, PluginError>>;
}

/// A created plugin instance.
pub(crate) trait Instance: Send + Sync {
    /// The services it provides.
    fn services(&self) -> Vec<Service>;
    /// Releases it; called at most once.
    fn dispose(self: Box<Self>) -> BoxFuture<'static, Result<(), PluginError>>;
}

/// One planned creation.
pub(crate) struct Step<'a> {
    pub id: &'a str,
    pub name: &'a str,
    pub factory: &'a dyn Factory,
    pub config: serde_json::Value,
    pub provides: &'a [ServiceKind],
    /// Injected service → position of its provider in the create order
    /// (always earlier than this step).
    pub inject: &'a [(ServiceKind, usize)],
}

/// A created instance with its identity.
pub(crate) struct Running {
    pub id: String,
    pub name: String,
    pub instance: Box<dyn Instance>,
    pub services: Vec<Service>,
}

impl fmt::Debug for Running {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Running")
            .field("id", &self.id)
            .field("name", &self.name)
            .field("services", &self.services)
            .finish_non_exhaustive()
    }
}

/// A plugin whose dispose failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DisposeFailure {
    pub id: String,
    /// The plugin's package name.
    pub name: String,
    pub error: PluginError,
}

impl fmt::Display for DisposeFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "dispose {:?} ({}): {}", self.id, self.name, self.error)
    }
}

/// A create that failed, after the rollback of what was already created.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct CreateError {
    /// The entry whose create failed.
    pub id: String,
    pub name: String,
    pub error: PluginError,
    /// Ids of the instances disposed by the rollback, in dispose order.
    pub rolled_back: Vec<String>,
    /// Dispose failures during the rollback (every dispose still ran).
    pub rollback_failures: Vec<DisposeFailure>,
}

impl fmt::Display for CreateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "create {:?} ({}): {}", self.id, self.name, self.error)?;
        for failure in &self.rollback_failures {
            write!(f, "; during rollback: {failure}")?;
        }
        Ok(())
    }
}

/// Disposal that failed for one or more plugins (all were attempted).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct DisposeError {
    /// In dispose order.
    pub failures: Vec<DisposeFailure>,
}

impl fmt::Display for DisposeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, failure) in self.failures.iter().enumerate() {
            if index > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{failure}")?;
        }
        Ok(())
    }
}

/// Creates every step in order (see [`create_all_or_cancel`]).
#[cfg(test)]
pub(crate) async fn create_all(steps: Vec<Step<'_>>) -> Result<Vec<Running>, CreateError> {
    match create_all_or_cancel(steps, std::future::pending()).await? {
        Created::All(running) => Ok(running),
        Created::Cancelled { .. } => unreachable!("a pending future never cancels"),
    }
}

/// What [`create_all_or_cancel`] achieved.
#[derive(Debug)]
pub(crate) enum Created {
    /// Every step, in create order.
    All(Vec<Running>),
    /// `cancel` fired first; see [`create_all_or_cancel`].
    Cancelled {
        /// Ids disposed by the rollback, in dispose order.
        rolled_back: Vec<String>,
        /// The entry whose create did not answer within the grace and was
        /// abandoned (it rolls itself back on its own runtime if it ever
        /// completes while the process lives, docs/design.md §4.4).
        abandoned: Option<String>,
    },
}

/// Creates every step in order.
///
/// On failure the already-created instances are disposed in reverse before
/// the error returns. Dropping the returned future part-way hands the
/// instances created so far to a task on the current tokio runtime that
/// disposes them in reverse — they are never silently leaked while a
/// runtime exists.
///
/// When `cancel` completes first (with a grace) no further plugin is
/// created. The create in flight — never half-cancelled (docs/design.md
/// §4.4) — is awaited for up to the grace, so that what it made is rolled
/// back too; past the grace it is abandoned. Then every instance created is
/// disposed in reverse and [`Created::Cancelled`] returns (dispose failures
/// are logged): unlike a dropped future, the caller knows when that
/// rollback is over.
pub(crate) async fn create_all_or_cancel(
    steps: Vec<Step<'_>>,
    cancel: impl std::future::Future<Output = std::time::Duration>,
) -> Result<Created, CreateError> {
    let mut guard = RollbackOnDrop(Some(Vec::with_capacity(steps.len())));
    let mut cancel = std::pin::pin!(cancel);
    for mut step in steps {
        let created = guard.0.as_ref().expect("guard is armed while creating");
        let outcome = match inject_for(&step, created) {
            Ok(services) => {
                let create = step.factory.create(CreateInput {
                    id: step.id.to_owned(),
                    config: std::mem::take(&mut step.config),
                    services,
                });
                let mut create = std::pin::pin!(create);
                tokio::select! {
                    created = &mut create => created,
                    grace = &mut cancel => {
                        let mut running = guard.0.take().expect("guard is armed while creating");
                        let mut abandoned = None;
                        match tokio::time::timeout(grace, create).await {
                            Ok(Ok(instance)) => match check_provided(&step, instance).await {
                                Ok(instance) => running.push(instance),
                                Err(err) => tracing::debug!("create {:?} after cancel: {err}", step.id),
                            },
                            Ok(Err(err)) => tracing::debug!("create {:?} after cancel: {err}", step.id),
                            Err(_) => abandoned = Some(step.id.to_owned()),
                        }
                        let rolled_back = running.iter().rev().map(|r| r.id.clone()).collect();
                        if let Err(err) = dispose_all(running).await {
                            tracing::warn!("disposal after a cancelled start failed: {err}");
                        }
                        return Ok(Created::Cancelled { rolled_back, abandoned });
                    }
                }
            }
            Err(err) => Err(err),
        };
        let outcome = match outcome {
            Ok(instance) => check_provided(&step, instance).await,
            Err(err) => Err(err),
        };
        match outcome {
            Ok(running) => guard
                .0
                .as_mut()
                .expect("guard is armed while creating")
                .push(running),
            Err(error) => {
                let created = guard.0.take().expect("guard is armed while creating");
                let rolled_back = created.iter().rev().map(|r| r.id.clone()).collect();
                let rollback_failures = match dispose_all(created).await {
                    Ok(()) => Vec::new(),
                    Err(err) => err.failures,
                };
                return Err(CreateError {
                    id: step.id.to_owned(),
                    name: step.name.to_owned(),
                    error,
                    rolled_back,
                    rollback_failures,
                });
            }
        }
    }
    Ok(Created::All(
        guard.0.take().expect("guard is armed while creating"),
    ))
}

/// The declared services of `step`, each from its bound provider.
fn inject_for(step: &Step<'_>, created: &[Running]) -> Result<Vec<Service>, PluginError> {
    step.inject
        .iter()
        .map(|(kind, provider)| {
            let provider = &created[*provider];
            provider
                .services
                .iter()
                .find(|service| service.kind() == *kind)
                .cloned()
                .ok_or_else(|| {
                    PluginError::config(format!(
                        "inject {kind}: provider {:?} ({}) declared {kind} but its instance does not provide it",
                        provider.id, provider.name
                    ))
                })
        })
        .collect()
}

/// Accepts an instance only if it provides exactly its declared services;
/// a non-conforming instance is disposed before the error returns.
async fn check_provided(
    step: &Step<'_>,
    instance: Box<dyn Instance>,
) -> Result<Running, PluginError> {
    let services = instance.services();
    let mut provided: Vec<ServiceKind> = services.iter().map(Service::kind).collect();
    provided.sort();
    let mut declared = step.provides.to_vec();
    declared.sort();
    if provided == declared {
        return Ok(Running {
            id: step.id.to_owned(),
            name: step.name.to_owned(),
            instance,
            services,
        });
    }
    let names = |kinds: &[ServiceKind]| {
        kinds
            .iter()
            .map(|kind| kind.name())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut error = PluginError::config(format!(
        "create: the instance provides [{}] but the descriptor declares [{}]",
        names(&provided),
        names(&declared)
    ));
    if let Err(dispose) = instance.dispose().await {
        error = error.context(format!("(its dispose also failed: {dispose})"));
    }
    Err(error)
}

/// Disposes in exact reverse order of `running` (which is in create
/// order); every dispose runs, failures are aggregated.
pub(crate) async fn dispose_all(running: Vec<Running>) -> Result<(), DisposeError> {
    let mut failures = Vec::new();
    for Running {
        id, name, instance, ..
    } in running.into_iter().rev()
    {
        if let Err(error) = instance.dispose().await {
            tracing::debug!(plugin = %id, "dispose failed: {error}");
            failures.push(DisposeFailure { id, name, error });
        }
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(DisposeError { failures })
    }
}

/// Holds created instances while `create_all` runs; if that future is
/// dropped mid-way, disposes them in the background.
struct RollbackOnDrop(Option<Vec<Running>>);

impl Drop for RollbackOnDrop {
    fn drop(&mut self) {
        let Some(created) = self.0.take().filter(|created| !created.is_empty()) else {
            return;
        };
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                handle.spawn(async move {
                    if let Err(err) = dispose_all(created).await {
                        tracing::warn!("disposal after a cancelled start failed: {err}");
                    }
                });
            }
            Err(_) => tracing::warn!(
                "a cancelled start left {} plugin instance(s) undisposed: no tokio runtime to dispose them on",
                created.len()
            ),
        }
    }
}

#[cfg(test)]
pub(crate) mod fake {
    //! In-process plugins that record what happens to them.

    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use dsh_plugin_api::{Error as PluginError, FieldError, Service, ServiceKind};
    use futures::future::BoxFuture;

    use super::{CreateInput, Factory, Instance};

    pub(crate) type Journal = Arc<Mutex<Vec<String>>>;

    /// A factory providing `provides` (as opaque fs/… stand-ins) and
    /// recording `create <id> [services]` / `dispose <id>` lines.
    pub(crate) struct FakeFactory {
        pub journal: Journal,
        pub provides: Vec<ServiceKind>,
        pub fail_create: bool,
        pub fail_dispose: bool,
        pub create_delay: Duration,
        /// What `validate_config` reports for any non-null config.
        pub config_errors: Vec<FieldError>,
    }

    impl FakeFactory {
        pub(crate) fn new(journal: &Journal, provides: &[ServiceKind]) -> FakeFactory {
            FakeFactory {
                journal: journal.clone(),
                provides: provides.to_vec(),
                fail_create: false,
                fail_dispose: false,
                create_delay: Duration::ZERO,
                config_errors: Vec::new(),
            }
        }
    }

    struct FakeInstance {
        id: String,
        journal: Journal,
        services: Vec<Service>,
        fail_dispose: bool,
    }

    impl Factory for FakeFactory {
        fn validate_config(
            &self,
            config: &serde_json::Value,
        ) -> Result<Vec<FieldError>, PluginError> {
            Ok(if config.is_null() {
                Vec::new()
            } else {
                self.config_errors.clone()
            })
        }

        fn create(
            &self,
            input: CreateInput,
        ) -> BoxFuture<'_, Result<Box<dyn Instance>, PluginError>> {
            Box::pin(async move {
                if !self.create_delay.is_zero() {
                    tokio::time::sleep(self.create_delay).await;
                }
                let injected: Vec<&str> = input.services.iter().map(|s| s.kind().name()).collect();
                let mut line = format!("create {} [{}]", input.id, injected.join(","));
                if !input.config.is_null() {
                    line.push_str(&format!(" config={}", input.config));
                }
                self.journal.lock().expect("journal").push(line);
                if self.fail_create {
                    return Err(PluginError::config("boom").with_subject(input.id));
                }
                let services = self.provides.iter().map(|kind| stand_in(*kind)).collect();
                Ok(Box::new(FakeInstance {
                    id: input.id,
                    journal: self.journal.clone(),
                    services,
                    fail_dispose: self.fail_dispose,
                }) as Box<dyn Instance>)
            })
        }
    }

    impl Instance for FakeInstance {
        fn services(&self) -> Vec<Service> {
            self.services.clone()
        }

        fn dispose(self: Box<Self>) -> BoxFuture<'static, Result<(), PluginError>> {
            Box::pin(async move {
                self.journal
                    .lock()
                    .expect("journal")
                    .push(format!("dispose {}", self.id));
                if self.fail_dispose {
                    Err(PluginError::io(format!("dispose {} failed", self.id)))
                } else {
                    Ok(())
                }
            })
        }
    }

    /// A service value of `kind`. Only `fs` needs a real object here: the
    /// stand-ins are never called, only routed.
    fn stand_in(kind: ServiceKind) -> Service {
        match kind {
            ServiceKind::Fs => Service::Fs(Arc::new(crate::test_support::NullFs)),
            ServiceKind::Subprocess => {
                Service::Subprocess(Arc::new(crate::test_support::NullSubprocess))
            }
            ServiceKind::Owner(kind) => {
                Service::Owner(kind, Arc::new(crate::test_support::NullOwner))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use dsh_plugin_api::ServiceKind::{self, Fs, Subprocess};

    const E2B: ServiceKind = ServiceKind::Owner(dsh_plugin_api::OwnerKind::E2B);

    use super::fake::{FakeFactory, Journal};
    use super::*;

    fn journal() -> Journal {
        Arc::new(Mutex::new(Vec::new()))
    }

    fn lines(journal: &Journal) -> Vec<String> {
        journal.lock().expect("journal").clone()
    }

    fn step<'a>(
        id: &'a str,
        factory: &'a FakeFactory,
        inject: &'a [(ServiceKind, usize)],
    ) -> Step<'a> {
        Step {
            id,
            name: "dsh-fake",
            factory,
            config: serde_json::Value::Null,
            provides: &factory.provides,
            inject,
        }
    }

    #[tokio::test]
    async fn creates_in_order_injects_declared_services_and_disposes_in_reverse() {
        let log = journal();
        let owner = FakeFactory::new(&log, &[E2B]);
        let fs = FakeFactory::new(&log, &[Fs]);
        let sub = FakeFactory::new(&log, &[Subprocess]);
        let running = create_all(vec![
            step("e2b", &owner, &[]),
            step("fs", &fs, &[(E2B, 0)]),
            step("subprocess", &sub, &[(Fs, 1), (E2B, 0)]),
        ])
        .await
        .expect("create");
        assert_eq!(running.len(), 3);
        assert_eq!(running[2].services.len(), 1);
        dispose_all(running).await.expect("dispose");
        assert_eq!(
            lines(&log),
            [
                "create e2b []",
                "create fs [e2b]",
                "create subprocess [fs,e2b]",
                "dispose subprocess",
                "dispose fs",
                "dispose e2b",
            ]
        );
    }

    #[tokio::test]
    async fn every_dispose_runs_and_failures_are_aggregated() {
        let log = journal();
        let mut a = FakeFactory::new(&log, &[]);
        a.fail_dispose = true;
        let b = FakeFactory::new(&log, &[]);
        let mut c = FakeFactory::new(&log, &[]);
        c.fail_dispose = true;
        let running = create_all(vec![
            step("a", &a, &[]),
            step("b", &b, &[]),
            step("c", &c, &[]),
        ])
        .await
        .expect("create");
        let err = dispose_all(running).await.expect_err("two failures");
        assert_eq!(lines(&log)[3..], ["dispose c", "dispose b", "dispose a"]);
        let ids: Vec<_> = err.failures.iter().map(|f| f.id.as_str()).collect();
        assert_eq!(ids, ["c", "a"]);
        assert_eq!(
            err.to_string(),
            "dispose \"c\" (dsh-fake): dispose c failed; dispose \"a\" (dsh-fake): dispose a failed"
        );
    }

    #[tokio::test]
    async fn a_failed_create_rolls_back_in_reverse() {
        let log = journal();
        let a = FakeFactory::new(&log, &[E2B]);
        let mut b = FakeFactory::new(&log, &[Fs]);
        b.fail_dispose = true;
        let mut c = FakeFactory::new(&log, &[]);
        c.fail_create = true;
        let d = FakeFactory::new(&log, &[]);
        let err = create_all(vec![
            step("a", &a, &[]),
            step("b", &b, &[(E2B, 0)]),
            step("c", &c, &[(Fs, 1)]),
            step("d", &d, &[]),
        ])
        .await
        .expect_err("c fails");
        assert_eq!(
            lines(&log),
            [
                "create a []",
                "create b [e2b]",
                "create c [fs]",
                "dispose b",
                "dispose a"
            ]
        );
        assert_eq!(err.id, "c");
        assert_eq!(err.rolled_back, ["b", "a"]);
        assert_eq!(err.rollback_failures.len(), 1);
        assert_eq!(
            err.to_string(),
            "create \"c\" (dsh-fake): c: boom; during rollback: dispose \"b\" (dsh-fake): dispose b failed"
        );
    }

    #[tokio::test]
    async fn an_instance_not_providing_its_declared_services_is_refused_and_disposed() {
        let log = journal();
        let a = FakeFactory::new(&log, &[]);
        let liar = FakeFactory::new(&log, &[Fs]);
        let err = create_all(vec![
            step("a", &a, &[]),
            Step {
                provides: &[Subprocess],
                ..step("liar", &liar, &[])
            },
        ])
        .await
        .expect_err("mismatch");
        assert!(
            err.error
                .message()
                .contains("the instance provides [fs] but the descriptor declares [subprocess]"),
            "{err}"
        );
        assert_eq!(
            lines(&log),
            ["create a []", "create liar []", "dispose liar", "dispose a"]
        );
    }

    #[tokio::test]
    async fn a_cancelled_start_disposes_what_it_created() {
        let log = journal();
        let a = FakeFactory::new(&log, &[]);
        let mut slow = FakeFactory::new(&log, &[]);
        slow.create_delay = Duration::from_secs(30);
        let start = create_all(vec![step("a", &a, &[]), step("slow", &slow, &[])]);
        let timed_out = tokio::time::timeout(Duration::from_millis(50), start).await;
        assert!(timed_out.is_err(), "start should still be running");
        // The background disposal runs on this runtime.
        for _ in 0..100 {
            if lines(&log).contains(&"dispose a".to_owned()) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(lines(&log), ["create a []", "dispose a"]);
    }

    #[tokio::test]
    async fn a_cancelled_start_rolls_back_the_create_in_flight_or_abandons_it_past_the_grace() {
        for (create_delay, grace, abandoned) in [
            (Duration::from_millis(200), Duration::from_secs(5), None),
            (
                Duration::from_secs(30),
                Duration::from_millis(100),
                Some("slow"),
            ),
        ] {
            let log = journal();
            let a = FakeFactory::new(&log, &[]);
            let mut slow = FakeFactory::new(&log, &[]);
            slow.create_delay = create_delay;
            let cancel = async {
                tokio::time::sleep(Duration::from_millis(50)).await;
                grace
            };
            let created =
                create_all_or_cancel(vec![step("a", &a, &[]), step("slow", &slow, &[])], cancel)
                    .await
                    .expect("no create fails");
            let Created::Cancelled {
                rolled_back,
                abandoned: left,
            } = created
            else {
                panic!("not cancelled: {created:?}");
            };
            assert_eq!(left.as_deref(), abandoned);
            match abandoned {
                // The create in flight finished and was rolled back first.
                None => {
                    assert_eq!(rolled_back, ["slow", "a"]);
                    assert_eq!(
                        lines(&log),
                        ["create a []", "create slow []", "dispose slow", "dispose a"]
                    );
                }
                Some(_) => {
                    assert_eq!(rolled_back, ["a"]);
                    assert_eq!(lines(&log), ["create a []", "dispose a"]);
                }
            }
        }
    }
}
