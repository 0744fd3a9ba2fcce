//! Writing files: data files (Parquet with Iceberg field ids and statistics, their rows in the
//! table's sort order or key order), delete files, the primary-key check of the rows a statement
//! wrote, the order of a statement's files, and files a user had adopted as data files.

pub mod adopt;
pub mod delete_writer;
pub mod file_stream;
pub mod key_check;
pub mod ordered;
pub mod partitions;
pub mod row_order;
pub mod sorted_runs;
pub mod writer;
