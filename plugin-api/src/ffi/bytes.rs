//! Byte and text payloads across the boundary, never copied.
//!
//! A buffer allocated by one binary may only be freed by that binary's
//! allocator. [`FfiBytes`] therefore carries, next to the data pointer and
//! length, the sender's owner and the sender's own `release` function: the
//! receiver wraps it with [`Bytes::from_owner`] and, when the last clone of
//! that `Bytes` drops, `release` runs the sender's code on the sender's
//! allocation. Any `Bytes` crosses this way — a whole `Vec`, a slice of a
//! larger buffer, a hyper body chunk, a `Bytes` that itself came from
//! another library (owners then nest, and release in order, innermost
//! last). Libraries are never unloaded, so `release` stays callable after
//! the instance that sent the buffer was disposed.

use std::ffi::c_void;

use abi_stable::StableAbi;
use bytes::Bytes;

use crate::text::Text;

/// An immutable byte buffer owned by whichever binary made it.
///
/// `ptr..ptr+len` is the data of the `Bytes` boxed in `owner`; it stays
/// valid (a `Bytes`' data never moves) until `release(owner)` runs, exactly
/// once, when the `FfiBytes` — or the last clone of the `Bytes` it was
/// turned into — drops.
#[repr(C)]
#[derive(StableAbi)]
pub struct FfiBytes {
    ptr: *const u8,
    len: usize,
    owner: *mut c_void,
    release: unsafe extern "C" fn(*mut c_void),
}

// SAFETY: the owner is a `Box<Bytes>` (`Bytes` is `Send + Sync`), touched
// only by `release`, which runs once, on drop; the data is immutable.
unsafe impl Send for FfiBytes {}
// SAFETY: shared access only reads the immutable data.
unsafe impl Sync for FfiBytes {}

impl FfiBytes {
    /// Hands `bytes` over without copying (one small box for the owner).
    pub fn from_bytes(bytes: Bytes) -> FfiBytes {
        let (ptr, len) = (bytes.as_ptr(), bytes.len());
        #[cfg(test)]
        counting::made();
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
        if self.len == 0 {
            // Nothing to keep alive: release the owner now.
            return Bytes::new();
        }
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

/// Frees an owner made by [`FfiBytes::from_bytes`] in this binary. Never
/// unwinds (dropping a `Box<Bytes>` runs no user code that could panic
/// except a foreign owner's drop, which is another `FfiBytes`' release).
unsafe extern "C" fn release_bytes(owner: *mut c_void) {
    // SAFETY: the caller passes a pointer from `Box::<Bytes>::into_raw` of
    // this binary, once.
    drop(unsafe { Box::from_raw(owner.cast::<Bytes>()) });
    #[cfg(test)]
    counting::released();
}

/// UTF-8 text as it crosses: an [`FfiBytes`] made only from a [`Text`].
#[repr(transparent)]
#[derive(StableAbi)]
pub struct FfiText(FfiBytes);

impl FfiText {
    /// Hands `text` over without copying.
    pub fn from_text(text: Text) -> FfiText {
        FfiText(FfiBytes::from_bytes(text.into_bytes()))
    }

    /// Wraps the text without copying or re-validating: an `FfiText` is
    /// only made from a `Text`, UTF-8 by construction (as an `RString` was
    /// trusted before it).
    pub fn into_text(self) -> Text {
        // SAFETY: see above; the sender built it with `from_text`.
        unsafe { Text::from_utf8_unchecked(self.0.into_bytes()) }
    }
}

/// Test-only bookkeeping: owners made and not yet released by this binary.
#[cfg(test)]
mod counting {
    use std::cell::Cell;

    thread_local! {
        // Per thread, so tests running in parallel do not see each other.
        static LIVE: Cell<i64> = const { Cell::new(0) };
    }

    pub fn made() {
        LIVE.with(|live| live.set(live.get() + 1));
    }

    pub fn released() {
        LIVE.with(|live| live.set(live.get() - 1));
    }

    pub fn live() -> i64 {
        LIVE.with(Cell::get)
    }
}

#[cfg(test)]
mod tests {
    use super::counting::live;
    use super::*;

    #[test]
    fn a_bytes_crosses_in_place_and_releases_once() {
        let before = live();
        let original = Bytes::from(vec![7u8; 4096]);
        let data = original.as_ptr();
        let crossed = FfiBytes::from_bytes(original.clone());
        assert_eq!(live(), before + 1);
        assert_eq!(crossed.as_slice().as_ptr(), data);
        let wrapped = crossed.into_bytes();
        assert_eq!(wrapped.as_ptr(), data, "no copy");
        assert_eq!(wrapped, original);
        let clone = wrapped.clone();
        drop(wrapped);
        assert_eq!(live(), before + 1, "a clone keeps the owner");
        drop(clone);
        assert_eq!(live(), before, "the last clone releases it");
        assert_eq!(original.len(), 4096, "the sender's handle is unaffected");
    }

    #[test]
    fn a_slice_of_a_larger_buffer_crosses_in_place() {
        let before = live();
        let original = Bytes::from(vec![1u8, 2, 3, 4, 5, 6]);
        let crossed = FfiBytes::from_bytes(original.slice(2..5)).into_bytes();
        assert_eq!(crossed.as_ptr(), original.as_ptr().wrapping_add(2));
        assert_eq!(&crossed[..], &[3, 4, 5]);
        let sub = crossed.slice(1..);
        drop(crossed);
        assert_eq!(&sub[..], &[4, 5]);
        assert_eq!(
            live(),
            before + 1,
            "a slice of the received bytes keeps the owner"
        );
        drop(sub);
        assert_eq!(live(), before);
    }

    #[test]
    fn an_unconverted_crossing_releases_on_drop() {
        let before = live();
        drop(FfiBytes::from_bytes(Bytes::from(vec![0u8; 16])));
        assert_eq!(live(), before);
    }

    #[test]
    fn nested_crossings_keep_the_data_in_place_and_release_every_owner() {
        let before = live();
        let original = Bytes::from(b"nested".to_vec());
        let once = FfiBytes::from_bytes(original.clone()).into_bytes();
        let twice = FfiBytes::from_bytes(once).into_bytes();
        assert_eq!(twice.as_ptr(), original.as_ptr());
        assert_eq!(live(), before + 2);
        drop(twice);
        assert_eq!(live(), before);
    }

    #[test]
    fn an_empty_buffer_crosses_and_releases_at_once() {
        let before = live();
        let crossed = FfiBytes::from_bytes(Bytes::new());
        assert!(crossed.as_slice().is_empty());
        let bytes = crossed.into_bytes();
        assert!(bytes.is_empty());
        assert_eq!(live(), before);
    }

    #[test]
    fn text_crosses_in_place_without_revalidation() {
        let before = live();
        let text = Text::from(String::from("grüße"));
        let data = text.as_ptr();
        let crossed = FfiText::from_text(text).into_text();
        assert_eq!(crossed.as_ptr(), data);
        assert_eq!(crossed, "grüße");
        assert_eq!(live(), before + 1);
        drop(crossed);
        assert_eq!(live(), before);
    }
}
