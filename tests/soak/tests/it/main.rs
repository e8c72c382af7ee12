//! dsh-soak's integration tests, one binary: the built `dsh-soak` run as CI runs it.

mod short_soak;
