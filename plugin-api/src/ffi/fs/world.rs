//! `repr(C)` mirrors of the `fs` seam's world-side types (walk, search,
//! read_many), with conversions both ways, and their streams' chunk types.

use abi_stable::StableAbi;
use abi_stable::std_types::{RBox, ROption, RString, RVec};

use super::types::{FfiMetadata, FfiTextFile};
use crate::ffi::error::{FfiResult, lift, lower};
use crate::ffi::stream::{ChunkType, FfiStream_TO};
use crate::fs::{
    ReadManyItem, ReadManyLimits, SearchEvent, SearchLimit, SearchLimits, SearchLine, SearchMode,
    SearchSpec, SearchSummary, WalkEntry, WalkEvent, WalkSpec, WalkSummary,
};

/// A walk's events as they cross.
pub type FfiWalkStream = FfiStream_TO<'static, RBox<()>, FfiWalkEvent>;
/// A search's events as they cross.
pub type FfiSearchStream = FfiStream_TO<'static, RBox<()>, FfiSearchEvent>;

fn strings(values: Vec<String>) -> RVec<RString> {
    values.into_iter().map(RString::from).collect()
}

fn plain_strings(values: RVec<RString>) -> Vec<String> {
    values.into_iter().map(String::from).collect()
}

#[repr(C)]
#[derive(StableAbi)]
pub struct FfiWalkSpec {
    pub max_depth: u32,
    pub max_entries: u64,
    pub globs: RVec<RString>,
    pub gitignore: bool,
    pub beneath: bool,
}

impl From<WalkSpec> for FfiWalkSpec {
    fn from(value: WalkSpec) -> Self {
        FfiWalkSpec {
            max_depth: value.max_depth,
            max_entries: value.max_entries,
            globs: strings(value.globs),
            gitignore: value.gitignore,
            beneath: value.beneath,
        }
    }
}

impl From<FfiWalkSpec> for WalkSpec {
    fn from(value: FfiWalkSpec) -> Self {
        WalkSpec {
            max_depth: value.max_depth,
            max_entries: value.max_entries,
            globs: plain_strings(value.globs),
            gitignore: value.gitignore,
            beneath: value.beneath,
        }
    }
}

#[repr(C)]
#[derive(StableAbi, Clone, Copy)]
pub struct FfiWalkSummary {
    pub complete: bool,
    pub ignored: u64,
    pub unreadable: u64,
}

#[repr(C, u8)]
#[derive(StableAbi)]
pub enum FfiWalkEvent {
    Entry {
        relative: RString,
        path: RString,
        depth: u32,
        metadata: FfiMetadata,
    },
    End(FfiWalkSummary),
}

impl From<WalkEvent> for FfiWalkEvent {
    fn from(value: WalkEvent) -> Self {
        match value {
            WalkEvent::Entry(entry) => FfiWalkEvent::Entry {
                relative: entry.relative.into(),
                path: entry.path.into(),
                depth: entry.depth,
                metadata: entry.metadata.into(),
            },
            WalkEvent::End(summary) => FfiWalkEvent::End(FfiWalkSummary {
                complete: summary.complete,
                ignored: summary.ignored,
                unreadable: summary.unreadable,
            }),
        }
    }
}

impl From<FfiWalkEvent> for WalkEvent {
    fn from(value: FfiWalkEvent) -> Self {
        match value {
            FfiWalkEvent::Entry {
                relative,
                path,
                depth,
                metadata,
            } => WalkEvent::Entry(WalkEntry {
                relative: relative.into(),
                path: path.into(),
                depth,
                metadata: metadata.into(),
            }),
            FfiWalkEvent::End(summary) => WalkEvent::End(WalkSummary {
                complete: summary.complete,
                ignored: summary.ignored,
                unreadable: summary.unreadable,
            }),
        }
    }
}

impl ChunkType for FfiWalkEvent {
    type Plain = WalkEvent;
    fn from_plain(plain: WalkEvent) -> Self {
        plain.into()
    }
    fn into_plain(self) -> WalkEvent {
        self.into()
    }
}

#[repr(C, u8)]
#[derive(StableAbi, Clone, Copy)]
pub enum FfiSearchMode {
    Lines { context: u32 },
    FilesWithMatches,
    Count,
}

#[repr(C)]
#[derive(StableAbi, Clone, Copy)]
pub struct FfiSearchLimits {
    pub max_matches: u64,
    pub max_bytes_scanned: u64,
    pub max_files: u64,
    pub max_output_bytes: u64,
    pub max_entries: u64,
    pub max_line_chars: u32,
}

#[repr(C)]
#[derive(StableAbi)]
pub struct FfiSearchSpec {
    pub pattern: RString,
    pub case_insensitive: bool,
    pub mode: FfiSearchMode,
    pub globs: RVec<RString>,
    pub types: RVec<RString>,
    pub gitignore: bool,
    pub max_depth: u32,
    pub beneath: bool,
    pub limits: FfiSearchLimits,
}

impl From<SearchSpec> for FfiSearchSpec {
    fn from(value: SearchSpec) -> Self {
        let limits = value.limits;
        FfiSearchSpec {
            pattern: value.pattern.into(),
            case_insensitive: value.case_insensitive,
            mode: match value.mode {
                SearchMode::Lines { context } => FfiSearchMode::Lines { context },
                SearchMode::FilesWithMatches => FfiSearchMode::FilesWithMatches,
                SearchMode::Count => FfiSearchMode::Count,
            },
            globs: strings(value.globs),
            types: strings(value.types),
            gitignore: value.gitignore,
            max_depth: value.max_depth,
            beneath: value.beneath,
            limits: FfiSearchLimits {
                max_matches: limits.max_matches,
                max_bytes_scanned: limits.max_bytes_scanned,
                max_files: limits.max_files,
                max_output_bytes: limits.max_output_bytes,
                max_entries: limits.max_entries,
                max_line_chars: limits.max_line_chars,
            },
        }
    }
}

impl From<FfiSearchSpec> for SearchSpec {
    fn from(value: FfiSearchSpec) -> Self {
        let limits = value.limits;
        SearchSpec {
            pattern: value.pattern.into(),
            case_insensitive: value.case_insensitive,
            mode: match value.mode {
                FfiSearchMode::Lines { context } => SearchMode::Lines { context },
                FfiSearchMode::FilesWithMatches => SearchMode::FilesWithMatches,
                FfiSearchMode::Count => SearchMode::Count,
            },
            globs: plain_strings(value.globs),
            types: plain_strings(value.types),
            gitignore: value.gitignore,
            max_depth: value.max_depth,
            beneath: value.beneath,
            limits: SearchLimits {
                max_matches: limits.max_matches,
                max_bytes_scanned: limits.max_bytes_scanned,
                max_files: limits.max_files,
                max_output_bytes: limits.max_output_bytes,
                max_entries: limits.max_entries,
                max_line_chars: limits.max_line_chars,
            },
        }
    }
}

#[repr(u8)]
#[derive(StableAbi, Clone, Copy)]
pub enum FfiSearchLimit {
    Matches,
    OutputBytes,
    BytesScanned,
    Files,
    Entries,
}

#[repr(C)]
#[derive(StableAbi, Clone, Copy)]
pub struct FfiSearchSummary {
    pub files_searched: u64,
    pub files_skipped: u64,
    pub ignored: u64,
    pub stopped_by: ROption<FfiSearchLimit>,
}

#[repr(C, u8)]
#[derive(StableAbi)]
pub enum FfiSearchEvent {
    Line {
        path: RString,
        line: u64,
        text: RString,
        offset: u64,
        len: u64,
        context: bool,
    },
    File {
        path: RString,
        matches: u64,
    },
    End(FfiSearchSummary),
}

impl From<SearchEvent> for FfiSearchEvent {
    fn from(value: SearchEvent) -> Self {
        match value {
            SearchEvent::Line(line) => FfiSearchEvent::Line {
                path: line.path.into(),
                line: line.line,
                text: line.text.into(),
                offset: line.offset,
                len: line.len,
                context: line.context,
            },
            SearchEvent::File { path, matches } => FfiSearchEvent::File {
                path: path.into(),
                matches,
            },
            SearchEvent::End(summary) => FfiSearchEvent::End(FfiSearchSummary {
                files_searched: summary.files_searched,
                files_skipped: summary.files_skipped,
                ignored: summary.ignored,
                stopped_by: summary
                    .stopped_by
                    .map(|limit| match limit {
                        SearchLimit::Matches => FfiSearchLimit::Matches,
                        SearchLimit::OutputBytes => FfiSearchLimit::OutputBytes,
                        SearchLimit::BytesScanned => FfiSearchLimit::BytesScanned,
                        SearchLimit::Files => FfiSearchLimit::Files,
                        SearchLimit::Entries => FfiSearchLimit::Entries,
                    })
                    .into(),
            }),
        }
    }
}

impl From<FfiSearchEvent> for SearchEvent {
    fn from(value: FfiSearchEvent) -> Self {
        match value {
            FfiSearchEvent::Line {
                path,
                line,
                text,
                offset,
                len,
                context,
            } => SearchEvent::Line(SearchLine {
                path: path.into(),
                line,
                text: text.into(),
                offset,
                len,
                context,
            }),
            FfiSearchEvent::File { path, matches } => SearchEvent::File {
                path: path.into(),
                matches,
            },
            FfiSearchEvent::End(summary) => SearchEvent::End(SearchSummary {
                files_searched: summary.files_searched,
                files_skipped: summary.files_skipped,
                ignored: summary.ignored,
                stopped_by: summary.stopped_by.into_option().map(|limit| match limit {
                    FfiSearchLimit::Matches => SearchLimit::Matches,
                    FfiSearchLimit::OutputBytes => SearchLimit::OutputBytes,
                    FfiSearchLimit::BytesScanned => SearchLimit::BytesScanned,
                    FfiSearchLimit::Files => SearchLimit::Files,
                    FfiSearchLimit::Entries => SearchLimit::Entries,
                }),
            }),
        }
    }
}

impl ChunkType for FfiSearchEvent {
    type Plain = SearchEvent;
    fn from_plain(plain: SearchEvent) -> Self {
        plain.into()
    }
    fn into_plain(self) -> SearchEvent {
        self.into()
    }
}

#[repr(C)]
#[derive(StableAbi)]
pub struct FfiReadManyLimits {
    pub max_file_bytes: u64,
    pub max_total_bytes: u64,
    pub beneath: ROption<RString>,
}

impl From<ReadManyLimits> for FfiReadManyLimits {
    fn from(value: ReadManyLimits) -> Self {
        FfiReadManyLimits {
            max_file_bytes: value.max_file_bytes,
            max_total_bytes: value.max_total_bytes,
            beneath: value.beneath.map(RString::from).into(),
        }
    }
}

impl From<FfiReadManyLimits> for ReadManyLimits {
    fn from(value: FfiReadManyLimits) -> Self {
        ReadManyLimits {
            max_file_bytes: value.max_file_bytes,
            max_total_bytes: value.max_total_bytes,
            beneath: value.beneath.into_option().map(String::from),
        }
    }
}

#[repr(C)]
#[derive(StableAbi)]
pub struct FfiReadManyItem {
    pub path: RString,
    pub result: FfiResult<FfiTextFile>,
}

/// The files of one `read_many` (a newtype so both conversions are `From`).
#[repr(transparent)]
#[derive(StableAbi)]
pub struct FfiReadMany(pub RVec<FfiReadManyItem>);

impl From<Vec<ReadManyItem>> for FfiReadMany {
    fn from(value: Vec<ReadManyItem>) -> Self {
        FfiReadMany(
            value
                .into_iter()
                .map(|item| FfiReadManyItem {
                    path: item.path.into(),
                    result: lower(item.result),
                })
                .collect(),
        )
    }
}

impl From<FfiReadMany> for Vec<ReadManyItem> {
    fn from(value: FfiReadMany) -> Self {
        value
            .0
            .into_iter()
            .map(|item| ReadManyItem {
                path: item.path.into(),
                result: lift(item.result),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use super::*;
    use crate::Error;
    use crate::fs::{FileKind, Metadata, TextFile, Version};

    #[test]
    fn walk_search_and_read_many_values_round_trip() {
        let spec = WalkSpec {
            max_depth: 3,
            max_entries: 9,
            globs: vec!["*.rs".into(), "!target".into()],
            gitignore: true,
            beneath: true,
        };
        assert_eq!(WalkSpec::from(FfiWalkSpec::from(spec.clone())), spec);
        let entry = WalkEvent::Entry(WalkEntry {
            relative: "a/b\n".into(),
            path: "./a/b\n".into(),
            depth: 2,
            metadata: Metadata {
                kind: FileKind::Symlink,
                size: 3,
                mode: 0o777,
                modified: UNIX_EPOCH,
                symlink_target: Some("../x".into()),
                version: Version("v".into()),
            },
        });
        let end = WalkEvent::End(WalkSummary {
            complete: false,
            ignored: 4,
            unreadable: 1,
        });
        for event in [entry, end] {
            assert_eq!(WalkEvent::from(FfiWalkEvent::from(event.clone())), event);
        }
        for mode in [
            SearchMode::Lines { context: 2 },
            SearchMode::FilesWithMatches,
            SearchMode::Count,
        ] {
            let spec = SearchSpec {
                pattern: "fn \\w+".into(),
                case_insensitive: true,
                mode,
                globs: vec!["src/**".into()],
                types: vec!["rust".into()],
                gitignore: false,
                max_depth: 7,
                beneath: false,
                limits: SearchLimits {
                    max_matches: 1,
                    max_bytes_scanned: 2,
                    max_files: 3,
                    max_output_bytes: 4,
                    max_entries: 5,
                    max_line_chars: 6,
                },
            };
            assert_eq!(SearchSpec::from(FfiSearchSpec::from(spec.clone())), spec);
        }
        let mut events = vec![
            SearchEvent::Line(SearchLine {
                path: "p".into(),
                line: 7,
                text: "ü".into(),
                offset: 1,
                len: 9,
                context: true,
            }),
            SearchEvent::File {
                path: "q".into(),
                matches: 3,
            },
            SearchEvent::End(SearchSummary::default()),
        ];
        for limit in [
            SearchLimit::Matches,
            SearchLimit::OutputBytes,
            SearchLimit::BytesScanned,
            SearchLimit::Files,
            SearchLimit::Entries,
        ] {
            events.push(SearchEvent::End(SearchSummary {
                files_searched: 1,
                files_skipped: 2,
                ignored: 3,
                stopped_by: Some(limit),
            }));
        }
        for event in events {
            assert_eq!(
                SearchEvent::from(FfiSearchEvent::from(event.clone())),
                event
            );
        }
        let limits = ReadManyLimits {
            max_file_bytes: 1,
            max_total_bytes: 2,
            beneath: Some("/r".into()),
        };
        assert_eq!(
            ReadManyLimits::from(FfiReadManyLimits::from(limits.clone())),
            limits
        );
        let items = vec![
            ReadManyItem {
                path: "a".into(),
                result: Ok(TextFile {
                    text: "x".into(),
                    version: Version("1".into()),
                }),
            },
            ReadManyItem {
                path: "b".into(),
                result: Err(Error::not_found("read_text: gone").with_subject("b")),
            },
        ];
        assert_eq!(
            Vec::<ReadManyItem>::from(FfiReadMany::from(items.clone())),
            items
        );
    }
}
