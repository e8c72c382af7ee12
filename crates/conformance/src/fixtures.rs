//! Fixtures a case prepares in its directory: files through `fs` when it is
//! writable (else through a command), and what the `fs` seam cannot make —
//! symlinks, modes — through commands.

use dsh_plugin_api::fs::WriteGuard;
use futures::{StreamExt, TryStreamExt};

use crate::check::Failure;
use crate::commands::drain;
use crate::context::Cx;
use dsh_plugin_api::Bytes;

impl Cx {
    /// Creates (or replaces) the file `rel` in the case directory with
    /// `content`, through `fs` when it is writable, else through a command.
    /// Returns the absolute path.
    pub(crate) async fn put(
        &self,
        rel: &str,
        content: &[u8],
    ) -> std::result::Result<String, Failure> {
        let path = self.path(rel);
        if self.fs_writable {
            self.ok(
                &format!("fixture: write {path}"),
                self.fs().write(
                    &path,
                    Bytes::copy_from_slice(content),
                    WriteGuard::Overwrite,
                ),
            )
            .await?;
        } else {
            self.sh_ok_with_stdin(
                &format!("fixture: write {path}"),
                r#"mkdir -p -- "$(dirname -- "$1")" && cat > "$1""#,
                &[&path],
                content,
            )
            .await?;
        }
        Ok(path)
    }

    /// Creates every `(rel, content)` file as [`Cx::put`] does, up to 16 at
    /// a time: a remote provider answers each write in one round trip, and
    /// a case that needs hundreds of files must not spend its time budget
    /// on them one after another.
    pub(crate) async fn put_many(
        &self,
        files: impl IntoIterator<Item = (String, Vec<u8>)>,
    ) -> std::result::Result<(), Failure> {
        futures::stream::iter(files)
            .map(|(rel, content)| async move { self.put(&rel, &content).await })
            .buffer_unordered(16)
            .try_for_each(|_| async { Ok(()) })
            .await
    }

    /// Creates the directory `rel` (and parents) in the case directory.
    pub(crate) async fn mkdirs(&self, rel: &str) -> std::result::Result<String, Failure> {
        let path = self.path(rel);
        if self.fs_writable {
            self.ok(&format!("fixture: mkdir {path}"), self.fs().mkdir(&path))
                .await?;
        } else {
            self.sh_ok(
                &format!("fixture: mkdir {path}"),
                r#"mkdir -p -- "$1""#,
                &[&path],
            )
            .await?;
        }
        Ok(path)
    }

    /// Creates the symlink `rel` → `target` (stored exactly as given).
    /// Needs `Shell`: the fs seam has no symlink operation.
    pub(crate) async fn symlink(
        &self,
        target: &str,
        rel: &str,
    ) -> std::result::Result<String, Failure> {
        let path = self.path(rel);
        self.sh_ok(
            &format!("fixture: ln -s {target} {path}"),
            r#"mkdir -p -- "$(dirname -- "$2")" && ln -s -- "$1" "$2""#,
            &[target, &path],
        )
        .await?;
        Ok(path)
    }

    /// Sets the permission bits of the absolute `path` (needs `Shell`).
    pub(crate) async fn chmod(&self, path: &str, mode: u32) -> std::result::Result<(), Failure> {
        let mode = format!("{mode:o}");
        self.sh_ok(
            &format!("fixture: chmod {mode} {path}"),
            r#"chmod "$1" "$2""#,
            &[&mode, path],
        )
        .await?;
        Ok(())
    }

    /// Reads a whole file of the world: through `fs` when present (raw
    /// bytes), else with `cat`.
    pub(crate) async fn read_all(&self, path: &str) -> std::result::Result<Vec<u8>, Failure> {
        if self.has_fs() {
            let what = format!("read_bytes {path}");
            let stream = self.ok(&what, self.fs().read_bytes(path)).await?;
            self.ok(&what, drain(stream.chunks)).await
        } else {
            self.sh_ok(&format!("cat {path}"), r#"cat -- "$1""#, &[path])
                .await
        }
    }
}
