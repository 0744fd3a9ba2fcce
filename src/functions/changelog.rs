//! `skade_changelog(table, from_snapshot [, to_snapshot] [, collapse := bool])`: the rows each
//! snapshot of the window inserted, deleted or updated (see `table::changelog`), or their net
//! effect (`table::collapse`).

use arrow::array::{RecordBatch, RecordBatchIterator};
use arrow::datatypes::SchemaRef;

use crate::catalog::{TableInfo, Transaction};
use crate::error::Result;
use crate::changelog::changelog::{changelog, changelog_schema, full_reload, snapshot_difference, window, Feed, Filters};
use crate::changelog::collapse;
use crate::read::keys::KeyColumns;
use crate::format::schema::arrow_schema;
use crate::read::time_travel::{self, Version};

pub fn schema(table: &TableInfo) -> Result<SchemaRef> {
    Ok(changelog_schema(arrow_schema(table.metadata.current_schema())?.as_ref()))
}

/// A bound of the window: a snapshot id, or a time (microseconds since the epoch) meaning the
/// last snapshot committed by then.
#[derive(Debug, Clone, Copy)]
pub enum Bound {
    Snapshot(i64),
    Time(i64),
}

/// What a query asks of the changelog.
#[derive(Default)]
pub struct Request<'a> {
    pub from: Option<Bound>,
    /// None: up to the current snapshot.
    pub to: Option<Bound>,
    pub collapse: bool,
    /// The output columns the query uses (empty: all); the others may be NULL.
    pub used: &'a [usize],
    /// Its filters, for pruning (see `Filters::parse`).
    pub filters: Filters,
}

pub fn rows(
    txn: &Transaction,
    table: &TableInfo,
    request: Request<'_>,
) -> Result<RecordBatchIterator<std::vec::IntoIter<std::result::Result<RecordBatch, arrow::error::ArrowError>>>> {
    let Request { from, to, collapse, used, filters } = request;
    let name = table.record.qualified_name();
    let resolve = |b: Bound| -> Result<Option<i64>> {
        match b {
            Bound::Snapshot(id) => Ok(Some(id)),
            Bound::Time(us) => match time_travel::resolve(&table.metadata, &name, "TIMESTAMP", us) {
                Ok(Version::Snapshot(id)) => Ok(Some(id)),
                Ok(_) => Ok(None),
                Err(e) => Err(e),
            },
        }
    };
    // A start before the table's first snapshot (or before it existed) is its creation; an end
    // before its first snapshot is an empty window.
    let from_id = match from {
        Some(Bound::Time(us)) => match time_travel::at_time(&table.metadata, &name, us)? {
            Some(Version::Snapshot(id)) => Some(id),
            _ => None,
        },
        Some(b) => resolve(b)?,
        None => None,
    };
    let snapshots = match to {
        Some(b) => match resolve(b)? {
            Some(id) => window(&table.metadata, &name, from_id, Some(id))?,
            None => vec![],
        },
        None => window(&table.metadata, &name, from_id, None)?,
    };
    let caches = txn.catalog().read_caches();
    // Columns the query does not use stay NULL and unread (netting compares whole rows: see below).
    let columns = table.metadata.current_schema().as_struct().fields().len();
    let read: Option<Vec<usize>> = match (collapse, used.is_empty()) {
        (false, false) => Some(used.iter().copied().filter(|&c| c < columns).collect()),
        _ => None,
    };
    let key = KeyColumns::of(table.metadata.current_schema())?;
    // Netting without a key reads whole only the added files that may hold a removed row.
    let netting: Option<Vec<usize>> = match (collapse, &key, used.is_empty()) {
        (true, None, false) => Some(used.iter().copied().filter(|&c| c < columns).collect()),
        _ => None,
    };
    let to_snapshot = snapshots.last().map(|s| s.as_ref());
    let feed = changelog(&table.metadata, &caches, &name, &snapshots, read.as_deref(), &filters, netting.as_deref())?;
    let batches = match feed {
        Feed::Rows(batches) if collapse => collapse::collapse(&schema(table)?, &batches, key.as_ref())?,
        Feed::Rows(batches) => batches,
        // Netted, the window is exactly the difference between its two ends: no guess needed.
        Feed::Undecodable(_) if collapse => collapse::collapse(
            &schema(table)?,
            &snapshot_difference(&table.metadata, &caches, from_id, to_snapshot, &filters)?,
            key.as_ref(),
        )?,
        // The seed's rule, flagged on every row (DuckDB has no notices to send).
        Feed::Undecodable(_) => full_reload(&table.metadata, &caches, to_snapshot, read.as_deref(), &filters)?,
    };
    let batches: Vec<_> = batches.into_iter().map(Ok).collect();
    Ok(RecordBatchIterator::new(batches.into_iter(), schema(table)?))
}
