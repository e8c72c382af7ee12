//! A whole cold `dsh --config config/e2b-local.yaml exec -- true` — a fresh
//! `dsh` process: start, plugin loading, sandbox create, owner setup, helper
//! install, the command, kill — against the official E2B SDKs doing create,
//! `commands.run('true')` and kill from an already-warm process
//! (`tests/sdk-peers/bench/lifecycle.{mjs,py}`), on the same e2b-local, in
//! interleaved rounds (the order rotates each round).
//!
//! Run (as root: e2b-local needs it; the SDK peers from
//! `scripts/install-sdk-peers.sh`):
//!
//! ```sh
//! cargo build --release -p e2b-local -p dsh-e2b-owner -p dsh-fs-e2b -p dsh-subprocess-e2b
//! cargo bench -p dsh-cli --bench exec_vs_sdks
//! ```
//!
//! `DSH_BENCH_ROUNDS` (default 40) sets the rounds. Prints each contender's
//! median and quartiles, and dsh's median over each peer's (paired per
//! round: < 1 favours dsh).
//!
//! Two more contenders measure the floor under any cold start: a cold
//! `dsh --config config/e2b-local.yaml plugins` (process start, loading and
//! checking the same three libraries, exit; no sandbox) and the JS SDK doing
//! create and kill only. Their sum, per round, is what a cold `dsh exec` costs
//! if everything it adds in the sandbox (owner setup, helper install, the
//! command) took no time; it is printed over the JS SDK's whole create → run →
//! kill. The JS SDK's create and kill are measured from each template dsh
//! uses: e2b-local copies a built template's files into every sandbox made
//! from it and deletes them at the kill, so a sandbox from the template with
//! the helper costs more to create and kill than one from `base` whoever
//! creates it, and that cost is the floor's, not dsh's.
//!
//! What a cold `dsh exec` spends beyond its floor, over what the SDK spends on
//! its `commands.run('true')` (timed alone by the driver, in iterations that
//! still create and kill), is printed for a sandbox from `base` (the helper
//! uploaded) and from a template built by `dsh template`'s recipe (the helper
//! in it; target ≤ 1×). A cold
//! `node` process doing the JS SDK's create → run → kill, process start and
//! module loading included, is the last contender (target: dsh ≤ 0.5× it).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use e2b_local::harness::{LocalServer, SdkDriver, Steps, millis, quantile};

/// The plugin libraries the manifest loads, next to `dsh`.
const PLUGINS: [&str; 3] = ["dsh_e2b_owner", "dsh_fs_e2b", "dsh_subprocess_e2b"];

fn main() -> Result<()> {
    let rounds: usize = match std::env::var("DSH_BENCH_ROUNDS") {
        Ok(value) => value.parse().context("DSH_BENCH_ROUNDS")?,
        Err(_) => 40,
    };
    let dsh = PathBuf::from(env!("CARGO_BIN_EXE_dsh"));
    let dir = dsh.parent().context("dsh has a directory")?;
    for plugin in PLUGINS {
        let library = dir.join(format!("lib{plugin}.so"));
        ensure!(
            library.is_file(),
            "{} is missing: cargo build --release -p dsh-e2b-owner -p dsh-fs-e2b -p dsh-subprocess-e2b",
            library.display()
        );
    }
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/e2b-local.yaml");
    let server = LocalServer::start();
    let scratch = tempfile::tempdir()?;
    let with_helper = template_manifest(&dsh, &manifest, &server, scratch.path())?;
    let cold = |manifest: &Path, args: &[&str]| {
        let mut command = Command::new(&dsh);
        command.arg("--config").arg(manifest).args(args);
        Cold::new(
            format!("dsh {} (cold, release)", args.join(" ")),
            command,
            &server,
        )
    };
    let js = SdkDriver::js("lifecycle");
    // In the order of the row indices below.
    let mut contenders = vec![
        Contender::Cold(cold(&manifest, &["exec", "--", "true"])),
        Contender::Cold(Cold {
            name: "dsh exec -- true (cold, template with the helper)".to_owned(),
            ..cold(&with_helper, &["exec", "--", "true"])
        }),
        Contender::Warm(js.steps(&server, &[])?, ""),
        Contender::Warm(SdkDriver::python("lifecycle").steps(&server, &[])?, ""),
        Contender::Cold(cold(&manifest, &["plugins"])),
        Contender::Warm(
            js.steps(&server, &["--without-command"])?,
            ", create + kill only",
        ),
        Contender::Cold(Cold::new(
            format!("{} (cold node process)", js.name),
            js.command(&server, "once", &[]),
            &server,
        )),
        Contender::Warm(
            js.steps(&server, &["--without-command", "--template", TEMPLATE])?,
            ", create + kill only, template with the helper",
        ),
        Contender::Warm(
            js.steps(&server, &["--only-command"])?,
            ", its commands.run('true') alone",
        ),
    ];
    // One untimed round: the page cache, e2b-local's first worlds.
    for contender in &mut contenders {
        contender.once()?;
    }
    let mut samples = vec![Vec::with_capacity(rounds); contenders.len()];
    for round in 0..rounds {
        for offset in 0..contenders.len() {
            let index = (round + offset) % contenders.len();
            samples[index].push(contenders[index].once()?);
        }
    }
    println!(
        "\n{rounds} interleaved rounds; a fresh process per round for the cold ones, the SDKs' \
         steps warm in one process each\n"
    );
    println!(
        "{:<52} {:>10} {:>18} {:>12}",
        "contender", "median ms", "p25-p75 ms", "dsh / it"
    );
    for (contender, times) in contenders.iter().zip(&samples) {
        println!(
            "{:<52} {:>10.1} {:>8.1}-{:<9.1} {:>11.2}x",
            contender.name(),
            millis(quantile(times, 0.5)),
            millis(quantile(times, 0.25)),
            millis(quantile(times, 0.75)),
            paired(&samples[DSH_EXEC], times),
        );
    }
    // The floor of a dsh row: the cold `dsh plugins` and the JS SDK's create + kill from the
    // same template.
    let floor = |row: usize, round: usize| {
        let bare = if row == DSH_TEMPLATE {
            JS_BARE_TEMPLATE
        } else {
            JS_BARE
        };
        samples[DSH_PLUGINS][round] + samples[bare][round]
    };
    let per_round = |f: &dyn Fn(usize) -> f64| median_f64((0..rounds).map(f).collect());
    println!(
        "\nfloor of a cold start (dsh plugins + JS create + kill) / the JS SDK's whole run: {:.2}x",
        per_round(&|r| floor(DSH_EXEC, r).as_secs_f64() / samples[JS][r].as_secs_f64())
    );
    // What dsh spends beyond its floor (owner setup, helper, the command) over what the SDK
    // spends on its commands.run('true'), timed alone by the driver.
    // Per round; its quartiles show how far one round's noise moves it (a difference of two
    // ~45 ms times over a ~6 ms one).
    let in_sandbox = |row: usize| {
        let mut ratios: Vec<f64> = (0..rounds)
            .map(|r| {
                (samples[row][r].as_secs_f64() - floor(row, r).as_secs_f64())
                    / samples[JS_RUN][r].as_secs_f64()
            })
            .collect();
        ratios.sort_by(f64::total_cmp);
        let at = |q: f64| ratios[((ratios.len() - 1) as f64 * q).round() as usize];
        (at(0.5), at(0.25), at(0.75))
    };
    let (template, template_p25, template_p75) = in_sandbox(DSH_TEMPLATE);
    let (uploaded, uploaded_p25, uploaded_p75) = in_sandbox(DSH_EXEC);
    println!(
        "dsh exec minus the floor / the JS SDK's commands.run('true'): {template:.2}x \
         (p25-p75 {template_p25:.2}-{template_p75:.2}) with the helper in the template, \
         {uploaded:.2}x ({uploaded_p25:.2}-{uploaded_p75:.2}) uploading it (target <= 1x with it)"
    );
    println!(
        "dsh exec (template) / a cold node process doing create -> run -> kill: {:.2}x (target <= 0.5x)",
        paired(&samples[DSH_TEMPLATE], &samples[JS_COLD])
    );
    Ok(())
}

/// A manifest like `manifest` whose sandboxes come from a template built by `dsh template`'s
/// recipe with the JS SDK's builder on `server` (so they hold dsh's helper).
fn template_manifest(
    dsh: &Path,
    manifest: &Path,
    server: &LocalServer,
    scratch: &Path,
) -> Result<PathBuf> {
    let context = scratch.join("context");
    let written = Command::new(dsh).arg("template").arg(&context).status()?;
    ensure!(written.success(), "dsh template: {written}");
    let modules =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/sdk-peers/js/node_modules");
    std::os::unix::fs::symlink(modules, context.join("node_modules"))?;
    let built = Command::new("node")
        .arg(context.join("build.mjs"))
        .arg(TEMPLATE)
        .envs(server.env())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .context("run node (scripts/install-sdk-peers.sh)")?;
    ensure!(built.success(), "node build.mjs: {built}");
    let text = std::fs::read_to_string(manifest)?;
    let path = scratch.join("template.yaml");
    std::fs::write(
        &path,
        text.replace("template: base", &format!("template: {TEMPLATE}")),
    )?;
    Ok(path)
}

/// The template `dsh template`'s recipe builds for the bench.
const TEMPLATE: &str = "dsh-bench-helper";

// Rows of the contenders (and their samples).
const DSH_EXEC: usize = 0;
const DSH_TEMPLATE: usize = 1;
const JS: usize = 2;
const DSH_PLUGINS: usize = 4;
const JS_BARE: usize = 5;
const JS_COLD: usize = 6;
const JS_BARE_TEMPLATE: usize = 7;
const JS_RUN: usize = 8;

enum Contender {
    Cold(Cold),
    /// A warm SDK driver and what its iterations leave out (empty: nothing).
    Warm(Steps, &'static str),
}

impl Contender {
    fn name(&self) -> String {
        match self {
            Contender::Cold(cold) => cold.name.clone(),
            Contender::Warm(warm, scope) => format!("{} (warm{scope})", warm.name()),
        }
    }

    fn once(&mut self) -> Result<Duration> {
        match self {
            Contender::Cold(cold) => cold.once(),
            Contender::Warm(warm, _) => Ok(warm.once()?),
        }
    }
}

/// A fresh process per iteration, timed from spawn to exit, its output discarded.
struct Cold {
    name: String,
    command: Command,
}

impl Cold {
    /// `command` with `server`'s variables.
    fn new(name: String, mut command: Command, server: &LocalServer) -> Cold {
        command
            .envs(server.env())
            .stdin(Stdio::null())
            .stdout(Stdio::null());
        Cold { name, command }
    }

    fn once(&mut self) -> Result<Duration> {
        let start = Instant::now();
        let status = self.command.status().context("start a cold contender")?;
        let took = start.elapsed();
        ensure!(status.success(), "{}: {status}", self.name);
        Ok(took)
    }
}

/// The median over rounds of `ours / theirs`.
fn paired(ours: &[Duration], theirs: &[Duration]) -> f64 {
    median_f64(
        ours.iter()
            .zip(theirs)
            .map(|(ours, theirs)| ours.as_secs_f64() / theirs.as_secs_f64())
            .collect(),
    )
}

fn median_f64(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}
