//! `skade_changelog(table, from_snapshot [, to_snapshot] [, collapse := bool])`: the rows each
//! snapshot of the window inserted, deleted or updated, or their net effect (see
//! `changelog::window`).

use arrow::array::{RecordBatch, RecordBatchIterator};
use arrow::datatypes::SchemaRef;

use crate::catalog::{TableInfo, Transaction};
use crate::changelog::types::changelog_schema;
pub use crate::changelog::window::{Bound, Request};
use crate::error::Result;
use crate::format::duckdb_types::Facing;
use crate::format::schema::arrow_schema;

/// The changelog's columns as DuckDB sees them (the table's kept DuckDB types).
pub fn schema(table: &TableInfo) -> Result<SchemaRef> {
    let stored = changelog_schema(arrow_schema(table.metadata.current_schema())?.as_ref());
    Ok(Facing::of(&table.metadata)?.schema(&stored))
}

pub fn rows(
    txn: &Transaction,
    table: &TableInfo,
    request: Request<'_>,
) -> Result<RecordBatchIterator<std::vec::IntoIter<std::result::Result<RecordBatch, arrow::error::ArrowError>>>> {
    txn.note_read(table)?;
    let caches = txn.catalog().read_caches();
    let batches = crate::changelog::window::rows(&table.metadata, &caches, &table.shown_name(), request)?;
    let (facing, schema) = (Facing::of(&table.metadata)?, schema(table)?);
    let batches: Vec<_> = batches.into_iter().map(|b| facing.batch(b, &schema)).collect::<Result<Vec<_>>>()?;
    let batches: Vec<_> = batches.into_iter().map(Ok).collect();
    Ok(RecordBatchIterator::new(batches.into_iter(), schema))
}
