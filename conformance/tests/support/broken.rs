//! Deliberately broken providers (filled in by the teeth tests).
