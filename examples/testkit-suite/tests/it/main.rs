//! A user's suite with dsh as its harness: every test runs on both
//! compositions, each a fresh world from `dsh-testkit`.

mod lines;
