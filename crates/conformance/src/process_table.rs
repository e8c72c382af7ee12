//! The world's process table as seen from inside the world (`ps`), which is
//! how the kit proves a process group or a terminal session empty without
//! trusting the provider under test.

use crate::check::{self, Failure};
use crate::context::Cx;

/// One row of the world's process table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PsRow {
    pub(crate) pid: u32,
    pub(crate) pgid: u32,
    pub(crate) sid: u32,
    pub(crate) stat: String,
    pub(crate) args: String,
}

impl PsRow {
    /// Zombies (and dead entries) do not count as running.
    pub(crate) fn is_live(&self) -> bool {
        !self.stat.starts_with('Z') && !self.stat.starts_with('X')
    }
}

impl Cx {
    /// The world's process table (`ps -e`), as seen from inside the world.
    pub(crate) async fn process_table(&self) -> std::result::Result<Vec<PsRow>, Failure> {
        let out = self
            .sh_ok(
                "probe: ps -e",
                "ps -ww -e -o pid= -o pgid= -o sid= -o stat= -o args=",
                &[],
            )
            .await?;
        let text = String::from_utf8_lossy(&out);
        let rows: std::result::Result<Vec<_>, _> = text
            .lines()
            .filter(|line| !line.trim().is_empty())
            .map(parse_ps_row)
            .collect();
        Ok(rows?.into_iter().flatten().collect())
    }

    /// Live (non-zombie) processes whose process group is `pgid`.
    pub(crate) async fn group_members(
        &self,
        pgid: u32,
    ) -> std::result::Result<Vec<PsRow>, Failure> {
        Ok(self
            .process_table()
            .await?
            .into_iter()
            .filter(|row| row.pgid == pgid && row.is_live())
            .collect())
    }

    /// Live (non-zombie) processes of session `sid`.
    pub(crate) async fn session_members(
        &self,
        sid: u32,
    ) -> std::result::Result<Vec<PsRow>, Failure> {
        Ok(self
            .process_table()
            .await?
            .into_iter()
            .filter(|row| row.sid == sid && row.is_live())
            .collect())
    }
}

/// One `ps` line; `None` for a process caught while it is being reaped,
/// which `ps` shows dead (`X`) with ids it can no longer read (`-1`, or
/// 4294967295): it runs nothing and belongs to no group any more.
fn parse_ps_row(line: &str) -> std::result::Result<Option<PsRow>, Failure> {
    let bad = || Failure::new(format!("probe: ps -e: unparsable line {line:?}"));
    let mut rest = line.trim_start();
    let mut field = || {
        let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        let (value, tail) = rest.split_at(end);
        rest = tail.trim_start();
        value
    };
    let pid = field().parse().map_err(|_| bad())?;
    let (pgid, sid): (i64, i64) = (
        field().parse().map_err(|_| bad())?,
        field().parse().map_err(|_| bad())?,
    );
    let stat = field().to_owned();
    if stat.is_empty() {
        return Err(bad());
    }
    let id = |value: i64| u32::try_from(value).ok().filter(|id| *id != u32::MAX);
    match (id(pgid), id(sid)) {
        (Some(pgid), Some(sid)) => Ok(Some(PsRow {
            pid,
            pgid,
            sid,
            stat,
            args: rest.to_owned(),
        })),
        _ if stat.starts_with('X') => Ok(None),
        _ => Err(bad()),
    }
}

/// Renders process-table rows for a message.
pub(crate) fn show_rows(rows: &[PsRow]) -> String {
    rows.iter()
        .map(|row| {
            format!(
                "pid {} ({}) {:?}",
                row.pid,
                row.stat,
                check::clip(&row.args, 60)
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ps_rows_parse_with_spaces_in_args() {
        let row = parse_ps_row("  123   120   100 Ss+  sh -c sleep 3; echo 'a  b'")
            .unwrap()
            .unwrap();
        assert_eq!(
            row,
            PsRow {
                pid: 123,
                pgid: 120,
                sid: 100,
                stat: "Ss+".into(),
                args: "sh -c sleep 3; echo 'a  b'".into()
            }
        );
        assert!(row.is_live());
        assert!(
            !parse_ps_row("1 1 1 Z [x] <defunct>")
                .unwrap()
                .unwrap()
                .is_live()
        );
        assert!(parse_ps_row("x 1 1 S a").is_err());
        assert!(parse_ps_row("1 1 1").is_err());
    }

    /// Seen once in CI: a process caught while being reaped.
    #[test]
    fn a_process_being_reaped_is_no_row() {
        assert_eq!(parse_ps_row("19035 4294967295 -1 X+ [bash]").unwrap(), None);
        // Unreadable ids of a live process are still a broken line.
        assert!(parse_ps_row("19035 -1 -1 S+ bash").is_err());
    }
}
