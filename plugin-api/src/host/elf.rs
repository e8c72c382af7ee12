//! Finding a plugin's entry symbols in an ELF shared library, before it is
//! loaded.
//!
//! A plugin exports its entry points under names that include its crate
//! name (`dsh_plugin_header__dsh_fs_local`), so several plugin crates can be
//! linked into one program as rlibs without clashing symbols. The loader
//! therefore reads the library's dynamic symbol table to learn which plugin
//! it holds — which also means a file that is not a plugin is refused
//! without running any of its code. Only what is needed is read: the ELF
//! header, the section headers, `.dynsym` and its string table.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// Upper bound for one table read from a library (corrupt files must not
/// make the loader allocate without bound).
const MAX_TABLE_BYTES: u64 = 64 << 20;

const SHT_DYNSYM: u32 = 11;
const ET_DYN: u16 = 3;
const SECTION_HEADER_LEN: usize = 64;
const SYMBOL_LEN: usize = 24;

/// Byte order of the file.
#[derive(Clone, Copy)]
enum Order {
    Little,
    Big,
}

impl Order {
    fn u16(self, bytes: &[u8], at: usize) -> u16 {
        let raw = [bytes[at], bytes[at + 1]];
        match self {
            Order::Little => u16::from_le_bytes(raw),
            Order::Big => u16::from_be_bytes(raw),
        }
    }

    fn u32(self, bytes: &[u8], at: usize) -> u32 {
        let mut raw = [0; 4];
        raw.copy_from_slice(&bytes[at..at + 4]);
        match self {
            Order::Little => u32::from_le_bytes(raw),
            Order::Big => u32::from_be_bytes(raw),
        }
    }

    fn u64(self, bytes: &[u8], at: usize) -> u64 {
        let mut raw = [0; 8];
        raw.copy_from_slice(&bytes[at..at + 8]);
        match self {
            Order::Little => u64::from_le_bytes(raw),
            Order::Big => u64::from_be_bytes(raw),
        }
    }
}

/// The names of the symbols the library at `path` defines and exports
/// whose names start with `prefix`. The error says why the file is not a
/// readable 64-bit ELF shared library.
pub fn exported_symbols_with_prefix(path: &Path, prefix: &str) -> Result<Vec<String>, String> {
    let mut file = File::open(path).map_err(|err| format!("cannot read the file: {err}"))?;
    let mut header = Vec::with_capacity(64);
    (&mut file)
        .take(64)
        .read_to_end(&mut header)
        .map_err(|err| format!("cannot read the file: {err}"))?;
    if !header.starts_with(b"\x7fELF") {
        return Err("not an ELF file (bad magic number)".to_owned());
    }
    if header.len() < 64 {
        return Err("too short to be an ELF shared library".to_owned());
    }
    if header[4] != 2 {
        return Err("not a 64-bit ELF file".to_owned());
    }
    let order = match header[5] {
        1 => Order::Little,
        2 => Order::Big,
        other => return Err(format!("unknown ELF byte order {other}")),
    };
    if order.u16(&header, 16) != ET_DYN {
        return Err("not a shared library (ELF type is not ET_DYN)".to_owned());
    }
    let section_headers_at = order.u64(&header, 0x28);
    let section_header_len = usize::from(order.u16(&header, 0x3A));
    let section_count = u64::from(order.u16(&header, 0x3C));
    if section_count == 0 || section_header_len < SECTION_HEADER_LEN {
        return Err("the library has no section headers".to_owned());
    }
    let sections = read_at(
        &mut file,
        section_headers_at,
        section_count * section_header_len as u64,
    )?;
    let section = |index: usize| -> Option<&[u8]> {
        sections.get(index * section_header_len..index * section_header_len + SECTION_HEADER_LEN)
    };
    let dynsym = (0..section_count as usize)
        .filter_map(section)
        .find(|section| order.u32(section, 4) == SHT_DYNSYM)
        .ok_or_else(|| "the library has no dynamic symbol table".to_owned())?;
    let strings_index = order.u32(dynsym, 40) as usize;
    let strings_section = section(strings_index)
        .ok_or_else(|| "the dynamic symbol table has no string table".to_owned())?;
    let symbols = read_at(&mut file, order.u64(dynsym, 24), order.u64(dynsym, 32))?;
    let strings = read_at(
        &mut file,
        order.u64(strings_section, 24),
        order.u64(strings_section, 32),
    )?;
    let symbol_len = usize::try_from(order.u64(dynsym, 56))
        .ok()
        .filter(|len| *len >= SYMBOL_LEN)
        .unwrap_or(SYMBOL_LEN);
    let mut found = Vec::new();
    for symbol in symbols.chunks_exact(symbol_len) {
        let defined = order.u16(symbol, 6) != 0;
        if !defined {
            continue;
        }
        let name_at = order.u32(symbol, 0) as usize;
        let Some(name) = strings.get(name_at..).and_then(|rest| {
            let end = rest.iter().position(|byte| *byte == 0)?;
            std::str::from_utf8(&rest[..end]).ok()
        }) else {
            continue;
        };
        if name.starts_with(prefix) {
            found.push(name.to_owned());
        }
    }
    found.sort();
    found.dedup();
    Ok(found)
}

fn read_at(file: &mut File, offset: u64, len: u64) -> Result<Vec<u8>, String> {
    if len > MAX_TABLE_BYTES {
        return Err(format!("an ELF table of {len} bytes is implausibly large"));
    }
    file.seek(SeekFrom::Start(offset))
        .map_err(|err| format!("cannot seek in the file: {err}"))?;
    let mut bytes = vec![0u8; len as usize];
    file.read_exact(&mut bytes)
        .map_err(|_| "truncated ELF file (a table lies past its end)".to_owned())?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn libc() -> Option<std::path::PathBuf> {
        [
            "/lib/x86_64-linux-gnu/libc.so.6",
            "/lib/aarch64-linux-gnu/libc.so.6",
            "/usr/lib64/libc.so.6",
            "/lib64/libc.so.6",
        ]
        .into_iter()
        .map(std::path::PathBuf::from)
        .find(|path| path.exists())
    }

    #[test]
    fn finds_exported_symbols_of_a_system_library() {
        let libc = libc().expect("a libc.so.6 in a standard location");
        let found = exported_symbols_with_prefix(&libc, "mallo").expect("libc is readable");
        assert!(found.iter().any(|name| name == "malloc"), "{found:?}");
        assert!(
            exported_symbols_with_prefix(&libc, "dsh_plugin_")
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn refuses_what_is_not_a_shared_library() {
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path();
        let text = dir.join("text.so");
        std::fs::write(
            &text,
            b"just some text, long enough to have sixty-four bytes of header.....",
        )
        .unwrap();
        let err = exported_symbols_with_prefix(&text, "x").unwrap_err();
        assert!(err.contains("bad magic"), "{err}");
        let short = dir.join("short.so");
        std::fs::write(&short, b"\x7fELF").unwrap();
        let err = exported_symbols_with_prefix(&short, "x").unwrap_err();
        assert!(err.contains("too short"), "{err}");
        let exe = std::env::current_exe().unwrap();
        // A test executable is ET_EXEC or ET_DYN (PIE); either way it parses
        // or is refused with a reason, never a panic.
        let _ = exported_symbols_with_prefix(&exe, "x");
    }
}
