//! Writing files: data files (Parquet with Iceberg field ids and statistics), delete files, the
//! primary-key check of the rows a statement wrote, and files a user had adopted as data files.

pub mod adopt;
pub mod delete_writer;
pub mod file_stream;
pub mod key_check;
pub mod key_order;
pub mod partitions;
pub mod writer;
