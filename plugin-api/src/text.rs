//! [`Text`]: immutable UTF-8 over [`Bytes`], the text payload of the seams.
//!
//! Text crosses the plugin boundary without being copied (as [`Bytes`]
//! does), so a seam carries `Text` where it would otherwise carry a
//! `String`. Making one from a `String` or a `&'static str` never copies;
//! reading it is a `&str` away ([`Deref`]).

use std::borrow::Borrow;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;

use bytes::Bytes;

use crate::error::{Error, ErrorKind};

/// Immutable UTF-8 text, cheap to clone (a reference count), that crosses
/// the plugin ABI without a copy.
///
/// Invariant: the bytes are valid UTF-8. Every constructor either gets that
/// by construction (`String`, `&str`) or checks it ([`TryFrom<Bytes>`],
/// [`Text::from_utf8`]).
#[derive(Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Text(Bytes);

impl Text {
    /// The empty text.
    pub const fn new() -> Text {
        Text(Bytes::new())
    }

    /// Text over `bytes`, without copying, if they are valid UTF-8; else an
    /// [`ErrorKind::InvalidUtf8`] error naming the first invalid byte.
    pub fn from_utf8(bytes: Bytes) -> Result<Text, Error> {
        match std::str::from_utf8(&bytes) {
            Ok(_) => Ok(Text(bytes)),
            Err(err) => Err(Error::new(
                ErrorKind::InvalidUtf8,
                format!(
                    "text: invalid UTF-8 at byte {} of {}",
                    err.valid_up_to(),
                    bytes.len()
                ),
            )),
        }
    }

    /// Text over `bytes` without checking them.
    ///
    /// # Safety
    ///
    /// `bytes` must be valid UTF-8.
    pub unsafe fn from_utf8_unchecked(bytes: Bytes) -> Text {
        Text(bytes)
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        // SAFETY: the bytes are valid UTF-8 (the type's invariant).
        unsafe { std::str::from_utf8_unchecked(&self.0) }
    }

    /// The UTF-8 bytes, without copying.
    pub fn into_bytes(self) -> Bytes {
        self.0
    }

    /// The UTF-8 bytes, borrowed as [`Bytes`] (to hand on a cheap clone).
    pub fn as_bytes(&self) -> &Bytes {
        &self.0
    }

    /// The text as a `String`: no copy when the bytes are a uniquely owned
    /// `Vec` (a `Text` made from a `String` in this binary and not cloned),
    /// one copy otherwise — the one place a caller insisting on `String`
    /// pays.
    pub fn into_string(self) -> String {
        let vec = Vec::from(self.0);
        // SAFETY: the bytes are valid UTF-8 (the type's invariant).
        unsafe { String::from_utf8_unchecked(vec) }
    }
}

impl Deref for Text {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for Text {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<[u8]> for Text {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl Borrow<str> for Text {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

// Hashes as the `str` it derefs to, so `Borrow<str>` lookups agree.
impl Hash for Text {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl fmt::Display for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.as_str(), f)
    }
}

impl fmt::Debug for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl From<String> for Text {
    /// No copy: the `String`'s buffer becomes the text's.
    fn from(value: String) -> Text {
        Text(Bytes::from(value))
    }
}

impl From<&'static str> for Text {
    /// No copy: the text points at the static.
    fn from(value: &'static str) -> Text {
        Text(Bytes::from_static(value.as_bytes()))
    }
}

impl From<Text> for Bytes {
    fn from(value: Text) -> Bytes {
        value.0
    }
}

impl From<Text> for String {
    fn from(value: Text) -> String {
        value.into_string()
    }
}

impl serde::Serialize for Text {
    /// As the string it is.
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for Text {
    /// From a string (owned: the `String`'s buffer becomes the text's).
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Text, D::Error> {
        String::deserialize(deserializer).map(Text::from)
    }
}

impl TryFrom<Bytes> for Text {
    type Error = Error;
    /// See [`Text::from_utf8`].
    fn try_from(value: Bytes) -> Result<Text, Error> {
        Text::from_utf8(value)
    }
}

impl PartialEq<str> for Text {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Text {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for Text {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other.as_str()
    }
}

impl PartialEq<Text> for str {
    fn eq(&self, other: &Text) -> bool {
        self == other.as_str()
    }
}

impl PartialEq<Text> for &str {
    fn eq(&self, other: &Text) -> bool {
        *self == other.as_str()
    }
}

impl PartialEq<Text> for String {
    fn eq(&self, other: &Text) -> bool {
        self.as_str() == other.as_str()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn from_string_and_back_never_copies_a_unique_buffer() {
        let string = String::from("héllo");
        let data = string.as_ptr();
        let text = Text::from(string);
        assert_eq!(text.as_ptr(), data);
        assert_eq!(text, "héllo");
        let back = text.into_string();
        assert_eq!(back.as_ptr(), data);
    }

    #[test]
    fn a_shared_text_copies_once_into_a_string_and_keeps_its_clone() {
        let text = Text::from(String::from("shared"));
        let clone = text.clone();
        assert_eq!(clone.as_ptr(), text.as_ptr(), "clones share the buffer");
        let owned = text.into_string();
        assert_eq!(owned, "shared");
        assert_eq!(clone, "shared");
    }

    #[test]
    fn static_text_points_at_the_static() {
        const HELLO: &str = "hello";
        let text = Text::from(HELLO);
        assert_eq!(text.as_ptr(), HELLO.as_ptr());
        assert_eq!(text.to_string(), "hello");
        assert_eq!(format!("{text:?}"), "\"hello\"");
    }

    #[test]
    fn bytes_are_validated_without_copying() {
        let bytes = Bytes::from(b"ok \xc3\xa9".to_vec());
        let data = bytes.as_ptr();
        let text = Text::try_from(bytes).expect("valid UTF-8");
        assert_eq!(text.as_ptr(), data);
        assert_eq!(text, "ok é");
        assert_eq!(text.into_bytes().as_ptr(), data);
    }

    #[test]
    fn invalid_utf8_is_refused_with_the_offset() {
        let err = Text::from_utf8(Bytes::from_static(b"ab\xffcd")).expect_err("invalid");
        assert_eq!(err.kind(), ErrorKind::InvalidUtf8);
        assert_eq!(err.message(), "text: invalid UTF-8 at byte 2 of 5");
        // A truncated sequence at the end is refused too.
        let err = Text::from_utf8(Bytes::from_static(b"a\xc3")).expect_err("truncated");
        assert_eq!(err.message(), "text: invalid UTF-8 at byte 1 of 2");
    }

    #[test]
    fn hashes_and_compares_as_str() {
        let mut set = HashSet::new();
        set.insert(Text::from("a"));
        assert!(set.contains("a"));
        assert_eq!(String::from("a"), Text::from("a"));
        assert_eq!("a", Text::from("a"));
        assert!(Text::new().is_empty());
        assert_eq!(Text::default(), "");
    }

    #[test]
    fn serializes_as_a_string() {
        let json = serde_json::to_string(&Text::from("a\"b")).expect("serialize");
        assert_eq!(json, r#""a\"b""#);
        let text: Text = serde_json::from_str(&json).expect("deserialize");
        assert_eq!(text, "a\"b");
    }
}
