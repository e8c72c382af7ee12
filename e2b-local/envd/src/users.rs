//! Users and groups, read from `/etc/passwd` and `/etc/group` on every lookup (no NSS, no cache)
//! so that users created inside the sandbox are visible at once.

use std::collections::HashMap;
use std::io;
use std::path::PathBuf;

/// A Linux user as envd needs it to run commands and own files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct User {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    pub home: PathBuf,
}

/// Where the user database lives (`/etc` in production; a temp dir in unit tests).
#[derive(Debug, Clone)]
pub(crate) struct UserDb {
    etc: PathBuf,
}

impl Default for UserDb {
    fn default() -> Self {
        Self {
            etc: PathBuf::from("/etc"),
        }
    }
}

/// Why a user could not be resolved.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LookupError {
    #[error("user: unknown user {0}")]
    Unknown(String),
    #[error("read {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl UserDb {
    #[cfg(test)]
    pub(crate) fn at(etc: impl Into<PathBuf>) -> Self {
        Self { etc: etc.into() }
    }

    fn read(&self, file: &str) -> Result<String, LookupError> {
        let path = self.etc.join(file);
        match std::fs::read(&path) {
            Ok(bytes) => Ok(String::from_utf8_lossy(&bytes).into_owned()),
            // A missing group file just means "no supplementary groups".
            Err(err) if err.kind() == io::ErrorKind::NotFound && file == "group" => {
                Ok(String::new())
            }
            Err(source) => Err(LookupError::Io { path, source }),
        }
    }

    /// The passwd entry named `name`.
    pub(crate) fn user(&self, name: &str) -> Result<User, LookupError> {
        let passwd = self.read("passwd")?;
        passwd_entries(&passwd)
            .find(|user| user.name == name)
            .ok_or_else(|| LookupError::Unknown(name.to_owned()))
    }

    /// The user's primary group followed by every group listing the user as a member (what
    /// `initgroups` would give), without duplicates.
    pub(crate) fn groups(&self, user: &User) -> Result<Vec<u32>, LookupError> {
        let group = self.read("group")?;
        let mut gids = vec![user.gid];
        for line in group.lines() {
            let fields: Vec<&str> = line.split(':').collect();
            if fields.len() < 4 || line.starts_with('#') {
                continue;
            }
            let Ok(gid) = fields[2].parse::<u32>() else {
                continue;
            };
            if fields[3].split(',').any(|member| member == user.name) && !gids.contains(&gid) {
                gids.push(gid);
            }
        }
        Ok(gids)
    }

    /// Snapshot of uid → user name and gid → group name, for rendering file owners.
    pub(crate) fn names(&self) -> OwnerNames {
        let users = self
            .read("passwd")
            .map(|passwd| {
                passwd_entries(&passwd)
                    .map(|user| (user.uid, user.name))
                    .fold(HashMap::new(), |mut map, (uid, name)| {
                        map.entry(uid).or_insert(name);
                        map
                    })
            })
            .unwrap_or_default();
        let groups = self
            .read("group")
            .map(|group| {
                let mut map = HashMap::new();
                for line in group.lines() {
                    let fields: Vec<&str> = line.split(':').collect();
                    if fields.len() >= 3
                        && !line.starts_with('#')
                        && let Ok(gid) = fields[2].parse::<u32>()
                    {
                        map.entry(gid).or_insert_with(|| fields[0].to_owned());
                    }
                }
                map
            })
            .unwrap_or_default();
        OwnerNames { users, groups }
    }
}

fn passwd_entries(passwd: &str) -> impl Iterator<Item = User> + '_ {
    passwd.lines().filter_map(|line| {
        if line.starts_with('#') {
            return None;
        }
        let fields: Vec<&str> = line.split(':').collect();
        if fields.len() < 7 {
            return None;
        }
        Some(User {
            name: fields[0].to_owned(),
            uid: fields[2].parse().ok()?,
            gid: fields[3].parse().ok()?,
            home: PathBuf::from(fields[5]),
        })
    })
}

/// uid/gid → name tables; unknown ids render as their decimal number, as envd does.
#[derive(Debug, Clone, Default)]
pub(crate) struct OwnerNames {
    users: HashMap<u32, String>,
    groups: HashMap<u32, String>,
}

impl OwnerNames {
    pub(crate) fn user(&self, uid: u32) -> String {
        self.users
            .get(&uid)
            .cloned()
            .unwrap_or_else(|| uid.to_string())
    }

    pub(crate) fn group(&self, gid: u32) -> String {
        self.groups
            .get(&gid)
            .cloned()
            .unwrap_or_else(|| gid.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db() -> (tempfile::TempDir, UserDb) {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(
            dir.path().join("passwd"),
            "# comment\nroot:x:0:0:root:/root:/bin/bash\nuser:x:1000:1000::/home/user:/bin/bash\nbroken line\nalias:x:1000:1000::/x:/bin/sh\n",
        )
        .expect("write passwd");
        std::fs::write(
            dir.path().join("group"),
            "root:x:0:\nuser:x:1000:\nsudo:x:27:user,other\ndocker:x:999:other\n",
        )
        .expect("write group");
        let db = UserDb::at(dir.path());
        (dir, db)
    }

    #[test]
    fn looks_up_users_and_their_groups() {
        let (_dir, db) = db();
        let user = db.user("user").expect("user exists");
        assert_eq!(user.uid, 1000);
        assert_eq!(user.home, PathBuf::from("/home/user"));
        assert_eq!(db.groups(&user).expect("groups"), vec![1000, 27]);
        assert!(matches!(
            db.user("nobody-here"),
            Err(LookupError::Unknown(_))
        ));
        assert_eq!(
            db.user("ghost").unwrap_err().to_string(),
            "user: unknown user ghost"
        );
    }

    #[test]
    fn owner_names_fall_back_to_numbers_and_prefer_the_first_entry() {
        let (_dir, db) = db();
        let names = db.names();
        assert_eq!(names.user(1000), "user");
        assert_eq!(names.user(4242), "4242");
        assert_eq!(names.group(27), "sudo");
        assert_eq!(names.group(5), "5");
    }
}
