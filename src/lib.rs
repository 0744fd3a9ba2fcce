//! skade: an embedded, single-file Apache Iceberg catalog with change data capture, as a DuckDB
//! extension. This crate is the core; `cpp/` adapts DuckDB's C++ extension API to it over the C
//! ABI in [`ffi`].

pub mod catalog;
pub(crate) mod changelog;
pub mod commit_log;
pub mod error;
pub(crate) mod failpoint;
pub(crate) mod ffi;
pub mod format;
pub mod functions;
pub mod io;
pub mod lineage;
pub mod lookup;
pub mod read;
pub mod rest;
pub(crate) mod runtime;
pub mod stream;
pub(crate) mod write;

pub use catalog::{Catalog, TableInfo, Transaction};
pub use error::{Error, ErrorKind, Result};
/// Runs a future of the core's async API (the change stream) to completion on its runtime.
pub use runtime::block_on as runtime_block_on;
