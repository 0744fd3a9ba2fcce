//! The Iceberg REST catalog protocol, served from a lake (issue 45, docs/design/rest-catalog.md):
//! other engines (PyIceberg, DuckDB's iceberg extension, Spark, Trino) find and read skade's
//! tables through it.

mod accept;
mod auth;
mod ddl;
mod errors;
mod lake;
mod names;
mod routes;
pub mod server;
mod state;
mod tables;
mod types;

pub use server::{serve, servers, stop, ServeOptions, ServerInfo};
