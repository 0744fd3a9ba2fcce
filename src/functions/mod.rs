//! The rows behind skade's table functions, as Arrow batches.

pub mod changelog;
pub mod check;
pub mod commits_since;
pub mod compact;
pub mod expire_snapshots;
pub mod lookup_stats;
pub mod snapshots;
pub mod tables;

use arrow::datatypes::{DataType, TimeUnit};

/// DuckDB's TIMESTAMPTZ in Arrow.
pub(crate) fn timestamptz() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
}
