//! The changelog's columns: the table's, then the change type in Iceberg's vocabulary, the
//! snapshot that made the change, and whether a row belongs to a full reload; and the tagging of
//! table rows with them.

use std::sync::Arc;

use arrow::array::{ArrayRef, AsArray, BooleanArray, DictionaryArray, Int64Array, Int8Array, RecordBatch, StringArray};
use arrow::datatypes::Int8Type;
use arrow::datatypes::{DataType, Field, Schema as ArrowSchema, SchemaRef as ArrowSchemaRef};

use crate::error::Result;

pub const CHANGE_TYPE: &str = "_change_type";
pub const COMMIT_SNAPSHOT_ID: &str = "_commit_snapshot_id";
/// `_change_type` is dictionary-encoded: these are its keys, into [`CHANGE_TYPES`] (one byte a
/// row to build and compare; DuckDB reads it as a VARCHAR).
pub const INSERT: i8 = 0;
pub const DELETE: i8 = 1;
pub const UPDATE_BEFORE: i8 = 2;
pub const UPDATE_AFTER: i8 = 3;
/// Iceberg's vocabulary, byte for byte.
pub const CHANGE_TYPES: [&str; 4] = ["INSERT", "DELETE", "UPDATE_BEFORE", "UPDATE_AFTER"];

/// A `_change_type` column of the given keys.
pub fn change_column(keys: Vec<i8>) -> ArrayRef {
    let values: ArrayRef = Arc::new(StringArray::from(CHANGE_TYPES.to_vec()));
    Arc::new(DictionaryArray::<Int8Type>::new(Int8Array::from(keys), values))
}

/// The keys of a `_change_type` column (see [`change_column`]).
pub fn change_keys(column: &ArrayRef) -> &[i8] {
    column.as_dictionary::<Int8Type>().keys().values()
}
/// A virtual column: true on the rows of a full reload (see `decode::full_reload`).
pub const FULL_RELOAD: &str = "_full_reload";

/// The table's columns (all nullable: a changelog row is an image) plus the change type, the
/// snapshot that made the change, and whether the row is part of a full reload.
pub fn changelog_schema(table: &ArrowSchema) -> ArrowSchemaRef {
    let mut fields: Vec<Field> = table.fields().iter().map(|f| f.as_ref().clone().with_nullable(true)).collect();
    let change_type = DataType::Dictionary(Box::new(DataType::Int8), Box::new(DataType::Utf8));
    fields.push(Field::new(CHANGE_TYPE, change_type, false));
    fields.push(Field::new(COMMIT_SNAPSHOT_ID, DataType::Int64, false));
    fields.push(Field::new(FULL_RELOAD, DataType::Boolean, false));
    Arc::new(ArrowSchema::new(fields))
}

/// Rows all tagged with one change of `snapshot_id`.
pub fn tag(
    schema: &ArrowSchemaRef,
    batches: Vec<RecordBatch>,
    change: i8,
    snapshot_id: i64,
    reload: bool,
) -> Result<Vec<RecordBatch>> {
    batches
        .iter()
        .map(|b| with_tags(schema, b, change_column(vec![change; b.num_rows()]), snapshot_id, reload))
        .collect()
}

/// A batch of table rows with the change columns appended.
pub fn with_tags(
    schema: &ArrowSchemaRef,
    batch: &RecordBatch,
    tags: ArrayRef,
    snapshot_id: i64,
    reload: bool,
) -> Result<RecordBatch> {
    let mut columns = batch.columns().to_vec();
    columns.push(tags);
    columns.push(Arc::new(Int64Array::from(vec![snapshot_id; batch.num_rows()])));
    columns.push(Arc::new(BooleanArray::from(vec![reload; batch.num_rows()])));
    Ok(RecordBatch::try_new(schema.clone(), columns)?)
}
