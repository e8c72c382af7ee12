//! The helper program, built by `build.rs` (static x86_64 Linux).

use crate::RUNTIME_ROOT;

/// The `dsh-supervisor` executable.
pub const HELPER: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/dsh-supervisor"));

/// [`HELPER`]'s BLAKE3 digest, hex, computed by the build script: what an
/// uploaded helper checks itself against before it runs anything, and what a
/// template's build checks its copy against (docs/design.md §6.4).
pub const HELPER_DIGEST: &str = include_str!(concat!(env!("OUT_DIR"), "/dsh-supervisor.blake3"));

/// The runtime root's entry where a sandbox template holds the helper:
/// `<RUNTIME_ROOT>/template/<BLAKE3>/dsh-supervisor`. The owner's sweep keeps
/// it, and its look for a ready runtime root accepts it.
pub const TEMPLATE_ENTRY: &str = "template";

/// Where a sandbox template holds [`HELPER`] (`dsh template` puts it there),
/// under the runtime root `runtime_root`. Inside the runtime root — root's,
/// mode 0700, under ancestors only root may write, verified by the owner
/// before it hands the sandbox out — only root can have put a file, so the
/// E2B providers run the copy without a look of their own. The digest in the
/// path means a template made for another build of dsh is simply not found
/// (docs/design.md §6.4).
pub fn template_path_in(runtime_root: &str) -> String {
    format!("{runtime_root}/{TEMPLATE_ENTRY}/{HELPER_DIGEST}/dsh-supervisor")
}

/// [`template_path_in`] the E2B owner's [`RUNTIME_ROOT`].
pub fn template_path() -> String {
    template_path_in(RUNTIME_ROOT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_template_path_names_the_digest() {
        assert_eq!(
            template_path(),
            format!("{RUNTIME_ROOT}/template/{HELPER_DIGEST}/dsh-supervisor")
        );
        assert_eq!(HELPER_DIGEST.len(), 64);
    }

    #[test]
    fn the_digest_is_of_the_embedded_helper() {
        assert_eq!(HELPER_DIGEST, blake3::hash(HELPER).to_hex().as_str());
        assert!(HELPER.len() > 100_000, "a real executable is embedded");
        assert_eq!(&HELPER[..4], b"\x7fELF");
    }

    #[test]
    fn the_embedded_helper_is_a_static_x86_64_executable() {
        // ELF64 little-endian: the machine at 0x12, program headers at
        // e_phoff (0x20), e_phnum (0x38) of e_phentsize (0x36) bytes each.
        // A PT_INTERP header (type 3) would name a dynamic loader, and so a
        // C library the sandbox may not have.
        let u16_at = |at: usize| usize::from(u16::from_le_bytes([HELPER[at], HELPER[at + 1]]));
        assert_eq!(HELPER[4], 2, "ELF64");
        assert_eq!(u16_at(0x12), 62, "x86_64");
        let table = u64::from_le_bytes(HELPER[0x20..0x28].try_into().expect("8 bytes")) as usize;
        let (size, count) = (u16_at(0x36), u16_at(0x38));
        let kinds: Vec<u32> = (0..count)
            .map(|i| {
                let at = table + i * size;
                u32::from_le_bytes(HELPER[at..at + 4].try_into().expect("4 bytes"))
            })
            .collect();
        assert!(kinds.contains(&1), "loadable segments: {kinds:?}");
        assert!(
            !kinds.contains(&3),
            "the helper names a program interpreter (dynamically linked): {kinds:?}"
        );
    }
}
