//! Template builds (docs/design.md §7, "Templates"): the steps the SDKs' `Template()` builder
//! sends, run in a world of their own (not a listed sandbox) started from the base world or
//! from the template or snapshot the build names, through the server's own envd client
//! ([`crate::world::envd_link`]). A finished build keeps the world's files
//! ([`crate::world::World::copy_files`]) as the template's; the world is destroyed either way.
//! Nothing is pulled from the internet: a base image other than E2B's base fails the build
//! at its `base` step, and steps that reach out fail as the network fails them.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use e2b_client::{Command, Envd, ProcessEvent, StreamOptions, UploadOptions};
use futures::StreamExt;
use serde::Deserialize;

use crate::registry::Registry;
use crate::templates::{BASE_TEMPLATE, Build, BuildStatus, Failure, Level, Start};
use crate::world::envd_link::EnvdLink;
use crate::world::network::Egress;
use crate::world::{World, WorldSpec};

/// The longest a build may run.
const BUILD_TIMEOUT: Duration = Duration::from_secs(60 * 60);
/// How long a template's ready command may keep failing, in a build and in each new sandbox.
pub const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// Between two tries of a ready command.
const READY_INTERVAL: Duration = Duration::from_millis(250);
/// The image names that mean E2B's base world (what e2b-local's worlds are).
const BASE_IMAGES: [&str; 2] = ["e2bdev/base", "e2bdev/base:latest"];
/// A staged `COPY` archive's dir inside the build world.
const COPY_STAGE: &str = "/tmp/.e2b-local-copy";

/// Why a build request is refused (a 400, before anything runs).
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("fromTemplate and fromImage are exclusive")]
    ExclusiveBases,
    #[error("step {at}: {source}")]
    Step { at: usize, source: StepError },
}

/// Why one step of a request is refused.
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    #[error("{kind} takes {allowed:?} arguments, got {got}")]
    Arguments {
        kind: String,
        allowed: &'static [usize],
        got: usize,
    },
    #[error("invalid user name {0:?}")]
    UserName(String),
    #[error("COPY needs a filesHash of 64 hex digits")]
    FilesHash,
    #[error("COPY source {0:?} must be relative to the build context")]
    CopySource(String),
    #[error("COPY mode {0:?} is not an octal mode")]
    CopyMode(String),
    #[error("ENV takes name, value pairs")]
    EnvPairs,
    #[error("invalid environment variable name {0:?}")]
    EnvName(String),
    #[error("WORKDIR needs a path")]
    WorkdirPath,
    #[error("USER needs a user name")]
    UserMissing,
    #[error("unknown step type {0:?} (expected RUN, COPY, ENV, WORKDIR or USER)")]
    UnknownType(String),
}

/// Why a command a build runs in its world failed.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error("{0}")]
    Envd(#[from] e2b_client::Error),
    #[error("the command failed: {status}{}", stderr_suffix(.stderr))]
    Failed { status: String, stderr: String },
    #[error("the command's stream ended without its exit")]
    NoExit,
}

fn stderr_suffix(stderr: &str) -> String {
    if stderr.is_empty() {
        String::new()
    } else {
        format!(": {stderr}")
    }
}

/// Why a step of a running build failed.
#[derive(Debug, thiserror::Error)]
enum RunError {
    #[error("{0}")]
    Command(#[from] CommandError),
    #[error("the files of COPY {src} were not uploaded (hash {hash}): {source}")]
    NotUploaded {
        src: String,
        hash: String,
        source: std::io::Error,
    },
    #[error("stage the files of COPY {src}: {source}")]
    Stage {
        src: String,
        source: e2b_client::Error,
    },
    #[error("expand {name}: {source}")]
    Expand { name: String, source: CommandError },
}

/// Why a template's start or ready command failed (in a build, or in a new sandbox).
#[derive(Debug, thiserror::Error)]
pub enum ReadyError {
    #[error("start command {cmd:?}: {source}")]
    Start {
        cmd: String,
        source: e2b_client::Error,
    },
    #[error("ready command {ready:?} still failing after {} s: {source}", READY_TIMEOUT.as_secs())]
    NotReady { ready: String, source: CommandError },
}

/// Why a finished build's files could not be kept.
#[derive(Debug, thiserror::Error)]
enum KeepError {
    #[error(transparent)]
    World(#[from] crate::world::WorldError),
    #[error("create {}: {source}", .dir.display())]
    CreateDir {
        dir: std::path::PathBuf,
        source: std::io::Error,
    },
}

/// `POST /v2/templates/{id}/builds/{build}`'s body: where the build starts and its steps.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BuildRequest {
    #[serde(default)]
    pub from_image: Option<String>,
    #[serde(default)]
    pub from_template: Option<String>,
    #[serde(default)]
    pub from_image_registry: Option<serde_json::Value>,
    /// Skip the layer cache: e2b-local has none, every build runs every step.
    #[serde(default)]
    pub force: Option<bool>,
    #[serde(default)]
    pub steps: Vec<RawStep>,
    #[serde(default)]
    pub start_cmd: Option<String>,
    #[serde(default)]
    pub ready_cmd: Option<String>,
}

/// One step as sent; keys other than these (the JS SDK's `resolveSymlinks`, `gzip`, …) are
/// instructions to the SDK itself and ignored.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawStep {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub files_hash: Option<String>,
}

/// A checked step.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Run {
        cmd: String,
        user: Option<String>,
    },
    Copy {
        src: String,
        dest: String,
        owner: Option<String>,
        mode: Option<String>,
        hash: String,
    },
    Env(Vec<(String, String)>),
    Workdir(String),
    User(String),
}

/// Where the build starts.
#[derive(Debug, Clone)]
enum Base {
    /// The base world (the host root, as every sandbox's).
    World,
    /// A template or snapshot: its files, and for a template who and where its sandboxes start.
    Files {
        dir: std::path::PathBuf,
        start: Option<Start>,
    },
    /// A base e2b-local cannot have (an image to pull, a template that does not exist): the
    /// build fails at its base step, saying why.
    Unavailable(String),
}

/// A checked build request.
#[derive(Debug)]
pub struct Plan {
    base: Base,
    steps: Vec<Step>,
    start_cmd: Option<String>,
    ready_cmd: Option<String>,
}

/// Checks `request` against what e2b-local can build. An unknown step type or malformed
/// arguments are refused (`Err`, a 400); an image that needs the internet is accepted and
/// fails the build at its `base` step, as E2B reports a pull failure.
pub fn plan(registry: &Registry, request: BuildRequest) -> Result<Plan, PlanError> {
    let base = match (&request.from_template, &request.from_image) {
        (Some(_), Some(_)) => return Err(PlanError::ExclusiveBases),
        (Some(template), None) => base_template(registry, template),
        (None, image) => {
            let image = image.as_deref().unwrap_or(BASE_IMAGES[0]);
            if request.from_image_registry.is_some() || !BASE_IMAGES.contains(&image) {
                Base::Unavailable(format!(
                    "e2b-local builds offline and cannot pull image {image:?}: build from E2B's \
                     base (fromBaseImage() / from_base_image()) or from a template \
                     (fromTemplate)"
                ))
            } else {
                Base::World
            }
        }
    };
    let steps = request
        .steps
        .into_iter()
        .enumerate()
        .map(|(at, step)| check_step(step).map_err(|source| PlanError::Step { at: at + 1, source }))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Plan {
        base,
        steps,
        start_cmd: request.start_cmd.filter(|c| !c.is_empty()),
        ready_cmd: request.ready_cmd.filter(|c| !c.is_empty()),
    })
}

/// The base `fromTemplate` names; one that does not exist fails the build at its base step.
fn base_template(registry: &Registry, template: &str) -> Base {
    if template == BASE_TEMPLATE {
        return Base::World;
    }
    if let Some(resolved) = registry.templates.resolve(template) {
        return Base::Files {
            dir: resolved.files,
            start: Some(resolved.start),
        };
    }
    if let Some(snapshot) = registry.snapshots.find(template) {
        return Base::Files {
            dir: snapshot.dir.clone(),
            start: None,
        };
    }
    Base::Unavailable(format!(
        "fromTemplate {template:?}: no such template (nor snapshot) with a ready build"
    ))
}

fn check_step(step: RawStep) -> Result<Step, StepError> {
    let args = step.args;
    let count = |allowed: &'static [usize]| {
        if allowed.contains(&args.len()) {
            Ok(())
        } else {
            Err(StepError::Arguments {
                kind: step.kind.clone(),
                allowed,
                got: args.len(),
            })
        }
    };
    let user = |name: &str| -> Result<Option<String>, StepError> {
        if name.is_empty() {
            Ok(None)
        } else if is_user_name(name) {
            Ok(Some(name.to_owned()))
        } else {
            Err(StepError::UserName(name.to_owned()))
        }
    };
    match step.kind.as_str() {
        "RUN" => {
            count(&[1, 2])?;
            Ok(Step::Run {
                cmd: args[0].clone(),
                user: user(args.get(1).map_or("", String::as_str))?,
            })
        }
        "COPY" => {
            count(&[2, 3, 4])?;
            let hash = step
                .files_hash
                .filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
                .ok_or(StepError::FilesHash)?;
            let src = args[0].clone();
            if src.is_empty() || src.starts_with('/') || src.split('/').any(|p| p == "..") {
                return Err(StepError::CopySource(src));
            }
            let mode = args.get(3).filter(|m| !m.is_empty()).cloned();
            if let Some(mode) = &mode
                && (mode.len() > 4 || !mode.bytes().all(|b| (b'0'..=b'7').contains(&b)))
            {
                return Err(StepError::CopyMode(mode.clone()));
            }
            Ok(Step::Copy {
                src,
                dest: args[1].clone(),
                owner: user(args.get(2).map_or("", String::as_str))?,
                mode,
                hash: hash.to_ascii_lowercase(),
            })
        }
        "ENV" => {
            if args.is_empty() || !args.len().is_multiple_of(2) {
                return Err(StepError::EnvPairs);
            }
            let pairs: Vec<(String, String)> = args
                .chunks(2)
                .map(|pair| (pair[0].clone(), pair[1].clone()))
                .collect();
            if let Some((bad, _)) = pairs.iter().find(|(name, _)| !is_env_name(name)) {
                return Err(StepError::EnvName(bad.clone()));
            }
            Ok(Step::Env(pairs))
        }
        "WORKDIR" => {
            count(&[1])?;
            if args[0].is_empty() || args[0].contains('\0') {
                return Err(StepError::WorkdirPath);
            }
            Ok(Step::Workdir(args[0].clone()))
        }
        "USER" => {
            // A second argument ("add to sudoers") is accepted: the world's users have sudo
            // rights or not as the base gives them.
            count(&[1, 2])?;
            user(&args[0])?
                .map(Step::User)
                .ok_or(StepError::UserMissing)
        }
        other => Err(StepError::UnknownType(other.to_owned())),
    }
}

fn is_user_name(name: &str) -> bool {
    name.len() <= 32
        && name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_lowercase() || b == b'_')
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_-".contains(&b))
}

fn is_env_name(name: &str) -> bool {
    name.bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Runs `plan` as `build` on a task the template store tracks (its shutdown waits for it).
/// The build is `building` from now on and ends `ready` or `error` with its log saying why.
pub fn spawn(registry: Arc<Registry>, build: Arc<Build>, plan: Plan) {
    build.state().status = BuildStatus::Building;
    let tasks = registry.templates.tasks.clone();
    tasks.spawn(async move {
        build.log(
            Level::Info,
            None,
            format!(
                "Building template {} (build {})",
                build.template_id, build.id
            ),
        );
        let outcome = run(&registry, &build, plan).await;
        let outcome = match outcome {
            Ok(start) => registry
                .templates
                .finish(&build, start)
                .map_err(|e| Failure {
                    message: format!("keep the build: {e}"),
                    step: Some("finalize".to_owned()),
                }),
            Err(failure) => Err(failure),
        };
        match outcome {
            Ok(()) => build.log(Level::Info, None, "Build finished: the template is ready"),
            Err(failure) => {
                let dir = build.dir.clone();
                let _ = tokio::task::spawn_blocking(move || crate::world::remove_tree(&dir)).await;
                build.log(
                    Level::Error,
                    failure.step.as_deref(),
                    format!("Build failed: {}", failure.message),
                );
                let mut state = build.state();
                state.status = BuildStatus::Error;
                state.failure = Some(failure);
            }
        }
    });
}

/// The build's work: a world, the steps, the start and ready commands, the files kept.
async fn run(registry: &Arc<Registry>, build: &Build, plan: Plan) -> Result<Start, Failure> {
    let fail = |step: &str, message: String| Failure {
        message,
        step: Some(step.to_owned()),
    };
    let (files_from, base_start) = match plan.base {
        Base::Unavailable(why) => return Err(fail("base", why)),
        Base::World => (None, None),
        Base::Files { dir, start } => (Some(dir), start),
    };
    let mut context = Context {
        user: base_start
            .as_ref()
            .map_or_else(|| crate::world::users::USER.to_owned(), |s| s.user.clone()),
        workdir: base_start.as_ref().and_then(|s| s.workdir.clone()),
        env: BTreeMap::new(),
    };
    let world_id = crate::ids::sandbox_id();
    build.log(
        Level::Info,
        Some("base"),
        format!("Starting the build world {world_id}"),
    );
    // Started on a task of its own: a world start is not to be dropped midway.
    let spec = WorldSpec {
        sandbox_id: world_id.clone(),
        template_id: build.template_id.clone(),
        env_vars: BTreeMap::new(),
        access_token: None,
        files_from,
        volumes: Vec::new(),
        egress: Egress::new(true, Vec::new(), Vec::new()).expect("no rules are valid rules"),
        default_user: context.user.clone(),
        default_workdir: context.workdir.clone().map(Into::into),
    };
    let starter = registry.clone();
    let world = tokio::spawn(async move { starter.factory().start(spec).await })
        .await
        .map_err(|e| fail("base", format!("start the build world: {e}")))?
        .map_err(|e| fail("base", e.message))?;
    let envd = EnvdLink::new(world.socket(), None).envd(&world_id);
    let steps = async {
        let total = plan.steps.len();
        for (at, step) in plan.steps.iter().enumerate() {
            let label = (at + 1).to_string();
            build.log(
                Level::Info,
                Some(&label),
                format!("[{}/{total}] {}", at + 1, describe(step)),
            );
            run_step(registry, build, &envd, &mut context, &label, at, step)
                .await
                .map_err(|err| fail(&label, step_failure(step, &err)))?;
        }
        let start = Start {
            user: context.user.clone(),
            workdir: context.workdir.clone(),
            start_cmd: plan.start_cmd.clone(),
            ready_cmd: plan.ready_cmd.clone(),
        };
        if start.start_cmd.is_some() || start.ready_cmd.is_some() {
            build.log(
                Level::Info,
                Some("finalize"),
                "Starting the start command and waiting for the ready command",
            );
            start_template(&envd, &start)
                .await
                .map_err(|err| fail("finalize", err.to_string()))?;
        }
        Ok(start)
    };
    let outcome = tokio::select! {
        outcome = tokio::time::timeout(BUILD_TIMEOUT, steps) => outcome.unwrap_or_else(|_| {
            Err(Failure {
                message: format!("the build did not finish in {} s", BUILD_TIMEOUT.as_secs()),
                step: None,
            })
        }),
        () = build.cancel.cancelled() => Err(Failure {
            message: "cancelled: its template was deleted or the server is shutting down"
                .to_owned(),
            step: None,
        }),
    };
    let kept = match outcome {
        Ok(start) => keep_files(&world, build)
            .await
            .map(|()| start)
            .map_err(|e| fail("finalize", e.to_string())),
        Err(failure) => Err(failure),
    };
    if let Err(err) = world.destroy().await {
        tracing::warn!("template build {}: {err}", build.id);
    }
    kept
}

/// Stops the world (processes end; the start command runs anew in each sandbox) and copies its
/// files to the build's dir.
async fn keep_files(world: &World, build: &Build) -> Result<(), KeepError> {
    world.stop().await?;
    if let Some(parent) = build.dir.parent() {
        std::fs::create_dir_all(parent).map_err(|source| KeepError::CreateDir {
            dir: parent.to_owned(),
            source,
        })?;
    }
    Ok(world.copy_files(build.dir.clone()).await?)
}

/// Who and where the next step runs, and the variables `ENV` set (for the build's steps only,
/// as E2B's are).
struct Context {
    user: String,
    workdir: Option<String>,
    env: BTreeMap<String, String>,
}

impl Context {
    /// `path` made absolute against the working directory (else the user's home).
    fn absolute(&self, path: &str) -> String {
        if path.starts_with('/') {
            return path.to_owned();
        }
        let base = self.workdir.clone().unwrap_or_else(|| home_of(&self.user));
        format!("{}/{path}", base.trim_end_matches('/'))
    }
}

fn home_of(user: &str) -> String {
    if user == "root" {
        "/root".to_owned()
    } else {
        format!("/home/{user}")
    }
}

/// What a failed step says: a `RUN` as E2B's builder words it (`failed to run command '<cmd>':
/// command failed: <why>`, an unknown user by envd's Connect code, `unauthenticated: invalid
/// username: '<user>'`, which E2B's SDK suites look for), any other step by its description.
fn step_failure(step: &Step, err: &RunError) -> String {
    match (step, err) {
        (Step::Run { cmd, .. }, RunError::Command(command)) => {
            let why = match command {
                CommandError::Envd(e2b_client::Error::Authentication { message, .. }) => {
                    format!("unauthenticated: {message}")
                }
                CommandError::Failed { status, stderr } => {
                    format!("{status}{}", stderr_suffix(stderr))
                }
                other => other.to_string(),
            };
            format!("failed to run command '{cmd}': command failed: {why}")
        }
        _ => format!("{}: {err}", describe(step)),
    }
}

fn describe(step: &Step) -> String {
    match step {
        Step::Run { cmd, user } => match user {
            Some(user) => format!("RUN {cmd} (as {user})"),
            None => format!("RUN {cmd}"),
        },
        Step::Copy { src, dest, .. } => format!("COPY {src} {dest}"),
        Step::Env(pairs) => format!(
            "ENV {}",
            pairs
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(" ")
        ),
        Step::Workdir(dir) => format!("WORKDIR {dir}"),
        Step::User(user) => format!("USER {user}"),
    }
}

async fn run_step(
    registry: &Registry,
    build: &Build,
    envd: &Envd<EnvdLink>,
    context: &mut Context,
    label: &str,
    at: usize,
    step: &Step,
) -> Result<(), RunError> {
    match step {
        Step::Run { cmd, user } => {
            let user = user.as_deref().unwrap_or(&context.user);
            let mut command = Command::shell(cmd.clone()).envs(context.env.clone());
            if let Some(dir) = &context.workdir {
                command = command.cwd(dir.clone());
            }
            Ok(run_logged(envd, build, label, command, user).await?)
        }
        Step::Copy {
            src,
            dest,
            owner,
            mode,
            hash,
        } => {
            let archive = registry.templates.upload(hash);
            let file =
                tokio::fs::File::open(&archive)
                    .await
                    .map_err(|source| RunError::NotUploaded {
                        src: src.clone(),
                        hash: hash.clone(),
                        source,
                    })?;
            let stage = format!("{COPY_STAGE}-{}-{at}", &build.id[..8]);
            let chunks = tokio_util::io::ReaderStream::new(file);
            envd.upload(
                &format!("{stage}/archive"),
                chunks,
                &UploadOptions::default().user("root"),
            )
            .await
            .map_err(|source| RunError::Stage {
                src: src.clone(),
                source,
            })?;
            let owner = owner.as_deref().unwrap_or(&context.user);
            let script = copy_script(&stage, src, &context.absolute(dest), owner, mode.as_deref());
            Ok(run_logged(envd, build, label, Command::shell(script), "root").await?)
        }
        Step::Env(pairs) => {
            for (name, value) in pairs {
                // Expanded by the shell in the world, as E2B does (`$PATH:/opt/bin` works).
                let script = format!("printf %s \"{}\"", escape_double_quoted(value));
                let mut command = Command::shell(script).envs(context.env.clone());
                if let Some(dir) = &context.workdir {
                    command = command.cwd(dir.clone());
                }
                let expanded = output_of(envd, command, &context.user)
                    .await
                    .map_err(|source| RunError::Expand {
                        name: name.clone(),
                        source,
                    })?;
                context.env.insert(name.clone(), expanded);
            }
            Ok(())
        }
        Step::Workdir(dir) => {
            let dir = context.absolute(dir);
            let quoted = shell_quote(&dir);
            let script = format!("{}\nmkdirs {quoted}", mkdirs_function(&context.user));
            run_logged(envd, build, label, Command::shell(script), "root").await?;
            context.workdir = Some(dir);
            Ok(())
        }
        Step::User(user) => {
            let quoted = shell_quote(user);
            let script =
                format!("id -u {quoted} >/dev/null 2>&1 || useradd -m -s /bin/bash {quoted}");
            run_logged(envd, build, label, Command::shell(script), "root").await?;
            context.user = user.clone();
            Ok(())
        }
    }
}

/// The root script that applies a staged `COPY`: the archive unpacked (gzip or not), owner and
/// mode set, then each match of `src` copied — a directory's contents into `dest`, a file to
/// `dest` (into it when it ends with `/`, is a directory, or `src` matched more than one entry:
/// several sources need a directory, as with Docker's and E2B's `COPY`).
fn copy_script(stage: &str, src: &str, dest: &str, owner: &str, mode: Option<&str>) -> String {
    let stage = shell_quote(stage);
    let dest_q = shell_quote(dest);
    let mut script = format!(
        "set -e\n{}\nmkdir -p {stage}/x\ntar -x -f {stage}/archive -C {stage}/x\ncd {stage}/x\n\
         chown -R -h {}: .\n",
        mkdirs_function(owner),
        shell_quote(owner)
    );
    if let Some(mode) = mode {
        script.push_str(&format!("chmod -R {mode} .\n"));
    }
    let into = if dest.ends_with('/') { "true" } else { "false" };
    let pattern = glob_quote(src);
    script.push_str(&format!(
        "found=0\nfor p in {pattern}; do if [ -e \"$p\" ] || [ -L \"$p\" ]; then found=$((found + 1)); fi; done\n\
         into={into}\nif [ $found -gt 1 ]; then into=true; fi\n\
         for p in {pattern}; do\n  [ -e \"$p\" ] || [ -L \"$p\" ] || continue\n  \
         if [ -d \"$p\" ] && [ ! -L \"$p\" ]; then mkdirs {dest_q}; cp -a \"$p\"/. {dest_q}/\n  \
         elif $into || [ -d {dest_q} ]; then mkdirs {dest_q}; cp -a \"$p\" {dest_q}/\n  \
         else mkdirs \"$(dirname {dest_q})\"; cp -a \"$p\" {dest_q}\n  fi\ndone\n\
         cd /\nrm -rf {stage}\n\
         [ $found -gt 0 ] || {{ echo 'COPY: nothing in the upload matches {}' >&2; exit 1; }}\n",
        src.replace('\'', "")
    ));
    script
}

/// A shell function `mkdirs DIR`: `mkdir -p DIR`, the directories it creates owned by `owner`
/// (a `COPY` destination or a `WORKDIR` is the step user's to write in, as with E2B).
fn mkdirs_function(owner: &str) -> String {
    format!(
        "mkdirs() {{ d=\"$1\"; top=; while [ ! -e \"$d\" ] && [ ! -L \"$d\" ]; do top=\"$d\"; \
         d=$(dirname \"$d\"); done; mkdir -p \"$1\"; [ -z \"$top\" ] || chown -R {}: \"$top\"; }}",
        shell_quote(owner)
    )
}

/// `s` as one shell word.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// `s` as one shell word in which `*`, `?` and `[…]` still glob (a `COPY` source's pattern).
fn glob_quote(s: &str) -> String {
    s.chars()
        .map(|c| {
            if matches!(c, '*' | '?' | '[' | ']') || c.is_ascii_alphanumeric() {
                c.to_string()
            } else {
                format!("\\{c}")
            }
        })
        .collect()
}

/// `s` inside `"…"`: `\`, `"` and `` ` `` escaped, `$` left to expand.
fn escape_double_quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '\\' | '"' | '`') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Runs `command` as `user` to its exit, handing each piece of its output to `output` (0:
/// stdout or the pty, 1: stderr); an error unless it exits 0 (`Failed`'s stderr left empty for
/// the caller that kept it).
async fn run_command(
    envd: &Envd<EnvdLink>,
    command: &Command,
    user: &str,
    mut output: impl FnMut(usize, &[u8]),
) -> Result<(), CommandError> {
    let mut stream = envd
        .start(command, &StreamOptions::default().user(user))
        .await?;
    while let Some(event) = stream.next().await {
        match event? {
            ProcessEvent::Stdout(bytes) | ProcessEvent::Pty(bytes) => output(0, &bytes),
            ProcessEvent::Stderr(bytes) => output(1, &bytes),
            ProcessEvent::End(status) if status.success() => return Ok(()),
            ProcessEvent::End(status) => {
                return Err(CommandError::Failed {
                    status: status.status,
                    stderr: String::new(),
                });
            }
        }
    }
    Err(CommandError::NoExit)
}

/// Runs `command` as `user`, its output lines in the build's log; an error unless it exits 0.
async fn run_logged(
    envd: &Envd<EnvdLink>,
    build: &Build,
    label: &str,
    command: Command,
    user: &str,
) -> Result<(), CommandError> {
    let mut lines = [Vec::new(), Vec::new()];
    let log = |pending: &mut Vec<u8>, flush: bool| {
        while let Some(end) = pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            let text = String::from_utf8_lossy(&line[..line.len() - 1]).into_owned();
            build.log(Level::Info, Some(label), text);
        }
        if flush && !pending.is_empty() {
            let text = String::from_utf8_lossy(pending).into_owned();
            build.log(Level::Info, Some(label), text);
            pending.clear();
        }
    };
    let outcome = run_command(envd, &command, user, |at, bytes| {
        lines[at].extend_from_slice(bytes);
        log(&mut lines[at], false);
    })
    .await;
    for pending in &mut lines {
        log(pending, true);
    }
    outcome
}

/// Runs `command` as `user` and returns its stdout; an error (with its stderr) unless it exits 0.
async fn output_of(
    envd: &Envd<EnvdLink>,
    command: Command,
    user: &str,
) -> Result<String, CommandError> {
    let mut outputs = [Vec::new(), Vec::new()];
    let outcome = run_command(envd, &command, user, |at, bytes| {
        outputs[at].extend_from_slice(bytes)
    })
    .await;
    match outcome {
        Ok(()) => Ok(String::from_utf8_lossy(&outputs[0]).into_owned()),
        Err(CommandError::Failed { status, .. }) => Err(CommandError::Failed {
            status,
            stderr: String::from_utf8_lossy(&outputs[1]).trim().to_owned(),
        }),
        Err(err) => Err(err),
    }
}

/// Starts a template's start command (left running) and waits until its ready command
/// succeeds, at most [`READY_TIMEOUT`]: in a build's last step, and in every sandbox made from
/// the template before it is handed out.
pub async fn start_template(envd: &Envd<EnvdLink>, start: &Start) -> Result<(), ReadyError> {
    let with_dir = |command: Command| match &start.workdir {
        Some(dir) => command.cwd(dir.clone()),
        None => command,
    };
    let options = StreamOptions::default().user(start.user.clone());
    // The stream is dropped, not the process: envd keeps it running.
    let _started = match &start.start_cmd {
        Some(cmd) => Some(
            envd.start(&with_dir(Command::shell(cmd.clone())), &options)
                .await
                .map_err(|source| ReadyError::Start {
                    cmd: cmd.clone(),
                    source,
                })?,
        ),
        None => None,
    };
    let Some(ready) = &start.ready_cmd else {
        return Ok(());
    };
    let deadline = tokio::time::Instant::now() + READY_TIMEOUT;
    loop {
        let Err(source) =
            output_of(envd, with_dir(Command::shell(ready.clone())), &start.user).await
        else {
            return Ok(());
        };
        if tokio::time::Instant::now() >= deadline {
            return Err(ReadyError::NotReady {
                ready: ready.clone(),
                source,
            });
        }
        tokio::time::sleep(READY_INTERVAL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(kind: &str, args: &[&str], hash: Option<&str>) -> Result<Step, StepError> {
        check_step(RawStep {
            kind: kind.to_owned(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            files_hash: hash.map(str::to_owned),
        })
    }

    #[test]
    fn steps_are_checked_before_a_build_starts() {
        let hash = "ab".repeat(32);
        assert_eq!(
            step("RUN", &["echo hi", "root"], None).unwrap(),
            Step::Run {
                cmd: "echo hi".to_owned(),
                user: Some("root".to_owned())
            }
        );
        assert_eq!(
            step("COPY", &["a.txt", "/app/", "", "0755"], Some(&hash)).unwrap(),
            Step::Copy {
                src: "a.txt".to_owned(),
                dest: "/app/".to_owned(),
                owner: None,
                mode: Some("0755".to_owned()),
                hash: hash.clone(),
            }
        );
        for (kind, args, hash, why) in [
            ("RUN", &[][..], None, "arguments"),
            ("COPY", &["a", "/b"][..], None, "filesHash"),
            ("COPY", &["/etc", "/b"][..], Some(hash.as_str()), "relative"),
            ("COPY", &["../x", "/b"][..], Some(hash.as_str()), "relative"),
            (
                "COPY",
                &["a", "/b", "", "0999"][..],
                Some(hash.as_str()),
                "octal",
            ),
            ("ENV", &["A"][..], None, "pairs"),
            ("ENV", &["A=B", "x"][..], None, "invalid environment"),
            ("USER", &["Root;rm"][..], None, "invalid user"),
            ("FROM", &["x"][..], None, "unknown step type"),
        ] {
            let err = step(kind, args, hash).unwrap_err().to_string();
            assert!(err.contains(why), "{kind} {args:?}: {err}");
        }
    }

    #[test]
    fn copy_sources_glob_and_nothing_else_is_interpreted() {
        assert_eq!(glob_quote("src/*.txt"), "src\\/*\\.txt");
        assert_eq!(glob_quote("a b$(x)"), "a\\ b\\$\\(x\\)");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(escape_double_quoted(r#"$PATH:"`x`\"#), r#"$PATH:\"\`x\`\\"#);
    }

    /// Runs [`copy_script`] with bash on an archive of a `folder/` of two files and a relative
    /// symlink, copying `src` to `dest` under a fresh directory (returned, with `dest`).
    fn copied(src: &str, dest: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        let context = root.join("context");
        std::fs::create_dir_all(context.join("folder")).unwrap();
        std::fs::write(context.join("folder/a.txt"), "a").unwrap();
        std::fs::write(context.join("folder/b.txt"), "b").unwrap();
        std::os::unix::fs::symlink("a.txt", context.join("folder/link")).unwrap();
        let stage = root.join("stage");
        std::fs::create_dir(&stage).unwrap();
        let archived = std::process::Command::new("tar")
            .arg("-c")
            .arg("-f")
            .arg(stage.join("archive"))
            .arg("-C")
            .arg(&context)
            .arg("folder")
            .status()
            .unwrap();
        assert!(archived.success());
        let dest = root.join("out").join(dest);
        let owner = String::from_utf8(
            std::process::Command::new("id")
                .arg("-un")
                .output()
                .unwrap()
                .stdout,
        )
        .unwrap();
        let script = copy_script(
            stage.to_str().unwrap(),
            src,
            dest.to_str().unwrap(),
            owner.trim(),
            None,
        );
        let ran = std::process::Command::new("bash")
            .arg("-c")
            .arg(&script)
            .output()
            .unwrap();
        assert!(
            ran.status.success(),
            "{}",
            String::from_utf8_lossy(&ran.stderr)
        );
        (dir, dest)
    }

    #[test]
    fn a_glob_of_several_entries_is_copied_into_a_directory_one_entry_to_the_name() {
        let (_dir, dest) = copied("folder/*", "folder");
        assert!(dest.is_dir(), "several matches make a directory");
        assert_eq!(std::fs::read_to_string(dest.join("a.txt")).unwrap(), "a");
        assert_eq!(std::fs::read_to_string(dest.join("b.txt")).unwrap(), "b");
        assert_eq!(
            std::fs::read_link(dest.join("link")).unwrap().to_str(),
            Some("a.txt")
        );
        let (_one_dir, one) = copied("folder/a*", "single");
        assert_eq!(
            std::fs::read_to_string(&one).unwrap(),
            "a",
            "one match is copied to the name"
        );
        let (_into_dir, into) = copied("folder/a*", "dir/");
        assert_eq!(std::fs::read_to_string(into.join("a.txt")).unwrap(), "a");
    }

    #[test]
    fn relative_paths_resolve_against_the_workdir_or_the_home() {
        let mut context = Context {
            user: "user".to_owned(),
            workdir: None,
            env: BTreeMap::new(),
        };
        assert_eq!(context.absolute("app/"), "/home/user/app/");
        context.user = "root".to_owned();
        assert_eq!(context.absolute("x"), "/root/x");
        context.workdir = Some("/srv/".to_owned());
        assert_eq!(context.absolute("./"), "/srv/./");
        assert_eq!(context.absolute("/abs"), "/abs");
    }
}
