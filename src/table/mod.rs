//! Iceberg tables: schemas, metadata files, data writers, snapshots and scans.

pub mod avro_names;
pub mod changelog;
pub mod collapse;
pub mod delete_writer;
pub mod deletes;
pub mod expire;
pub mod filter;
pub mod key_check;
pub mod keys;
pub mod manifests;
pub mod metadata;
pub mod row_groups;
pub mod scan;
pub mod schema;
pub mod select;
pub mod skippable;
pub mod snapshot;
pub mod time_travel;
pub mod writer;
