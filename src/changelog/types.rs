//! The changelog's columns: the table's, then the change type in Iceberg's vocabulary, the
//! snapshot that made the change, and whether a row belongs to a full reload; and the tagging of
//! table rows with them.

use std::sync::Arc;

use arrow::array::{ArrayRef, AsArray, BooleanArray, DictionaryArray, Int64Array, Int8Array, RecordBatch, StringArray};
use arrow::datatypes::Int8Type;
use arrow::datatypes::{DataType, Field, Schema as ArrowSchema, SchemaRef as ArrowSchemaRef};

use iceberg::spec::{FormatVersion, TableMetadata};

use crate::error::Result;
use crate::read::keys::KeyColumns;
use crate::read::scan::ROW_ID_NAME;

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

/// What a window's feed does with Iceberg v3 row ids (see [`RowIds::of`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum RowIds {
    /// Not read (a v2 table, or one with a key: updates pair by key).
    None,
    /// Read to pair each snapshot's updates by, then dropped.
    Paired,
    /// Paired, and kept as a last table column `_row_id` (for netting by row id; see
    /// [`with_row_id`]).
    Kept,
}

impl RowIds {
    /// Row ids pair the updates of an Iceberg v3 table without a key (`key`: the window's).
    /// `kept`: a netted feed, netted by row id.
    pub fn of(metadata: &TableMetadata, key: Option<&KeyColumns>, kept: bool) -> RowIds {
        match (key.is_none() && metadata.format_version() >= FormatVersion::V3, kept) {
            (false, _) => RowIds::None,
            (true, false) => RowIds::Paired,
            (true, true) => RowIds::Kept,
        }
    }
}

/// A table's Arrow schema with `_row_id` after its columns (see [`RowIds::Kept`]).
pub fn with_row_id(table: &ArrowSchema) -> ArrowSchema {
    let mut fields: Vec<Field> = table.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.push(Field::new(ROW_ID_NAME, DataType::Int64, true));
    ArrowSchema::new_with_metadata(fields, table.metadata().clone())
}
