//! Each boot of a world gets a boot id of its own, as each boot of E2B's VMs does:
//! `/proc/sys/kernel/random/boot_id` inside shows a random UUID made when the world's init starts
//! (a files-only pause's reboot makes another), not the host's. Clients tell a reboot from a
//! resume by it (the SDKs' suites do).

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Writes a new random boot id (a version 4 UUID, as the kernel's) to `path`, readable by everyone.
pub fn write_new(path: &Path) -> io::Result<()> {
    let ctx = |e: io::Error| io::Error::new(e.kind(), format!("write {}: {e}", path.display()));
    std::fs::write(path, format!("{}\n", crate::ids::uuid_v4())).map_err(ctx)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o444)).map_err(ctx)
}
