//! `skade_upgrade_table(table, version)`: the table's Iceberg format version raised in place, as
//! its own commit (`Transaction::upgrade_table`); one row says what it did.

use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, StringArray, UInt8Array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use crate::catalog::Transaction;
use crate::error::Result;

pub fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("table_name", DataType::Utf8, false),
        Field::new("format_version_before", DataType::UInt8, false),
        Field::new("format_version", DataType::UInt8, false),
    ]))
}

pub fn run(txn: &Transaction, uuid: &str, version: i64) -> Result<RecordBatch> {
    let table = txn.table_by_uuid(uuid)?;
    // (the upgrade is a commit of its own: rows this transaction staged would then commit
    // onto a v3 table as a v2 writer wrote them)
    if txn.wrote_to_table(uuid)? {
        return Err(crate::error::Error::invalid(format!(
            "cannot upgrade table {} in a transaction that wrote to it: commit the writes first",
            table.shown_name()
        )));
    }
    let own = match txn.database() {
        Some(database) => txn.catalog().begin_as(database),
        None => txn.catalog().begin(),
    };
    let current = own.table_by_uuid(uuid)?;
    let (before, after) = own.upgrade_table(&current.record.schema, &current.record.name, version)?;
    own.commit()?;
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from(vec![table.shown_name()])),
        Arc::new(UInt8Array::from(vec![before])),
        Arc::new(UInt8Array::from(vec![after])),
    ];
    Ok(RecordBatch::try_new(schema(), columns)?)
}
