//! The operations a worker mixes, one file per family, each a method of [`crate::worker::Worker`]
//! that runs one or more `dsh` processes, checks what they did, and returns false when something
//! failed (after recording it).

mod exec;
mod files;
mod terminal;
