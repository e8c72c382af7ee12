//! The plugin API's integration tests, one binary: the probe plugins
//! (built as cdylibs with these tests) loaded through the real loader, and
//! every seam driven across the ABI in both directions.

mod decorate_fs;
mod e2b_seam;
mod fs_seam;
mod injected;
mod lifecycle;
mod loader;
mod subprocess_seam;
mod support;
mod tracing_bridge;
mod zero_copy;
