//! `skade_commit_log(catalog)`: a log-resident catalog's commit log as this process sees it (no
//! row for a plain catalog).

use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use crate::catalog::Catalog;
use crate::error::Result;

pub fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("provider", DataType::Utf8, false),
        Field::new("location", DataType::Utf8, false),
        // the last position folded into the catalog file: a cold open replays only what follows
        Field::new("checkpoint", DataType::Int64, false),
        Field::new("log_start", DataType::Int64, false),
        Field::new("log_end", DataType::Int64, false),
        Field::new("offers_won", DataType::Int64, false),
        Field::new("offers_lost", DataType::Int64, false),
        Field::new("poll_ms", DataType::Int64, false),
        // this process's appends that landed built on another append still in flight
        Field::new("appends_chained", DataType::Int64, false),
    ]))
}

pub fn rows(catalog: &Catalog) -> Result<RecordBatch> {
    let status: Vec<_> = catalog.commit_log_status()?.into_iter().collect();
    let text = |f: fn(&crate::catalog::LogStatus) -> &str| -> ArrayRef {
        Arc::new(status.iter().map(|s| Some(f(s))).collect::<StringArray>())
    };
    let number = |f: fn(&crate::catalog::LogStatus) -> u64| -> ArrayRef {
        Arc::new(status.iter().map(|s| Some(f(s) as i64)).collect::<Int64Array>())
    };
    let columns = vec![
        text(|s| &s.provider),
        text(|s| &s.location),
        number(|s| s.checkpoint),
        number(|s| s.start),
        number(|s| s.end),
        number(|s| s.won),
        number(|s| s.lost),
        number(|s| s.poll_ms),
        number(|s| s.chained),
    ];
    Ok(RecordBatch::try_new(schema(), columns)?)
}
