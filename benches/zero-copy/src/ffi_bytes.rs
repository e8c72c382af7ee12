//! [`FfiBytes`]: an owned byte buffer that crosses a library boundary
//! without being copied, and is freed by the binary that allocated it.

use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};

use abi_stable::StableAbi;
use bytes::Bytes;

/// Owners made by this binary and not yet released (each binary linking
/// this crate has its own count, so a test can see which side frees).
static LIVE_OWNERS: AtomicU64 = AtomicU64::new(0);

/// An immutable byte buffer owned by whichever binary made it.
///
/// The sending side boxes its [`Bytes`] (any `Bytes`: a `Vec`, a slice of a
/// larger buffer, a foreign owner) and passes a pointer to the data, its
/// length, the box and the sending binary's own `release` function. The
/// receiving side wraps it with [`FfiBytes::into_bytes`] — no copy; when
/// the last clone of the resulting `Bytes` drops, `release` runs the
/// sender's code and frees the box with the sender's allocator. `ptr..len`
/// stays valid as long as the owner lives: a `Bytes`' data never moves.
#[repr(C)]
#[derive(StableAbi)]
pub struct FfiBytes {
    ptr: *const u8,
    len: usize,
    owner: *mut c_void,
    release: unsafe extern "C" fn(*mut c_void),
}

// SAFETY: the owner is a `Box<Bytes>` (`Bytes` is `Send`), only touched by
// `release`, which runs once, on drop; the data is immutable.
unsafe impl Send for FfiBytes {}

impl FfiBytes {
    /// Hands `bytes` over without copying (one small box for the owner).
    pub fn from_bytes(bytes: Bytes) -> FfiBytes {
        let (ptr, len) = (bytes.as_ptr(), bytes.len());
        LIVE_OWNERS.fetch_add(1, Ordering::Relaxed);
        FfiBytes {
            ptr,
            len,
            owner: Box::into_raw(Box::new(bytes)).cast(),
            release: release_bytes,
        }
    }

    /// Wraps the buffer as `Bytes` without copying; the owner is released
    /// (by the binary that made it) when the last clone drops.
    pub fn into_bytes(self) -> Bytes {
        Bytes::from_owner(self)
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr..ptr+len` is the data of the `Bytes` in `owner`,
        // alive until `self` drops.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl AsRef<[u8]> for FfiBytes {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl Drop for FfiBytes {
    fn drop(&mut self) {
        // SAFETY: `owner` came from `Box::into_raw` in the binary whose
        // `release` this is, and is released exactly once, here.
        unsafe { (self.release)(self.owner) }
    }
}

/// Frees an owner made by [`FfiBytes::from_bytes`] in this binary.
unsafe extern "C" fn release_bytes(owner: *mut c_void) {
    // SAFETY: the caller passes a pointer from `Box::<Bytes>::into_raw` of
    // this binary, once.
    drop(unsafe { Box::from_raw(owner.cast::<Bytes>()) });
    LIVE_OWNERS.fetch_sub(1, Ordering::Relaxed);
}

/// How many [`FfiBytes`] owners this binary made that are not released yet.
pub fn live_owners() -> u64 {
    LIVE_OWNERS.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapping_keeps_the_data_in_place_and_releases_once() {
        let before = live_owners();
        let original = Bytes::from(vec![7u8; 4096]);
        let data = original.as_ptr();
        let crossed = FfiBytes::from_bytes(original.slice(1..));
        assert_eq!(live_owners(), before + 1);
        let wrapped = crossed.into_bytes();
        assert_eq!(wrapped.as_ptr(), data.wrapping_add(1), "no copy");
        assert_eq!(wrapped.len(), 4095);
        let clone = wrapped.clone();
        drop(wrapped);
        assert_eq!(live_owners(), before + 1, "a clone keeps the owner");
        drop(clone);
        assert_eq!(live_owners(), before);
        assert_eq!(
            original.len(),
            4096,
            "the sender's own handle is unaffected"
        );
    }

    #[test]
    fn an_empty_buffer_crosses() {
        let crossed = FfiBytes::from_bytes(Bytes::new());
        assert!(crossed.as_slice().is_empty());
        assert!(crossed.into_bytes().is_empty());
    }
}
