//! `skade_expire_snapshots(table, older_than := ts, retain_last := n)`: drops old snapshots (and
//! the files only they used) as its own commit; one row says what it did.

use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, UInt64Array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use crate::catalog::maintenance::ExpireReport;
use crate::catalog::Transaction;
use crate::error::{Error, Result};
use crate::format::expire::Retention;

pub fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("expired_snapshots", DataType::UInt64, false),
        Field::new("removed_files", DataType::UInt64, false),
        Field::new("kept_for_consumers", DataType::UInt64, false),
    ]))
}

/// `older_than_us`: microseconds since the epoch, or None; `retain_last`: None or >= 1.
pub fn run(txn: &Transaction, uuid: &str, older_than_us: Option<i64>, retain_last: Option<i64>) -> Result<RecordBatch> {
    if older_than_us.is_none() && retain_last.is_none() {
        return Err(Error::invalid(
            "skade_expire_snapshots needs older_than := <timestamp> or retain_last := <count> (or both)",
        ));
    }
    if let Some(n) = retain_last.filter(|n| *n < 1) {
        return Err(Error::invalid(format!("skade_expire_snapshots: retain_last must be at least 1, got {n}")));
    }
    let table = txn.table_by_uuid(uuid)?;
    let retention = Retention {
        older_than_ms: older_than_us.map(|us| us.div_euclid(1000)),
        retain_last: retain_last.map(|n| n as usize),
    };
    let ExpireReport { expired_snapshots, removed_files, kept_for_consumers } =
        txn.catalog().expire_snapshots_as(txn.database(), &table.record.schema, &table.record.name, retention)?;
    let columns: Vec<ArrayRef> = vec![
        Arc::new(UInt64Array::from(vec![expired_snapshots])),
        Arc::new(UInt64Array::from(vec![removed_files])),
        Arc::new(UInt64Array::from(vec![kept_for_consumers])),
    ];
    Ok(RecordBatch::try_new(schema(), columns)?)
}
