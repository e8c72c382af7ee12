//! `repr(C)` mirrors of the `fs` seam's types, with conversions both ways.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use abi_stable::StableAbi;
use abi_stable::std_types::{ROption, RString, RVec};

use crate::ffi::bytes::FfiText;

use crate::fs::{
    DirEntry, Edit, EditOutcome, FileKind, Metadata, Resolved, TextFile, Version, WriteGuard,
};

#[repr(C)]
#[derive(StableAbi)]
pub struct FfiResolved {
    pub path: RString,
    pub uri: RString,
}

impl From<Resolved> for FfiResolved {
    fn from(value: Resolved) -> Self {
        FfiResolved {
            path: value.path.into(),
            uri: value.uri.into(),
        }
    }
}

impl From<FfiResolved> for Resolved {
    fn from(value: FfiResolved) -> Self {
        Resolved {
            path: value.path.into(),
            uri: value.uri.into(),
        }
    }
}

#[repr(u8)]
#[derive(StableAbi, Clone, Copy)]
pub enum FfiFileKind {
    File,
    Directory,
    Symlink,
    Other,
}

impl From<FileKind> for FfiFileKind {
    fn from(value: FileKind) -> Self {
        match value {
            FileKind::File => FfiFileKind::File,
            FileKind::Directory => FfiFileKind::Directory,
            FileKind::Symlink => FfiFileKind::Symlink,
            FileKind::Other => FfiFileKind::Other,
        }
    }
}

impl From<FfiFileKind> for FileKind {
    fn from(value: FfiFileKind) -> Self {
        match value {
            FfiFileKind::File => FileKind::File,
            FfiFileKind::Directory => FileKind::Directory,
            FfiFileKind::Symlink => FileKind::Symlink,
            FfiFileKind::Other => FileKind::Other,
        }
    }
}

/// A point in time as signed seconds and nanoseconds since the Unix epoch
/// (times before 1970 are valid file times).
#[repr(C)]
#[derive(StableAbi, Clone, Copy)]
pub struct FfiTime {
    pub seconds: i64,
    pub nanos: u32,
}

impl From<SystemTime> for FfiTime {
    fn from(value: SystemTime) -> Self {
        match value.duration_since(UNIX_EPOCH) {
            Ok(after) => FfiTime {
                seconds: i64::try_from(after.as_secs()).unwrap_or(i64::MAX),
                nanos: after.subsec_nanos(),
            },
            Err(before) => {
                // Express as floor seconds plus a non-negative nanosecond part.
                let before = before.duration();
                let mut seconds = -i64::try_from(before.as_secs()).unwrap_or(i64::MAX);
                let mut nanos = before.subsec_nanos();
                if nanos > 0 {
                    seconds -= 1;
                    nanos = 1_000_000_000 - nanos;
                }
                FfiTime { seconds, nanos }
            }
        }
    }
}

impl From<FfiTime> for SystemTime {
    fn from(value: FfiTime) -> Self {
        let nanos = Duration::from_nanos(u64::from(value.nanos));
        if value.seconds >= 0 {
            UNIX_EPOCH + Duration::from_secs(value.seconds.unsigned_abs()) + nanos
        } else {
            UNIX_EPOCH - Duration::from_secs(value.seconds.unsigned_abs()) + nanos
        }
    }
}

#[repr(C)]
#[derive(StableAbi)]
pub struct FfiMetadata {
    pub kind: FfiFileKind,
    pub size: u64,
    pub mode: u32,
    pub modified: FfiTime,
    pub symlink_target: ROption<RString>,
    pub version: RString,
}

impl From<Metadata> for FfiMetadata {
    fn from(value: Metadata) -> Self {
        FfiMetadata {
            kind: value.kind.into(),
            size: value.size,
            mode: value.mode,
            modified: value.modified.into(),
            symlink_target: value.symlink_target.map(RString::from).into(),
            version: value.version.0.into(),
        }
    }
}

impl From<FfiMetadata> for Metadata {
    fn from(value: FfiMetadata) -> Self {
        Metadata {
            kind: value.kind.into(),
            size: value.size,
            mode: value.mode,
            modified: value.modified.into(),
            symlink_target: value.symlink_target.into_option().map(String::from),
            version: Version(value.version.into()),
        }
    }
}

#[repr(C)]
#[derive(StableAbi)]
pub struct FfiDirEntry {
    pub name: RString,
    pub path: RString,
    pub metadata: FfiMetadata,
    pub resolved: ROption<FfiMetadata>,
}

impl From<DirEntry> for FfiDirEntry {
    fn from(value: DirEntry) -> Self {
        FfiDirEntry {
            name: value.name.into(),
            path: value.path.into(),
            metadata: value.metadata.into(),
            resolved: value.resolved.map(FfiMetadata::from).into(),
        }
    }
}

impl From<FfiDirEntry> for DirEntry {
    fn from(value: FfiDirEntry) -> Self {
        DirEntry {
            name: value.name.into(),
            path: value.path.into(),
            metadata: value.metadata.into(),
            resolved: value.resolved.into_option().map(Metadata::from),
        }
    }
}

/// A directory listing (a newtype so both conversions are `From`).
#[repr(transparent)]
#[derive(StableAbi)]
pub struct FfiListing(pub RVec<FfiDirEntry>);

impl From<Vec<DirEntry>> for FfiListing {
    fn from(value: Vec<DirEntry>) -> Self {
        FfiListing(value.into_iter().map(FfiDirEntry::from).collect())
    }
}

impl From<FfiListing> for Vec<DirEntry> {
    fn from(value: FfiListing) -> Self {
        value.0.into_iter().map(DirEntry::from).collect()
    }
}

#[repr(C)]
#[derive(StableAbi)]
pub struct FfiTextFile {
    pub text: FfiText,
    pub version: RString,
}

impl From<TextFile> for FfiTextFile {
    fn from(value: TextFile) -> Self {
        FfiTextFile {
            text: FfiText::from_text(value.text),
            version: value.version.0.into(),
        }
    }
}

impl From<FfiTextFile> for TextFile {
    fn from(value: FfiTextFile) -> Self {
        TextFile {
            text: value.text.into_text(),
            version: Version(value.version.into()),
        }
    }
}

/// A version as it crosses (a newtype so both conversions are `From`).
#[repr(transparent)]
#[derive(StableAbi)]
pub struct FfiVersion(pub RString);

impl From<Version> for FfiVersion {
    fn from(value: Version) -> Self {
        FfiVersion(value.0.into())
    }
}

impl From<FfiVersion> for Version {
    fn from(value: FfiVersion) -> Self {
        Version(value.0.into())
    }
}

#[repr(C, u8)]
#[derive(StableAbi)]
pub enum FfiWriteGuard {
    Overwrite,
    CreateNew,
    IfVersion(RString),
}

impl From<WriteGuard> for FfiWriteGuard {
    fn from(value: WriteGuard) -> Self {
        match value {
            WriteGuard::Overwrite => FfiWriteGuard::Overwrite,
            WriteGuard::CreateNew => FfiWriteGuard::CreateNew,
            WriteGuard::IfVersion(version) => FfiWriteGuard::IfVersion(version.0.into()),
        }
    }
}

impl From<FfiWriteGuard> for WriteGuard {
    fn from(value: FfiWriteGuard) -> Self {
        match value {
            FfiWriteGuard::Overwrite => WriteGuard::Overwrite,
            FfiWriteGuard::CreateNew => WriteGuard::CreateNew,
            FfiWriteGuard::IfVersion(version) => WriteGuard::IfVersion(Version(version.into())),
        }
    }
}

#[repr(C)]
#[derive(StableAbi)]
pub struct FfiEdit {
    pub old: RString,
    pub new: RString,
    pub replace_all: bool,
}

impl From<Edit> for FfiEdit {
    fn from(value: Edit) -> Self {
        FfiEdit {
            old: value.old.into(),
            new: value.new.into(),
            replace_all: value.replace_all,
        }
    }
}

impl From<FfiEdit> for Edit {
    fn from(value: FfiEdit) -> Self {
        Edit {
            old: value.old.into(),
            new: value.new.into(),
            replace_all: value.replace_all,
        }
    }
}

#[repr(C)]
#[derive(StableAbi)]
pub struct FfiEditOutcome {
    pub version: RString,
    pub replacements: u64,
}

impl From<EditOutcome> for FfiEditOutcome {
    fn from(value: EditOutcome) -> Self {
        FfiEditOutcome {
            version: value.version.0.into(),
            replacements: value.replacements as u64,
        }
    }
}

impl From<FfiEditOutcome> for EditOutcome {
    fn from(value: FfiEditOutcome) -> Self {
        EditOutcome {
            version: Version(value.version.into()),
            replacements: usize::try_from(value.replacements).unwrap_or(usize::MAX),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metadata(kind: FileKind, modified: SystemTime) -> Metadata {
        Metadata {
            kind,
            size: 42,
            mode: 0o640,
            modified,
            symlink_target: (kind == FileKind::Symlink).then(|| "../t".to_owned()),
            version: Version("v1".into()),
        }
    }

    #[test]
    fn metadata_round_trips_including_times_before_the_epoch() {
        let times = [
            UNIX_EPOCH,
            UNIX_EPOCH + Duration::new(1_700_000_000, 123_456_789),
            UNIX_EPOCH - Duration::new(5, 250_000_000),
            UNIX_EPOCH - Duration::from_secs(86_400),
        ];
        for kind in [
            FileKind::File,
            FileKind::Directory,
            FileKind::Symlink,
            FileKind::Other,
        ] {
            for time in times {
                let value = metadata(kind, time);
                assert_eq!(Metadata::from(FfiMetadata::from(value.clone())), value);
            }
        }
    }

    #[test]
    fn listings_guards_and_edits_round_trip() {
        let entry = DirEntry {
            name: "l\nnk".into(),
            path: "/d/l\nnk".into(),
            metadata: metadata(FileKind::Symlink, UNIX_EPOCH),
            resolved: Some(metadata(FileKind::File, UNIX_EPOCH)),
        };
        let listing = vec![
            entry.clone(),
            DirEntry {
                resolved: None,
                ..entry
            },
        ];
        assert_eq!(
            Vec::<DirEntry>::from(FfiListing::from(listing.clone())),
            listing
        );
        for guard in [
            WriteGuard::Overwrite,
            WriteGuard::CreateNew,
            WriteGuard::IfVersion(Version("7".into())),
        ] {
            assert_eq!(WriteGuard::from(FfiWriteGuard::from(guard.clone())), guard);
        }
        let edit = Edit {
            old: "a".into(),
            new: "ü".into(),
            replace_all: true,
        };
        assert_eq!(Edit::from(FfiEdit::from(edit.clone())), edit);
        let outcome = EditOutcome {
            version: Version("9".into()),
            replacements: 3,
        };
        assert_eq!(
            EditOutcome::from(FfiEditOutcome::from(outcome.clone())),
            outcome
        );
    }
}
