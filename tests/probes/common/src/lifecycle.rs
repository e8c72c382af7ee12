//! What every probe does at create and dispose: parse the strict config,
//! prove the injected services work, record the event, and fail, panic or
//! delay as configured.
//!
//! Records (see [`crate::record`] for the common fields):
//! - `create`: `injected` (the injected kinds, sorted), `proof` (per kind:
//!   `e2b` → `{sandboxId, alive}`, `fs` → `{rootKind}` from `stat("/")`,
//!   `subprocess` → `{echoArgv}` from `resolve_executable("echo-argv")`; a
//!   failing call is recorded as `{error}`), `fail` (`null`, `"error"`,
//!   `"panic"`). Written before `createDelayMs` and a configured failure.
//! - `dispose`: `startedNs` (when dispose began; `monotonicNs` is when it
//!   ended, after `disposeDelayMs`), `delayMs`, `fail`. Written before a
//!   configured failure.

use std::time::Duration;

use dsh_plugin_api::{CreateContext, Error, ErrorKind, Injected, Result, Service};
use serde_json::{Map, Value, json};

use crate::config::{Failure, ProbeConfig};
use crate::record::{Recorder, monotonic_ns};

/// One probe instance's lifecycle state.
#[derive(Debug)]
pub struct Lifecycle {
    id: String,
    config: ProbeConfig,
    recorder: Recorder,
}

fn failure_value(failure: Failure) -> Value {
    failure.name().map_or(Value::Null, Value::from)
}

async fn proof(service: &Service) -> Value {
    let outcome: Result<Value> = async {
        Ok(match service {
            Service::Owner(_, owner) => {
                json!({"sandboxId": owner.info().sandbox_id, "alive": owner.alive().await?})
            }
            Service::Fs(fs) => {
                let root = fs.stat("/").await?;
                json!({"rootKind": format!("{:?}", root.kind)})
            }
            Service::Subprocess(subprocess) => {
                json!({"echoArgv": subprocess.resolve_executable("echo-argv", &[]).await?})
            }
        })
    }
    .await;
    outcome.unwrap_or_else(|err| json!({"error": err.to_string()}))
}

async fn proofs(services: &Injected) -> (Vec<&'static str>, Value) {
    let mut kinds = Vec::new();
    let mut proofs = Map::new();
    for service in services.all() {
        let kind = service.kind().name();
        kinds.push(kind);
        proofs.insert(kind.to_owned(), proof(service).await);
    }
    kinds.sort_unstable();
    (kinds, Value::Object(proofs))
}

impl Lifecycle {
    /// Runs the create steps for entry `ctx.id` of package `plugin`.
    pub async fn start(ctx: &CreateContext, plugin: &'static str) -> Result<Lifecycle> {
        let config: ProbeConfig = ctx.config()?;
        let recorder = Recorder::new(config.record.clone(), &ctx.id, plugin);
        let (injected, proof) = proofs(&ctx.services).await;
        let mut fields = Map::new();
        fields.insert("injected".into(), json!(injected));
        fields.insert("proof".into(), proof);
        fields.insert("fail".into(), failure_value(config.fail_create));
        recorder.record("create", fields)?;
        tracing::info!(id = %ctx.id, plugin, injected = ?injected, "probe created");
        tracing::debug!(id = %ctx.id, "probe create details");
        if config.create_delay_ms > 0 {
            tokio::time::sleep(Duration::from_millis(config.create_delay_ms)).await;
        }
        match config.fail_create {
            Failure::None => {}
            Failure::Error => {
                return Err(Error::new(
                    ErrorKind::Unavailable,
                    "create: failing as configured (failCreate)",
                )
                .with_subject(ctx.id.clone()));
            }
            Failure::Panic => panic!("create: panicking as configured (failCreate)"),
        }
        Ok(Lifecycle {
            id: ctx.id.clone(),
            config,
            recorder,
        })
    }

    /// Runs the dispose steps.
    pub async fn dispose(&self) -> Result<()> {
        let started = monotonic_ns();
        let delay = self.config.dispose_delay_ms;
        if delay > 0 {
            tokio::time::sleep(Duration::from_millis(delay)).await;
        }
        let mut fields = Map::new();
        fields.insert("startedNs".into(), started.into());
        fields.insert("delayMs".into(), delay.into());
        fields.insert("fail".into(), failure_value(self.config.fail_dispose));
        self.recorder.record("dispose", fields)?;
        tracing::info!(id = %self.id, "probe disposed");
        match self.config.fail_dispose {
            Failure::None => Ok(()),
            Failure::Error => Err(Error::new(
                ErrorKind::Io,
                "dispose: failing as configured (failDispose)",
            )
            .with_subject(self.id.clone())),
            Failure::Panic => panic!("dispose: panicking as configured (failDispose)"),
        }
    }
}
