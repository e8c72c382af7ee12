//! Each boot of a world gets a boot id of its own, as each boot of E2B's VMs does:
//! `/proc/sys/kernel/random/boot_id` inside shows a random UUID made when the world's init starts
//! (a files-only pause's reboot makes another), not the host's. Clients tell a reboot from a
//! resume by it (the SDKs' suites do).

use std::io::{self, Read};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Writes a new random (version 4) UUID, as the kernel formats boot ids, to `path`, readable by
/// everyone.
pub fn write_new(path: &Path) -> io::Result<()> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut random| random.read_exact(&mut bytes))
        .map_err(|e| io::Error::new(e.kind(), format!("read /dev/urandom for a boot id: {e}")))?;
    let ctx = |e: io::Error| io::Error::new(e.kind(), format!("write {}: {e}", path.display()));
    std::fs::write(path, format!("{}\n", uuid_v4(bytes))).map_err(ctx)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o444)).map_err(ctx)
}

/// `bytes` as a version 4, variant 1 UUID in lowercase hex groups 8-4-4-4-12.
fn uuid_v4(mut bytes: [u8; 16]) -> String {
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boot_ids_are_version_4_uuids() {
        assert_eq!(uuid_v4([0xff; 16]), "ffffffff-ffff-4fff-bfff-ffffffffffff");
        assert_eq!(uuid_v4([0; 16]), "00000000-0000-4000-8000-000000000000");
    }
}
