//! The row-level changelog of a merge-on-read Iceberg table: for each snapshot of a window, the
//! rows it inserted and the rows it deleted, with full images, tagged in Iceberg's vocabulary.
//!
//! A snapshot's inserted rows are the rows of the data files it added, minus its own position
//! deletes of them (a transaction that inserted and deleted a row never showed it). Its deleted
//! rows are read at its parent: position deletes name a file and a position; equality deletes name
//! keys, whose live rows at the parent are found by a scan pruned to the delete file's key bounds.
//! On a table with a primary key, a key deleted and inserted by one snapshot is an update.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray, Int64Array, RecordBatch, StringArray};
use arrow::compute::filter_record_batch;
use arrow::datatypes::{DataType, Field, Schema as ArrowSchema, SchemaRef as ArrowSchemaRef};
use arrow::row::Rows;
use iceberg::spec::{DataContentType, DataFile, ManifestStatus, Snapshot, TableMetadata};
use rayon::prelude::*;

use super::deletes::{with_sequence, DeleteIndex, FileDeletes};
use super::keys::{probe, KeyColumns, KeySet};
use super::scan::{ReadCaches, ScanPlan, ScanRequest};
use super::schema::arrow_schema;
use super::time_travel::Version;
use crate::error::{Error, Result};

pub const CHANGE_TYPE: &str = "_change_type";
pub const COMMIT_SNAPSHOT_ID: &str = "_commit_snapshot_id";
pub const INSERT: &str = "INSERT";
pub const DELETE: &str = "DELETE";
pub const UPDATE_BEFORE: &str = "UPDATE_BEFORE";
pub const UPDATE_AFTER: &str = "UPDATE_AFTER";

/// The table's columns (all nullable: a changelog row is an image) plus the change type and the
/// snapshot that made the change.
pub fn changelog_schema(table: &ArrowSchema) -> ArrowSchemaRef {
    let mut fields: Vec<Field> = table.fields().iter().map(|f| f.as_ref().clone().with_nullable(true)).collect();
    fields.push(Field::new(CHANGE_TYPE, DataType::Utf8, false));
    fields.push(Field::new(COMMIT_SNAPSHOT_ID, DataType::Int64, false));
    Arc::new(ArrowSchema::new(fields))
}

/// The snapshots after `from` (exclusive; None: from the table's creation) up to and including
/// `to` (None: the current snapshot), oldest first, along `to`'s ancestry.
pub fn window(metadata: &TableMetadata, table: &str, from: Option<i64>, to: Option<i64>) -> Result<Vec<Arc<Snapshot>>> {
    let unknown =
        |id: i64| Error::catalog(format!("table {table} has no snapshot {id} (skade_snapshots('{table}') lists them)"));
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

/// The changes of the snapshots of `window` (see [`window`]), in window order, in the schema of
/// [`changelog_schema`]. Snapshots are decoded in parallel. With `used`, only those table columns
/// (and the key columns, for pairing) are read; the others are NULL.
pub fn changelog(
    metadata: &TableMetadata,
    caches: &Arc<ReadCaches>,
    table: &str,
    window: &[Arc<Snapshot>],
    used: Option<&[usize]>,
) -> Result<Vec<RecordBatch>> {
    let schema = metadata.current_schema().clone();
    let key = KeyColumns::of(&schema)?;
    let out_schema = changelog_schema(arrow_schema(&schema)?.as_ref());
    let read: Option<Vec<usize>> = used.map(|u| u.iter().chain(key.iter().flat_map(|k| &k.indexes)).copied().collect());
    let batches: Vec<Result<Vec<RecordBatch>>> = window
        .par_iter()
        .map(|s| {
            let changes = snapshot_changes(metadata, caches, table, s, read.as_deref())?;
            changes.into_batches(&out_schema, s.snapshot_id(), key.as_ref())
        })
        .collect();
    let mut out = vec![];
    for b in batches {
        out.extend(b?);
    }
    Ok(out)
}

/// The full images one snapshot inserted and deleted.
struct SnapshotChanges {
    inserted: Vec<RecordBatch>,
    deleted: Vec<RecordBatch>,
}

fn snapshot_changes(
    metadata: &TableMetadata,
    caches: &Arc<ReadCaches>,
    table: &str,
    snapshot: &Snapshot,
    read: Option<&[usize]>,
) -> Result<SnapshotChanges> {
    let only = |plan: ScanPlan| match read {
        Some(columns) => plan.read_only(columns),
        None => plan,
    };
    let schema = metadata.current_schema().clone();
    let id = snapshot.snapshot_id();
    let seq = snapshot.sequence_number();
    let mut added_data: Vec<DataFile> = vec![];
    let mut added_deletes: Vec<DataFile> = vec![];
    for manifest in caches.manifests.manifest_list(metadata, snapshot)?.iter() {
        if manifest.added_snapshot_id != id {
            continue; // carried forward unchanged (merged manifests hold EXISTING entries only)
        }
        for e in caches.manifests.manifest(manifest)?.iter() {
            if e.snapshot_id != id {
                continue;
            }
            match (e.entry.status, e.file().content_type()) {
                (ManifestStatus::Added, DataContentType::Data) => added_data.push(e.file().clone()),
                (ManifestStatus::Added, _) => added_deletes.push(e.file().clone()),
                (ManifestStatus::Deleted, _) => {
                    return Err(Error::not_implemented(format!(
                        "skade_changelog: snapshot {id} of table {table} removes files (a rewrite or an \
                         overwrite by another engine); decoding such snapshots is not supported yet"
                    )))
                }
                (ManifestStatus::Existing, _) => {}
            }
        }
    }

    // Inserted: the added files, minus this snapshot's own deletes of their rows.
    let own = DeleteIndex::load(&caches.deletes, &schema, &added_deletes.iter().map(|f| (seq, f)).collect::<Vec<_>>())?;
    let files = added_data
        .iter()
        .map(|f| (f.file_path().to_string(), f.record_count(), own.for_file(f.file_path(), seq)))
        .collect();
    let inserted = read_all(only(ScanPlan::for_files(schema.clone(), caches.clone(), files)?))?;

    // Deleted: rows live at the parent that this snapshot's delete files remove.
    let mut deleted = vec![];
    let parent = snapshot.parent_snapshot_id().and_then(|p| metadata.snapshot_by_id(p));
    if let (Some(parent), false) = (parent, added_deletes.is_empty()) {
        let at_parent = caches.manifests.snapshot_files(metadata, parent)?;
        let parent_deletes = DeleteIndex::load(&caches.deletes, &schema, &with_sequence(&at_parent.deletes))?;
        let live: HashMap<&str, (i64, &DataFile)> =
            at_parent.data.iter().map(|e| (e.file().file_path(), (e.sequence_number, e.file()))).collect();
        // Position deletes: the named rows of files live at the parent, unless already deleted.
        let mut by_file: HashMap<&str, Vec<u64>> = HashMap::new();
        let mut position_files = vec![];
        for f in added_deletes.iter().filter(|f| f.content_type() == DataContentType::PositionDeletes) {
            position_files.push(caches.deletes.positions(f)?);
        }
        for p in &position_files {
            for (path, positions) in &p.by_path {
                if let Some((path, _)) = live.get_key_value(path.as_str()) {
                    by_file.entry(path).or_default().extend(positions);
                }
            }
        }
        let mut files = vec![];
        for (path, mut positions) in by_file {
            let (file_seq, file) = live[path];
            positions.sort_unstable();
            positions.dedup();
            let before = parent_deletes.for_file(path, file_seq);
            // Keep exactly the newly deleted rows: everything else of the file is "deleted" here.
            let rows = file.record_count() as usize;
            let mut doomed = vec![true; rows];
            for p in positions.iter().map(|p| *p as usize).filter(|p| *p < rows) {
                doomed[p] = false;
            }
            let mut mask: Vec<u64> = (0..file.record_count()).filter(|p| doomed[*p as usize]).collect();
            mask.extend(before.positions.iter().copied());
            mask.sort_unstable();
            mask.dedup();
            let deletes = FileDeletes { positions: Arc::new(mask), equality: before.equality.clone() };
            files.push((path.to_string(), file.record_count(), deletes));
        }
        deleted.extend(read_all(only(ScanPlan::for_files(schema.clone(), caches.clone(), files)?))?);

        // Equality deletes: the parent's live rows whose key is in the delete file.
        for f in added_deletes.iter().filter(|f| f.content_type() == DataContentType::EqualityDeletes) {
            let set = caches.deletes.equality(f, &schema)?;
            let Some(range) = &set.range else {
                continue;
            };
            let Some(set_key) = KeyColumns::for_fields(&schema, &set.field_ids)? else {
                continue;
            };
            let request = ScanRequest {
                version: Version::Snapshot(parent.snapshot_id()),
                columns: (0..schema.as_struct().fields().len()).collect(),
                prune: set_key.overlap_prune(std::slice::from_ref(f)),
                staged: &[],
                staged_deletes: &[],
                row_ids: None,
            };
            let plan = match read {
                // the delete's key columns are read too: rows are matched on them
                Some(columns) => ScanPlan::plan(metadata, caches.clone(), request)?
                    .read_only(&columns.iter().chain(&set_key.indexes).copied().collect::<Vec<_>>()),
                None => ScanPlan::plan(metadata, caches.clone(), request)?,
            };
            let converter = set_key.converter()?;
            for batch in read_all(plan)? {
                let columns: Vec<ArrayRef> = set_key.indexes.iter().map(|&i| batch.column(i).clone()).collect();
                let mut keep = vec![false; batch.num_rows()];
                probe(&converter, range, &columns, |i, k| {
                    keep[i] = set.keys.contains(k);
                    true
                })?;
                if keep.iter().any(|k| *k) {
                    deleted.push(filter_record_batch(&batch, &BooleanArray::from(keep))?);
                }
            }
        }
    }
    Ok(SnapshotChanges { inserted, deleted })
}

fn read_all(plan: ScanPlan) -> Result<Vec<RecordBatch>> {
    let parts: Vec<Result<Vec<RecordBatch>>> =
        (0..plan.task_count()).into_par_iter().map(|t| plan.open(t)?.map(|b| Ok(b?)).collect()).collect();
    let mut out = vec![];
    for p in parts {
        out.extend(p?.into_iter().filter(|b| b.num_rows() > 0));
    }
    Ok(out)
}

impl SnapshotChanges {
    /// The tagged rows, deletions first (a snapshot's deletes apply to older rows), batches kept
    /// as read. On a primary-key table a key both deleted and inserted here is an UPDATE_BEFORE
    /// (the old image) and an UPDATE_AFTER (the new one).
    fn into_batches(
        self,
        schema: &ArrowSchemaRef,
        snapshot_id: i64,
        key: Option<&KeyColumns>,
    ) -> Result<Vec<RecordBatch>> {
        let mut deleted_tags: Vec<Vec<&'static str>> =
            self.deleted.iter().map(|b| vec![DELETE; b.num_rows()]).collect();
        let mut inserted_tags: Vec<Vec<&'static str>> =
            self.inserted.iter().map(|b| vec![INSERT; b.num_rows()]).collect();
        if let (Some(key), false, false) = (key, self.deleted.is_empty(), self.inserted.is_empty()) {
            let converter = key.converter()?;
            let old: Vec<Rows> = self.deleted.iter().map(|b| key.encode(&converter, b)).collect::<Result<_>>()?;
            let new: Vec<Rows> = self.inserted.iter().map(|b| key.encode(&converter, b)).collect::<Result<_>>()?;
            let old_keys: KeySet<&[u8]> = old.iter().flat_map(|rows| rows.iter().map(|r| r.data())).collect();
            let mut updated: KeySet<&[u8]> = KeySet::default();
            for (rows, tags) in new.iter().zip(&mut inserted_tags) {
                for (i, row) in rows.iter().enumerate() {
                    if old_keys.contains(row.data()) {
                        tags[i] = UPDATE_AFTER;
                        updated.insert(row.data());
                    }
                }
            }
            for (rows, tags) in old.iter().zip(&mut deleted_tags) {
                for (i, row) in rows.iter().enumerate() {
                    if updated.contains(row.data()) {
                        tags[i] = UPDATE_BEFORE;
                    }
                }
            }
        }
        let parts = self.deleted.iter().zip(deleted_tags).chain(self.inserted.iter().zip(inserted_tags));
        parts
            .filter(|(b, _)| b.num_rows() > 0)
            .map(|(batch, tags)| {
                let mut columns = batch.columns().to_vec();
                columns.push(Arc::new(StringArray::from(tags)));
                columns.push(Arc::new(Int64Array::from(vec![snapshot_id; batch.num_rows()])));
                Ok(RecordBatch::try_new(schema.clone(), columns)?)
            })
            .collect()
    }
}
