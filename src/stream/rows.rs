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
use crate::catalog::Catalog;
use crate::changelog::types::{changelog_schema, CHANGE_TYPE, COMMIT_SNAPSHOT_ID, FULL_RELOAD};
use crate::changelog::window::{self, Bound, Request};
use crate::error::{Error, Result};
use crate::format::schema::arrow_schema;

pub const TABLE: &str = "_table";
pub const COMMIT_SEQ: &str = "_commit_seq";
pub const COMMIT_ORDINAL: &str = "_commit_ordinal";
/// The columns a consumer adds to its tables' own (a table column of one of these names would be
/// mistaken for it).
const RESERVED: [&str; 6] = [CHANGE_TYPE, COMMIT_SNAPSHOT_ID, TABLE, COMMIT_SEQ, COMMIT_ORDINAL, FULL_RELOAD];

/// The metadata a consumer reads a table with: the table's current one, or, for a table dropped
/// since, the one of its last commit.
fn table_metadata(catalog: &Catalog, table: &ConsumedTable) -> Result<Arc<TableMetadata>> {
    if let Some(record) = catalog.state().table_by_uuid(&table.uuid) {
        return catalog.metadata_at(&record.metadata_location);
    }
    match catalog.last_commit_of(&table.uuid)?.and_then(|c| c.metadata_location) {
        Some(location) => catalog.metadata_at(&location),
        None => Err(Error::catalog(format!("table {} of a consumer no longer exists", table.qualified_name()))),
    }
}

/// The columns of a consumer's rows: its tables' columns (by name, in the order first seen),
/// `_change_type`, `_commit_snapshot_id`, `_table`, `_commit_seq`, `_commit_ordinal`, and last
/// `_full_reload`.
pub fn schema(catalog: &Catalog, consumer: &ConsumerRecord) -> Result<SchemaRef> {
    let mut columns: Vec<Field> = vec![];
    let mut tags: Vec<Field> = vec![];
    for table in &consumer.tables {
        let metadata = table_metadata(catalog, table)?;
        let own = arrow_schema(metadata.current_schema())?;
        if let Some(f) = own.fields().iter().find(|f| RESERVED.contains(&f.name().as_str())) {
            return Err(Error::invalid(format!(
                "consumer \"{}\": table {} has a column named {}, which a consumer's rows use for their own \
                 value; a consumer cannot follow it (its changes are still in skade_changelog)",
                consumer.name,
                table.qualified_name(),
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
                        "consumer \"{}\": column {} of table {} is {}, but {} in another of its tables; a consumer \
                         of several tables needs the columns they share to have one type",
                        consumer.name,
                        field.name(),
                        table.qualified_name(),
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
    columns.push(Field::new(TABLE, DataType::Utf8, false));
    columns.push(Field::new(COMMIT_SEQ, DataType::UInt64, false));
    columns.push(Field::new(COMMIT_ORDINAL, DataType::UInt64, false));
    columns.extend(reload);
    Ok(Arc::new(Schema::new(columns)))
}

/// The rows of `pending`, in `schema` (see [`schema`]); columns of it not in `used` may be NULL
/// (empty: every column is read).
pub fn rows(catalog: &Catalog, pending: &Pending, schema: &SchemaRef, used: &[usize]) -> Result<Vec<RecordBatch>> {
    let consumer = &pending.consumer;
    // Per table, its commits with a snapshot (DDL and expiry change no row), in order.
    let mut by_table: BTreeMap<&str, Vec<&crate::catalog::store::CommitRecord>> = BTreeMap::new();
    for commit in pending.commits.iter().filter(|c| c.snapshot_id.is_some()) {
        by_table.entry(commit.table_uuid.as_deref().unwrap_or_default()).or_default().push(commit);
    }
    let mut parts: Vec<Part> = vec![];
    let mut names: Vec<String> = vec![];
    for (uuid, commits) in by_table {
        let table =
            consumer.tables.iter().find(|t| t.uuid == uuid).ok_or_else(|| Error::internal("a foreign commit"))?;
        let last = commits.last().ok_or_else(|| Error::internal("no commit"))?;
        let location = last.metadata_location.as_deref().ok_or_else(|| Error::internal("a commit without metadata"))?;
        let metadata = catalog.metadata_at(location)?;
        // What expiry left is in the table's newest metadata, not in the pending commit's (which
        // still lists every snapshot it had): a snapshot gone from the newest is a gap, even
        // where the older metadata could still be read.
        let newest = table_metadata(catalog, table)?;
        let present = |id: i64| metadata.snapshot_by_id(id).is_some() && newest.snapshot_by_id(id).is_some();
        let name = table.qualified_name();
        // The window: from the parent of the first snapshot to the last one.
        let first = commits[0];
        let first_id = first.snapshot_id.unwrap_or_default();
        for c in &commits {
            let id = c.snapshot_id.unwrap_or_default();
            if !present(id) {
                return Err(expired(consumer, &name, c, id));
            }
        }
        let first_snapshot =
            metadata.snapshot_by_id(first_id).ok_or_else(|| expired(consumer, &name, first, first_id))?;
        let from = match first_snapshot.parent_snapshot_id() {
            Some(parent) if !present(parent) => {
                return Err(expired(consumer, &name, first, parent));
            }
            parent => parent,
        };
        let table_used = table_columns(&metadata, schema, used);
        let request = Request {
            from: from.map(Bound::Snapshot),
            to: Some(Bound::Snapshot(last.snapshot_id.unwrap_or_default())),
            used: &table_used,
            ..Request::default()
        };
        let batches = window::rows(&metadata, &catalog.read_caches(), &name, request)?;
        let seq_of: BTreeMap<i64, u64> = commits.iter().map(|c| (c.snapshot_id.unwrap_or_default(), c.seq)).collect();
        for batch in batches {
            for (snapshot, part) in split_by_snapshot(&batch)? {
                let seq = *seq_of.get(&snapshot).ok_or_else(|| {
                    Error::internal(format!("changelog row of snapshot {snapshot}, not among the consumer's commits"))
                })?;
                parts.push(Part { seq, table: names.len(), rows: part });
            }
        }
        names.push(name);
    }
    // Commits in order, each one's rows in changelog order (a stable sort).
    parts.sort_by_key(|p| p.seq);
    let constants = Constants::for_parts(&parts, &names);
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
fn table_columns(metadata: &TableMetadata, schema: &SchemaRef, used: &[usize]) -> Vec<usize> {
    if used.is_empty() {
        return vec![];
    }
    let fields = metadata.current_schema().as_struct().fields();
    let mut columns: Vec<usize> = used
        .iter()
        .filter_map(|&i| schema.fields().get(i))
        .filter_map(|f| fields.iter().position(|t| t.name == *f.name()))
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
/// table's name over half a million rows is most of what a read adds to the changelog's).
struct Constants {
    /// Per table, its name repeated.
    names: Vec<ArrayRef>,
    /// Per commit_seq, the commit_seq repeated.
    seqs: HashMap<u64, ArrayRef>,
    /// 1, 2, ... as far as the largest commit's rows go: a part's ordinals are a slice of it.
    ordinals: ArrayRef,
}

impl Constants {
    fn for_parts(parts: &[Part], names: &[String]) -> Constants {
        let mut table_rows = vec![0; names.len()];
        let mut seq_rows: HashMap<u64, (usize, u64)> = HashMap::new(); // (largest part, all rows)
        for p in parts {
            let n = p.rows.num_rows();
            table_rows[p.table] = table_rows[p.table].max(n);
            let e = seq_rows.entry(p.seq).or_default();
            e.0 = e.0.max(n);
            e.1 += n as u64;
        }
        let most = seq_rows.values().map(|e| e.1).max().unwrap_or(0);
        Constants {
            names: names
                .iter()
                .zip(table_rows)
                .map(|(name, n)| Arc::new(StringArray::new_repeated(name, n)) as ArrayRef)
                .collect(),
            seqs: seq_rows
                .into_iter()
                .map(|(seq, (n, _))| (seq, Arc::new(UInt64Array::from_value(seq, n)) as ArrayRef))
                .collect(),
            ordinals: Arc::new(UInt64Array::from_iter_values(1..=most)),
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
    let mut parts = vec![];
    let mut start = 0;
    for i in 1..=ids.len() {
        if i == ids.len() || ids.value(i) != ids.value(start) {
            parts.push((ids.value(start), batch.slice(start, i - start)));
            start = i;
        }
    }
    Ok(parts)
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
