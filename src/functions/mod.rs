//! The rows behind skade's table functions, as Arrow batches.

pub(crate) mod add_files;
pub mod changelog;
pub(crate) mod check;
pub(crate) mod commit_log;
pub(crate) mod commits_since;
pub(crate) mod compact;
pub(crate) mod consumers;
pub(crate) mod database_size;
pub(crate) mod expire_snapshots;
pub(crate) mod lineage;
pub(crate) mod lineage_delivery;
pub(crate) mod lookup_stats;
pub(crate) mod remove_orphan_files;
pub(crate) mod serve;
pub(crate) mod snapshots;
pub(crate) mod tables;
pub(crate) mod upgrade_table;

use arrow::datatypes::{DataType, TimeUnit};

/// DuckDB's TIMESTAMPTZ in Arrow.
pub(crate) fn timestamptz() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
}
