//! `dsh conformance`: the kit against the running composition.

use std::collections::BTreeMap;
use std::time::Duration;

use dsh_conformance::{KitOptions, World};
use dsh_host::{Host, HostError};
use dsh_plugin_api::ServiceKind;

use crate::args::ConformanceArgs;
use crate::failure::{EXIT_FAILURE, Failure};
use crate::plugins::print_json;
use crate::stdout::outln;

/// Runs every selected case; each is printed as it ends (or, with `--json`,
/// the whole report at the end). Exits 1 if any case failed.
pub async fn run(host: &Host, args: ConformanceArgs, json: bool) -> Result<i32, Failure> {
    let world = World {
        fs: optional(host.fs(), ServiceKind::Fs)?,
        subprocess: optional(host.subprocess(), ServiceKind::Subprocess)?,
    };
    if world.fs.is_none() && world.subprocess.is_none() {
        return Err(Failure::new(
            EXIT_FAILURE,
            format!(
                "conformance: {} provides neither fs nor subprocess: nothing to check",
                host.origin()
            ),
        ));
    }
    let options = KitOptions {
        scratch_root: args.scratch_root,
        filter: args.filter,
        read_only_fs: args.read_only_fs,
        no_terminals: args.no_terminals,
        fs_confined_to: args.fs_confined_to,
        case_timeout: args.case_timeout.map(Duration::from_secs),
    };
    // A closed stdout does not stop the kit mid-case (its cleanup must run);
    // the run ends quietly once the report is due.
    let served: BTreeMap<String, String> = [ServiceKind::Fs, ServiceKind::Subprocess]
        .into_iter()
        .filter_map(|kind| {
            let plugin = host
                .plugins()
                .iter()
                .find(|plugin| plugin.serves.contains(&kind))?;
            Some((kind.name().to_owned(), plugin.id.clone()))
        })
        .collect();
    if !json {
        // Which entry the kit is judging, when decorators stack.
        for (seam, id) in &served {
            outln!("{seam}: served by entry {id:?}")?;
        }
    }
    let mut printed = Ok(());
    let mut report = dsh_conformance::run(&world, &options, |case| {
        if !json && printed.is_ok() {
            printed = outln!("{case}");
        }
    })
    .await;
    printed?;
    report.served = served;
    if json {
        print_json(&report)?;
    } else {
        // `N passed, N failed, N skipped[; cleanup: …]`
        outln!("{report}")?;
    }
    Ok(if report.failed() == 0 {
        0
    } else {
        EXIT_FAILURE
    })
}

/// A missing service is a skipped seam; an ambiguous one is an error.
fn optional<T>(service: Result<T, HostError>, kind: ServiceKind) -> Result<Option<T>, Failure> {
    match service {
        Ok(service) => Ok(Some(service)),
        Err(HostError::ServiceMissing { .. }) => {
            tracing::info!("conformance: no {kind} provider; its cases are skipped");
            Ok(None)
        }
        Err(err) => Err(Failure::host(&err)),
    }
}
