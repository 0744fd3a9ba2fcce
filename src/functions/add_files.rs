//! `skade_add_files(table, files)`: adopts Parquet files a user already has into a table where
//! they lie (see `Transaction::add_files`), in the calling transaction: they commit with it, as
//! one `append`. The files are the commit's lineage inputs. One row says what was staged.

use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, UInt64Array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use crate::catalog::{AddedFiles, Transaction};
use crate::error::Result;
use crate::lineage::inputs;

pub fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("added_data_files", DataType::UInt64, false),
        Field::new("rows", DataType::UInt64, false),
    ]))
}

/// `paths`: the files, globs already expanded (the shim expands them with DuckDB's file system).
pub fn run(txn: &Transaction, uuid: &str, paths: &[String]) -> Result<RecordBatch> {
    let (adopted, AddedFiles { files, rows }) = txn.add_files(uuid, paths)?;
    for path in &adopted {
        txn.note_input(inputs::file(path))?;
    }
    let columns: Vec<ArrayRef> =
        vec![Arc::new(UInt64Array::from(vec![files])), Arc::new(UInt64Array::from(vec![rows]))];
    Ok(RecordBatch::try_new(schema(), columns)?)
}
