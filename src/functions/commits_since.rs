//! `skade_commits_since(catalog, since_seq)`: the durable commit feed, paged from the log.

use std::sync::Arc;

use arrow::array::{
    ArrayRef, Int64Builder, RecordBatch, RecordBatchReader, StringBuilder, TimestampMicrosecondBuilder, UInt64Builder,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::error::ArrowError;

use super::timestamptz;
use crate::catalog::store::CommitRecord;
use crate::catalog::Catalog;
use crate::error::Result;

const PAGE: usize = 8192;

pub fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("commit_seq", DataType::UInt64, false),
        Field::new("committed_at", timestamptz(), false),
        Field::new("table_name", DataType::Utf8, true),
        Field::new("snapshot_id", DataType::Int64, true),
        Field::new("operation", DataType::Utf8, false),
        Field::new("actor", DataType::Utf8, false),
        Field::new("schema_name", DataType::Utf8, false),
    ]))
}

pub(crate) fn batch(records: &[CommitRecord]) -> Result<RecordBatch> {
    let mut seq = UInt64Builder::new();
    let mut at = TimestampMicrosecondBuilder::new().with_timezone("UTC");
    let mut table = StringBuilder::new();
    let mut snapshot = Int64Builder::new();
    let mut op = StringBuilder::new();
    let mut actor = StringBuilder::new();
    let mut schema_name = StringBuilder::new();
    for r in records {
        seq.append_value(r.seq);
        at.append_value(r.committed_at_us);
        table.append_option(r.table.as_deref());
        snapshot.append_option(r.snapshot_id);
        op.append_value(&r.operation);
        actor.append_value(&r.actor);
        schema_name.append_value(&r.schema);
    }
    let columns: Vec<ArrayRef> = vec![
        Arc::new(seq.finish()),
        Arc::new(at.finish()),
        Arc::new(table.finish()),
        Arc::new(snapshot.finish()),
        Arc::new(op.finish()),
        Arc::new(actor.finish()),
        Arc::new(schema_name.finish()),
    ];
    Ok(RecordBatch::try_new(schema(), columns)?)
}

/// Pages through the commit log from `since`, one read transaction per page.
pub struct CommitsSince {
    catalog: Catalog,
    next: u64,
    done: bool,
}

impl CommitsSince {
    pub fn new(catalog: Catalog, since: u64) -> Self {
        Self { catalog, next: since, done: false }
    }
}

impl Iterator for CommitsSince {
    type Item = std::result::Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let page = match self.catalog.commits_since(self.next, PAGE) {
            Ok(p) => p,
            Err(e) => return Some(Err(ArrowError::ExternalError(Box::new(e)))),
        };
        if page.len() < PAGE {
            self.done = true;
        }
        let last = page.last()?.seq;
        self.next = last;
        Some(batch(&page).map_err(|e| ArrowError::ExternalError(Box::new(e))))
    }
}

impl RecordBatchReader for CommitsSince {
    fn schema(&self) -> SchemaRef {
        schema()
    }
}
