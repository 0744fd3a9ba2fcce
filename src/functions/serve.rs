//! `skade_serve(lake, port := , host := , token := , client_id := , client_secret := )`,
//! `skade_servers()` and `skade_serve_stop(lake_or_address)`: the Iceberg REST catalog servers of
//! this process (docs/design/rest-catalog.md).

use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray, RecordBatch, StringArray, UInt64Array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use crate::catalog::Transaction;
use crate::error::Result;
use crate::rest::{self, ServeOptions};

pub fn serve_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("address", DataType::Utf8, false),
        Field::new("lake", DataType::Utf8, false),
        Field::new("token_required", DataType::Boolean, false),
    ]))
}

/// Serves the lake `txn` is on, attached as `lake`: one row, the server's address.
pub fn serve(txn: &Transaction, lake: &str, options: &ServeOptions) -> Result<RecordBatch> {
    let server = rest::serve(txn.catalog(), lake, options)?;
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from(vec![server.address])),
        Arc::new(StringArray::from(vec![server.lake])),
        Arc::new(BooleanArray::from(vec![server.token_required])),
    ];
    Ok(RecordBatch::try_new(serve_schema(), columns)?)
}

pub fn servers_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("address", DataType::Utf8, false),
        Field::new("lake", DataType::Utf8, false),
        Field::new("token_required", DataType::Boolean, false),
        Field::new("requests", DataType::UInt64, false),
        Field::new("commits", DataType::UInt64, false),
        Field::new("errors", DataType::UInt64, false),
    ]))
}

pub fn servers() -> Result<RecordBatch> {
    let all = rest::servers();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter_values(all.iter().map(|s| s.address.as_str()))),
        Arc::new(StringArray::from_iter_values(all.iter().map(|s| s.lake.as_str()))),
        Arc::new(BooleanArray::from_iter(all.iter().map(|s| Some(s.token_required)))),
        Arc::new(UInt64Array::from_iter_values(all.iter().map(|s| s.requests))),
        Arc::new(UInt64Array::from_iter_values(all.iter().map(|s| s.commits))),
        Arc::new(UInt64Array::from_iter_values(all.iter().map(|s| s.errors))),
    ];
    Ok(RecordBatch::try_new(servers_schema(), columns)?)
}

pub fn stop_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![Field::new("stopped", DataType::UInt64, false)]))
}

pub fn stop(lake_or_address: &str) -> Result<RecordBatch> {
    let stopped = rest::stop(lake_or_address) as u64;
    Ok(RecordBatch::try_new(stop_schema(), vec![Arc::new(UInt64Array::from(vec![stopped]))])?)
}
