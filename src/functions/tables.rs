//! `skade_tables(catalog)`: every table the transaction sees.

use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Builder, RecordBatch, StringBuilder};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use crate::catalog::Transaction;
use crate::error::Result;

pub fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("schema_name", DataType::Utf8, false),
        Field::new("table_name", DataType::Utf8, false),
        Field::new("kind", DataType::Utf8, false),
        Field::new("current_snapshot_id", DataType::Int64, true),
        Field::new("metadata_location", DataType::Utf8, false),
    ]))
}

pub fn rows(txn: &Transaction) -> Result<RecordBatch> {
    let mut schema_name = StringBuilder::new();
    let mut table_name = StringBuilder::new();
    let mut kind = StringBuilder::new();
    let mut snapshot = Int64Builder::new();
    let mut location = StringBuilder::new();
    for s in txn.schemas()? {
        for t in txn.tables(&s.name)? {
            let Some(info) = txn.table(&t.schema, &t.name)? else {
                continue;
            };
            schema_name.append_value(&t.schema);
            table_name.append_value(&t.name);
            let has_key = info.metadata.current_schema().identifier_field_ids().len() > 0;
            kind.append_value(if has_key { "primary_key" } else { "log" });
            snapshot.append_option(info.metadata.current_snapshot_id());
            location.append_value(&t.metadata_location);
        }
    }
    let columns: Vec<ArrayRef> = vec![
        Arc::new(schema_name.finish()),
        Arc::new(table_name.finish()),
        Arc::new(kind.finish()),
        Arc::new(snapshot.finish()),
        Arc::new(location.finish()),
    ];
    Ok(RecordBatch::try_new(schema(), columns)?)
}
