//! dsh-fuzz's integration tests, one binary: every stored fuzz input
//! replayed through its target as a regular test, so an input that once
//! crashed a decoder (and was added to `tests/fuzz/corpus/`) stays fixed.

mod replay;
