//! The list of cases: each a name, a seam, a one-line description, what it
//! needs from the world, and the async function that checks it.

use std::sync::LazyLock;

use futures::future::BoxFuture;

use crate::cases as groups;
use crate::check::CaseResult;
use crate::context::Cx;
use crate::options::{KitOptions, World};
use crate::report::Seam;

/// What a case needs from the world to be meaningful. A case whose needs
/// are unmet is reported skipped with the reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Need {
    /// An `fs` provider (the seam under test).
    Fs,
    /// An `fs` provider that accepts mutations (not
    /// [`KitOptions::read_only_fs`]).
    FsWrite,
    /// A way to create fixture files: a writable `fs` or a `subprocess`
    /// provider.
    Fixtures,
    /// A `subprocess` provider to prepare or probe the world (symlinks,
    /// modes, FIFOs, the process table) — things the `fs` seam cannot do.
    Shell,
    /// A `subprocess` provider (the seam under test).
    Subprocess,
    /// Terminals (`spawn_terminal`), not disabled by
    /// [`KitOptions::no_terminals`].
    Terminal,
}

impl Need {
    /// Why the need is unmet in `world` under `options`, if it is.
    pub(crate) fn unmet(self, world: &World, options: &KitOptions) -> Option<&'static str> {
        let fs = world.fs.is_some();
        let subprocess = world.subprocess.is_some();
        match self {
            Need::Fs if !fs => Some("no fs provider in this world"),
            Need::FsWrite if !fs => Some("no fs provider in this world"),
            Need::FsWrite if options.read_only_fs => {
                Some("the fs provider is read-only (KitOptions::read_only_fs)")
            }
            Need::Fixtures if !subprocess && (!fs || options.read_only_fs) => {
                Some("needs a writable fs or a subprocess provider to create fixtures")
            }
            Need::Shell if !subprocess => Some(
                "needs a subprocess provider to prepare or probe the world (symlinks, modes, process table)",
            ),
            Need::Subprocess | Need::Terminal if !subprocess => {
                Some("no subprocess provider in this world")
            }
            Need::Terminal if options.no_terminals => {
                Some("terminals are disabled (KitOptions::no_terminals)")
            }
            _ => None,
        }
    }
}

/// Which `fs` a case is written for, as [`KitOptions::fs_confined_to`]
/// says the world's is. A case for the other kind does not apply: it is
/// left out of the run (and the report), not skipped — the cases for the
/// world's kind check the same calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FsReach {
    /// Any `fs` (and cases that use none).
    Any,
    /// An `fs` that reaches every path of the world (no
    /// `fs_confined_to`): the cases that resolve `/` and ask what it
    /// contains.
    Everywhere,
    /// An `fs` confined to `fs_confined_to`: the cases that check paths
    /// outside it are refused.
    Confined,
}

/// The future of one case, borrowing its context.
pub(crate) type CaseFn = for<'a> fn(&'a Cx) -> BoxFuture<'a, CaseResult>;

/// One case of the kit: its identity and what it checks.
#[derive(Clone, Copy)]
pub struct CaseInfo {
    /// Stable dotted name: `<seam>.<operation>.<behaviour>`.
    pub name: &'static str,
    pub seam: Seam,
    /// What the case checks, in one line.
    pub description: &'static str,
    /// What the case needs from the world.
    pub needs: &'static [Need],
    /// Which `fs` it is written for.
    pub reach: FsReach,
    pub(crate) run: CaseFn,
}

impl std::fmt::Debug for CaseInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaseInfo")
            .field("name", &self.name)
            .field("seam", &self.seam)
            .field("description", &self.description)
            .field("needs", &self.needs)
            .field("reach", &self.reach)
            .finish_non_exhaustive()
    }
}

impl CaseInfo {
    /// Whether the case is written for the `fs` `options` describe (see
    /// [`FsReach`]); a case that does not apply is not run.
    pub fn applies(&self, options: &KitOptions) -> bool {
        match self.reach {
            FsReach::Any => true,
            FsReach::Everywhere => options.fs_confined_to.is_none(),
            FsReach::Confined => options.fs_confined_to.is_some(),
        }
    }

    /// Why this case cannot run in `world` under `options`, if it cannot.
    pub fn skip_reason(&self, world: &World, options: &KitOptions) -> Option<&'static str> {
        self.needs
            .iter()
            .find_map(|need| need.unmet(world, options))
    }
}

/// Declares one case: `case!("fs.stat.file", Fs, [Need::Fs], "…", module::function)`,
/// for any `fs`; `case!(…, [Fs], reach = Confined, "…", …)` for one kind
/// ([`FsReach`]).
macro_rules! case {
    ($name:literal, $seam:ident, [$($need:ident),* $(,)?], reach = $reach:ident, $description:literal, $run:path $(,)?) => {
        $crate::registry::CaseInfo {
            name: $name,
            seam: $crate::report::Seam::$seam,
            description: $description,
            needs: &[$($crate::registry::Need::$need),*],
            reach: $crate::registry::FsReach::$reach,
            run: |cx| Box::pin($run(cx)),
        }
    };
    ($name:literal, $seam:ident, [$($need:ident),* $(,)?], $description:literal, $run:path $(,)?) => {
        $crate::registry::case!($name, $seam, [$($need),*], reach = Any, $description, $run)
    };
}
pub(crate) use case;

static CASES: LazyLock<Vec<CaseInfo>> = LazyLock::new(|| {
    let mut all = Vec::new();
    for group in groups::ALL {
        all.extend_from_slice(group);
    }
    all
});

/// Every case of the kit, in run order.
pub fn cases() -> &'static [CaseInfo] {
    &CASES
}
