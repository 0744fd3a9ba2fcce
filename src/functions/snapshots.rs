//! `skade_snapshots(table)`: a table's snapshots, oldest first, with the commit that made each.

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, Int64Builder, MapBuilder, RecordBatch, StringBuilder, TimestampMicrosecondBuilder, UInt64Builder,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use super::timestamptz;
use crate::catalog::{Catalog, TableInfo};
use crate::error::Result;

pub fn schema() -> SchemaRef {
    let map = MapBuilder::new(None, StringBuilder::new(), StringBuilder::new()).finish();
    Arc::new(Schema::new(vec![
        Field::new("snapshot_id", DataType::Int64, false),
        Field::new("parent_id", DataType::Int64, true),
        Field::new("sequence_number", DataType::Int64, false),
        Field::new("committed_at", timestamptz(), false),
        Field::new("operation", DataType::Utf8, false),
        Field::new("commit_seq", DataType::UInt64, true),
        Field::new("summary", map.data_type().clone(), false),
    ]))
}

pub fn rows(catalog: &Catalog, table: &TableInfo) -> Result<RecordBatch> {
    let mut snapshots: Vec<_> = table.metadata.snapshots().cloned().collect();
    snapshots.sort_by_key(|s| (s.sequence_number(), s.timestamp_ms()));
    let mut id = Int64Builder::new();
    let mut parent = Int64Builder::new();
    let mut seq = Int64Builder::new();
    let mut at = TimestampMicrosecondBuilder::new().with_timezone("UTC");
    let mut op = StringBuilder::new();
    let mut commit_seq = UInt64Builder::new();
    let mut summary = MapBuilder::new(None, StringBuilder::new(), StringBuilder::new());
    for s in &snapshots {
        id.append_value(s.snapshot_id());
        parent.append_option(s.parent_snapshot_id());
        seq.append_value(s.sequence_number());
        at.append_value(s.timestamp_ms() * 1000);
        op.append_value(s.summary().operation.as_str());
        commit_seq.append_option(catalog.commit_seq_of(&table.record.uuid, s.snapshot_id())?);
        let mut props: Vec<_> = s.summary().additional_properties.iter().collect();
        props.sort();
        for (k, v) in props {
            summary.keys().append_value(k);
            summary.values().append_value(v);
        }
        summary.append(true)?;
    }
    let columns: Vec<ArrayRef> = vec![
        Arc::new(id.finish()),
        Arc::new(parent.finish()),
        Arc::new(seq.finish()),
        Arc::new(at.finish()),
        Arc::new(op.finish()),
        Arc::new(commit_seq.finish()),
        Arc::new(summary.finish()),
    ];
    Ok(RecordBatch::try_new(schema(), columns)?)
}
