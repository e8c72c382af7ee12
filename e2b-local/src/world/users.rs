//! The sandbox's `user` account (uid/gid 1000, home `/home/user`), installed into the sandbox's
//! copy of `/etc` only. Any other account holding uid/gid 1000 or the names `user` is removed
//! there (this host has `cloudsdk` at 1000), so names and ids map one to one inside.

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

pub const USER: &str = "user";
pub const UID: u32 = 1000;
pub const GID: u32 = 1000;
pub const HOME: &str = "/home/user";
const SHELL: &str = "/bin/bash";
const SUDOERS_FILE: &str = "etc/sudoers.d/e2b-local-user";

/// Rewrites `passwd`, `group`, `shadow` and `gshadow` under `root/etc` and, when sudo is
/// installed (`/etc/sudoers.d` exists), grants `user` passwordless sudo.
pub fn install(root: &Path) -> io::Result<()> {
    let etc = root.join("etc");
    let passwd_path = etc.join("passwd");
    let passwd = read(&passwd_path)?;
    let (passwd, removed_users) = fix_passwd(&passwd);
    write(&passwd_path, &passwd, 0o644)?;

    let group_path = etc.join("group");
    let group = read(&group_path)?;
    let (group, removed_groups) = fix_group(&group);
    write(&group_path, &group, 0o644)?;

    let shadow_path = etc.join("shadow");
    if shadow_path.exists() {
        let shadow = read(&shadow_path)?;
        write(
            &shadow_path,
            &fix_shadow(&shadow, &removed_users, "*"),
            0o640,
        )?;
    }
    let gshadow_path = etc.join("gshadow");
    if gshadow_path.exists() {
        let gshadow = read(&gshadow_path)?;
        write(
            &gshadow_path,
            &fix_shadow(&gshadow, &removed_groups, "!"),
            0o640,
        )?;
    }
    if etc.join("sudoers.d").is_dir() {
        write(
            &root.join(SUDOERS_FILE),
            &format!("{USER} ALL=(ALL:ALL) NOPASSWD: ALL\n"),
            0o440,
        )?;
    }
    Ok(())
}

/// Drops entries named `user` or with uid 1000, appends `user`. Returns the new text and the
/// names removed (their shadow entries go too).
pub fn fix_passwd(text: &str) -> (String, Vec<String>) {
    fix_table(text, UID, &format!("{USER}:x:{UID}:{GID}::{HOME}:{SHELL}"))
}

/// Same for groups: drops `user` and gid 1000, appends `user:x:1000:`.
pub fn fix_group(text: &str) -> (String, Vec<String>) {
    fix_table(text, GID, &format!("{USER}:x:{GID}:"))
}

fn fix_table(text: &str, id: u32, entry: &str) -> (String, Vec<String>) {
    let mut out = String::with_capacity(text.len() + entry.len() + 1);
    let mut removed = Vec::new();
    for line in text.lines() {
        let mut fields = line.split(':');
        let name = fields.next().unwrap_or("");
        let line_id = fields.nth(1).and_then(|f| f.parse::<u32>().ok());
        if name == USER || line_id == Some(id) {
            removed.push(name.to_owned());
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out.push_str(entry);
    out.push('\n');
    (out, removed)
}

/// Drops shadow entries of removed names and of `user`, appends `user` with `password`.
pub fn fix_shadow(text: &str, removed: &[String], password: &str) -> String {
    let mut out = String::with_capacity(text.len() + 32);
    for line in text.lines() {
        let mut fields = line.splitn(3, ':');
        let name = fields.next().unwrap_or("");
        if name == USER || removed.iter().any(|r| r == name) {
            continue;
        }
        // The host's password hashes never enter a sandbox: every account is locked there
        // (`user` needs none: its sudo is passwordless).
        let _hash = fields.next();
        match fields.next() {
            Some(rest) => out.push_str(&format!("{name}:{password}:{rest}")),
            None => out.push_str(line),
        }
        out.push('\n');
    }
    if password == "*" {
        out.push_str(&format!("{USER}:*:19000:0:99999:7:::\n"));
    } else {
        out.push_str(&format!("{USER}:{password}::\n"));
    }
    out
}

fn read(path: &Path) -> io::Result<String> {
    std::fs::read_to_string(path)
        .map_err(|e| io::Error::new(e.kind(), format!("read {}: {e}", path.display())))
}

fn write(path: &Path, text: &str, mode: u32) -> io::Result<()> {
    let ctx = |e: io::Error| io::Error::new(e.kind(), format!("write {}: {e}", path.display()));
    std::fs::write(path, text).map_err(ctx)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(ctx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_the_host_uid_1000_account() {
        let passwd =
            "root:x:0:0:root:/root:/bin/bash\ncloudsdk:x:1000:1000::/home/cloudsdk:/bin/bash\n";
        let (out, removed) = fix_passwd(passwd);
        assert_eq!(removed, vec!["cloudsdk".to_owned()]);
        assert_eq!(
            out,
            "root:x:0:0:root:/root:/bin/bash\nuser:x:1000:1000::/home/user:/bin/bash\n"
        );
    }

    #[test]
    fn replaces_an_existing_user_entry_with_another_uid() {
        let (out, removed) = fix_passwd("user:x:1001:1001::/home/u:/bin/sh\n");
        assert_eq!(removed, vec!["user".to_owned()]);
        assert_eq!(out, "user:x:1000:1000::/home/user:/bin/bash\n");
    }

    #[test]
    fn groups_and_shadow_follow() {
        let (group, removed) = fix_group("root:x:0:\nsudo:x:27:cloudsdk\ncloudsdk:x:1000:\n");
        assert_eq!(group, "root:x:0:\nsudo:x:27:cloudsdk\nuser:x:1000:\n");
        let shadow = fix_shadow(
            "root:$6$salt$hash:1::::::\ncloudsdk:!:1::::::\ndaemon:*:1::::::\n",
            &removed,
            "*",
        );
        assert_eq!(
            shadow, "root:*:1::::::\ndaemon:*:1::::::\nuser:*:19000:0:99999:7:::\n",
            "the host's hash is gone"
        );
    }

    #[test]
    fn install_writes_a_world_with_user_and_sudoers() {
        let root = tempfile::tempdir().unwrap();
        let etc = root.path().join("etc");
        std::fs::create_dir_all(etc.join("sudoers.d")).unwrap();
        std::fs::write(etc.join("passwd"), "root:x:0:0::/root:/bin/bash\n").unwrap();
        std::fs::write(etc.join("group"), "root:x:0:\n").unwrap();
        install(root.path()).unwrap();
        assert!(
            std::fs::read_to_string(etc.join("passwd"))
                .unwrap()
                .contains("user:x:1000:1000::/home/user")
        );
        let sudoers = etc.join("sudoers.d/e2b-local-user");
        assert_eq!(
            std::fs::read_to_string(&sudoers).unwrap(),
            "user ALL=(ALL:ALL) NOPASSWD: ALL\n"
        );
        assert_eq!(
            std::fs::metadata(&sudoers).unwrap().permissions().mode() & 0o777,
            0o440
        );
    }

    #[test]
    fn install_names_a_missing_passwd() {
        let root = tempfile::tempdir().unwrap();
        let err = install(root.path()).unwrap_err();
        assert!(
            err.to_string().contains("read ") && err.to_string().contains("etc/passwd"),
            "{err}"
        );
    }
}
