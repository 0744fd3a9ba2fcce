//! `skade_lookup_stats()`: the lookup counters since the extension was loaded (`lookup::stats`).

use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, UInt64Array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use crate::error::Result;
use crate::lookup::stats;

pub fn schema() -> SchemaRef {
    let fields: Vec<Field> =
        stats::snapshot().into_iter().map(|(name, _)| Field::new(name, DataType::UInt64, false)).collect();
    Arc::new(Schema::new(fields))
}

pub fn rows() -> Result<RecordBatch> {
    let columns: Vec<ArrayRef> =
        stats::snapshot().into_iter().map(|(_, v)| Arc::new(UInt64Array::from(vec![v])) as ArrayRef).collect();
    Ok(RecordBatch::try_new(schema(), columns)?)
}
