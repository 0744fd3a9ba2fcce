//! A changelog window: the snapshots between two bounds, and the policy that turns them into rows
//! (decoded, netted, or a flagged full reload when they cannot be decoded).

use std::sync::Arc;

use arrow::array::RecordBatch;
use iceberg::spec::{Snapshot, TableMetadata};

use super::collapse;
use super::decode::{changelog, full_reload, snapshot_difference, window_key, Feed};
use super::filters::Filters;
use super::types::{changelog_schema, RowIds};
use crate::error::{Error, Result};
use crate::format::schema::arrow_schema;
use crate::read::caches::ReadCaches;
use crate::read::time_travel::{self, Version};

/// The snapshots after `from` (exclusive; None: from the table's creation) up to and including
/// `to` (None: the current snapshot), oldest first, along `to`'s ancestry. `table` names the table
/// in messages.
pub fn window(metadata: &TableMetadata, table: &str, from: Option<i64>, to: Option<i64>) -> Result<Vec<Arc<Snapshot>>> {
    let unknown = |id: i64| {
        let call = time_travel::snapshots_call(table);
        Error::catalog(format!("table {table} has no snapshot {id} ({call} lists them)"))
    };
    if let Some(id) = from {
        metadata.snapshot_by_id(id).ok_or_else(|| unknown(id))?;
    }
    let to = match to {
        Some(id) => metadata.snapshot_by_id(id).cloned().ok_or_else(|| unknown(id))?,
        None => match metadata.current_snapshot() {
            Some(s) => s.clone(),
            None => return Ok(vec![]),
        },
    };
    let mut out = vec![];
    let mut next = Some(to.clone());
    while let Some(s) = next {
        if Some(s.snapshot_id()) == from {
            out.reverse();
            return Ok(out);
        }
        next = s.parent_snapshot_id().and_then(|p| metadata.snapshot_by_id(p).cloned());
        out.push(s);
    }
    match from {
        None => {
            out.reverse();
            Ok(out)
        }
        Some(f) => {
            let from_seq = metadata.snapshot_by_id(f).map(|s| s.sequence_number()).unwrap_or_default();
            if from_seq > to.sequence_number() {
                Err(Error::invalid(format!(
                    "skade_changelog: from snapshot {f} is newer than to snapshot {}",
                    to.snapshot_id()
                )))
            } else {
                Err(Error::invalid(format!(
                    "skade_changelog: snapshot {f} is not an ancestor of snapshot {} of table {table}",
                    to.snapshot_id()
                )))
            }
        }
    }
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

/// Which rows a query of the window gets: its snapshots decoded (netted with `collapse`), or,
/// when they cannot be decoded, netted as the difference of the window's ends, or (plain) the
/// full reload of its end, flagged on every row (DuckDB has no notices to send). `name` names the
/// table in messages.
pub fn rows(
    metadata: &TableMetadata,
    caches: &Arc<ReadCaches>,
    name: &str,
    request: Request<'_>,
) -> Result<Vec<RecordBatch>> {
    let Request { from, to, collapse, used, filters } = request;
    let resolve = |b: Bound| -> Result<Option<i64>> {
        match b {
            Bound::Snapshot(id) => Ok(Some(id)),
            Bound::Time(us) => match time_travel::resolve(metadata, name, "TIMESTAMP", us) {
                Ok(Version::Snapshot(id)) => Ok(Some(id)),
                Ok(_) => Ok(None),
                Err(e) => Err(e),
            },
        }
    };
    // A start before the table's first snapshot (or before it existed) is its creation; an end
    // before its first snapshot is an empty window.
    let from_id = match from {
        Some(Bound::Time(us)) => match time_travel::at_time(metadata, name, us)? {
            Some(Version::Snapshot(id)) => Some(id),
            _ => None,
        },
        Some(b) => resolve(b)?,
        None => None,
    };
    let snapshots = match to {
        Some(b) => match resolve(b)? {
            Some(id) => window(metadata, name, from_id, Some(id))?,
            None => vec![],
        },
        None => window(metadata, name, from_id, None)?,
    };
    let schema = changelog_schema(arrow_schema(metadata.current_schema())?.as_ref());
    // Columns the query does not use stay NULL and unread (netting compares whole rows: see below).
    let columns = metadata.current_schema().as_struct().fields().len();
    let read: Option<Vec<usize>> = match (collapse, used.is_empty()) {
        (false, false) => Some(used.iter().copied().filter(|&c| c < columns).collect()),
        _ => None,
    };
    // (a key added since the window began does not net it: rows before could share a key)
    let key = window_key(metadata, &snapshots)?;
    // An Iceberg v3 table without a key pairs updates by row id, and nets by it.
    let row_ids = RowIds::of(metadata, key.as_ref(), collapse);
    // Netting without a key reads whole only the added files that may hold a removed row.
    let netting: Option<Vec<usize>> = match (collapse, &key, used.is_empty(), row_ids) {
        (true, None, false, RowIds::None) => Some(used.iter().copied().filter(|&c| c < columns).collect()),
        _ => None,
    };
    let to_snapshot = snapshots.last().map(|s| s.as_ref());
    let feed = changelog(metadata, caches, &snapshots, read.as_deref(), &filters, netting.as_deref(), row_ids)?;
    Ok(match feed {
        Feed::Rows(batches) if row_ids == RowIds::Kept => collapse::collapse_by_row_id(&schema, &batches)?,
        Feed::Rows(batches) if collapse => collapse::collapse(&schema, &batches, key.as_ref())?,
        Feed::Rows(batches) => batches,
        // Netted, the window is exactly the difference between its two ends: no guess needed.
        Feed::Undecodable if collapse => collapse::collapse(
            &schema,
            &snapshot_difference(metadata, caches, from_id, to_snapshot, &filters)?,
            key.as_ref(),
        )?,
        // The seed's rule.
        Feed::Undecodable => full_reload(metadata, caches, to_snapshot, read.as_deref(), &filters)?,
    })
}
