//! skade: an embedded, single-file Apache Iceberg catalog with change data capture, as a DuckDB
//! extension. This crate is the core; `cpp/` adapts DuckDB's C++ extension API to it over the C
//! ABI in [`ffi`].

pub mod catalog;
pub mod error;
pub mod failpoint;
pub mod ffi;
pub mod functions;
pub mod io;
pub mod lookup;
pub mod runtime;
pub mod table;

#[cfg(feature = "extension")]
mod extension;

pub use catalog::{Catalog, TableInfo, Transaction};
pub use error::{Error, ErrorKind, Result};
