//! `skade_changelog(table, from_snapshot [, to_snapshot] [, collapse := bool])`: the rows each
//! snapshot of the window inserted, deleted or updated, or their net effect (see
//! `changelog::window`).

use arrow::array::{RecordBatch, RecordBatchIterator};
use arrow::datatypes::SchemaRef;

use crate::catalog::{TableInfo, Transaction};
use crate::changelog::types::changelog_schema;
pub use crate::changelog::window::{Bound, Request};
use crate::error::Result;
use crate::format::schema::arrow_schema;

pub fn schema(table: &TableInfo) -> Result<SchemaRef> {
    Ok(changelog_schema(arrow_schema(table.metadata.current_schema())?.as_ref()))
}

pub fn rows(
    txn: &Transaction,
    table: &TableInfo,
    request: Request<'_>,
) -> Result<RecordBatchIterator<std::vec::IntoIter<std::result::Result<RecordBatch, arrow::error::ArrowError>>>> {
    txn.note_read(table)?;
    let caches = txn.catalog().read_caches();
    let batches = crate::changelog::window::rows(&table.metadata, &caches, &table.record.qualified_name(), request)?;
    let batches: Vec<_> = batches.into_iter().map(Ok).collect();
    Ok(RecordBatchIterator::new(batches.into_iter(), schema(table)?))
}
