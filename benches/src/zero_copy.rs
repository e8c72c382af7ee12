//! The zero-copy prototype, host side: loads `dsh-bench-zero-copy` with
//! `dlopen` (as the host loads a plugin) and moves byte buffers across the
//! boundary both ways — copied, as dsh's plugin API does today, against
//! wrapped without a copy — each next to the same work done in-process.
//!
//! `cargo run --release -p dsh-benches --example zero_copy [-- --quick]`.
//! The plan these figures support is in `benches/README.md`.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use abi_stable::library::lib_header_from_path;
use abi_stable::std_types::{RResult, RStr, RString, RVec};
use anyhow::{Context, Result, anyhow, bail, ensure};
use bytes::Bytes;
use dsh_bench_zero_copy::plain::{self, ChunkFile};
use dsh_bench_zero_copy::{ChunkReaderBox, FfiBytes, Receive, Received, ZeroCopyModuleRef};

use crate::figure::{Figure, Section, Target};
use crate::locate::{bench_dir, plugin_library};
use crate::measure::{Contender, Plan, interleave};
use crate::stats::Samples;
use crate::table::Headings;

const KIB: usize = 1024;
const MIB: usize = 1024 * 1024;
/// The bulk payload: as the fs figures' large file.
const BULK: usize = 64 * MIB;
/// The chunk of streamed reads: fs-local's and subprocess-local's.
const CHUNK: usize = 64 * KIB;
/// The package of the prototype library.
const PACKAGE: &str = "dsh-bench-zero-copy";

/// The table's columns: each crossing against its baseline.
const HEADINGS: Headings = Headings {
    ours: "measured",
    in_process: "",
    peer: "baseline",
    ratio: "ratio [p25-p75]",
    in_process_ratio: "",
};

/// How a buffer crosses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Crossing {
    /// `RVec` received with `into_vec`: one copy (today).
    Copied,
    /// `RVec` received with `Bytes::from_owner`.
    WrappedRVec,
    /// [`FfiBytes`] received with `Bytes::from_owner`.
    FfiBytes,
}

impl Crossing {
    const ALL: [Crossing; 3] = [Crossing::Copied, Crossing::WrappedRVec, Crossing::FfiBytes];

    fn describe(self) -> &'static str {
        match self {
            Crossing::Copied => "copied (today)",
            Crossing::WrappedRVec => "wrapped RVec",
            Crossing::FfiBytes => "FfiBytes",
        }
    }
}

/// Loads the prototype library from the build's `deps` directory.
pub fn load() -> Result<ZeroCopyModuleRef> {
    let path = plugin_library(PACKAGE)?;
    let header = lib_header_from_path(&path).with_context(|| format!("load {}", path.display()))?;
    header
        .init_root_module::<ZeroCopyModuleRef>()
        .with_context(|| format!("load the root module of {}", path.display()))
}

/// The prototype program: `[--quick]`.
pub fn main_with_args(args: &[String]) -> Result<()> {
    let quick = match args {
        [] => false,
        [flag] if flag == "--quick" => true,
        other => bail!("zero_copy: unexpected arguments {other:?} (the only option is --quick)"),
    };
    println!("dsh zero-copy prototype — {}", crate::machine::describe());
    let module = load()?;
    let dir = bench_dir()?;
    let sections = measure(module, dir.path(), quick)?;
    println!();
    print!("{}", crate::table::render(&sections, HEADINGS));
    println!("finished: {}", crate::machine::describe_load());
    Ok(())
}

/// Every figure of the prototype, files in `dir`.
pub fn measure(module: ZeroCopyModuleRef, dir: &Path, quick: bool) -> Result<Vec<Section>> {
    let rounds = if quick { 3 } else { 11 };
    let bulk_plan = Plan {
        rounds,
        iterations: if quick { 1 } else { 2 },
    };
    let source = dir.join("source");
    let content: Vec<u8> = (0..BULK).map(|i| b'a' + (i % 26) as u8).collect();
    std::fs::write(&source, &content).with_context(|| format!("write {}", source.display()))?;

    let mut crossing = Vec::new();
    for (size, iterations) in [(KIB, 20_000), (CHUNK, 2_000), (MIB, 200), (BULK, 3)] {
        let plan = Plan {
            rounds,
            iterations: if quick {
                (iterations / 10).max(1)
            } else {
                iterations
            },
        };
        crossing.extend(one_crossing(module, size, plan)?);
    }
    Ok(vec![
        Section {
            title: "one crossing, host → library, no I/O: convert on receipt, touch, drop".into(),
            figures: crossing,
            notes: vec![
                "peer = copied: RVec::into_vec in the receiving library, what dsh's glue does today".into(),
                "buffers are prepared outside the timed region; the sender's conversion (RVec::from / FfiBytes::from_bytes) is timed".into(),
            ],
        },
        Section {
            title: format!("whole-file read of {} MiB, library → host (read_text's path)", BULK / MIB),
            figures: against_in_process(bulk_plan, "read whole", |crossing| read_whole(module, &source, crossing), || {
                let content = plain::read_file(&source).with_context(|| format!("read {}", source.display()))?;
                Ok(plain::touch(&content))
            })?,
            notes: vec!["peer: std::fs::read in the host binary; via the library the buffer then crosses".into()],
        },
        Section {
            title: format!("streamed read of {} MiB in {} KiB chunks, library → host (read_bytes' and pipe mode's path)", BULK / MIB, CHUNK / KIB),
            figures: against_in_process(bulk_plan, "stream", |crossing| read_chunks(module, &source, crossing), || {
                let mut file = ChunkFile::open(&source, CHUNK).with_context(|| format!("open {}", source.display()))?;
                let mut token = 0;
                while let Some(chunk) = file.next_chunk().with_context(|| format!("read {}", source.display()))? {
                    token ^= plain::touch(&chunk);
                }
                Ok(token)
            })?,
            notes: vec!["peer: the same chunk reader in the host binary (a fresh buffer per chunk, read(2) into it)".into()],
        },
        Section {
            title: format!("write of {} MiB, host → library (write's and stdin's path)", BULK / MIB),
            figures: write_bulk(module, dir, &content, bulk_plan)?,
            notes: vec!["peer: std::fs::write in the host binary; owned inputs prepared outside the timed region".into()],
        },
    ])
}

/// Figures for one host → library crossing of `size` bytes.
fn one_crossing(module: ZeroCopyModuleRef, size: usize, plan: Plan) -> Result<Vec<Figure>> {
    let template = vec![b'x'; size];
    let expected = plain::touch(&template);
    let run = |crossing: Crossing| {
        let template = &template;
        move |n: usize| -> Result<Duration> {
            let inputs: Vec<Vec<u8>> = (0..n).map(|_| template.clone()).collect();
            let started = Instant::now();
            for input in inputs {
                let token = match crossing {
                    Crossing::Copied => (module.take_rvec())(RVec::from(input), Receive::Copy),
                    Crossing::WrappedRVec => (module.take_rvec())(RVec::from(input), Receive::Wrap),
                    Crossing::FfiBytes => {
                        (module.take_ffi())(FfiBytes::from_bytes(Bytes::from(input)))
                    }
                };
                ensure!(
                    token == expected,
                    "take {size} bytes {crossing:?}: token {token}, expected {expected}"
                );
            }
            Ok(started.elapsed())
        }
    };
    let mut contenders =
        Crossing::ALL.map(|crossing| Contender::new(crossing.describe(), run(crossing)));
    let [copied, wrapped, ffi] = interleave(plan, &mut contenders)?;
    let size = human(size);
    Ok(vec![
        Figure::timed(
            format!("{size}: wrapped RVec vs copied"),
            &wrapped,
            None,
            &copied,
            Target::None,
        ),
        Figure::timed(
            format!("{size}: FfiBytes vs copied"),
            &ffi,
            None,
            &copied,
            Target::None,
        ),
    ])
}

/// Three figures (one per crossing) of `through_library` against the same
/// work in-process, which must return the same token.
fn against_in_process(
    plan: Plan,
    what: &str,
    through_library: impl Fn(Crossing) -> Result<u64>,
    in_process: impl Fn() -> Result<u64>,
) -> Result<Vec<Figure>> {
    let expected = in_process()?;
    let check = |token: u64, who: &str| -> Result<()> {
        ensure!(
            token == expected,
            "{what} {who}: token {token}, expected {expected}"
        );
        Ok(())
    };
    let library = |crossing: Crossing| {
        let (through_library, check) = (&through_library, &check);
        move |n: usize| -> Result<Duration> {
            let started = Instant::now();
            for _ in 0..n {
                check(through_library(crossing)?, crossing.describe())?;
            }
            Ok(started.elapsed())
        }
    };
    let mut contenders = [
        Contender::new("in-process", |n| {
            let started = Instant::now();
            for _ in 0..n {
                check(in_process()?, "in-process")?;
            }
            Ok(started.elapsed())
        }),
        Contender::new(Crossing::Copied.describe(), library(Crossing::Copied)),
        Contender::new(
            Crossing::WrappedRVec.describe(),
            library(Crossing::WrappedRVec),
        ),
        Contender::new(Crossing::FfiBytes.describe(), library(Crossing::FfiBytes)),
    ];
    let [peer, copied, wrapped, ffi] = interleave(plan, &mut contenders)?;
    Ok(figures_against(&peer, [&copied, &wrapped, &ffi]))
}

fn figures_against(peer: &Samples, crossings: [&Samples; 3]) -> Vec<Figure> {
    Crossing::ALL
        .iter()
        .zip(crossings)
        .map(|(crossing, samples)| {
            Figure::timed(
                format!("via library, {} vs in-process", crossing.describe()),
                samples,
                None,
                peer,
                Target::RatioAtMost(1.15),
            )
        })
        .collect()
}

fn read_whole(module: ZeroCopyModuleRef, path: &Path, crossing: Crossing) -> Result<u64> {
    let text = path_text(path)?;
    Ok(match crossing {
        Crossing::Copied => plain::touch(
            Receive::Copy
                .take(lift(module.read_file_rvec()(text.into()))?)
                .as_slice(),
        ),
        Crossing::WrappedRVec => plain::touch(
            Receive::Wrap
                .take(lift(module.read_file_rvec()(text.into()))?)
                .as_slice(),
        ),
        Crossing::FfiBytes => {
            plain::touch(&lift(module.read_file_ffi()(text.into()))?.into_bytes())
        }
    })
}

fn read_chunks(module: ZeroCopyModuleRef, path: &Path, crossing: Crossing) -> Result<u64> {
    let text = path_text(path)?;
    let mut reader: ChunkReaderBox = lift(module.open_chunks()(RStr::from(text), CHUNK))?;
    let mut token = 0;
    loop {
        let chunk: Option<Received> = match crossing {
            Crossing::Copied => lift(reader.next_rvec())?
                .into_option()
                .map(|chunk| Receive::Copy.take(chunk)),
            Crossing::WrappedRVec => lift(reader.next_rvec())?
                .into_option()
                .map(|chunk| Receive::Wrap.take(chunk)),
            Crossing::FfiBytes => lift(reader.next_ffi())?
                .into_option()
                .map(|chunk| Received::Wrapped(chunk.into_bytes())),
        };
        let Some(chunk) = chunk else {
            return Ok(token);
        };
        token ^= plain::touch(chunk.as_slice());
        black_box(chunk);
    }
}

fn write_bulk(
    module: ZeroCopyModuleRef,
    dir: &Path,
    content: &[u8],
    plan: Plan,
) -> Result<Vec<Figure>> {
    let target = |who: &str| dir.join(format!("written-{who}"));
    let run = |crossing: Option<Crossing>| {
        let path: PathBuf = target(crossing.map_or("in-process", Crossing::describe));
        move |n: usize| -> Result<Duration> {
            let text = path_text(&path)?.to_owned();
            let inputs: Vec<Vec<u8>> = (0..n).map(|_| content.to_vec()).collect();
            let started = Instant::now();
            for input in inputs {
                let written = match crossing {
                    None => {
                        plain::write_file(&path, &input).with_context(|| format!("write {text}"))?
                    }
                    Some(Crossing::Copied) => lift(module.write_file_rvec()(
                        text.as_str().into(),
                        input.into(),
                        Receive::Copy,
                    ))?,
                    Some(Crossing::WrappedRVec) => lift(module.write_file_rvec()(
                        text.as_str().into(),
                        input.into(),
                        Receive::Wrap,
                    ))?,
                    Some(Crossing::FfiBytes) => lift(module.write_file_ffi()(
                        text.as_str().into(),
                        FfiBytes::from_bytes(input.into()),
                    ))?,
                };
                ensure!(
                    written == content.len() as u64,
                    "write {text}: {written} bytes, expected {}",
                    content.len()
                );
            }
            Ok(started.elapsed())
        }
    };
    let mut contenders = [
        Contender::new("in-process write", run(None)),
        Contender::new("copied write", run(Some(Crossing::Copied))),
        Contender::new("wrapped RVec write", run(Some(Crossing::WrappedRVec))),
        Contender::new("FfiBytes write", run(Some(Crossing::FfiBytes))),
    ];
    let [peer, copied, wrapped, ffi] = interleave(plan, &mut contenders)?;
    Ok(figures_against(&peer, [&copied, &wrapped, &ffi]))
}

/// The library's result as a plain one.
fn lift<T>(result: RResult<T, RString>) -> Result<T> {
    result.into_result().map_err(|err| anyhow!("{err}"))
}

fn path_text(path: &Path) -> Result<&str> {
    path.to_str()
        .with_context(|| format!("{} is not UTF-8", path.display()))
}

fn human(size: usize) -> String {
    if size >= MIB {
        format!("{} MiB", size / MIB)
    } else {
        format!("{} KiB", size / KIB)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn module() -> ZeroCopyModuleRef {
        load().expect("the prototype library is built with the tests")
    }

    #[test]
    fn every_crossing_delivers_the_same_bytes_both_ways() {
        let module = module();
        let dir = tempfile::tempdir().expect("tempdir");
        let source = dir.path().join("source");
        let content: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&source, &content).expect("write");
        let expected_whole = plain::touch(&content);
        let mut expected_chunks = 0;
        for chunk in content.chunks(CHUNK) {
            expected_chunks ^= plain::touch(chunk);
        }
        for crossing in Crossing::ALL {
            assert_eq!(
                read_whole(module, &source, crossing).expect("read"),
                expected_whole,
                "{crossing:?}"
            );
            assert_eq!(
                read_chunks(module, &source, crossing).expect("chunks"),
                expected_chunks,
                "{crossing:?}"
            );
        }
        let figures = write_bulk(
            module,
            dir.path(),
            &content,
            Plan {
                rounds: 1,
                iterations: 1,
            },
        )
        .expect("write");
        assert_eq!(figures.len(), 3);
        for who in ["in-process", "copied (today)", "wrapped RVec", "FfiBytes"] {
            let written =
                std::fs::read(dir.path().join(format!("written-{who}"))).expect("written");
            assert!(written == content, "{who} wrote other bytes");
        }
    }

    #[test]
    fn ffi_bytes_are_released_by_the_binary_that_made_them() {
        let module = module();
        let (host_before, library_before) =
            (dsh_bench_zero_copy::live_owners(), module.live_owners()());
        // Host → library: the library wraps and drops; the host's release
        // function runs and the host's count goes back.
        let content = Bytes::from(vec![3u8; 4096]);
        let token = module.take_ffi()(FfiBytes::from_bytes(content.clone()));
        assert_eq!(token, plain::touch(&content));
        assert_eq!(dsh_bench_zero_copy::live_owners(), host_before);
        // Library → host: the library's owner lives while the host holds
        // the bytes, and is released by the library when they drop.
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        std::fs::write(&path, b"abc").expect("write");
        let held = lift(module.read_file_ffi()(
            path_text(&path).expect("utf-8").into(),
        ))
        .expect("read")
        .into_bytes();
        assert_eq!(&held[..], b"abc");
        assert_eq!(module.live_owners()(), library_before + 1);
        assert_eq!(
            dsh_bench_zero_copy::live_owners(),
            host_before,
            "the host made no owner"
        );
        drop(held);
        assert_eq!(module.live_owners()(), library_before);
    }

    #[test]
    fn failures_in_the_library_name_the_operation_and_path() {
        let module = module();
        let err = read_whole(
            module,
            Path::new("/nonexistent/dsh-zero-copy"),
            Crossing::Copied,
        )
        .expect_err("missing");
        assert!(
            err.to_string()
                .starts_with("read /nonexistent/dsh-zero-copy: "),
            "{err}"
        );
        let err = read_chunks(
            module,
            Path::new("/nonexistent/dsh-zero-copy"),
            Crossing::FfiBytes,
        )
        .expect_err("missing");
        assert!(
            err.to_string()
                .starts_with("open /nonexistent/dsh-zero-copy: "),
            "{err}"
        );
    }

    #[test]
    fn the_prototype_takes_only_quick() {
        let err = main_with_args(&["--full".to_owned()]).expect_err("unknown");
        assert_eq!(
            err.to_string(),
            "zero_copy: unexpected arguments [\"--full\"] (the only option is --quick)"
        );
    }
}
