//! Writing files: data files (Parquet with Iceberg field ids and statistics), delete files, and
//! the primary-key check of the rows a statement wrote.

pub mod delete_writer;
pub mod file_stream;
pub mod key_check;
pub mod key_order;
pub mod partitions;
pub mod writer;
