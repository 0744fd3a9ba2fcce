//! `skade_compact(table)`: rewrites a table's live rows into new files, deletes applied, as its
//! own `replace` commit (see `Catalog::compact`); one row says what it did.

use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, UInt64Array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use crate::catalog::maintenance::CompactReport;
use crate::catalog::Transaction;
use crate::error::Result;

pub fn schema() -> SchemaRef {
    let column = |name: &str| Field::new(name, DataType::UInt64, false);
    Arc::new(Schema::new(vec![
        column("removed_data_files"),
        column("removed_delete_files"),
        column("added_data_files"),
        column("rows"),
    ]))
}

pub fn run(txn: &Transaction, uuid: &str) -> Result<RecordBatch> {
    let table = txn.table_by_uuid(uuid)?;
    let report = txn.catalog().compact_as(txn.database(), &table.record.schema, &table.record.name)?;
    let CompactReport { removed_data_files, removed_delete_files, added_data_files, rows } = report;
    let columns: Vec<ArrayRef> = [removed_data_files, removed_delete_files, added_data_files, rows]
        .into_iter()
        .map(|v| Arc::new(UInt64Array::from(vec![v])) as ArrayRef)
        .collect();
    Ok(RecordBatch::try_new(schema(), columns)?)
}
