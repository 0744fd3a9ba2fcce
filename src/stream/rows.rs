//! The rows of a consumer's pending commits: each commit's changelog (full images, as
//! `skade_changelog` gives them), commits in commit_seq order and each one whole, in one set of
//! columns for all of the consumer's tables (their columns by name, NULL where a table has none),
//! with the table, the commit_seq and an ordinal within the commit.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{new_null_array, ArrayRef, RecordBatch, StringArray, UInt64Array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use iceberg::spec::TableMetadata;

use super::pending::{expired, Pending};
use crate::catalog::consumers::{ConsumedTable, ConsumerRecord};
use crate::catalog::Catalog;
use crate::changelog::types::{changelog_schema, COMMIT_SNAPSHOT_ID, FULL_RELOAD};
use crate::changelog::window::{self, Bound, Request};
use crate::error::{Error, Result};
use crate::format::schema::arrow_schema;

pub const TABLE: &str = "_table";
pub const COMMIT_SEQ: &str = "_commit_seq";
pub const COMMIT_ORDINAL: &str = "_commit_ordinal";

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
        let changelog = changelog_schema(arrow_schema(metadata.current_schema())?.as_ref());
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

/// The rows of `pending`, in `schema` (see [`schema`]).
pub fn rows(catalog: &Catalog, pending: &Pending, schema: &SchemaRef) -> Result<Vec<RecordBatch>> {
    let consumer = &pending.consumer;
    // Per table, its commits with a snapshot (DDL and expiry change no row), in order.
    let mut by_table: BTreeMap<&str, Vec<&crate::catalog::store::CommitRecord>> = BTreeMap::new();
    for commit in pending.commits.iter().filter(|c| c.snapshot_id.is_some()) {
        by_table.entry(commit.table_uuid.as_deref().unwrap_or_default()).or_default().push(commit);
    }
    let mut out: Vec<(u64, RecordBatch)> = vec![];
    for (uuid, commits) in by_table {
        let table =
            consumer.tables.iter().find(|t| t.uuid == uuid).ok_or_else(|| Error::internal("a foreign commit"))?;
        let last = commits.last().ok_or_else(|| Error::internal("no commit"))?;
        let location = last.metadata_location.as_deref().ok_or_else(|| Error::internal("a commit without metadata"))?;
        let metadata = catalog.metadata_at(location)?;
        let name = table.qualified_name();
        // The window: from the parent of the first snapshot to the last one.
        let first = commits[0];
        let first_id = first.snapshot_id.unwrap_or_default();
        let first_snapshot =
            metadata.snapshot_by_id(first_id).ok_or_else(|| expired(consumer, &name, first, first_id))?;
        let from = match first_snapshot.parent_snapshot_id() {
            Some(parent) if metadata.snapshot_by_id(parent).is_none() => {
                return Err(expired(consumer, &name, first, parent));
            }
            parent => parent,
        };
        for c in &commits {
            let id = c.snapshot_id.unwrap_or_default();
            if metadata.snapshot_by_id(id).is_none() {
                return Err(expired(consumer, &name, c, id));
            }
        }
        let request = Request {
            from: from.map(Bound::Snapshot),
            to: Some(Bound::Snapshot(last.snapshot_id.unwrap_or_default())),
            ..Request::default()
        };
        let batches = window::rows(&metadata, &catalog.read_caches(), &name, request)?;
        let seq_of: BTreeMap<i64, u64> = commits.iter().map(|c| (c.snapshot_id.unwrap_or_default(), c.seq)).collect();
        for batch in batches {
            for (snapshot, part) in split_by_snapshot(&batch)? {
                let seq = *seq_of.get(&snapshot).ok_or_else(|| {
                    Error::internal(format!("changelog row of snapshot {snapshot}, not among the consumer's commits"))
                })?;
                out.push((seq, reshape(schema, &part, &name, seq)?));
            }
        }
    }
    // Commits in order, each one's rows in changelog order (a stable sort); ordinals count rows
    // within a commit.
    out.sort_by_key(|(seq, _)| *seq);
    let mut ordinal = 0u64;
    let mut current = None;
    let ordinal_column = schema.index_of(COMMIT_ORDINAL)?;
    out.into_iter()
        .map(|(seq, batch)| {
            if current != Some(seq) {
                current = Some(seq);
                ordinal = 0;
            }
            let n = batch.num_rows() as u64;
            let ordinals: ArrayRef = Arc::new(UInt64Array::from_iter_values(ordinal + 1..=ordinal + n));
            ordinal += n;
            let mut columns = batch.columns().to_vec();
            columns[ordinal_column] = ordinals;
            Ok(RecordBatch::try_new(schema.clone(), columns)?)
        })
        .collect()
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

/// A table's changelog batch in the consumer's columns (ordinals filled in later).
fn reshape(schema: &SchemaRef, batch: &RecordBatch, table: &str, seq: u64) -> Result<RecordBatch> {
    let n = batch.num_rows();
    let columns = schema
        .fields()
        .iter()
        .map(|f| -> Result<ArrayRef> {
            Ok(match f.name().as_str() {
                TABLE => Arc::new(StringArray::from(vec![table; n])),
                COMMIT_SEQ | COMMIT_ORDINAL => Arc::new(UInt64Array::from(vec![seq; n])),
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
