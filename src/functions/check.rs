//! `skade_check(catalog)`: what `Catalog::check` found, one row per part of the catalog.

use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use crate::catalog::Catalog;
use crate::error::Result;

pub fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("part", DataType::Utf8, false),
        Field::new("status", DataType::Utf8, false),
        Field::new("problem", DataType::Utf8, true),
    ]))
}

pub fn rows(catalog: &Catalog) -> Result<RecordBatch> {
    let findings = catalog.check()?;
    let part: StringArray = findings.iter().map(|f| Some(f.part.as_str())).collect();
    let status: StringArray =
        findings.iter().map(|f| Some(if f.problem.is_some() { "damaged" } else { "ok" })).collect();
    let problem: StringArray = findings.iter().map(|f| f.problem.as_deref()).collect();
    let columns: Vec<ArrayRef> = vec![Arc::new(part), Arc::new(status), Arc::new(problem)];
    Ok(RecordBatch::try_new(schema(), columns)?)
}
