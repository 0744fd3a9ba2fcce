//! The row-level changelog of a merge-on-read Iceberg table: for each snapshot of a window, the
//! rows it inserted and the rows it deleted, with full images, tagged in Iceberg's vocabulary.
//!
//! A snapshot's inserted rows are the rows of the data files it added, minus its own position
//! deletes of them (a transaction that inserted and deleted a row never showed it). Its deleted
//! rows are read at its parent: position deletes name a file and a position; equality deletes name
//! keys, whose live rows at the parent are found by a scan pruned to the delete file's key bounds.
//! On a table with a primary key, a key deleted and inserted by one snapshot is an update.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arrow::array::StructArray;
use arrow::array::{ArrayRef, AsArray, BooleanArray, DictionaryArray, Int64Array, Int8Array, RecordBatch, StringArray};
use arrow::compute::filter_record_batch;
use arrow::datatypes::Int8Type;
use arrow::datatypes::{DataType, Field, Schema as ArrowSchema, SchemaRef as ArrowSchemaRef};
use arrow::row::{RowConverter, Rows, SortField};
use iceberg::spec::{
    DataContentType, DataFile, Datum, ManifestStatus, NestedField, NestedFieldRef, Operation, PrimitiveType, Schema,
    Snapshot, TableMetadata, Type,
};
use rayon::prelude::*;

use super::collapse::{comparable, comparable_type};
use crate::read::deletes::{with_sequence, DeleteIndex, FileDeletes};
use crate::read::filter::{ColumnStats, Prune};
use crate::read::keys::{probe, KeyColumns, KeySet};
use crate::read::scan::{ReadCaches, ScanPlan, ScanRequest};
use crate::format::schema::arrow_schema;
use crate::read::time_travel::Version;
use crate::error::{Error, Result};
use crate::lookup::probe_keys::ColumnEncoders;

pub const CHANGE_TYPE: &str = "_change_type";
pub const COMMIT_SNAPSHOT_ID: &str = "_commit_snapshot_id";
/// `_change_type` is dictionary-encoded: these are its keys, into [`CHANGE_TYPES`] (one byte a
/// row to build and compare; DuckDB reads it as a VARCHAR).
pub const INSERT: i8 = 0;
pub const DELETE: i8 = 1;
pub const UPDATE_BEFORE: i8 = 2;
pub const UPDATE_AFTER: i8 = 3;
/// Iceberg's vocabulary, byte for byte.
pub const CHANGE_TYPES: [&str; 4] = ["INSERT", "DELETE", "UPDATE_BEFORE", "UPDATE_AFTER"];

/// A `_change_type` column of the given keys.
pub fn change_column(keys: Vec<i8>) -> ArrayRef {
    let values: ArrayRef = Arc::new(StringArray::from(CHANGE_TYPES.to_vec()));
    Arc::new(DictionaryArray::<Int8Type>::new(Int8Array::from(keys), values))
}

/// The keys of a `_change_type` column (see [`change_column`]).
pub fn change_keys(column: &ArrayRef) -> &[i8] {
    column.as_dictionary::<Int8Type>().keys().values()
}
/// A virtual column: true on the rows of a full reload (see [`full_reload`]).
pub const FULL_RELOAD: &str = "_full_reload";

/// The table's columns (all nullable: a changelog row is an image) plus the change type, the
/// snapshot that made the change, and whether the row is part of a full reload.
pub fn changelog_schema(table: &ArrowSchema) -> ArrowSchemaRef {
    let mut fields: Vec<Field> = table.fields().iter().map(|f| f.as_ref().clone().with_nullable(true)).collect();
    let change_type = DataType::Dictionary(Box::new(DataType::Int8), Box::new(DataType::Utf8));
    fields.push(Field::new(CHANGE_TYPE, change_type, false));
    fields.push(Field::new(COMMIT_SNAPSHOT_ID, DataType::Int64, false));
    fields.push(Field::new(FULL_RELOAD, DataType::Boolean, false));
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

/// A query's filters on the changelog, as pruning predicates (DuckDB still applies every filter
/// exactly to the rows; these only skip what cannot match).
#[derive(Default)]
pub struct Filters {
    /// On the table's columns: files and row groups whose bounds exclude them are not read. On a
    /// table with a primary key only the key columns' part: both images of an update share the
    /// key, while a filter on another column could drop the one that pairs it.
    pub rows: Option<Prune>,
    /// On `_commit_snapshot_id`: the window's snapshots that cannot match are not decoded (plain
    /// feeds only: netting needs every snapshot).
    pub snapshots: Option<Prune>,
}

/// The field id `_commit_snapshot_id` has in [`Filters::parse`]'s predicates (no table's).
const COMMIT_FIELD_ID: i32 = i32::MAX;

impl Filters {
    /// From the shim's description of the filters on the changelog's columns (the table's, then
    /// `_change_type`, `_commit_snapshot_id`).
    pub fn parse(json: &str, constants: Option<&StructArray>, table: &Schema, collapse: bool) -> Result<Filters> {
        let mut fields: Vec<NestedFieldRef> = table.as_struct().fields().to_vec();
        let id = table.highest_field_id();
        let change = NestedField::optional(id + 1, CHANGE_TYPE, Type::Primitive(PrimitiveType::String));
        fields.push(Arc::new(change));
        let commit = NestedField::optional(COMMIT_FIELD_ID, COMMIT_SNAPSHOT_ID, Type::Primitive(PrimitiveType::Long));
        fields.push(Arc::new(commit));
        let extended = Schema::builder().with_fields(fields).build()?;
        let Some(prune) = Prune::parse(json, constants, &extended)? else {
            return Ok(Filters::default());
        };
        let key: Option<HashSet<i32>> = KeyColumns::of(table)?.map(|k| k.field_ids.into_iter().collect());
        let rows = prune.restrict(&|f| match &key {
            Some(key) => key.contains(&f),
            None => f <= id,
        });
        let snapshots = if collapse { None } else { prune.restrict(&|f| f == COMMIT_FIELD_ID) };
        Ok(Filters { rows, snapshots })
    }

    fn may_match(&self, file: &DataFile) -> bool {
        self.rows.as_ref().is_none_or(|p| p.may_match(file))
    }

    fn may_match_snapshot(&self, snapshot: &Snapshot) -> bool {
        self.snapshots.as_ref().is_none_or(|p| p.may_match_stats(&SnapshotId(Datum::long(snapshot.snapshot_id()))))
    }
}

/// A snapshot's id as the statistics of `_commit_snapshot_id`.
struct SnapshotId(Datum);

impl ColumnStats for SnapshotId {
    fn lower(&self, field_id: i32) -> Option<&Datum> {
        (field_id == COMMIT_FIELD_ID).then_some(&self.0)
    }
    fn upper(&self, field_id: i32) -> Option<&Datum> {
        self.lower(field_id)
    }
    fn null_count(&self, field_id: i32) -> Option<u64> {
        (field_id == COMMIT_FIELD_ID).then_some(0)
    }
    fn row_count(&self) -> u64 {
        1
    }
}

/// A window's changes, or why it cannot be told row by row.
pub enum Feed {
    Rows(Vec<RecordBatch>),
    /// Some snapshot of the window cannot be decoded exactly (see [`changelog`]): the reason.
    Undecodable(String),
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
    table: &str,
    window: &[Arc<Snapshot>],
    used: Option<&[usize]>,
    filters: &Filters,
    netting: Option<&[usize]>,
) -> Result<Feed> {
    if let Some(p) = window.first().and_then(|s| s.parent_snapshot_id()) {
        if metadata.snapshot_by_id(p).is_none() {
            return Ok(Feed::Undecodable(format!(
                "the snapshots of table {table} before snapshot {} were expired",
                window[0].snapshot_id()
            )));
        }
    }
    let schema = metadata.current_schema().clone();
    let key = KeyColumns::of(&schema)?;
    let out_schema = changelog_schema(arrow_schema(&schema)?.as_ref());
    let read: Option<Vec<usize>> = used.map(|u| u.iter().chain(key.iter().flat_map(|k| &k.indexes)).copied().collect());
    let decode: Vec<&Arc<Snapshot>> = window.iter().filter(|s| filters.may_match_snapshot(s)).collect();
    // Decoding, pairing and tagging run per snapshot, in parallel; the batches keep window order.
    let decoded: Vec<Result<Decoded>> = decode
        .par_iter()
        .map(|s| snapshot_changes(metadata, caches, table, s, read.as_deref(), filters, netting.is_some()))
        .collect();
    let mut changes = vec![];
    for d in decoded {
        match d? {
            Decoded::Changes(c) => changes.push(c),
            Decoded::Undecodable(reason) => return Ok(Feed::Undecodable(reason)),
        }
    }
    if let Some(used) = netting {
        read_deferred(metadata, caches, &mut changes, used, filters)?;
    }
    let tagged: Vec<Vec<RecordBatch>> = changes
        .into_par_iter()
        .zip(decode.par_iter())
        .map(|(c, s)| c.into_batches(&out_schema, s.snapshot_id(), key.as_ref()))
        .collect::<Result<_>>()?;
    Ok(Feed::Rows(tagged.into_iter().flatten().collect()))
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

fn rows_at(
    metadata: &TableMetadata,
    caches: &Arc<ReadCaches>,
    snapshot_id: i64,
    used: Option<&[usize]>,
    filters: &Filters,
) -> Result<Vec<RecordBatch>> {
    let request = ScanRequest {
        version: Version::Snapshot(snapshot_id),
        columns: (0..metadata.current_schema().as_struct().fields().len()).collect(),
        prune: filters.rows.clone(),
        staged: &[],
        staged_deletes: &[],
        row_ids: None,
    };
    let plan = ScanPlan::plan(metadata, caches.clone(), request)?;
    read_all(plan.read_only(used))
}

fn tag(
    schema: &ArrowSchemaRef,
    batches: Vec<RecordBatch>,
    change: i8,
    snapshot_id: i64,
    reload: bool,
) -> Result<Vec<RecordBatch>> {
    batches
        .iter()
        .map(|b| with_tags(schema, b, change_column(vec![change; b.num_rows()]), snapshot_id, reload))
        .collect()
}

/// A batch of table rows with the change columns appended.
fn with_tags(
    schema: &ArrowSchemaRef,
    batch: &RecordBatch,
    tags: ArrayRef,
    snapshot_id: i64,
    reload: bool,
) -> Result<RecordBatch> {
    let mut columns = batch.columns().to_vec();
    columns.push(tags);
    columns.push(Arc::new(Int64Array::from(vec![snapshot_id; batch.num_rows()])));
    columns.push(Arc::new(BooleanArray::from(vec![reload; batch.num_rows()])));
    Ok(RecordBatch::try_new(schema.clone(), columns)?)
}

/// The full images one snapshot inserted and deleted.
#[derive(Default)]
struct SnapshotChanges {
    inserted: Vec<RecordBatch>,
    deleted: Vec<RecordBatch>,
    /// The inserted side, when it is read later (see [`read_deferred`]): each added file with
    /// the snapshot's own deletes of it.
    deferred: Vec<(DataFile, FileDeletes)>,
}

/// The removed rows' first-column values, sorted, in the row format (which orders like the
/// values, so they compare with a file's bounds converted the same way).
struct RemovedFirst {
    encoders: ColumnEncoders,
    field_id: i32,
    values: Vec<Box<[u8]>>,
    null: bool,
}

impl RemovedFirst {
    /// None: files cannot be told apart by it (a float column: NaN is outside every bound; a
    /// nested one has no bounds).
    fn of(schema: &Schema, removed: &[&RecordBatch]) -> Result<Option<RemovedFirst>> {
        let Some(first) = schema.as_struct().fields().first() else {
            return Ok(None);
        };
        let Some(column) = KeyColumns::for_fields(schema, &[first.id])? else {
            return Ok(None);
        };
        let ty = &column.types[0];
        if ty.is_nested() || matches!(ty, DataType::Float16 | DataType::Float32 | DataType::Float64) {
            return Ok(None); // (nested values have no bounds)
        }
        let Ok(encoders) = ColumnEncoders::new(&column) else {
            return Ok(None);
        };
        let mut values = vec![];
        let mut null = false;
        for batch in removed {
            null |= batch.column(0).null_count() > 0;
            values.extend(encoders.column(0, batch.column(0))?);
        }
        values.sort_unstable();
        values.dedup();
        Ok(Some(RemovedFirst { encoders, field_id: first.id, values, null }))
    }

    /// Whether `file` may hold a row whose first column equals a removed row's.
    fn may_hold(&self, file: &DataFile) -> bool {
        if self.null && file.null_value_counts().get(&self.field_id).is_none_or(|n| *n > 0) {
            return true;
        }
        let lower = self.encoders.bound(0, file.lower_bounds().get(&self.field_id));
        let upper = self.encoders.bound(0, file.upper_bounds().get(&self.field_id));
        let start = lower.map_or(0, |lower| self.values.partition_point(|v| *v < lower));
        match (self.values.get(start), upper) {
            (None, _) => false,
            (Some(v), Some(upper)) => *v <= upper,
            (Some(_), None) => true,
        }
    }
}

enum Decoded {
    Changes(SnapshotChanges),
    Undecodable(String),
}

fn snapshot_changes(
    metadata: &TableMetadata,
    caches: &Arc<ReadCaches>,
    table: &str,
    snapshot: &Snapshot,
    read: Option<&[usize]>,
    filters: &Filters,
    netting: bool,
) -> Result<Decoded> {
    if snapshot.summary().operation == Operation::Replace {
        return Ok(Decoded::Changes(SnapshotChanges::default())); // by Iceberg's definition: same rows
    }
    let schema = metadata.current_schema().clone();
    let id = snapshot.snapshot_id();
    let seq = snapshot.sequence_number();
    let mut added_data: Vec<DataFile> = vec![];
    let mut added_deletes: Vec<DataFile> = vec![];
    let mut removed_data: Vec<DataFile> = vec![];
    let mut removed_deletes: Vec<DataFile> = vec![];
    for manifest in caches.manifests.manifest_list(metadata, snapshot)?.iter() {
        if manifest.added_snapshot_id != id {
            continue; // carried forward unchanged (merged manifests hold EXISTING entries only)
        }
        for e in caches.manifests.manifest(manifest)?.iter() {
            if e.snapshot_id != id {
                continue;
            }
            let data = e.file().content_type() == DataContentType::Data;
            match (e.entry.status, data) {
                (ManifestStatus::Added, true) => added_data.push(e.file().clone()),
                (ManifestStatus::Added, false) => added_deletes.push(e.file().clone()),
                (ManifestStatus::Deleted, true) => removed_data.push(e.file().clone()),
                (ManifestStatus::Deleted, false) => removed_deletes.push(e.file().clone()),
                (ManifestStatus::Existing, _) => {}
            }
        }
    }
    // Whether a rewrite keeps rows unchanged is told by comparing whole rows: read them all.
    let read = if removed_data.is_empty() { read } else { None };
    // Files and row groups the filters exclude are not read.
    let only = |plan: ScanPlan| plan.with_prune(filters.rows.clone()).read_only(read);

    // Inserted: the added files, minus this snapshot's own deletes of their rows.
    let own = DeleteIndex::load(&caches.deletes, &schema, &added_deletes.iter().map(|f| (seq, f)).collect::<Vec<_>>())?;
    let wanted: Vec<&DataFile> = added_data.iter().filter(|f| filters.may_match(f)).collect();
    // Netting (rewrites aside, which compare their own rows): read once the removed rows are known.
    let defer = netting && removed_data.is_empty();
    let deferred: Vec<(DataFile, FileDeletes)> = match defer {
        true => wanted.iter().map(|f| ((*f).clone(), own.for_file(f.file_path(), seq))).collect(),
        false => vec![],
    };
    let inserted = match defer {
        true => vec![],
        false => {
            let files =
                wanted.iter().map(|f| (f.file_path().to_string(), f.record_count(), own.for_file(f.file_path(), seq)));
            read_all(only(ScanPlan::for_files(schema.clone(), caches.clone(), files.collect())?))?
        }
    };

    // Deleted: rows live at the parent that this snapshot's delete files or removals remove.
    let mut deleted = vec![];
    let parent = snapshot.parent_snapshot_id().and_then(|p| metadata.snapshot_by_id(p));
    let removes = !added_deletes.is_empty() || !removed_data.is_empty() || !removed_deletes.is_empty();
    if let (Some(parent), true) = (parent, removes) {
        let at_parent = caches.manifests.snapshot_files(metadata, parent)?;
        let parent_deletes = DeleteIndex::load(&caches.deletes, &schema, &with_sequence(&at_parent.deletes))?;
        let live: HashMap<&str, (i64, &DataFile)> =
            at_parent.data.iter().map(|e| (e.file().file_path(), (e.sequence_number, e.file()))).collect();
        let removed: HashSet<&str> = removed_data.iter().map(|f| f.file_path()).collect();
        // A removed delete file un-deletes its rows, unless their files are gone as well.
        for f in &removed_deletes {
            let harmless = f.content_type() == DataContentType::PositionDeletes
                && caches
                    .deletes
                    .positions(f)?
                    .by_path
                    .keys()
                    .all(|p| removed.contains(p.as_str()) || !live.contains_key(p.as_str()));
            if !harmless {
                return Ok(Decoded::Undecodable(format!(
                    "snapshot {id} of table {table} removes the delete file {} while rows it deleted remain",
                    f.file_path()
                )));
            }
        }
        let mut files = vec![];
        // Removed data files: all their rows live at the parent.
        for path in &removed {
            if let Some((file_seq, file)) = live.get(path).filter(|(_, f)| filters.may_match(f)) {
                files.push((path.to_string(), file.record_count(), parent_deletes.for_file(path, *file_seq)));
            }
        }
        // Position deletes: the named rows of files live at the parent, unless already deleted.
        let mut by_file: HashMap<&str, Vec<u64>> = HashMap::new();
        let mut position_files = vec![];
        for f in added_deletes.iter().filter(|f| f.content_type() == DataContentType::PositionDeletes) {
            position_files.push(caches.deletes.positions(f)?);
        }
        for p in &position_files {
            for (path, positions) in &p.by_path {
                let wanted = |(p, (_, f)): &(&&str, &(i64, &DataFile))| !removed.contains(**p) && filters.may_match(f);
                if let Some((path, _)) = live.get_key_value(path.as_str()).filter(wanted) {
                    by_file.entry(path).or_default().extend(positions);
                }
            }
        }
        for (path, mut positions) in by_file {
            let (file_seq, file) = live[path];
            positions.sort_unstable();
            positions.dedup();
            let before = parent_deletes.for_file(path, file_seq);
            // Keep exactly the newly deleted rows: everything else of the file, and what was
            // deleted before, is "deleted" here (built in position order: no sort).
            let rows = file.record_count() as usize;
            let mut doomed = vec![true; rows];
            for p in positions.iter().map(|p| *p as usize).filter(|p| *p < rows) {
                doomed[p] = false;
            }
            for p in before.positions.iter().map(|p| *p as usize).filter(|p| *p < rows) {
                doomed[p] = true;
            }
            let mask: Vec<u64> = (0..file.record_count()).filter(|p| doomed[*p as usize]).collect();
            let deletes = FileDeletes { positions: Arc::new(mask), equality: before.equality.clone() };
            files.push((path.to_string(), file.record_count(), deletes));
        }
        deleted.extend(read_all(only(ScanPlan::for_files(schema.clone(), caches.clone(), files)?))?);

        // Equality deletes: the parent's live rows whose key is in the delete file (rows of
        // removed files are already counted).
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
                prune: Prune::and(set_key.overlap_prune(std::slice::from_ref(f)), filters.rows.clone()),
                staged: &[],
                staged_deletes: &[],
                row_ids: None,
            };
            // the delete's key columns are read too: rows are matched on them
            let with_keys: Option<Vec<usize>> = read.map(|c| c.iter().chain(&set_key.indexes).copied().collect());
            let plan = ScanPlan::plan(metadata, caches.clone(), request)?
                .without_files(&removed)
                .read_only(with_keys.as_deref());
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
    let changes = SnapshotChanges { inserted, deleted, deferred };
    if removed_data.is_empty() {
        return Ok(Decoded::Changes(changes));
    }
    Ok(match changes.without_carry_overs()? {
        Some(changes) => Decoded::Changes(changes),
        None => Decoded::Undecodable(format!(
            "snapshot {id} of table {table} rewrites files and its rows' types cannot be compared"
        )),
    })
}

/// Netting a window of a table without a key compares whole rows, but only an added row equal
/// to a removed one can cancel it. So the removed rows are read first (every column), and then
/// the deferred inserted sides: an added file whole only if its first column's bounds hold a
/// removed row's first value, the others only the columns the query uses (`used`) and the first.
fn read_deferred(
    metadata: &TableMetadata,
    caches: &Arc<ReadCaches>,
    changes: &mut [SnapshotChanges],
    used: &[usize],
    filters: &Filters,
) -> Result<()> {
    let schema = metadata.current_schema().clone();
    let removed: Vec<&RecordBatch> = changes.iter().flat_map(|c| &c.deleted).collect();
    let first = RemovedFirst::of(&schema, &removed)?;
    let mut used: Vec<usize> = used.iter().copied().chain([0]).collect();
    used.sort_unstable();
    used.dedup();
    changes.par_iter_mut().try_for_each(|c| -> Result<()> {
        let (whole, part): (Vec<_>, Vec<_>) = std::mem::take(&mut c.deferred)
            .into_iter()
            .partition(|(f, _)| first.as_ref().is_none_or(|first| first.may_hold(f)));
        for (files, columns) in [(whole, None), (part, Some(used.as_slice()))] {
            if files.is_empty() {
                continue;
            }
            let files = files.into_iter().map(|(f, d)| (f.file_path().to_string(), f.record_count(), d)).collect();
            let plan = ScanPlan::for_files(schema.clone(), caches.clone(), files)?.with_prune(filters.rows.clone());
            c.inserted.extend(read_all(plan.read_only(columns))?);
        }
        Ok(())
    })
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
        let mut deleted_tags: Vec<Vec<i8>> = self.deleted.iter().map(|b| vec![DELETE; b.num_rows()]).collect();
        let mut inserted_tags: Vec<Vec<i8>> = self.inserted.iter().map(|b| vec![INSERT; b.num_rows()]).collect();
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
            .map(|(batch, tags)| with_tags(schema, batch, change_column(tags), snapshot_id, false))
            .collect()
    }

    /// The same changes without the rows removed and added back unchanged (a multiset
    /// difference of whole rows). None: the rows' types cannot be compared.
    fn without_carry_overs(self) -> Result<Option<SnapshotChanges>> {
        let Some(first) = self.deleted.first().filter(|_| !self.inserted.is_empty()) else {
            return Ok(Some(self));
        };
        let types = first.schema().fields().iter().map(|f| SortField::new(comparable_type(f.data_type()))).collect();
        let Ok(converter) = RowConverter::new(types) else {
            return Ok(None);
        };
        let encode = |batches: &[RecordBatch]| -> Result<Vec<Rows>> {
            batches
                .iter()
                .map(|b| Ok(converter.convert_columns(&b.columns().iter().map(comparable).collect::<Vec<_>>())?))
                .collect()
        };
        let (old, new) = (encode(&self.deleted)?, encode(&self.inserted)?);
        let mut removed: HashMap<&[u8], usize> = HashMap::new();
        for row in old.iter().flat_map(|rows| rows.iter()) {
            *removed.entry(row.data()).or_default() += 1;
        }
        let mut carried: HashMap<&[u8], usize> = HashMap::new();
        let keep_new: Vec<Vec<bool>> = new
            .iter()
            .map(|rows| {
                rows.iter()
                    .map(|row| match removed.get_mut(row.data()).filter(|n| **n > 0) {
                        Some(n) => {
                            *n -= 1;
                            *carried.entry(row.data()).or_default() += 1;
                            false
                        }
                        None => true,
                    })
                    .collect()
            })
            .collect();
        let keep_old: Vec<Vec<bool>> = old
            .iter()
            .map(|rows| {
                rows.iter()
                    .map(|row| match carried.get_mut(row.data()).filter(|n| **n > 0) {
                        Some(n) => {
                            *n -= 1;
                            false
                        }
                        None => true,
                    })
                    .collect()
            })
            .collect();
        let filter = |batches: &[RecordBatch], keep: Vec<Vec<bool>>| -> Result<Vec<RecordBatch>> {
            batches
                .iter()
                .zip(keep)
                .map(|(b, k)| Ok(filter_record_batch(b, &BooleanArray::from(k))?))
                .filter(|b| b.as_ref().map_or(true, |b| b.num_rows() > 0))
                .collect()
        };
        Ok(Some(SnapshotChanges {
            deleted: filter(&self.deleted, keep_old)?,
            inserted: filter(&self.inserted, keep_new)?,
            deferred: vec![],
        }))
    }
}
