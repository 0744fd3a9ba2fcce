//! `skade_changelog(table, from_snapshot [, to_snapshot] [, collapse := bool])`: the rows each
//! snapshot of the window inserted, deleted or updated (see `table::changelog`), or their net
//! effect (`table::collapse`).

use arrow::array::{RecordBatch, RecordBatchIterator};
use arrow::datatypes::SchemaRef;

use crate::catalog::{TableInfo, Transaction};
use crate::error::Result;
use crate::table::changelog::{changelog, changelog_schema, window};
use crate::table::collapse;
use crate::table::keys::KeyColumns;
use crate::table::schema::arrow_schema;

pub fn schema(table: &TableInfo) -> Result<SchemaRef> {
    Ok(changelog_schema(arrow_schema(table.metadata.current_schema())?.as_ref()))
}

pub fn rows(
    txn: &Transaction,
    table: &TableInfo,
    from: Option<i64>,
    to: Option<i64>,
    collapse: bool,
) -> Result<RecordBatchIterator<std::vec::IntoIter<std::result::Result<RecordBatch, arrow::error::ArrowError>>>> {
    let name = table.record.qualified_name();
    let snapshots = window(&table.metadata, &name, from, to)?;
    let caches = txn.catalog().read_caches();
    let mut batches = changelog(&table.metadata, &caches, &name, &snapshots)?;
    if collapse {
        let key = KeyColumns::of(table.metadata.current_schema())?;
        batches = collapse::collapse(&schema(table)?, &batches, key.as_ref())?;
    }
    let batches: Vec<_> = batches.into_iter().map(Ok).collect();
    Ok(RecordBatchIterator::new(batches.into_iter(), schema(table)?))
}
