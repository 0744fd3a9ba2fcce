//! The rows of a consumer's pending commits: each commit's changelog (full images, as
//! `skade_changelog` gives them), commits in commit_seq order and each one whole, in one set of
//! columns for all of the consumer's tables (their columns by name, NULL where a table has none),
//! with the table, the commit_seq and an ordinal within the commit.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use arrow::array::{new_null_array, ArrayRef, RecordBatch, StringArray, UInt64Array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use iceberg::spec::TableMetadata;

use super::pending::{expired, Pending};
use crate::catalog::consumers::{ConsumedTable, ConsumerRecord};
use crate::catalog::names;
use crate::catalog::store::CommitRecord;
use crate::catalog::Catalog;
use crate::changelog::types::{changelog_schema, CHANGE_TYPE, COMMIT_SNAPSHOT_ID, FULL_RELOAD};
use crate::changelog::window::{self, Bound, Request};
use crate::error::{Error, Result};
use crate::format::duckdb_types::Facing;
use crate::format::schema::{arrow_schema, by_field_id};

pub const TABLE: &str = "_table";
pub const COMMIT_SEQ: &str = "_commit_seq";
pub const COMMIT_ORDINAL: &str = "_commit_ordinal";
/// The columns a consumer adds to its tables' own (a table column of one of these names would be
/// mistaken for it).
const RESERVED: [&str; 6] = [CHANGE_TYPE, COMMIT_SNAPSHOT_ID, TABLE, COMMIT_SEQ, COMMIT_ORDINAL, FULL_RELOAD];

/// The metadata a consumer reads a table with: the table's current one, or, for a table dropped
/// since, the one of its last commit.
fn table_metadata(catalog: &Catalog, database: Option<&str>, table: &ConsumedTable) -> Result<Arc<TableMetadata>> {
    if let Some(record) = catalog.state().table_by_uuid(&table.uuid) {
        return catalog.metadata_at(&record.metadata_location);
    }
    match catalog.last_commit_of(&table.uuid)?.and_then(|c| c.metadata_location) {
        Some(location) => catalog.metadata_at(&location),
        None => {
            Err(Error::catalog(format!("table {} of a consumer no longer exists", shown(catalog, database, table))))
        }
    }
}

/// A consumer's table as messages name it, in the attached database `database` (see
/// [`names::table_shown`]): by its name now (renamed since: the new one), the recorded one for a
/// table gone.
fn shown(catalog: &Catalog, database: Option<&str>, table: &ConsumedTable) -> String {
    match catalog.state().table_by_uuid(&table.uuid) {
        Some(now) => names::table_shown(database, &now.schema, &now.name),
        None => names::table_shown(database, &table.schema, &table.name),
    }
}

/// The columns of a consumer's rows: its tables' columns (by name, in the order first seen),
/// `_change_type`, `_commit_snapshot_id`, `_table`, `_commit_seq`, `_commit_ordinal`, and last
/// `_full_reload`. `database`: the name the catalog is attached under, for messages.
pub fn schema(catalog: &Catalog, database: Option<&str>, consumer: &ConsumerRecord) -> Result<SchemaRef> {
    let mut columns: Vec<Field> = vec![];
    let mut tags: Vec<Field> = vec![];
    for table in &consumer.tables {
        let metadata = table_metadata(catalog, database, table)?;
        let own = Facing::of(&metadata)?.schema(&arrow_schema(metadata.current_schema())?);
        if let Some(f) = own.fields().iter().find(|f| RESERVED.contains(&f.name().as_str())) {
            return Err(Error::invalid(format!(
                "consumer {}: table {} has a column named {}, which a consumer's rows use for their own \
                 value; a consumer cannot follow it (its changes are still in skade_changelog)",
                names::shown(&consumer.name),
                shown(catalog, database, table),
                f.name()
            )));
        }
        let changelog = changelog_schema(own.as_ref());
        let n = changelog.fields().len();
        for (i, field) in changelog.fields().iter().enumerate() {
            let target = if i + 3 >= n { &mut tags } else { &mut columns };
            match target.iter().find(|f| f.name() == field.name()) {
                Some(f) if f.data_type() != field.data_type() => {
                    return Err(Error::invalid(format!(
                        "consumer {}: column {} of table {} is {}, but {} in another of its tables; a consumer \
                         of several tables needs the columns they share to have one type",
                        names::shown(&consumer.name),
                        field.name(),
                        shown(catalog, database, table),
                        field.data_type(),
                        f.data_type()
                    )))
                }
                Some(_) => {}
                None => target.push(field.as_ref().clone()),
            }
        }
    }
    let reload = tags.pop().filter(|f| f.name() == FULL_RELOAD);
    columns.extend(tags);
    // Nullable: a column the query does not use is all NULL (never seen by the query).
    columns.push(Field::new(TABLE, DataType::Utf8, true));
    columns.push(Field::new(COMMIT_SEQ, DataType::UInt64, true));
    columns.push(Field::new(COMMIT_ORDINAL, DataType::UInt64, true));
    columns.extend(reload);
    Ok(Arc::new(Schema::new(columns)))
}

/// Per table of the consumer, its pending commits that have a snapshot (DDL and expiry change no
/// row), in order.
fn by_table(pending: &Pending) -> BTreeMap<&str, Vec<&CommitRecord>> {
    let mut tables: BTreeMap<&str, Vec<&CommitRecord>> = BTreeMap::new();
    for commit in pending.commits.iter().filter(|c| c.snapshot_id.is_some()) {
        tables.entry(commit.table_uuid.as_deref().unwrap_or_default()).or_default().push(commit);
    }
    tables
}

/// One table's window: the metadata it is read with and the snapshot it starts after (None: the
/// table's creation). An error names the first snapshot the window needs that was expired.
fn window_of(
    catalog: &Catalog,
    database: Option<&str>,
    consumer: &ConsumerRecord,
    table: &ConsumedTable,
    commits: &[&CommitRecord],
) -> Result<(Arc<TableMetadata>, Option<i64>)> {
    let last = commits.last().ok_or_else(|| Error::internal("no commit"))?;
    let location = last.metadata_location.as_deref().ok_or_else(|| Error::internal("a commit without metadata"))?;
    let metadata = catalog.metadata_at(location)?;
    // What expiry left is in the table's newest metadata, not in the pending commit's (which
    // still lists every snapshot it had): a snapshot gone from the newest is a gap, even where
    // the older metadata could still be read.
    let newest = table_metadata(catalog, database, table)?;
    let present = |id: i64| metadata.snapshot_by_id(id).is_some() && newest.snapshot_by_id(id).is_some();
    let gap = |commit: &CommitRecord, id: i64| {
        let earliest = earliest_start(catalog, table, &newest);
        expired(consumer, &shown(catalog, database, table), commit, id, earliest)
    };
    for c in commits {
        let id = c.snapshot_id.unwrap_or_default();
        if !present(id) {
            return Err(gap(c, id));
        }
    }
    // The window: from the parent of the first commit's oldest snapshot to the last one. A
    // commit names its newest snapshot; another engine's commit may add several before it (its
    // overwrite: a delete and an append), which no commit names: the window starts before them.
    let first = commits[0];
    let first_id = first.snapshot_id.unwrap_or_default();
    let mut oldest = metadata.snapshot_by_id(first_id).ok_or_else(|| gap(first, first_id))?;
    loop {
        match oldest.parent_snapshot_id() {
            Some(parent) if !present(parent) => return Err(gap(first, parent)),
            Some(parent) if catalog.commit_seq_of(&table.uuid, parent)?.is_none() => {
                oldest = metadata.snapshot_by_id(parent).ok_or_else(|| gap(first, parent))?;
            }
            parent => return Ok((metadata, parent)),
        }
    }
}

/// Where a consumer of `table` can start now that expiry removed part of its history: its oldest
/// snapshot left, as (snapshot id, commit_seq), if the log has it.
fn earliest_start(catalog: &Catalog, table: &ConsumedTable, newest: &TableMetadata) -> Option<(i64, u64)> {
    let oldest = newest.snapshots().min_by_key(|s| s.sequence_number())?.snapshot_id();
    catalog.commit_seq_of(&table.uuid, oldest).ok().flatten().map(|seq| (oldest, seq))
}

/// The commit a snapshot's rows belong to: the one that names it, else the first whose snapshot
/// is newer (a commit covers every snapshot it added: another engine's commit may add several,
/// as PyIceberg's overwrite adds a delete and an append, and names its newest).
fn commit_of_snapshot<'a>(
    metadata: &'a TableMetadata,
    commits: &'a [&CommitRecord],
) -> impl Fn(i64) -> Option<u64> + 'a {
    let named: BTreeMap<i64, u64> = commits.iter().map(|c| (c.snapshot_id.unwrap_or_default(), c.seq)).collect();
    let by_sequence: Vec<(i64, u64)> = commits
        .iter()
        .filter_map(|c| Some((metadata.snapshot_by_id(c.snapshot_id?)?.sequence_number(), c.seq)))
        .collect();
    move |snapshot| {
        named.get(&snapshot).copied().or_else(|| {
            let sequence = metadata.snapshot_by_id(snapshot)?.sequence_number();
            by_sequence.iter().find(|(s, _)| *s >= sequence).map(|(_, seq)| *seq)
        })
    }
}

/// Whether every pending commit can be read (no snapshot a window needs was expired).
pub fn check(catalog: &Catalog, database: Option<&str>, pending: &Pending) -> Result<()> {
    for (uuid, commits) in by_table(pending) {
        window_of(catalog, database, &pending.consumer, consumed(&pending.consumer, uuid)?, &commits)?;
    }
    Ok(())
}

fn consumed<'a>(consumer: &'a ConsumerRecord, uuid: &str) -> Result<&'a ConsumedTable> {
    consumer.tables.iter().find(|t| t.uuid == uuid).ok_or_else(|| Error::internal("a foreign commit"))
}

/// The rows of `pending`, in `schema` (see [`schema`]); columns of it not in `used` may be NULL
/// (empty: every column is read). `database`: the name the catalog is attached under, for
/// messages.
pub fn rows(
    catalog: &Catalog,
    database: Option<&str>,
    pending: &Pending,
    schema: &SchemaRef,
    used: &[usize],
) -> Result<Vec<RecordBatch>> {
    let consumer = &pending.consumer;
    let mut parts: Vec<Part> = vec![];
    let mut names: Vec<String> = vec![];
    for (uuid, commits) in by_table(pending) {
        let table = consumed(consumer, uuid)?;
        let (metadata, from) = window_of(catalog, database, consumer, table, &commits)?;
        // (the rows' `_table`: the table's name now, by schema and table; messages: as shown)
        let name = catalog.state().name_of(table);
        let last = commits.last().and_then(|c| c.snapshot_id).unwrap_or_default();
        // (the window is read with the metadata of its last commit; the consumer's columns are
        // those of the table's newest schema: matched by field id, never by name)
        let newest = table_metadata(catalog, database, table)?;
        let table_used = table_columns(&metadata, &newest, schema, used);
        let request = Request {
            from: from.map(Bound::Snapshot),
            to: Some(Bound::Snapshot(last)),
            used: &table_used,
            ..Request::default()
        };
        let batches = window::rows(&metadata, &catalog.read_caches(), &shown(catalog, database, table), request)?;
        let target = changelog_schema(arrow_schema(newest.current_schema())?.as_ref());
        let batches =
            batches.iter().map(|b| by_field_id(b, &target, newest.current_schema())).collect::<Result<Vec<_>>>()?;
        // (each table's rows in its columns' kept DuckDB types, as the consumer's schema has them)
        let facing = Facing::of(&newest)?;
        let batches = match facing.is_empty() {
            true => batches,
            false => batches
                .into_iter()
                .map(|b| facing.batch(b.clone(), &facing.schema(&b.schema())))
                .collect::<Result<Vec<_>>>()?,
        };
        let seq_of = commit_of_snapshot(&metadata, &commits);
        for batch in batches {
            for (snapshot, part) in split_by_snapshot(&batch)? {
                let seq = seq_of(snapshot).ok_or_else(|| {
                    Error::internal(format!("changelog row of snapshot {snapshot}, not among the consumer's commits"))
                })?;
                parts.push(Part { seq, table: names.len(), rows: part });
            }
        }
        names.push(name);
    }
    // Commits in order, each one's rows in changelog order (a stable sort).
    parts.sort_by_key(|p| p.seq);
    let constants = Constants::for_parts(&parts, &names, schema, used);
    let mut ordinal = 0u64;
    let mut current = None;
    parts
        .iter()
        .map(|part| {
            if current != Some(part.seq) {
                current = Some(part.seq);
                ordinal = 0;
            }
            let batch = reshape(schema, part, &constants, ordinal)?;
            ordinal += part.rows.num_rows() as u64;
            Ok(batch)
        })
        .collect()
}

/// The table's columns (positions in its schema, as the changelog takes them) that the used
/// columns of the consumer's `schema` name; empty (every column) when nothing is narrowed. A
/// query of the consumer's own columns only (`count(*)`, `_commit_seq`) still reads one of the
/// table's: the changelog's rows are counted on its columns.
fn table_columns(metadata: &TableMetadata, newest: &TableMetadata, schema: &SchemaRef, used: &[usize]) -> Vec<usize> {
    if used.is_empty() {
        return vec![];
    }
    // consumer column (a name of the newest schema) -> field id -> its place in the read schema
    let fields = metadata.current_schema().as_struct().fields();
    let newest = newest.current_schema();
    let mut columns: Vec<usize> = used
        .iter()
        .filter_map(|&i| schema.fields().get(i))
        .filter_map(|f| newest.field_by_name(f.name()))
        .filter_map(|f| fields.iter().position(|t| t.id == f.id))
        .collect();
    columns.sort_unstable();
    columns.dedup();
    if columns.is_empty() {
        columns.push(0);
    }
    columns
}

/// Rows of one commit of one table (of `names[table]`).
struct Part {
    seq: u64,
    table: usize,
    rows: RecordBatch,
}

/// The columns a consumer adds, built once at the size the largest part needs and sliced for
/// each part: a slice costs nothing, a column of each part's own would cost a copy per row (a
/// table's name over half a million rows is most of what a read adds to the changelog's). One the
/// query does not use is all NULL, one array for every part.
struct Constants {
    /// Per table, its name repeated.
    names: Vec<ArrayRef>,
    /// Per commit_seq, the commit_seq repeated.
    seqs: HashMap<u64, ArrayRef>,
    /// 1, 2, ... as far as the largest commit's rows go: a part's ordinals are a slice of it.
    ordinals: ArrayRef,
}

impl Constants {
    /// For `parts` of the tables `names`, in `schema`, of which the query uses `used` (empty: all).
    fn for_parts(parts: &[Part], names: &[String], schema: &SchemaRef, used: &[usize]) -> Constants {
        let wanted = |column: &str| {
            used.is_empty() || used.iter().any(|&i| schema.fields().get(i).is_some_and(|f| f.name() == column))
        };
        let mut table_rows = vec![0; names.len()];
        let mut seq_rows: HashMap<u64, (usize, u64)> = HashMap::new(); // (largest part, all rows)
        let mut largest = 0;
        for p in parts {
            let n = p.rows.num_rows();
            largest = largest.max(n);
            table_rows[p.table] = table_rows[p.table].max(n);
            let e = seq_rows.entry(p.seq).or_default();
            e.0 = e.0.max(n);
            e.1 += n as u64;
        }
        let most = seq_rows.values().map(|e| e.1).max().unwrap_or(0);
        let null_names = new_null_array(&DataType::Utf8, largest);
        let null_seqs = new_null_array(&DataType::UInt64, largest.max(most as usize));
        Constants {
            names: names
                .iter()
                .zip(table_rows)
                .map(|(name, n)| match wanted(TABLE) {
                    true => Arc::new(StringArray::new_repeated(name, n)) as ArrayRef,
                    false => null_names.clone(),
                })
                .collect(),
            seqs: seq_rows
                .into_iter()
                .map(|(seq, (n, _))| match wanted(COMMIT_SEQ) {
                    true => (seq, Arc::new(UInt64Array::from_value(seq, n)) as ArrayRef),
                    false => (seq, null_seqs.clone()),
                })
                .collect(),
            ordinals: match wanted(COMMIT_ORDINAL) {
                true => Arc::new(UInt64Array::from_iter_values(1..=most)),
                false => null_seqs,
            },
        }
    }
}

/// A changelog batch cut where its `_commit_snapshot_id` changes (a snapshot's rows are
/// contiguous).
fn split_by_snapshot(batch: &RecordBatch) -> Result<Vec<(i64, RecordBatch)>> {
    let ids = batch
        .column_by_name(COMMIT_SNAPSHOT_ID)
        .and_then(|c| c.as_any().downcast_ref::<arrow::array::Int64Array>())
        .ok_or_else(|| Error::internal("a changelog batch without _commit_snapshot_id"))?;
    let values = ids.values();
    let mut parts = vec![];
    let mut start = 0;
    while start < values.len() {
        let id = values[start];
        let len = run_length(&values[start..], id);
        parts.push((id, batch.slice(start, len)));
        start += len;
    }
    Ok(parts)
}

/// How many of `values` are `id` before the first that is not: 64 at a time, compared without a
/// branch per value (the compiler vectorizes it; a row-by-row search cost a fifth of a
/// millisecond per half million rows).
fn run_length(values: &[i64], id: i64) -> usize {
    let mut n = 0;
    for chunk in values.chunks(64) {
        if !chunk.iter().fold(true, |all, &v| all & (v == id)) {
            return n + chunk.iter().position(|&v| v != id).unwrap_or(chunk.len());
        }
        n += chunk.len();
    }
    n
}

/// A part in the consumer's columns, its ordinals counting on from `ordinal`.
fn reshape(schema: &SchemaRef, part: &Part, constants: &Constants, ordinal: u64) -> Result<RecordBatch> {
    let batch = &part.rows;
    let n = batch.num_rows();
    let columns = schema
        .fields()
        .iter()
        .map(|f| -> Result<ArrayRef> {
            Ok(match f.name().as_str() {
                TABLE => constants.names[part.table].slice(0, n),
                COMMIT_SEQ => constants.seqs[&part.seq].slice(0, n),
                COMMIT_ORDINAL => constants.ordinals.slice(ordinal as usize, n),
                name => match batch.column_by_name(name) {
                    Some(c) if c.data_type() == f.data_type() => c.clone(),
                    Some(c) => arrow::compute::cast(c, f.data_type())?,
                    None => new_null_array(f.data_type(), n),
                },
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(RecordBatch::try_new(schema.clone(), columns)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::Int64Array;

    #[test]
    fn a_batch_is_cut_where_its_snapshot_changes_across_chunk_boundaries() {
        let mut ids: Vec<i64> = vec![7; 130];
        ids.extend([8; 64]);
        ids.extend([7; 3]); // not contiguous: a run of its own
        ids.push(9);
        let schema = Arc::new(Schema::new(vec![Field::new(COMMIT_SNAPSHOT_ID, DataType::Int64, false)]));
        let batch = RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(ids))]).unwrap();
        let parts: Vec<(i64, usize)> =
            split_by_snapshot(&batch).unwrap().into_iter().map(|(id, b)| (id, b.num_rows())).collect();
        assert_eq!(parts, vec![(7, 130), (8, 64), (7, 3), (9, 1)]);
        assert_eq!(run_length(&[], 1), 0);
        assert_eq!(run_length(&[1; 128], 1), 128);
    }
}
