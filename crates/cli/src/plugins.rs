//! `dsh plugins` and `dsh check`: what a composition is, without creating it.

use dsh_host::{Composition, PluginInfo};
use dsh_plugin_api::ServiceKind;

use crate::failure::{EXIT_FAILURE, Failure};
use crate::stdout::outln;

/// Prints the plugins in load order (a table, or JSON with `--json`).
pub fn list(composition: &Composition, json: bool) -> Result<i32, Failure> {
    let plugins: Vec<&PluginInfo> = composition.plugins().collect();
    if json {
        print_json(&plugins)?;
        return Ok(0);
    }
    let rows: Vec<[String; 7]> = plugins
        .iter()
        .enumerate()
        .map(|(index, plugin)| {
            [
                (index + 1).to_string(),
                plugin.id.clone(),
                plugin.name.clone(),
                plugin.version.clone(),
                join_or_dash(plugin.provides.iter().map(|kind| kind.name().to_owned())),
                join_or_dash(
                    plugin
                        .inject
                        .iter()
                        .map(|from| format!("{}<-{}", from.service, from.provider)),
                ),
                join_or_dash(plugin.serves.iter().map(|kind| kind.name().to_owned())),
            ]
        })
        .collect();
    print_table(
        [
            "#", "ID", "NAME", "VERSION", "PROVIDES", "INJECTS", "SERVES",
        ],
        &rows,
    )?;
    Ok(0)
}

/// Validates (already done by loading the composition) and says so, with
/// the entry serving each seam.
pub fn check(composition: &Composition, json: bool) -> Result<i32, Failure> {
    let count = composition.plugins().len();
    if json {
        print_json(&serde_json::json!({
            "ok": true,
            "manifest": composition.origin(),
            "plugins": composition.plugins().map(|p| &p.id).collect::<Vec<_>>(),
            "served": served(composition).collect::<std::collections::BTreeMap<_, _>>(),
        }))?;
    } else {
        let ids: Vec<&str> = composition.plugins().map(|p| p.id.as_str()).collect();
        outln!(
            "{}: ok, {count} plugin{} in load order: {}",
            composition.origin(),
            if count == 1 { "" } else { "s" },
            if ids.is_empty() {
                "-".to_owned()
            } else {
                ids.join(", ")
            }
        )?;
        for (service, id) in served(composition) {
            outln!("{service}: served by entry {id:?}")?;
        }
    }
    Ok(0)
}

/// `(service, entry id)` for every service an entry serves.
fn served(composition: &Composition) -> impl Iterator<Item = (&'static str, &str)> {
    ServiceKind::known().filter_map(|kind| composition.served(kind).map(|id| (kind.name(), id)))
}

fn join_or_dash(items: impl Iterator<Item = String>) -> String {
    let items: Vec<String> = items.collect();
    if items.is_empty() {
        "-".to_owned()
    } else {
        items.join(",")
    }
}

fn print_table<const N: usize>(header: [&str; N], rows: &[[String; N]]) -> Result<(), Failure> {
    let mut widths = header.map(str::len);
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut out = String::new();
        for (index, (cell, width)) in cells.iter().zip(widths).enumerate() {
            if index + 1 == N {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<width$}  "));
            }
        }
        outln!("{}", out.trim_end())
    };
    line(header.to_vec())?;
    for row in rows {
        line(row.iter().map(String::as_str).collect())?;
    }
    Ok(())
}

/// Pretty JSON on stdout.
pub fn print_json<T: serde::Serialize + ?Sized>(value: &T) -> Result<(), Failure> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|err| Failure::new(EXIT_FAILURE, format!("encode JSON: {err}")))?;
    outln!("{text}")
}
