//! `AT (VERSION => id)` and `AT (TIMESTAMP => ts)`: which snapshot of a table a read sees.

use iceberg::spec::{SchemaRef, SnapshotRef, TableMetadata};

use crate::error::{Error, Result};
use crate::format::metadata::CREATED_AT_MS;

/// The version of a table a statement reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Version {
    /// The current snapshot (plus the reading transaction's own uncommitted writes).
    Current,
    Snapshot(i64),
    /// The table existed but had no snapshot yet: it reads as empty.
    Empty,
}

/// The call that lists a table's snapshots, for a hint: `skade_snapshots('<table>')`, `table` as
/// messages name it (a quote in it doubled: the call runs as printed).
pub fn snapshots_call(table: &str) -> String {
    format!("skade_snapshots('{}')", table.replace('\'', "''"))
}

/// Resolves an AT clause. `value` is a snapshot id for VERSION and microseconds since the epoch
/// (UTC) for TIMESTAMP. `table` names the table in messages.
pub fn resolve(metadata: &TableMetadata, table: &str, unit: &str, value: i64) -> Result<Version> {
    if unit.eq_ignore_ascii_case("version") {
        return match metadata.snapshot_by_id(value) {
            Some(_) => Ok(Version::Snapshot(value)),
            None => Err(Error::catalog(format!(
                "table {table} has no snapshot {value} ({} lists them)",
                snapshots_call(table)
            ))),
        };
    }
    if !unit.eq_ignore_ascii_case("timestamp") {
        return Err(Error::invalid(format!("AT ({unit} => ...) is not supported: use VERSION or TIMESTAMP")));
    }
    at_time(metadata, table, value)?.ok_or_else(|| {
        let created = created_ms(metadata);
        Error::catalog(format!(
            "table {table} did not exist at that time{}",
            created.map(|ms| format!(" (it was created at {})", format_ms(ms))).unwrap_or_default()
        ))
    })
}

/// The table as it was at `us` (microseconds since the epoch, UTC); None before it was created.
pub fn at_time(metadata: &TableMetadata, table: &str, us: i64) -> Result<Option<Version>> {
    let at_ms = us.div_euclid(1000);
    // The main branch's history, oldest first: the last entry at or before the time wins.
    let hit = metadata.history().iter().filter(|log| log.timestamp_ms <= at_ms).max_by_key(|log| log.timestamp_ms);
    if let Some(log) = hit {
        return Ok(Some(Version::Snapshot(log.snapshot_id)));
    }
    if created_ms(metadata).is_none_or(|created| created > at_ms) {
        return Ok(None);
    }
    // Before every kept snapshot: if older ones were expired, what the table held then is gone
    // (not empty). The oldest kept snapshot has a parent only if history before it was expired.
    let oldest = metadata.snapshots().min_by_key(|s| s.sequence_number());
    if let Some(oldest) = oldest.filter(|s| s.parent_snapshot_id().is_some()) {
        return Err(Error::catalog(format!(
            "table {table}: its snapshots before {} were expired, so what it held at that time is no longer known",
            format_ms(oldest.timestamp_ms())
        )));
    }
    Ok(Some(Version::Empty))
}

/// When skade created the table (ms since the epoch), or its first snapshot for other tables.
fn created_ms(metadata: &TableMetadata) -> Option<i64> {
    metadata
        .properties()
        .get(CREATED_AT_MS)
        .and_then(|v| v.parse::<i64>().ok())
        .or_else(|| metadata.history().first().map(|l| l.timestamp_ms))
}

fn format_ms(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S%.3f+00").to_string())
        .unwrap_or_else(|| ms.to_string())
}

/// The snapshot a read at `version` sees (None: the table had none) and the schema it reads with:
/// the table's current one for its current version (an ALTER changes the schema without a
/// snapshot), the one the snapshot was written with for time travel (each snapshot reads as it
/// was).
pub fn snapshot_and_schema(metadata: &TableMetadata, version: Version) -> Result<(Option<SnapshotRef>, SchemaRef)> {
    Ok(match version {
        Version::Snapshot(id) => {
            let snapshot = metadata
                .snapshot_by_id(id)
                .ok_or_else(|| Error::catalog(format!("snapshot {id} does not exist")))?
                .clone();
            let schema = snapshot.schema(metadata)?;
            (Some(snapshot), schema)
        }
        Version::Current => (metadata.current_snapshot().cloned(), metadata.current_schema().clone()),
        Version::Empty => (None, metadata.current_schema().clone()),
    })
}
