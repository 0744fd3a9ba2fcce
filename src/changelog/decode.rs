//! Decoding a window's changelog: every snapshot decoded (see `snapshot`) in parallel and its rows
//! tagged; the full reload of a window that cannot be decoded; the difference of two snapshots.
//!
//! A snapshot's inserted rows are the rows of the data files it added, minus its own position
//! deletes of them (a transaction that inserted and deleted a row never showed it). Its deleted
//! rows are read at its parent: position deletes name a file and a position; equality deletes name
//! keys, whose live rows at the parent are found by a scan pruned to the delete file's key bounds.
//! On a table with a primary key, a key deleted and inserted by one snapshot is an update.

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::{Field, Schema as ArrowSchema};
use iceberg::spec::{Snapshot, TableMetadata};
use rayon::prelude::*;

use super::filters::Filters;
use super::snapshot::{read_all, read_deferred, snapshot_changes, Decoded};
use super::types::{changelog_schema, tag, with_row_id, RowIds, DELETE, INSERT};
use crate::error::Result;
use crate::format::schema::{arrow_schema, by_field_id};
use crate::read::caches::ReadCaches;
use crate::read::keys::KeyColumns;
use crate::read::scan::{ScanPlan, ScanRequest};
use crate::read::time_travel::{snapshot_and_schema, Version};

/// A window's changes, or why it cannot be told row by row.
pub enum Feed {
    Rows(Vec<RecordBatch>),
    /// Some snapshot of the window cannot be decoded exactly (see [`changelog`]).
    Undecodable,
}

/// The changes of the snapshots of `window` (see [`window`]), in window order, in the schema of
/// [`changelog_schema`]. Snapshots are decoded in parallel. With `used`, only those table columns
/// (and the key columns, for pairing) are read; the others are NULL. `netting`: the columns a
/// netted feed of a table without a key uses (see [`read_deferred`]).
///
/// A `replace` snapshot (files rewritten, rows unchanged: a compaction) changes nothing. A
/// snapshot that removes data files deleted their rows live at its parent; rows it removed and
/// added back unchanged (a copy-on-write rewrite keeps a file's other rows) are no change. Two
/// things cannot be decoded exactly: a snapshot that removes delete files while rows they deleted
/// stay (those rows come back to life), and a window from the table's creation whose first
/// snapshots were expired. Then the whole feed is [`Feed::Undecodable`].
pub fn changelog(
    metadata: &TableMetadata,
    caches: &Arc<ReadCaches>,
    window: &[Arc<Snapshot>],
    used: Option<&[usize]>,
    filters: &Filters,
    netting: Option<&[usize]>,
    row_ids: RowIds,
) -> Result<Feed> {
    if let Some(p) = window.first().and_then(|s| s.parent_snapshot_id()) {
        if metadata.snapshot_by_id(p).is_none() {
            return Ok(Feed::Undecodable); // the snapshots before the window's first were expired
        }
    }
    let schema = metadata.current_schema().clone();
    let key = KeyColumns::of(&schema)?;
    let out_schema = match row_ids {
        RowIds::Kept => changelog_schema(&with_row_id(arrow_schema(&schema)?.as_ref())),
        _ => changelog_schema(arrow_schema(&schema)?.as_ref()),
    };
    let read: Option<Vec<usize>> = used.map(|u| u.iter().chain(key.iter().flat_map(|k| &k.indexes)).copied().collect());
    let decode: Vec<&Arc<Snapshot>> = window.iter().filter(|s| filters.may_match_snapshot(s)).collect();
    // An Iceberg v3 table without a key pairs updates by row id (a feed netted by value, none).
    let lineage = row_ids != RowIds::None;
    // Decoding, pairing and tagging run per snapshot, in parallel; the batches keep window order.
    let decoded: Vec<Result<Decoded>> = decode
        .par_iter()
        .map(|s| snapshot_changes(metadata, caches, s, read.as_deref(), filters, netting.is_some(), lineage))
        .collect();
    let mut changes = vec![];
    for d in decoded {
        match d? {
            Decoded::Changes(c) => changes.push(c),
            Decoded::Undecodable => return Ok(Feed::Undecodable),
        }
    }
    if let Some(used) = netting {
        read_deferred(metadata, caches, &mut changes, used, filters)?;
    }
    let tagged: Vec<Vec<RecordBatch>> = changes
        .into_par_iter()
        .zip(decode.par_iter())
        .map(|(c, s)| c.into_batches(&out_schema, s.snapshot_id(), snapshot_key(metadata, s, key.as_ref()), row_ids))
        .collect::<Result<_>>()?;
    Ok(Feed::Rows(tagged.into_iter().flatten().collect()))
}

/// The key `snapshot` was committed under: the table's current one (`key`), unless the snapshot
/// records a schema with other identifier fields (a key added by ALTER TABLE since: before it,
/// rows could share a key, so they are not paired or netted by it). A snapshot recording no
/// schema is taken to have the current key.
pub fn snapshot_key<'k>(
    metadata: &TableMetadata,
    snapshot: &Snapshot,
    key: Option<&'k KeyColumns>,
) -> Option<&'k KeyColumns> {
    let key = key?;
    let Some(schema) = snapshot.schema_id().and_then(|id| metadata.schema_by_id(id)) else {
        return Some(key);
    };
    let mut ids: Vec<i32> = schema.identifier_field_ids().collect();
    ids.sort_unstable();
    (ids == key.field_ids).then_some(key)
}

/// The key a whole window of snapshots was committed under (see [`snapshot_key`]): None when any
/// of them was committed without it.
pub fn window_key(metadata: &TableMetadata, window: &[Arc<Snapshot>]) -> Result<Option<KeyColumns>> {
    let key = KeyColumns::of(metadata.current_schema())?;
    let all = window.iter().all(|s| snapshot_key(metadata, s, key.as_ref()).is_some());
    Ok(key.filter(|_| all))
}

/// The seed's full-reload rule for a window that cannot be decoded: every row live at `to` (None:
/// the table has no snapshot) as an INSERT of `to`, flagged [`FULL_RELOAD`]. A consumer replaces
/// what it holds with them.
pub fn full_reload(
    metadata: &TableMetadata,
    caches: &Arc<ReadCaches>,
    to: Option<&Snapshot>,
    used: Option<&[usize]>,
    filters: &Filters,
) -> Result<Vec<RecordBatch>> {
    let Some(to) = to.filter(|to| filters.may_match_snapshot(to)) else {
        return Ok(vec![]);
    };
    let out_schema = changelog_schema(arrow_schema(metadata.current_schema())?.as_ref());
    let rows = rows_at(metadata, caches, to.snapshot_id(), used, filters)?;
    tag(&out_schema, rows, INSERT, to.snapshot_id(), true)
}

/// The rows live at `from` as DELETEs and those live at `to` as INSERTs, all of snapshot `to`:
/// netted by `collapse`, exactly the window's effect, without decoding its snapshots.
pub fn snapshot_difference(
    metadata: &TableMetadata,
    caches: &Arc<ReadCaches>,
    from: Option<i64>,
    to: Option<&Snapshot>,
    filters: &Filters,
) -> Result<Vec<RecordBatch>> {
    let Some(to) = to else {
        return Ok(vec![]);
    };
    let out_schema = changelog_schema(arrow_schema(metadata.current_schema())?.as_ref());
    let at = |id: i64| rows_at(metadata, caches, id, None, filters);
    let mut out = match from {
        Some(from) => tag(&out_schema, at(from)?, DELETE, to.snapshot_id(), false)?,
        None => vec![],
    };
    out.extend(tag(&out_schema, at(to.snapshot_id())?, INSERT, to.snapshot_id(), false)?);
    Ok(out)
}

/// The rows live at snapshot `snapshot_id`, in the table's current columns: read in the
/// snapshot's own schema (it may predate an ADD, DROP or RENAME COLUMN or a promotion), then each
/// column found by its field id (see `schema::by_field_id`). `used`: indexes of current columns.
fn rows_at(
    metadata: &TableMetadata,
    caches: &Arc<ReadCaches>,
    snapshot_id: i64,
    used: Option<&[usize]>,
    filters: &Filters,
) -> Result<Vec<RecordBatch>> {
    let version = Version::Snapshot(snapshot_id);
    let (_, schema_at) = snapshot_and_schema(metadata, version)?;
    let ids_at: Vec<i32> = schema_at.as_struct().fields().iter().map(|f| f.id).collect();
    let request = ScanRequest {
        version,
        columns: (0..ids_at.len()).collect(),
        prune: filters.rows.clone(),
        staged: &[],
        staged_deletes: &[],
        row_ids: None,
    };
    let plan = ScanPlan::plan(metadata, caches.clone(), request)?;
    let current = metadata.current_schema().as_struct().fields();
    let read: Option<Vec<usize>> = used.map(|used| {
        let ids = used.iter().filter_map(|&c| current.get(c)).map(|f| f.id);
        ids.filter_map(|id| ids_at.iter().position(|at| *at == id)).collect()
    });
    let target = arrow_schema(metadata.current_schema())?;
    let nullable: Vec<Field> = target.fields().iter().map(|f| f.as_ref().clone().with_nullable(true)).collect();
    let target = Arc::new(ArrowSchema::new_with_metadata(nullable, target.metadata().clone()));
    let current = metadata.current_schema();
    read_all(plan.read_only(read.as_deref()))?.iter().map(|b| by_field_id(b, &target, current)).collect()
}
