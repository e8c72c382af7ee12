//! Each world's host name (its own UTS namespace): the sandbox id, as a container runtime names a
//! container after its id, so `hostname` inside never tells the host's. The world's `/etc/hostname`
//! says it too, and `/etc/hosts` resolves it (to `127.0.1.1`, as Debian's installer does), since
//! `sudo` and others look their own host name up and would otherwise wait on DNS for seconds.

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Ends the `/etc/hosts` line this module writes, so a rebooted world or one made from a
/// snapshot or template replaces the line of the world it came from instead of adding another.
const HOSTS_MARK: &str = "# e2b-local: this sandbox's host name";

/// Writes `name` into the world's `/etc/hostname` and `/etc/hosts` under `root`, each only if
/// the world has it: a file its user deleted (and a snapshot or template kept deleted) stays
/// deleted. Run inside the world (after `pivot_root`): the world's root may have made them
/// symlinks.
pub fn write_files(root: &Path, name: &str) -> io::Result<()> {
    let etc = root.join("etc");
    let hostname_path = etc.join("hostname");
    if std::fs::symlink_metadata(&hostname_path).is_ok() {
        write(&hostname_path, &format!("{name}\n"))?;
    }
    let hosts_path = etc.join("hosts");
    match std::fs::read_to_string(&hosts_path) {
        Ok(hosts) => write(&hosts_path, &with_name(&hosts, name)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io::Error::new(
            e.kind(),
            format!("read {}: {e}", hosts_path.display()),
        )),
    }
}

/// `hosts` without an earlier marked line, with `name`'s.
fn with_name(hosts: &str, name: &str) -> String {
    let mut text: String = hosts
        .lines()
        .filter(|line| !line.ends_with(HOSTS_MARK))
        .flat_map(|line| [line, "\n"])
        .collect();
    text.push_str(&format!("127.0.1.1\t{name}\t{HOSTS_MARK}\n"));
    text
}

/// Sets the calling process's (the world's UTS namespace's) host name. Needs `SYS_ADMIN`.
pub fn set(name: &str) -> io::Result<()> {
    // SAFETY: sethostname(2) reads `len` bytes of `name`, valid for the call.
    if unsafe { libc::sethostname(name.as_ptr().cast(), name.len()) } != 0 {
        let err = io::Error::last_os_error();
        return Err(io::Error::new(
            err.kind(),
            format!("set the sandbox's host name to {name:?}: {err}"),
        ));
    }
    Ok(())
}

fn write(path: &Path, text: &str) -> io::Result<()> {
    let ctx = |e: io::Error| io::Error::new(e.kind(), format!("write {}: {e}", path.display()));
    std::fs::write(path, text).map_err(ctx)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).map_err(ctx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_name_line_is_added_once_and_replaces_an_earlier_worlds() {
        let host = "127.0.0.1\tlocalhost\n10.0.0.5\tbuild-box\n";
        let first = with_name(host, "iabc");
        assert_eq!(first, format!("{host}127.0.1.1\tiabc\t{HOSTS_MARK}\n"));
        let again = with_name(&first, "ixyz");
        assert_eq!(again, format!("{host}127.0.1.1\tixyz\t{HOSTS_MARK}\n"));
        assert_eq!(
            with_name("", "i1"),
            format!("127.0.1.1\ti1\t{HOSTS_MARK}\n")
        );
    }
}
