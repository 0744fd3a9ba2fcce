//! The Iceberg table format: schemas (DuckDB's types as Iceberg's), metadata files, manifests and
//! manifest lists, producing a snapshot's files, snapshot expiry, and the name mapping of files
//! without field ids. Nothing here reads rows.

pub(crate) mod avro_names;
pub mod client_schema;
pub(crate) mod conform;
pub mod defaults;
pub mod deletion_vector;
pub mod duckdb_types;
pub mod evolve;
pub(crate) mod evolve_nested;
pub(crate) mod evolve_types;
pub mod expire;
pub(crate) mod field_path;
pub mod manifests;
pub mod metadata;
pub mod name_mapping;
pub(crate) mod nested_arrays;
pub mod partition;
pub(crate) mod schema;
pub mod snapshot;
pub mod sort_order;
pub(crate) mod timestamps;
pub mod view;
