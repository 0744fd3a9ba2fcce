//! One snapshot's changes, with full images: the rows of the data files it added minus its own
//! deletes of them, and the rows live at its parent that its delete files and file removals
//! remove; rows a rewrite removed and added back unchanged are none; on a table with a primary
//! key, a key deleted and inserted by the snapshot is an update.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BooleanArray, RecordBatch};
use arrow::compute::filter_record_batch;
use arrow::datatypes::{DataType, SchemaRef as ArrowSchemaRef};
use arrow::row::{RowConverter, Rows, SortField};
use iceberg::spec::{DataContentType, DataFile, ManifestStatus, Operation, Schema, Snapshot, TableMetadata};
use rayon::prelude::*;

use super::compare::{comparable, comparable_type};
use super::filters::Filters;
use super::types::{change_column, with_tags, RowIds, DELETE, INSERT, UPDATE_AFTER, UPDATE_BEFORE};
use crate::error::Result;
use crate::format::name_mapping::FileNames;
use crate::read::caches::ReadCaches;
use crate::read::deletes::{with_sequence, DeleteIndex, FileDeletes};
use crate::read::filter::Prune;
use crate::read::key_bounds::ColumnEncoders;
use crate::read::keys::{probe, KeyColumns, KeySet};
use crate::read::scan::{FileLineage, ScanPlan, ScanRequest};
use crate::read::time_travel::Version;

/// The full images one snapshot inserted and deleted.
#[derive(Default)]
pub struct SnapshotChanges {
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

pub enum Decoded {
    Changes(SnapshotChanges),
    /// The snapshot's changes cannot be told row by row.
    Undecodable,
}

/// What one snapshot itself added and removed (not what it carried forward).
#[derive(Default)]
struct SnapshotFiles {
    added_data: Vec<DataFile>,
    /// The added data files' row lineage (Iceberg v3), by path.
    added_lineage: HashMap<String, FileLineage>,
    added_deletes: Vec<DataFile>,
    removed_data: Vec<DataFile>,
    removed_deletes: Vec<DataFile>,
}

impl SnapshotFiles {
    fn of(metadata: &TableMetadata, caches: &ReadCaches, snapshot: &Snapshot) -> Result<SnapshotFiles> {
        let id = snapshot.snapshot_id();
        let mut files = SnapshotFiles::default();
        for manifest in caches.manifests.manifest_list(metadata, snapshot)?.iter() {
            if manifest.added_snapshot_id != id {
                continue; // carried forward unchanged (merged manifests hold EXISTING entries only)
            }
            for e in caches.manifests.manifest(manifest)?.iter() {
                if e.snapshot_id != id {
                    continue;
                }
                let data = e.file().content_type() == DataContentType::Data;
                if data && e.entry.status == ManifestStatus::Added {
                    let lineage =
                        FileLineage { first_row_id: e.first_row_id, sequence_number: Some(e.sequence_number) };
                    files.added_lineage.insert(e.file().file_path().to_string(), lineage);
                }
                let list = match (e.entry.status, data) {
                    (ManifestStatus::Added, true) => &mut files.added_data,
                    (ManifestStatus::Added, false) => &mut files.added_deletes,
                    (ManifestStatus::Deleted, true) => &mut files.removed_data,
                    (ManifestStatus::Deleted, false) => &mut files.removed_deletes,
                    (ManifestStatus::Existing, _) => continue,
                };
                list.push(e.file().clone());
            }
        }
        Ok(files)
    }

    fn removes(&self) -> bool {
        !self.added_deletes.is_empty() || !self.removed_data.is_empty() || !self.removed_deletes.is_empty()
    }

    fn of_kind(&self, kind: DataContentType) -> impl Iterator<Item = &DataFile> {
        self.added_deletes.iter().filter(move |f| f.content_type() == kind)
    }
}

/// What a decoding reads of one snapshot: the table, the columns wanted, the filters.
struct Decoding<'a> {
    metadata: &'a TableMetadata,
    caches: &'a Arc<ReadCaches>,
    schema: Arc<Schema>,
    snapshot: &'a Snapshot,
    /// The columns to read (None: all of them).
    read: Option<&'a [usize]>,
    filters: &'a Filters,
    /// With Iceberg v3 row ids (to pair updates by): the row lineage of the files read (the
    /// snapshot's added ones and those live at its parent), by path.
    lineage: Option<HashMap<String, FileLineage>>,
}

impl Decoding<'_> {
    /// A plan over given files, pruned by the filters, reading the wanted columns.
    fn read_files(&self, files: Vec<(String, u64, FileDeletes)>) -> Result<Vec<RecordBatch>> {
        let names = FileNames::of(self.metadata)?;
        let mut plan = ScanPlan::for_files(self.schema.clone(), self.caches.clone(), files, names)?;
        if let Some(lineage) = &self.lineage {
            plan = plan.with_file_lineage(lineage);
        }
        read_all(plan.with_prune(self.filters.rows.clone()).read_only(self.read))
    }
}

/// One snapshot's changes (see the module's documentation). `netting`: the inserted side of a
/// snapshot that removes no file is left to [`read_deferred`]. `lineage` (a v3 table, not
/// netted): every row read comes with its `_row_id` and `_last_updated_sequence_number` as two
/// last columns, for [`SnapshotChanges::into_batches`] to pair updates by.
pub fn snapshot_changes(
    metadata: &TableMetadata,
    caches: &Arc<ReadCaches>,
    snapshot: &Snapshot,
    read: Option<&[usize]>,
    filters: &Filters,
    netting: bool,
    lineage: bool,
) -> Result<Decoded> {
    if snapshot.summary().operation == Operation::Replace {
        return Ok(Decoded::Changes(SnapshotChanges::default())); // by Iceberg's definition: same rows
    }
    let files = SnapshotFiles::of(metadata, caches, snapshot)?;
    // Whether a rewrite keeps rows unchanged is told by comparing whole rows: read them all.
    let read = if files.removed_data.is_empty() { read } else { None };
    let parent = snapshot.parent_snapshot_id().and_then(|p| metadata.snapshot_by_id(p));
    let lineage = match lineage {
        true => Some(files_lineage(metadata, caches, &files, parent.map(|p| p.as_ref()))?),
        false => None,
    };
    let schema = metadata.current_schema().clone();
    let decoding = Decoding { metadata, caches, schema, snapshot, read, filters, lineage };
    let (inserted, deferred) = inserted_rows(&decoding, &files, netting && files.removed_data.is_empty())?;
    let deleted = match parent.filter(|_| files.removes()) {
        Some(parent) => match deleted_rows(&decoding, &files, parent)? {
            Some(rows) => rows,
            None => return Ok(Decoded::Undecodable),
        },
        None => vec![],
    };
    let changes = SnapshotChanges { inserted, deleted, deferred };
    if files.removed_data.is_empty() {
        return Ok(Decoded::Changes(changes));
    }
    Ok(match changes.without_carry_overs()? {
        Some(changes) => Decoded::Changes(changes),
        None => Decoded::Undecodable, // a rewrite whose rows' types cannot be compared
    })
}

/// The row lineage of the files a snapshot's decoding reads: those it added, and those live at
/// its parent.
fn files_lineage(
    metadata: &TableMetadata,
    caches: &ReadCaches,
    files: &SnapshotFiles,
    parent: Option<&Snapshot>,
) -> Result<HashMap<String, FileLineage>> {
    let mut out = files.added_lineage.clone();
    if let Some(parent) = parent {
        for e in caches.manifests.snapshot_files(metadata, parent)?.data {
            let lineage = FileLineage { first_row_id: e.first_row_id, sequence_number: Some(e.sequence_number) };
            out.insert(e.file().file_path().to_string(), lineage);
        }
    }
    Ok(out)
}

/// A data file whose rows are read later, with the deletes that apply to it.
type DeferredFile = (DataFile, FileDeletes);

/// The rows of the files the snapshot added, minus its own deletes of them; or, `deferred`, those
/// files with their deletes, to be read once the window's removed rows are known.
fn inserted_rows(
    d: &Decoding<'_>,
    files: &SnapshotFiles,
    deferred: bool,
) -> Result<(Vec<RecordBatch>, Vec<DeferredFile>)> {
    let seq = d.snapshot.sequence_number();
    let own: Vec<(i64, &DataFile)> = files.added_deletes.iter().map(|f| (seq, f)).collect();
    let own = DeleteIndex::load(&d.caches.deletes, &d.schema, &own)?;
    let wanted = files.added_data.iter().filter(|f| d.filters.may_match(f));
    if deferred {
        return Ok((vec![], wanted.map(|f| (f.clone(), own.for_file(f.file_path(), seq))).collect()));
    }
    let tasks = wanted.map(|f| (f.file_path().to_string(), f.record_count(), own.for_file(f.file_path(), seq)));
    Ok((d.read_files(tasks.collect())?, vec![]))
}

/// The rows live at `parent` that the snapshot's delete files and file removals remove; None
/// when a removed delete file brings rows back to life (that cannot be told row by row).
fn deleted_rows(d: &Decoding<'_>, files: &SnapshotFiles, parent: &Snapshot) -> Result<Option<Vec<RecordBatch>>> {
    let at_parent = d.caches.manifests.snapshot_files(d.metadata, parent)?;
    let parent_deletes = DeleteIndex::load(&d.caches.deletes, &d.schema, &with_sequence(&at_parent.deletes))?;
    let live: HashMap<&str, (i64, &DataFile)> =
        at_parent.data.iter().map(|e| (e.file().file_path(), (e.sequence_number, e.file()))).collect();
    let removed: HashSet<&str> = files.removed_data.iter().map(|f| f.file_path()).collect();
    // A removed delete file un-deletes its rows, unless their files are gone as well, or a
    // delete file the snapshot adds deletes them again (an Iceberg v3 deletion vector replaces
    // the file's previous one with one holding its positions and the new ones).
    let mut added: HashMap<String, HashSet<u64>> = HashMap::new();
    for f in files.of_kind(DataContentType::PositionDeletes) {
        for (path, positions) in &d.caches.deletes.positions(f)?.by_path {
            added.entry(path.clone()).or_default().extend(positions);
        }
    }
    for f in &files.removed_deletes {
        let harmless = f.content_type() == DataContentType::PositionDeletes
            && d.caches.deletes.positions(f)?.by_path.iter().all(|(p, old)| {
                removed.contains(p.as_str())
                    || !live.contains_key(p.as_str())
                    || added.get(p).is_some_and(|new| old.iter().all(|pos| new.contains(pos)))
            });
        if !harmless {
            return Ok(None);
        }
    }
    // Removed data files: all their rows live at the parent. (In the parent's file order, and
    // below in path order: a commit's rows come in the same order on every read, so a consumer's
    // ordinals name the same rows when a window is delivered again.)
    let mut tasks = vec![];
    for e in &at_parent.data {
        let (path, file) = (e.file().file_path(), e.file());
        if removed.contains(path) && d.filters.may_match(file) {
            tasks.push((path.to_string(), file.record_count(), parent_deletes.for_file(path, e.sequence_number)));
        }
    }
    tasks.extend(position_deleted(d, files, &live, &removed, &parent_deletes)?);
    let mut deleted = d.read_files(tasks)?;
    deleted.extend(equality_deleted(d, files, parent, &removed)?);
    Ok(Some(deleted))
}

/// Read tasks of the rows the snapshot's position deletes name in files live at the parent (and
/// not removed), unless already deleted there: each file with a mask keeping exactly those rows.
fn position_deleted(
    d: &Decoding<'_>,
    files: &SnapshotFiles,
    live: &HashMap<&str, (i64, &DataFile)>,
    removed: &HashSet<&str>,
    parent_deletes: &DeleteIndex,
) -> Result<Vec<(String, u64, FileDeletes)>> {
    let mut by_file: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    let mut position_files = vec![];
    for f in files.of_kind(DataContentType::PositionDeletes) {
        position_files.push(d.caches.deletes.positions(f)?);
    }
    for p in &position_files {
        for (path, positions) in &p.by_path {
            let wanted = |(p, (_, f)): &(&&str, &(i64, &DataFile))| !removed.contains(**p) && d.filters.may_match(f);
            if let Some((path, _)) = live.get_key_value(path.as_str()).filter(wanted) {
                by_file.entry(path).or_default().extend(positions);
            }
        }
    }
    let mut tasks = vec![];
    for (path, mut positions) in by_file {
        let (file_seq, file) = live[path];
        positions.sort_unstable();
        positions.dedup();
        let before = parent_deletes.for_file(path, file_seq);
        // Keep exactly the newly deleted rows: everything else of the file, and what was deleted
        // before, is "deleted" here (built in position order: no sort).
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
        tasks.push((path.to_string(), file.record_count(), deletes));
    }
    Ok(tasks)
}

/// The rows live at `parent` whose key is in one of the snapshot's equality delete files (rows of
/// removed files are counted with those).
fn equality_deleted(
    d: &Decoding<'_>,
    files: &SnapshotFiles,
    parent: &Snapshot,
    removed: &HashSet<&str>,
) -> Result<Vec<RecordBatch>> {
    let mut deleted = vec![];
    for f in files.of_kind(DataContentType::EqualityDeletes) {
        let set = d.caches.deletes.equality(f, &d.schema)?;
        let Some(range) = &set.range else {
            continue;
        };
        let Some(set_key) = KeyColumns::for_fields(&d.schema, &set.field_ids)? else {
            continue;
        };
        let request = ScanRequest {
            version: Version::Snapshot(parent.snapshot_id()),
            columns: (0..d.schema.as_struct().fields().len()).collect(),
            prune: Prune::and(set_key.overlap_prune(std::slice::from_ref(f)), d.filters.rows.clone()),
            staged: &[],
            staged_deletes: &[],
            row_ids: None,
        };
        // the delete's key columns are read too: rows are matched on them
        let with_keys: Option<Vec<usize>> = d.read.map(|c| c.iter().chain(&set_key.indexes).copied().collect());
        let (plan, at) = ScanPlan::prepare(d.metadata, d.caches.clone(), &request)?;
        let plan = match d.lineage {
            Some(_) => plan.with_lineage(),
            None => plan,
        };
        let plan =
            plan.plan_files(d.metadata, at.as_deref(), request)?.without_files(removed).read_only(with_keys.as_deref());
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
    Ok(deleted)
}

/// Netting a window of a table without a key compares whole rows, but only an added row equal
/// to a removed one can cancel it. So the removed rows are read first (every column), and then
/// the deferred inserted sides: an added file whole only if its first column's bounds hold a
/// removed row's first value, the others only the columns the query uses (`used`) and the first.
pub fn read_deferred(
    metadata: &TableMetadata,
    caches: &Arc<ReadCaches>,
    changes: &mut [SnapshotChanges],
    used: &[usize],
    filters: &Filters,
) -> Result<()> {
    let schema = metadata.current_schema().clone();
    let names = FileNames::of(metadata)?;
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
            let plan = ScanPlan::for_files(schema.clone(), caches.clone(), files, names.clone())?
                .with_prune(filters.rows.clone());
            c.inserted.extend(read_all(plan.read_only(columns))?);
        }
        Ok(())
    })
}

pub fn read_all(plan: ScanPlan) -> Result<Vec<RecordBatch>> {
    let parts: Vec<Result<Vec<RecordBatch>>> =
        (0..plan.task_count()).into_par_iter().map(|t| plan.open(t)?.map(|b| Ok(b?)).collect()).collect();
    let mut out = vec![];
    for p in parts {
        out.extend(p?.into_iter().filter(|b| b.num_rows() > 0));
    }
    Ok(out)
}

/// On a table without a key, with Iceberg v3 row ids: a row deleted and one inserted with the
/// same `_row_id` (the second last column) by one snapshot are an update of that row.
fn pair_by_row_id(
    deleted: &[RecordBatch],
    inserted: &[RecordBatch],
    deleted_tags: &mut [Vec<i8>],
    inserted_tags: &mut [Vec<i8>],
) {
    use arrow::array::AsArray;
    use arrow::datatypes::Int64Type;
    let row_ids = |b: &RecordBatch| b.column(b.num_columns() - 2).as_primitive::<Int64Type>().clone();
    let old: HashSet<i64> = deleted.iter().flat_map(|b| row_ids(b).iter().flatten().collect::<Vec<_>>()).collect();
    if old.is_empty() {
        return;
    }
    let mut updated = HashSet::new();
    for (b, tags) in inserted.iter().zip(inserted_tags.iter_mut()) {
        for (i, id) in row_ids(b).iter().enumerate() {
            if let Some(id) = id.filter(|id| old.contains(id)) {
                tags[i] = UPDATE_AFTER;
                updated.insert(id);
            }
        }
    }
    for (b, tags) in deleted.iter().zip(deleted_tags.iter_mut()) {
        for (i, id) in row_ids(b).iter().enumerate() {
            if id.is_some_and(|id| updated.contains(&id)) {
                tags[i] = UPDATE_BEFORE;
            }
        }
    }
}

impl SnapshotChanges {
    /// The tagged rows, deletions first (a snapshot's deletes apply to older rows), batches kept
    /// as read. On a primary-key table a key both deleted and inserted here is an UPDATE_BEFORE
    /// (the old image) and an UPDATE_AFTER (the new one).
    pub fn into_batches(
        self,
        schema: &ArrowSchemaRef,
        snapshot_id: i64,
        key: Option<&KeyColumns>,
        row_ids: RowIds,
    ) -> Result<Vec<RecordBatch>> {
        let lineage = row_ids != RowIds::None;
        let mut deleted_tags: Vec<Vec<i8>> = self.deleted.iter().map(|b| vec![DELETE; b.num_rows()]).collect();
        let mut inserted_tags: Vec<Vec<i8>> = self.inserted.iter().map(|b| vec![INSERT; b.num_rows()]).collect();
        if lineage && key.is_none() {
            pair_by_row_id(&self.deleted, &self.inserted, &mut deleted_tags, &mut inserted_tags);
        }
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
        // (the lineage columns were read to pair rows by: the changelog's rows are the table's,
        // and `_row_id` when it is kept)
        let table_columns = |b: &RecordBatch| match row_ids {
            RowIds::None => Ok(b.clone()),
            RowIds::Paired => b.project(&(0..b.num_columns().saturating_sub(2)).collect::<Vec<_>>()),
            RowIds::Kept => b.project(&(0..b.num_columns().saturating_sub(1)).collect::<Vec<_>>()),
        };
        parts
            .filter(|(b, _)| b.num_rows() > 0)
            .map(|(batch, tags)| with_tags(schema, &table_columns(batch)?, change_column(tags), snapshot_id, false))
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
