//! `AT (VERSION => id)` and `AT (TIMESTAMP => ts)`: which snapshot of a table a read sees.

use iceberg::spec::TableMetadata;

use crate::error::{Error, Result};

/// The version of a table a statement reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// The current snapshot (plus the reading transaction's own uncommitted writes).
    Current,
    Snapshot(i64),
    /// The table existed but had no snapshot yet: it reads as empty.
    Empty,
}

/// Table property recording when skade created the table (ms since the epoch, UTC).
pub const CREATED_AT_MS: &str = "skade.created-at-ms";

/// Resolves an AT clause. `value` is a snapshot id for VERSION and microseconds since the epoch
/// (UTC) for TIMESTAMP.
pub fn resolve(metadata: &TableMetadata, table: &str, unit: &str, value: i64) -> Result<Version> {
    if unit.eq_ignore_ascii_case("version") {
        return match metadata.snapshot_by_id(value) {
            Some(_) => Ok(Version::Snapshot(value)),
            None => Err(Error::catalog(format!(
                "table {table} has no snapshot {value} (skade_snapshots('{table}') lists them)"
            ))),
        };
    }
    if !unit.eq_ignore_ascii_case("timestamp") {
        return Err(Error::invalid(format!("AT ({unit} => ...) is not supported: use VERSION or TIMESTAMP")));
    }
    let at_ms = value.div_euclid(1000);
    // The main branch's history, oldest first: the last entry at or before the time wins.
    let hit = metadata.history().iter().filter(|log| log.timestamp_ms <= at_ms).max_by_key(|log| log.timestamp_ms);
    if let Some(log) = hit {
        return Ok(Version::Snapshot(log.snapshot_id));
    }
    let created_ms = metadata
        .properties()
        .get(CREATED_AT_MS)
        .and_then(|v| v.parse::<i64>().ok())
        .or_else(|| metadata.history().first().map(|l| l.timestamp_ms));
    match created_ms {
        Some(created) if created <= at_ms => Ok(Version::Empty),
        _ => Err(Error::catalog(format!(
            "table {table} did not exist at that time{}",
            created_ms.map(|ms| format!(" (it was created at {})", format_ms(ms))).unwrap_or_default()
        ))),
    }
}

fn format_ms(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S%.3f+00").to_string())
        .unwrap_or_else(|| ms.to_string())
}
