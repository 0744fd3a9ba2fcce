//! `skade_lineage(catalog [, since_seq])`: the lineage event of every committed transaction
//! after since_seq that changed a table (see `lineage::events`), paged from the commit log.

use std::sync::Arc;

use arrow::array::{
    ArrayRef, Int64Builder, ListBuilder, RecordBatch, StringBuilder, StructBuilder, TimestampMicrosecondBuilder,
    UInt64Builder,
};
use arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef};
use arrow::error::ArrowError;

use super::timestamptz;
use crate::catalog::Catalog;
use crate::error::Result;
use crate::lineage::events::{self, DatasetRef, LineageEvent};

const PAGE: usize = 4096;

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

pub fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("commit_seq", DataType::UInt64, false),
        Field::new("first_commit_seq", DataType::UInt64, false),
        Field::new("committed_at", timestamptz(), false),
        Field::new("actor", DataType::Utf8, false),
        Field::new("operation", DataType::Utf8, false),
        Field::new("inputs", datasets(), false),
        Field::new("outputs", datasets(), false),
    ]))
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

fn batch(events: &[LineageEvent]) -> Result<RecordBatch> {
    let mut seq = UInt64Builder::new();
    let mut first = UInt64Builder::new();
    let mut at = TimestampMicrosecondBuilder::new().with_timezone("UTC");
    let mut actor = StringBuilder::new();
    let mut op = StringBuilder::new();
    let mut inputs = list_builder();
    let mut outputs = list_builder();
    for e in events {
        seq.append_value(e.last_seq);
        first.append_value(e.first_seq);
        at.append_value(e.committed_at_us);
        actor.append_value(&e.actor);
        op.append_value(e.operation.as_str());
        append(&mut inputs, &e.inputs);
        append(&mut outputs, &e.outputs);
    }
    let columns: Vec<ArrayRef> = vec![
        Arc::new(seq.finish()),
        Arc::new(first.finish()),
        Arc::new(at.finish()),
        Arc::new(actor.finish()),
        Arc::new(op.finish()),
        Arc::new(inputs.finish()),
        Arc::new(outputs.finish()),
    ];
    Ok(RecordBatch::try_new(schema(), columns)?)
}

/// Pages through the events after `since`, one read of the log per page.
pub struct Lineage {
    catalog: Catalog,
    next: u64,
    done: bool,
}

impl Lineage {
    pub fn new(catalog: Catalog, since: u64) -> Self {
        Self { catalog, next: since, done: false }
    }

    fn page(&mut self) -> Result<Option<RecordBatch>> {
        loop {
            let (events, read) = events::since(&self.catalog, self.next, PAGE)?;
            let Some(read) = read else {
                return Ok(None);
            };
            self.next = read;
            // (a page of commits that made no event, schema DDL or maintenance, moves on)
            if !events.is_empty() {
                return Ok(Some(batch(&events)?));
            }
        }
    }
}

impl Iterator for Lineage {
    type Item = std::result::Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.page() {
            Ok(Some(b)) => Some(Ok(b)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(ArrowError::ExternalError(Box::new(e))))
            }
        }
    }
}

impl arrow::array::RecordBatchReader for Lineage {
    fn schema(&self) -> SchemaRef {
        schema()
    }
}
