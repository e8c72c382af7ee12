//! A third-party-style dsh provider: a `subprocess` decorator that audits
//! and denies.
//!
//! `dsh-example-subprocess-audit` injects a `subprocess` service and
//! provides one that refuses commands and terminals whose program is on a
//! deny list (`PermissionDenied`, nothing starts) and records every start,
//! refusal and exit — exits included when nobody waits — as `tracing`
//! events and, when configured, as JSON lines in an audit file. It is
//! written with `dsh_plugin_api::decorate`: only the hooks it changes, no
//! forwarding method, and the process handles callers get are the wrapped
//! provider's own.
//!
//! Config: `deny` (program names, matched against the last component of
//! `argv[0]`), `auditLog` (absolute path of a file to append to).

#![forbid(unsafe_code)]

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Arc;

use dsh_plugin_api::decorate::{DecoratedSubprocess, Started, SubprocessHooks};
use dsh_plugin_api::subprocess::{ExitStatus, SpawnSpec, TerminalSpec};
use dsh_plugin_api::{
    CreateContext, Descriptor, Error, ErrorKind, FieldError, Plugin, Result, Service, ServiceKind,
    async_trait,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

/// The plugin's config (its manifest entry's `config`).
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Config {
    /// Program names refused, matched against `argv[0]`'s last component.
    #[serde(default)]
    pub deny: Vec<String>,
    /// A file to append one JSON line per start, refusal and exit to.
    pub audit_log: Option<PathBuf>,
}

/// The hooks: the deny list and where the audit goes.
pub struct Audit {
    id: String,
    deny: Vec<String>,
    log: Option<PathBuf>,
}

impl Audit {
    /// Records `event` as a `tracing` event and an audit-file line (one
    /// `O_APPEND` write, so concurrent records never interleave; opened per
    /// record, so a rotated file is picked up). A failed append is logged,
    /// never fails the command: the audit file is a record, not a gate.
    fn record(&self, event: Value) {
        tracing::info!(target: "dsh_example_subprocess_audit", %event, "audit");
        if let Some(path) = &self.log {
            let line = format!("{event}\n");
            let appended = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path);
            if let Err(err) = appended.and_then(|mut file| file.write_all(line.as_bytes())) {
                tracing::warn!(error = %err, "audit: appending to {} failed", path.display());
            }
        }
    }

    /// Refuses `argv` if its program is denied; records the outcome.
    fn admit(&self, operation: &str, argv: &[String]) -> Result<()> {
        let program = argv.first().map(String::as_str).unwrap_or_default();
        let name = program.rsplit('/').next().unwrap_or(program);
        if self.deny.iter().any(|denied| denied == name) {
            self.record(json!({"event": "deny", "operation": operation, "argv": argv}));
            return Err(Error::new(
                ErrorKind::PermissionDenied,
                format!("{operation}: `{name}` is denied by `{}`", self.id),
            )
            .with_subject(program));
        }
        self.record(json!({"event": "start", "operation": operation, "argv": argv}));
        Ok(())
    }
}

#[async_trait]
impl SubprocessHooks for Audit {
    async fn on_spawn(&self, spec: SpawnSpec) -> Result<SpawnSpec> {
        self.admit("spawn", &spec.argv).map(|()| spec)
    }

    async fn on_spawn_terminal(&self, spec: TerminalSpec) -> Result<TerminalSpec> {
        self.admit("spawn_terminal", &spec.argv).map(|()| spec)
    }

    fn on_exit(&self, started: &Started, status: &Result<ExitStatus>) {
        let outcome = match status {
            Ok(status) => {
                json!({"code": status.code, "signal": status.signal.and_then(|s| s.name()), "timedOut": status.timed_out})
            }
            Err(err) => json!({"error": err.to_string()}),
        };
        self.record(json!({"event": "exit", "pid": started.pid, "argv": started.argv, "terminal": started.terminal, "status": outcome}));
    }
}

/// Injects `subprocess`, provides the audited `subprocess`.
pub struct SubprocessAudit(Arc<DecoratedSubprocess<Audit>>);

#[async_trait]
impl Plugin for SubprocessAudit {
    type Config = Config;
    const DESCRIPTOR: Descriptor = Descriptor {
        name: "dsh-example-subprocess-audit",
        version: env!("CARGO_PKG_VERSION"),
        provides: &[ServiceKind::Subprocess],
        inject: &[ServiceKind::Subprocess],
    };

    /// Rules the config's type cannot express, reported with the schema's.
    fn check_config(config: &Config) -> Vec<FieldError> {
        let mut errors = Vec::new();
        for (at, name) in config.deny.iter().enumerate() {
            if name.is_empty() || name.contains('/') {
                let why = "must be a program name (non-empty, no `/`)";
                errors.push(FieldError::new(format!("deny[{at}]"), why));
            }
        }
        if config
            .audit_log
            .as_ref()
            .is_some_and(|log| !log.is_absolute())
        {
            errors.push(FieldError::new("auditLog", "must be an absolute path"));
        }
        errors
    }

    async fn create(ctx: CreateContext) -> Result<Self> {
        let Config { deny, audit_log } = ctx.config()?;
        let audit = Audit {
            id: ctx.id.clone(),
            deny,
            log: audit_log,
        };
        let inner = ctx.services.subprocess()?;
        Ok(SubprocessAudit(Arc::new(DecoratedSubprocess::new(
            inner, audit,
        ))))
    }

    fn services(&self) -> Vec<Service> {
        vec![Service::Subprocess(self.0.clone())]
    }

    async fn dispose(&self) -> Result<()> {
        Ok(())
    }
}

dsh_plugin_api::export_plugin!(SubprocessAudit);
