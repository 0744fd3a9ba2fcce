//! Iceberg tables: schemas, metadata files, data writers, snapshots and scans.

pub mod filter;
pub mod manifests;
pub mod metadata;
pub mod scan;
pub mod schema;
pub mod snapshot;
pub mod writer;
