//! The default local composition, compiled into the host.

/// `config/local.yaml` as shipped: `fs` from `dsh-fs-local`, `subprocess`
/// from `dsh-subprocess-local`.
pub const LOCAL_YAML: &str = include_str!("../../config/local.yaml");

/// How messages name the embedded manifest.
pub const LOCAL_ORIGIN: &str = "<embedded config/local.yaml>";
