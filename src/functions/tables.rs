//! `skade_tables(catalog)`: every table the transaction sees, with its partitioning (the current
//! partition spec as SET PARTITIONED BY would write it; NULL: unpartitioned) and its sort order
//! (the default order as SET SORTED BY would write it, directions and NULL orders spelled out;
//! NULL: unsorted).

use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Builder, RecordBatch, StringBuilder};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use crate::catalog::Transaction;
use crate::error::Result;
use crate::format::partition::describe;
use crate::format::sort_order;

pub fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("schema_name", DataType::Utf8, false),
        Field::new("table_name", DataType::Utf8, false),
        Field::new("kind", DataType::Utf8, false),
        Field::new("current_snapshot_id", DataType::Int64, true),
        Field::new("metadata_location", DataType::Utf8, false),
        Field::new("partitioned_by", DataType::Utf8, true),
        Field::new("sorted_by", DataType::Utf8, true),
    ]))
}

pub fn rows(txn: &Transaction) -> Result<RecordBatch> {
    let mut schema_name = StringBuilder::new();
    let mut table_name = StringBuilder::new();
    let mut kind = StringBuilder::new();
    let mut snapshot = Int64Builder::new();
    let mut location = StringBuilder::new();
    let mut partitioned_by = StringBuilder::new();
    let mut sorted_by = StringBuilder::new();
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
            let md = &info.metadata;
            let spec = describe(md.default_partition_spec(), md.current_schema());
            partitioned_by.append_option((!spec.is_empty()).then_some(spec));
            let order = sort_order::describe(md.default_sort_order(), md.current_schema());
            sorted_by.append_option((!order.is_empty()).then_some(order));
        }
    }
    let columns: Vec<ArrayRef> = vec![
        Arc::new(schema_name.finish()),
        Arc::new(table_name.finish()),
        Arc::new(kind.finish()),
        Arc::new(snapshot.finish()),
        Arc::new(location.finish()),
        Arc::new(partitioned_by.finish()),
        Arc::new(sorted_by.finish()),
    ];
    Ok(RecordBatch::try_new(schema(), columns)?)
}
