//! `skade_changelog(table, from_snapshot [, to_snapshot])`: the rows each snapshot of the window
//! inserted, deleted or updated (see `table::changelog`).

use arrow::array::{RecordBatch, RecordBatchIterator};
use arrow::datatypes::SchemaRef;

use crate::catalog::{TableInfo, Transaction};
use crate::error::Result;
use crate::table::changelog::{changelog, changelog_schema, window};
use crate::table::schema::arrow_schema;

pub fn schema(table: &TableInfo) -> Result<SchemaRef> {
    Ok(changelog_schema(arrow_schema(table.metadata.current_schema())?.as_ref()))
}

pub fn rows(
    txn: &Transaction,
    table: &TableInfo,
    from: Option<i64>,
    to: Option<i64>,
) -> Result<RecordBatchIterator<std::vec::IntoIter<std::result::Result<RecordBatch, arrow::error::ArrowError>>>> {
    let name = table.record.qualified_name();
    let snapshots = window(&table.metadata, &name, from, to)?;
    let caches = txn.catalog().read_caches();
    let batches = changelog(&table.metadata, &caches, &name, &snapshots)?;
    let batches: Vec<_> = batches.into_iter().map(Ok).collect();
    Ok(RecordBatchIterator::new(batches.into_iter(), schema(table)?))
}
