//! Lineage events as Arrow rows: what `skade_lineage` lists and the history table holds.

use std::sync::Arc;

use arrow::array::{
    ArrayRef, Int64Array, Int64Builder, ListBuilder, RecordBatch, StringBuilder, StructBuilder,
    TimestampMicrosecondBuilder, UInt64Array,
};
use arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef, TimeUnit};

use super::events::{DatasetRef, LineageEvent};
use crate::error::Result;

fn dataset_fields() -> Fields {
    Fields::from(vec![
        Field::new("namespace", DataType::Utf8, false),
        Field::new("name", DataType::Utf8, false),
        Field::new("table_name", DataType::Utf8, true),
        Field::new("snapshot_id", DataType::Int64, true),
    ])
}

fn datasets() -> DataType {
    DataType::List(Arc::new(Field::new("item", DataType::Struct(dataset_fields()), true)))
}

/// How the rows' commit_seq columns are typed: UBIGINT in a table function (as in
/// `skade_commits_since`), BIGINT in the history table (Iceberg has no unsigned integers).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum SeqType {
    Unsigned,
    Signed,
}

/// The columns of an event row; the history table adds its RunEvent (`openlineage`).
pub fn schema(seq: SeqType, openlineage: bool) -> SchemaRef {
    let seq_type = match seq {
        SeqType::Unsigned => DataType::UInt64,
        SeqType::Signed => DataType::Int64,
    };
    let mut fields = vec![
        Field::new("commit_seq", seq_type.clone(), false),
        Field::new("first_commit_seq", seq_type, false),
        Field::new("committed_at", DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())), false),
        Field::new("actor", DataType::Utf8, false),
        Field::new("operation", DataType::Utf8, false),
        Field::new("inputs", datasets(), false),
        Field::new("outputs", datasets(), false),
    ];
    if openlineage {
        fields.push(Field::new("openlineage", DataType::Utf8, false));
    }
    Arc::new(Schema::new(fields))
}

fn list_builder() -> ListBuilder<StructBuilder> {
    ListBuilder::new(StructBuilder::from_fields(dataset_fields(), 0)).with_field(Arc::new(Field::new(
        "item",
        DataType::Struct(dataset_fields()),
        true,
    )))
}

fn append(list: &mut ListBuilder<StructBuilder>, sets: &[DatasetRef]) {
    let s = list.values();
    for d in sets {
        if let Some(b) = s.field_builder::<StringBuilder>(0) {
            b.append_value(&d.namespace);
        }
        if let Some(b) = s.field_builder::<StringBuilder>(1) {
            b.append_value(&d.name);
        }
        if let Some(b) = s.field_builder::<StringBuilder>(2) {
            b.append_option(d.table.as_deref());
        }
        if let Some(b) = s.field_builder::<Int64Builder>(3) {
            b.append_option(d.snapshot_id);
        }
        s.append(true);
    }
    list.append(true);
}

/// The rows of `events`; with `openlineage`, each event's RunEvent JSON as the last column.
pub fn batch(events: &[LineageEvent], seq: SeqType, openlineage: Option<&[String]>) -> Result<RecordBatch> {
    let seq_column = |values: Vec<u64>| -> ArrayRef {
        match seq {
            SeqType::Unsigned => Arc::new(UInt64Array::from(values)),
            SeqType::Signed => Arc::new(Int64Array::from_iter_values(values.into_iter().map(|v| v as i64))),
        }
    };
    let mut at = TimestampMicrosecondBuilder::new().with_timezone("UTC");
    let mut actor = StringBuilder::new();
    let mut op = StringBuilder::new();
    let mut inputs = list_builder();
    let mut outputs = list_builder();
    for e in events {
        at.append_value(e.committed_at_us);
        actor.append_value(&e.actor);
        op.append_value(e.operation.as_str());
        append(&mut inputs, &e.inputs);
        append(&mut outputs, &e.outputs);
    }
    let mut columns: Vec<ArrayRef> = vec![
        seq_column(events.iter().map(|e| e.last_seq).collect()),
        seq_column(events.iter().map(|e| e.first_seq).collect()),
        Arc::new(at.finish()),
        Arc::new(actor.finish()),
        Arc::new(op.finish()),
        Arc::new(inputs.finish()),
        Arc::new(outputs.finish()),
    ];
    if let Some(json) = openlineage {
        let mut b = StringBuilder::new();
        for j in json {
            b.append_value(j);
        }
        columns.push(Arc::new(b.finish()));
    }
    Ok(RecordBatch::try_new(schema(seq, openlineage.is_some()), columns)?)
}
