//! The helper program, built by `build.rs` (static x86_64 Linux).

/// The `dsh-supervisor` executable.
pub const HELPER: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/dsh-supervisor"));

/// [`HELPER`]'s BLAKE3 digest, hex, computed by the build script: what the
/// helper checks itself against before it runs anything (docs/design.md §6.4).
pub const HELPER_DIGEST: &str = include_str!(concat!(env!("OUT_DIR"), "/dsh-supervisor.blake3"));

/// Where a sandbox template holds the helper: `<TEMPLATE_HOME>/<BLAKE3>/dsh-supervisor`.
pub const TEMPLATE_HOME: &str = "/usr/local/libexec/dsh";

/// Where a sandbox template holds [`HELPER`] (`dsh template` puts it there).
/// The digest in the path means a template made for another build of dsh is
/// simply not found (docs/design.md §6.4).
pub fn template_path() -> String {
    format!("{TEMPLATE_HOME}/{HELPER_DIGEST}/dsh-supervisor")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_template_path_names_the_digest() {
        let path = template_path();
        assert_eq!(
            path.len(),
            TEMPLATE_HOME.len() + 1 + 64 + "/dsh-supervisor".len()
        );
        assert!(path.contains(HELPER_DIGEST), "{path}");
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
